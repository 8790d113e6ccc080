"""The connector contract: what the engine and the acceptance probes need from a session to one host.

Two layers, after pyinfra's connectors/api split: a :class:`Connector` moves bytes to and from one
host (run an argv, run a framed :class:`~metalfleet.bootstrap.script.Script`, put a file, wait for a
reboot, close); everything above it (fact gating, step order, probes, the gate, fan-out) is written
against this protocol and never against paramiko. Two connectors ship: :class:`~.ssh.SshConnection`
(the real one, the only module that imports paramiko) and :class:`~.replay.ReplayConnector` (answers
from data, for tests of everything above it, as httpx's ``MockTransport`` does for HTTP clients).

A :class:`Connect` builds one connector per host (and, for a host behind a jump host, is handed the
jump host's connector); :mod:`.sessions` keeps one per bastion and shares it.

This module imports only the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .script import Script

__all__ = ["Connect", "Connector", "ConnectorBase", "Endpoint", "ExecResult", "OutputCallback", "SshOptions",
           "parse_bastion"]

OutputCallback = Callable[[bytes], None]


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to log in."""

    address: str
    port: int = 22
    user: str = "root"
    key_path: str | None = None
    #: ``user@host[:port]`` of a jump host, or None.
    bastion: str | None = None
    #: Name used in messages and logs.
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or self.host_id

    @property
    def host_id(self) -> str:
        """The known_hosts name: ``addr`` on port 22, ``[addr]:port`` otherwise (as OpenSSH writes it)."""
        return self.address if self.port == 22 else f"[{self.address}]:{self.port}"


def parse_bastion(spec: str, *, default_user: str, key_path: str | None) -> Endpoint:
    """``user@host[:port]`` (user and port optional) -> Endpoint."""
    user, _, hostport = spec.rpartition("@")
    host, port = hostport, 22
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif hostport.count(":") == 1:
        host, p = hostport.split(":")
        port = int(p)
    return Endpoint(address=host, port=port, user=user or default_user, key_path=key_path, name=f"bastion {host}")


@dataclass(frozen=True)
class SshOptions:
    """Connection settings shared by every host of a run."""

    known_hosts: str | None = None
    #: host (address, name or ``[addr]:port``) -> public key lines (``ssh-ed25519 AAAA...``) to trust.
    pinned_keys: Mapping[str, Sequence[str]] = field(default_factory=dict)
    trust_on_first_use: bool = False
    use_agent: bool = True
    connect_timeout: float = 10.0
    connect_attempts: int = 4
    connect_deadline: float = 60.0
    keepalive: int = 15

    def resolved_known_hosts(self) -> Path:
        return Path(os.path.expanduser(self.known_hosts or "~/.ssh/known_hosts"))


@dataclass(frozen=True)
class ExecResult:
    rc: int
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")


class Connector(Protocol):
    """One session to one host. Not thread-safe per instance: each host has its own worker thread.

    Errors are the metalfleet tree (:mod:`.errors`): :class:`HostUnreachable` while connecting,
    :class:`ConnectionLost` when an established session drops (both transient), :class:`HostKeyError`
    and :class:`SshAuthError` (never retried), :class:`CommandTimeout`, :class:`RebootTimeout`.
    """

    @property
    def label(self) -> str:
        """The host's name in messages."""

    @property
    def connected(self) -> bool:
        """Whether a session is up now."""

    @property
    def reconnects(self) -> int:
        """Sessions opened after the first (drops recovered, reboots waited out)."""

    def connect(self) -> None:
        """Open the session (no-op when up), retrying transient faults."""

    def run(self, argv: Sequence[str], *, sudo: bool = True, timeout: float | None = 600.0,
            stdin: bytes | Iterable[bytes] | None = None, on_output: OutputCallback | None = None,
            combine_stderr: bool = False, retry_on_drop: bool = False) -> ExecResult:
        """Run one argv (as root: ``sudo -n`` when the login user is not) in one exec channel.

        ``retry_on_drop``: reconnect and run it again once if the session drops (only for commands
        that change nothing); otherwise a drop is :class:`ConnectionLost`.
        """

    def run_script(self, script: Script, *, sudo: bool = True, timeout: float | None = 600.0,
                   stdin: bytes | Iterable[bytes] | None = None, on_output: OutputCallback | None = None,
                   retry_on_drop: bool = False) -> ExecResult:
        """Run a framed multi-command script (facts, a step's batch, probes) in one exec channel."""

    def put(self, content: bytes, path: str, *, mode: str = "0644", sudo: bool = True, timeout: float = 600.0,
            on_output: OutputCallback | None = None) -> bool:
        """Make ``path`` hold ``content``; False (nothing sent) when its sha256 already matches."""

    def wait_for_reboot(self, *, read_boot_id: Callable[[], str | None], old_boot_id: str | None,
                        timeout: float = 900.0, poll: float = 1.0) -> float:
        """After a reboot command: wait for the session to drop, then for a session with a new boot id.

        Returns the seconds waited; :class:`RebootTimeout` past ``timeout``.
        """

    def close(self) -> None:
        """Close the session (a later call reconnects)."""


class ConnectorBase:
    """What every connector keeps the same way: its endpoint, its label, and how often it connected."""

    endpoint: Endpoint
    #: Sessions opened so far (the first, then one per drop recovered or reboot waited out).
    connects: int = 0

    @property
    def label(self) -> str:
        return self.endpoint.label

    @property
    def reconnects(self) -> int:
        return max(0, self.connects - 1)


class Connect(Protocol):
    """Builds the connector for one endpoint; ``via``: the jump host's connector when there is one."""

    def __call__(self, endpoint: Endpoint, *, via: Connector | None = None) -> Connector: ...
