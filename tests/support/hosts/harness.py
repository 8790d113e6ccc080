"""Simulated GPU hosts: one real sshd per host on its own loopback address, with shims for the system tools.

::

    from metalfleet.testing.hosts.harness import start_hosts

    with start_hosts(4, fixtures_profile="p5") as fleet:
        inventory = fleet.inventory()            # metalfleet.bootstrap Inventory, keys pinned
        fleet.hosts[0].update_config(gpu={"count": 7})
        ...

Each host has
  * an sshd listening on ``127.<100+worker>.<fleet>.<n>:22`` (per-xdist-worker ranges) with its own
    ed25519 host key, logging in as the unprivileged user ``mfnode`` (``/bin/sh``, no pyenv),
  * a sandbox directory that is both the shims' state and the filesystem root the steps write under
    (``Host.fs_root``): ``etc/``, ``proc/``, ``opt/`` ... plus ``config.json`` (behaviour, editable
    by tests) and ``state.json`` (what installs left),
  * ``PATH`` = the shim directory first, so ``apt-get``, ``nvidia-smi``, ``mdadm``, ``sudo``... are
    the shims (see shims/mfshim.py). mfnode has no real privileges: a tool without a shim fails
    with "permission denied" instead of touching this machine.

The fabric between the hosts is the fleet's world file (``fleet.fabric_path``, schema in mfshim's docstring):
each host's sandbox and leaf switch, the switches' faults, the flap counters. By default every host sits under
"leaf0" with no fault (a run across nodes then answers as it always did); NIC and node faults live in each
host's config.json (``update_config(fabric={"nic_scale": {"mlx5_4": 0.5}})``, ``fabric={"flap": ...}``,
``nccl={"busbw_scale": 0.6}``), switch faults come from ``fleet.set_switches(...)``, after which the inventory
hosts carry the label ``switch=<name>``.

``reboot`` (the shim) asks the harness to reboot the host: its sshd and every session are killed,
the host stays unreachable for ``reboot_down_seconds`` (config, default 1.5 s), the shims' boot
logic runs (new boot id, modules, units, fstab mounts), and sshd starts again with the same key.

VM mode (``start_hosts(n, profile, vm=True)``, or one host on demand with
``metalfleet.testing.hosts.vm.boot_vm_host``): each host is its own machine at "/" (an overlay of this machine's
root in private namespaces), for product code that uses ``Host.fs_root = "/"``; see tests/support/hosts/vm.py.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metalfleet.testing import usage as areas
from metalfleet.testing.kit.process import dies_with_parent

from .shims import mfshim  # the shims' own state logic, reused for boot

HERE = Path(__file__).resolve().parent
#: Real command outputs captured on GPU servers (provenance in metalfleet/testing/fixtures/SOURCES.md). The
#: simulated hosts never read them here: each fleet gets a world-readable copy (see new_fleet), so a
#: clone inside a private (0700) folder works.
FIXTURES = (HERE.parent / "fixtures").resolve()
SHIM = HERE / "shims" / "mfshim.py"
USER = "mfnode"
SYSTEM_PYTHON = "/usr/bin/python3"

SHIM_NAMES = sorted(mfshim.HANDLERS)

UBUNTU_2204 = """PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
VERSION_CODENAME=jammy
ID=ubuntu
ID_LIKE=debian
"""

GIB = 1 << 30

#: Fixture profiles: config defaults (what the shims print) and the inventory traits of the host.
#: ``fixtures`` name real captures the shims print as they are; ``gpu`` and ``fabric`` are the simulated
#: hardware that generated outputs (nccl-tests, fi_info, --query-gpu) answer from, ``cpu`` and ``memory_gib``
#: what lscpu, nproc and proc/meminfo say (see mfshim).
PROFILES: dict[str, dict[str, Any]] = {
    "p5": {
        "provider": "aws", "offering": "p5.48xlarge",
        "config": {
            "gpu": {"vendor": "nvidia", "count": 8, "model": "NVIDIA H100 80GB HBM3"},
            "nvme": {"count": 8, "size": 3576 * GIB, "model": "Amazon EC2 NVMe Instance Storage"},
            "fixtures": {
                "nvidia-smi": "nvidia-smi/8x-h100-sxm-default-table-drv550.txt",
                "nvidia-smi-q": "nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt",
                "topo": "topo/8x-h100-nv18-no-nic-legend-omitted.txt",
                "nvme-list": "storage/nvme-list-aws-m5d-ebs-plus-1x-instance-store-old-cli.txt",
            },
            # 32 EFA devices on 32 network cards of 100 Gb/s (fi_info and nccl-tests answer from this)
            "fabric": {"kind": "efa", "nics": 32, "nic_gbps": 100},
            # 192 vCPUs = 96 cores at 2 threads per core, 2048 GiB: the catalogue's p5.48xlarge (providers/data/
            # catalog.json, from DescribeInstanceTypes). 2 sockets of 48 and the model name (AMD EPYC 7R13) are
            # not confirmed against AWS's instance type page, which was not in reach here.
            "cpu": {"model": "AMD EPYC 7R13 Processor", "sockets": 2, "cores_per_socket": 48, "threads_per_core": 2},
            "memory_gib": 2048,
        },
    },
    "p4d": {  # p4d / p4de: 8x A100 SXM4 on NVSwitch, 4 EFA cards, 8 NVMe (no A100 default-table capture)
        "provider": "aws", "offering": "p4de.24xlarge",
        "config": {
            "gpu": {"vendor": "nvidia", "count": 8, "model": "NVIDIA A100-SXM4-80GB"},
            "nvme": {"count": 8, "size": 1000 * 1000**3, "model": "Amazon EC2 NVMe Instance Storage"},
            "fixtures": {
                "topo": "topo/8x-a800-sxm4-nv8-4nic-mlx5.txt",
                "nvlink": "nvlink/8x-a100-sxm4-80gb-nvlink-status.txt",
                "nvme-list": "storage/nvme-list-aws-m5d-ebs-plus-1x-instance-store-old-cli.txt",
            },
            "fabric": {"kind": "efa", "nics": 4, "nic_gbps": 100},
            # 96 vCPUs = 48 cores at 2 threads per core, 1152 GiB: the catalogue's p4de.24xlarge (providers/data/
            # catalog.json, from DescribeInstanceTypes). Default, not cited: 2 sockets of 24 and the model name.
            "cpu": {"model": "Intel(R) Xeon(R) Platinum 8275CL CPU @ 3.00GHz", "sockets": 2, "cores_per_socket": 24,
                    "threads_per_core": 2},
            "memory_gib": 1152,
        },
    },
    "h100-ib": {
        "traits": {"vendor": "nvidia", "gpu_model": "H100", "gpu_count": 8, "interconnect": "nvswitch",
                   "fabric": "infiniband", "fabric_cards": 8, "nvme_count": 8},
        "config": {
            "gpu": {"vendor": "nvidia", "count": 8, "model": "NVIDIA H100 80GB HBM3"},
            "nvme": {"count": 8, "size": 3576 * GIB, "model": "SAMSUNG MZQL23T8HCLS-00A07",
                     "root_model": "SAMSUNG MZ1L2960HCJR-00A07"},
            "fixtures": {
                "nvidia-smi": "nvidia-smi/8x-h100-sxm-default-table-drv550.txt",
                "nvidia-smi-q": "nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt",
                "ibstat": "infiniband/ibstat-h100-8x-cx7-ib400-plus-bf3-eth.txt",
                # H100 SXM: NV18 between every pair. No `nvlink -s` capture of an H100 exists in the
                # fixtures, so that tool has none here rather than an A100's (NV12, 25 GB/s links).
                "topo": "topo/8x-h100-nv18-no-nic-legend-omitted.txt",
            },
            "fabric": {"kind": "infiniband", "nics": 8, "nic_gbps": 400},
            # DGX H100: 2x "Intel(R) Xeon(R) Platinum 8480C", 56 cores each, "2 TB" (NVIDIA's MLPerf system
            # description, mlcommons/inference_results_v4.1 closed/NVIDIA/systems/DGX-H100_H100-SXM-80GBx8_TRT.json
            # @a2f5d66d: host_processors_per_node 2, host_processor_core_count 56, host_memory_capacity "2 TB").
            # 2 threads per core (Hyper-Threading on) is an assumption: the description does not say.
            "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480C", "sockets": 2, "cores_per_socket": 56,
                    "threads_per_core": 2},
            "memory_gib": 2048,
        },
    },
    "h100-roce": {
        "traits": {"vendor": "nvidia", "gpu_model": "H100", "gpu_count": 8, "interconnect": "nvswitch",
                   "fabric": "roce", "fabric_cards": 8, "nvme_count": 4},
        "config": {
            "gpu": {"vendor": "nvidia", "count": 8, "model": "NVIDIA H100 80GB HBM3"},
            "nvme": {"count": 4, "size": 3576 * GIB, "model": "SAMSUNG MZQL23T8HCLS-00A07",
                     "root_model": "SAMSUNG MZ1L2960HCJR-00A07"},
            "fixtures": {"nvidia-smi": "nvidia-smi/8x-h100-sxm-default-table-drv550.txt",
                         "ibstat": "infiniband/ibstat-h100-roce-8x-cx7-4x-cx6dx-all-eth.txt"},
            "fabric": {"kind": "roce", "nics": 8, "nic_gbps": 400},
            # Default, not cited: an H100 HGX host like h100-ib's (no offering names this profile).
            "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480C", "sockets": 2, "cores_per_socket": 56,
                    "threads_per_core": 2},
            "memory_gib": 2048,
        },
    },
    "alibaba-h20": {
        "provider": "alibaba", "offering": "ecs.ebmgn8v.48xlarge",
        # No capture of an H20 exists: nvidia-smi shows the H100 SXM table's layout with the H20's name and 96 GB
        # (97871 MiB) (mfshim._as_simulated_gpu); its NVLink topology is NV18 like the H100 SXM's (900 GB/s, 18
        # NVLink4 links). ibv_devinfo lists the fabric's erdma_N devices (mfshim.erdma_devinfo).
        "config": {"gpu": {"vendor": "nvidia", "count": 8, "model": "NVIDIA H20", "memory_mib": 97871},
                   "capture_gpu": {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559},
                   "nvme": {"count": 0, "root_model": "Alibaba Cloud Elastic Block Storage"},
                   "fixtures": {"nvidia-smi": "nvidia-smi/8x-h100-sxm-default-table-drv550.txt",
                                "nvidia-smi-q": "nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt",
                                "topo": "topo/8x-h100-nv18-no-nic-legend-omitted.txt"},
                   "fabric": {"kind": "erdma", "nics": 2, "nic_gbps": 85},
                   # 192 vCPU, 1024 GiB, "the 4th-generation Intel Xeon Scalable processors": Alibaba's ebmgn8v
                   # page as the catalogue cites it (providers/data/catalog.json). Default, not cited: 2 sockets of
                   # 48 cores at 2 threads, and the model name (the page names the generation, not the part).
                   "cpu": {"model": "Intel(R) Xeon(R) Platinum", "sockets": 2, "cores_per_socket": 48,
                           "threads_per_core": 2},
                   "memory_gib": 1024},
    },
    "ascend-910b": {
        "provider": "huawei", "offering": "physical.kat2e.48xlarge.8.313t",
        "config": {"gpu": {"vendor": "ascend", "count": 8, "model": "Ascend 910B3", "hccs_link_gbs": 56},
                   "nvme": {"count": 4, "size": 3576 * GIB, "model": "HWE52P433T8M002N", "root_model": "EVS"},
                   "fixtures": {"npu-smi": "ascend/npu-smi-info-8x-910b3-device-table.txt",
                                "npu-smi-topo": "ascend/npu-smi-info-t-topo-8x-910b3-hccs.txt"},
                   "fabric": {"kind": "roce", "nics": 8, "nic_gbps": 200},
                   # Default, not cited (the catalogue has no CPU or memory figures for this flavor): 4 Kunpeng
                   # 920 sockets of 48 cores, no SMT, 1536 GiB.
                   "cpu": {"model": "Kunpeng-920", "sockets": 4, "cores_per_socket": 48, "threads_per_core": 1},
                   "memory_gib": 1536},
    },
    "plain": {
        "traits": {"vendor": "none", "gpu_count": 0, "fabric": "none"},
        "config": {"gpu": {"vendor": "none", "count": 0}, "nvme": {"count": 0}, "fixtures": {},
                   "fabric": {"kind": "none"},
                   # Default, not cited: a small virtual machine.
                   "cpu": {"model": "QEMU Virtual CPU version 2.5+", "sockets": 1, "cores_per_socket": 4,
                           "threads_per_core": 1},
                   "memory_gib": 16},
    },
}


class HarnessError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# machine setup (root)


def ensure_sshd() -> str:
    """sshd installed (Debian openssh-server), /run/sshd present, user mfnode present."""
    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd) or subprocess.run(["id", USER], capture_output=True).returncode != 0:
        script = HERE / "ensure-sshd.sh"
        res = subprocess.run(["bash", str(script)], capture_output=True, text=True)
        if res.returncode != 0:
            raise HarnessError(f"{script} failed:\n{res.stdout}\n{res.stderr}")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    return sshd if os.path.exists(sshd) else "/usr/sbin/sshd"


def _keygen(path: Path, comment: str) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _descendants(pid: int) -> list[int]:
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _kill(pids: list[int], sig: int = signal.SIGKILL) -> None:
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)


# --------------------------------------------------------------------------------------------


_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_WORKER_N = int(_WORKER[2:]) if _WORKER[2:].isdigit() else 0
_FLEET_SEQ = itertools.count(random.randrange(250))


@dataclass
class SimHost:
    name: str
    address: str
    port: int
    root: Path
    sshd_dir: Path
    host_key: str  # "ssh-ed25519 AAAA... comment"
    fleet: HostFleet
    index: int
    traits: dict[str, Any] = field(default_factory=dict)
    provider: str | None = None
    offering: str | None = None
    proc: subprocess.Popen[bytes] | None = None
    rebooting: bool = False

    # -- config and state ------------------------------------------------------------------
    @property
    def config_path(self) -> Path:
        return self.root / "config.json"

    def config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = json.loads(self.config_path.read_text())
        return cfg

    def update_config(self, **changes: Any) -> None:
        """Shallow-merge ``changes`` into config.json (dict values are merged one level deep)."""
        cfg = self.config()
        for k, v in changes.items():
            if isinstance(v, dict) and isinstance(cfg.get(k), dict):
                cfg[k] = {**cfg[k], **v}
            else:
                cfg[k] = v
        self.config_path.write_text(json.dumps(cfg, indent=1))

    def state(self) -> dict[str, Any]:
        return mfshim.read_state(str(self.root))

    def edit_state(self) -> Any:
        return mfshim.state(str(self.root))

    def invocations(self) -> list[list[str]]:
        path = self.root / "log" / "invocations.jsonl"
        if not path.exists():
            return []
        return [json.loads(line)["argv"] for line in path.read_text().splitlines() if line.strip()]

    def clear_invocations(self) -> None:
        (self.root / "log" / "invocations.jsonl").write_text("")

    def file(self, path: str) -> Path:
        """A path as the node sees it (``/etc/nccl.conf``) inside the sandbox."""
        return self.root / path.lstrip("/")

    # -- sshd ------------------------------------------------------------------------------
    def start(self) -> None:
        log = open(self.sshd_dir / "sshd.log", "ab")  # noqa: SIM115 - owned by the process
        argv = dies_with_parent([self.fleet.sshd, "-D", "-e", "-f", str(self.sshd_dir / "sshd_config")])
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

    def wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                log = (self.sshd_dir / "sshd.log").read_text(errors="replace")
                if "Address already in use" in log or "Cannot bind" in log:
                    raise _AddressInUse(self.address)
                raise HarnessError(f"sshd for {self.name} exited {self.proc.returncode}:\n{log[-2000:]}")
            with contextlib.suppress(OSError), socket.create_connection((self.address, self.port), timeout=0.5):
                return
            time.sleep(0.02)
        raise HarnessError(f"sshd for {self.name} not listening on {self.address}:{self.port} after {timeout}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        _kill(_descendants(self.proc.pid))
        _kill([self.proc.pid])
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.proc = None

    def drop_connections(self) -> int:
        """Kill every SSH session of this host (the per-connection sshd processes and what they run)."""
        if self.proc is None:
            return 0
        victims = _descendants(self.proc.pid)
        _kill(victims)
        return len(victims)

    def sessions(self) -> int:
        return len(_children().get(self.proc.pid, [])) if self.proc else 0

    def reboot_now(self) -> None:
        """What the reboot shim asks for: down, boot, up."""
        self.rebooting = True
        try:
            self.stop()
            time.sleep(float(self.config().get("reboot_down_seconds", 1.5)))
            mfshim.boot(str(self.root))
            # sshd dies with the thread that started it (PR_SET_PDEATHSIG is per thread), so the
            # fleet's long-lived watcher thread starts it, not this short-lived reboot thread.
            self.fleet.call_in_watcher(self.start)
            self.wait_listening()
        finally:
            self.rebooting = False

    def host(self, **overrides: Any) -> Any:
        """This host as a metalfleet.bootstrap Host (fs_root = the sandbox, user mfnode, the fleet key)."""
        from metalfleet.bootstrap.inventory import Host, NodeTraits, traits_for
        from metalfleet.providers.models import Fabric, Interconnect

        traits = traits_for(self.provider, self.offering) if self.offering else None
        if traits is None:
            t = dict(self.traits)
            traits = NodeTraits(vendor=t.get("vendor", "nvidia"), gpu_model=t.get("gpu_model", ""),
                                gpu_count=t.get("gpu_count", 0),
                                interconnect=Interconnect(t.get("interconnect", "pcie")),
                                fabric=Fabric(t.get("fabric", "none")), fabric_cards=t.get("fabric_cards", 0),
                                nvme_count=t.get("nvme_count", 0))
        fields_: dict[str, Any] = {
            "name": self.name, "address": self.address, "port": self.port, "user": USER,
            "key": str(self.fleet.client_key), "provider": self.provider, "offering": self.offering,
            "traits": traits, "labels": {"sim": "1", "rack": f"r{self.index % 2}", **self.fleet.switch_label(self)},
            "index": self.index,
            "host_keys": (self.host_key,), "fs_root": str(self.root),
        }
        fields_.update(overrides)
        return Host(**fields_)


class _AddressInUse(HarnessError):
    pass


class HostFleet:
    """N simulated hosts; a context manager that stops them all."""

    def __init__(self, base: Path, sshd: str, profile: str) -> None:
        self.base = base
        self.sshd = sshd
        self.profile = profile
        self.hosts: list[SimHost] = []
        self.client_key = base / "client_ed25519"
        self.bin_dir = base / "bin"
        self.known_hosts = base / "known_hosts"
        #: The fleet's copy of the fixtures, readable by the hosts' login user wherever the repo is.
        self.fixtures_dir = base / "fixtures"
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._calls: queue.Queue[tuple[Callable[[], None], threading.Event]] = queue.Queue()
        self._owns_base = True
        #: Whether :meth:`set_switches` placed the hosts (their inventory hosts then carry ``switch=<name>``).
        self._switches_set = False

    # -- the fabric between hosts ------------------------------------------------------------
    @property
    def fabric_path(self) -> Path:
        """The world file the launchers' shims read (mfshim's module docstring gives its schema)."""
        return self.base / "fabric" / "world.json"

    def write_fabric(self) -> None:
        """The default world: every host under switch "leaf0", no switch faults, no counters (a reset too)."""
        self._switches_set = False
        world = {"hosts": {h.address: {"name": h.name, "root": str(h.root), "switch": "leaf0"} for h in self.hosts},
                 "switches": {"leaf0": {}}, "counters": {}}
        self._write_world(world)

    def _write_world(self, world: dict[str, Any]) -> None:
        import pwd

        pw = pwd.getpwnam(USER)
        self.fabric_path.parent.mkdir(mode=0o755, exist_ok=True)
        os.chown(self.fabric_path.parent, pw.pw_uid, pw.pw_gid)  # the shims (as mfnode) replace it to count flaps
        with mfshim.fabric_update(str(self.fabric_path)) as current:
            current.clear()
            current.update(world)

    def world(self) -> dict[str, Any]:
        """The world file as it stands (hosts, switches, counters)."""
        return mfshim.read_fabric(str(self.fabric_path)) or {}

    def set_switches(self, groups: Mapping[str, list[int]], faults: Mapping[str, Mapping[str, Any]] | None = None,
                     *, reset_counters: bool = False) -> None:
        """Place the hosts under leaf switches (``{"leaf1": [0, 1, 2, 3], ...}``, host indices; the others stay
        under "leaf0") and give switches faults (``{"leaf1": {"scale": 0.5, "min_nodes": 3}}``: a job with at
        least ``min_nodes`` members under leaf1 runs its network at half speed)."""
        with mfshim.fabric_update(str(self.fabric_path)) as world:
            placed = {i: name for name, members in groups.items() for i in members}
            for h in self.hosts:
                world["hosts"][h.address]["switch"] = placed.get(h.index, "leaf0")
            world["switches"] = {name: {} for name in {"leaf0", *groups}}
            world["switches"].update({k: dict(v) for k, v in (faults or {}).items()})
            if reset_counters:
                world["counters"] = {}
        self._switches_set = True

    def switch_label(self, host: SimHost) -> dict[str, str]:
        """``{"switch": name}`` for ``host`` once :meth:`set_switches` ran, else nothing (labels as before)."""
        if not self._switches_set:
            return {}
        entry = self.world().get("hosts", {}).get(host.address) or {}
        return {"switch": str(entry.get("switch", "leaf0"))}

    # -- inventory -------------------------------------------------------------------------
    def inventory(self, *, pinned: bool = True, hosts: list[SimHost] | None = None, **host_overrides: Any) -> Any:
        """An Inventory of these hosts. ``pinned``: their keys pinned (as a provider's console output would)."""
        from metalfleet.bootstrap.inventory import Inventory
        from metalfleet.bootstrap.ssh import SshOptions

        chosen = hosts if hosts is not None else self.hosts
        hs = tuple(h.host(**host_overrides) for h in chosen)
        keys = {h.address: [h.host_key] for h in chosen} if pinned else {}
        return Inventory(hs, SshOptions(known_hosts=str(self.known_hosts), pinned_keys=keys, use_agent=False,
                                        connect_timeout=5, connect_attempts=3, connect_deadline=20))

    def ssh_options(self, **kw: Any) -> Any:
        from metalfleet.bootstrap.ssh import SshOptions

        base: dict[str, Any] = {"known_hosts": str(self.known_hosts), "use_agent": False, "connect_timeout": 5,
                "connect_attempts": 3, "connect_deadline": 20}
        base.update(kw)
        return SshOptions(**base)

    def write_known_hosts(self) -> None:
        self.known_hosts.write_text("".join(f"{h.address} {' '.join(h.host_key.split()[:2])}\n" for h in self.hosts))

    def __getitem__(self, i: int) -> SimHost:
        return self.hosts[i]

    def __len__(self) -> int:
        return len(self.hosts)

    def __iter__(self) -> Iterator[SimHost]:
        return iter(self.hosts)

    # -- reboot supervision ----------------------------------------------------------------
    def call_in_watcher(self, fn: Callable[[], None], timeout: float = 10.0) -> None:
        done = threading.Event()
        self._calls.put((fn, done))
        if not done.wait(timeout):
            raise HarnessError("the fleet's watcher thread did not run the call")

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                fn, done = self._calls.get(timeout=0.05)
            except queue.Empty:
                pass
            else:
                try:
                    fn()
                finally:
                    done.set()
            for h in self.hosts:
                marker = h.root / "run" / "reboot-requested"
                if marker.exists() and not h.rebooting:
                    with contextlib.suppress(FileNotFoundError):
                        marker.unlink()
                    h.rebooting = True
                    threading.Thread(target=h.reboot_now, name=f"reboot-{h.name}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        deadline = time.monotonic() + 10
        while any(h.rebooting for h in self.hosts) and time.monotonic() < deadline:
            time.sleep(0.05)
        for h in self.hosts:
            h.stop()
        if self._owns_base and os.environ.get("MF_KEEP_HOSTS") != "1":
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> HostFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sshd_config(*, listen: str, host_key: str, pid_file: str, authorized_keys: str, users: str,
                permit_root: str, env: Mapping[str, str], header: str = "") -> str:
    """The sshd_config of a simulated host (plain and VM mode differ only in these parameters)."""
    setenv = " ".join(f'"{k}={v}"' for k, v in env.items())
    return f"""{header}ListenAddress {listen}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized_keys}
StrictModes no
UsePAM no
PermitRootLogin {permit_root}
AllowUsers {users}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 200:30:400
MaxSessions 64
AllowTcpForwarding yes
PermitUserEnvironment no
LogLevel INFO
SetEnv {setenv}
Subsystem sftp internal-sftp
"""


def _sshd_config(h: SimHost, fleet: HostFleet, bin_dir: Path) -> str:
    env = {"MF_ROOT": str(h.root), "MF_FIXTURES": str(fleet.fixtures_dir), "HOME": str(h.root),
           "MF_FABRIC": str(fleet.fabric_path),
           "PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
    return sshd_config(listen=f"{h.address}:{h.port}", host_key=f"{h.sshd_dir}/ssh_host_ed25519_key",
                       pid_file=f"{h.sshd_dir}/sshd.pid", authorized_keys=f"{fleet.base}/authorized_keys",
                       users=USER, permit_root="no", env=env)


def host_config(profile: str, extra: Mapping[str, Any] | None, *, fixtures_dir: Path) -> dict[str, Any]:
    """config.json of a host of ``profile`` with ``extra`` merged in (dict values one level deep)."""
    cfg: dict[str, Any] = json.loads(json.dumps(PROFILES[profile]["config"]))
    cfg.update({"profile": profile, "reboot_down_seconds": 1.5, "delays": {}, "fail": {},
                "fixtures_dir": str(fixtures_dir)})
    for k, v in dict(extra or {}).items():
        cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v
    return cfg


def _initial_state(cfg: dict[str, Any]) -> dict[str, Any]:
    st: dict[str, Any] = {"packages": {}, "held": [], "modules": [], "units": {}, "md": {}, "fs": {},
                          "mounts": [["/dev/nvme0n1p1", "/", "ext4", "rw,relatime,discard"]], "installed": {},
                          "hccn": {}, "boot_id": "", "boots": 0, "reboot_required": False}
    pre = cfg.get("preexisting_raid")
    if pre:
        members = [d["path"] for d in mfshim.disks(cfg) if not d["root"]]
        md = pre.get("device", "/dev/md0") if isinstance(pre, dict) else "/dev/md0"
        st["md"][md] = {"members": members, "name": "scratch", "uuid": "5c1f1b62-0d1e-4f9b-9d3e-0b2f1b7f8d11"}
        st["fs"][md] = {"type": "xfs", "label": pre.get("label", "mf-scratch") if isinstance(pre, dict)
                        else "mf-scratch", "uuid": "0e2a4a39-6a49-4c83-9d69-5b1a3b7d2c10"}
    for name, version in cfg.get("preinstalled", {}).items():
        mfshim.install(st, name, version)
    st["reboot_required"] = False
    return st


def new_fleet(fixtures_profile: str, base_dir: str | os.PathLike[str] | None = None) -> HostFleet:
    """An empty fleet: its folder, client key, authorized_keys and shim bin dir (no hosts yet)."""
    if fixtures_profile not in PROFILES:
        raise HarnessError(f"unknown fixtures profile {fixtures_profile!r}; known: {sorted(PROFILES)}")
    if not FIXTURES.is_dir():
        raise HarnessError(f"fixtures folder {FIXTURES} is missing from this checkout")
    areas.note("sim host")
    sshd = ensure_sshd()
    base = Path(tempfile.mkdtemp(prefix="mf-hosts-", dir=base_dir))
    os.chmod(base, 0o755)
    fleet = HostFleet(base, sshd, fixtures_profile)
    try:
        _readable_copy(FIXTURES, fleet.fixtures_dir)
        _keygen(fleet.client_key, "metalfleet-test-client")
        (base / "authorized_keys").write_text(Path(f"{fleet.client_key}.pub").read_text())
        os.chmod(base / "authorized_keys", 0o644)
        bin_dir = fleet.bin_dir
        bin_dir.mkdir()
        shim = bin_dir / "mfshim.py"
        shutil.copy(SHIM, shim)
        os.chmod(shim, 0o755)
        shutil.copy(SHIM.parent / "sudo", bin_dir / "sudo")
        os.chmod(bin_dir / "sudo", 0o755)
        for name in SHIM_NAMES:
            if name != "sudo":
                (bin_dir / name).symlink_to("mfshim.py")
        os.chmod(bin_dir, 0o755)
    except BaseException:
        fleet.stop()
        raise
    return fleet


def _readable_copy(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest`` with world-readable modes (the hosts' user may not read the clone)."""
    shutil.copytree(src, dest)
    for dirpath, _dirnames, filenames in os.walk(dest):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)


def start_hosts(
    n: int,
    fixtures_profile: str = "p5",
    *,
    config: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    name_prefix: str = "node",
    vm: bool = False,
    users: tuple[str, ...] | None = None,
) -> HostFleet:
    """Start ``n`` simulated hosts with the given fixture profile; returns a :class:`HostFleet`.

    ``config``: extra config.json values for every host, or a function of the host index (e.g.
    ``lambda i: {"gpu": {"count": 7}} if i == 2 else {}``).

    ``vm=True``: VM-mode hosts (tests/support/hosts/vm.py): each its own machine at "/" (overlay root,
    private namespaces), logins ``users`` (default ubuntu, mfnode), ``Host.fs_root`` "/".
    """
    if vm:
        from .vm import VM_USERS, start_vm_hosts

        return start_vm_hosts(n, fixtures_profile, config=config, base_dir=base_dir, name_prefix=name_prefix,
                              users=users or VM_USERS)
    fleet = new_fleet(fixtures_profile, base_dir)
    prof = PROFILES[fixtures_profile]
    bin_dir = fleet.bin_dir
    try:
        for attempt in range(20):
            fleet_octet = next(_FLEET_SEQ) % 250 + 1
            try:
                _start_all(fleet, n, prof, config, name_prefix, fleet_octet, bin_dir)
                break
            except _AddressInUse:
                for h in fleet.hosts:
                    h.stop()
                for h in fleet.hosts:
                    shutil.rmtree(h.root, ignore_errors=True)
                    shutil.rmtree(h.sshd_dir, ignore_errors=True)
                fleet.hosts = []
                if attempt == 19:
                    raise
        fleet.write_known_hosts()
        fleet.write_fabric()
        fleet._watcher = threading.Thread(target=fleet._watch, name="mf-reboot-watch", daemon=True)
        fleet._watcher.start()
        return fleet
    except BaseException:
        fleet.stop()
        raise


def _start_all(fleet: HostFleet, n: int, prof: dict[str, Any], config: Any, prefix: str, octet: int,
               bin_dir: Path) -> None:
    import pwd

    pw = pwd.getpwnam(USER)
    for i in range(n):
        name = f"{prefix}{i}"
        root = fleet.base / name
        sshd_dir = fleet.base / f".{name}.sshd"
        for d in ("etc/modules-load.d", "etc/mdadm", "proc/sys/kernel/random", "run", "var/run", "log", "opt", "tmp"):
            (root / d).mkdir(parents=True, exist_ok=True)
        sshd_dir.mkdir(mode=0o700)
        cfg = host_config(fleet.profile, config(i) if callable(config) else config, fixtures_dir=fleet.fixtures_dir)
        (root / "config.json").write_text(json.dumps(cfg, indent=1))
        (root / "etc" / "os-release").write_text(UBUNTU_2204)
        (root / "etc" / "fstab").write_text("LABEL=cloudimg-rootfs\t/\t ext4\tdiscard,errors=remount-ro\t0 1\n")
        (root / "state.json").write_text(json.dumps(_initial_state(cfg)))
        with mfshim.state(str(root)) as st:  # writes proc views and a boot id
            import uuid

            st["boot_id"] = str(uuid.uuid4())
        (root / "log" / "invocations.jsonl").write_text("")
        for dirpath, _dirnames, filenames in os.walk(root):
            for entry in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
                os.chown(entry, pw.pw_uid, pw.pw_gid)
        key_line = _keygen(sshd_dir / "ssh_host_ed25519_key", f"{name}-hostkey")
        address = f"127.{100 + _WORKER_N % 100}.{octet}.{i + 1}"
        h = SimHost(name=name, address=address, port=22, root=root, sshd_dir=sshd_dir, host_key=key_line,
                    fleet=fleet, index=i, traits=dict(prof.get("traits", {})), provider=prof.get("provider"),
                    offering=prof.get("offering"))
        (sshd_dir / "sshd_config").write_text(_sshd_config(h, fleet, bin_dir))
        fleet.hosts.append(h)
    for h in fleet.hosts:
        h.start()
    for h in fleet.hosts:
        h.wait_listening()


if __name__ == "__main__":  # python -m metalfleet.testing.hosts.harness N PROFILE: start hosts and wait (a demo)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with start_hosts(count, sys.argv[2] if len(sys.argv) > 2 else "p5") as fl:
        for hh in fl:
            print(f"{hh.name} {hh.address}:{hh.port} root={hh.root}")
        print(f"client key {fl.client_key}; known_hosts {fl.known_hosts}; Ctrl-C to stop")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(1)
