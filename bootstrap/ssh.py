"""The SSH connector (:class:`~.connector.Connector` over SSH): the one module in metalfleet that imports paramiko.

What it does, and nothing more: open one session per host (directly or through a jump host),
verify the host key, authenticate, run commands (argv lists, quoted with :func:`shlex.join`,
prefixed with ``sudo -n`` when the login user is not root), stream their output to a callback,
upload files with a sha256 check, and come back after a reboot.

Host keys are verified by default against a known_hosts file. Keys the provider pinned (read from
the console output, for instance) are trusted and recorded; a host with no recorded key is refused
unless the caller opted in to trust on first use; a key that differs from the recorded or pinned
one is always refused with :class:`HostKeyChanged`. There is no auto-add policy.

Every paramiko and socket error is translated here into the metalfleet error tree: faults while
connecting are :class:`HostUnreachable`, a session that drops while in use is
:class:`ConnectionLost` (both transient, so retried), a refused key is :class:`SshAuthError`.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import select
import shlex
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence

import paramiko
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_random_exponential

from metalfleet.providers.errors import MetalfleetError, TransientError
from metalfleet.providers.textfile import BadFileError, read_text_file

from .connector import Connector, ConnectorBase, Endpoint, ExecResult, OutputCallback, SshOptions, parse_bastion
from .errors import (
    CommandTimeout,
    ConnectionLost,
    HostKeyChanged,
    HostKeyUnknown,
    HostUnreachable,
    RebootTimeout,
    SshAuthError,
    UploadVerifyFailed,
)
from .script import Script, upload_script

__all__ = ["Endpoint", "ExecResult", "KnownHosts", "SshConnect", "SshConnection", "SshOptions", "fingerprint",
           "parse_bastion"]


def fingerprint(blob: bytes) -> str:
    """OpenSSH-style ``SHA256:...`` fingerprint of a public key blob."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


# --------------------------------------------------------------------------------------------
# Host keys


def _parse_key_line(line: str) -> tuple[str, bytes] | None:
    parts = line.split()
    for i, p in enumerate(parts[:-1]):
        if p.startswith(("ssh-", "ecdsa-", "sk-")):
            try:
                return p, base64.b64decode(parts[i + 1])
            except ValueError:
                return None
    return None


def _host_matches(field_: str, names: Iterable[str]) -> bool:
    wanted = set(names)
    for entry in field_.split(","):
        if entry.startswith("|1|"):
            try:
                _, _, salt, _ = entry.split("|")
            except ValueError:
                continue
            if any(paramiko.HostKeys.hash_host(n, salt) == entry for n in wanted):
                return True
        elif entry in wanted:
            return True
    return False


class KnownHosts:
    """A known_hosts file plus provider-pinned keys, safe to share between threads."""

    def __init__(self, options: SshOptions) -> None:
        self.path = options.resolved_known_hosts()
        self.trust_on_first_use = options.trust_on_first_use
        self._pinned: dict[str, list[tuple[str, bytes]]] = {}
        for host, lines in options.pinned_keys.items():
            parsed = [k for k in (_parse_key_line(line) for line in lines) if k]
            if parsed:
                self._pinned[host] = parsed
        self._lock = threading.Lock()
        self._read()  # a file that is not text fails the run here (BadFileError), not each host later

    def _read(self) -> str:
        """The file's text ("" when it does not exist yet); bad bytes are a BadFileError naming it."""
        try:
            text: str = read_text_file(self.path, "known_hosts file", allow_empty=True)
        except BadFileError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                return ""
            raise
        return text

    def _recorded(self, names: Sequence[str]) -> list[tuple[str, bytes]]:
        text = self._read()
        found = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or line.startswith("@revoked"):
                continue
            host_field, _, rest = line.partition(" ")
            if host_field.startswith("@"):  # @cert-authority: not handled, skip
                continue
            if _host_matches(host_field, names):
                key = _parse_key_line(rest)
                if key:
                    found.append(key)
        return found

    def pinned(self, endpoint: Endpoint) -> list[tuple[str, bytes]]:
        for name in (endpoint.host_id, endpoint.address, endpoint.name or ""):
            if name in self._pinned:
                return self._pinned[name]
        return []

    def known_types(self, endpoint: Endpoint) -> list[str]:
        keys = self.pinned(endpoint) or self._recorded([endpoint.host_id])
        return list(dict.fromkeys(t for t, _ in keys))

    def _record(self, host_id: str, key_type: str, blob: bytes) -> None:
        """Add the key, dropping any other line for this host and key type (a pinned key replaces it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = self._read().splitlines()
        kept = []
        for line in lines:
            host_field, _, rest = line.strip().partition(" ")
            key = _parse_key_line(rest) if rest else None
            if key and key[0] == key_type and _host_matches(host_field, [host_id]):
                continue
            kept.append(line)
        kept.append(f"{host_id} {key_type} {base64.b64encode(blob).decode()}")
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}")
        tmp.write_text("\n".join(kept) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    def verify(self, endpoint: Endpoint, key_type: str, blob: bytes) -> None:
        """Accept the presented key or raise; records pinned and first-contact keys."""
        fp = fingerprint(blob)
        host_id = endpoint.host_id
        with self._lock:
            pinned = self.pinned(endpoint)
            if pinned:
                if (key_type, blob) not in pinned:
                    expected = ", ".join(fingerprint(b) for _, b in pinned)
                    raise HostKeyChanged(
                        f"{endpoint.label}: host key {key_type} {fp} does not match the key pinned by the provider "
                        f"({expected}); refusing to connect",
                        host=host_id, key_type=key_type, fingerprint=fp, expected=expected)
                if (key_type, blob) not in self._recorded([host_id]):
                    self._record(host_id, key_type, blob)
                return
            recorded = self._recorded([host_id])
            if (key_type, blob) in recorded:
                return
            same_type = [b for t, b in recorded if t == key_type]
            if same_type:
                expected = fingerprint(same_type[0])
                raise HostKeyChanged(
                    f"{endpoint.label}: HOST KEY CHANGED: {key_type} {fp} is not the recorded {expected} "
                    f"({self.path}); the host was reinstalled or someone is in the middle. Remove the old line "
                    f"deliberately (ssh-keygen -R {host_id} -f {self.path}) if the change is expected",
                    host=host_id, key_type=key_type, fingerprint=fp, expected=expected)
            if recorded:
                # We know other key types for this host but it presented a new type: treat as a change.
                expected = ", ".join(f"{t} {fingerprint(b)}" for t, b in recorded)
                raise HostKeyChanged(
                    f"{endpoint.label}: presented {key_type} {fp}, but {self.path} records only {expected}",
                    host=host_id, key_type=key_type, fingerprint=fp, expected=expected)
            if not self.trust_on_first_use:
                raise HostKeyUnknown(
                    f"{endpoint.label}: no recorded host key ({key_type} {fp}) in {self.path} and no pinned key; "
                    "record it (ssh-keyscan after checking the fingerprint), pin it from the provider's console "
                    "output, or set ssh.pin_on_first_contact: true",
                    host=host_id, key_type=key_type, fingerprint=fp)
            self._record(host_id, key_type, blob)


# --------------------------------------------------------------------------------------------
# Keys

_KEY_CACHE: dict[tuple[str, float], paramiko.PKey] = {}
_KEY_LOCK = threading.Lock()


def _load_key(path: str, host: str) -> paramiko.PKey:
    p = os.path.expanduser(path)
    try:
        mtime = os.stat(p).st_mtime
    except OSError as exc:
        raise SshAuthError(f"{host}: cannot read private key {p}: {exc.strerror}", host=host) from exc
    with _KEY_LOCK:
        cached = _KEY_CACHE.get((p, mtime))
        if cached is not None:
            return cached
        try:
            key = paramiko.PKey.from_path(p)
        except paramiko.PasswordRequiredException as exc:
            raise SshAuthError(f"{host}: private key {p} is encrypted; load it into ssh-agent instead",
                               host=host) from exc
        except (paramiko.SSHException, ValueError) as exc:
            raise SshAuthError(f"{host}: cannot load private key {p}: {exc}", host=host) from exc
        _KEY_CACHE[(p, mtime)] = key
        return key


# --------------------------------------------------------------------------------------------
# Connection


def _is_network_error(exc: BaseException) -> bool:
    return isinstance(exc, (socket.timeout, EOFError, ConnectionError, paramiko.SSHException)) or (
        isinstance(exc, OSError) and exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNABORTED,
                                                   errno.ECONNREFUSED, errno.ECONNRESET, errno.EPIPE,
                                                   errno.ETIMEDOUT, errno.EADDRNOTAVAIL))


class SshConnection(ConnectorBase):
    """One reusable SSH session to one host (the real :class:`~.connector.Connector`); reconnects on the
    next call after a drop.

    Not thread-safe per instance: the runner gives each host its own worker thread.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        options: SshOptions | None = None,
        *,
        known_hosts: KnownHosts | None = None,
        bastion: SshConnection | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.options = options or SshOptions()
        self.known_hosts = known_hosts or KnownHosts(self.options)
        self._bastion = bastion
        if bastion is None and endpoint.bastion:
            self._bastion = SshConnection(
                parse_bastion(endpoint.bastion, default_user=endpoint.user, key_path=endpoint.key_path),
                self.options, known_hosts=self.known_hosts)
        self._transport: paramiko.Transport | None = None
        self._lock = threading.RLock()  # a bastion is shared by many hosts' threads
        self.connects = 0
        self.channels = 0

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def is_root(self) -> bool:
        return self.endpoint.user == "root"

    @property
    def connected(self) -> bool:
        t = self._transport
        return t is not None and t.is_active() and t.is_authenticated()

    def connect(self) -> None:
        """Connect (or reconnect), retrying transient faults with jittered backoff."""
        with self._lock:
            if self.connected:
                return
            self._drop()
            retrying = Retrying(
                retry=retry_if_exception_type(TransientError),
                wait=wait_random_exponential(multiplier=0.25, max=5.0),
                stop=stop_after_attempt(max(1, self.options.connect_attempts))
                | stop_after_delay(self.options.connect_deadline),
                reraise=True,
            )
            retrying(self._connect_once)

    def _open_socket(self) -> socket.socket | paramiko.Channel:
        ep = self.endpoint
        if self._bastion is not None:
            return self._bastion.open_tunnel(ep.address, ep.port)
        try:
            sock = socket.create_connection((ep.address, ep.port), timeout=self.options.connect_timeout)
            # Without TCP_NODELAY, each small SSH message waits out the peer's delayed ACK (~40 ms on
            # Linux): an exec round trip goes from ~5 ms to ~45 ms.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            raise HostUnreachable(f"{ep.label}: cannot connect to {ep.address}:{ep.port}: {exc}",
                                  host=ep.host_id) from exc

    def _connect_once(self) -> None:
        ep = self.endpoint
        sock = self._open_socket()
        transport: paramiko.Transport | None = None
        try:
            transport = paramiko.Transport(sock)
            transport.banner_timeout = self.options.connect_timeout
            transport.handshake_timeout = self.options.connect_timeout
            known = self.known_hosts.known_types(ep)
            if known:
                sec = transport.get_security_options()
                preferred = [t for t in known if t in sec.key_types]
                if "ssh-rsa" in known:
                    preferred += ["rsa-sha2-512", "rsa-sha2-256"]
                sec.key_types = list(dict.fromkeys(preferred + list(sec.key_types)))
            transport.start_client(timeout=self.options.connect_timeout)
            key = transport.get_remote_server_key()
            self.known_hosts.verify(ep, key.get_name(), key.asbytes())
            self._authenticate(transport)
            if self.options.keepalive:
                transport.set_keepalive(self.options.keepalive)
        except MetalfleetError:
            if transport is not None:
                transport.close()
            else:
                sock.close()
            raise
        except paramiko.AuthenticationException as exc:
            if transport is not None:
                transport.close()
            raise SshAuthError(f"{ep.label}: authentication as {ep.user} failed: {exc}", host=ep.host_id) from exc
        except Exception as exc:
            if transport is not None:
                transport.close()
            else:
                sock.close()
            if _is_network_error(exc):
                raise HostUnreachable(f"{ep.label}: SSH handshake with {ep.address}:{ep.port} failed: "
                                      f"{type(exc).__name__}: {exc}", host=ep.host_id) from exc
            raise
        self._transport = transport
        self.connects += 1

    def _authenticate(self, transport: paramiko.Transport) -> None:
        ep = self.endpoint
        keys: list[paramiko.PKey] = []
        if ep.key_path:
            keys.append(_load_key(ep.key_path, ep.label))
        agent: paramiko.Agent | None = None
        if self.options.use_agent and os.environ.get("SSH_AUTH_SOCK"):
            try:
                agent = paramiko.Agent()
                keys.extend(agent.get_keys())
            except paramiko.SSHException:
                agent = None
        try:
            if not keys:
                raise SshAuthError(f"{ep.label}: no private key given and no key in ssh-agent", host=ep.host_id)
            errors = []
            for k in keys:
                try:
                    transport.auth_publickey(ep.user, k)
                except paramiko.BadAuthenticationType as exc:
                    raise SshAuthError(f"{ep.label}: server does not accept public keys (allows {exc.allowed_types})",
                                       host=ep.host_id) from exc
                except paramiko.AuthenticationException as exc:
                    errors.append(f"{k.get_name()} {fingerprint(k.asbytes())}: {exc}")
                    continue
                if transport.is_authenticated():
                    return
            raise SshAuthError(f"{ep.label}: {ep.user}@{ep.address} refused every key ({'; '.join(errors)})",
                               host=ep.host_id)
        finally:
            if agent is not None:
                agent.close()

    def _drop(self) -> None:
        if self._transport is not None:
            with contextlib.suppress(Exception):
                self._transport.close()
        self._transport = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> SshConnection:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open_tunnel(self, address: str, port: int) -> paramiko.Channel:
        """A direct-tcpip channel to ``address:port`` through this host (used as a jump host)."""
        with self._lock:
            self.connect()
            assert self._transport is not None
            try:
                return self._transport.open_channel("direct-tcpip", (address, port), ("127.0.0.1", 0),
                                                    timeout=self.options.connect_timeout)
            except paramiko.ChannelException as exc:
                raise HostUnreachable(f"jump host {self.label} cannot reach {address}:{port}: {exc.text}",
                                      host=f"{address}:{port}") from exc
            except Exception as exc:
                self._drop()
                if _is_network_error(exc):
                    raise HostUnreachable(f"jump host {self.label} dropped: {exc}", host=f"{address}:{port}") from exc
                raise

    # -- commands -------------------------------------------------------------------------------
    def wrap(self, argv: Sequence[str], sudo: bool = True) -> list[str]:
        """``argv`` as it is sent: with ``sudo -n`` in front when the login user is not root."""
        argv = list(argv)
        if sudo and not self.is_root:
            return ["sudo", "-n", *argv]
        return argv

    def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = True,
        timeout: float | None = 600.0,
        stdin: bytes | Iterable[bytes] | None = None,
        on_output: OutputCallback | None = None,
        combine_stderr: bool = False,
        retry_on_drop: bool = False,
    ) -> ExecResult:
        """Run ``argv`` in one exec channel and wait for it.

        ``retry_on_drop`` reconnects and runs it again once if the session drops; use it only for
        commands that change nothing (fact reads). Others raise :class:`ConnectionLost`: the caller
        re-reads facts and re-plans, since the command may or may not have run.
        """
        wire = shlex.join(self.wrap(argv, sudo))
        try:
            return self._exec(wire, argv, timeout=timeout, stdin=stdin, on_output=on_output,
                              combine_stderr=combine_stderr)
        except ConnectionLost:
            if not retry_on_drop:
                raise
        self.connect()
        return self._exec(wire, argv, timeout=timeout, stdin=stdin, on_output=on_output, combine_stderr=combine_stderr)

    def run_script(
        self,
        script: Script,
        *,
        sudo: bool = True,
        timeout: float | None = 600.0,
        stdin: bytes | Iterable[bytes] | None = None,
        on_output: OutputCallback | None = None,
        retry_on_drop: bool = False,
    ) -> ExecResult:
        """Run a framed script as ``sh -c TEXT`` in one exec channel (see :class:`~.script.Script`)."""
        return self.run(script.argv(), sudo=sudo, timeout=timeout, stdin=stdin, on_output=on_output,
                        combine_stderr=script.combine_stderr, retry_on_drop=retry_on_drop)

    def _open_session(self) -> paramiko.Channel:
        self.connect()
        assert self._transport is not None
        try:
            chan = self._transport.open_session(timeout=self.options.connect_timeout)
        except Exception as exc:
            self._drop()
            if _is_network_error(exc):
                raise ConnectionLost(f"{self.label}: session dropped: {exc}", host=self.endpoint.host_id) from exc
            raise
        self.channels += 1
        return chan

    def _exec(
        self,
        wire: str,
        argv: Sequence[str],
        *,
        timeout: float | None,
        stdin: bytes | Iterable[bytes] | None,
        on_output: OutputCallback | None,
        combine_stderr: bool,
    ) -> ExecResult:
        started = time.monotonic()
        deadline = started + timeout if timeout else None
        chan = self._open_session()
        host = self.endpoint.host_id
        writer: threading.Thread | None = None
        try:
            chan.set_combine_stderr(combine_stderr)
            chan.exec_command(wire)
            if stdin is None:
                chan.shutdown_write()
            else:
                chunks = [stdin] if isinstance(stdin, bytes) else stdin
                writer = threading.Thread(target=_feed, args=(chan, chunks), daemon=True,
                                          name=f"mf-stdin-{self.label}")
                writer.start()
            out: list[bytes] = []
            err: list[bytes] = []
            while True:
                wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
                select.select([chan], [], [], wait)
                got = False
                while chan.recv_ready():
                    data = chan.recv(65536)
                    if not data:
                        break
                    got = True
                    out.append(data)
                    if on_output:
                        on_output(data)
                while chan.recv_stderr_ready():
                    data = chan.recv_stderr(65536)
                    if not data:
                        break
                    got = True
                    err.append(data)
                    if on_output:
                        on_output(data)
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break  # an exit status, or closed (paramiko reports both as "ready")
                if not got and (chan.closed or self._transport is None or not self._transport.is_active()):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise CommandTimeout(f"{self.label}: {shlex.join(argv)[:200]} still running after {timeout:.0f}s",
                                         host=host, argv=argv, timeout=float(timeout or 0))
            rc = chan.recv_exit_status()
            if rc == -1:
                # No exit status: the session went away, or the command died by a signal (exit-signal).
                for _ in range(25):  # a dying transport closes its channels before it reads as inactive
                    if self._transport is None or not self._transport.is_active():
                        break
                    time.sleep(0.02)
                if self._transport is None or not self._transport.is_active():
                    self._drop()
                    raise ConnectionLost(f"{self.label}: connection dropped while running {shlex.join(argv)[:200]}",
                                         host=host)
            return ExecResult(rc=rc, stdout=b"".join(out), stderr=b"".join(err),
                              seconds=time.monotonic() - started)
        except (MetalfleetError, KeyboardInterrupt):
            raise
        except Exception as exc:
            if _is_network_error(exc):
                self._drop()
                raise ConnectionLost(f"{self.label}: connection dropped: {type(exc).__name__}: {exc}",
                                     host=host) from exc
            raise
        finally:
            with contextlib.suppress(Exception):
                chan.close()
            if writer is not None:
                writer.join(timeout=5)

    # -- files --------------------------------------------------------------------------------
    def remote_sha256(self, path: str, *, sudo: bool = True) -> str | None:
        res = self.run(["sh", "-c", 'sha256sum < "$1" 2>/dev/null | cut -d" " -f1', "sh", path], sudo=sudo,
                       timeout=60, retry_on_drop=True)
        value = res.text.strip()
        return value if res.rc == 0 and len(value) == 64 else None

    def put(self, content: bytes, path: str, *, mode: str = "0644", sudo: bool = True,
            timeout: float = 600.0, on_output: OutputCallback | None = None) -> bool:
        """Make ``path`` hold ``content``; False (and nothing sent) when the sha256 already matches.

        The bytes go to a temporary file next to ``path``; its sha256 is checked on the host before
        it is moved into place, so a torn upload never replaces the old file.
        """
        digest = hashlib.sha256(content).hexdigest()
        if self.remote_sha256(path, sudo=sudo) == digest:
            return False
        script, args = upload_script([(path, len(content), digest, mode)])
        res = self.run(["sh", "-c", script, "sh", *args], sudo=sudo, timeout=timeout, stdin=content,
                       on_output=on_output, combine_stderr=True)
        if res.rc != 0:
            raise UploadVerifyFailed(f"{self.label}: upload of {path} failed (rc={res.rc}): {res.text.strip()[-500:]}",
                                     host=self.endpoint.host_id, path=path)
        return True

    # -- reboot -------------------------------------------------------------------------------
    def wait_for_reboot(self, *, read_boot_id: Callable[[], str | None], old_boot_id: str | None,
                        timeout: float = 900.0, poll: float = 1.0) -> float:
        """After a reboot command: wait for the session to drop, then for SSH and a new boot id.

        Returns the seconds waited. :class:`RebootTimeout` past ``timeout``.
        """
        started = time.monotonic()
        deadline = started + timeout
        # 1. wait for the old session to go away (or, rarely, for a new boot id on the same session)
        while self.connected:
            if time.monotonic() > deadline:
                raise RebootTimeout(f"{self.label}: still up {timeout:.0f}s after the reboot command",
                                    host=self.endpoint.host_id)
            time.sleep(min(poll, 0.2))
            t = self._transport
            if t is not None and t.is_active():
                with contextlib.suppress(Exception):
                    t.send_ignore()
        self._drop()
        # 2. wait for SSH to come back, one attempt at a time
        while True:
            if time.monotonic() > deadline:
                raise RebootTimeout(f"{self.label}: SSH not back {timeout:.0f}s after the reboot",
                                    host=self.endpoint.host_id)
            try:
                with self._lock:
                    self._connect_once()
            except TransientError:
                time.sleep(poll)
                continue
            try:
                boot_id = read_boot_id()
            except TransientError:
                self._drop()
                time.sleep(poll)
                continue
            if old_boot_id is None or boot_id != old_boot_id:
                return time.monotonic() - started
            # Same boot: we reconnected during the shutdown. Wait for the real drop.
            self._drop()
            time.sleep(poll)


class SshConnect:
    """The real :class:`~.connector.Connect`: SSH sessions that share one known_hosts for a run.

    Reading the known_hosts file here fails the run at once when it is not text (BadFileError),
    rather than each host later.
    """

    def __init__(self, options: SshOptions | None = None) -> None:
        self.options = options or SshOptions()
        self.known_hosts = KnownHosts(self.options)

    def __call__(self, endpoint: Endpoint, *, via: Connector | None = None) -> SshConnection:
        if via is not None and not isinstance(via, SshConnection):
            raise TypeError(f"an SSH session can only tunnel through another SSH session, not {type(via).__name__}")
        return SshConnection(endpoint, self.options, known_hosts=self.known_hosts, bastion=via)


def _feed(chan: paramiko.Channel, chunks: Iterable[bytes]) -> None:
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            for i in range(0, len(view), 1 << 17):
                chan.sendall(bytes(view[i:i + (1 << 17)]))
        chan.shutdown_write()
    except Exception:
        return

