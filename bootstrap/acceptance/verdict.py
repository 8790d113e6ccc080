"""A check's outcome and a node's verdict: the vocabulary every acceptance module shares.

A check passes, warns (passed, worth a look), fails, or is skipped (it could not be judged: no
evidence or no baseline value). A skipped check never counts as passed. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metalfleet.providers.checks import ACCEPTANCE_CHECKS

__all__ = [
    "CHECK_NAMES",
    "EXTRA_CHECKS",
    "FAIL",
    "NCCL_CHECKS",
    "PASS",
    "RDMA_FABRICS",
    "SKIP",
    "WARN",
    "CheckResult",
    "Verdict",
    "fail",
    "listing",
    "ok",
    "plural",
    "skip",
    "warn",
]

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
RDMA_FABRICS = {"efa", "infiniband", "roce", "erdma"}

#: Every check, in report order (the list lives beside the spec, which validates names against it).
CHECK_NAMES: tuple[str, ...] = ACCEPTANCE_CHECKS

#: The NCCL checks (what a run across nodes is judged on).
NCCL_CHECKS = ("nccl-correctness", "nccl-launch", "nccl-transport", "allreduce-busbw")
#: Checks reported only when their evidence is there or was asked for (not part of every node's judgement).
EXTRA_CHECKS = ("dcgm-diag", "storage-raid")


@dataclass(frozen=True)
class CheckResult:
    name: str
    #: True for "pass" and "warn" only: a skipped check is not a passed one.
    passed: bool
    reason: str
    measured: Any = None
    expected: Any = None
    #: "pass", "fail", "warn" (passed, but worth a look) or "skip" (not judged: no evidence or no baseline).
    status: str = PASS
    #: The node must pass this check (a skip of it is a failure).
    mandatory: bool = False

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    @property
    def skipped(self) -> bool:
        return self.status == SKIP


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
        return tuple(c for c in self.checks if c.status == FAIL)

    @property
    def skipped(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status == SKIP)

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)


def ok(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, True, reason, measured, expected, PASS)


def fail(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, False, reason, measured, expected, FAIL)


def warn(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, True, reason, measured, expected, WARN)


def skip(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, False, reason, measured, expected, SKIP)


def listing(items: list[str], limit: int = 6) -> str:
    """At most ``limit`` items joined by "; ", then how many more."""
    if len(items) <= limit:
        return "; ".join(items)
    return "; ".join(items[:limit]) + f"; and {len(items) - limit} more"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
