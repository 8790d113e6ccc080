#!/usr/bin/python3 -IS
"""The "machine" of one VM-mode simulated host: started as root by tests/support/hosts/vm.py, one per host.

Standard library only (it runs under the system python with -I -S). What it does:

1. ``unshare(mount, uts)``: a private mount namespace (nothing below shows in this machine's
   mount table) with the host's name as hostname.
2. The host's disk: a tmpfs holding an overlayfs upper/work dir; the root filesystem is
   ``overlay(lowerdir=/, upperdir=disk/upper)`` - this machine's files, read-only underneath,
   every write in the host's own upper layer.
3. Inside that root: private ``/tmp`` and ``/run`` (tmpfs), a minimal ``/dev`` (null, zero, full,
   random, urandom, tty, a new devpts instance), ``/proc`` = the shims' views (mounts, mdstat,
   boot_id; no kernel procfs), and bind mounts of the shim state dir, the shim bin dir and the
   fixtures at their own paths. Then ``pivot_root`` into it and the old root is detached: nothing
   of this machine but the overlay's lower layer is reachable from inside.
4. ``up``: a new PID namespace whose pid 1 (a small reaper) mounts that namespace's kernel procfs at
   ``/run/mf-sim/proc`` (the host's own processes only; ``/proc`` stays the shims' views, and the shim
   binds this one on /proc for a real Slurm daemon, in a mount namespace of the daemon's own), then
   enters a new user namespace (uid/gid map 0..2^32-2 identical, so files keep their owners, but no
   capability outside it: no mounts, modules, devices, sysctls or network changes), runs the shims'
   boot when asked and then serves SSH inetd-style: it accepts on the host's address (bound here,
   outside, since port 22 needs a privilege the namespace lacks) and runs ``sshd -i`` per connection.
   ``down``: SIGKILL to that pid 1 takes every process of the host with it (all sessions) and closes
   the listening socket (connections are refused, as from a host that is off); ``/run`` is emptied; the disk (upper
   layer) stays, as on a reboot.

Control: one command per line on stdin, one answer per line on stdout::

    -> (config JSON, one line)       <- "ready <pid> <upper-fd>"   (or "error ...")
    -> "up 0" | "up 1" (1: boot)     <- "up <pid of the reaper>"
    -> "down"                        <- "down"
    -> "allow <JSON>"                <- "allow <n>"   (SSH source filter, see below)
    -> "quit" or end of input        (down, then exit: the namespace and its mounts go away)

SSH source filter (the host's security groups, as the EC2 emulator computes them): ``allow`` takes a
JSON list of IPv4 CIDRs (or ``null``: no filter) and attaches a classic BPF socket filter to the
listening socket (``SO_ATTACH_FILTER``; no privilege needed, nothing global touched). The kernel runs
it on every segment for that socket, the SYN included, so a connection from a source no CIDR covers is
dropped silently and the client's connect times out, as when an EC2 security group has no rule for it
(refused connections would be a different, wrong signal). The host's own address is always allowed
(traffic to itself never crosses its security group). The filter is kept across down/up (a reboot):
each new listener gets it. Accepted connections keep the filter they were accepted under.

The harness reads the host's files through ``/proc/<pid>/root`` (the host's "/") and its upper
layer through ``/proc/<pid>/fd/<upper-fd>``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import os
import platform
import signal
import socket
import struct
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
SO_ATTACH_FILTER = 26
SO_DETACH_FILTER = 27
SKF_NET_OFF = -0x100000  # classic BPF: offsets relative to the network (IP) header
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine(), 155)
#: The kernel's procfs of the host's own PID namespace (its processes only), mounted by its pid 1 on every ``up``.
#: ``/proc`` stays the shims' views (what the steps read); a real daemon that needs /proc/<pid> (configless slurmd
#: reads its fetched config through /proc/self/fd) is started by the shim in a mount namespace of its own with
#: this one bound on /proc (mfshim._real_proc).
REAL_PROC = "/run/mf-sim/proc"

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _b(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def mount(src: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    _check(libc.mount(_b(src), _b(target), _b(fstype), flags, _b(data)), f"mount {src} on {target} ({fstype})")


def umount(target: str) -> None:
    _check(libc.umount2(_b(target), MNT_DETACH), f"umount {target}")


def unshare(flags: int) -> None:
    _check(libc.unshare(flags), f"unshare {flags:#x}")


def bind(src: str, target: str, *, ro: bool = False) -> None:
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    mount(src, target, None, MS_BIND | MS_REC)
    if ro:
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def inside(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def source_filter(cidrs: list[str]) -> tuple[bytes, Any]:
    """A ``struct sock_fprog`` (and the buffer it points at, to keep alive) that accepts IPv4 packets
    whose source address is in one of ``cidrs`` and drops every other packet."""
    nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    nets = [n for n in nets if n.version == 4]
    src = (SKF_NET_OFF + 12) & 0xFFFFFFFF  # the IPv4 header's source address
    insns: list[tuple[int, int, int, int]] = []
    for i, net in enumerate(nets):
        after = (len(nets) - i - 1) * 3  # instructions between this rule's jump and the final "drop"
        insns.append((0x20, 0, 0, src))  # ld  [src]            (BPF_LD|BPF_W|BPF_ABS)
        insns.append((0x54, 0, 0, int(net.netmask)))  # and #mask  (BPF_ALU|BPF_AND|BPF_K)
        insns.append((0x15, after + 1, 0, int(net.network_address)))  # jeq #net, accept  (BPF_JMP|BPF_JEQ|BPF_K)
    insns.append((0x06, 0, 0, 0))  # ret #0: drop
    insns.append((0x06, 0, 0, 0xFFFFFFFF))  # ret #-1: accept the whole packet
    buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *x) for x in insns))
    return struct.pack("HL", len(insns), ctypes.addressof(buf)), buf


# --------------------------------------------------------------------------------------------
# the machine


class Machine:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.reaper = 0  # pid of the pid namespace's pid 1 (this namespace's view: ours)
        self.holder = 0  # its parent (the process that entered the user namespace)
        self.proc_fd = -1
        self.upper_fd = -1
        self.log_fd = -1
        self.listener: socket.socket | None = None
        #: SSH source CIDRs (None: no filter), applied to each listener this machine makes.
        self.allow: list[str] | None = cfg.get("ssh_allow")

    def set_allow(self, cidrs: list[str] | None) -> int:
        self.allow = None if cidrs is None else [str(c) for c in cidrs]
        if self.listener is not None:
            self._apply_allow(self.listener)
        return -1 if self.allow is None else len(self.allow)

    def _apply_allow(self, listener: socket.socket) -> None:
        if listener.family != socket.AF_INET:
            return  # the filter reads IPv4 headers; simulated hosts listen on 127.x addresses
        if self.allow is None:
            with contextlib.suppress(OSError):  # ENOENT: no filter attached
                listener.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
            return
        prog, buf = source_filter([*self.allow, f"{self.cfg['address']}/32"])
        listener.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, prog)
        del buf  # the kernel copied the program

    def setup(self) -> None:
        cfg = self.cfg
        vmdir = cfg["vmdir"]
        disk, root = os.path.join(vmdir, "disk"), os.path.join(vmdir, "root")
        os.makedirs(disk, exist_ok=True)
        os.makedirs(root, exist_ok=True)
        unshare(CLONE_NEWNS | CLONE_NEWUTS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        name = cfg["hostname"].encode()
        _check(libc.sethostname(name, len(name)), "sethostname")
        self.proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)

        # the disk and the root filesystem
        mount("mf-disk", disk, "tmpfs", MS_NOSUID | MS_NODEV, f"size={cfg.get('disk_size', '2g')},mode=0755")
        upper, work = os.path.join(disk, "upper"), os.path.join(disk, "work")
        os.mkdir(upper, 0o755)
        os.mkdir(work, 0o700)
        mount("overlay", root, "overlay", 0, f"lowerdir=/,upperdir={upper},workdir={work}")
        self.upper_fd = os.open(upper, os.O_RDONLY | os.O_DIRECTORY)

        # private /tmp and /run, a minimal /dev, /proc = the shims' views
        mount("tmpfs", inside(root, "/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=512m")
        self._fresh_run(inside(root, "/run"))
        dev = inside(root, "/dev")
        mount("devtmp", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
        for node in ("null", "zero", "full", "random", "urandom", "tty"):
            bind(f"/dev/{node}", os.path.join(dev, node))
        os.mkdir(os.path.join(dev, "pts"), 0o755)
        mount("devpts", os.path.join(dev, "pts"), "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620")
        os.symlink("pts/ptmx", os.path.join(dev, "ptmx"))
        os.mkdir(os.path.join(dev, "shm"), 0o1777)
        mount("shm", os.path.join(dev, "shm"), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
        for fd, link in enumerate(("stdin", "stdout", "stderr")):
            os.symlink(f"/proc/self/fd/{fd}", os.path.join(dev, link))
        bind(cfg["proc_views"], inside(root, "/proc"))
        for src, ro in cfg.get("binds", []):
            bind(src, inside(root, src), ro=ro)

        # first boot: the files that make it this host (os-release, users, sshd config, host key)
        for d in cfg.get("dirs", []):
            os.makedirs(inside(root, d), mode=0o755, exist_ok=True)
        for path, content, mode, append in cfg.get("files", []):
            target = inside(root, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.islink(target):  # /etc/os-release -> ../usr/lib/os-release: replace the link
                os.unlink(target)
            with open(target, "a" if append else "w") as fh:
                fh.write(content)
            os.chmod(target, mode)
        self.log_fd = os.open(cfg["sshd_log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        # pivot into it; the old root is detached (only the upper fd and /proc fd keep their way)
        os.chdir(root)
        _check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
        umount(".")
        os.chdir("/")

    @staticmethod
    def _fresh_run(run: str) -> None:
        mount("tmpfs", run, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m")
        os.mkdir(os.path.join(run, "sshd"), 0o755)
        os.mkdir(os.path.join(run, "lock"), 0o1777)

    # -- up / down -----------------------------------------------------------------------------
    def up(self, boot: bool) -> int:
        # The listening socket is made here, with this machine's privileges (port 22 needs
        # CAP_NET_BIND_SERVICE, which nothing inside the host's user namespace has), and handed in.
        family = socket.AF_INET6 if ":" in self.cfg["address"] else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.cfg["address"], int(self.cfg["port"])))
            listener.listen(128)
            self._apply_allow(listener)
        except OSError as exc:
            listener.close()
            raise RuntimeError(f"bind {self.cfg['address']}:{self.cfg['port']}: {exc.strerror}") from None
        self.listener = listener
        try:
            return self._up(boot)
        except BaseException:
            self._close_listener()
            raise
        # The host's pid 1 serves it now; this copy stays open only so ``allow`` can change its filter,
        # and is closed on ``down`` (then nothing listens: connections are refused, as from a host that is off).

    def _close_listener(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None

    def _up(self, boot: bool) -> int:
        # Order: the holder (still this machine's root) makes the PID namespace; its fork, the host's pid 1,
        # mounts that namespace's procfs at REAL_PROC (this machine's privilege is needed for that mount), then
        # enters a new user namespace, whose id maps we write from here; only then does it drop to the host's root.
        r1, w1 = os.pipe()  # reaper -> us: "in the user namespace"
        r2, w2 = os.pipe()  # us -> reaper: "mapped"
        r3, w3 = os.pipe()  # holder -> us: the reaper's pid
        holder = os.fork()
        if holder == 0:  # ---------------------------------------------- holder
            try:
                os.close(r1)
                os.close(w2)
                os.close(r3)
                null = os.open("/dev/null", os.O_RDWR)
                os.dup2(null, 0)  # not the harness's control pipes
                os.dup2(null, 1)
                os.close(null)
                libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                unshare(CLONE_NEWPID)
                reaper = os.fork()
                if reaper == 0:
                    os.close(w3)
                    try:
                        self._enter(r2, w1)
                    except BaseException as exc:
                        sys.stderr.write(f"vminit pid 1: {exc}\n")
                        os._exit(2)
                    self._reaper(boot)  # never returns
                os.close(w1)
                os.close(r2)
                if self.listener is not None:
                    self.listener.close()
                os.write(w3, str(reaper).encode())
                os.close(w3)
                _, status = os.waitpid(reaper, 0)
                os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
            except BaseException as exc:
                sys.stderr.write(f"vminit holder: {exc}\n")
                os._exit(2)
        os.close(w1)
        os.close(r2)
        os.close(w3)
        try:
            data = b""
            while chunk := os.read(r3, 64):
                data += chunk
            if not data:
                raise RuntimeError("the host's pid 1 did not start")
            reaper = int(data)  # the holder is still in our PID namespace: its fork's pid is ours too
            if os.read(r1, 1) != b"u":
                raise RuntimeError("the host's pid 1 did not enter its user namespace")
            ident = "0 0 4294967295\n"
            for fname in ("uid_map", "gid_map"):
                fd = os.open(f"{reaper}/{fname}", os.O_WRONLY, dir_fd=self.proc_fd)
                try:
                    os.write(fd, ident.encode())
                finally:
                    os.close(fd)
            os.write(w2, b"m")
        finally:
            for fd in (r1, w2, r3):
                os.close(fd)
        self.holder = holder
        self.reaper = reaper
        return self.reaper

    @staticmethod
    def _enter(mapped: int, ready: int) -> None:
        """In the host's pid 1, still this machine's root: its own procfs, then its user namespace."""
        os.makedirs(REAL_PROC, mode=0o555, exist_ok=True)
        mount("proc", REAL_PROC, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        unshare(CLONE_NEWUSER)
        os.write(ready, b"u")
        os.close(ready)
        if os.read(mapped, 1) != b"m":
            os._exit(3)
        os.close(mapped)
        os.setresgid(0, 0, 0)
        os.setgroups([0])
        os.setresuid(0, 0, 0)

    def _reaper(self, boot: bool) -> None:
        """pid 1 of the host: boot, then ``sshd -i`` per connection; orphans reaped by the kernel."""
        try:
            cfg = self.cfg
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.setsid()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            os.chdir("/")
            log_fd = self.log_fd
            if boot:
                sys.path.insert(0, cfg["shim_dir"])
                import mfshim

                mfshim.FS = "/"
                mfshim.boot(cfg["state_root"], fs_root="/")
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
            argv = [cfg["sshd"], "-i", "-e", "-f", "/etc/ssh/sshd_config"]
            listener = self.listener
            assert listener is not None
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # pid 1 ignoring SIGCHLD: no zombies, ever
            while True:
                try:
                    conn, _peer = listener.accept()
                except InterruptedError:
                    continue
                if os.fork() == 0:
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    fd = conn.fileno()
                    os.dup2(fd, 0)
                    os.dup2(fd, 1)
                    os.dup2(log_fd, 2)
                    os.closerange(3, 1024)
                    os.execve(cfg["sshd"], argv, env)
                conn.close()
        except BaseException as exc:
            import traceback

            sys.stderr.write(f"vminit reaper: {exc!r}\n{traceback.format_exc()}")
            os._exit(2)

    def down(self) -> None:
        self._close_listener()
        if not self.reaper:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.reaper, signal.SIGKILL)  # pid 1 of the namespace: all its processes go
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.holder, 0)
        self.reaper = self.holder = 0
        umount("/run")
        self._fresh_run("/run")


def main() -> int:
    # No PR_SET_PDEATHSIG here: it follows the *thread* that started us (an emulator's request
    # thread would take the host down with it). The end of stdin (the harness process gone) is the signal.
    line = sys.stdin.readline()
    if not line:
        return 1
    cfg = json.loads(line)
    m = Machine(cfg)
    try:
        m.setup()
    except Exception as exc:
        print(f"error {exc}", flush=True)
        return 2
    print(f"ready {os.getpid()} {m.upper_fd}", flush=True)
    for raw in sys.stdin:
        cmd = raw.split()
        try:
            if cmd[:1] == ["up"]:
                pid = m.up(boot=cmd[1:] == ["1"])
                print(f"up {pid}", flush=True)
            elif cmd[:1] == ["down"]:
                m.down()
                print("down", flush=True)
            elif cmd[:1] == ["allow"]:
                n = m.set_allow(json.loads(raw.split(None, 1)[1]))
                print(f"allow {n}", flush=True)
            elif cmd[:1] == ["quit"]:
                break
            else:
                print(f"error unknown command {raw.strip()!r}", flush=True)
        except Exception as exc:
            print(f"error {exc}", flush=True)
    m.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
