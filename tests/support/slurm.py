"""A real Slurm cluster on this machine: Debian's munged, slurmctld and one slurmd per node, for tests.

::

    from metalfleet.testing.slurm import SlurmCluster, fake_devices, local_nodes

    nodes = local_nodes(2)                      # [(name, 127.x.y.z, port)], per-xdist-worker ranges
    gpus = fake_devices(base / "dev", "nvidia", 8)
    with SlurmCluster(base, nodes=nodes, node_lines=[...], gres=f"NodeName=n[0-1] Name=gpu Type=h100 File={gpus}",
                      partition="PartitionName=gpu Nodes=ALL Default=YES State=UP") as cluster:
        cluster.run(["srun", "-N2", "hostname"])
        cluster.nodes()["n0"].state             # "IDLE"
        cluster.reconfigure(node_lines=[...])   # removing a node restarts the daemons (see reconfigure)

The caller gives the config texts metalfleet's own generator produces (the ``NodeName=`` and ``PartitionName=``
lines of slurm.conf, gres.conf, topology.conf); the harness writes the common head of slurm.conf itself
(:func:`head_lines`: paths, ports, auth, plugins, each line with its reason). A ``NodeName=<one of nodes>`` line gets
that node's ``NodeAddr`` and ``Port`` from ``nodes`` (set or replaced), so generator output written for the real
addresses runs here unchanged.

Each daemon runs in the foreground (``-D`` / ``--foreground``) as a child of this process, so :meth:`stop` ends
the pids it started; a job's ``slurmstepd`` detaches into a session of its own, so stop() also cancels the jobs and
ends every process carrying this cluster's ``SLURM_CONF`` (and its descendants), and nothing else on the machine;
:meth:`SlurmCluster.alive` lists what is left (empty after stop). Timings here (2 cores): start (3 nodes) 0.2 s,
stop 0.2 s, ``scontrol reconfigure`` or a restart for added/removed nodes 0.3 s, a resumed node answering 0.8 s.
Needs root (slurmd launches jobs as the submitting user; munged and slurmd check their files' owners) and
the Debian packages ``slurmctld slurmd slurm-client munge`` (tests/support/ensure-slurm.sh installs them).
Verified against Slurm 22.05.8 (Debian bookworm).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from metalfleet.testing import usage as areas

__all__ = ["PROGRAMS", "NodeInfo", "SlurmCluster", "SlurmError", "fake_devices", "head_lines", "local_nodes",
           "missing_programs", "parse_nodes", "site_controller_conf", "site_controller_script"]

#: The programs the harness runs, and the Debian package of each (what ensure-slurm.sh installs).
PROGRAMS = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "sinfo": "slurm-client",
            "scontrol": "slurm-client", "srun": "slurm-client"}

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
_WORKER_N = int(_WORKER[2:]) if _WORKER[2:].isdigit() else 0
#: Each xdist worker's own TCP port range, below Linux's ephemeral range (32768-60999: a client's outgoing connection
#: could take a port between our check and the daemon's bind). The simulated hosts' sshd use port 22.
_PORT_BASE = 20000 + (_WORKER_N % 48) * 250
_PORT_SPAN = 250
#: Ports this process has handed out: a port chosen for a node and not yet bound by its slurmd still tests free.
_HANDED: set[int] = set()
_SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


class SlurmError(RuntimeError):
    """A daemon did not start or a command failed; the message carries the tail of the relevant log."""


def missing_programs() -> dict[str, str]:
    """The programs of :data:`PROGRAMS` not found on PATH or in /usr/sbin, each with its Debian package."""
    return {prog: pkg for prog, pkg in PROGRAMS.items() if _which(prog) is None}


def _which(prog: str) -> str | None:
    found = shutil.which(prog)
    if found:
        return found
    for d in _SBIN:
        p = Path(d) / prog
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_ports(n: int) -> list[int]:
    """``n`` TCP ports free on every address, from this xdist worker's range (started at a random offset, so the
    clusters one worker starts in a row do not reuse a port a closed daemon may still hold)."""
    start = random.randrange(_PORT_SPAN)
    out: list[int] = []
    for k in range(_PORT_SPAN):
        port = _PORT_BASE + (start + k) % _PORT_SPAN
        if port not in _HANDED and _port_free(port):
            _HANDED.add(port)
            out.append(port)
            if len(out) == n:
                return out
    _HANDED.difference_update(out)
    raise SlurmError(f"no {n} free ports in {_PORT_BASE}-{_PORT_BASE + _PORT_SPAN - 1}")


def free_port_block(n: int) -> int:
    """The first of ``n`` consecutive TCP ports free on every address, from this worker's range (for slurmd ports
    given as a base plus the node's index, ``scheduler.node_port_base``)."""
    for _ in range(50):
        first = _PORT_BASE + random.randrange(_PORT_SPAN - n)
        block = range(first, first + n)
        if not any(p in _HANDED for p in block) and all(_port_free(p) for p in block):
            _HANDED.update(block)
            return first
    raise SlurmError(f"no {n} consecutive free ports in {_PORT_BASE}-{_PORT_BASE + _PORT_SPAN - 1}")


def local_nodes(n: int, prefix: str = "n") -> list[tuple[str, str, int]]:
    """``n`` nodes for a cluster on this machine: ``(name, address, port)`` with a loopback address of this
    worker's range (127.<200+worker>.<random>.<i+1>) and a free port each."""
    octet = random.randrange(1, 250)
    ports = free_ports(n)
    return [(f"{prefix}{i}", f"127.{200 + _WORKER_N % 50}.{octet}.{i + 1}", ports[i]) for i in range(n)]


def fake_devices(directory: Path, stem: str, count: int) -> str:
    """Create ``count`` regular files ``directory/<stem>0..`` standing in for GPU device files and return the
    ``File=`` value for gres.conf (``dir/nvidia[0-7]``). Slurm counts a GPU per file (without ``File=`` the count
    registers as 0); a regular file instead of a character device only logs an error."""
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (directory / f"{stem}{i}").touch()
    return f"{directory}/{stem}[0-{count - 1}]" if count > 1 else f"{directory}/{stem}0"


def head_lines(*, base: Path, controller_host: str, controller_address: str, controller_port: int,
               munge_socket: Path, topology: bool) -> list[str]:
    """The common head of slurm.conf, one ``Key=value  # why`` line each (Slurm 22.05, slurm.conf(5))."""
    lines = [
        ("ClusterName=metalfleet", "names the cluster in logs and state; required"),
        (f"SlurmctldHost={controller_host}({controller_address})",
         "slurmctld starts only where its short hostname matches; the address is where daemons and clients reach it"),
        (f"SlurmctldPort={controller_port}", "this worker's own port: parallel test workers each run a controller"),
        ("SlurmUser=root", "the harness runs as root; no slurm account needed on a clean machine"),
        ("SlurmdUser=root", "slurmd must be root to launch jobs as the submitting user"),
        ("AuthType=auth/munge", "the production authentication; munged runs per cluster with its own key"),
        ("CredType=cred/munge", "job credentials signed by the same munged"),
        (f"AuthInfo=socket={munge_socket}", "this cluster's munged, not the system one at /run/munge"),
        (f"StateSaveLocation={base}/state", "controller state (drain reasons survive a restart of slurmctld)"),
        (f"SlurmdSpoolDir={base}/spool/%n", "one spool per node: several slurmd share this machine"),
        (f"SlurmctldPidFile={base}/run/slurmctld.pid", "out of /run, which the system daemons own"),
        (f"SlurmdPidFile={base}/run/slurmd-%n.pid", "one per node (%n: the node's name)"),
        (f"SlurmctldLogFile={base}/log/slurmctld.log", "read by the harness when something fails"),
        (f"SlurmdLogFile={base}/log/slurmd-%n.log", "one log per node"),
        ("SlurmctldDebug=info", "enough to see registrations and reconfigurations"),
        ("SlurmdDebug=info", "the same for the nodes"),
        ("SlurmdParameters=config_overrides",
         "nodes register with the CPUs/memory/GPUs of their NodeName line, not this machine's"),
        ("ProctrackType=proctrack/linuxproc", "tracks job processes by parent pid: no cgroup hierarchy needed"),
        ("TaskPlugin=task/none", "no CPU binding or cgroups: many nodes share this machine's few cores"),
        ("JobAcctGatherType=jobacct_gather/none", "no accounting sampler (it would want cgroups or /proc polling)"),
        ("AccountingStorageType=accounting_storage/none", "no slurmdbd"),
        ("SelectType=select/cons_tres", "allocates GPUs as trackable resources (--gres, --gpus), as production does"),
        ("SelectTypeParameters=CR_Core", "cores are consumable; memory is not, so tiny test jobs need no --mem"),
        ("GresTypes=gpu", "the generic resource the nodes' Gres=gpu:<model>:<n> lines declare"),
        ("MpiDefault=none", "srun starts plain tasks; no PMI plugin (pmix errors in the logs are harmless)"),
        ("SwitchType=switch/none", "no interconnect switch plugin"),
        ("ReturnToService=2", "a DOWN node (e.g. after its slurmd restarted) returns when it registers valid config"),
        ("SlurmctldTimeout=10", "short: tests restart the controller"),
        ("SlurmdTimeout=30", "a node not answering for 30 s goes DOWN (tests never wait for that)"),
        ("MessageTimeout=5", "loopback round trips take milliseconds; fail fast"),
        ("TCPTimeout=2", "connection attempts to a stopped daemon fail fast"),
        ("KillWait=2", "seconds between SIGTERM and SIGKILL for a job at its time limit or cancelled"),
        ("MinJobAge=2", "finished jobs leave the controller's memory soon"),
        ("InactiveLimit=0", "srun clients are never timed out"),
        ("HealthCheckInterval=0", "no HealthCheckProgram here"),
        ("SchedulerType=sched/backfill", "the default scheduler, as production runs it"),
    ]
    if topology:
        lines.append(("TopologyPlugin=topology/tree", "topology.conf gives the switches the nodes hang off"))
    return [f"{k:<44}# {why}" for k, why in lines]


@dataclass(frozen=True)
class NodeInfo:
    """One node as ``scontrol show nodes --oneliner`` reports it; ``fields`` holds every key."""

    name: str
    state: str
    reason: str
    gres: str
    features: str
    fields: Mapping[str, str] = field(default_factory=dict)


_FIELD = re.compile(r" (?=[A-Z][A-Za-z_/:.]*=)")
_REASON_STAMP = re.compile(r"\s*\[[^\]]*@[^\]]*\]$")


def parse_nodes(text: str) -> dict[str, NodeInfo]:
    """Parse ``scontrol show nodes --oneliner`` (one node per line, ``Key=value`` fields; a Reason may hold spaces
    and ends with ``[user@time]``, which is dropped)."""
    out: dict[str, NodeInfo] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("NodeName="):
            continue
        fields: dict[str, str] = {}
        for part in _FIELD.split(line):
            key, _, value = part.partition("=")
            fields[key] = value.strip()
        reason = _REASON_STAMP.sub("", fields.get("Reason", ""))
        name = fields["NodeName"]
        out[name] = NodeInfo(name=name, state=fields.get("State", ""), reason=reason,
                             gres=fields.get("Gres", ""), features=fields.get("AvailableFeatures", ""),
                             fields=fields)
    return out


def _with_address(line: str, addresses: Mapping[str, tuple[str, int]]) -> str:
    """A ``NodeName=X ...`` line with X's NodeAddr and Port set from the harness (others unchanged)."""
    tokens = line.split()
    if not tokens or not tokens[0].startswith("NodeName="):
        return line
    name = tokens[0].partition("=")[2]
    if name not in addresses:
        return line
    address, port = addresses[name]
    kept = [t for t in tokens[1:] if not t.startswith(("NodeAddr=", "Port=", "NodeHostname="))]
    return " ".join([tokens[0], f"NodeAddr={address}", f"Port={port}", *kept])


class SlurmCluster:
    """munged, slurmctld and one slurmd per node, configured from the given texts, under ``base_dir``.

    ``nodes``: ``(name, address, port)`` per slurmd to run (see :func:`local_nodes`); ``node_lines``: the
    ``NodeName=`` lines; ``partition``: the ``PartitionName=`` line(s); ``gres`` / ``topology``: the whole
    gres.conf / topology.conf (topology also switches on ``TopologyPlugin=topology/tree``).
    """

    def __init__(self, base_dir: Path, *, nodes: Sequence[tuple[str, str, int]], node_lines: Sequence[str] | str,
                 partition: Sequence[str] | str = "PartitionName=batch Nodes=ALL Default=YES MaxTime=INFINITE "
                                                   "State=UP",
                 gres: str = "", topology: str = "", controller_address: str = "127.0.0.1",
                 controller_port: int | None = None) -> None:
        self.base = Path(base_dir)
        self.controller_host = socket.gethostname().split(".")[0]
        self.controller_address = controller_address
        self.controller_port = controller_port
        self._nodes = {name: (address, port) for name, address, port in nodes}
        self._node_lines = _lines(node_lines)
        self._partition = _lines(partition)
        self._gres = gres
        self._topology = topology
        self.conf = self.base / "etc" / "slurm.conf"
        self._socket_dir: Path | None = None
        self.munge_socket = Path("/nonexistent")  # set by start()
        self._munged: subprocess.Popen[bytes] | None = None
        self._ctld: subprocess.Popen[bytes] | None = None
        self._slurmd: dict[str, subprocess.Popen[bytes]] = {}
        self.started: list[int] = []  # the daemons' pids (and, once stop() ran, the job steps'), for alive()
        self.timings: dict[str, float] = {}

    # -- configuration ---------------------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm clients: this cluster's slurm.conf."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _write_configs(self) -> None:
        assert self.controller_port is not None
        etc = self.base / "etc"
        head = head_lines(base=self.base, controller_host=self.controller_host,
                          controller_address=self.controller_address, controller_port=self.controller_port,
                          munge_socket=self.munge_socket, topology=bool(self._topology.strip()))
        body = [_with_address(line, self._nodes) for line in self._node_lines]
        text = "\n".join(["# written by metalfleet.testing.slurm", *head, "", *body, *self._partition, ""])
        (etc / "slurm.conf").write_text(text)
        (etc / "gres.conf").write_text(self._gres.rstrip() + "\n" if self._gres.strip() else "")
        topo = etc / "topology.conf"
        if self._topology.strip():
            topo.write_text(self._topology.rstrip() + "\n")
        else:
            topo.unlink(missing_ok=True)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> SlurmCluster:
        """Start munged, slurmctld and every slurmd; return once ``sinfo`` answers and every node has registered."""
        missing = missing_programs()
        if missing:
            raise SlurmError(f"missing programs {sorted(missing)} (Debian packages "
                             f"{sorted(set(missing.values()))}: run tests/support/ensure-slurm.sh)")
        areas.note("sim host")
        t0 = time.monotonic()
        for d in ("etc", "state", "spool", "run", "log", "munge"):
            (self.base / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.base / "munge", 0o700)
        # munged wants its socket's directory (and every parent) executable by all, which a pytest tmp_path (0700)
        # is not: the socket gets a 0755 directory of its own in /tmp, removed by stop().
        self._socket_dir = Path(tempfile.mkdtemp(prefix="mf-munge-"))
        os.chmod(self._socket_dir, 0o755)
        self.munge_socket = self._socket_dir / "munge.socket"
        chosen = self.controller_port
        try:
            self._start_munged()
            for attempt in range(5):
                self.controller_port = chosen or free_ports(1)[0]
                self._write_configs()
                try:
                    self._start_ctld(timeout)
                    break
                except SlurmError as exc:  # a port taken between the check and the bind: another one
                    if chosen or attempt == 4 or "Address already in use" not in str(exc):
                        raise
            for name in self._nodes:
                self._start_slurmd(name)
            self.wait_registered(timeout=timeout)
        except BaseException:
            self.stop()
            raise
        self.timings["start"] = time.monotonic() - t0
        return self

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=self.env, start_new_session=True)
        self.started.append(proc.pid)
        return proc

    def _start_munged(self) -> None:
        key = self.base / "munge" / "munge.key"
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
            os.chmod(key, 0o400)
        m = self.base / "munge"
        self._munged = self._spawn([_exe("munged"), "--foreground", f"--key-file={key}",
                                    f"--socket={self.munge_socket}", f"--pid-file={m}/munged.pid",
                                    f"--seed-file={m}/munged.seed", f"--log-file={m}/munged.log",
                                    "--num-threads=2"], self.base / "log" / "munged.out")
        _poll(lambda: self.munge_socket.exists(), 10.0,
              lambda: f"munged did not create {self.munge_socket}: {_tail(m / 'munged.log')}", self._munged)

    def _start_ctld(self, timeout: float) -> None:
        self._ctld = self._spawn([_exe("slurmctld"), "-D", "-f", str(self.conf)], self.base / "log" / "slurmctld.out")

        def answers() -> bool:
            return self.run(["scontrol", "ping"], check=False, timeout=5).returncode == 0 and \
                self.run(["sinfo", "-h"], check=False, timeout=5).returncode == 0

        _poll(answers, timeout, lambda: f"slurmctld not answering: {_tail(self.base / 'log' / 'slurmctld.log')}",
              self._ctld)

    def _start_slurmd(self, name: str) -> None:
        (self.base / "spool" / name).mkdir(parents=True, exist_ok=True)
        self._slurmd[name] = self._spawn([_exe("slurmd"), "-D", "-f", str(self.conf), "-N", name],
                                         self.base / "log" / f"slurmd-{name}.out")

    def wait_registered(self, names: Iterable[str] | None = None, timeout: float = 30.0) -> dict[str, NodeInfo]:
        """Poll until every node in ``names`` (default: all) answers: a state without UNKNOWN, NOT_RESPONDING or
        DOWN (``*`` suffix in sinfo). Returns :meth:`nodes`."""
        wanted = set(self._nodes if names is None else names)
        seen: dict[str, NodeInfo] = {}

        def ready() -> bool:
            nonlocal seen
            for name, proc in self._slurmd.items():
                if proc.poll() is not None:
                    raise SlurmError(f"slurmd of {name} exited {proc.returncode}: "
                                     f"{_tail(self.base / 'log' / f'slurmd-{name}.log')}")
            seen = self.nodes()
            invalid = {n: seen[n].reason for n in wanted if n in seen and "INVALID_REG" in seen[n].state}
            if invalid:  # slurmd registered with less than its NodeName line: it will not become ready
                raise SlurmError(f"nodes refused at registration: {invalid}")
            return all(n in seen and _responding(seen[n].state) for n in wanted)

        _poll(ready, timeout, lambda: f"nodes not registered: "
              f"{ {n: (seen[n].state, seen[n].reason) if n in seen else 'absent' for n in sorted(wanted)} }; "
              f"{_tail(self.base / 'log' / 'slurmctld.log')}")
        return seen

    def stop(self, timeout: float = 10.0) -> None:
        """End every process this cluster started, each by its pid: its jobs first (``scancel``, so the job-step
        daemons finish them), then the slurmds, slurmctld and munged (SIGTERM, SIGKILL after ``timeout``), then any
        process still carrying this cluster's ``SLURM_CONF`` and its descendants (a ``slurmstepd`` detaches into a
        session of its own, so killing its slurmd does not end it)."""
        if self._ctld is not None and self._ctld.poll() is None:
            with contextlib.suppress(SlurmError, subprocess.TimeoutExpired):
                self._cancel_jobs(timeout=5.0)
        steps = _with_descendants(self._strays())  # read while they still have their environment
        self.started.extend(p for p in steps if p not in self.started)
        for proc in [*self._slurmd.values(), self._ctld, self._munged]:
            if proc is not None:
                _end(proc, timeout)
        self._slurmd.clear()
        self._ctld = self._munged = None
        for pid in _with_descendants([*steps, *self._strays()]):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _poll(lambda: not self.alive(), 5.0, lambda: f"still alive after SIGKILL: {self.alive()}")
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)

    def _cancel_jobs(self, timeout: float) -> None:
        jobs = self.run(["squeue", "-h", "-o", "%i"], timeout=5).stdout.split()
        if not jobs:
            return
        self.run(["scancel", *jobs], check=False, timeout=5)
        with contextlib.suppress(SlurmError):
            _poll(lambda: not self.run(["squeue", "-h", "-o", "%i"], timeout=5).stdout.strip(), timeout,
                  lambda: "jobs still queued")

    def _strays(self) -> list[int]:
        """Live processes other than this one whose environment holds this cluster's SLURM_CONF."""
        marker = f"SLURM_CONF={self.conf}".encode()
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                env = Path(f"/proc/{entry}/environ").read_bytes()
            except OSError:
                continue
            if marker in env.split(b"\0") and _stat(int(entry))[0] != "Z":
                out.append(int(entry))
        return out

    def alive(self) -> list[int]:
        """Processes of this cluster still alive: the daemons :attr:`started`, their session members, and anything
        carrying its SLURM_CONF (job steps, tasks); empty after :meth:`stop`."""
        out = set(self._strays())
        for pid in self.started:
            if _stat(pid)[0] not in ("Z", "X"):
                out.add(pid)
            out.update(_session_members(pid))
        return sorted(out)

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- commands ----------------------------------------------------------------------------------------------

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client (sinfo, scontrol, srun, ...) against this cluster (``SLURM_CONF`` set)."""
        full = {**self.env, **(env or {})}
        proc = subprocess.run(list(argv), env=full, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip() or proc.stdout}")
        return proc

    def nodes(self) -> dict[str, NodeInfo]:
        """Every node the controller knows, from ``scontrol show nodes --oneliner``."""
        proc = self.run(["scontrol", "show", "nodes", "--oneliner"], check=False, timeout=10)
        if proc.returncode != 0 and "No nodes in the system" not in proc.stdout + proc.stderr:
            raise SlurmError(f"scontrol show nodes: {proc.stderr.strip()}")
        return parse_nodes(proc.stdout)

    def reasons(self) -> dict[str, tuple[str, str]]:
        """``sinfo -R`` per node: name -> (state, reason), for nodes that are down, drained or failing."""
        proc = self.run(["sinfo", "-R", "-N", "-h", "-o", "%N|%T|%E"])
        out: dict[str, tuple[str, str]] = {}
        for line in proc.stdout.splitlines():
            parts = line.split("|", 2)
            if len(parts) == 3:
                out[parts[0].strip()] = (parts[1].strip(), parts[2].strip())
        return out

    def reconfigure(self, *, nodes: Sequence[tuple[str, str, int]] | None = None,
                    node_lines: Sequence[str] | str | None = None, partition: Sequence[str] | str | None = None,
                    gres: str | None = None, topology: str | None = None, timeout: float = 30.0) -> str:
        """Rewrite the configs and apply them; returns how: ``"reconfigure"`` or ``"restart"``.

        Slurm 22.05, scontrol(1) on ``reconfigure``: "The slurmctld daemon and all slurmd daemons must also be
        restarted if nodes are added to or removed from the cluster." So when the set of nodes changes (``nodes``
        given and different) the slurmds of removed nodes stop, slurmctld restarts (its saved state keeps the
        other nodes' drain reasons), and every slurmd restarts; otherwise ``scontrol reconfigure`` re-reads the
        files in place (node attributes, partitions, gres.conf, topology.conf).
        """
        t0 = time.monotonic()
        old = set(self._nodes)
        if nodes is not None:
            self._nodes = {name: (address, port) for name, address, port in nodes}
        if node_lines is not None:
            self._node_lines = _lines(node_lines)
        if partition is not None:
            self._partition = _lines(partition)
        if gres is not None:
            self._gres = gres
        if topology is not None:
            self._topology = topology
        self._write_configs()
        if set(self._nodes) == old:
            self.run(["scontrol", "reconfigure"])
            self.wait_registered(timeout=timeout)
            how = "reconfigure"
        else:
            for proc in self._slurmd.values():
                _end(proc, 10.0)
            self._slurmd.clear()
            if self._ctld is not None:
                _end(self._ctld, 10.0)
            self._start_ctld(timeout)
            for name in self._nodes:
                self._start_slurmd(name)
            self.wait_registered(timeout=timeout)
            how = "restart"
        self.timings[f"reconfigure:{how}"] = time.monotonic() - t0
        return how

    def add_nodes(self, nodes: Sequence[tuple[str, str, int]], node_lines: Sequence[str] | str, gres: str = "",
                  topology: str | None = None, timeout: float = 30.0) -> str:
        """Add nodes (their slurmd, ``NodeName=`` lines and gres.conf lines; partition lines naming nodes are the
        caller's): a restart, see :meth:`reconfigure`."""
        merged = [*((n, a, p) for n, (a, p) in self._nodes.items()), *nodes]
        return self.reconfigure(nodes=merged, node_lines=[*self._node_lines, *_lines(node_lines)],
                                gres="\n".join([self._gres.rstrip(), gres]) if gres.strip() else None,
                                topology=topology, timeout=timeout)

    def remove_nodes(self, names: Iterable[str], topology: str | None = None, timeout: float = 30.0) -> str:
        """Remove nodes (their slurmd, ``NodeName=`` lines and single-node gres.conf lines; ``topology``: the new
        topology.conf, default unchanged; partition lines naming them are the caller's):
        a restart, see :meth:`reconfigure`."""
        gone = set(names)
        kept = [(n, a, p) for n, (a, p) in self._nodes.items() if n not in gone]
        lines = [ln for ln in self._node_lines if _line_node(ln) not in gone]
        gres = "\n".join(ln for ln in _lines(self._gres) if _line_node(ln) not in gone)
        return self.reconfigure(nodes=kept, node_lines=lines, gres=gres, topology=topology, timeout=timeout)


def _lines(text: Sequence[str] | str) -> list[str]:
    """Config lines from one text (bootstrap/slurm.py's generators return newline-joined text) or a list."""
    return [ln for ln in (text.splitlines() if isinstance(text, str) else text) if ln.strip()]


def _line_node(line: str) -> str | None:
    tokens = line.split()
    return tokens[0].partition("=")[2] if tokens and tokens[0].startswith("NodeName=") else None


def _responding(state: str) -> bool:
    flags = set(state.replace("*", "+NOT_RESPONDING").split("+"))
    return not flags & {"UNKNOWN", "NOT_RESPONDING", "DOWN", "FUTURE"}


def _exe(prog: str) -> str:
    path = _which(prog)
    if path is None:
        raise SlurmError(f"{prog} not found (Debian package {PROGRAMS.get(prog, prog)})")
    return path


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no {path})"


def _poll(cond: Callable[[], bool], timeout: float, message: Callable[[], str],
          proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll ``cond()`` every 50-200 ms until true; fail with ``message()`` on timeout or when ``proc`` exits."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        if cond():
            return
        if proc is not None and proc.poll() is not None:
            argv = proc.args if isinstance(proc.args, list) else [proc.args]
            raise SlurmError(f"{Path(str(argv[0])).name} exited {proc.returncode}: {message()}")
        if time.monotonic() > deadline:
            raise SlurmError(f"timed out after {timeout}s: {message()}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.2)


def _stat(pid: int) -> tuple[str, int, int]:
    """(state, ppid, session id) of a live pid, ("X", 0, 0) when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return ("X", 0, 0)
    return (fields[0], int(fields[1]), int(fields[3]))


def _pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _session_members(sid: int) -> list[int]:
    """Live pids in session ``sid`` (each daemon leads its own session: start_new_session)."""
    return [p for p in _pids() if (st := _stat(p))[2] == sid and st[0] not in ("Z", "X")]


def _with_descendants(roots: Iterable[int]) -> list[int]:
    """``roots`` and every live descendant (by parent pid)."""
    children: dict[int, list[int]] = {}
    for p in _pids():
        children.setdefault(_stat(p)[1], []).append(p)
    out: list[int] = []
    todo = list(roots)
    while todo:
        p = todo.pop()
        if p not in out:
            out.append(p)
            todo.extend(children.get(p, []))
    return out


def _end(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the daemon, wait, then SIGKILL it and whatever else is left in its session (slurmstepd)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(5)
    for pid in _session_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------------------------------------------
# A site's own controller, for nodes that join it (scheduler.join)


def site_controller_conf(*, hostname: str, address: str, port: int, partition: str, feature: str,
                         max_nodes: int = 64) -> str:
    """slurm.conf of a controller that is not metalfleet's and that takes dynamic nodes (Slurm 22.05): what a site
    has to have for ``scheduler.join``, each line with its reason (https://slurm.schedmd.com/dynamic_nodes.html,
    configless_slurm.html, slurm.conf(5)). The daemons' paths are Debian's defaults, as on any of the site's nodes."""
    lines = [
        ("ClusterName=site", "the site's cluster; the joined nodes take whatever it is called"),
        (f"SlurmctldHost={hostname}({address})", "where slurmctld runs and is reached"),
        (f"SlurmctldPort={port}", "this worker's own port: parallel test workers each run a controller"),
        (f"SlurmdPort={port + 1}", "every node's slurmd: dynamic nodes cannot have a port of their own "
                                   "(slurmd(8) --conf: \"NodeName and Port are not supported\")"),
        ("SlurmUser=root", "as on the simulated hosts, whose every user is root of its namespace"),
        ("AuthType=auth/munge", "nodes authenticate with the site's munge key"),
        ("CredType=cred/munge", ""),
        ("SlurmctldParameters=enable_configless", "slurmd --conf-server fetches slurm.conf and gres.conf from here "
                                                  "(configless_slurm.html)"),
        (f"MaxNodeCount={max_nodes}", "dynamic_nodes.html: \"Set to the number of possible nodes that can be active "
                                      "in a system at a time\""),
        ("TreeWidth=65533", "dynamic_nodes.html: \"TreeWidth must be disabled (i.e. set to 65533) for dynamic "
                            "environments\""),
        ("SelectType=select/cons_tres", "dynamic_nodes.html: \"Dynamic nodes are only supported with cons_tres\""),
        ("SelectTypeParameters=CR_Core", ""),
        ("GresTypes=gpu", "the nodes' Gres=gpu:<model>:<n>"),
        ("CommunicationParameters=NoInAddrAny",
         "the simulated hosts share this machine's network: each slurmd binds its own host's address on SlurmdPort"),
        ("SlurmdParameters=config_overrides", "the hosts' simulated CPUs, not this machine's, as configured"),
        ("ProctrackType=proctrack/linuxproc", "no writable cgroup filesystem on the simulated hosts"),
        ("TaskPlugin=task/none", ""),
        ("StateSaveLocation=/var/spool/slurmctld", "Debian's defaults, as on the site's nodes"),
        ("SlurmdSpoolDir=/var/spool/slurmd", ""),
        ("SlurmctldPidFile=/run/slurmctld.pid", ""),
        ("SlurmdPidFile=/run/slurmd.pid", ""),
        ("SlurmctldLogFile=/var/log/slurmctld.log", ""),
        ("SlurmdLogFile=/var/log/slurmd.log", ""),
        ("ReturnToService=2", ""),
        ("MpiDefault=none", ""),
        (f"NodeSet=ns_joined Feature={feature}", "dynamic_nodes.html: dynamic nodes go into partitions \"by using "
                                                 "the partition's nodes ALL keyword or NodeSets and specifying a "
                                                 "feature on the nodes\""),
        (f"PartitionName={partition} Nodes=ns_joined Default=YES MaxTime=INFINITE State=UP", ""),
    ]
    return "".join((f"# {why}\n" if why else "") + f"{line}\n" for line, why in lines)


def site_controller_script(*, conf: str, munge_key: bytes, gres: str, submit_host: str) -> str:
    """The shell script that makes a simulated host the site's controller, as its admins would (Debian's packages,
    the site's munge key, slurm.conf and gres.conf, the daemons enabled), for ``sh -c`` as root there.

    ``submit_host``: the host's own name, made to resolve to 127.0.0.1. The simulated hosts share this machine's
    network, so every connection between them comes from 127.0.0.1; with NoInAddrAny srun listens on the address
    its host's name resolves to, and the tasks of a job connect back to the address srun's request came from."""
    import base64
    import shlex

    key = shlex.quote(base64.b64encode(munge_key).decode())
    return "\n".join([
        "set -e",
        "apt-get install -y munge slurmctld slurm-client >/dev/null",
        "mkdir -p /etc/munge /etc/slurm /var/spool/slurmctld",
        f"echo {key} | base64 -d > /etc/munge/munge.key",
        "chmod 0400 /etc/munge/munge.key",
        f"cat > /etc/slurm/slurm.conf <<'EOF'\n{conf}EOF",
        f"cat > /etc/slurm/gres.conf <<'EOF'\n{gres.rstrip()}\nEOF",
        f"echo {shlex.quote(f'127.0.0.1 localhost {submit_host}')} > /etc/hosts",
        "systemctl enable --now munge",
        "systemctl enable --now slurmctld",
        "for i in $(seq 100); do scontrol ping >/dev/null 2>&1 && exit 0; sleep 0.3; done",
        "tail -5 /var/log/slurmctld.log >&2; exit 1",
    ])
