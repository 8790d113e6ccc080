"""What a bootstrap run did (or, in a dry run, would do), per host and per step."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ["HostReport", "HostStatus", "Report", "StepResult", "StepStatus"]


class StepStatus(StrEnum):
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    WOULD_CHANGE = "would-change"
    FAILED = "failed"
    SKIPPED = "skipped"


class HostStatus(StrEnum):
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    WOULD_CHANGE = "would-change"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    #: Not started, or halted between steps, because the run was stopped (fail threshold).
    STOPPED = "stopped"


@dataclass
class StepResult:
    name: str
    status: StepStatus
    #: Commands/uploads as text, in order: those run, or in a dry run those that would run.
    commands: list[str] = field(default_factory=list)
    #: Reasons given by the step for what it left alone.
    noops: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    output_tail: str = ""
    #: Extra notes: reconnects, reboot wait, facts read before a reboot (dry run).
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "commands": list(self.commands),
                "noops": list(self.noops), "seconds": round(self.seconds, 3), "error": self.error,
                "output_tail": self.output_tail, "notes": list(self.notes)}


@dataclass
class HostReport:
    host: str
    address: str
    status: HostStatus = HostStatus.UNCHANGED
    steps: list[StepResult] = field(default_factory=list)
    error: str | None = None
    #: Facts read (label -> parsed value, as text); filled in dry runs and on failure.
    facts: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    fact_seconds: float = 0.0
    round_trips: int = 0
    reconnects: int = 0
    log_path: str | None = None

    @property
    def changed(self) -> bool:
        return any(s.status in (StepStatus.CHANGED, StepStatus.WOULD_CHANGE) for s in self.steps)

    def step(self, name: str) -> StepResult:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "address": self.address, "status": self.status.value, "error": self.error,
                "seconds": round(self.seconds, 3), "fact_seconds": round(self.fact_seconds, 3),
                "round_trips": self.round_trips, "reconnects": self.reconnects, "log_path": self.log_path,
                "facts": dict(self.facts), "steps": [s.to_dict() for s in self.steps]}


@dataclass
class Report:
    profile: str
    dry_run: bool
    hosts: list[HostReport] = field(default_factory=list)
    seconds: float = 0.0
    stopped: bool = False
    stop_reason: str | None = None
    log_dir: str | None = None

    def host(self, name: str) -> HostReport:
        for h in self.hosts:
            if h.host == name:
                return h
        raise KeyError(name)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(h.status.value for h in self.hosts))

    @property
    def failed(self) -> list[HostReport]:
        return [h for h in self.hosts if h.status in (HostStatus.FAILED, HostStatus.UNREACHABLE)]

    @property
    def changed_steps(self) -> int:
        return sum(1 for h in self.hosts for s in h.steps if s.status in (StepStatus.CHANGED, StepStatus.WOULD_CHANGE))

    @property
    def ok(self) -> bool:
        return not self.failed and not self.stopped

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "dry_run": self.dry_run, "seconds": round(self.seconds, 3),
                "stopped": self.stopped, "stop_reason": self.stop_reason, "counts": self.counts,
                "log_dir": self.log_dir, "hosts": [h.to_dict() for h in self.hosts]}

    def format_text(self, *, facts: bool | None = None) -> str:
        """Human-readable report. A dry run lists, per host, the facts read and every command."""
        show_facts = self.dry_run if facts is None else facts
        lines = [f"bootstrap profile {self.profile!r}{' (dry run)' if self.dry_run else ''}: "
                 + ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))
                 + f" in {self.seconds:.1f}s"]
        if self.stopped:
            lines.append(f"RUN STOPPED: {self.stop_reason}")
        for h in self.hosts:
            lines.append("")
            lines.append(f"== {h.host} ({h.address}): {h.status.value}  {h.seconds:.1f}s"
                         + (f", {h.reconnects} reconnect(s)" if h.reconnects else ""))
            if h.error:
                lines.append(f"   error: {h.error}")
            if show_facts and h.facts:
                lines.append("   facts read:")
                for label, value in h.facts.items():
                    lines.append(f"     {label} = {value}")
            for s in h.steps:
                lines.append(f"   [{s.status.value:>12}] {s.name}  {s.seconds:.2f}s")
                for c in s.commands:
                    lines.append(f"       $ {c}")
                for r in s.noops:
                    lines.append(f"       - {r}")
                for n in s.notes:
                    lines.append(f"       ! {n}")
                if s.error:
                    lines.append(f"       error: {s.error}")
                    for t in s.output_tail.splitlines()[-10:]:
                        lines.append(f"       | {t}")
        if self.log_dir:
            lines.append("")
            lines.append(f"logs: {self.log_dir}")
        return "\n".join(lines)
