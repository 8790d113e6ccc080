"""The one retry policy: only throttling and transient faults, jittered, bounded by one deadline.

Auth, quota, capacity and invalid-spec errors are never retried: repeating them wastes the
caller's time and, for capacity, can hide that the zone is out of GPUs.

A storm of throttling is ridden out, not counted: by default there is no cap on attempts, only the deadline
(``METALFLEET_RETRY_DEADLINE`` seconds, 600 unless set), so a call that meets 50% throttling still completes,
and one whose storm outlasts the deadline ends with the provider's last error saying how long it tried.
``Retry-After`` (a :class:`~.errors.RateLimitedError`'s ``retry_after``) is honoured, within the deadline.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_random_exponential,
)

from .errors import InvalidSpecError, MetalfleetError, OperationTimeout, RateLimitedError, TransientError

T = TypeVar("T")

__all__ = ["DEADLINE_ENV", "DEFAULT_DEADLINE", "DEFAULT_POLICY", "RetryPolicy", "default_deadline", "is_retryable",
           "read_or_none", "step"]

#: Overrides the default deadline (seconds) of every policy built without one.
DEADLINE_ENV = "METALFLEET_RETRY_DEADLINE"
DEFAULT_DEADLINE = 600.0


def is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, TransientError)


def default_deadline() -> float:
    """``METALFLEET_RETRY_DEADLINE`` when set to a positive number of seconds, else 600."""
    raw = os.environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return DEFAULT_DEADLINE
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise InvalidSpecError(f"{DEADLINE_ENV}={raw!r} is not a positive number of seconds",
                               field=DEADLINE_ENV, value=raw)
    return value


class RetryPolicy:
    """Retry transient faults with full-jitter exponential backoff until ``deadline`` seconds have passed.

    ``attempts`` (None: no cap) additionally bounds the tries; ``max_delay`` is the older name of ``deadline``.
    ``deadline`` None reads :func:`default_deadline` each time the policy is used. The wait before a retry never
    runs past the deadline: the last try comes before it, and its error is raised with how long it was tried.
    """

    def __init__(
        self,
        attempts: int | None = None,
        max_delay: float | None = None,
        base: float = 0.2,
        cap: float = 20.0,
        *,
        deadline: float | None = None,
    ) -> None:
        if attempts is not None and attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.attempts = attempts
        self._deadline = deadline if deadline is not None else max_delay
        self.base = base
        self.cap = cap

    @property
    def deadline(self) -> float:
        return self._deadline if self._deadline is not None else default_deadline()

    @property
    def max_delay(self) -> float:  # the older name
        return self.deadline

    def retrying(self, deadline: float | None = None) -> Retrying:
        """A tenacity ``Retrying`` for one operation; ``deadline`` (default :attr:`deadline`, read once here) bounds
        its tries and the waits between them."""
        limit = self.deadline if deadline is None else deadline

        def wait(state: RetryCallState) -> float:
            jitter = float(wait_random_exponential(multiplier=self.base, max=self.cap)(state))
            exc = state.outcome.exception() if state.outcome else None
            after = exc.retry_after if isinstance(exc, RateLimitedError) and exc.retry_after else None
            left = limit - (state.seconds_since_start or 0.0)
            return max(0.0, min(max(float(after), jitter) if after else jitter, left - 0.01)) if left > 0 else 0.0

        stop = stop_after_delay(limit) | (stop_after_attempt(self.attempts) if self.attempts else stop_never)
        return Retrying(retry=retry_if_exception(is_retryable), wait=wait, stop=stop, reraise=True)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        started = time.monotonic()
        deadline = self.deadline
        retrying = self.retrying(deadline)
        token = _ACTIVE.set((self, started + deadline))
        try:
            return retrying(fn, *args, **kwargs)
        except MetalfleetError as exc:
            tries = retrying.statistics.get("attempt_number", 1)
            if exc.retryable and tries > 1 and not getattr(exc, "_gave_up", False):
                took = time.monotonic() - started
                why = (f"at most {self.attempts} tries" if self.attempts and tries >= self.attempts else
                       f"the retry deadline is {deadline:.0f}s, {DEADLINE_ENV} sets it")
                exc.message = f"{exc.message} (gave up after {tries} tries over {took:.0f}s; {why})"
                exc.args = (exc.message,)
                exc._gave_up = True  # type: ignore[attr-defined]  # an outer policy does not say it twice
            raise
        finally:
            _ACTIVE.reset(token)


#: The policy retrying the operation this thread is in, and when its deadline passes (see :func:`step`).
_ACTIVE: contextvars.ContextVar[tuple[RetryPolicy, float] | None] = contextvars.ContextVar("metalfleet_retry",
                                                                                          default=None)


def step(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """One read (or other safely repeatable call) of a driver operation made of several calls, retried on its own
    under the policy retrying the operation, within what is left of that operation's deadline; called once when no
    policy is retrying it. Why: under 50% throttling an operation of five calls gets through in one pass 3% of the
    time, so retrying only the whole would take dozens of passes; retrying each step costs about two tries each."""
    active = _ACTIVE.get()
    if active is None:
        return fn(*args, **kwargs)
    policy, deadline = active
    left = deadline - time.monotonic()
    if left <= 0:
        return fn(*args, **kwargs)
    inner = RetryPolicy(base=policy.base, cap=policy.cap, deadline=left)  # the same backoff, not its counters
    token = _ACTIVE.set(None)  # the step's own retries are the step's: nothing inside it nests further
    try:
        return inner.retrying()(fn, *args, **kwargs)
    finally:
        _ACTIVE.reset(token)


DEFAULT_POLICY = RetryPolicy()


def read_or_none(read: Callable[[], T], *, deadline: float, poll: float, timeout: float, what: str,
                 provider: str | None = None) -> T | None:
    """One status read of a wait loop that has its own ``deadline`` (a ``time.monotonic()``): the read's answer,
    or None once a throttled or failed read (a :class:`~.errors.TransientError`) has been slept off for a poll
    (twice as long when throttled): it is no news, and the loop polls again. Past the deadline such a failure is an
    :class:`~.errors.OperationTimeout` naming ``what`` was waited for and the last error, so a wait never outlives
    its timeout and the caller's policy does not start the whole operation over for one unlucky read."""
    try:
        return read()
    except TransientError as exc:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OperationTimeout(f"{what} not known after {timeout:.0f}s: the reads kept failing, the last "
                                   f"with {exc}", provider=provider or exc.provider, code=exc.code) from exc
        time.sleep(min(poll * (2 if isinstance(exc, RateLimitedError) else 1), remaining))
        return None
