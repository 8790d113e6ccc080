#!/usr/bin/python3 -IS
"""Multi-call shim that stands in for a GPU server's system tools on a simulated host.

Installed as one symlink per tool name (apt-get, dpkg-query, systemctl, modprobe, lsmod, nvidia-smi,
ibstat, fi_info, mdadm, mkfs.xfs, mount, lsblk, nvme, reboot, sudo, curl, git, make, ...) in a
directory that the simulated host's sshd puts first on PATH. Runs under the system /usr/bin/python3
(standard library only, -I -S: no user site, no pyenv).

Per host (``$MF_ROOT``, the host's sandbox, which is also its filesystem root for the steps unless
``$MF_FS_ROOT`` names another, e.g. ``/`` on a VM-mode host; see tests/support/hosts/vm.py):
  config.json   behaviour, editable by tests: fixture profile, GPU count, NVMe, faults, delays
  state.json    what a real install would leave: packages, modules, units, arrays, filesystems, mounts
  log/invocations.jsonl   one JSON line per shim call: {"t", "argv"}
  proc/mounts, proc/mdstat, proc/sys/kernel/random/boot_id   kept in step with state.json
  proc/meminfo  MemTotal from config.json ``memory_gib`` (absent when it is null), rewritten with the views
                above (a config change shows on the next state write: ``with host.edit_state(): pass``)

Tools print real captured output from ``$MF_FIXTURES`` (the fleet's copy of metalfleet/testing/fixtures) where
one exists for the call and the call does not depend on the arguments (nvidia-smi table and -q, ibstat,
npu-smi); structured calls the engine parses (``--query-gpu``, ``lsblk --json``, ``nvme list -o json``) are
synthesised in the real format.

Outputs that must answer the actual arguments are generated from the host's simulated hardware
(config.json ``gpu`` and ``fabric``: kind, ``nics``, ``nic_gbps``), never replayed:
  fi_info -p efa        one RDM and one DGRAM entry per EFA device of ``fabric`` (``fi_getinfo: -61`` when
                        there is none); only once the EFA installer ran
  all_reduce_perf & co  nccl-tests' output for the options given (-b/-e/-i/-f sizes, -g/-t GPUs and threads,
                        -d/-o types and ops, -c/-n/-w/-m/-G/-z/-r, NCCL_TESTS_MIN_BW): the header, one device
                        line per rank naming the host's GPU model, the size table, out-of-bounds and average
                        lines; a CUDA failure when the ranks need more GPUs than the host has or the driver is
                        not loaded. With NCCL_DEBUG=INFO every rank's set-up lines name the transport: NET/OFI
                        (aws-ofi-nccl, "found N nics") on EFA once the EFA installer put the plugin in place,
                        NET/IB on InfiniBand/RoCE/eRDMA over the Active ports of the host's ibstat
                        (NCCL_IB_HCA, NCCL_IB_DISABLE honoured), otherwise
                        NET/Socket; NVLS lines on NVSwitch GPUs that have it (NCCL_NVLS_ENABLE=0 turns it off).
  mpirun                Open MPI's command line (-np/-n/-c, -N/--npernode, --hostfile/--machinefile, -H/--host,
                        -x NAME[=VALUE], --mca, --oversubscribe, --allow-run-as-root): the job is laid out
                        over the hosts, and the program runs once, here, as rank 0 of it (OMPI_COMM_WORLD_SIZE,
                        MF_MPI_NODES; ``-x`` values such as NCCL_IB_HCA reach its env), so an MPI-built
                        nccl-tests prints the whole job's output (a build without MPI prints one 1-rank run per
                        process, interleaved). Each node of the job answers from its own simulated hardware
                        through the fleet's world file (below); a node the world does not know, or every node
                        where there is no world file, is taken to have this node's hardware.

The fabric between hosts (the world file: ``$MF_FABRIC``, else ``../fabric/world.json`` beside ``$MF_ROOT``; the
harness writes it, see HostFleet.set_switches; absent: every node is this node, as a lone sandbox has it):
  {"hosts": {"<address>": {"name": "node0", "root": "<its sandbox>", "switch": "leaf0"}, ...},
   "switches": {"leaf0": {}, "leaf1": {"scale": 0.5, "min_nodes": 3}},
   "counters": {"<address>/<device>": jobs that flapping NIC took part in}}
The launcher reads every member's config.json, state.json and ibstat through ``root``; ``counters`` is updated
under an fcntl lock (``world.json.lock``) as parallel pair jobs count at once. The model (``job_net``,
``flapped``) is pure, shared with tests/acceptance/_replay.py's in-process world.

The nccl-tests bandwidth model (``nccl_model``), and where each number comes from:
  one node, NVLink      peak busbw = NVLinks x GB/s per link x E. E_NVLS = 1.011 from
                        nccl-tests/p5-aws-batch-mpirun-tagged-table-tail.txt (8x H100; 483.35 GB/s at 16 GiB over
                        18 x 26.562 GB/s; taken as one node: 12.9 us at 8 B, where the two-node EFA captures
                        show ~70 us). E_RING = 0.80 for GPUs without NVLS (A100) and E_PCIE = 0.80 over PCIe
                        Gen4 (25 GB/s) are assumptions: no single-node capture without NVLS exists here.
                        Ramp (latency 15.5 us, K = 7.9 MB, p = 0.5) fitted to the same capture's rows.
  several nodes         algbw = min(one-node figure, per-node network GB/s x E_NET / (2(n-1)/n)), over the
                        slowest member's one-node figure. Per-node network GB/s = rails x the slowest rail of any
                        member (NCCL spreads its channels evenly over the NICs, so the slowest paces the ring):
                        on IB/RoCE the rails are the Active ports NCCL picks from each member's ibstat, narrowed
                        by NCCL_IB_HCA (one name: a single-rail run, one NIC of each member), the fewest of any
                        member; on EFA the ``fabric.nics`` devices rdmap<79+i>s0 (aws-ofi-nccl uses them all; no
                        per-NIC selection is simulated). A member without RDMA makes it a socket job.
                        E_NET efa = 1.22: nccl-tests/p5-2node-16xh100-efa-ofi-nccl2.22-*.txt (488.14 GB/s busbw
                        at 16 GiB over 32 x 100 Gb/s), ramp (66 us, 63 MB, 0.7) fitted to its rows; ib (also
                        RoCE and eRDMA) = 0.91: nccl-tests/10node-80xh100-*.txt (364.07 GB/s over 8 x 400 Gb/s;
                        the DGX A100 captures give 0.94-0.96), ramp (25 us, 20 MB, 0.75) fitted to
                        nccl-tests/dgx-a100-2node-*.txt; sockets = 0.30 of the 100 Gb/s front-end NIC, ramp
                        (120 us, 60 MB, 0.7): assumptions, no capture.
  one rank              out-of-place algbw = 0.957 x memory bandwidth (nccl-tests/1x-rtx5090-*: 1715.44 GB/s over
                        1792 GB/s), in-place 0.78 us (nothing to move); busbw 0 by definition.
Rows wobble by +-0.6% (deterministic per host and size). None of these captures is an acceptance baseline's
source (bootstrap/acceptance/baselines.json cites public documents; a test checks it).

The CPUs (config.json ``cpu``: {"model", "sockets", "cores_per_socket", "threads_per_core"}, optional
"numa_nodes" (default: one per socket), "vendor" and "arch" (default: from the model name)):
  lscpu, lscpu -J       util-linux 2.37's summary as a pipe gets it (flat, not the terminal's hierarchy), its
                        field names, order and alignment as in cpu/lscpu-*-util-linux-2.38.1.* (a real capture):
                        Architecture, CPU op-mode(s), Byte Order, CPU(s), On-line CPU(s) list, Vendor ID, Model
                        name, Thread(s) per core, Core(s) per socket, Socket(s), NUMA node(s), NUMA nodeN CPU(s),
                        CPUs numbered as Linux does on x86 (the first thread of every core, then the siblings).
                        Fields the simulation has no value for (family, stepping, flags, caches,
                        vulnerabilities) are left out. ``cpu: null``: no CPU is described and lscpu answers as
                        a missing tool does (rc 127)
  nproc                 coreutils: the CPU count, OMP_NUM_THREADS / OMP_THREAD_LIMIT and --ignore honoured,
                        --all the count itself

Faults (config.json), each small:
  edits.<fixture key>   [[old, new], [old, new, count], ...]: text replacements (``str.replace``) on a capture,
                        e.g. ``{"ibstat": [["State: Active", "State: Down", 1]]}`` for one Down port
  nccl.busbw_scale      multiplies the modelled bandwidth (0.6: a slow node); across nodes the job runs at its
                        slowest member's, launcher or not
  fabric.nic_scale      {"mlx5_4": 0.5}: that rail runs at half its rate (a slow NIC, a downtrained link); it
                        paces every job that uses it
  fabric.flap           {"nic": "mlx5_1", "every": 2}: the link drops every 2nd job that NIC takes part in
                        (counted per host and NIC in the world file): the run prints NCCL's IB completion
                        error (transport/net_ib.cc "NET/IB : Got completion from peer ... with status=12",
                        12 = IBV_WC_RETRY_EXC_ERR, ibverbs' ibv_wc_status) and nccl-tests' NCCLCHECK line
                        "Test NCCL failure ... 'remote process exited or there was a network error / <that
                        warning>'" (ncclGetErrorString(ncclRemoteError)), and exits 3 (testNcclError); on EFA
                        an aws-ofi-nccl request error (its wording approximate)
  switch faults         (the world file) {"scale": 0.5, "min_nodes": 3}: a job with at least 3 members under
                        that switch runs its network at half speed; pairs and smaller groups are untouched
                        (an uplink that only congests under many flows)
  nccl.net: "socket"    NCCL finds no working RDMA path and falls back to sockets ("Using network Socket")
  gpu.count             fewer GPUs: ``nvidia-smi -q`` / ``-q -x`` lose their last GPU sections (a GPU fallen off
                        the bus), ``--query-gpu`` follows, and nccl-tests asked for more fails on that device
  fail.<tool>           the tool (``all_reduce_perf``, ``mpirun``, ``apt-get``, ``curl``) exits non-zero with
                        that message
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# Only cheap modules at the top: every tool call starts this script (re, tarfile, uuid load lazily).

ROOT = os.environ.get("MF_ROOT", "")
#: The node's filesystem as the steps see it (files tools install, fstab, modules-load.d, the
#: reboot-required marker). The sandbox itself by default; "/" on a VM-mode host, whose sandbox only
#: holds the state and whose /proc is the sandbox's proc/ views.
FS = os.environ.get("MF_FS_ROOT", "")
FIXTURES = os.environ.get("MF_FIXTURES", "")
if FS == "/" and os.path.exists("/etc/mf-sim-root"):
    # A VM-mode host knows its own sandbox: a Slurm job's tasks carry the environment of wherever it was
    # submitted (srun --export=ALL), another host's MF_ROOT included.
    with open("/etc/mf-sim-root") as _fh:
        ROOT = _fh.read().strip() or ROOT

# --------------------------------------------------------------------------------------------
# state


def _p(*parts: str) -> str:
    return os.path.join(ROOT, *parts)


def _f(*parts: str) -> str:
    """A path on the node's filesystem."""
    return os.path.join(FS or ROOT, *parts)


def _marker(fs_root: str) -> str:
    """``var/run/reboot-required`` under ``fs_root``, with a ``var/run -> /run`` link taken inside it."""
    var_run = os.path.join(fs_root, "var", "run")
    if os.path.islink(var_run):
        target = os.readlink(var_run)
        var_run = os.path.join(fs_root, target.lstrip("/")) if target.startswith("/") else \
            os.path.join(fs_root, "var", target)
    return os.path.join(var_run, "reboot-required")


def load_config(root: str | None = None) -> dict[str, Any]:
    with open(os.path.join(root or ROOT, "config.json")) as fh:
        cfg: dict[str, Any] = json.load(fh)
    return cfg


class state:
    """Locked read-modify-write of state.json (a dpkg-lock-like mutex for the whole host)."""

    def __init__(self, root: str | None = None, fs_root: str | None = None) -> None:
        self.root = root or ROOT
        self.fs_root = fs_root or (FS or ROOT if root is None else root)
        self.path = os.path.join(self.root, "state.json")

    def __enter__(self) -> dict[str, Any]:
        self.lock = open(os.path.join(self.root, "state.lock"), "a+")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        with open(self.path) as fh:
            st: dict[str, Any] = json.load(fh)
        self.st = st
        return st

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                write_json(self.path, self.st)
                write_views(self.st, self.root, self.fs_root)
        finally:
            self.lock.close()


def write_json(path: str, data: Any) -> None:
    """``data`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def read_state(root: str | None = None) -> dict[str, Any]:
    with open(os.path.join(root or ROOT, "state.json")) as fh:
        st: dict[str, Any] = json.load(fh)
    return st


def write_views(st: dict[str, Any], root: str, fs_root: str | None = None) -> None:
    lines = [" ".join(m) + " 0 0" for m in st["mounts"]]
    _write(os.path.join(root, "proc", "mounts"), "".join(line + "\n" for line in lines))
    md = ["Personalities : [raid0] [linear] [multipath] [raid1] [raid6] [raid5] [raid4] [raid10] "]
    for dev, a in sorted(st["md"].items()):
        members = " ".join(f"{m.rsplit('/', 1)[-1]}[{i}]" for i, m in enumerate(a["members"]))
        md.append(f"{dev.rsplit('/', 1)[-1]} : active raid0 {members}")
        md.append(f"      {a.get('blocks', 15627790336)} blocks super 1.2 512k chunks")
        md.append("      ")
    md.append("unused devices: <none>")
    _write(os.path.join(root, "proc", "mdstat"), "\n".join(md) + "\n")
    _write(os.path.join(root, "proc", "sys", "kernel", "random", "boot_id"), st["boot_id"] + "\n")
    _write_meminfo(root)
    marker = _marker(fs_root or root)
    if st.get("reboot_required"):
        _write(marker, "*** System restart required ***\n")
    elif os.path.exists(marker):
        os.unlink(marker)


def _write_meminfo(root: str) -> None:
    """proc/meminfo from config.json ``memory_gib``; removed when there is none (the file then reads as missing)."""
    path = os.path.join(root, "proc", "meminfo")
    try:
        gib = load_config(root).get("memory_gib")
    except (OSError, ValueError):
        return
    if gib is None:
        if os.path.exists(path):
            os.unlink(path)
        return
    _write(path, meminfo_text(int(float(gib) * (1 << 20))))


def meminfo_text(total_kib: int) -> str:
    """An idle node's /proc/meminfo in the kernel's layout (fs/proc/meminfo.c: the name padded to 16 columns,
    the number right-aligned in 8, then " kB"; HugePages counts without a unit), as
    cpu/proc-meminfo-24gib-kvm-debian12.txt shows it. Nothing is in use and there is no swap (cloud images have
    none); the kernel's own reservations are not simulated, so MemTotal is the installed memory."""
    rows: list[tuple[str, int, bool]] = [
        ("MemTotal", total_kib, True), ("MemFree", total_kib, True), ("MemAvailable", total_kib, True),
        ("Buffers", 0, True), ("Cached", 0, True), ("SwapCached", 0, True), ("SwapTotal", 0, True),
        ("SwapFree", 0, True), ("HugePages_Total", 0, False), ("HugePages_Free", 0, False),
        ("HugePages_Rsvd", 0, False), ("HugePages_Surp", 0, False), ("Hugepagesize", 2048, True)]
    return "".join(f"{name + ':':<16}{value:>8}{' kB' if kb else ''}\n" for name, value, kb in rows)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def fixture(key: str, cfg: dict[str, Any] | None = None) -> str | None:
    cfg = cfg or load_config()
    rel = cfg.get("fixtures", {}).get(key)
    if not rel:
        return None
    with open(os.path.join(FIXTURES or cfg.get("fixtures_dir", ""), rel), encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    for edit in cfg.get("edits", {}).get(key, []):
        old, new = edit[0], edit[1]
        if old not in text:
            err(f"mfshim: edit {old!r} not found in fixture {rel}")
        text = text.replace(old, new, int(edit[2]) if len(edit) > 2 else -1)
    return text


def out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def delay(cfg: dict[str, Any], name: str) -> None:
    seconds = float(cfg.get("delays", {}).get(name, 0) or 0)
    if seconds:
        time.sleep(seconds)


def fault(cfg: dict[str, Any], name: str) -> str | None:
    message: str | None = cfg.get("fail", {}).get(name)
    return message


# --------------------------------------------------------------------------------------------
# packages

#: Units and side effects a package brings (what its postinst would do).
PACKAGE_UNITS = {
    "nvidia-driver": ["nvidia-persistenced"],
    "nvidia-fabricmanager": ["nvidia-fabricmanager"],
    "nvidia-fabric-manager": ["nvidia-fabricmanager"],
    "doca-ofed": ["openibd"],
    "munge": ["munge"],
    "slurmd": ["slurmd"],
    "slurmctld": ["slurmctld"],
}
#: Units whose daemon is real: on a VM-mode host (its own "/", MF_FS_ROOT=/) starting the unit starts the
#: Debian binary, so the Slurm the steps set up really runs. slurmd and slurmctld start as their unit says: the
#: ExecStart of Debian's unit file, as drop-ins in /etc/systemd/system/<unit>.service.d/ override it (``ExecStart=``
#: empty resets it, ``$VAR`` from the EnvironmentFile), and only when its ConditionPathExists holds (else, as
#: systemd does, the start "succeeds" and nothing runs: Debian's slurmd.service wants /etc/slurm/slurm.conf, which
#: a configless node does not have unless a drop-in resets the condition). munged runs as the host's root
#: (``--force``) where Debian's unit runs it as User=munge. Elsewhere (a sandbox host) the unit is state only.
REAL_DAEMONS: dict[str, tuple[tuple[str, ...], str]] = {
    "munge": (("/usr/sbin/munged", "--force"), "/run/munge/munged.pid"),
    "slurmd": (("/usr/sbin/slurmd",), "/run/slurmd.pid"),
    "slurmctld": (("/usr/sbin/slurmctld",), "/run/slurmctld.pid"),
}
#: The host's own kernel procfs (vminit.py REAL_PROC); a Slurm daemon gets it as /proc (configless slurmd reads its
#: fetched config through /proc/self/fd; slurmstepd reads /proc/<pid>/stat) in a mount namespace of its own.
REAL_PROC = "/run/mf-sim/proc"
UNIT_DIRS = ("/lib/systemd/system", "/usr/lib/systemd/system")


def _real(unit: str) -> bool:
    return unit in REAL_DAEMONS and FS == "/" and os.path.exists(REAL_DAEMONS[unit][0][0])


def _unit_file(unit: str) -> dict[str, list[str]]:
    """``Section.Key`` -> values of the unit file and its drop-ins, in order (an empty value resets the list)."""
    import glob

    paths = [p for d in UNIT_DIRS for p in [f"{d}/{unit}.service"] if os.path.exists(p)][:1]
    paths += sorted(glob.glob(f"/etc/systemd/system/{unit}.service.d/*.conf"))
    keys: dict[str, list[str]] = {}
    for path in paths:
        section = ""
        with open(path) as fh:
            lines = fh.read().replace("\\\n", " ").splitlines()
        for raw in lines:
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            values = keys.setdefault(f"{section}.{key.strip()}", [])
            if value.strip():
                values.append(value.strip())
            else:
                values.clear()
    return keys


def _unit_argv(unit: str) -> tuple[list[str] | None, str]:
    """The command the unit runs (None: a start condition fails) and why not."""
    import re
    import shlex

    keys = _unit_file(unit)
    for path in keys.get("Unit.ConditionPathExists", []):
        negate = path.startswith("!")
        if os.path.exists(path.lstrip("!")) == negate:
            return None, f"start condition unmet: ConditionPathExists={path}"
    env: dict[str, str] = {}
    for ref in keys.get("Service.EnvironmentFile", []):
        try:
            with open(ref.lstrip("-")) as fh:
                for line in fh:
                    k, eq, v = line.strip().partition("=")
                    if eq and not k.startswith("#"):
                        env[k.strip()] = shlex.split(v)[0] if v.strip() else ""
        except OSError:
            if not ref.startswith("-"):
                return None, f"cannot read EnvironmentFile {ref}"
    starts = keys.get("Service.ExecStart", [])
    if not starts:
        return None, "the unit has no ExecStart"
    argv: list[str] = []
    for word in shlex.split(starts[-1].replace("%%", "%")):
        whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if whole:  # $VAR alone: split at whitespace (systemd.service(5), "Command lines")
            argv += env.get(whole.group(1), "").split()
        else:
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), word))
    return [a for a in argv if a], ""


def _real_proc() -> None:
    """preexec for a Slurm daemon: a mount namespace of its own whose /proc is the host's real procfs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    if libc.unshare(0x00020000) != 0:  # CLONE_NEWNS
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if libc.mount(None, b"/", None, (1 << 18) | 16384, None) != 0:  # MS_PRIVATE | MS_REC
        raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
    if libc.mount(REAL_PROC.encode(), b"/proc", None, 4096 | 16384, None) != 0:  # MS_BIND | MS_REC
        raise OSError(ctypes.get_errno(), f"mount --bind {REAL_PROC} /proc")


def _daemon_pid(unit: str) -> int | None:
    try:
        with open(REAL_DAEMONS[unit][1]) as fh:
            pid = int(fh.read().split()[0])
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError, IndexError):
        return None


def _daemon_stop(unit: str) -> None:
    import signal

    pid = _daemon_pid(unit)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if _daemon_pid(unit) is None:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def _daemon_start(unit: str) -> str | None:
    """Start the unit's daemon; None once its pid file names a live process (or, as systemd has it, when a start
    condition fails: then nothing runs), else why not."""
    import subprocess

    if _daemon_pid(unit) is not None:
        return None
    argv, pidfile = REAL_DAEMONS[unit]
    os.makedirs(os.path.dirname(pidfile), exist_ok=True)
    proc = None
    if unit == "munge":
        for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
            os.makedirs(d, exist_ok=True)
        os.chmod("/run/munge", 0o755)
    else:
        cmd, why = _unit_argv(unit)
        if cmd is None:
            if why.startswith("start condition"):
                return None
            return why
        argv = tuple(cmd)
    log = f"/run/mf-{unit}.start.log"
    rc: int | str | None = None
    with open(log, "w") as fh:  # a file, not a pipe: the daemon keeps what it inherits open
        try:
            if unit == "munge":  # Type=forking: it forks and writes its pid file
                rc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, timeout=30).returncode
            else:  # Type=simple (-D): it stays in the foreground, in a session of its own
                proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=fh, stderr=fh,
                                        start_new_session=True,
                                        preexec_fn=_real_proc if os.path.isdir(f"{REAL_PROC}/self") else None)
        except subprocess.TimeoutExpired:
            rc = "still in the foreground after 30 s"
        except OSError as exc:
            rc = str(exc)
    for _ in range(200):  # the daemon writes its pid file once it runs (seconds on a busy machine)
        if _daemon_pid(unit) is not None:
            return None
        if proc is not None and proc.poll() is not None:
            rc = proc.returncode
            break
        time.sleep(0.1)
    with open(log) as fh:
        text = fh.read().strip()
    own = {"slurmd": "/var/log/slurmd.log", "slurmctld": "/var/log/slurmctld.log",
           "munge": "/var/log/munge/munged.log"}[unit]
    if os.path.exists(own):  # what the daemon said after it started
        with open(own) as fh:
            text += "\n" + "\n".join(fh.read().strip().splitlines()[-4:])
    return text[-600:] or f"{' '.join(argv)}: {rc}"
NEEDS_REBOOT = ("nvidia-driver", "doca-ofed")


def _family(pkg: str) -> str:
    """nvidia-driver-550(-server) -> nvidia-driver."""
    parts = pkg.removesuffix("-server").rsplit("-", 1)
    return parts[0] if len(parts) == 2 and parts[1].isdigit() else pkg


def install(st: dict[str, Any], name: str, version: str) -> None:
    st["packages"][name] = version
    for unit in PACKAGE_UNITS.get(_family(name), []):
        st["units"].setdefault(unit, {"enabled": False, "active": False})
    if _family(name) in NEEDS_REBOOT:
        st["reboot_required"] = True


def cmd_apt_get(args: list[str]) -> int:
    cfg = load_config()
    if "update" in args:
        delay(cfg, "apt-get update")
        out("Reading package lists... Done\n")
        return 0
    if "install" not in args:
        return 0
    msg = fault(cfg, "apt-get")
    if msg:
        err(msg)
        return 100
    specs = [a for a in args[args.index("install") + 1:] if not a.startswith("-")]
    delay(cfg, "apt-get")
    with state() as st:
        for spec in specs:
            name, _, version = spec.partition("=")
            version = version or cfg.get("catalog", {}).get(name, "1.0-1")
            out(f"Setting up {name} ({version}) ...\n")
            install(st, name, version)
    return 0


def cmd_apt_mark(args: list[str]) -> int:
    if args and args[0] == "hold":
        with state() as st:
            for name in args[1:]:
                if name not in st["held"]:
                    st["held"].append(name)
                out(f"{name} set on hold.\n")
    return 0


def cmd_dpkg_query(args: list[str]) -> int:
    fmt = "${Package}\t${Version}\n"
    names: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-f", "--showformat"):
            fmt = args[i + 1]
            i += 2
            continue
        if a.startswith("--showformat="):
            fmt = a.split("=", 1)[1]
        elif not a.startswith("-"):
            names.append(a)
        i += 1
    fmt = fmt.replace("\\t", "\t").replace("\\n", "\n")
    pk = read_state()["packages"]
    rc = 0
    for n in names:
        if n in pk:
            out(fmt.replace("${Package}", n).replace("${Version}", pk[n]).replace("${db:Status-Abbrev}", "ii "))
        else:
            err(f"dpkg-query: no packages found matching {n}")
            rc = 1
    return rc


def cmd_rpm(args: list[str]) -> int:
    for n in [a for a in args if not a.startswith("-") and "%" not in a]:
        out(f"package {n} is not installed\n")
    return 1


# --------------------------------------------------------------------------------------------
# modules and services

ALWAYS_AVAILABLE = {"ib_umad", "rdma_ucm", "rdma_cm", "ib_ipoib", "ib_core", "mlx5_core", "mlx5_ib", "nvme", "md_mod",
                    "raid0", "xfs", "ext4", "fuse", "lustre", "nfs", "nfsv4"}


def available_modules(st: dict[str, Any]) -> set[str]:
    mods = set(ALWAYS_AVAILABLE)
    if any(_family(p) == "nvidia-driver" for p in st["packages"]):
        mods |= {"nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem"}
    if st["installed"].get("efa"):
        mods.add("efa")
    if "erdma" in st["packages"]:
        mods.add("erdma")
    return mods


def cmd_modprobe(args: list[str]) -> int:
    names = [a.replace("-", "_") for a in args if not a.startswith("-")]
    if "-a" not in args:
        names = names[:1]
    with state() as st:
        avail = available_modules(st)
        for n in names:
            if n not in avail:
                err(f"modprobe: FATAL: Module {n} not found in directory /lib/modules/5.15.0-1048-aws")
                return 1
            if n == "nvidia_peermem" and "nvidia" not in st["modules"]:
                err("modprobe: ERROR: could not insert 'nvidia_peermem': Unknown symbol in module")
                return 1
            if n not in st["modules"]:
                st["modules"].append(n)
    if "nvidia" in names:
        gpu_devices(load_config())
    return 0


def gpu_devices(cfg: dict[str, Any]) -> None:
    """On a VM-mode host (its own /dev), the device files the loaded nvidia module gives: /dev/nvidiactl and
    one /dev/nvidiaN per simulated GPU (regular files: the host cannot make device nodes; Slurm's gres.conf
    File= accepts them with a warning). Nothing elsewhere."""
    if FS != "/" or not os.path.isdir("/dev"):
        return
    gpu = cfg.get("gpu") or {}
    count = int(gpu.get("count") or 0) if gpu.get("vendor", "nvidia") == "nvidia" else 0
    _device_files(["nvidiactl", *(f"nvidia{i}" for i in range(count))])


def npu_devices(cfg: dict[str, Any]) -> None:
    """On a VM-mode host (its own /dev), the device files the installed Ascend driver gives (its .run package
    loads the drivers; Huawei's container docs mount these): /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc
    and one /dev/davinciN per simulated NPU, as regular files like gpu_devices' (Slurm's gres.conf File= of an
    ``npu`` Gres names /dev/davinci[0-7]). Nothing elsewhere."""
    if FS != "/" or not os.path.isdir("/dev"):
        return
    gpu = cfg.get("gpu") or {}
    count = int(gpu.get("count") or 0) if gpu.get("vendor") == "ascend" else 0
    _device_files(["davinci_manager", "devmm_svm", "hisi_hdc", *(f"davinci{i}" for i in range(count))])


def _device_files(names: list[str]) -> None:
    """Regular files in the host's /dev for the given device names (kept when they exist)."""
    for name in names:
        path = os.path.join("/dev", name)
        if not os.path.exists(path):
            try:
                open(path, "a").close()
            except OSError:
                return


def cmd_lsmod(args: list[str]) -> int:
    lines = ["Module                  Size  Used by"]
    for m in read_state()["modules"]:
        lines.append(f"{m:<24}{65536:>8}  0")
    out("\n".join(lines) + "\n")
    return 0


def _unit_needs_driver(unit: str) -> bool:
    return unit.startswith("nvidia-")


def cmd_systemctl(args: list[str]) -> int:
    if not args:
        return 0
    verb, rest = args[0], [a for a in args[1:] if a != "--"]
    if verb == "reboot":
        return cmd_reboot([])
    units = [a.removesuffix(".service") for a in rest if not a.startswith("-")]
    if verb == "show":
        st = read_state()
        blocks = []
        for u in units:
            s = st["units"].get(u)
            if s is None:
                blocks.append(f"Id={u}.service\nLoadState=not-found\nUnitFileState=\nActiveState=inactive\n")
            else:
                blocks.append(f"Id={u}.service\nLoadState=loaded\n"
                              f"UnitFileState={'enabled' if s['enabled'] else 'disabled'}\n"
                              f"ActiveState={'active' if _active(u, s) else 'inactive'}\n")
        out("\n".join(blocks))
        return 0
    if verb in ("enable", "start", "restart"):
        now = "--now" in rest or verb in ("start", "restart")
        with state() as st:
            for u in units:
                s = st["units"].get(u)
                if s is None:
                    err(f"Failed to {verb} unit: Unit file {u}.service does not exist.")
                    return 1
                if verb == "enable":
                    s["enabled"] = True
                    out(f"Created symlink /etc/systemd/system/multi-user.target.wants/{u}.service.\n")
                if now:
                    if _unit_needs_driver(u) and "nvidia" not in st["modules"]:
                        err(f"Job for {u}.service failed because the control process exited with error code.")
                        return 1
                    if _real(u):
                        if verb == "restart":
                            _daemon_stop(u)
                        why = _daemon_start(u)
                        if why is not None:
                            s["active"] = False
                            err(f"Job for {u}.service failed because the control process exited with error code."
                                f"\n{why}")
                            return 1
                    s["active"] = True
        return 0
    if verb == "stop" or (verb == "disable" and "--now" in rest):
        with state() as st:
            for u in units:
                s = st["units"].get(u)
                if s is not None:
                    if _real(u):
                        _daemon_stop(u)
                    s["active"] = False
                    if verb == "disable":
                        s["enabled"] = False
        return 0
    if verb == "disable":
        with state() as st:
            for u in units:
                s = st["units"].get(u)
                if s is not None and s["enabled"]:
                    s["enabled"] = False
                    out(f"Removed /etc/systemd/system/multi-user.target.wants/{u}.service.\n")
        return 0
    if verb in ("is-active", "is-enabled"):
        st = read_state()
        rc = 0
        for u in units:
            s = st["units"].get(u)
            key = "active" if verb == "is-active" else "enabled"
            ok = bool(s and (_active(u, s) if key == "active" else s[key]))
            out(("active" if ok else "inactive") if key == "active" else ("enabled" if ok else "disabled") + "\n")
            rc = rc or (0 if ok else 3)
        return rc
    return 0


def _active(unit: str, s: dict[str, Any]) -> bool:
    """A real daemon's unit is active while its process lives (it may have died since it started)."""
    return bool(s["active"]) and (not _real(unit) or _daemon_pid(unit) is not None)


def cmd_reboot(args: list[str]) -> int:
    # The harness watches for this file: it stops the host's sshd, waits, "boots", starts sshd.
    _write(_p("run", "reboot-requested"), str(time.time()))
    return 0


# --------------------------------------------------------------------------------------------
# GPU / fabric tools


def _driver_version(st: dict[str, Any]) -> str | None:
    for name, version in st["packages"].items():
        if _family(name) == "nvidia-driver":
            return str(version).split("-")[0].split(":")[-1]
    return None


def cmd_nvidia_smi(args: list[str]) -> int:
    st = read_state()
    cfg = load_config()
    version = _driver_version(st)
    if version is None:
        err("sh: 1: nvidia-smi: not found")
        return 127
    if "nvidia" not in st["modules"]:
        out("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
            "latest NVIDIA driver is installed and running.\n\n")
        return 9
    gpu = cfg.get("gpu", {})
    joined = " ".join(args)
    if any(a.startswith("--query-gpu=") for a in args):
        fields = next(a for a in args if a.startswith("--query-gpu=")).split("=", 1)[1].split(",")
        rows = []
        for i in range(int(gpu.get("count", 8))):
            values = {"index": str(i), "name": gpu.get("model", "NVIDIA H100 80GB HBM3"), "driver_version": version,
                      "pci.bus_id": f"00000000:{0x18 + 0x10 * i:02X}:00.0", "count": str(gpu.get("count", 8))}
            rows.append(", ".join(values.get(f, "[N/A]") for f in fields))
        out("\n".join(rows) + "\n")
        return 0
    key = "nvidia-smi"
    if "-q" in args:
        key = "nvidia-smi-q-x" if "-x" in args else "nvidia-smi-q"
    elif args[:1] == ["topo"]:
        key = "topo"
    elif args[:1] == ["nvlink"]:
        key = "nvlink"
    text = fixture(key, cfg)
    if text is None:
        err(f"nvidia-smi {joined}: no fixture for {key} in this host's profile")
        return 1
    if key in ("nvidia-smi-q", "nvidia-smi-q-x") and "count" in gpu:
        text = _limit_gpus(text, int(gpu["count"]), xml=key == "nvidia-smi-q-x")
    if key in ("nvidia-smi", "nvidia-smi-q"):
        text = _as_simulated_gpu(text, gpu, cfg.get("capture_gpu") or {})
    out(text)
    return 0


def _as_simulated_gpu(text: str, gpu: dict[str, Any], capture: dict[str, Any]) -> str:
    """A capture (default table or ``-q``) of another GPU of the same layout (``capture_gpu``: its model and
    memory) shown as the host's simulated GPU (``gpu``: model, memory_mib): the name and memory rewritten, table
    widths kept. No capture of the host's own GPU exists (e.g. the H20), so its output is the capture's layout
    with the simulated GPU's figures."""
    if not capture.get("model") or not gpu.get("model"):
        return text
    old, new = str(capture["model"]), str(gpu["model"])
    text = text.replace(old, new.ljust(len(old)) if len(new) <= len(old) else new)
    if capture.get("memory_mib") and gpu.get("memory_mib"):
        was, now = f"{int(capture['memory_mib'])}MiB", f"{int(gpu['memory_mib'])}MiB"
        text = text.replace(was, now.rjust(len(was)))
        text = text.replace(f": {int(capture['memory_mib'])} MiB", f": {int(gpu['memory_mib'])} MiB")
    return text


def _limit_gpus(text: str, count: int, xml: bool) -> str:
    """The capture with only its first ``count`` GPUs (sections after them dropped, attached count fixed)."""
    import re

    if xml:
        blocks = list(re.finditer(r"[ \t]*<gpu id=.*?</gpu>\n?", text, re.S))
        if len(blocks) <= count:
            return text
        text = text[:blocks[count].start()] + text[blocks[-1].end():]
        return re.sub(r"<attached_gpus>\d+</attached_gpus>", f"<attached_gpus>{count}</attached_gpus>", text)
    heads = list(re.finditer(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:", text, re.M))
    if len(heads) <= count:
        return text
    text = text[:heads[count].start()]
    return re.sub(r"^(Attached GPUs\s+: )\d+", lambda m: f"{m.group(1)}{count}", text, flags=re.M)


def cmd_ibstat(args: list[str]) -> int:
    text = fixture("ibstat")
    if text is None:
        err("ibstat: command not found")
        return 127
    out(text)
    return 0


def erdma_devinfo(cfg: dict[str, Any], st: dict[str, Any]) -> str | None:
    """``ibv_devinfo`` of the host's eRDMA devices (config ``fabric``: kind erdma, ``nics`` devices), in the
    format of tests/support/fixtures/erdma/ibv_devinfo-alibaba-h20-* (erdma_N, vendor 0x1ded, transport eRDMA);
    None when the host's fabric is not eRDMA. Without the erdma kernel module (the eRDMA driver not installed and
    loaded) the host has no verbs devices."""
    fab = cfg.get("fabric") or {}
    if fab.get("kind") != "erdma":
        return None
    if "erdma" not in st.get("modules", []):
        return ""
    blocks = []
    for i in range(int(fab.get("nics") or 0)):
        guid = f"0216:3eff:fe2f:{0x3775 + i:04x}"
        blocks.append(f"hca_id: erdma_{i}\n        transport:                      eRDMA (0)\n"
                      "        fw_ver:                         0.2.0\n"
                      f"        node_guid:                      {guid}\n"
                      f"        sys_image_guid:                 {guid}\n"
                      "        vendor_id:                      0x1ded\n"
                      "        vendor_part_id:                 4223\n        hw_ver:                         0x0\n"
                      "        phys_port_cnt:                  1\n                port:   1\n"
                      "                        state:                  PORT_ACTIVE (4)\n"
                      "                        max_mtu:                4096 (5)\n"
                      "                        active_mtu:             4096 (5)\n"
                      "                        sm_lid:                 0\n"
                      "                        port_lid:               0\n"
                      "                        port_lmc:               0x00\n"
                      "                        link_layer:             Ethernet\n")
    return "\n".join(blocks)


def cmd_ibv_devinfo(args: list[str]) -> int:
    cfg = load_config()
    text = erdma_devinfo(cfg, read_state())
    if text is None:
        text = fixture("ibv_devinfo", cfg)
        if text is None:
            err("sh: 1: ibv_devinfo: not found")
            return 127
    if not text.strip():
        err("No IB devices found")
        return 255
    out(text)
    return 0


def fi_info_listing(cfg: dict[str, Any]) -> str:
    """``fi_info -p efa`` of the host's EFA devices (config ``fabric``): an RDM and a DGRAM entry per
    device, as libfabric 1.2x prints them (the entry format of tests/support/fixtures/efa/fi_info-efa-multi-rdmap-*)."""
    fab = cfg.get("fabric") or {}
    if fab.get("kind") != "efa":
        return ""
    entries = []
    for i in range(int(fab.get("nics") or 0)):
        for suffix, kind in (("rdm", "FI_EP_RDM"), ("dgrm", "FI_EP_DGRAM")):
            entries.append(f"provider: efa\n    fabric: efa\n    domain: rdmap{79 + i}s0-{suffix}\n"
                           f"    version: 121.0\n    type: {kind}\n    protocol: FI_PROTO_EFA\n")
    return "".join(entries)


def cmd_fi_info(args: list[str]) -> int:
    if not read_state()["installed"].get("efa"):
        err("sh: 1: fi_info: not found")
        return 127
    cfg = load_config()
    provider = args[args.index("-p") + 1] if "-p" in args[:-1] else None
    text = fixture("fi_info", cfg)
    if text is None:
        text = fi_info_listing(cfg) if provider in (None, "efa") else ""
    if not text.strip():
        err("fi_getinfo: -61 (No data available)")
        return 1
    out(text)
    return 0


def cmd_npu_smi(args: list[str]) -> int:
    st = read_state()
    if not st["installed"].get("ascend-driver"):
        err("sh: 1: npu-smi: not found")
        return 127
    key = "npu-smi-topo" if "topo" in args else "npu-smi"
    out(fixture(key) or "")
    return 0


def cmd_hccn_tool(args: list[str]) -> int:
    with state() as st:
        if not st["installed"].get("ascend-driver"):
            err("sh: 1: hccn_tool: not found")
            return 127
        nic = args[args.index("-i") + 1] if "-i" in args else "0"
        if "-ip" in args and "-g" in args:
            have = st["hccn"].get(nic)
            if have:
                out(f"ipaddr:{have[0]}\nnetmask:{have[1]}\n")
            return 0
        if "-ip" in args and "-s" in args:
            st["hccn"][nic] = [args[args.index("address") + 1], args[args.index("netmask") + 1]]
            return 0
        configured = bool(st["hccn"].get(nic))
    fab = load_config().get("fabric") or {}
    if not nic.isdigit() or int(nic) >= int(fab.get("nics") or 0):
        err(f"hccn_tool: device id {nic} is invalid")
        return 1
    if "-status" in args and "-g" in args:
        out(hccn_status(int(nic), int(fab.get("nic_gbps") or 0)))
    elif "-link" in args and "-g" in args:
        out("link status: UP\n")
    elif "-net_health" in args and "-g" in args:
        out(f"net health status: {'Success' if configured else 'Init'}\n")
    return 0


def hccn_status(nic: int, gbps: int) -> str:
    """``hccn_tool -i N -status -g`` for NPU NIC ``nic`` at ``gbps``: the ethtool settings block of the captured
    fixtures/ascend/hccn-tool-i3-status-g.txt (a 200GE port), with this NIC's name and speed."""
    modes = ["40000baseCR4/Full", "40000baseSR4/Full", "40000baseLR4/Full", "25000baseCR/Full", "25000baseSR/Full",
             "50000baseCR2/Full", "100000baseSR4/Full", "100000baseCR4/Full", "100000baseLR4_ER4/Full",
             "50000baseSR2/Full", "1000baseX/Full", "10000baseCR/Full", "10000baseSR/Full", "10000baseLR/Full",
             "50000baseLR_ER_FR/Full", "200000baseSR4/Full", "200000baseLR4_ER4_FR4/Full", "200000baseCR4/Full"]
    lines = [f"Netdev status:Settings for eth{nic}:", "        Supported ports: [ FIBRE ]",
             f"        Supported link modes:   {modes[0]}",
             *(f"                                {m}" for m in modes[1:]),
             "        Supported pause frame use: Symmetric", "        Supports auto-negotiation: No",
             "        Supported FEC modes: None        RS", "        Advertised link modes:  Not reported",
             "        Advertised pause frame use: No", "        Advertised auto-negotiation: No",
             "        Advertised FEC modes: None       RS", f"        Speed: {gbps * 1000}Mb/s",
             "        Duplex: Full", "        Auto-negotiation: off", "        Port: Direct Attach Copper",
             "        PHYAD: 0", "        Transceiver: internal",
             "        Current message level: 0x00000036 (54)", "                               probe link ifdown ifup",
             f"        Link detected: {'yes' if gbps else 'no'}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# nccl-tests and mpirun: generated from the simulated hardware and the actual arguments
#
# No capture is replayed. The output is nccl-tests' own format (2.17 layout), for the sizes, data
# types, ops, GPU and node counts the command asked for, with bandwidth from a small model of the
# host's hardware (config.json ``gpu`` and ``fabric``) and NCCL_DEBUG lines naming the transport that
# hardware and the installed software give. See the module docstring for the calibration.

NCCL_VERSION = "2.22.3"
NCCL_CODE = "22203"
NCCL_TESTS_VERSION = "2.17.8"
OFI_NCCL_VERSION = "1.9.2-aws"
GIB = 1 << 30

#: GPU name pattern -> (NVLinks per GPU, GB/s per link and direction as ``nvidia-smi nvlink -s`` shows it,
#: NVLink SHARP (NVLS) on an NVSwitch system, memory bandwidth GB/s, memory GiB). First match wins.
GPUS: tuple[tuple[str, int, float, bool, float, int], ...] = (
    (r"H100 PCIe|H100 NVL", 0, 0.0, False, 2000.0, 80),
    (r"H100", 18, 26.562, True, 3350.0, 80),
    (r"H200", 18, 26.562, True, 4800.0, 141),
    (r"H800", 8, 26.562, True, 3350.0, 80),
    (r"\bH20\b", 18, 26.562, True, 4000.0, 96),
    (r"GB200|Graphics Device", 18, 50.0, True, 8000.0, 186),
    (r"A100-SXM4-80GB", 12, 25.0, False, 2039.0, 80),
    (r"A100-SXM4-40GB|A100-SXM", 12, 25.0, False, 1555.0, 40),
    (r"A800-SXM", 8, 25.0, False, 2039.0, 80),
    (r"V100-SXM2", 6, 25.0, False, 900.0, 16),
    (r"RTX 5090", 0, 0.0, False, 1792.0, 32),
)
_GPU_DEFAULT = ("", 0, 0.0, False, 900.0, 24)
#: PCIe Gen4 x16 per direction (GB/s), the path between GPUs without NVLink.
PCIE_GBS = 25.0

# Calibration (the module docstring says where each number comes from).
E_NVLS = 483.35 / (18 * 26.562)   # busbw / per-GPU NVLink bandwidth, 8x H100 with NVLS
E_RING = 0.80                     # the same without NVLS (an assumption: no such capture)
E_PCIE = 0.80                     # over PCIe (an assumption)
E_NET = {"efa": 488.14 / 400.0, "ib": 364.07 / 400.0, "socket": 0.30}
E_COPY = 1715.44 / 1792.0         # one rank: algbw / memory bandwidth (a device copy)
#: Ramp: time(S) = latency + S / (peak algbw * S^p / (S^p + K^p)); (latency us, K bytes, p, size calibrated at)
RAMP = {"nvlink": (15.5, 7.94e6, 0.5, 16 * GIB), "efa": (66.0, 6.31e7, 0.7, 16 * GIB),
        "ib": (25.0, 2.0e7, 0.75, 2 * GIB), "socket": (120.0, 6.0e7, 0.7, 16 * GIB)}

#: Collective -> (bus bandwidth factor of n ranks, has a reduction op, has a root)
COLLECTIVES: dict[str, tuple[Callable[[int], float], bool, bool]] = {
    "all_reduce": (lambda n: 2 * (n - 1) / n, True, False),
    "all_gather": (lambda n: (n - 1) / n, False, False),
    "reduce_scatter": (lambda n: (n - 1) / n, True, False),
    "alltoall": (lambda n: (n - 1) / n, False, False),
    "broadcast": (lambda n: 1.0, False, True),
    "reduce": (lambda n: 1.0, True, True),
    "sendrecv": (lambda n: 1.0, True, False),
}
NCCL_TYPES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
              "double": 8, "bfloat16": 2}
_TYPE_ALIASES = {"char": "int8", "int": "int32", "float16": "half", "float32": "float", "float64": "double",
                 "bf16": "bfloat16"}
NCCL_OPS = ("sum", "prod", "max", "min", "avg", "mulsum")


def _gpu_info(model: str) -> tuple[str, int, float, bool, float, int]:
    import re

    return next((g for g in GPUS if re.search(g[0], model)), _GPU_DEFAULT)


def _parse_size(value: str) -> int | None:
    """nccl-tests' parsesize: a number with an optional K/M/G (1024-based) suffix."""
    v = value.strip()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    mult = 1
    if v and v[-1].lower() in units:
        mult, v = units[v[-1].lower()], v[:-1]
    try:
        number = float(v)
    except ValueError:
        return None
    return int(number * mult) if number >= 0 else None


def _strtol(value: str) -> int:
    """C ``strtol(value, NULL, 0)``: the leading number (0x hex, 0 octal, decimal); 0 when there is none."""
    import re

    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", value)
    if not m:
        return 0
    digits = m.group(2)
    base = 16 if digits[:2].lower() == "0x" else 8 if len(digits) > 1 and digits[0] == "0" else 10
    number = int(digits, base)
    return -number if m.group(1) == "-" else number


_NT_SHORT = "t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:hG:C:a:R:F:"
_NT_LONG = {"nthreads": "t", "ngpus": "g", "minbytes": "b", "maxbytes": "e", "stepbytes": "i", "stepfactor": "f",
            "iters": "n", "agg_iters": "m", "warmup_iters": "w", "parallel_init": "p", "check": "c", "op": "o",
            "datatype": "d", "root": "r", "blocking": "z", "stream_null": "y", "timeout": "T", "cudagraph": "G",
            "report_cputime": "C", "average": "a", "local_register": "R", "output_file": "F", "help": "h"}


def _nccl_options(args: list[str]) -> tuple[dict[str, str], str | None]:
    """getopt_long over nccl-tests' options: ({letter: value}, the first bad option or None)."""
    import getopt

    longs = [f"{k}=" if v != "h" else k for k, v in _NT_LONG.items()]
    try:
        opts, _rest = getopt.gnu_getopt(args, _NT_SHORT, longs)
    except getopt.GetoptError as exc:
        return {}, exc.opt or "?"
    out: dict[str, str] = {}
    for flag, value in opts:
        out[_NT_LONG[flag[2:]] if flag.startswith("--") else flag[1:]] = value
    return out, None


_NT_USAGE = ("USAGE: {prog} \n\t[-t,--nthreads <num threads>] \n\t[-g,--ngpus <gpus per thread>] \n\t"
             "[-b,--minbytes <min size in bytes>] \n\t[-e,--maxbytes <max size in bytes>] \n\t"
             "[-i,--stepbytes <increment size>] \n\t[-f,--stepfactor <increment factor>] \n\t"
             "[-n,--iters <iteration count>] \n\t[-m,--agg_iters <aggregated iteration count>] \n\t"
             "[-w,--warmup_iters <warmup iteration count>] \n\t[-p,--parallel_init <0/1>] \n\t"
             "[-c,--check <check iteration count>] \n\t[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
             "[-d,--datatype <nccltype/all>] \n\t[-r,--root <root>] \n\t[-z,--blocking <0/1>] \n\t"
             "[-y,--stream_null <0/1>] \n\t[-T,--timeout <time in seconds>] \n\t"
             "[-G,--cudagraph <num graph launches>] \n\t"
             "[-C,--report_cputime <0/1>] \n\t[-a,--average <0/1/2/3> report average iteration time "
             "<0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t[-R,--local_register <1/0> enable local buffer registration on "
             "send/recv buffers (default: disable)] \n\t[-h,--help]\n")


def _world() -> dict[str, Any]:
    """This process's MPI job as the ``mpirun`` shim set it up (OMPI_COMM_WORLD_SIZE, MF_MPI_NODES), or alone."""
    import socket

    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE") or 1)
    nodes = []
    for item in (os.environ.get("MF_MPI_NODES") or "").split(","):
        host, _, ranks = item.rpartition(":")
        if host and ranks.isdigit():
            nodes.append((host, int(ranks)))
    return {"size": size, "nodes": nodes or [(socket.gethostname(), size)]}


def ib_ports(text: str) -> list[tuple[str, str, str, float]]:
    """(CA, state, link layer, rate Gb/s) of every port in ``ibstat`` output."""
    import re

    ports: list[tuple[str, str, str, float]] = []
    ca = ""
    fields: dict[str, str] = {}
    for line in [*text.splitlines(), "CA 'end'"]:
        s = line.strip()
        if (s.startswith("CA '") or re.match(r"Port \d+:", s)) and fields.get("State"):
            try:
                rate = float(fields.get("Rate", "0"))
            except ValueError:
                rate = 0.0
            ports.append((ca, fields["State"], fields.get("Link layer", ""), rate))
            fields = {}
        if s.startswith("CA '"):
            ca = s[4:].rstrip("'")
        elif ":" in s:
            key, _, value = s.partition(":")
            fields[key.strip()] = value.strip()
    return ports


def nccl_net(cfg: dict[str, Any], st: dict[str, Any], env: dict[str, Any], ofi_plugin: bool,
             ports: list[tuple[str, str, str, float]] | None = None) -> dict[str, Any]:
    """The network NCCL would use on this host: {"name" (as "Using network" says), "kind" (efa/ib/socket), ...}.

    EFA needs the aws-ofi-nccl plugin (the EFA installer's); without it NCCL falls back to sockets, as
    it does for ``NCCL_NET=Socket``, ``NCCL_IB_DISABLE=1``, an ``NCCL_IB_HCA`` that matches no device,
    or the config knob ``nccl.net: socket`` (a node whose RDMA path is broken). On InfiniBand/RoCE the
    devices are the host's own (``ports``, from its ibstat): the Active ports of the fabric's link
    layer at the fastest rate, as NCCL picks them; the config's ``fabric`` when there is no ibstat.
    """
    fab = cfg.get("fabric") or {}
    kind = fab.get("kind") or "none"
    forced = str((cfg.get("nccl") or {}).get("net") or "").lower()
    want = (env.get("NCCL_NET") or "").strip().lower()
    nics = int(fab.get("nics") or 0)
    gbps = float(fab.get("nic_gbps") or 0)
    sockets = {"name": "Socket", "kind": "socket", "nics": 1, "gbs": float(fab.get("frontend_gbps") or 100) / 8,
               "plugin": ofi_plugin and kind == "efa"}
    if forced == "socket" or want == "socket":
        return sockets
    if kind == "efa":
        if not ofi_plugin or want == "ib":
            return sockets
        provider = (env.get("FI_PROVIDER") or "efa").split(",")[0].strip() or "efa"
        if provider != "efa" or nics == 0:
            return {**sockets, "name": "AWS Libfabric", "provider": provider if provider != "efa" else "tcp",
                    "plugin": True}
        rails = _rails(fab, [f"rdmap{79 + i}s0" for i in range(nics)], gbps)
        return {"name": "AWS Libfabric", "kind": "efa", "nics": nics, "provider": "efa", "rails": rails,
                "gbs": nics * min(rails.values()), "plugin": True}
    if kind in ("infiniband", "roce", "erdma"):
        prefix = "erdma" if kind == "erdma" else "mlx5"
        devices = list(fab.get("devices") or [f"{prefix}_{i}" for i in range(nics)])
        layer = "InfiniBand" if kind == "infiniband" else "Ethernet"
        usable = [(ca, rate) for ca, state, lay, rate in ports or [] if state == "Active" and lay == layer]
        if ports is not None and kind != "erdma":
            top = max((rate for _ca, rate in usable), default=0.0)
            devices = [ca for ca, rate in usable if rate == top]
            gbps = top or gbps
        hca = (env.get("NCCL_IB_HCA") or "").strip()
        if hca:
            exclude = hca.startswith("^")
            spec = hca.lstrip("^")
            exact = spec.startswith("=")
            names = [h.split(":")[0] for h in spec.lstrip("=").split(",") if h]
            hit = [d for d in devices if (d in names if exact else any(d.startswith(n) for n in names))]
            devices = [d for d in devices if d not in hit] if exclude else hit
        if kind == "erdma" and "erdma" not in st.get("modules", []):
            devices = []
        if env.get("NCCL_IB_DISABLE") == "1" or not devices:
            return sockets
        rails = _rails(fab, devices, gbps)
        return {"name": "IB", "kind": "ib", "nics": len(devices), "devices": devices, "plugin": False,
                "layer": "IB" if kind == "infiniband" else "RoCE", "rails": rails,
                "gbs": len(devices) * min(rails.values())}
    return sockets


def _rails(fab: dict[str, Any], devices: list[str], gbps: float) -> dict[str, float]:
    """GB/s of each rail NCCL uses: the port rate, times the slow-NIC fault ``fabric.nic_scale[device]``."""
    scale = fab.get("nic_scale") or {}
    return {d: gbps / 8 * float(scale.get(d, 1.0)) for d in devices}


def job_net(members: list[dict[str, Any]], env: dict[str, Any],
            switches: dict[str, Any] | None = None) -> dict[str, Any]:
    """The network of a job over ``members`` (its nodes, in job order), each paced by the slowest.

    A member is {"host", "cfg", "st", "ports" (its ibstat, :func:`ib_ports`, or None), "ofi_plugin",
    "switch"}; ``env`` is the program's (mpirun ``-x`` included, so ``NCCL_IB_HCA`` picks the same rails on
    every member); ``switches``: switch name -> fault ({"scale", "min_nodes"}). NCCL spreads its channels
    evenly over the rails, so per-node GB/s = (the fewest rails of any member) x (the slowest rail of any
    member); any member without RDMA makes it a socket job. A switch's fault applies once at least
    ``min_nodes`` of the job's members sit under it (an uplink that only congests under many flows).
    Adds "uses" ([(host, device)] every rail the job touches) and "switch_faults" (the switches that
    slowed it). Pure: no I/O.
    """
    nets = [nccl_net(m["cfg"], m["st"], env, bool(m.get("ofi_plugin")), m.get("ports")) for m in members]
    sockets = [n for n in nets if n["kind"] == "socket"]
    if sockets or not nets:
        base = dict(sockets[0] if sockets else nccl_net({}, {}, env, False))
        base["gbs"] = min(n["gbs"] for n in sockets) if sockets else base["gbs"]
        return {**base, "uses": [], "switch_faults": []}
    rails = min(n["nics"] for n in nets)
    slowest = min(rate for n in nets for rate in n["rails"].values())
    gbs = rails * slowest
    under: dict[str, int] = {}
    for m in members:
        sw = str(m.get("switch") or "leaf0")
        under[sw] = under.get(sw, 0) + 1
    hit = sorted(sw for sw, count in under.items()
                 if (switches or {}).get(sw, {}).get("scale") is not None
                 and count >= int((switches or {})[sw].get("min_nodes") or 1))
    for sw in hit:
        gbs *= float((switches or {})[sw]["scale"])
    uses = [(str(m["host"]), d) for m, n in zip(members, nets, strict=True) for d in n["rails"]]
    return {**nets[0], "nics": rails, "gbs": gbs, "uses": uses, "switch_faults": hit}


def flapped(members: list[dict[str, Any]], uses: list[tuple[str, str]], counters: dict[str, int]) -> \
        tuple[str, str] | None:
    """Count this job for every flapping NIC it uses (``counters["host/device"]``, updated in place) and
    return the (host, device) whose count reached a multiple of its ``fabric.flap.every``: that link drops
    this job. Pure apart from ``counters``."""
    used = set(uses)
    failed: tuple[str, str] | None = None
    for m in members:
        flap = (m["cfg"].get("fabric") or {}).get("flap") or {}
        key = (str(m["host"]), str(flap.get("nic") or ""))
        every = int(flap.get("every") or 0)
        if every <= 0 or key not in used:
            continue
        name = "/".join(key)
        counters[name] = counters.get(name, 0) + 1
        if counters[name] % every == 0 and failed is None:
            failed = key
    return failed


def _ramp(size: float, k: float, p: float) -> float:
    return size ** p / (size ** p + k ** p) if size > 0 else 0.0


def _crc(*key: object) -> int:
    import zlib

    return zlib.crc32(repr(key).encode())


def _jitter(*key: object) -> float:
    """A deterministic +-0.6% wobble per (host, size, placement, ...), as repeated real runs differ."""
    return 1.0 + (_crc(*key) % 1201 - 600) / 100000.0


def _intra(cfg: dict[str, Any], local_ranks: int, env: dict[str, Any]) -> tuple[float, bool]:
    """(one node's peak busbw over NVLink or PCIe, whether NVLS is used) for ``cfg``'s GPUs."""
    _pattern, links, link_gbs, nvls_hw, _mem_gbs, _mem = _gpu_info(str((cfg.get("gpu") or {}).get("model") or ""))
    nvls = nvls_hw and links > 0 and local_ranks > 1 and env.get("NCCL_NVLS_ENABLE", "1") != "0"
    return (links * link_gbs * (E_NVLS if nvls else E_RING) if links else PCIE_GBS * E_PCIE), nvls


def nccl_model(cfg: dict[str, Any], net: dict[str, Any], nodes: int, ranks: int, local_ranks: int,
               env: dict[str, Any], peers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Bandwidth and ramp of one run: {"busbw" (asymptotic peak), "lat" (us), "k", "p", "nvls", "regime"}.

    ``peers``: the configs of the job's other nodes (none: every node is ``cfg``); the job runs at its
    slowest member, in NVLink figure and in ``nccl.busbw_scale``. ``net["gbs"]`` is the job's per-node
    network figure (:func:`job_net` across nodes).
    """
    mem_gbs = _gpu_info(str((cfg.get("gpu") or {}).get("model") or ""))[4]
    scale = min(float((c.get("nccl") or {}).get("busbw_scale") or 1.0) for c in [cfg, *(peers or [])])
    if ranks == 1:  # a device-to-device copy (out-of-place) or nothing at all (in-place)
        return {"algbw": mem_gbs * E_COPY * scale, "busbw": 0.0, "lat": 4.0, "k": 1.0, "p": 1.0, "nvls": False,
                "regime": "copy"}
    intra, nvls = _intra(cfg, local_ranks, env)
    intra = min([intra, *(_intra(c, local_ranks, env)[0] for c in peers or [])])
    factor = COLLECTIVES["all_reduce"][0]
    if nodes <= 1:
        lat, k, p, cal = RAMP["nvlink"]
        busbw = intra
    else:
        regime = net["kind"] if net["kind"] in E_NET else "socket"
        lat, k, p, cal = RAMP[regime]
        wire = net["gbs"] * E_NET[regime] / factor(ranks)
        # Both stages move the same bytes: the slower one (in algorithm bandwidth) sets the pace.
        alg = min(intra / factor(local_ranks), wire) if local_ranks > 1 else wire
        busbw = alg * factor(ranks)
    return {"busbw": busbw / _ramp(cal, k, p) * scale, "lat": lat, "k": k, "p": p, "nvls": nvls,
            "regime": "nvlink" if nodes <= 1 else "net"}


def _time_str(us: float) -> str:
    if us >= 100000:
        return f"{us:7.0f}"
    if us >= 10000:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


_TABLE_HEAD = (
    "#                                                              out-of-place                       "
    "in-place          ",
    "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
    "#wrong ",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)  "
    "       ",
)


def _bus(dev: int) -> int:
    return 0x18 + 0x10 * dev


def _nccl_debug(env: dict[str, Any], net: dict[str, Any], hosts: list[str], places: list[tuple[Any, ...]],
                model: dict[str, Any]) -> list[str]:
    """The NCCL_DEBUG lines every rank prints while setting up (what the transports were)."""
    level = (env.get("NCCL_DEBUG") or "").upper()
    if level == "VERSION":
        return [f"NCCL version {NCCL_VERSION}+cuda12.2"]
    if level not in ("INFO", "TRACE"):
        return []
    lines: list[str] = []
    ranks, nodes = len(places), len(hosts)
    comm_id = f"0x{_crc(tuple(hosts)):08x}{_crc(ranks):08x}"
    local_n = {h: sum(1 for p in places if p[1] == h) for h in hosts}
    ofi = net["name"] == "AWS Libfabric"
    for rank, host, pid, dev, lrank in places:
        tid = pid + 40
        comm = f"0x55{_crc(pid, dev):010x}"

        def info(msg: str, t: int = tid, host: str = host, pid: int = pid, dev: int = dev) -> None:
            lines.append(f"{host}:{pid}:{t} [{dev}] NCCL INFO {msg}")

        info(f"Bootstrap : Using ens5:10.1.0.{10 + hosts.index(host)}<0>", pid)
        info("cudaDriverVersion 12020", pid)
        info(f"NCCL version {NCCL_VERSION}+cuda12.2", pid)
        if net.get("plugin"):
            info("NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol.")
            info(f"NET/OFI Initializing aws-ofi-nccl {OFI_NCCL_VERSION}")
            info("NET/OFI Using Libfabric version 1.21")
        if ofi:
            info("NET/OFI Using CUDA driver version 12020")
            info("NET/OFI Configuring AWS-specific options")
            info(f"NET/OFI Using transport protocol {'RDMA' if net['provider'] == 'efa' else 'SENDRECV'}")
            info(f"NET/OFI Selected Provider is {net['provider']} (found {net['nics']} nics)")
        elif net.get("plugin"):
            info("NET/OFI Unable to find a protocol that worked.  Failing initialization.")
            info("NET/Plugin: Plugin load returned 2 : no network devices; using internal network plugin.")
        else:
            info("NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.")
        if net["kind"] == "ib":
            devs = " ".join(f"[{i}]{d}:1/{net['layer']}" for i, d in enumerate(net["devices"]))
            info(f"NET/IB : Using {devs} ; OOB eth0:10.1.0.{10 + hosts.index(host)}<0>")
        elif not ofi:
            info("NET/IB : No device found.")
            info(f"NET/Socket : Using [0]ens5:10.1.0.{10 + hosts.index(host)}<0>")
        info(f"Using network {net['name']}")
        busid = f"{_bus(dev):x}000"
        info(f"ncclCommInitRank comm {comm} rank {rank} nranks {ranks} cudaDev {dev} nvmlDev {dev} busId {busid} "
             f"commId {comm_id} - Init START")
        if model.get("nvls"):
            info(f"NVLS multicast support is available on dev {dev}")
        info(f"comm {comm} rank {rank} nRanks {ranks} nNodes {nodes} localRanks {local_n[host]} localRank {lrank} "
             "MNNVL 0")
        peers = [p for p in places if p[1] == host]
        if len(peers) > 1:
            nxt = peers[(lrank + 1) % len(peers)]
            for ch in range(2):
                info(f"Channel {ch:02d}/0 : {rank}[{dev}] -> {nxt[0]}[{nxt[3]}] via P2P/CUMEM/read", tid + 1)
        remote = next((p for p in places if p[1] != host and p[4] == lrank), None)
        if remote is not None:
            nic = dev % max(int(net.get("nics") or 1), 1)
            via = {"efa": f"NET/AWS Libfabric/{nic}/GDRDMA", "ib": f"NET/IB/{nic}/GDRDMA"}.get(net["kind"]) or \
                ("NET/AWS Libfabric/0" if ofi else "NET/Socket/0")
            for ch in range(2):
                info(f"Channel {ch:02d}/0 : {remote[0]}[{remote[3]}] -> {rank}[{dev}] [receive] via {via}", tid + 2)
                info(f"Channel {ch:02d}/0 : {rank}[{dev}] -> {remote[0]}[{remote[3]}] [send] via {via}", tid + 2)
        info("Connected all rings", tid + 1)
        if nodes > 1:
            info("Connected all trees", tid + 1)
        if model.get("nvls"):
            info(f"NVLS comm {comm} headRank {lrank} nHeads {local_n[host]} buffSize 4194304 "
                 "nvlsPerRankSize 134217728 nvlsTotalSize 1073741824", tid + 1)
            if nodes > 1:
                info("Connected NVLS tree", tid + 1)
        info(f"ncclCommInitRank comm {comm} rank {rank} nranks {ranks} cudaDev {dev} nvmlDev {dev} busId {busid} "
             f"commId {comm_id} - Init COMPLETE")
    return lines


def nccl_test_output(test: str, args: list[str], cfg: dict[str, Any], st: dict[str, Any], env: dict[str, Any],
                     world: dict[str, Any], *,
                     ofi_plugin: bool = False, ports: list[tuple[str, str, str, float]] | None = None,
                     mpi: bool = True, pid: int = 4242, version: str = NCCL_TESTS_VERSION,
                     members: list[dict[str, Any]] | None = None, switches: dict[str, Any] | None = None,
                     flap: Callable[[list[dict[str, Any]], list[tuple[str, str]]], tuple[str, str] | None]
                     | None = None) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of ``<test> args`` on a host with config ``cfg`` and state ``st``.

    ``world``: the MPI job, {"size": processes, "nodes": [(host, processes on it), ...]} (one process
    on this host when not under mpirun); ``ofi_plugin``: aws-ofi-nccl is installed; ``ports``: the
    host's ibstat ports (:func:`ib_ports`); ``mpi``: whether nccl-tests was built with MPI.
    Across nodes: ``members``, one per node of ``world`` in its order (:func:`job_net`; none: every node
    is this host), ``switches`` their faults, and ``flap(members, uses)`` counts the job on its rails and
    names the (host, device) whose link drops it (:func:`flapped`). No I/O (but what ``flap`` does).
    """
    coll = test.removesuffix("_perf")
    if coll not in COLLECTIVES:
        return "", f"{test}: not an nccl-tests binary this simulation knows\n", 127
    opts, bad = _nccl_options(args)
    if bad is not None or "h" in opts:
        head = f"invalid option '{bad.lstrip('-')[:1]}'\n" if bad is not None else ""
        return head + _NT_USAGE.format(prog=test), "", 0
    sizes = {}
    for key, what, default in (("b", "minbytes", 32 << 20), ("e", "maxbytes", 32 << 20)):
        value = _parse_size(opts[key]) if key in opts else default
        if value is None:
            return "", f"invalid size specified for '{what}'\n", 255
        sizes[key] = value
    min_b, max_b = sizes["b"], sizes["e"]
    if min_b > max_b:
        return "", f"invalid sizes for 'minbytes' and 'maxbytes': {min_b} > {max_b}\n", 255
    out: list[str] = []
    dtype = _TYPE_ALIASES.get(opts.get("d", "float"), opts.get("d", "float"))
    if dtype != "all" and dtype not in NCCL_TYPES:
        out.append(f"invalid type {dtype}, defaulting to float .. ")
        dtype = "float"
    op = opts.get("o", "sum")
    if op != "all" and op not in NCCL_OPS:
        out.append(f"invalid op {op}, defaulting to sum .. ")
        op = "sum"
    types = list(NCCL_TYPES) if dtype == "all" else [dtype]
    ops = list(NCCL_OPS) if op == "all" else [op]
    nthreads, ngpus = max(_strtol(opts.get("t", "1")), 1), max(_strtol(opts.get("g", "1")), 1)
    step_bytes, factor = _strtol(opts.get("i", str(1 << 20))), _strtol(opts.get("f", "1"))
    iters, warmup, agg = _strtol(opts.get("n", "20")), _strtol(opts.get("w", "5")), _strtol(opts.get("m", "1"))
    check, graph, root = _strtol(opts.get("c", "1")), _strtol(opts.get("G", "0")), _strtol(opts.get("r", "0"))
    hosts = [h for h, _ in world["nodes"]]
    if not mpi and world["size"] > 1:
        # Built without MPI but started under mpirun: every process is a 1-rank job of its own, and
        # their outputs interleave in the launcher's log.
        texts, code = [], 0
        for n, (host, procs) in enumerate(world["nodes"]):
            for p in range(procs):
                text, _e, rc = nccl_test_output(test, args, cfg, st, env, {"size": 1, "nodes": [(host, 1)]},
                                                ofi_plugin=ofi_plugin, ports=ports, pid=pid + 100 * n + p,
                                                version=version)
                texts.append(text.splitlines())
                code = code or rc
        merged = [line for chunk in zip(*texts, strict=False) for line in chunk]
        return "\n".join(merged) + "\n", "", code
    out += [f"# nccl-tests version {version} nccl-headers={NCCL_CODE} nccl-library={NCCL_CODE}",
            f"# Collective test starting: {test}",
            f"# nThread {nthreads} nGpus {ngpus} minBytes {min_b} maxBytes {max_b} step: "
            f"{factor if factor > 1 else step_bytes}({'factor' if factor > 1 else 'bytes'}) warmup iters: {warmup} "
            f"iters: {iters} agg iters: {agg} validation: {check} graph: {graph}"]
    if _strtol(opts.get("z", "0")):
        out.append("# Blocking Enabled: wait for completion and barrier after each collective ")
    out += ["#", "# Using devices"]
    # rank -> (rank, host, pid, CUDA device, local rank), laid out as nccl-tests does: each process
    # takes nThreads x nGpus consecutive devices from its local rank on.
    places: list[tuple[Any, ...]] = []
    for n, (host, procs) in enumerate(world["nodes"]):
        for lp in range(procs):
            for i in range(nthreads * ngpus):
                local = lp * nthreads * ngpus + i
                places.append((len(places), host, pid + 100 * n + lp, local, local))
    gpu = cfg.get("gpu") or {}
    have = int(gpu.get("count", 0) or 0) if gpu.get("vendor", "nvidia") == "nvidia" else 0
    model_name = str(gpu.get("model") or "NVIDIA GPU")
    first = places[0]
    if not _driver_version(st) or "nvidia" not in st.get("modules", []) or have == 0:
        why = ("CUDA driver version is insufficient for CUDA runtime version" if not _driver_version(st) or
               "nvidia" not in st.get("modules", []) else "no CUDA-capable device is detected")
        out += [f"{first[1]}: Test CUDA failure common.cu:892 '{why}'",
                f" .. {first[1]} pid {first[2]}: Test failure common.cu:1001"]
        return "\n".join(out) + "\n", "", 2
    mine = {"host": first[1], "cfg": cfg, "st": st, "ports": ports, "ofi_plugin": ofi_plugin}
    job = members or [{**mine, "host": h} for h in hosts]
    counts = {str(m["host"]): _gpus(m["cfg"]) for m in job}
    for _r, host, p, dev, _lr in places:
        if dev >= counts.get(host, have):  # the device lines are gathered first and never printed
            out += [f"{host}: Test CUDA failure common.cu:892 'invalid device ordinal'",
                    f" .. {host} pid {p}: Test failure common.cu:1001"]
            return "\n".join(out) + "\n", "", 2
    out += [f"#  Rank {r:2d} Group  0 Pid {p:6d} on {host:>10s} device {dev:2d} [0000:{_bus(dev):02x}:00] {model_name}"
            for r, host, p, dev, _lr in places]
    mem_max = (int(gpu.get("memory_gib") or _gpu_info(model_name)[5]) * GIB - GIB) // (3 if check else 2)
    if max_b > mem_max:
        max_b = mem_max
        out += ["#", f"# Reducing maxBytes to {max_b} due to memory limitation"]
    net = job_net(job, env, switches) if len(hosts) > 1 else nccl_net(cfg, st, env, ofi_plugin, ports)
    local_ranks = sum(1 for p in places if p[1] == first[1])
    model = nccl_model(cfg, net, len(hosts), len(places), local_ranks, env,
                       [m["cfg"] for m in job] if len(hosts) > 1 else None)
    out += _nccl_debug(env, net, hosts, places, model)
    out += _TABLE_HEAD
    dropped = flap(job, net["uses"]) if flap is not None and net.get("uses") else None
    if dropped is not None:
        out += _link_error(net, hosts, places, dropped)
        return "\n".join(out) + "\n", "", 3
    busf, has_op, has_root = COLLECTIVES[coll]
    ranks = len(places)
    spread = coll in ("all_gather", "reduce_scatter", "alltoall")
    bus_sum, bus_n = 0.0, 0
    for t in types:
        ws = NCCL_TYPES[t]
        for o in ops if has_op else ["none"]:
            size, rows = min_b, 0
            while size <= max_b and rows < 100000:
                count = size // (ws * ranks) if spread else size // ws
                shown = count * ws * (ranks if spread else 1)
                row = f"{shown:12d}  {count:12d}  {t:>8s}  {o:>6s}  {root if has_root else -1:6d}"
                for in_place in (0, 1):
                    if model["regime"] == "copy":
                        us = 0.78 if in_place else model["lat"] + shown / (model["algbw"] * 1e3)
                    else:
                        peak = model["busbw"] / busf(ranks) if busf(ranks) else model["busbw"]
                        us = model["lat"] + shown / (peak * 1e3 * max(_ramp(shown, model["k"], model["p"]), 1e-12))
                        us *= _jitter(first[1], shown, in_place, t, o)
                    algbw = shown / us / 1e3
                    busbw = algbw * busf(ranks)
                    bus_sum, bus_n = bus_sum + busbw, bus_n + 1
                    row += f"  {_time_str(us)}  {algbw:6.2f}  {busbw:6.2f}  {'0' if check else 'N/A':>6s}"
                out.append(row)
                rows += 1
                nxt = size * factor if factor > 1 else size + step_bytes
                if nxt <= size:
                    break
                size = nxt
    avg = bus_sum / bus_n if bus_n else 0.0
    floor = env.get("NCCL_TESTS_MIN_BW")
    verdict = "" if floor is None else ("FAILED" if avg < float(floor) * 0.9 else "OK")
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:g} {verdict}", "#",
            f"# Collective test concluded: {test}", "#", ""]
    return "\n".join(out) + "\n", "", 1 if verdict == "FAILED" else 0


def _gpus(cfg: dict[str, Any]) -> int:
    gpu = cfg.get("gpu") or {}
    return int(gpu.get("count", 0) or 0) if gpu.get("vendor", "nvidia") == "nvidia" else 0


def _link_error(net: dict[str, Any], hosts: list[str], places: list[tuple[Any, ...]],
                dropped: tuple[str, str]) -> list[str]:
    """What a rank on ``dropped``'s host prints when that link drops mid-collective: NCCL's WARN
    (IB: net_ib.cc's completion error, status 12 = IBV_WC_RETRY_EXC_ERR; EFA: aws-ofi-nccl's request
    error, approximate), then nccl-tests' NCCLCHECK line for ncclRemoteError and its test failure line."""
    host, device = dropped
    rank, _h, pid, dev, _lr = next((p for p in places if p[1] == host), places[0])
    peer = next((h for h in hosts if h != host), host)
    where = f"{host}:{pid}:{pid + 42} [{dev}]"
    if net["kind"] == "ib":
        warn = (f"NET/IB : Got completion from peer 10.1.0.{10 + hosts.index(peer)}<{40000 + rank}> with status=12 "
                f"opcode=0 len=0 vendor err 129 (Send) hca {device}")
        line = f"{where} transport/net_ib.cc:2179 NCCL WARN {warn}"
    else:
        warn = (f"NET/OFI Request completed with error. RC: 21. Error: 22 (Unknown error). Completed length: 0 "
                f"({device})")
        line = f"{where} NCCL WARN {warn}"
    return [line, f"{host}: Test NCCL failure common.cu:1279 'remote process exited or there was a network error / "
                  f"{warn}'", f" .. {host} pid {pid}: Test failure common.cu:401"]


def cmd_nccl_test(args: list[str], test: str = "all_reduce_perf") -> int:
    cfg = load_config()
    delay(cfg, test)
    msg = fault(cfg, test)
    if msg:
        err(msg)
        return 1
    plugin = os.path.exists(_f("opt", "amazon", "ofi-nccl", "lib", "libnccl-net.so"))
    ibstat = fixture("ibstat", cfg)
    st = read_state()
    ports = ib_ports(ibstat) if ibstat is not None else None
    world = _world()
    path = fabric_path()
    fab = read_fabric(path) if len(world["nodes"]) > 1 else None
    members = None
    if fab is not None:
        mine = {"cfg": cfg, "st": st, "ports": ports, "ofi_plugin": plugin}
        members = [_member(fab, host, mine) for host, _n in world["nodes"]]

    def flap(ms: list[dict[str, Any]], uses: list[tuple[str, str]]) -> tuple[str, str] | None:
        with fabric_update(path) as world_now:
            return flapped(ms, uses, world_now.setdefault("counters", {}))

    stdout, stderr, rc = nccl_test_output(
        test, args, cfg, st, dict(os.environ), world, ofi_plugin=plugin, ports=ports,
        mpi=os.environ.get("MF_NCCL_MPI", "1") != "0", pid=os.getpid(),
        version=os.environ.get("MF_NCCL_TESTS_VERSION", NCCL_TESTS_VERSION).lstrip("v"),
        members=members, switches=(fab or {}).get("switches"), flap=flap if fab is not None else None)
    if stdout:
        out(stdout)
    if stderr:
        err(stderr)
    return rc


def fabric_path() -> str:
    """The fleet's world file: ``$MF_FABRIC`` (the harness's sshd sets it), else ``fabric/world.json`` beside
    the host's sandbox."""
    return os.environ.get("MF_FABRIC") or (os.path.join(os.path.dirname(ROOT.rstrip("/")), "fabric", "world.json")
                                           if ROOT else "")


def read_fabric(path: str) -> dict[str, Any] | None:
    """The world file (see the module docstring), or None where the fleet has none (every node is this one)."""
    try:
        with open(path) as fh:
            fab: dict[str, Any] = json.load(fh)
    except (OSError, ValueError):
        return None
    return fab


class fabric_update:
    """Locked read-modify-write of the world file (launchers of parallel pair jobs count flaps at once)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> dict[str, Any]:
        # read-only: the harness (root) may have created the lock file that the shims (mfnode) take
        self.lock = os.open(self.path + ".lock", os.O_RDONLY | os.O_CREAT, 0o644)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.fab = read_fabric(self.path) or {}
        return self.fab

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is None:
                write_json(self.path, self.fab)
        finally:
            os.close(self.lock)


def _member(fab: dict[str, Any], host: str, mine: dict[str, Any]) -> dict[str, Any]:
    """A job member as :func:`job_net` reads it: the world file's host (by address or name) read from its
    sandbox, or this host's own hardware where the world does not know it."""
    hosts = fab.get("hosts") or {}
    entry = hosts.get(host) or next((e for e in hosts.values() if e.get("name") == host), None)
    if entry is None:
        return {**mine, "host": host, "switch": "leaf0"}
    root = str(entry["root"])
    if os.path.realpath(root) == os.path.realpath(ROOT or "/nonexistent"):
        return {**mine, "host": host, "switch": entry.get("switch", "leaf0")}
    cfg = load_config(root)
    ibstat = fixture("ibstat", cfg)
    plugin = os.path.exists(os.path.join(str(entry.get("fs_root") or root), "opt", "amazon", "ofi-nccl", "lib",
                                         "libnccl-net.so"))
    return {"host": host, "cfg": cfg, "st": read_state(root), "ports": ib_ports(ibstat) if ibstat is not None
            else None, "ofi_plugin": plugin, "switch": entry.get("switch", "leaf0")}


def cmd_mf_nccl_test(args: list[str]) -> int:
    """``mf-nccl-test <test> args...``: what the binaries the ``make`` shim builds exec."""
    return cmd_nccl_test(args[1:], args[0]) if args else 127


#: Open MPI mpirun options that take one value (its other options are flags, or take two: --mca).
_MPIRUN_VALUE = {"-np", "-n", "--np", "-c", "-N", "--npernode", "-npernode", "--map-by", "-map-by", "--bind-to",
                 "-bind-to", "--rank-by", "-rank-by", "-H", "--host", "-host", "--hostfile", "-hostfile",
                 "--machinefile", "-machinefile", "--default-hostfile", "-x", "--prefix", "-wdir", "--wdir",
                 "--output-filename", "-output-filename", "--launch-agent", "--tune", "-am", "--app"}
_MPIRUN_TWO = {"--mca", "-mca", "--gmca", "-gmca"}


def _read_text(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _not_enough(np_: int, app: str) -> str:
    return ("--------------------------------------------------------------------------\n"
            f"There are not enough slots available in the system to satisfy the {np_}\n"
            f"slots that were requested by the application:\n\n  {app}\n\n"
            "Either request fewer slots for your application, or make more slots\navailable for use.\n"
            "--------------------------------------------------------------------------")


def mpirun_plan(args: list[str], env: dict[str, Any], read_file: object = None,
                local_slots: int = 1) -> tuple[dict[str, Any] | None, str]:
    """Open MPI's reading of ``mpirun args``: ({"nodes": [(host, procs)], "np", "env", "argv", "flags"}, "")
    or (None, the error it prints). ``read_file(path)`` reads a hostfile (default: open)."""
    opts: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a in _MPIRUN_TWO:
            opts.setdefault("mca", []).append(" ".join(args[i + 1:i + 3]))
            i += 3
        elif a.startswith("--") and "=" in a:
            key, _, value = a.partition("=")
            opts.setdefault(key.lstrip("-"), []).append(value)
            i += 1
        elif a in _MPIRUN_VALUE:
            if i + 1 >= len(args):
                return None, f"mpirun: Error: option \"{a}\" did not have enough parameters (1)"
            opts.setdefault(a.lstrip("-"), []).append(args[i + 1])
            i += 2
        elif a.startswith("-"):
            opts.setdefault(a.lstrip("-"), []).append("")
            i += 1
        else:
            break
    argv = args[i:]
    if not argv:
        return None, "No executable was specified on the mpirun command line.\n\nAborting."
    slots: list[tuple[str, int]] = []
    for key in ("hostfile", "machinefile", "default-hostfile"):
        for path in opts.get(key, []):
            try:
                text = read_file(path) if callable(read_file) else _read_text(path)
            except OSError:
                return None, (f"Open RTE was unable to open the hostfile:\n    {path}\nCheck to make sure the path "
                              "and filename are correct.")
            for line in str(text).splitlines():
                words = line.split("#", 1)[0].split()
                if words:
                    n = next((int(w.split("=", 1)[1]) for w in words[1:] if w.startswith("slots=")), 1)
                    slots.append((words[0], n))
    for spec in opts.get("H", []) + opts.get("host", []):
        for item in spec.split(","):
            host, _, count = item.partition(":")
            slots.append((host, int(count) if count.isdigit() else 1))
    if not slots:
        import socket

        slots = [(socket.gethostname(), local_slots)]
    per_node = next((int(v) for k in ("N", "npernode") for v in opts.get(k, []) if v.isdigit()), None)
    np_ = next((int(v) for k in ("np", "n", "c") for v in opts.get(k, []) if v.isdigit()), None)
    over = "oversubscribe" in opts
    nodes: list[tuple[str, int]] = []
    if per_node is not None:
        np_ = np_ or per_node * len(slots)
        left = np_
        for host, n in slots:
            take = min(per_node, left)
            if take > n and not over:
                return None, _not_enough(np_, argv[0])
            if take:
                nodes.append((host, take))
            left -= take
        if left > 0:
            return None, (f"Your job has requested more processes than the ppr for\nthis topology can support:\n\n"
                          f"  App: {argv[0]}\n  Number of procs:  {np_}\n  PPR: {per_node}:node\n")
    else:
        total = sum(n for _h, n in slots)
        np_ = np_ or total
        if np_ > total and not over:
            return None, _not_enough(np_, argv[0])
        left = np_
        for host, n in slots:
            take = min(n, left) if not over or host != slots[-1][0] else left
            if take:
                nodes.append((host, take))
            left -= take
    child: dict[str, str] = {}
    for item in opts.get("x", []):
        name, eq, value = item.partition("=")
        if eq:
            child[name] = value
        elif name in env:
            child[name] = env[name]
    return {"nodes": nodes, "np": np_, "env": child, "argv": argv, "flags": set(opts)}, ""


def cmd_mpirun(args: list[str]) -> int:
    """Open MPI's mpirun: the job laid out over the hostfile, its program started once, here, as rank 0.

    The program sees OMPI_COMM_WORLD_* as Open MPI sets them plus MF_MPI_NODES (host:processes of
    every node), so an MPI-built nccl-tests prints the whole job's output. Every node of the job is
    taken to be this node's simulated hardware.
    """
    import shutil
    import subprocess

    cfg = load_config()
    delay(cfg, "mpirun")
    msg = fault(cfg, "mpirun")
    if msg:
        err(msg)
        return 1
    plan, problem = mpirun_plan(args, dict(os.environ), local_slots=int((cfg.get("gpu") or {}).get("count") or 1))
    if plan is None:
        err(problem)
        return 1
    if os.geteuid() == 0 and "allow-run-as-root" not in plan["flags"] and not (
            os.environ.get("OMPI_ALLOW_RUN_AS_ROOT") and os.environ.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")):
        err("mpirun has detected an attempt to run as root.\n\nRunning as root is *strongly* discouraged as any "
            "mistake (e.g., in\ndefining TMPDIR) or bug can result in catastrophic damage to the OS\nfile system, "
            "leaving your system in an unusable state.\n\nWe strongly suggest that you run mpirun as a non-root user.")
        return 1
    prog = plan["argv"][0]
    path = prog if "/" in prog else shutil.which(prog)
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        err("--------------------------------------------------------------------------\n"
            "mpirun was unable to find the specified executable file, and therefore\ndid not launch the job.  This "
            "error was first reported for process\nrank 0; it may have occurred for other processes as well.\n\n"
            f"NOTE: A common cause for this error is misspelling a mpirun command\n      line parameter option "
            f"(remember that mpirun interprets the first\n      unrecognized command line token as the executable).\n\n"
            f"Node:       {plan['nodes'][0][0]}\nExecutable: {prog}\n"
            "--------------------------------------------------------------------------")
        return 1
    env = {**os.environ, **plan["env"], "OMPI_COMM_WORLD_SIZE": str(plan["np"]), "OMPI_COMM_WORLD_RANK": "0",
           "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": str(plan["nodes"][0][1]),
           "MF_MPI_NODES": ",".join(f"{h}:{n}" for h, n in plan["nodes"])}
    return subprocess.run([path, *plan["argv"][1:]], env=env).returncode


# --------------------------------------------------------------------------------------------
# hccl_test (CANN's HCCL Performance Tester): generated from the simulated NPUs and the actual arguments
#
# The output is the tester's result table as CANN documents it (hiascend.com, "HCCL Performance Tester: Result
# Description": data_size per NPU in bytes, aveg_time in us, alg_bandwidth in GB/s (algorithm bandwidth),
# check_result success/failed/NULL), one row per size from -b to -e by factor -f, for the ranks mpirun started
# (-p NPUs per node). Bandwidth model: the NPUs of a node are a full HCCS mesh, each with (ranks - 1) links of
# config.json ``gpu.hccs_link_gbs`` GB/s; peak bus bandwidth = links x link GB/s x E_HCCS, E_HCCS = 0.80 (an
# assumption: no hccl_test capture exists here), algbw = busbw / (2(n-1)/n); a latency of 20 us (assumption)
# ramps small sizes. Rows wobble by +-0.6%, deterministic per host and size.
#
# Launched by mpirun (the gate's probe: mpirun -n 8 ... -p 8) the shim runs once as rank 0 of the whole job. Launched
# by Slurm (srun -N2 --ntasks-per-node=8 --gres=npu:8 --mpi=pmi2 ..., no mpirun: the ranks come from Slurm, as Open
# MPI's PMI-2 launch has them) every task starts: the world is SLURM_NTASKS ranks over SLURM_NNODES nodes, and only
# SLURM_PROCID 0 prints the table, as the tester prints from rank 0; the others check their node and exit.

HCCL_TESTS = ("all_reduce_test", "all_gather_test", "reduce_scatter_test", "broadcast_test", "alltoall_test")
#: Only all_reduce_test answers (the acceptance gate runs it); the others say they are not simulated.
E_HCCS = 0.80
HCCL_LATENCY_US = 20.0
_HCCL_DTYPES = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "fp16": 2, "fp32": 4, "bfp16": 2, "uint8": 1,
                "uint16": 2, "uint32": 4, "uint64": 8, "fp64": 8}


def cmd_mf_hccl_test(args: list[str]) -> int:
    """``mf-hccl-test <test> args...``: what the hccl_test binaries CANN installs exec."""
    if not args:
        return 127
    test, argv = args[0], args[1:]
    if test != "all_reduce_test":
        err(f"{test}: only all_reduce_test is simulated on this host")
        return 1
    st, cfg = read_state(), load_config()
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("-") and i + 1 < len(argv):
            opts[argv[i].lstrip("-")] = argv[i + 1]
            i += 2
        else:
            err(f"hccl_test: unknown argument {argv[i]}")
            return 1
    if not st["installed"].get("ascend-driver"):
        err("hccl_test: aclInit failed: the NPU driver is not installed (ret 100003)")
        return 1
    gpu = cfg.get("gpu") or {}
    npus = int(gpu.get("count") or 0)
    per_node = int(opts.get("p", "8"))
    srun = "OMPI_COMM_WORLD_SIZE" not in os.environ and "SLURM_PROCID" in os.environ
    if srun:
        ranks, n_nodes = int(os.environ.get("SLURM_NTASKS") or 1), int(os.environ.get("SLURM_NNODES") or 1)
    else:
        ranks = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
        n_nodes = max(1, len((os.environ.get("MF_MPI_NODES") or "x").split(",")))
    if per_node > npus or ranks > per_node * n_nodes:
        err(f"hccl_test: -p {per_node} NPUs per node, but this node has {npus} (npu-smi info)")
        return 1
    lo, hi = _parse_size(opts.get("b", "8K")), _parse_size(opts.get("e", "64M"))
    factor = _strtol(opts.get("f", "2"))
    dtype = opts.get("d", "fp32")
    if lo is None or hi is None or dtype not in _HCCL_DTYPES or factor < 2:
        err(f"hccl_test: invalid sizes ({opts.get('b')}, {opts.get('e')}), data type {dtype!r} or factor {factor}")
        return 1
    if srun and os.environ.get("SLURM_PROCID") != "0":
        return 0
    n = max(ranks, 1)
    busbw = max(n - 1, 0) * float(gpu.get("hccs_link_gbs") or 0.0) * E_HCCS
    peak = busbw / (2 * (n - 1) / n) if n > 1 else 0.0
    rows = ["data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:"]
    size = lo
    while size <= hi:
        import hashlib

        wobble = 1.0 + ((int(hashlib.sha256(f"{os.uname().nodename}:{size}".encode()).hexdigest()[:8], 16)
                         % 1201) - 600) / 100000.0
        t_us = HCCL_LATENCY_US + (size / (peak * 1e9) * 1e6 if peak else 0.0)
        t_us *= wobble
        algbw = size / (t_us * 1e-6) / 1e9 if peak else 0.0
        rows.append(f"{size:<18d} | {t_us:<15.2f} | {algbw:<20.5f} | success")
        size *= factor
    out("\n".join(rows) + "\n")
    return 0


# --------------------------------------------------------------------------------------------
# installers


def cmd_curl(args: list[str]) -> int:
    import io
    import re
    import tarfile

    cfg = load_config()
    msg = fault(cfg, "curl")
    if msg:
        err(msg)
        return 22
    dest = args[args.index("-o") + 1] if "-o" in args else None
    url = [a for a in args if "://" in a][-1]
    name = url.rsplit("/", 1)[-1]
    version = (re.search(r"(\d+(?:\.\d+)+(?:\.RC\d+)?)", name) or re.search(r"(\d+)", name))
    ver = version.group(1) if version else "0"
    if "efa-installer" in name:
        kind, subdir, script = "efa", "aws-efa-installer", "efa_installer.sh"
    elif "erdma" in name:
        kind, subdir, script = "erdma", "erdma_installer", "install.sh"
    elif "npu-driver" in name:
        kind, subdir, script = "ascend-driver", "", ""
    elif "npu-firmware" in name:
        kind, subdir, script = "ascend-firmware", "", ""
    elif "cann-toolkit" in name:
        kind, subdir, script = "ascend-cann", "", ""
    else:
        kind, subdir, script = "generic", "", ""
    body = f'#!/bin/sh\nexec mf-install {kind} {ver} "$@"\n'.encode()
    if name.endswith((".tar.gz", ".tgz")):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo(f"{subdir}/{script}")
            info.size, info.mode = len(body), 0o755
            tar.addfile(info, io.BytesIO(body))
        data = buf.getvalue()
    else:
        data = body
    if dest:
        with open(dest, "wb") as fh:
            fh.write(data)
    else:
        sys.stdout.buffer.write(data)
    return 0


def cmd_mf_install(args: list[str]) -> int:
    kind, version = args[0], args[1]
    cfg = load_config()
    delay(cfg, f"install {kind}")
    with state() as st:
        st["installed"][kind] = version
        if kind == "efa":
            _write(_f("opt", "amazon", "efa_installed_packages"),
                   f"# EFA installer version: {version}\n# Debug packages installed: no\n"
                   "# Packages installed:\nefa-config efa-profile libfabric-aws openmpi4-aws-cuda ibacm\n")
            _write(_f("opt", "amazon", "ofi-nccl", "lib", "libnccl-net.so"), "")
            if "efa" not in st["modules"]:
                st["modules"].append("efa")
            out("===================================================\nEFA installation complete.\n")
        elif kind == "erdma":
            st["packages"]["erdma"] = f"{version}-1"
            if "erdma" not in st["modules"]:
                st["modules"].append("erdma")
        elif kind == "ascend-driver":
            _write(_f("usr", "local", "Ascend", "driver", "version.info"), f"Version={version}\n")
            npu_devices(cfg)
        elif kind == "ascend-firmware":
            _write(_f("usr", "local", "Ascend", "firmware", "version.info"), f"Version={version}\n")
        elif kind == "ascend-cann":
            _write(_f("usr", "local", "Ascend", "ascend-toolkit", "latest", "aarch64-linux",
                      "ascend_toolkit_install.info"), f"package_name=Ascend-cann-toolkit\nversion={version}\n")
            # this host's own shim by its path: a Slurm job's task carries the PATH of wherever it was submitted
            shim = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "mf-hccl-test")
            for test in HCCL_TESTS:  # CANN's HCCL Performance Tester, built (tools/hccl_test/bin)
                path = _f("usr", "local", "Ascend", "ascend-toolkit", "latest", "tools", "hccl_test", "bin", test)
                _write(path, f'#!/bin/sh\nexec {shim} {test} "$@"\n')
                os.chmod(path, 0o755)
    return 0


def cmd_git(args: list[str]) -> int:
    if args[:1] != ["clone"]:
        return 0
    pos = [a for a in args[1:] if not a.startswith("-")]
    branch = args[args.index("--branch") + 1] if "--branch" in args else "master"
    pos = [a for a in pos if a != branch and a != "1"]
    dest = pos[-1]
    os.makedirs(dest, exist_ok=True)
    _write(os.path.join(dest, "Makefile"), f"# nccl-tests {branch}\n")
    return 0


def cmd_make(args: list[str]) -> int:
    cfg = load_config()
    delay(cfg, "make")
    d = args[args.index("-C") + 1] if "-C" in args else "."
    mpi = next((a.split("=", 1)[1] for a in args if a.startswith("MPI=")), "0")
    version = "unknown"
    try:
        with open(os.path.join(d, "Makefile")) as fh:
            version = fh.readline().split()[-1]
    except (OSError, IndexError):
        pass
    for test in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf",
                 "broadcast_perf", "reduce_perf"):
        path = os.path.join(d, "build", test)
        # this host's own shim by its path: a Slurm job's task carries the PATH of wherever it was submitted
        shim = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "mf-nccl-test")
        _write(path, f"#!/bin/sh\nexport MF_NCCL_MPI={1 if mpi == '1' else 0} MF_NCCL_TESTS_VERSION={version}\n"
                     f'exec {shim} {test} "$@"\n')
        os.chmod(path, 0o755)
    out("Compiling all_reduce.cu ... done\n")
    return 0


# --------------------------------------------------------------------------------------------
# CPUs

LSCPU_VERSION = "2.37.2"  # Ubuntu 22.04's util-linux (the simulated hosts' /etc/os-release)


def cpu_fields(cpu: dict[str, Any]) -> list[tuple[str, str]]:
    """lscpu's summary fields (name with its colon, value) for the simulated CPUs, in lscpu's order."""
    sockets, cores, threads = int(cpu["sockets"]), int(cpu["cores_per_socket"]), int(cpu["threads_per_core"])
    model = str(cpu.get("model") or "")
    low = model.lower()
    vendor = cpu.get("vendor") or ("AuthenticAMD" if "amd" in low else "HiSilicon" if "kunpeng" in low
                                   else "GenuineIntel" if "intel" in low else "")
    arch = cpu.get("arch") or ("aarch64" if vendor in ("HiSilicon", "ARM") else "x86_64")
    total_cores = sockets * cores
    cpus = total_cores * threads
    nodes = max(1, int(cpu.get("numa_nodes") or sockets))
    fields = [("Architecture:", arch), ("CPU op-mode(s):", "64-bit" if arch == "aarch64" else "32-bit, 64-bit"),
              ("Byte Order:", "Little Endian"), ("CPU(s):", str(cpus)),
              ("On-line CPU(s) list:", f"0-{cpus - 1}" if cpus > 1 else "0")]
    if vendor:
        fields.append(("Vendor ID:", str(vendor)))
    if model:
        fields.append(("Model name:", model))
    fields += [("Thread(s) per core:", str(threads)), ("Core(s) per socket:", str(cores)),
               ("Socket(s):", str(sockets)), ("NUMA node(s):", str(nodes))]
    per_node = max(1, total_cores // nodes)
    for n in range(nodes):
        first, last = n * per_node, (n + 1) * per_node - 1 if n < nodes - 1 else total_cores - 1
        spans = [(first + t * total_cores, last + t * total_cores) for t in range(threads)]
        fields.append((f"NUMA node{n} CPU(s):", ",".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)))
    return fields


def lscpu_text(fields: list[tuple[str, str]]) -> str:
    """Flat text: every value one column right of the longest name (libsmartcols' layout)."""
    width = max(len(name) for name, _v in fields)
    return "".join(f"{name:<{width}} {value}\n" for name, value in fields)


def lscpu_json(fields: list[tuple[str, str]]) -> str:
    """``lscpu -J`` as libsmartcols prints it: 3-space indents, entries joined by "},{"."""
    body = "},{\n".join(f'         "field": {json.dumps(name)},\n         "data": {json.dumps(value)}\n      '
                        for name, value in fields)
    return '{\n   "lscpu": [\n      {\n' + body + '}\n   ]\n}\n'


#: lscpu's options other than the summary's (util-linux 2.37 ``lscpu --help``): real, but not simulated.
_LSCPU_OTHER = {"-e", "--extended", "-p", "--parse", "-C", "--caches", "-a", "--all", "-b", "--online", "-c",
                "--offline", "-s", "--sysroot", "-x", "--hex", "-y", "--physical", "-B", "--bytes", "--output-all"}


def cmd_lscpu(args: list[str]) -> int:
    cfg = load_config()
    cpu = cfg.get("cpu")
    if not cpu:
        err("sh: 1: lscpu: not found")
        return 127
    as_json = False
    for a in args:
        if a in ("-J", "--json"):
            as_json = True
        elif a in ("-V", "--version"):
            out(f"lscpu from util-linux {LSCPU_VERSION}\n")
            return 0
        elif a.split("=", 1)[0] in _LSCPU_OTHER or a[:2] in ("-e", "-p", "-C"):
            err(f"mfshim: lscpu {a} is not simulated (the summary only: lscpu, lscpu -J)")
            return 1
        else:
            bad = f"unrecognized option '{a}'" if a.startswith("--") else f"invalid option -- '{a.lstrip('-')[:1]}'"
            err(f"lscpu: {bad}\nTry 'lscpu --help' for more information.")
            return 1
    fields = cpu_fields(cpu)
    out(lscpu_json(fields) if as_json else lscpu_text(fields))
    return 0


def cmd_nproc(args: list[str]) -> int:
    cpu = load_config().get("cpu")
    if not cpu:
        err("sh: 1: nproc: not found")
        return 127
    count = int(cpu["sockets"]) * int(cpu["cores_per_socket"]) * int(cpu["threads_per_core"])
    ignore, everything, rest = 0, False, list(args)
    while rest:
        a = rest.pop(0)
        if a == "--all":
            everything = True
        elif a == "--ignore" and rest:
            ignore = int(rest.pop(0))
        elif a.startswith("--ignore="):
            ignore = int(a.split("=", 1)[1])
        else:
            err(f"nproc: unrecognized option '{a}'\nTry 'nproc --help' for more information.")
            return 1
    if not everything:
        for var in ("OMP_NUM_THREADS", "OMP_THREAD_LIMIT"):
            value = os.environ.get(var, "").split(",")[0].strip()
            if value.isdigit() and int(value) > 0:
                count = int(value) if var == "OMP_NUM_THREADS" else min(count, int(value))
    out(f"{max(1, count - ignore)}\n")
    return 0


# --------------------------------------------------------------------------------------------
# storage

GIB = 1 << 30


def disks(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    nv = cfg.get("nvme", {})
    out_ = [{"path": "/dev/nvme0n1", "model": nv.get("root_model", "Amazon Elastic Block Store"),
             "size": 200 * GIB, "root": True}]
    for i in range(int(nv.get("count", 0))):
        out_.append({"path": f"/dev/nvme{i + 1}n1", "model": nv.get("model", "Amazon EC2 NVMe Instance Storage"),
                     "size": int(nv.get("size", 3576 * GIB)), "root": False})
    return out_


def _mountpoint(st: dict[str, Any], dev: str, label: str | None) -> str | None:
    for src, target, *_ in st["mounts"]:
        if src == dev or (label and src == f"LABEL={label}"):
            return str(target)
    return None


def cmd_lsblk(args: list[str]) -> int:
    cfg = load_config()
    st = read_state()
    member_of = {m: dev for dev, a in st["md"].items() for m in a["members"]}
    arrays_done: set[str] = set()

    def node(path: str, typ: str, size: int, model: str | None, children: list[Any]) -> dict[str, Any]:
        fs = st["fs"].get(path, {})
        return {"name": path.rsplit("/", 1)[-1], "path": path, "type": typ, "size": size,
                "fstype": fs.get("type"), "mountpoint": _mountpoint(st, path, fs.get("label")),
                "model": model, "label": fs.get("label"), **({"children": children} if children else {})}

    devices = []
    for d in disks(cfg):
        if d["root"]:
            part = {"name": "nvme0n1p1", "path": "/dev/nvme0n1p1", "type": "part", "size": d["size"] - GIB,
                    "fstype": "ext4", "mountpoint": "/", "model": None, "label": "cloudimg-rootfs"}
            devices.append({**node(d["path"], "disk", d["size"], d["model"], [part])})
            continue
        kids = []
        md = member_of.get(d["path"])
        if md:
            a = st["md"][md]
            kids.append(node(md, "raid0", d["size"] * len(a["members"]), None, []))
            arrays_done.add(md)
        devices.append(node(d["path"], "disk", d["size"], d["model"], kids))
    out(json.dumps({"blockdevices": devices}, indent=3) + "\n")
    return 0


def cmd_nvme(args: list[str]) -> int:
    cfg = load_config()
    if args[:1] != ["list"]:
        return 0
    if "json" in args:
        devs = [{"NameSpace": 1, "DevicePath": d["path"], "Firmware": "0", "Index": i, "ModelNumber": d["model"],
                 "SerialNumber": f"AWS{i:016X}", "UsedBytes": d["size"], "MaximumLBA": d["size"] // 512,
                 "PhysicalSize": d["size"], "SectorSize": 512} for i, d in enumerate(disks(cfg))]
        out(json.dumps({"Devices": devs}, indent=2) + "\n")
        return 0
    text = fixture("nvme-list", cfg)
    out(text or "")
    return 0


def _in_use(st: dict[str, Any], dev: str) -> str | None:
    if dev in st["fs"]:
        return f"{dev} appears to contain an existing filesystem ({st['fs'][dev]['type']})."
    for md, a in st["md"].items():
        if dev in a["members"]:
            return f"{dev} is part of active array {md}"
    return None


def cmd_mdadm(args: list[str]) -> int:
    import uuid

    cfg = load_config()
    if "--create" in args:
        dev = args[args.index("--create") + 1]
        members = [a for a in args if a.startswith("/dev/") and a != dev]
        known = {d["path"] for d in disks(cfg)}
        with state() as st:
            for m in members:
                if m not in known:
                    err(f"mdadm: cannot open {m}: No such file or directory")
                    return 1
                why = _in_use(st, m)
                if why:
                    err(f"mdadm: {why}")
                    return 1
            if dev in st["md"]:
                err(f"mdadm: {dev} is already in use.")
                return 1
            name = next((a.split("=", 1)[1] for a in args if a.startswith("--name=")), "0")
            st["md"][dev] = {"members": members, "name": name, "uuid": str(uuid.uuid4())}
        err(f"mdadm: array {dev} started.")
        return 0
    if "--detail" in args:
        st = read_state()
        targets = [a for a in args if a.startswith("/dev/")] or sorted(st["md"])
        for dev in targets:
            a = st["md"].get(dev)
            if a is None:
                err(f"mdadm: cannot open {dev}: No such file or directory")
                return 1
            out(f"ARRAY {dev} metadata=1.2 name=node:{a['name']} UUID={a['uuid']}\n")
        return 0
    return 0


def cmd_mkfs(args: list[str], fstype: str) -> int:
    import uuid

    cfg = load_config()
    dev = [a for a in args if a.startswith("/dev/")][-1]
    label = args[args.index("-L") + 1] if "-L" in args else None
    force = "-f" in args or "-F" in args
    with state() as st:
        exists = dev in st["md"] or dev in {d["path"] for d in disks(cfg)}
        if not exists:
            err(f"mkfs.{fstype}: cannot open {dev}: No such file or directory")
            return 1
        if not force and dev in st["fs"]:
            err(f"mkfs.{fstype}: {dev} appears to contain an existing filesystem ({st['fs'][dev]['type']}).\n"
                f"mkfs.{fstype}: Use the -f option to force overwrite.")
            return 1
        if any(dev in a["members"] for a in st["md"].values()):
            err(f"mkfs.{fstype}: cannot open {dev}: Device or resource busy")
            return 1
        st["fs"][dev] = {"type": fstype, "label": label, "uuid": str(uuid.uuid4())}
    out(f"meta-data={dev}              isize=512    agcount=32, agsize=1 blks\n")
    return 0


NETWORK_FS = ("lustre", "nfs", "nfs4", "gpfs", "mount-s3", "fuse", "fuse.s3fs")


def fstab_entries(root: str | None = None) -> list[list[str]]:
    try:
        with open(os.path.join(root or FS or ROOT, "etc", "fstab")) as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return []
    return [line.split() for line in lines if line.strip() and not line.startswith("#") and len(line.split()) >= 4]


def _resolve(st: dict[str, Any], source: str) -> str | None:
    if source.startswith("LABEL="):
        label = source[6:]
        return next((dev for dev, fs in st["fs"].items() if fs.get("label") == label), None)
    if source.startswith("/dev/"):
        return source if source in st["fs"] else None
    return source


def do_mount(st: dict[str, Any], source: str, target: str, fstype: str, opts: str) -> str | None:
    if fstype not in NETWORK_FS and _resolve(st, source) is None:
        return f"mount: {target}: can't find {source}."
    if not os.path.isdir(target):
        return f"mount: {target}: mount point does not exist."
    if any(m[1] == target for m in st["mounts"]):
        return None
    st["mounts"].append([source, target, fstype, opts])
    return None


def cmd_mount(args: list[str]) -> int:
    pos = [a for a in args if not a.startswith("-")]
    opts_ = args[args.index("-o") + 1] if "-o" in args else "defaults"
    fstype = args[args.index("-t") + 1] if "-t" in args else "auto"
    pos = [a for a in pos if a not in (opts_, fstype)]
    with state() as st:
        if not pos:
            for m in st["mounts"]:
                out(f"{m[0]} on {m[1]} type {m[2]} ({m[3]})\n")
            return 0
        if len(pos) == 1:
            entry = next((e for e in fstab_entries() if e[1] == pos[0] or e[0] == pos[0]), None)
            if entry is None:
                err(f"mount: {pos[0]}: can't find in /etc/fstab.")
                return 1
            source, target, fstype, opts_ = entry[:4]
        else:
            source, target = pos[0], pos[1]
        problem = do_mount(st, source, target, fstype, opts_)
    if problem:
        err(problem)
        return 32
    return 0


def cmd_umount(args: list[str]) -> int:
    target = [a for a in args if not a.startswith("-")][-1]
    with state() as st:
        st["mounts"] = [m for m in st["mounts"] if m[1] != target and m[0] != target]
    return 0


def cmd_blkid(args: list[str]) -> int:
    st = read_state()
    for dev, fs in st["fs"].items():
        out(f'{dev}: LABEL="{fs.get("label") or ""}" UUID="{fs["uuid"]}" TYPE="{fs["type"]}"\n')
    return 0


# --------------------------------------------------------------------------------------------
# boot (called by the harness while the host's sshd is down)


def boot(root: str, fs_root: str | None = None) -> None:
    """What a boot does to the state: new boot id, /run cleared, modules and units, fstab mounted.

    ``root``: the sandbox (state); ``fs_root``: the node's filesystem (default: the sandbox).
    """
    import uuid

    global ROOT, FS
    ROOT = root
    FS = fs_root or root
    with state(root, FS) as st:
        st["boot_id"] = str(uuid.uuid4())
        st["boots"] = st.get("boots", 0) + 1
        st["reboot_required"] = False
        avail = available_modules(st)
        mods = []
        if "nvidia" in avail:
            mods += ["nvidia", "nvidia_uvm", "nvidia_modeset"]
        for m in ("efa", "erdma"):
            if m in avail:
                mods.append(m)
        conf_dir = os.path.join(FS, "etc", "modules-load.d")
        if os.path.isdir(conf_dir):
            for name in sorted(os.listdir(conf_dir)):
                try:
                    with open(os.path.join(conf_dir, name)) as fh:
                        lines = fh.read().splitlines()
                except OSError:  # e.g. Debian's modules.conf -> ../modules with no /etc/modules
                    continue
                for line in lines:
                    m = line.strip().replace("-", "_")
                    if m and not m.startswith("#") and m in avail and m not in mods:
                        mods.append(m)
        st["modules"] = mods
        for name, u in st["units"].items():
            u["active"] = bool(u["enabled"]) and (not _unit_needs_driver(name) or "nvidia" in mods)
        st["mounts"] = [m for m in st["mounts"] if m[1] == "/"]
        for e in fstab_entries(FS):
            if e[1] != "/":
                do_mount(st, e[0], e[1], e[2], e[3])
    for name in os.listdir(os.path.join(root, "run")):
        try:  # noqa: SIM105 - contextlib costs an import on every tool call
            os.unlink(os.path.join(root, "run", name))
        except OSError:
            pass
    if "nvidia" in read_state(root)["modules"]:
        gpu_devices(load_config(root))
    if read_state(root)["installed"].get("ascend-driver"):
        npu_devices(load_config(root))
    # enabled units with a real daemon come up with the host, munge first (slurmd authenticates through it)
    started = {u: _daemon_start(u) is None for u in sorted(REAL_DAEMONS, key=("munge", "slurmctld", "slurmd").index)
               if _real(u) and (read_state(root)["units"].get(u) or {}).get("enabled")}
    if started:
        with state(root, FS) as st:
            for u, up in started.items():
                st["units"][u]["active"] = up


# --------------------------------------------------------------------------------------------


def cmd_sudo(args: list[str]) -> int:
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "--":
            break
        if flag in ("-u", "-g", "-C") and args:
            args.pop(0)
    if not args:
        return 0
    os.execvp(args[0], args)
    return 127


HANDLERS = {
    "apt-get": cmd_apt_get,
    "apt": cmd_apt_get,
    "apt-mark": cmd_apt_mark,
    "dpkg-query": cmd_dpkg_query,
    "rpm": cmd_rpm,
    "modprobe": cmd_modprobe,
    "lsmod": cmd_lsmod,
    "systemctl": cmd_systemctl,
    "reboot": cmd_reboot,
    "shutdown": cmd_reboot,
    "nvidia-smi": cmd_nvidia_smi,
    "ibstat": cmd_ibstat,
    "ibv_devinfo": cmd_ibv_devinfo,
    "fi_info": cmd_fi_info,
    "npu-smi": cmd_npu_smi,
    "hccn_tool": cmd_hccn_tool,
    "mf-nccl-test": cmd_mf_nccl_test,
    "mf-hccl-test": cmd_mf_hccl_test,
    "all_reduce_perf": lambda a: cmd_nccl_test(a, "all_reduce_perf"),
    "all_gather_perf": lambda a: cmd_nccl_test(a, "all_gather_perf"),
    "mpirun": cmd_mpirun,
    "curl": cmd_curl,
    "mf-install": cmd_mf_install,
    "git": cmd_git,
    "make": cmd_make,
    "lsblk": cmd_lsblk,
    "lscpu": cmd_lscpu,
    "nproc": cmd_nproc,
    "nvme": cmd_nvme,
    "mdadm": cmd_mdadm,
    "mkfs.xfs": lambda a: cmd_mkfs(a, "xfs"),
    "mkfs.ext4": lambda a: cmd_mkfs(a, "ext4"),
    "mount": cmd_mount,
    "umount": cmd_umount,
    "blkid": cmd_blkid,
    "ldconfig": lambda a: 0,
    "update-initramfs": lambda a: 0,
    "sudo": cmd_sudo,
}


def main(argv: list[str]) -> int:
    name = os.path.basename(argv[0])
    if name == "mfshim.py" and len(argv) > 1:  # python mfshim.py TOOL args...
        argv = argv[1:]
        name = argv[0]
    if not ROOT:
        err(f"{name}: MF_ROOT is not set (not on a simulated host)")
        return 127
    if name != "sudo":
        line = json.dumps({"t": round(time.time(), 4), "argv": [name, *argv[1:]]}) + "\n"
        fd = os.open(_p("log", "invocations.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    handler = HANDLERS.get(name)
    if handler is None:
        err(f"{name}: no shim")
        return 127
    return int(handler(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
