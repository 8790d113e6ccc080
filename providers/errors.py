"""One error tree for every provider, so callers handle failures without knowing which SDK raised them.

::

    MetalfleetError                 provider, code, request_id
    ├── InvalidSpecError            a spec or config value is wrong (names the field); never retried
    │   └── SubscriptionError       release refused: subscription nodes, and nothing opted in to unsubscribe
    ├── AuthError                   credentials missing, wrong or not allowed; never retried
    ├── QuotaError                  an account limit (vCPU, instance count); never retried
    ├── CapacityError               the provider has no capacity in the zone; never retried here
    ├── NotFoundError               the node/resource does not exist
    ├── ConflictError               the request conflicts with existing state (e.g. idempotency key reuse)
    ├── OperationTimeout            a wait ran past its deadline
    ├── TransientError              a fault worth retrying (5xx, connection reset)
    │   └── RateLimitedError        throttled; carries retry_after when the provider says
    ├── ProviderError               anything else the provider said no to
    └── PrerequisiteError           a tool or package metalfleet runs is missing (names it); never retried

Drivers translate SDK exceptions into this tree at their boundary (``raise ... from exc``); nothing
above the drivers ever sees a botocore or Tea exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AuthError",
    "CapacityError",
    "ConflictError",
    "InvalidSpecError",
    "MetalfleetError",
    "NotFoundError",
    "OperationTimeout",
    "PrerequisiteError",
    "ProviderError",
    "QuotaError",
    "RateLimitedError",
    "SubscriptionError",
    "TransientError",
]


class MetalfleetError(Exception):
    """Root of every error metalfleet raises."""

    #: Whether retrying the same call may succeed.
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.provider = provider
        self.code = code
        self.request_id = request_id

    def __str__(self) -> str:
        parts = [self.message]
        ctx = [f"{k}={v}" for k, v in (("provider", self.provider), ("code", self.code),
                                         ("request_id", self.request_id)) if v]
        if ctx:
            parts.append(f"[{', '.join(ctx)}]")
        return " ".join(parts)


class InvalidSpecError(MetalfleetError):
    """A spec or configuration value is wrong; ``field`` is the dotted path to it."""

    def __init__(self, message: str, *, field: str | None = None, value: object = None, **kw: str | None):
        super().__init__(message, **kw)
        self.field = field
        self.value = value


class SubscriptionError(InvalidSpecError):
    """Release was refused because nodes were bought for a term (monthly/yearly) and neither the spec
    (``capacity.release_subscriptions: true``) nor the command (``metalfleet release --unsubscribe``) opted in to
    ending them early. ``subscriptions``: each node's :class:`~metalfleet.providers.contract.Subscription` (its
    expiry, and what unsubscribing refunds or costs where the provider's API says). Nothing was released."""

    def __init__(self, message: str, *, subscriptions: Sequence[Any] = (), **kw: str | None) -> None:
        super().__init__(message, field="capacity.release_subscriptions", value=False, **kw)
        self.subscriptions = list(subscriptions)


class AuthError(MetalfleetError):
    """Credentials are missing, invalid, or not allowed to do this."""


class QuotaError(MetalfleetError):
    """An account limit stops the request; raise the quota, do not retry."""


class CapacityError(MetalfleetError):
    """The provider has no capacity for this offering where asked."""

    def __init__(self, message: str, *, zone: str | None = None, **kw: str | None) -> None:
        super().__init__(message, **kw)
        self.zone = zone


class NotFoundError(MetalfleetError):
    """The resource does not exist (or no longer does)."""


class ConflictError(MetalfleetError):
    """The request conflicts with existing state."""


class OperationTimeout(MetalfleetError):
    """A wait ran past its deadline. (Named so as not to shadow the builtin TimeoutError, which socket
    and subprocess timeouts raise and which this is not.)"""


class TransientError(MetalfleetError):
    """A fault that may pass: a 5xx, a reset connection."""

    retryable = True


class RateLimitedError(TransientError):
    """The provider throttled the call; ``retry_after`` is in seconds when known."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: str | None) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ProviderError(MetalfleetError):
    """The provider refused for a reason not mapped to a more specific class."""


class PrerequisiteError(MetalfleetError):
    """A tool or package metalfleet needs on this machine is missing or does not run (e.g. the Pulumi CLI);
    ``tool`` names it. Not a spec problem: install the tool, nothing in the spec changes."""

    def __init__(self, message: str, *, tool: str, **kw: str | None) -> None:
        super().__init__(message, **kw)
        self.tool = tool
