"""A connector that answers from data: for tests of everything above the connector, without root or sshd.

The model is httpx's ``MockTransport``: the code under test is the production code (the runner, the
probes, the gate); only the transport is swapped. A :class:`ReplayHost` is plain data: what each
command prints (:class:`Reply`, keyed by the command line or a glob of it), a file store, a boot id
and faults. A command can change the host (write files, change later replies, reboot), so a second
run sees what the first did. :class:`ReplayFleet` is the :class:`~.connector.Connect` that hands out
a :class:`ReplayConnector` per endpoint::

    fleet = ReplayFleet([ReplayHost("node0", replies={"nvidia-smi *": Reply(smi_text)})])
    report = run_bootstrap(fleet.inventory(), profile, options=RunOptions(connect=fleet))

What a host answers without being told: ``cat`` (from the file store; the boot id lives there), the
:class:`~.facts.FileHashes` and :class:`~.facts.PathsExist` reads, ``true``/``false``, coreutils
``timeout`` around any command, and uploads (a step's batch and :meth:`ReplayConnector.put`). Any
other command is "not found" (exit 127), as on a node where the tool is not installed. Framed scripts
are answered item by item through :meth:`.script.Script.replay`, so the engine parses the same bytes
a shell would have printed.

Faults: the host does not answer (``unreachable``), presents another host key (``host_key``),
refuses the login key (``auth_refused``), drops the session while a command runs (``drops``), or
does not come back from a reboot (``reboot_hangs``). Nothing here sleeps unless a reply has a
``delay``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .connector import Connect, Connector, ConnectorBase, Endpoint, ExecResult, OutputCallback
from .errors import (
    CommandTimeout,
    ConnectionLost,
    HostKeyChanged,
    HostKeyUnknown,
    HostUnreachable,
    RebootTimeout,
    SshAuthError,
)
from .facts import BootId, FileHashes, PathsExist
from .script import Script

if TYPE_CHECKING:
    from .inventory import Host, Inventory

__all__ = ["Call", "ReplayConnector", "ReplayFleet", "ReplayHost", "Reply"]

BOOT_ID_PATH = BootId().path
_FILE_HASHES = tuple(FileHashes(()).command()[:4])
_PATHS_EXIST = tuple(PathsExist(()).command()[:4])


def _bytes(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


@dataclass(frozen=True)
class Reply:
    """What one command answers, and what running it changes on the host."""

    stdout: str | bytes = ""
    rc: int = 0
    stderr: str | bytes = ""
    #: Seconds it runs (really waited; a ``timeout`` around it, or the run's timeout, cuts it short).
    delay: float = 0.0
    #: Files it leaves: path -> content (None removes the file).
    writes: Mapping[str, str | bytes | None] = field(default_factory=dict)
    #: Replies that change because it ran: command (or glob) -> new reply (e.g. a package query after
    #: an install).
    sets: Mapping[str, Reply | str] = field(default_factory=dict)
    #: It reboots the host: the session drops (as a real ``reboot`` does) and the host boots again.
    reboot: bool = False


#: A handler sees the host and the argv first (MockTransport's handler); None: use the data.
Handler = Callable[["ReplayHost", tuple[str, ...]], "Reply | None"]


@dataclass(frozen=True)
class Call:
    """One command a host ran (inner commands of a framed script each count)."""

    argv: tuple[str, ...]
    #: Run through ``sudo -n`` (the login user is not root).
    sudo: bool = False


class _Overrun(Exception):
    """A command ran past the caller's deadline."""


class ReplayHost:
    """One host's answers, files and faults, and a record of what was asked of it (thread-safe)."""

    def __init__(
        self,
        name: str,
        address: str | None = None,
        *,
        replies: Mapping[str, Reply | str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        handler: Handler | None = None,
        on_boot: Mapping[str, Reply | str] | None = None,
        user: str = "root",
        port: int = 22,
        unreachable: bool = False,
        host_key: Literal["changed", "unknown"] | None = None,
        auth_refused: bool = False,
        drops: Mapping[str, int] | None = None,
        reboot_hangs: bool = False,
        reboot_seconds: float = 0.0,
        volatile: Sequence[str] = ("/run/", "/var/run/"),
    ) -> None:
        self.name = name
        self.address = address or name
        self.user = user
        self.port = port
        self.replies: dict[str, Reply] = {k: self._reply(v) for k, v in (replies or {}).items()}
        self.files: dict[str, bytes] = {p: _bytes(v) for p, v in (files or {}).items()}
        self.modes: dict[str, str] = {}
        self.handler = handler
        self.on_boot: dict[str, Reply] = {k: self._reply(v) for k, v in (on_boot or {}).items()}
        self.unreachable = unreachable
        self.host_key = host_key
        self.auth_refused = auth_refused
        #: command (or glob) -> how many more times the session drops while it runs
        self.drops: dict[str, int] = dict(drops or {})
        self.reboot_hangs = reboot_hangs
        #: Seconds :meth:`ReplayConnector.wait_for_reboot` reports (not waited).
        self.reboot_seconds = reboot_seconds
        self.volatile = tuple(volatile)
        self.calls: list[Call] = []
        #: Addresses reached through this host as a jump host.
        self.tunnels: list[str] = []
        self.connects = 0
        self.channels = 0
        self.boots = 0
        self.rebooting = False
        self._lock = threading.RLock()
        self.files.setdefault(BOOT_ID_PATH, f"{uuid.uuid4()}\n".encode())

    @staticmethod
    def _reply(value: Reply | str) -> Reply:
        return value if isinstance(value, Reply) else Reply(value)

    # -- what tests read --------------------------------------------------------------------------
    @property
    def boot_id(self) -> str:
        return self.files[BOOT_ID_PATH].decode().strip()

    def commands(self) -> list[list[str]]:
        """Every command run so far, as argv lists, in order."""
        with self._lock:
            return [list(c.argv) for c in self.calls]

    def clear_calls(self) -> None:
        with self._lock:
            self.calls.clear()

    def text(self, path: str) -> str | None:
        data = self.files.get(path)
        return None if data is None else data.decode(errors="replace")

    def host(self, **kw: Any) -> Host:
        """An inventory host that logs in to this one (``kw``: any other :class:`~.inventory.Host` field)."""
        from .inventory import Host

        return Host(**{"name": self.name, "address": self.address, "port": self.port, "user": self.user, **kw})

    # -- the host's side --------------------------------------------------------------------------
    def boot(self) -> None:
        """A new boot: a new boot id, volatile files gone, ``on_boot`` replies in force."""
        with self._lock:
            self.files = {p: c for p, c in self.files.items() if not p.startswith(self.volatile)}
            self.files[BOOT_ID_PATH] = f"{uuid.uuid4()}\n".encode()
            self.replies.update(self.on_boot)
            self.boots += 1
            self.rebooting = False

    def store(self, path: str, content: bytes, mode: str = "0644") -> None:
        with self._lock:
            self.files[path] = content
            self.modes[path] = mode

    def _find(self, table: Mapping[str, Any], line: str) -> str | None:
        if line in table:
            return line
        return next((k for k in table if any(c in k for c in "*?[") and fnmatch.fnmatchcase(line, k)), None)

    def answer(self, argv: tuple[str, ...], *, sudo: bool = False,
               deadline: float | None = None) -> tuple[bytes, bytes, int]:
        """(stdout, stderr, rc) of ``argv``; ConnectionLost for a drop, _Overrun past ``deadline``."""
        with self._lock:
            self.calls.append(Call(argv, sudo))
            line = shlex.join(argv)
            drop = self._find(self.drops, line)
            if drop is not None and self.drops[drop] > 0:
                self.drops[drop] -= 1
                raise ConnectionLost(f"{self.name}: connection dropped while running {line[:200]} (replayed)",
                                     host=self.address)
        if argv[:1] == ("timeout",):
            return self._timeout(argv, sudo, deadline)
        reply = self.handler(self, argv) if self.handler is not None else None
        if reply is None:
            with self._lock:
                key = self._find(self.replies, line)
                reply = self.replies[key] if key is not None else None
        if reply is None:
            return self._builtin(argv)
        if reply.delay:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and reply.delay > left:
                time.sleep(max(0.0, left))
                raise _Overrun(line)
            time.sleep(reply.delay)
        with self._lock:
            for path, content in reply.writes.items():
                if content is None:
                    self.files.pop(path, None)
                else:
                    self.files[path] = _bytes(content)
            self.replies.update({k: self._reply(v) for k, v in reply.sets.items()})
            if reply.reboot:
                self.rebooting = True
        if reply.reboot:
            raise ConnectionLost(f"{self.name}: connection closed by the reboot (replayed)", host=self.address)
        return _bytes(reply.stdout), _bytes(reply.stderr), reply.rc

    def _timeout(self, argv: tuple[str, ...], sudo: bool, deadline: float | None) -> tuple[bytes, bytes, int]:
        """coreutils ``timeout [-k S] N argv...``: exit 124 when the command outlives N seconds."""
        rest = list(argv[1:])
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in ("-k", "-s") else rest[1:]
        if len(rest) < 2:
            return b"", b"timeout: missing operand\n", 125
        limit = time.monotonic() + float(rest[0])
        inner = tuple(rest[1:])
        try:
            return self.answer(inner, sudo=sudo, deadline=limit if deadline is None else min(limit, deadline))
        except _Overrun:
            if deadline is not None and time.monotonic() >= deadline:
                raise
            return b"", b"", 124

    def _builtin(self, argv: tuple[str, ...]) -> tuple[bytes, bytes, int]:
        with self._lock:
            if argv[:1] == ("cat",) and len(argv) > 1:
                out, err, rc = b"", b"", 0
                for path in argv[1:]:
                    if path in self.files:
                        out += self.files[path]
                    else:
                        err += f"cat: {path}: No such file or directory\n".encode()
                        rc = 1
                return out, err, rc
            if argv[:4] == _FILE_HASHES:
                return "".join(hashlib.sha256(self.files[p]).hexdigest() + "\n" if p in self.files else "-\n"
                               for p in argv[4:]).encode(), b"", 0
            if argv[:4] == _PATHS_EXIST:
                return "".join(f"{p}\n" for p in argv[4:] if self._exists(p)).encode(), b"", 0
        if argv in (("true",), ("false",)):
            return b"", b"", int(argv == ("false",))
        return b"", f"sh: 1: {argv[0] if argv else ''}: not found\n".encode(), 127

    def _exists(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return path in self.files or any(p.startswith(prefix) for p in self.files)


class ReplayConnector(ConnectorBase):
    """The :class:`~.connector.Connector` of one :class:`ReplayHost` (None: nothing at that address)."""

    def __init__(self, host: ReplayHost | None, endpoint: Endpoint, *, via: Connector | None = None) -> None:
        self.host = host
        self.endpoint = endpoint
        self.via = via
        self._connected = False
        self.connects = 0

    @property
    def connected(self) -> bool:
        return self._connected

    def _unreachable(self, why: str) -> HostUnreachable:
        ep = self.endpoint
        return HostUnreachable(f"{ep.label}: cannot connect to {ep.address}:{ep.port}: {why} (replayed)",
                               host=ep.host_id)

    def connect(self) -> None:
        if self._connected:
            return
        ep = self.endpoint
        if self.via is not None:
            self.via.connect()
            if isinstance(self.via, ReplayConnector) and self.via.host is not None:
                with self.via.host._lock:
                    self.via.host.tunnels.append(ep.address)
        host = self.host
        if host is None or host.unreachable:
            raise self._unreachable("[Errno 113] No route to host")
        if host.rebooting:
            raise self._unreachable("[Errno 111] Connection refused")
        fp = f"SHA256:{hashlib.sha256(host.name.encode()).hexdigest()[:43]}"
        if host.host_key == "changed":
            raise HostKeyChanged(f"{ep.label}: HOST KEY CHANGED: ssh-ed25519 {fp} is not the recorded key "
                                 "(replayed)", host=ep.host_id, key_type="ssh-ed25519", fingerprint=fp,
                                 expected="SHA256:recorded")
        if host.host_key == "unknown":
            raise HostKeyUnknown(f"{ep.label}: no recorded host key (ssh-ed25519 {fp}) and no pinned key (replayed)",
                                 host=ep.host_id, key_type="ssh-ed25519", fingerprint=fp)
        if host.auth_refused:
            raise SshAuthError(f"{ep.label}: {ep.user}@{ep.address} refused every key (replayed)", host=ep.host_id)
        with host._lock:
            host.connects += 1
        self.connects += 1
        self._connected = True

    def close(self) -> None:
        self._connected = False

    def _session(self) -> ReplayHost:
        self.connect()
        assert self.host is not None
        with self.host._lock:
            self.host.channels += 1
        return self.host

    def _dropped(self) -> None:
        self._connected = False

    def run(self, argv: Sequence[str], *, sudo: bool = True, timeout: float | None = 600.0,
            stdin: bytes | Iterable[bytes] | None = None, on_output: OutputCallback | None = None,
            combine_stderr: bool = False, retry_on_drop: bool = False) -> ExecResult:
        started = time.monotonic()
        line = tuple(str(a) for a in argv)
        as_sudo = sudo and self.endpoint.user != "root"
        try:
            rc, stdout, stderr = self._run(line, as_sudo, timeout, on_output)
        except ConnectionLost:
            if not retry_on_drop:
                raise
            rc, stdout, stderr = self._run(line, as_sudo, timeout, on_output)
        if combine_stderr:
            stdout, stderr = stdout + stderr, b""
        return ExecResult(rc, stdout, stderr, time.monotonic() - started)

    def _run(self, argv: tuple[str, ...], sudo: bool, timeout: float | None,
             on_output: OutputCallback | None) -> tuple[int, bytes, bytes]:
        host = self._session()
        deadline = time.monotonic() + timeout if timeout else None
        try:
            stdout, stderr, rc = host.answer(argv, sudo=sudo, deadline=deadline)
        except ConnectionLost:
            self._dropped()
            raise
        except _Overrun:
            raise CommandTimeout(f"{self.label}: {shlex.join(argv)[:200]} still running after {timeout:.0f}s",
                                 host=self.endpoint.host_id, argv=argv, timeout=float(timeout or 0)) from None
        for chunk in (stdout, stderr):
            if on_output is not None and chunk:
                on_output(chunk)
        return rc, stdout, stderr

    def run_script(self, script: Script, *, sudo: bool = True, timeout: float | None = 600.0,
                   stdin: bytes | Iterable[bytes] | None = None, on_output: OutputCallback | None = None,
                   retry_on_drop: bool = False) -> ExecResult:
        data = stdin if isinstance(stdin, bytes) else b"".join(stdin or ())
        try:
            return self._script(script, sudo, timeout, data, on_output)
        except ConnectionLost:
            if not retry_on_drop:
                raise
        return self._script(script, sudo, timeout, data, on_output)

    def _script(self, script: Script, sudo: bool, timeout: float | None, stdin: bytes,
                on_output: OutputCallback | None) -> ExecResult:
        started = time.monotonic()
        host = self._session()
        deadline = started + timeout if timeout else None
        as_sudo = sudo and self.endpoint.user != "root"
        try:
            out, err, rc = script.replay(lambda argv: host.answer(argv, sudo=as_sudo, deadline=deadline),
                                         host.store, stdin, on_output)
        except ConnectionLost:
            self._dropped()
            raise
        except _Overrun:
            raise CommandTimeout(f"{self.label}: {script.kind} script still running after {timeout:.0f}s",
                                 host=self.endpoint.host_id, argv=["sh", "-c", f"<{script.kind}>"],
                                 timeout=float(timeout or 0)) from None
        return ExecResult(rc, out, err, time.monotonic() - started)

    def put(self, content: bytes, path: str, *, mode: str = "0644", sudo: bool = True, timeout: float = 600.0,
            on_output: OutputCallback | None = None) -> bool:
        host = self._session()
        with host._lock:
            host.calls.append(Call(("put", path), sudo and self.endpoint.user != "root"))
            if host.files.get(path) == content:
                return False
        host.store(path, content, mode)
        return True

    def wait_for_reboot(self, *, read_boot_id: Callable[[], str | None], old_boot_id: str | None,
                        timeout: float = 900.0, poll: float = 1.0) -> float:
        host = self.host
        if host is None or not host.rebooting:
            raise RebootTimeout(f"{self.label}: still up {timeout:.0f}s after the reboot command (replayed)",
                                host=self.endpoint.host_id)
        self._connected = False
        if host.reboot_hangs:
            raise RebootTimeout(f"{self.label}: SSH not back {timeout:.0f}s after the reboot (replayed)",
                                host=self.endpoint.host_id)
        host.boot()
        self.connect()
        boot_id = read_boot_id()
        if old_boot_id is not None and boot_id == old_boot_id:
            raise RebootTimeout(f"{self.label}: back with the same boot id {boot_id} (replayed)",
                                host=self.endpoint.host_id)
        return host.reboot_seconds


class ReplayFleet:
    """The :class:`~.connector.Connect` of a set of replayed hosts (by address); an address it does not
    know is unreachable."""

    def __init__(self, hosts: Iterable[ReplayHost]) -> None:
        self.hosts: dict[str, ReplayHost] = {}
        for h in hosts:
            if h.address in self.hosts:
                raise ValueError(f"two replayed hosts at {h.address}")
            self.hosts[h.address] = h
        self.connectors: list[ReplayConnector] = []
        self._lock = threading.Lock()

    def __call__(self, endpoint: Endpoint, *, via: Connector | None = None) -> ReplayConnector:
        conn = ReplayConnector(self.hosts.get(endpoint.address), endpoint, via=via)
        with self._lock:
            self.connectors.append(conn)
        return conn

    def __getitem__(self, name: str) -> ReplayHost:
        for h in self.hosts.values():
            if name in (h.name, h.address):
                return h
        raise KeyError(name)

    def __iter__(self) -> Any:
        return iter(self.hosts.values())

    def inventory(self, hosts: Sequence[ReplayHost] | None = None, **kw: Any) -> Inventory:
        """The hosts (default: all) as an inventory; ``kw`` sets a :class:`~.inventory.Host` field on each."""
        from .inventory import Inventory

        return Inventory(tuple(h.host(**kw) for h in (hosts if hosts is not None else self.hosts.values())))


if TYPE_CHECKING:  # mypy checks that the replay keeps the connector contract
    _contract: Connect = ReplayFleet(())
