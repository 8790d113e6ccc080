"""Accepted nodes into a Slurm partition: their facts, the configs, the daemons, and the gate's verdicts in Slurm.

::

    from metalfleet.bootstrap.scheduler import SlurmSetup, join_slurm

    setup = SlurmSetup(cluster="train", partition="gpu", controller=controller_host, munge_key=key)
    outcome = join_slurm(inventory, acceptance_report, setup)
    print(outcome.summary())            # the partition, its nodes, and what was drained or resumed

1. Each accepted node's CPU layout and memory are read (:class:`~.facts.CpuTopology`, :class:`~.facts.MemoryTotal`)
   and its Slurm definition made from them and the gate's evidence (:func:`.slurm.node_from_acceptance`).
   A node the gate refused gets no definition: it never joins.
2. slurm.conf (the head below, the nodes, the partition), gres.conf, topology.conf and the TaskProlog are
   written to every node and the controller by the fact-gated steps of :mod:`.steps.slurm` (munge, slurmd,
   slurmctld): a second run with the same nodes uploads nothing and restarts nothing.
3. The controller is asked for its nodes, and :func:`.slurm.plan_sync` makes Slurm agree with the gate: a
   quarantined node that is still defined is drained with the gate's reason, a node metalfleet drained and the
   gate now accepts is resumed. :func:`leave_slurm` takes nodes out before their machines are released.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

from .acceptance.results import AcceptanceReport
from .connector import Connect, SshOptions
from .facts import CpuTopology, Fact, FactValues, MemoryTotal, RawCommand
from .inventory import Host, Inventory
from .profiles import Profile
from .progress import ProgressCallback
from .report import Report
from .sessions import FanOut, SessionPool
from .slurm import (
    GateNode,
    NodeResources,
    NodeState,
    SlurmNode,
    create_tokens,
    gres_conf,
    health_check_script,
    node_from_acceptance,
    node_lines,
    parse_nodes,
    partition_line,
    plan_sync,
    task_prolog,
    topology_conf,
)
from .steps.slurm import Munge, SlurmClient, SlurmController, SlurmDynamicNode, SlurmNodeDaemon

__all__ = ["SlurmOutcome", "SlurmSetup", "join_profile", "join_slurm", "leave_joined", "leave_slurm", "slurm_conf",
           "slurm_profile"]

SLURM_CONF = "/etc/slurm/slurm.conf"
#: The node's own short name: slurmd finds its NodeName by it (NodeHostname when it is not the inventory name).
HOSTNAME = RawCommand(("hostname", "-s"))
GRES_CONF = "/etc/slurm/gres.conf"
TOPOLOGY_CONF = "/etc/slurm/topology.conf"
PROLOG = "/etc/slurm/task_prolog.sh"
HEALTH = "/etc/slurm/metalfleet-healthcheck.sh"
#: Where metalfleet's own scontrol calls find the controller a joined node belongs to (SlurmClient).
CLIENT_CONF = "/etc/metalfleet/slurm-client.conf"

#: The slurm.conf head metalfleet writes, each line with why; ``SlurmSetup.settings`` overrides a key.
HEAD: tuple[tuple[str, str, str], ...] = (
    ("AuthType", "auth/munge", "every message signed with the cluster's munge key"),
    ("CredType", "cred/munge", ""),
    ("SlurmUser", "root", ""),
    ("SlurmctldPort", "6817", "Slurm's registered ports"),
    ("SlurmdPort", "6818", ""),
    ("StateSaveLocation", "/var/spool/slurmctld", "drains and their reasons survive a controller restart"),
    ("SlurmdSpoolDir", "/var/spool/slurmd", ""),
    ("SlurmctldPidFile", "/run/slurmctld.pid", ""),
    ("SlurmdPidFile", "/run/slurmd.pid", ""),
    ("SlurmctldLogFile", "/var/log/slurmctld.log", ""),
    ("SlurmdLogFile", "/var/log/slurmd.log", ""),
    ("ProctrackType", "proctrack/cgroup", "a job's processes tracked and ended with it"),
    ("TaskPlugin", "task/affinity,task/cgroup", "tasks bound to their cores and GPUs (cgroup.conf ConstrainDevices)"),
    ("SelectType", "select/cons_tres", "GPUs allocated as trackable resources (--gres, --gpus)"),
    ("SelectTypeParameters", "CR_Core_Memory", ""),
    ("GresTypes", "gpu,npu", "the accelerators of gres.conf"),
    ("TopologyPlugin", "topology/tree", "jobs placed under as few leaf switches as they fit (topology.conf)"),
    ("TaskProlog", PROLOG, "every task gets the NCCL settings the acceptance gate ran with"),
    ("ReturnToService", "2", "a node that answers again after going down comes back; a drained one does not"),
    ("MpiDefault", "none", ""),
    ("SchedulerType", "sched/backfill", ""),
)


@dataclass(frozen=True)
class SlurmSetup:
    """Where the partition lives and what it is called; ``settings`` are slurm.conf keys laid over :data:`HEAD`.

    Exactly one of ``controller`` (metalfleet stands slurmctld up there and writes every config) and ``join``
    (``host:port`` of a slurmctld that runs already: the nodes join it as configless dynamic nodes, and its
    slurm.conf, gres.conf and partitions are the site's)."""

    cluster: str
    partition: str
    #: The host that runs slurmctld (one of the nodes, or a host of its own); None when joining one.
    controller: Host | None
    munge_key: bytes
    settings: Mapping[str, str] = field(default_factory=dict)
    features: Sequence[str] = ()
    #: Node name -> slurmd port, where nodes share an address (simulated hosts); default SlurmdPort.
    ports: Mapping[str, int] = field(default_factory=dict)
    #: Where the nodes' accelerator device files are (gres.conf File=).
    device_dir: str = "/dev"
    #: Seconds between slurmd's runs of metalfleet's HealthCheckProgram (None: no health check).
    health_interval: int | None = None
    #: ``host:port`` of an existing slurmctld to join (configless dynamic nodes); None: ``controller`` mode.
    join: str | None = None

    def __post_init__(self) -> None:
        if (self.controller is None) == (self.join is None):
            raise InvalidSpecError("a Slurm set-up has exactly one of a controller to stand up and one to join",
                                   field="scheduler", value=None)
        if self.join is not None and (self.settings or self.health_interval or self.ports):
            raise InvalidSpecError("joining a controller that exists, its slurm.conf is the site's: no settings, "
                                   "health check or per-node ports", field="scheduler.join", value=self.join)

    @property
    def owner_feature(self) -> str:
        """The feature every node of this cluster carries on a joined controller (its NodeSet selects by it)."""
        return f"metalfleet-{self.cluster}"

    def controller_host(self) -> Host:
        assert self.controller is not None, "controller mode"
        return self.controller


@dataclass
class SlurmOutcome:
    partition: str
    nodes: list[SlurmNode] = field(default_factory=list)
    #: Hosts the gate refused: defined nowhere (or drained when they were defined before).
    left_out: dict[str, str] = field(default_factory=dict)
    bootstrap: Report | None = None
    #: The scontrol calls made to follow the gate.
    calls: list[list[str]] = field(default_factory=list)
    states: dict[str, NodeState] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and (self.bootstrap is None or not self.bootstrap.failed)

    def summary(self) -> str:
        lines = [f"slurm: partition {self.partition}: {len(self.nodes)} node(s)"
                 + (f", {len(self.left_out)} left out by the gate" if self.left_out else "")]
        for n in self.nodes:
            st = self.states.get(n.name)
            lines.append(f"  {n.name}: {'+'.join(sorted(st.flags)) if st else '?'} "
                         f"Gres={','.join(g.spec() for g in n.gres)} Feature={','.join(n.features)}")
        lines += [f"  {name}: not in the partition ({why})" for name, why in self.left_out.items()]
        lines += [f"  scontrol: {' '.join(c[2:])}" for c in self.calls]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


def slurm_conf(setup: SlurmSetup, nodes: Sequence[SlurmNode], controller_hostname: str | None = None) -> str:
    """The whole slurm.conf: the head (with why), the nodes, the partition. ``controller_hostname``: the
    controller's own short host name (slurmctld only runs where it matches SlurmctldHost)."""
    head = {k: (v, why) for k, v, why in HEAD}
    for k, v in setup.settings.items():
        head[k] = (v, "set in the cluster spec")
    c = setup.controller_host()
    lines = [f"# Written by metalfleet for cluster {setup.cluster}: the nodes the acceptance gate accepted.",
             f"ClusterName={setup.cluster}", f"SlurmctldHost={controller_hostname or c.name}({c.address})"]
    for key, (value, why) in head.items():
        if why:
            lines.append(f"# {why}")
        lines.append(f"{key}={value}")
    if not any(n.switch for n in nodes):
        lines = [ln for ln in lines if not ln.startswith("TopologyPlugin=")]
    if setup.health_interval:
        lines += ["# metalfleet's fast node check (the accelerators the gate counted answer); a failing node drains",
                  f"HealthCheckProgram={HEALTH}", f"HealthCheckInterval={setup.health_interval}",
                  "HealthCheckNodeState=ANY"]
    return "\n".join(lines) + "\n" + node_lines(nodes) + partition_line(setup.partition, nodes)


def slurm_profile(setup: SlurmSetup, nodes: Sequence[SlurmNode], controller_hostname: str | None = None) -> Profile:
    """The munge, slurmd and slurmctld steps with this partition's files."""
    files = {SLURM_CONF: slurm_conf(setup, nodes, controller_hostname), GRES_CONF: gres_conf(nodes),
             PROLOG: task_prolog()}
    topo = topology_conf(nodes)
    if topo:
        files[TOPOLOGY_CONF] = topo
    if setup.health_interval:
        kinds = {g.name for n in nodes for g in n.gres}
        files[HEALTH] = health_check_script({n.name: sum(g.count for g in n.gres) for n in nodes},
                                            "npu" if kinds == {"npu"} else "gpu")
    key = base64.b64encode(setup.munge_key).decode()
    return Profile("slurm", (Munge, SlurmController, SlurmNodeDaemon), {
        "munge": {"munge_key_b64": key},
        "slurmd": {"files": files, "executables": (PROLOG, HEALTH)},
        "slurmctld": {"controller": setup.controller_host().name, "files": files, "executables": (PROLOG, HEALTH)},
    }, "munge, slurmd and (on the controller) slurmctld with the partition's configs")


def client_conf(setup: SlurmSetup) -> str:
    """The client config of metalfleet's scontrol calls on a joined node: where slurmctld is (slurm.conf(5):
    SlurmctldHost, SlurmctldPort); the real slurm.conf is the controller's, which slurmd fetches."""
    assert setup.join is not None
    host, _, port = setup.join.rpartition(":")
    return (f"# Written by metalfleet: where this node's controller is, for metalfleet's own scontrol calls.\n"
            f"# slurmd runs configless (the controller's slurm.conf is in /run/slurm/conf once it has started).\n"
            f"ClusterName={setup.cluster}\nSlurmctldHost={host.strip('[]')}\nSlurmctldPort={port}\n"
            "AuthType=auth/munge\n")


def join_profile(setup: SlurmSetup, nodes: Sequence[SlurmNode], hosts: Mapping[str, str]) -> Profile:
    """munge with the controller's key, the client config, and slurmd as a dynamic node of the controller:
    ``hosts`` maps each inventory host to its Slurm node name."""
    assert setup.join is not None
    by_name = {n.name: n for n in nodes}
    key = base64.b64encode(setup.munge_key).decode()
    return Profile("slurm-join", (Munge, SlurmClient, SlurmDynamicNode), {
        "munge": {"munge_key_b64": key},
        "slurm-client": {"text": client_conf(setup), "path": CLIENT_CONF},
        "slurmd-join": {"conf_server": setup.join, "owner_feature": setup.owner_feature,
                        "client_conf_path": CLIENT_CONF,
                        "nodes": {h: create_tokens(by_name[n]) for h, n in hosts.items()}},
    }, "munge, the Slurm client and slurmd as dynamic nodes of the controller the spec names")


def _read_facts(pool: SessionPool, host: Host, facts: Sequence[Fact[Any]]) -> FactValues:
    from .runner import read_facts

    conn = pool.connector(host)
    try:
        conn.connect()
        return read_facts(conn, host.name, facts)[0]
    finally:
        conn.close()


@dataclass(frozen=True)
class _Ctl:
    """Where metalfleet's scontrol calls run: the controller host, or (joined) a node with the client config."""

    host: Host
    env: tuple[str, ...] = ()

    @classmethod
    def of(cls, setup: SlurmSetup, via: Host | None = None) -> _Ctl:
        if setup.join is None:
            return cls(setup.controller_host())
        assert via is not None
        return cls.joined(via)

    @classmethod
    def joined(cls, via: Host) -> _Ctl:
        """scontrol with the node's client config; none yet (a first run): fail at once, since scontrol without a
        config looks for the controller in DNS (configless SRV records) and waits out the resolver."""
        script = ('test -r "$1" || { echo "no $1: this node has not joined yet" >&2; exit 3; }; '
                  'SLURM_CONF="$1"; export SLURM_CONF; shift; exec "$@"')
        return cls(via, ("sh", "-c", script, "sh", via.path(CLIENT_CONF)))


def _scontrol(pool: SessionPool, ctl: _Ctl | Host, argv: Sequence[str]) -> str:
    ctl = ctl if isinstance(ctl, _Ctl) else _Ctl(ctl)
    conn = pool.connector(ctl.host)
    try:
        conn.connect()
        res = conn.run([*ctl.env, *argv], timeout=60)
    finally:
        conn.close()
    if res.rc != 0:
        raise MetalfleetError(f"{' '.join(argv[:2])} on {ctl.host.name} exited {res.rc}: "
                              f"{(res.stderr or res.stdout).decode(errors='replace').strip()[-300:]}")
    return res.stdout.decode(errors="replace")


def join_slurm(inventory: Inventory | Sequence[Host], report: AcceptanceReport | Sequence[GateNode],
               setup: SlurmSetup, *,
               quarantined: Mapping[str, str] | None = None, ssh: SshOptions | None = None,
               connect: Connect | None = None, progress: ProgressCallback | None = None,
               wait_seconds: float = 60.0) -> SlurmOutcome:
    """Make the partition hold exactly the nodes ``report`` accepted (an acceptance report, or its verdicts as
    :class:`~.slurm.GateNode` s); drain the ``quarantined`` ones (host name ->
    reason, e.g. from an earlier round) that Slurm still knows. Never raises for a node's failure (see
    ``errors``); raises InvalidSpecError for a node whose definition cannot be made, before any daemon changes."""
    if isinstance(inventory, Inventory):
        hosts = list(inventory.hosts)
        ssh = ssh or inventory.ssh
    else:
        hosts = list(inventory)
    by_name = {h.name: h for h in hosts}
    outcome = SlurmOutcome(setup.partition)
    gates = [GateNode.from_acceptance(n) for n in report.nodes] if isinstance(report, AcceptanceReport) \
        else list(report)
    accepted = [n for n in gates if n.passed and n.host in by_name]
    if not accepted:
        outcome.errors.append("no node passed acceptance: the partition would be empty")
        return outcome
    facts: tuple[Fact[Any], ...] = (CpuTopology(), HOSTNAME)
    joined = setup.join is not None
    ctl = _Ctl.of(setup, by_name[accepted[0].host])
    features = (*setup.features, setup.owner_feature) if joined else tuple(setup.features)
    with SessionPool(ssh, connect) as pool:
        try:  # what Slurm has now (nothing on a first run: no controller yet, or no client config on the node)
            known = parse_nodes(_scontrol(pool, ctl, ["scontrol", "show", "nodes", "--oneliner"]))
        except MetalfleetError:
            known = {}
        # A node the gate refuses now but Slurm has stays defined, to be drained with the gate's reason.
        kept = [n for n in gates if not n.passed and n.host in by_name and n.host in known]
        outcome.left_out = {n.host: n.reason for n in gates if not n.passed and n not in kept}
        members = [*accepted, *kept]

        def read(n: GateNode) -> FactValues | str:
            h = by_name[n.host]
            try:
                return _read_facts(pool, h, (*facts, MemoryTotal(h.path("/proc/meminfo"))))
            except MetalfleetError as exc:
                return str(exc.message)

        fan: FanOut[GateNode, FactValues | str] = FanOut(members, max_workers=32,
                                                               thread_name_prefix="mf-slurm")
        values = fan.run(read)
        unread = {n.host: v for n, v in zip(members, values, strict=True) if isinstance(v, str)}
        if any(n.host in unread for n in accepted):
            outcome.errors += [f"{h}: its facts could not be read: {why}" for h, why in unread.items()]
            return outcome
        for n in kept:  # unreachable as well as refused: it cannot even be drained in place
            if n.host in unread:
                outcome.left_out[n.host] = f"{n.reason}; its facts could not be read: {unread[n.host]}"
        kept = [n for n in kept if n.host not in unread]
        members = [*accepted, *kept]
        for n, fv in zip(members, [v for v in values if not isinstance(v, str)], strict=True):
            h = by_name[n.host]
            res = NodeResources.from_facts(fv[CpuTopology()], fv[MemoryTotal(h.path("/proc/meminfo"))], n.host)
            rc, out = fv[HOSTNAME]
            outcome.nodes.append(node_from_acceptance(n, res, labels=h.labels, extra_features=features,
                                                      port=setup.ports.get(n.host), device_dir=setup.device_dir,
                                                      keep=not n.passed, hostname=out.strip() if rc == 0 else None))
        quarantined = {**{n.host: n.reason for n in kept}, **dict(quarantined or {})}
        from .api import run_bootstrap

        targets = [by_name[n.host] for n in members]
        if joined:
            profile = join_profile(setup, outcome.nodes, {g.host: n.name for n, g in
                                                          zip(outcome.nodes, members, strict=True)})
        else:
            controller = setup.controller_host()
            if controller.name not in {h.name for h in targets}:
                targets.insert(0, controller)
            ctl_name = next((n.hostname or n.name for n, g in zip(outcome.nodes, members, strict=True)
                             if g.host == controller.name), None)
            if ctl_name is None:  # a controller host of its own
                rc, out = _read_facts(pool, controller, (HOSTNAME,))[HOSTNAME]
                ctl_name = out.strip() if rc == 0 and out.strip() else None
            profile = slurm_profile(setup, outcome.nodes, ctl_name)
        outcome.bootstrap = run_bootstrap(targets, profile, ssh=ssh, progress=progress, options=_options(connect))
        if outcome.bootstrap.failed:
            for r in outcome.bootstrap.failed:
                tail = next((st.output_tail.strip() for st in r.steps if st.error and st.output_tail.strip()), "")
                outcome.errors.append(f"{r.host}: {r.error or r.status}" + (f"\n{tail[-600:]}" if tail else ""))
            return outcome
        names = [n.name for n in outcome.nodes]
        try:
            outcome.states = _wait_nodes(pool, ctl, names, wait_seconds, joined=joined)
            calls = plan_sync(outcome.states, accepted=[n.host for n in accepted], quarantined=quarantined)
            for argv in calls:
                _scontrol(pool, ctl, argv)
            outcome.calls = calls
            if calls:
                outcome.states = parse_nodes(_scontrol(pool, ctl, ["scontrol", "show", "nodes", "--oneliner"]))
        except MetalfleetError as exc:
            outcome.errors.append(exc.message)
        if joined and not outcome.errors:
            outside = [n for n in names if setup.partition not in outcome.states[n].partitions]
            if outside:
                outcome.errors.append(
                    f"slurm: node(s) {', '.join(outside)} joined {setup.join} but are in no partition "
                    f"{setup.partition}: the controller's slurm.conf puts dynamic nodes in a partition by feature, "
                    "e.g. "
                    f"`NodeSet=ns_{setup.cluster} Feature={setup.owner_feature}` and `PartitionName={setup.partition} "
                    f"Nodes=ns_{setup.cluster}` (or Nodes=ALL)")
    return outcome


def _options(connect: Connect | None) -> Any:
    from .runner import RunOptions

    return RunOptions(connect=connect) if connect is not None else None


def _wait_nodes(pool: SessionPool, controller: _Ctl, names: Sequence[str], seconds: float, *,
                joined: bool = False) -> dict[str, NodeState]:
    """The controller's view once every node has registered (no longer UNKNOWN / NOT_RESPONDING; a node created
    for a join is hidden, FUTURE, until its slurmd registers)."""
    deadline = time.monotonic() + seconds
    last = ""
    while True:
        try:
            states = parse_nodes(_scontrol(pool, controller, ["scontrol", "show", "nodes", "--oneliner"]))
        except MetalfleetError as exc:
            states, last = {}, f" (the controller: {exc.message})"
        refused = {n: states[n].reason for n in names if n in states and "INVALID_REG" in states[n].flags}
        if refused:  # it registered with less than its definition: it will not become ready
            hint = ""
            if joined and any("gres" in (why or "") for why in refused.values()):
                hint = (" (a joined node reads the controller's gres.conf: it must name these nodes' devices, e.g. "
                        "`Name=gpu Type=<model> File=/dev/nvidia[0-7]`, or AutoDetect them)")
            raise MetalfleetError("slurm: the controller refused node(s) at registration: " + "; ".join(
                f"{n}: {why}" for n, why in refused.items()) + hint)
        waiting = [n for n in names if n not in states or states[n].flags & {"UNKNOWN", "NOT_RESPONDING"}]
        if not waiting:
            return states
        if time.monotonic() > deadline:
            where = f"the controller at {controller.host.name}" if not joined else "the controller they joined"
            raise MetalfleetError(f"slurm: node(s) {', '.join(waiting)} did not register with {where} in "
                                  f"{seconds:.0f}s{last}")
        time.sleep(0.5)


def leave_slurm(controller: Host, names: Sequence[str], *, ssh: SshOptions | None = None,
                connect: Connect | None = None) -> list[list[str]]:
    """Take ``names`` out of service before their machines go (``release``, ``pulumi destroy``); the calls made."""
    if not names:
        return []
    with SessionPool(ssh, connect) as pool:
        states = parse_nodes(_scontrol(pool, controller, ["scontrol", "show", "nodes", "--oneliner"]))
        calls = plan_sync(states, accepted=[], quarantined={}, released=names)
        for argv in calls:
            _scontrol(pool, controller, argv)
    return calls


def leave_joined(hosts: Mapping[str, Host], *, via: Sequence[Host] = (), ssh: SshOptions | None = None,
                 connect: Connect | None = None, attempts: int = 20) -> list[list[str]]:
    """Take joined nodes (Slurm node name -> its host) off a controller that is not metalfleet's: each node's
    slurmd stopped and disabled (it would register, and so create itself, again), then the node set DOWN and
    deleted, so ``scontrol show nodes`` no longer lists it. scontrol runs on one of the leaving hosts, else on one
    of ``via`` (nodes that stay: a leaving machine may be gone already). The calls made; raises when no host can
    run scontrol or a node cannot be deleted."""
    if not hosts:
        return []
    calls: list[list[str]] = []
    with SessionPool(ssh, connect) as pool:
        def stop(item: tuple[str, Host]) -> str | None:
            conn = pool.connector(item[1])
            try:
                conn.connect()
                conn.run(["systemctl", "disable", "--now", "slurmd"], timeout=60)
                return None
            except MetalfleetError as exc:  # the machine may be gone already; its record is deleted below anyway
                return str(exc.message)
            finally:
                conn.close()

        fan: FanOut[tuple[str, Host], str | None] = FanOut(list(hosts.items()), max_workers=32,
                                                           thread_name_prefix="mf-slurm")
        fan.run(stop)
        last: MetalfleetError | None = None
        for runner in [*hosts.values(), *via]:  # any of them reaches the controller with its client config
            ctl = _Ctl.joined(runner)
            try:
                states = parse_nodes(_scontrol(pool, ctl, ["scontrol", "show", "nodes", "--oneliner"]))
            except MetalfleetError as exc:
                last = exc
                continue
            for argv in plan_sync(states, accepted=[], quarantined={}, released=list(hosts), delete=True):
                for attempt in range(attempts):  # a node still finishing a job's cleanup cannot be deleted yet
                    try:
                        _scontrol(pool, ctl, argv)
                        break
                    except MetalfleetError:
                        if argv[1] != "delete" or attempt == attempts - 1:
                            raise
                        time.sleep(0.5)
                calls.append(argv)
            return calls
        assert last is not None
        raise last
