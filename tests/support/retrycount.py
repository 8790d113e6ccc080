"""The production retry policy with short waits, counting the retries it makes (tests and benchmarks)."""

from __future__ import annotations

from typing import Any

from metalfleet.providers.retry import RetryPolicy

__all__ = ["CountingPolicy"]


class CountingPolicy(RetryPolicy):
    """:class:`RetryPolicy` whose ``retries`` counts every retry it made (tenacity's ``before_sleep``)."""

    def __init__(self, attempts: int | None = None, *, base: float = 0.005, cap: float = 0.05,
                 deadline: float | None = 30.0) -> None:
        super().__init__(attempts=attempts, base=base, cap=cap, deadline=deadline)
        self.retries = 0

    def retrying(self, deadline: float | None = None) -> Any:
        r = super().retrying(deadline)

        def count(_state: Any) -> None:
            self.retries += 1

        r.before_sleep = count
        return r
