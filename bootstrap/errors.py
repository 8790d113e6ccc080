"""Errors raised by the bootstrap engine, all inside the metalfleet error tree.

::

    MetalfleetError
    ├── AuthError
    │   └── SshAuthError            the host refused every key we offered
    ├── HostKeyError                we will not talk to this host: its key is not the one we trust
    │   ├── HostKeyChanged          the key differs from known_hosts or from the provider's pinned key
    │   └── HostKeyUnknown          no recorded key and trust-on-first-use was not asked for
    ├── OperationTimeout
    │   ├── CommandTimeout          a command ran past its per-command timeout
    │   └── RebootTimeout           a host did not come back after a reboot
    ├── TransientError
    │   ├── HostUnreachable         connect refused / timed out / reset before the session was up
    │   └── ConnectionLost          an established session dropped (mid-command, mid-upload)
    ├── CommandFailed               a command exited non-zero (carries argv, rc, output tail)
    ├── UploadVerifyFailed          the uploaded file's sha256 on the host is not what we sent
    └── StepError                   a step could not plan (bad fact, impossible request)

Only :mod:`metalfleet.bootstrap.ssh` sees paramiko; it translates paramiko and socket errors into
this tree with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Sequence

# mypy cannot follow setuptools' editable mapping of metalfleet.providers, so these bases look like Any
# to it; the "type: ignore[misc]" on each subclass is for that alone.
from metalfleet.providers.errors import AuthError, MetalfleetError, OperationTimeout, TransientError

__all__ = [
    "CommandFailed",
    "CommandTimeout",
    "ConnectionLost",
    "HostKeyChanged",
    "HostKeyError",
    "HostKeyUnknown",
    "HostUnreachable",
    "RebootTimeout",
    "SshAuthError",
    "StepError",
    "UploadVerifyFailed",
]


class SshAuthError(AuthError):  # type: ignore[misc]
    """The host refused every credential offered (key file, agent keys)."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message, code="ssh-auth")
        self.host = host


class HostKeyError(MetalfleetError):  # type: ignore[misc]
    """The host's key is not one we trust; never retried."""

    def __init__(self, message: str, *, host: str, key_type: str, fingerprint: str) -> None:
        super().__init__(message, code="host-key")
        self.host = host
        self.key_type = key_type
        self.fingerprint = fingerprint


class HostKeyChanged(HostKeyError):
    """The host presented a key that differs from the recorded or pinned one.

    Either the host was reinstalled (re-pin it deliberately) or someone is in the middle.
    ``expected`` is the fingerprint we trusted.
    """

    def __init__(self, message: str, *, host: str, key_type: str, fingerprint: str, expected: str) -> None:
        super().__init__(message, host=host, key_type=key_type, fingerprint=fingerprint)
        self.expected = expected


class HostKeyUnknown(HostKeyError):
    """No recorded or pinned key for the host, and trust-on-first-use is off."""


class CommandTimeout(OperationTimeout):  # type: ignore[misc]
    def __init__(self, message: str, *, host: str, argv: Sequence[str], timeout: float) -> None:
        super().__init__(message, code="command-timeout")
        self.host = host
        self.argv = list(argv)
        self.timeout = timeout


class RebootTimeout(OperationTimeout):  # type: ignore[misc]
    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message, code="reboot-timeout")
        self.host = host


class HostUnreachable(TransientError):  # type: ignore[misc]
    """No SSH session could be set up (refused, timed out, reset during the handshake)."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message, code="unreachable")
        self.host = host


class ConnectionLost(TransientError):  # type: ignore[misc]
    """An established session dropped; whatever was running may or may not have finished."""

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message, code="connection-lost")
        self.host = host


class CommandFailed(MetalfleetError):  # type: ignore[misc]
    """A command exited with a status it was not allowed to."""

    def __init__(self, message: str, *, host: str, argv: Sequence[str], rc: int, output: str = "") -> None:
        super().__init__(message, code=f"rc={rc}")
        self.host = host
        self.argv = list(argv)
        self.rc = rc
        self.output = output


class UploadVerifyFailed(MetalfleetError):  # type: ignore[misc]
    def __init__(self, message: str, *, host: str, path: str) -> None:
        super().__init__(message, code="sha256-mismatch")
        self.host = host
        self.path = path


class StepError(MetalfleetError):  # type: ignore[misc]
    """A step cannot plan on this host (a fact it needs is missing or contradicts the request)."""
