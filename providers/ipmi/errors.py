"""BMC faults -> the metalfleet error tree: the one boundary every IPMI and Redfish call goes through.

IPMI (pyghmi) reports failures as ``IpmiException`` text (plus a completion code where the BMC answered);
Redfish answers with HTTP statuses. The tables below are data so they can be checked against pyghmi's
messages and the Redfish specification (DSP0266 "Status codes"):

* a wrong user or password, or too little privilege -> :class:`AuthError` naming the host: never retried
  (a BMC locks the account after a few failed logins);
* no answer in time, a dropped session, a refused or reset connection, HTTP 5xx -> :class:`TransientError`,
  HTTP 429 -> :class:`RateLimitedError`: retried by :mod:`metalfleet.providers.retry`;
* a missing system (HTTP 404) -> :class:`NotFoundError`; anything else -> :class:`ProviderError`.

Messages name the host and the BMC endpoint and never the password (pyghmi and requests do not put it in
their exception text; :func:`scrub` removes it anyway should one ever do).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator, Sequence

from ..errors import (
    AuthError,
    MetalfleetError,
    NotFoundError,
    ProviderError,
    RateLimitedError,
    TransientError,
)

__all__ = ["AUTH_HTTP", "AUTH_TEXT", "PROVIDER", "TRANSIENT_HTTP", "TRANSIENT_TEXT", "boundary", "scrub",
           "translate"]

PROVIDER = "ipmi"

#: pyghmi exception text (lower case) that means the BMC refused the login.
AUTH_TEXT: tuple[str, ...] = ("incorrect password", "unauthorized name", "invalid user", "insufficient privilege",
                              "privilege level", "unauthorized", "password")
#: pyghmi exception text (lower case) that means the BMC did not answer (or the session broke).
TRANSIENT_TEXT: tuple[str, ...] = ("timeout", "timed out", "session no longer connected", "unable to transmit",
                                   "connection", "node busy", "temporarily")
AUTH_HTTP = frozenset({401, 403})
TRANSIENT_HTTP = frozenset({500, 502, 503, 504})


def scrub(text: str, secrets: Sequence[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return text


def translate(exc: BaseException, *, action: str, host: str, endpoint: str,
              secrets: Sequence[str] = ()) -> MetalfleetError:
    """The metalfleet error for ``exc`` raised by ``action`` on the BMC of ``host`` (``endpoint``:
    ``ipmi 10.0.0.5:623`` or a Redfish URL)."""
    where = f"BMC of {host} ({endpoint})"
    text = scrub(str(exc) or type(exc).__name__, secrets)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        code = f"HTTP{status}"
        if status in AUTH_HTTP:
            return AuthError(f"{where} refused {action}: HTTP {status} (check the user and the password that "
                             f"credentials refer to): {text}", provider=PROVIDER, code=code)
        if status == 429:
            return RateLimitedError(f"{where} throttled {action}: HTTP 429", provider=PROVIDER, code=code)
        if status in TRANSIENT_HTTP:
            return TransientError(f"{where} failed {action}: HTTP {status}: {text}", provider=PROVIDER, code=code)
        if status == 404:
            return NotFoundError(f"{where}: {action}: not found (HTTP 404): {text}", provider=PROVIDER, code=code)
        return ProviderError(f"{where} refused {action}: HTTP {status}: {text}", provider=PROVIDER, code=code)
    if isinstance(exc, socket.timeout | TimeoutError | ConnectionError | OSError) or _is_requests_io(exc):
        return TransientError(f"{where} did not answer {action}: {text}", provider=PROVIDER, code="Unreachable")
    if text.strip() in ("", "None"):  # pyghmi's IpmiException(None): the BMC never answered the login
        return TransientError(f"{where} did not answer {action} (no reply within pyghmi's timeout)",
                              provider=PROVIDER, code="Unreachable")
    lowered = text.lower()
    ipmi_code = getattr(exc, "ipmicode", None)
    ipmi: str | None = f"IPMI{ipmi_code:#04x}" if isinstance(ipmi_code, int) and ipmi_code else None
    if any(t in lowered for t in AUTH_TEXT):
        return AuthError(f"{where} refused the login for {action}: {text} (check the user and the password that "
                         "credentials refer to)", provider=PROVIDER, code=ipmi or "AuthFailed")
    if any(t in lowered for t in TRANSIENT_TEXT) or ipmi_code == 0xC0:
        return TransientError(f"{where} did not answer {action}: {text}", provider=PROVIDER,
                              code=ipmi or "Unreachable")
    return ProviderError(f"{where} failed {action}: {text}", provider=PROVIDER, code=ipmi)


def _is_requests_io(exc: BaseException) -> bool:
    """requests' connection and timeout errors (imported only if requests already is)."""
    import sys

    mod = sys.modules.get("requests.exceptions")
    return bool(mod and isinstance(exc, mod.ConnectionError | mod.Timeout))


@contextlib.contextmanager
def boundary(action: str, *, host: str, endpoint: str, secrets: Sequence[str] = ()) -> Iterator[None]:
    """Translate whatever the BMC call inside raises into the metalfleet tree (``raise ... from``)."""
    try:
        yield
    except MetalfleetError:
        raise
    except Exception as exc:
        raise translate(exc, action=action, host=host, endpoint=endpoint, secrets=secrets) from exc
