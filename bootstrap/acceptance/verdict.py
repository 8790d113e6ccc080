"""A check's outcome and a node's verdict: the vocabulary every acceptance module shares.

A check passes, warns (passed, worth a look), fails, or is skipped (it could not be judged: no
evidence or no baseline value). A skipped check never counts as passed. Standard library only, and
Python 3.10 (a GPU host's python3 runs the gate through tools/gpu_acceptance_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = [
    "CheckResult",
    "CheckStatus",
    "TextEnum",
    "Verdict",
    "fail",
    "listing",
    "ok",
    "plural",
    "skip",
    "warn",
]


class TextEnum(str, Enum):  # noqa: UP042 - enum.StrEnum is 3.11+; a GPU host may run the gate on 3.10
    """A str enum that prints, formats and serialises as its value: enum.StrEnum, which is 3.11+ (a GPU host's
    python3 may be 3.10)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class CheckStatus(TextEnum):
    """A check's outcome; its value is what every report prints ("pass", "fail", "warn", "skip")."""

    PASS = "pass"
    #: Passed, but worth a look.
    WARN = "warn"
    FAIL = "fail"
    #: Not judged: no evidence or no baseline value. Never counted as passed.
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    name: str
    #: True for "pass" and "warn" only: a skipped check is not a passed one.
    passed: bool
    reason: str
    measured: Any = None
    expected: Any = None
    status: CheckStatus = CheckStatus.PASS
    #: The node must pass this check (a skip of it is a failure).
    mandatory: bool = False

    @property
    def failed(self) -> bool:
        return self.status == CheckStatus.FAIL

    @property
    def skipped(self) -> bool:
        return self.status == CheckStatus.SKIP


@dataclass(frozen=True)
class Verdict:
    offering: str
    #: No check failed (a mandatory check that was skipped is a failed one).
    passed: bool
    checks: tuple[CheckResult, ...]
    threshold: float
    node: str | None = None
    #: the evidence kinds that were judged
    evidence: tuple[str, ...] = ()

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.failed)

    @property
    def skipped(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.skipped)

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)


def ok(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, True, reason, measured, expected, CheckStatus.PASS)


def fail(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, False, reason, measured, expected, CheckStatus.FAIL)


def warn(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, True, reason, measured, expected, CheckStatus.WARN)


def skip(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, False, reason, measured, expected, CheckStatus.SKIP)


def listing(items: list[str], limit: int = 6) -> str:
    """At most ``limit`` items joined by "; ", then how many more."""
    if len(items) <= limit:
        return "; ".join(items)
    return "; ".join(items[:limit]) + f"; and {len(items) - limit} more"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
