#!/usr/bin/python3 -IS
"""Multi-call shim that stands in for a GPU server's system tools on a simulated host.

Installed as one symlink per tool name (apt-get, dpkg-query, systemctl, modprobe, lsmod, nvidia-smi,
ibstat, fi_info, mdadm, mkfs.xfs, mount, lsblk, nvme, reboot, sudo, curl, git, make, ...) in a
directory that the simulated host's sshd puts first on PATH. Runs under the system /usr/bin/python3
(standard library only, -I -S: no user site, no pyenv).

Per host (``$MF_ROOT``, the host's sandbox, which is also its filesystem root for the steps unless
``$MF_FS_ROOT`` names another, e.g. ``/`` on a VM-mode host; see tests/hosts/vm.py):
  config.json   behaviour, editable by tests: fixture profile, GPU count, NVMe, faults, delays
  state.json    what a real install would leave: packages, modules, units, arrays, filesystems, mounts
  log/invocations.jsonl   one JSON line per shim call: {"t", "argv"}
  proc/mounts, proc/mdstat, proc/sys/kernel/random/boot_id   kept in step with state.json

Tools print real captured output from ``$MF_FIXTURES`` (the fleet's copy of tests/fixtures) where one exists for the
call (nvidia-smi table and -q, ibstat, fi_info, npu-smi, nccl-tests); structured calls the engine
parses (``--query-gpu``, ``lsblk --json``, ``nvme list -o json``) are synthesised in the real format.

Faults on captures (config.json), each small and applied to the real capture before it is printed:
  edits.<fixture key>   [[old, new], [old, new, count], ...]: text replacements (``str.replace``), e.g.
                        ``{"ibstat": [["State: Active", "State: Down", 1]]}`` for one Down port, or
                        ``{"nccl-tests": [["Using network AWS Libfabric", "Using network Socket"]]}``
  nccl.busbw_scale      multiplies algbw and busbw in every nccl-tests data row (0.6: a slow node)
  gpu.count             below the capture's GPU count, drops the last GPU sections of
                        ``nvidia-smi -q`` / ``-q -x`` (a GPU fallen off the bus); ``--query-gpu`` follows it too
``all_reduce_perf`` and ``mpirun`` print the nccl-tests capture (``mpirun`` prefers the
``nccl-tests-multinode`` fixture); ``fail.<tool>`` makes them exit 1 with that message.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time

# Only cheap modules at the top: every tool call starts this script (re, tarfile, uuid load lazily).

ROOT = os.environ.get("MF_ROOT", "")
#: The node's filesystem as the steps see it (files tools install, fstab, modules-load.d, the
#: reboot-required marker). The sandbox itself by default; "/" on a VM-mode host, whose sandbox only
#: holds the state and whose /proc is the sandbox's proc/ views.
FS = os.environ.get("MF_FS_ROOT", "")
FIXTURES = os.environ.get("MF_FIXTURES", "")

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


def load_config(root: str | None = None) -> dict:
    with open(os.path.join(root or ROOT, "config.json")) as fh:
        return json.load(fh)


class state:
    """Locked read-modify-write of state.json (a dpkg-lock-like mutex for the whole host)."""

    def __init__(self, root: str | None = None, fs_root: str | None = None) -> None:
        self.root = root or ROOT
        self.fs_root = fs_root or (FS or ROOT if root is None else root)
        self.path = os.path.join(self.root, "state.json")

    def __enter__(self) -> dict:
        self.lock = open(os.path.join(self.root, "state.lock"), "a+")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        with open(self.path) as fh:
            self.st = json.load(fh)
        return self.st

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                tmp = f"{self.path}.{os.getpid()}.tmp"
                with open(tmp, "w") as fh:
                    json.dump(self.st, fh, indent=1, sort_keys=True)
                os.replace(tmp, self.path)
                write_views(self.st, self.root, self.fs_root)
        finally:
            self.lock.close()


def read_state(root: str | None = None) -> dict:
    with open(os.path.join(root or ROOT, "state.json")) as fh:
        return json.load(fh)


def write_views(st: dict, root: str, fs_root: str | None = None) -> None:
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
    marker = _marker(fs_root or root)
    if st.get("reboot_required"):
        _write(marker, "*** System restart required ***\n")
    elif os.path.exists(marker):
        os.unlink(marker)


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def fixture(key: str, cfg: dict | None = None) -> str | None:
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


def delay(cfg: dict, name: str) -> None:
    seconds = float(cfg.get("delays", {}).get(name, 0) or 0)
    if seconds:
        time.sleep(seconds)


def fault(cfg: dict, name: str) -> str | None:
    return cfg.get("fail", {}).get(name)


# --------------------------------------------------------------------------------------------
# packages

#: Units and side effects a package brings (what its postinst would do).
PACKAGE_UNITS = {
    "nvidia-driver": ["nvidia-persistenced"],
    "nvidia-fabricmanager": ["nvidia-fabricmanager"],
    "nvidia-fabric-manager": ["nvidia-fabricmanager"],
    "doca-ofed": ["openibd"],
}
NEEDS_REBOOT = ("nvidia-driver", "doca-ofed")


def _family(pkg: str) -> str:
    """nvidia-driver-550(-server) -> nvidia-driver."""
    parts = pkg.removesuffix("-server").rsplit("-", 1)
    return parts[0] if len(parts) == 2 and parts[1].isdigit() else pkg


def install(st: dict, name: str, version: str) -> None:
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


def available_modules(st: dict) -> set[str]:
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
    return 0


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
                              f"ActiveState={'active' if s['active'] else 'inactive'}\n")
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
                    s["active"] = True
        return 0
    if verb in ("is-active", "is-enabled"):
        st = read_state()
        rc = 0
        for u in units:
            s = st["units"].get(u)
            key = "active" if verb == "is-active" else "enabled"
            ok = bool(s and s[key])
            out(("active" if ok else "inactive") if key == "active" else ("enabled" if ok else "disabled") + "\n")
            rc = rc or (0 if ok else 3)
        return rc
    return 0


def cmd_reboot(args: list[str]) -> int:
    # The harness watches for this file: it stops the host's sshd, waits, "boots", starts sshd.
    _write(_p("run", "reboot-requested"), str(time.time()))
    return 0


# --------------------------------------------------------------------------------------------
# GPU / fabric tools


def _driver_version(st: dict) -> str | None:
    for name, version in st["packages"].items():
        if _family(name) == "nvidia-driver":
            return version.split("-")[0].split(":")[-1]
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
    out(text)
    return 0


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


def cmd_fi_info(args: list[str]) -> int:
    if not read_state()["installed"].get("efa"):
        err("sh: 1: fi_info: not found")
        return 127
    out(fixture("fi_info") or "")
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
    return 0


def cmd_nccl_test(args: list[str], key: str = "nccl-tests", tool: str = "all_reduce_perf") -> int:
    cfg = load_config()
    delay(cfg, tool)
    msg = fault(cfg, tool)
    if msg:
        err(msg)
        return 1
    text = (fixture(key, cfg) if key != "nccl-tests" else None) or fixture("nccl-tests", cfg) or ""
    scale = cfg.get("nccl", {}).get("busbw_scale")
    out(_scale_busbw(text, float(scale)) if scale is not None else text)
    return 0


def cmd_mpirun(args: list[str]) -> int:
    return cmd_nccl_test(args, "nccl-tests-multinode", "mpirun")


def _scale_busbw(text: str, scale: float) -> str:
    """Multiply algbw and busbw of every nccl-tests data row (and the average) by ``scale``."""
    import re

    tag = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
    row = re.compile(r"^\s*\d+\s+\d+\s+[a-z0-9_]+\s+[a-z]+\s+-?\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+")
    num = re.compile(r"(?<![\w.\-])\d+(?:\.\d+)?(?![\w.])")

    def scaled(token: str) -> str:
        return f"{float(token) * scale:.2f}".rjust(len(token))

    lines = text.split("\n")
    for i, line in enumerate(lines):
        bare = tag.sub("", line)
        if "Avg bus bandwidth" in bare:
            lines[i] = re.sub(r"(Avg bus bandwidth\s*:\s*)([\d.]+)", lambda m: m.group(1) + scaled(m.group(2)), line)
            continue
        if not row.match(bare):
            continue
        inside = [m.span() for m in tag.finditer(line)]
        nums = [m for m in num.finditer(line) if not any(a <= m.start() < b for a, b in inside)]
        rest = nums[2:]  # after size and count; a root >= 0 is one more number before the timings
        if len(rest) == 9:
            rest = rest[1:]
        if len(rest) != 8:
            continue
        for m in sorted((rest[1], rest[2], rest[5], rest[6]), key=lambda m: -m.start()):
            line = line[:m.start()] + scaled(m.group()) + line[m.end():]
        lines[i] = line
    return "\n".join(lines)


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
        elif kind == "ascend-firmware":
            _write(_f("usr", "local", "Ascend", "firmware", "version.info"), f"Version={version}\n")
        elif kind == "ascend-cann":
            _write(_f("usr", "local", "Ascend", "ascend-toolkit", "latest", "aarch64-linux",
                      "ascend_toolkit_install.info"), f"package_name=Ascend-cann-toolkit\nversion={version}\n")
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
    for test in ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf"):
        path = os.path.join(d, "build", test)
        _write(path, f'#!/bin/sh\nexec mf-nccl-test {test} "$@"\n')
        os.chmod(path, 0o755)
    out("Compiling all_reduce.cu ... done\n")
    return 0


# --------------------------------------------------------------------------------------------
# storage

GIB = 1 << 30


def disks(cfg: dict) -> list[dict]:
    nv = cfg.get("nvme", {})
    out_ = [{"path": "/dev/nvme0n1", "model": nv.get("root_model", "Amazon Elastic Block Store"),
             "size": 200 * GIB, "root": True}]
    for i in range(int(nv.get("count", 0))):
        out_.append({"path": f"/dev/nvme{i + 1}n1", "model": nv.get("model", "Amazon EC2 NVMe Instance Storage"),
                     "size": int(nv.get("size", 3576 * GIB)), "root": False})
    return out_


def _mountpoint(st: dict, dev: str, label: str | None) -> str | None:
    for src, target, *_ in st["mounts"]:
        if src == dev or (label and src == f"LABEL={label}"):
            return target
    return None


def cmd_lsblk(args: list[str]) -> int:
    cfg = load_config()
    st = read_state()
    member_of = {m: dev for dev, a in st["md"].items() for m in a["members"]}
    arrays_done: set[str] = set()

    def node(path: str, typ: str, size: int, model: str | None, children: list) -> dict:
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


def _in_use(st: dict, dev: str) -> str | None:
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


def _resolve(st: dict, source: str) -> str | None:
    if source.startswith("LABEL="):
        label = source[6:]
        return next((dev for dev, fs in st["fs"].items() if fs.get("label") == label), None)
    if source.startswith("/dev/"):
        return source if source in st["fs"] else None
    return source


def do_mount(st: dict, source: str, target: str, fstype: str, opts: str) -> str | None:
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
    "fi_info": cmd_fi_info,
    "npu-smi": cmd_npu_smi,
    "hccn_tool": cmd_hccn_tool,
    "mf-nccl-test": cmd_nccl_test,
    "all_reduce_perf": cmd_nccl_test,
    "mpirun": cmd_mpirun,
    "curl": cmd_curl,
    "mf-install": cmd_mf_install,
    "git": cmd_git,
    "make": cmd_make,
    "lsblk": cmd_lsblk,
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
