"""Replayed GPU hosts for the acceptance flow, without root or sshd.

Each host answers its probes as a simulated host's shims do (tests/support/hosts/shims/mfshim.py, called here
in-process): nvidia-smi, topo and ibstat print the real captures of the host's profile (with its faults'
edits), fi_info and nccl-tests answer from the host's simulated hardware and the probe's actual
arguments, and a run across nodes lays the job out as mpirun does from the hostfile the probe wrote.
The probes, their framing, the gate and the reports are the production code; only the transport is a
:class:`~metalfleet.bootstrap.replay.ReplayHost`.

Across nodes, a :class:`ReplayFabric` shared by the hosts is the in-process twin of the simulated fleet's world
file: each member's own config (NICs, ``fabric.nic_scale``, ``fabric.flap``, ``nccl.busbw_scale``), the switch
each host sits under, the switches' faults and the flap counters, fed to the same model
(``mfshim.job_net``, ``mfshim.flapped``). Without one, every node of a job is the launcher, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metalfleet.bootstrap.acceptance.baselines import Baseline
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions, multi_node_probe, plan_probes
from metalfleet.bootstrap.inventory import Host, NodeTraits
from metalfleet.bootstrap.replay import ReplayHost, Reply
from metalfleet.testing.hosts.harness import FIXTURES, _initial_state, host_config, mfshim


class ReplayFabric:
    """The fabric between replayed hosts: members by address, their switches, switch faults, flap counters.

    ``switches``: switch name -> fault, e.g. ``{"leaf1": {"scale": 0.5, "min_nodes": 3}}``; a host's switch is
    given to :func:`replayed_host` (default "leaf0")."""

    def __init__(self, switches: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.hosts: dict[str, ProbeAnswers] = {}
        self.switch: dict[str, str] = {}
        self.switches: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (switches or {}).items()}
        #: "address/device" -> jobs that flapping NIC took part in (mfshim.flapped)
        self.counters: dict[str, int] = {}

    def member(self, address: str, launcher: ProbeAnswers) -> dict[str, Any]:
        """The job member at ``address`` as mfshim.job_net reads it (the launcher's hardware if unknown)."""
        answers = self.hosts.get(address, launcher)
        return {**answers.member(), "host": address, "switch": self.switch.get(address, "leaf0")}


class ProbeAnswers:
    """Answers the acceptance probes of one host of fixtures profile ``profile`` with shim config ``extra``."""

    def __init__(self, host: Host, baseline: Baseline, options: AcceptanceOptions, profile: str,
                 extra: Mapping[str, Any], fabric: ReplayFabric | None = None) -> None:
        self.host = host
        self.fabric = fabric
        self.cfg = host_config(profile, extra, fixtures_dir=FIXTURES)
        self.st = _initial_state(self.cfg)
        self.st["packages"]["nvidia-driver-550"] = "550.90.07-0ubuntu1"  # a bootstrapped node
        self.st["modules"].append("nvidia")
        self.efa = (self.cfg.get("fabric") or {}).get("kind") == "efa"
        self.by_argv = {tuple(p.argv): p.name for p in plan_probes(host, baseline, options)}
        self.multi_script = tuple(multi_node_probe([host], baseline, options)[0].argv[:3])
        ibstat = mfshim.fixture("ibstat", self.cfg)
        self.ports = mfshim.ib_ports(ibstat) if ibstat is not None else None

    def member(self) -> dict[str, Any]:
        return {"host": self.host.address, "cfg": self.cfg, "st": self.st, "ports": self.ports,
                "ofi_plugin": self.efa}

    def __call__(self, node: ReplayHost, argv: tuple[str, ...]) -> Reply | None:
        name = self.by_argv.get(argv)
        if name is None and argv[:3] == self.multi_script:
            return self._mpirun(node, argv[4:])
        if name in ("nvidia-smi", "topo", "nvlink", "ibstat"):
            return self._capture(name)
        if name == "fi_info":
            text = mfshim.fi_info_listing(self.cfg) if self.efa else ""
            return Reply(text) if text.strip() else Reply(rc=1, stderr="fi_getinfo: -61 (No data available)\n")
        if name == "all_reduce_perf":
            return self._nccl(list(argv[6:]), {"size": 1, "nodes": [(self.host.address, 1)]}, {})
        return None  # anything else: the replayed host's own answers (not installed: exit 127)

    def _capture(self, probe: str) -> Reply:
        """nvidia-smi -q -x, else -q (the probe's fallback), topo, nvlink -s or ibstat: the profile's capture."""
        if probe == "nvidia-smi":
            key = "nvidia-smi-q-x" if mfshim.fixture("nvidia-smi-q-x", self.cfg) else "nvidia-smi-q"
        else:
            key = {"topo": "topo", "nvlink": "nvlink", "ibstat": "ibstat"}[probe]
        text = mfshim.fixture(key, self.cfg)
        if text is None:
            why = "ibstat: command not found" if probe == "ibstat" else f"no fixture for {key} in this host's profile"
            return Reply(rc=127 if probe == "ibstat" else 1, stderr=why + "\n")
        count = (self.cfg.get("gpu") or {}).get("count")
        if key.startswith("nvidia-smi-q") and count is not None:
            text = mfshim._limit_gpus(text, int(count), xml=key == "nvidia-smi-q-x")
        return Reply(text)

    def _nccl(self, args: list[str], world: dict[str, Any], env: Mapping[str, str]) -> Reply:
        delay = float(self.cfg.get("delays", {}).get("all_reduce_perf", 0) or 0)
        fail = self.cfg.get("fail", {}).get("all_reduce_perf")
        if fail:
            return Reply(rc=1, stderr=fail + "\n", delay=delay)
        fab = self.fabric if len(world["nodes"]) > 1 else None
        counters = fab.counters if fab is not None else {}
        out, err, rc = mfshim.nccl_test_output(
            "all_reduce_perf", args, self.cfg, self.st, {"NCCL_DEBUG": "INFO", **env}, world, ofi_plugin=self.efa,
            ports=self.ports, members=[fab.member(h, self) for h, _n in world["nodes"]] if fab else None,
            switches=fab.switches if fab else None,
            flap=(lambda ms, uses: mfshim.flapped(ms, uses, counters)) if fab else None)
        return Reply(out, rc=rc, stderr=err, delay=delay)

    def _mpirun(self, node: ReplayHost, args: tuple[str, ...]) -> Reply:
        """The multi-node probe's positional parameters: env file, binary, hostfile path and text, mpirun,
        ranks, ranks per node, mpirun arguments, ``--``, all_reduce_perf arguments."""
        _env_file, binary, path, hostfile, _mpirun, np_, per_node, *rest = args
        cut = rest.index("--")
        node.store(path.replace("~", "/root", 1), hostfile.encode())
        line = ["-np", np_, "-N", per_node, "--hostfile", path, "-x", "NCCL_DEBUG=INFO", *rest[:cut], binary]
        plan, problem = mfshim.mpirun_plan(line, {"NCCL_DEBUG": "INFO"}, read_file=lambda _p: hostfile)
        if plan is None:
            return Reply(rc=1, stderr=problem + "\n")
        return self._nccl(list(rest[cut + 1:]), {"size": plan["np"], "nodes": plan["nodes"]}, plan["env"])


def replayed_host(name: str, address: str, offering: str, baseline: Baseline, options: AcceptanceOptions,
                  extra: Mapping[str, Any], profile: str = "p5", *, fabric: ReplayFabric | None = None,
                  switch: str | None = None) -> tuple[Host, ReplayHost]:
    """(the inventory host, the replayed host answering its probes) for a node of ``offering``.

    ``fabric``: the world shared with the other replayed hosts (its runs across nodes then answer from every
    member's hardware); ``switch``: the leaf switch it sits under there (the host's label ``switch``)."""
    host = Host(name=name, address=address, offering=offering, provider=offering.split(".")[0]
                if offering.startswith("fake") else "aws", traits=NodeTraits(),
                labels={"switch": switch} if switch else {})
    answers = ProbeAnswers(host, baseline, options, profile, extra, fabric)
    if fabric is not None:
        fabric.hosts[address] = answers
        fabric.switch[address] = switch or "leaf0"
    node = ReplayHost(name, address, handler=answers)
    return host, node
