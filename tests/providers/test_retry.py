"""The retry policy: a deadline instead of a count of tries, Retry-After within it, steps retried on their own."""

from __future__ import annotations

import time

import pytest

from metalfleet.providers import CapacityError, InvalidSpecError, RateLimitedError, RetryPolicy, TransientError
from metalfleet.providers.retry import DEADLINE_ENV, default_deadline, step


class Flaky:
    """Fails ``times`` times with ``error``, then answers ``value``; counts its calls."""

    def __init__(self, times: int, error: Exception, value: str = "ok") -> None:
        self.times, self.error, self.value, self.calls = times, error, value, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.times:
            raise self.error
        return self.value


def test_no_count_of_tries_only_the_deadline() -> None:
    """Fifty throttles in a row are ridden out: a storm is not a number of attempts."""
    fn = Flaky(50, RateLimitedError("slow down", code="Throttling"))
    assert RetryPolicy(base=0.0001, cap=0.0002, deadline=30).call(fn) == "ok"
    assert fn.calls == 51


def test_a_storm_past_the_deadline_ends_with_the_last_error_and_how_long() -> None:
    fn = Flaky(10**9, RateLimitedError("slow down", code="Throttling"))
    started = time.monotonic()
    with pytest.raises(RateLimitedError) as info:
        RetryPolicy(base=0.001, cap=0.01, deadline=0.3).call(fn)
    assert time.monotonic() - started < 5
    assert fn.calls > 2
    assert "slow down" in str(info.value) and "gave up after" in str(info.value) and DEADLINE_ENV in str(info.value)


def test_what_is_not_transient_is_not_retried() -> None:
    fn = Flaky(1, CapacityError("no GPUs", zone="z"))
    with pytest.raises(CapacityError):
        RetryPolicy(base=0.001, deadline=30).call(fn)
    assert fn.calls == 1


def test_retry_after_is_waited_but_never_past_the_deadline() -> None:
    fn = Flaky(10**9, RateLimitedError("busy", retry_after=60.0))
    started = time.monotonic()
    with pytest.raises(RateLimitedError):
        RetryPolicy(base=0.001, cap=0.01, deadline=0.5).call(fn)
    assert time.monotonic() - started < 5, "a Retry-After of 60 s must not outlast a 0.5 s deadline"
    once = Flaky(1, RateLimitedError("busy", retry_after=0.2))
    started = time.monotonic()
    RetryPolicy(base=0.0001, cap=0.0002, deadline=30).call(once)
    assert time.monotonic() - started >= 0.2, "the provider's Retry-After is honoured"


def test_steps_are_retried_on_their_own_within_the_operations_deadline() -> None:
    """An operation of three reads, each throttled twice: retried step by step, the operation runs once."""
    reads = [Flaky(2, RateLimitedError("throttled")) for _ in range(3)]
    runs = []

    def operation() -> list[str]:
        runs.append(1)
        return [step(r) for r in reads]

    assert RetryPolicy(base=0.0001, cap=0.0002, deadline=30).call(operation) == ["ok"] * 3
    assert len(runs) == 1 and [r.calls for r in reads] == [3, 3, 3]


def test_a_step_outside_any_policy_is_called_once() -> None:
    read = Flaky(1, TransientError("reset"))
    with pytest.raises(TransientError):
        step(read)
    assert read.calls == 1


def test_the_deadline_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEADLINE_ENV, "42")
    assert default_deadline() == 42.0 and RetryPolicy().deadline == 42.0
    assert RetryPolicy(deadline=5).deadline == 5.0
    for bad in ("0", "-3", "inf", "nan", "soon"):
        monkeypatch.setenv(DEADLINE_ENV, bad)
        with pytest.raises(InvalidSpecError) as info:
            default_deadline()
        assert info.value.field == DEADLINE_ENV and bad in str(info.value)
    monkeypatch.delenv(DEADLINE_ENV)
    assert default_deadline() == 600.0
