"""The one retry policy: only throttling and transient faults, jittered, bounded.

Auth, quota, capacity and invalid-spec errors are never retried: repeating them wastes the
caller's time and, for capacity, can hide that the zone is out of GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from .errors import RateLimitedError, TransientError

T = TypeVar("T")

__all__ = ["RetryPolicy", "is_retryable"]


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, TransientError)


class RetryPolicy:
    """Retry transient faults with full-jitter exponential backoff, bounded by attempts and time."""

    def __init__(
        self,
        attempts: int = 8,
        max_delay: float = 120.0,
        base: float = 0.2,
        cap: float = 10.0,
    ) -> None:
        self.attempts = attempts
        self.max_delay = max_delay
        self.base = base
        self.cap = cap

    def _wait(self, state: RetryCallState) -> float:
        jitter = wait_random_exponential(multiplier=self.base, max=self.cap)(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, RateLimitedError) and exc.retry_after:
            return max(float(exc.retry_after), jitter)
        return float(jitter)

    def retrying(self) -> Retrying:
        return Retrying(
            retry=retry_if_exception(is_retryable),
            wait=self._wait,
            stop=stop_after_attempt(self.attempts) | stop_after_delay(self.max_delay),
            reraise=True,
        )

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self.retrying()(fn, *args, **kwargs)


DEFAULT_POLICY = RetryPolicy()
