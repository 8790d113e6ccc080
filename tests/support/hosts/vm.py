"""VM mode: simulated GPU hosts that each look like their own machine at "/".

A VM-mode host serves SSH from private namespaces (see vminit.py): the root filesystem is an
overlay of this machine's "/" (read-only underneath) with the host's own upper layer (a tmpfs
"disk"), ``/tmp`` and ``/run`` are private tmpfs, ``/dev`` is minimal, ``/proc`` holds the shims'
views (mounts, mdstat, boot_id; the kernel procfs of its own processes is at /run/mf-sim/proc),
``/etc`` says Ubuntu 22.04 and has the host's name, users, sshd config and host key, and the host's
sandbox (config.json, state.json, log/) is bind-mounted at its own path so the harness and the shims share it (the shims
get ``MF_FS_ROOT=/``). Product code uses ``Host.fs_root = "/"`` (as ``hosts_from_spec`` builds it):
``/etc/nccl.conf``, ``/etc/fstab``, ``/opt/...``, mount points all land in the host's upper layer
(:meth:`VmHost.upper`), never on this machine. Port 22 of the host's address is bound by the
(root) vminit process and each connection is served by ``sshd -i`` inside the host.

Logins: the names in ``users`` (default ``ubuntu`` - what cluster specs use - and ``mfnode``),
all uid 0 *inside the host's user namespace*: that namespace maps ids 1:1 (files keep their
owners) but holds no capability over this machine, and the host's mount tree only reaches its
overlay, its tmpfs mounts and the sandbox. So ``sudo -n`` (the shim) works as on a cloud image,
and a tool without a shim still cannot load modules, mount, change sysctls or the network, or see
a process of this machine. Needs root here (the namespaces and mounts are made by root).

SSH source rules (:meth:`VmHost.set_ssh_allow`): a list of CIDRs the host accepts SSH from, as its
security groups say (the EC2 emulator computes them from the instance's groups and re-applies them
when rules or members change). vminit attaches them as a BPF socket filter to the listening socket:
a SYN from any other source is dropped, so the client's connect times out, as on EC2. ``None`` (the
default) filters nothing. The host's own address always reaches it (:meth:`VmHost.wait_listening`
probes from there).

A reboot (the ``reboot`` shim asks for it) kills every process of the host, empties ``/run``,
runs the shims' boot inside the host and starts sshd again; the upper layer (the "disk") stays.
:meth:`VmHost.stop` ends the host: its namespace and every mount in it go away with its processes.

In process (e.g. inside the EC2 emulator, ``python -m metalfleet.testing.ec2``)::

    from metalfleet.testing.hosts.vm import boot_vm_host

    host = boot_vm_host("i-0abc", address="127.77.0.5", authorized_keys=[pub_line],
                        offering="p5.48xlarge", provider="aws")
    host.address, host.port, host.host_key      # "ssh-ed25519 AAAA... i-0abc-hostkey"
    host.host()                                  # metalfleet Host: user ubuntu, fs_root "/"
    host.stop()                                  # idempotent; call for every host before exiting

``address=None`` picks a free ``127.x.y.z``. Each host is one root ``vminit`` child process (plus
the host's pid 1 and its sessions); booting one takes about 0.05-0.1 s (host key included). Hosts
die with the process that booted them (their control pipe closes, and they go down, namespace,
mounts and all), so a killed emulator leaves no process or mount behind; its hosts' folders
(``/tmp/mf-hosts-*``) are removed by ``stop()``, or by :func:`stop_all` at a normal interpreter exit.

From a shell (prints one JSON line ``{"address", "port", "host_key", "pid", "name"}``, runs until
SIGTERM/SIGINT)::

    python -m metalfleet.testing.hosts.vm boot --address 127.77.0.5 --authorized-key-file key.pub --offering p5.48xlarge
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import harness
from .harness import (
    _WORKER_N,
    PROFILES,
    SYSTEM_PYTHON,
    UBUNTU_2204,
    HarnessError,
    HostFleet,
    SimHost,
    _AddressInUse,
    _children,
    _descendants,
    _initial_state,
    _keygen,
    _kill,
    host_config,
    new_fleet,
    sshd_config,
)

mfshim: Any = getattr(harness, "mfshim")  # noqa: B009 - the shims' own state logic (tests/support/hosts/shims/mfshim.py)
VMINIT = Path(__file__).resolve().parent / "vminit.py"
VM_USERS: tuple[str, ...] = ("ubuntu", "mfnode")

__all__ = ["VM_USERS", "VmHost", "boot_vm_host", "profile_for_offering", "start_vm_hosts", "stop_all"]


def profile_for_offering(offering: str | None, provider: str | None = None) -> str:
    """The fixtures profile (harness.PROFILES) for an offering name.

    p5/p5e/p5en -> ``p5`` (H100, EFA), p4d/p4de -> ``p4d`` (A100, EFA), Alibaba ebmgn8v -> ``alibaba-h20``,
    Huawei kat2e -> ``ascend-910b``; otherwise by the offering's known traits (H100/H200 on InfiniBand
    or RoCE, A100, H20, Ascend); anything else (CPU instances, unknown names) -> ``plain``.
    """
    name = (offering or "").lower()
    if name in PROFILES:
        return name
    family = name.split(".", 1)[0]
    by_family = {"p5": "p5", "p5e": "p5", "p5en": "p5", "p4d": "p4d", "p4de": "p4d"}
    if family in by_family:
        return by_family[family]
    if name.startswith("ecs.ebmgn8v"):
        return "alibaba-h20"
    if name.startswith("physical.kat2"):
        return "ascend-910b"
    try:
        from metalfleet.bootstrap.inventory import traits_for

        traits = traits_for(provider, offering)
    except Exception:
        traits = None
    if traits is None:
        return "plain"
    model = traits.gpu_model.upper()
    if traits.vendor == "ascend":
        return "ascend-910b"
    if model == "H20":
        return "alibaba-h20"
    if "H100" in model or "H200" in model:
        fabric = str(getattr(traits.fabric, "value", traits.fabric))
        return {"efa": "p5", "infiniband": "h100-ib", "roce": "h100-roce"}.get(fabric, "p5")
    if "A100" in model:
        return "p4d"
    return "plain"


# --------------------------------------------------------------------------------------------


def _resolve_inside(root: str, path: str) -> Path:
    """``path`` as the host sees it, under ``root`` (its /proc/<pid>/root), symlinks resolved inside."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = os.path.join(root, *done, part)
        if os.path.islink(candidate):
            hops += 1
            if hops > 40:
                raise HarnessError(f"too many symbolic links in {path}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        done.append(part)
    return Path(root, *done)


def _sshd_config(h: VmHost) -> str:
    env = {"MF_ROOT": str(h.root), "MF_FS_ROOT": "/", "MF_FIXTURES": str(h.fleet.fixtures_dir),
           "PATH": f"{h.fleet.bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "LC_ALL": "C.UTF-8"}
    return sshd_config(header=f"# sshd of simulated host {h.name} (VM mode, tests/support/hosts/vm.py)\n",
                       listen=f"{h.address}:{h.port}", host_key="/etc/ssh/ssh_host_ed25519_key",
                       pid_file="/run/sshd.pid", authorized_keys="/etc/ssh/authorized_keys",
                       users=" ".join(h.users), permit_root="prohibit-password", env=env)


@dataclass
class VmHost(SimHost):
    """A simulated host in VM mode (see the module docstring). ``root`` is its sandbox (state only)."""

    users: tuple[str, ...] = VM_USERS
    authorized_keys: tuple[str, ...] = ()
    vm: subprocess.Popen[str] | None = None
    vm_pid: int = 0
    upper_fd: int = -1
    reaper: int = 0
    standalone: bool = False
    #: Seconds from starting the machine to sshd accepting connections (the last start).
    boot_seconds: float = 0.0
    #: CIDRs allowed to reach the host's SSH port (None: any source); see :meth:`set_ssh_allow`.
    ssh_allow: tuple[str, ...] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- the machine -----------------------------------------------------------------------
    def _vm_config(self) -> dict[str, Any]:
        import pwd

        key = (self.sshd_dir / "ssh_host_ed25519_key").read_text()
        pub = (self.sshd_dir / "ssh_host_ed25519_key.pub").read_text()
        keys = "".join(f"{k.strip()}\n" for k in (*self.authorized_keys,
                                                   Path(f"{self.fleet.client_key}.pub").read_text()))
        have = {p.pw_name for p in pwd.getpwall()}
        passwd = "".join(f"{u}:x:0:0:{u}:/home/{u}:/bin/sh\n" for u in self.users if u not in have)
        shadow = "".join(f"{u}:*:19700:0:99999:7:::\n" for u in self.users if u not in have)
        files: list[tuple[str, str, int, bool]] = [
            ("/etc/os-release", UBUNTU_2204, 0o644, False),
            ("/etc/fstab", "LABEL=cloudimg-rootfs\t/\t ext4\tdiscard,errors=remount-ro\t0 1\n", 0o644, False),
            ("/etc/hostname", f"{self.name}\n", 0o644, False),
            ("/etc/mf-sim-root", f"{self.root}\n", 0o644, False),  # its sandbox, for the shims (mfshim.ROOT)
            ("/etc/modules", "# /etc/modules: kernel modules to load at boot time.\n", 0o644, False),
            ("/etc/hosts", f"127.0.0.1 localhost\n{self.address} {self.name}\n", 0o644, False),
            ("/etc/machine-id", uuid.uuid4().hex + "\n", 0o444, False),
            ("/etc/passwd", passwd, 0o644, True),
            ("/etc/shadow", shadow, 0o640, True),
            ("/etc/ssh/sshd_config", _sshd_config(self), 0o644, False),
            ("/etc/ssh/ssh_host_ed25519_key", key, 0o600, False),
            ("/etc/ssh/ssh_host_ed25519_key.pub", pub, 0o644, False),
            ("/etc/ssh/authorized_keys", keys, 0o644, False),
        ]
        return {
            "vmdir": str(self.sshd_dir / "vm"), "hostname": self.name, "disk_size": "2g",
            "address": self.address, "port": self.port,
            "proc_views": str(self.root / "proc"),
            "binds": [[str(self.root), False], [str(self.fleet.bin_dir), True],
                      [str(self.fleet.fixtures_dir), True],
                      # read-only: slurmd (22.05) will not start without a cgroup filesystem to look at
                      *([["/sys/fs/cgroup", True]] if os.path.isdir("/sys/fs/cgroup") else [])],
            # what an Ubuntu cloud image has and this machine may not (the plain harness makes these too)
            "dirs": [f"/home/{u}" for u in self.users] + ["/etc/ssh", "/etc/mdadm", "/etc/modules-load.d", "/opt"],
            "files": files, "sshd": self.fleet.sshd, "sshd_log": str(self.sshd_dir / "sshd.log"),
            "state_root": str(self.root), "shim_dir": str(self.fleet.bin_dir),
            "ssh_allow": None if self.ssh_allow is None else list(self.ssh_allow),
        }

    def _send(self, command: str, timeout: float = 20.0) -> str:
        vm = self.vm
        if vm is None or vm.stdin is None or vm.stdout is None:
            raise HarnessError(f"{self.name}: the machine is not running")
        vm.stdin.write(command + "\n")
        vm.stdin.flush()
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(vm.stdout.readline() if vm.stdout else ""), daemon=True)
        reader.start()
        reader.join(timeout)
        reply = box[0].strip() if box else ""
        if not reply or reply.startswith("error"):
            log = (self.sshd_dir / "vm.log").read_text(errors="replace")[-2000:]
            raise HarnessError(f"{self.name}: {command.split()[0]!r} -> {reply or 'no answer'}\n{log}")
        return reply

    def _ensure_machine(self) -> None:
        if self.vm is not None and self.vm.poll() is None:
            return
        (self.sshd_dir / "vm").mkdir(exist_ok=True)
        log = open(self.sshd_dir / "vm.log", "ab")  # noqa: SIM115 - owned by the process
        self.vm = subprocess.Popen([SYSTEM_PYTHON, "-I", "-S", str(VMINIT)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
        log.close()
        self.proc = self.vm  # type: ignore[assignment]  # (SimHost.proc: what wait_listening polls)
        _, pid, fd = self._send(json.dumps(self._vm_config())).split()
        self.vm_pid, self.upper_fd = int(pid), int(fd)

    def start(self) -> None:
        """Power on (first start: make the machine; later: start it again without a boot)."""
        self.power_on(boot=False)

    def power_on(self, boot: bool = True) -> None:
        """Start the host's processes (``boot``: run the shims' boot first, as after a reboot)."""
        with self._lock:
            self._ensure_machine()
            try:
                self.reaper = int(self._send(f"up {1 if boot else 0}").split()[1])
            except HarnessError as exc:
                if "Address already in use" in str(exc):
                    raise _AddressInUse(self.address) from None
                raise

    def set_ssh_allow(self, cidrs: Sequence[str] | None) -> None:
        """Accept SSH only from ``cidrs`` (IPv4; ``None``: from anywhere), now and after reboots.

        A packet from any other source is dropped (the client's connect times out), as an EC2 security
        group without a matching rule does; the host's own address is always allowed."""
        with self._lock:
            self.ssh_allow = None if cidrs is None else tuple(str(c) for c in cidrs)
            if self.vm is not None and self.vm.poll() is None:
                self._send("allow " + json.dumps(None if self.ssh_allow is None else list(self.ssh_allow)))

    def power_off(self) -> None:
        """Kill every process of the host (sshd, sessions); its disk stays."""
        with self._lock:
            if self.vm is not None and self.vm.poll() is None and self.reaper:
                self._send("down")
            self.reaper = 0

    def reboot_now(self) -> None:
        self.rebooting = True
        try:
            self.power_off()
            time.sleep(float(self.config().get("reboot_down_seconds", 1.5)))
            self.power_on(boot=True)
            self.wait_listening()
        finally:
            self.rebooting = False

    def shutdown(self) -> None:
        """End the machine: its processes, namespaces and mounts (the disk with them)."""
        with self._lock:
            vm, self.vm, self.proc = self.vm, None, None
            self.reaper = 0
            if vm is None:
                return
            with contextlib.suppress(OSError, ValueError):
                if vm.stdin:
                    vm.stdin.write("quit\n")
                    vm.stdin.close()
            try:
                vm.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill([*_descendants(vm.pid), vm.pid])
                vm.wait(timeout=5)
            if vm.stdout:
                vm.stdout.close()

    def stop(self) -> None:
        """Stop the host for good (a host from :func:`boot_vm_host`: also removes its folder)."""
        _LIVE.discard(self)
        if self.standalone and not self.fleet._stop.is_set():
            self.fleet.stop()  # calls stop() again, below, with the fleet stopping
        else:
            self.shutdown()

    __hash__ = object.__hash__

    @property
    def running(self) -> bool:
        return self.vm is not None and self.vm.poll() is None

    # -- processes -------------------------------------------------------------------------
    def _alive(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def wait_listening(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.reaper or not self._alive(self.reaper) or (self.vm and self.vm.poll() is not None):
                log = (self.sshd_dir / "sshd.log").read_text(errors="replace")
                vmlog = (self.sshd_dir / "vm.log").read_text(errors="replace")
                raise HarnessError(f"{self.name} is down:\n{log[-1500:]}\n{vmlog[-1500:]}")
            # from the host's own address: its SSH source rules always let that in
            with contextlib.suppress(OSError), socket.create_connection((self.address, self.port), timeout=0.5,
                                                                        source_address=(self.address, 0)):
                return
            time.sleep(0.01)
        raise HarnessError(f"sshd for {self.name} not listening on {self.address}:{self.port} after {timeout}s")

    def drop_connections(self) -> int:
        """Kill every SSH session of this host (every process in it but its pid 1, the listener)."""
        if not self.reaper:
            return 0
        victims = _descendants(self.reaper)
        _kill(victims)
        return len(victims)

    def sessions(self) -> int:
        """Connections being served (one ``sshd -i`` each)."""
        if not self.reaper:
            return 0
        n = 0
        for pid in _children().get(self.reaper, []):
            with contextlib.suppress(OSError):
                n += Path(f"/proc/{pid}/comm").read_text().strip() == "sshd"
        return n

    # -- the host's files ------------------------------------------------------------------
    def file(self, path: str) -> Path:
        """``path`` as the host sees it (through its root; symlinks resolved inside the host)."""
        if not self.running:
            raise HarnessError(f"{self.name} is not running: its filesystem is gone")
        return _resolve_inside(f"/proc/{self.vm_pid}/root", path)

    def upper(self, path: str = "/") -> Path:
        """``path`` in the host's overlay upper layer: what the host wrote (or None-existent if it did not)."""
        if not self.running:
            raise HarnessError(f"{self.name} is not running: its disk is gone")
        return Path(f"/proc/{self.vm_pid}/fd/{self.upper_fd}", path.lstrip("/"))

    def edit_state(self) -> Any:
        return mfshim.state(str(self.root), fs_root=f"/proc/{self.vm_pid}/root")

    def host(self, **overrides: Any) -> Any:
        """This host as a metalfleet Host: fs_root "/", the first login user, the fleet's client key."""
        return super().host(**{"fs_root": "/", "user": self.users[0], **overrides})


# --------------------------------------------------------------------------------------------


def _new_vm_host(fleet: HostFleet, *, name: str, address: str, port: int, profile: str, index: int,
                 config: Mapping[str, Any] | None, users: Sequence[str], authorized_keys: Sequence[str],
                 provider: str | None = None, offering: str | None = None) -> VmHost:
    prof = PROFILES[profile]
    root = fleet.base / name
    sshd_dir = fleet.base / f".{name}.sshd"
    for d in ("proc/sys/kernel/random", "run", "log"):
        (root / d).mkdir(parents=True, exist_ok=True)
    sshd_dir.mkdir(mode=0o700, exist_ok=True)
    cfg = host_config(profile, config, fixtures_dir=fleet.fixtures_dir)
    (root / "config.json").write_text(json.dumps(cfg, indent=1))
    st = _initial_state(cfg)
    st["boot_id"] = str(uuid.uuid4())
    (root / "state.json").write_text(json.dumps(st))
    with mfshim.state(str(root)):  # writes the proc views
        pass
    (root / "log" / "invocations.jsonl").write_text("")
    key_file = sshd_dir / "ssh_host_ed25519_key"
    if not key_file.exists():
        _keygen(key_file, f"{name}-hostkey")
    host_key = Path(f"{key_file}.pub").read_text().strip()
    return VmHost(name=name, address=address, port=port, root=root, sshd_dir=sshd_dir, host_key=host_key,
                  fleet=fleet, index=index, traits=dict(prof.get("traits", {})),
                  provider=provider or prof.get("provider"), offering=offering or prof.get("offering"),
                  users=tuple(users), authorized_keys=tuple(k.strip() for k in authorized_keys if k.strip()))


def _boot(hosts: Sequence[VmHost]) -> None:
    for h in hosts:
        h.boot_seconds = time.monotonic()
        h.start()
    for h in hosts:
        h.wait_listening()
        h.boot_seconds = time.monotonic() - h.boot_seconds


def _start_watcher(fleet: HostFleet) -> None:
    fleet._watcher = threading.Thread(target=fleet._watch, name="mf-reboot-watch", daemon=True)
    fleet._watcher.start()


def start_vm_hosts(
    n: int,
    fixtures_profile: str = "p5",
    *,
    config: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
    name_prefix: str = "node",
    users: Sequence[str] = VM_USERS,
    authorized_keys: Sequence[str] = (),
) -> HostFleet:
    """``n`` VM-mode hosts (``start_hosts(..., vm=True)``): a :class:`HostFleet` of :class:`VmHost`."""
    _require_root()
    fleet = new_fleet(fixtures_profile, base_dir)
    try:
        for attempt in range(20):
            octet = random.randrange(1, 251)
            hosts = [
                _new_vm_host(fleet, name=f"{name_prefix}{i}", address=f"127.{150 + _WORKER_N % 50}.{octet}.{i + 1}",
                             port=22, profile=fixtures_profile, index=i,
                             config=config(i) if callable(config) else config, users=users,
                             authorized_keys=authorized_keys)
                for i in range(n)]
            fleet.hosts = list(hosts)
            try:
                _boot(hosts)
                break
            except _AddressInUse:
                for h in hosts:
                    h.shutdown()
                if attempt == 19:
                    raise
        fleet.write_known_hosts()
        _start_watcher(fleet)
        return fleet
    except BaseException:
        fleet.stop()
        raise


def _free(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def boot_vm_host(
    name: str = "node0",
    *,
    address: str | None = None,
    port: int = 22,
    authorized_keys: str | Sequence[str] = (),
    offering: str | None = None,
    provider: str | None = None,
    profile: str | None = None,
    users: Sequence[str] = VM_USERS,
    config: Mapping[str, Any] | None = None,
    index: int = 0,
    base_dir: str | os.PathLike[str] | None = None,
) -> VmHost:
    """Boot ONE VM-mode host, on demand; returns it running (sshd accepting connections).

    ``address``: a loopback address to listen on (``None``: a free ``127.x.y.z`` is picked).
    ``authorized_keys``: public key lines (or one string of lines) allowed to log in, e.g. the
    cloud key pair's; the harness's own client key (``host.fleet.client_key``) is allowed too.
    ``offering``/``provider``: the node's offering, which picks the fixtures ``profile`` unless one is
    given (:func:`profile_for_offering`). ``users``: login names (uid 0 in the host, see the module
    docstring); :meth:`VmHost.host` logs in as the first. ``config``: extra config.json values.

    Stop it with ``.stop()`` (idempotent); it also dies with this process.
    """
    _require_root()
    profile = profile or profile_for_offering(offering, provider)
    keys = authorized_keys.splitlines() if isinstance(authorized_keys, str) else list(authorized_keys)
    fleet = new_fleet(profile, base_dir)
    try:
        for attempt in range(40):
            addr = address
            if addr is None:
                addr = f"127.{200 + _WORKER_N % 50}.{random.randrange(256)}.{random.randrange(1, 255)}"
                if not _free(addr, port):
                    continue
            h = _new_vm_host(fleet, name=name, address=addr, port=port, profile=profile, index=index,
                             config=config, users=users, authorized_keys=keys, provider=provider,
                             offering=offering)
            h.standalone = True
            fleet.hosts = [h]
            try:
                _boot([h])
                break
            except _AddressInUse:
                h.shutdown()
                if address is not None or attempt == 39:
                    raise
        else:
            raise HarnessError("no free 127.x address found for a VM-mode host")
        fleet.write_known_hosts()
        _start_watcher(fleet)
        _LIVE.add(h)
        return h
    except BaseException:
        fleet.stop()
        raise


#: Hosts from boot_vm_host not stopped yet: stopped at interpreter exit (their folders removed too).
_LIVE: set[VmHost] = set()


@atexit.register
def stop_all() -> None:
    """Stop every host :func:`boot_vm_host` started in this process and not stopped yet."""
    for h in list(_LIVE):
        with contextlib.suppress(Exception):
            h.stop()


def _require_root() -> None:
    if os.geteuid() != 0:
        raise HarnessError("VM-mode hosts need root (namespaces, overlay and tmpfs mounts)")


# --------------------------------------------------------------------------------------------


def _main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m metalfleet.testing.hosts.vm", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("boot", help="boot one host, print its JSON, run until SIGTERM/SIGINT")
    b.add_argument("--name", default="node0")
    b.add_argument("--address")
    b.add_argument("--port", type=int, default=22)
    b.add_argument("--authorized-key-file", action="append", default=[])
    b.add_argument("--offering")
    b.add_argument("--provider")
    b.add_argument("--profile")
    b.add_argument("--user", action="append", dest="users")
    args = ap.parse_args(argv)
    keys = [line for f in args.authorized_key_file for line in Path(f).read_text().splitlines()]
    host = boot_vm_host(args.name, address=args.address, port=args.port, authorized_keys=keys,
                        offering=args.offering, provider=args.provider, profile=args.profile,
                        users=tuple(args.users or VM_USERS))
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    try:
        print(json.dumps({"name": host.name, "address": host.address, "port": host.port,
                          "host_key": host.host_key, "pid": os.getpid(), "user": host.users[0],
                          "client_key": str(host.fleet.client_key)}), flush=True)
        while not done.wait(0.5):
            pass
    finally:
        host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
