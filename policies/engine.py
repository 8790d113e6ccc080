"""Run the rules over resources: enforcement levels, unknown values and suppressions applied in one place.

The check over files (:mod:`metalfleet.policies.check`), ``metalfleet validate/up/preview`` and the CrossGuard pack
all call :func:`evaluate`, so a finding is judged the same way wherever it is reported.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date

import msgspec

from .config import PolicyConfig, Suppression
from .model import Location, Resource
from .rules import RULES, Rule, RuleContext, ordered

__all__ = ["Finding", "InputSummary", "Report", "SuppressionStatus", "evaluate", "finding_order"]


class Finding(msgspec.Struct, frozen=True, gc=False):
    """One violation of one rule by one resource, as judged (a struct: a large plan makes tens of thousands)."""

    rule: Rule
    resource_name: str
    resource_type: str
    platform: str
    source: str
    message: str
    location: Location
    #: mandatory or advisory (as configured; an unknown value under ``unknown: advisory`` is advisory).
    level: str
    unknown: bool = False
    suppressed_by: Suppression | None = None

    @property
    def blocking(self) -> bool:
        return self.level == "mandatory" and self.suppressed_by is None


@dataclass(frozen=True)
class SuppressionStatus:
    suppression: Suppression
    #: applied (suppressed at least one finding), unused, expired, or invalid (no reason)
    status: str
    count: int = 0


@dataclass(frozen=True)
class InputSummary:
    path: str
    kind: str
    resources: int
    #: what the input names but the check did not read (a .tf file's registry module), said in the report
    notices: tuple[str, ...] = ()


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    suppressions: list[SuppressionStatus] = field(default_factory=list)
    inputs: list[InputSummary] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    resources: int = 0

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.blocking]

    @property
    def exit_code(self) -> int:
        return 1 if self.blocking else 0


def _matches(s: Suppression, rule: Rule, res: Resource, loc: Location) -> bool:
    if not fnmatch.fnmatchcase(rule.id, s.rule):
        return False
    if s.lines is not None:
        line = loc.line or res.location.line
        return (loc.file or res.location.file) == s.origin.file and line is not None and \
            s.lines[0] <= line <= s.lines[1]
    if s.resource is None:
        return True
    names = (res.name, loc.address or "", res.location.address or "")
    return any(n and (fnmatch.fnmatchcase(n, s.resource) or fnmatch.fnmatchcase(_INDEX.sub("", n), s.resource))
               for n in names)


#: ``aws_instance.gpu[3]`` is matched by a suppression for ``aws_instance.gpu`` (the .tf block it comes from).
_INDEX = re.compile(r"\[[^\]]*\]")


def evaluate(resources: Sequence[Resource], config: PolicyConfig | None = None, *,
             suppressions: Iterable[Suppression] = (), today: date | None = None,
             rules: Sequence[Rule] | None = None) -> Report:
    """Findings for ``resources`` under ``config``; ``suppressions`` come from the inputs (comments)."""
    today = today or date.today()
    config = config or PolicyConfig()
    report = Report(rules=ordered(rules), resources=len(resources))
    all_sups = [*config.suppressions, *suppressions]
    usable: list[Suppression] = []
    statuses: dict[int, str] = {}
    sup_rule = RULES["MF-SUP-001"]
    sup_settings = config.settings(sup_rule)
    for i, s in enumerate(all_sups):
        if not s.reason:
            statuses[i] = "invalid"
            if sup_settings.enforcement != "disabled":
                report.findings.append(Finding(
                    sup_rule, s.resource or s.rule, "suppression", "any", "config", f"suppression of {s.rule} "
                    f"{'on ' + s.resource + ' ' if s.resource else ''}has no reason, so it suppresses nothing",
                    s.origin, sup_settings.enforcement))
        elif s.expires is not None and s.expires < today:
            statuses[i] = "expired"
        else:
            usable.append(s)
    counts: dict[int, int] = {}
    by_kind: dict[str, list[Resource]] = {}
    for res in resources:
        by_kind.setdefault(res.kind, []).append(res)
    findings = report.findings
    for rule in report.rules:
        if not rule.kinds:
            continue
        settings = config.settings(rule)
        if settings.enforcement == "disabled":
            continue
        ctx = RuleContext(settings.params, today)
        check = rule.check
        enforcement, unknown_mode = settings.enforcement, settings.unknown
        for kind in rule.kinds:
            for res in by_kind.get(kind, ()):
                for v in check(res, ctx):
                    level = enforcement
                    if v.unknown:
                        if unknown_mode == "ignore":
                            continue
                        if unknown_mode == "advisory":
                            level = "advisory"
                    loc = v.location or res.location
                    sup = next((s for s in usable if _matches(s, rule, res, loc)), None) if usable else None
                    f = Finding(rule, res.name, res.type, res.platform, res.source, v.message, loc, level, v.unknown,
                                sup)
                    if sup is None:
                        findings.append(f)
                    else:
                        report.suppressed.append(f)
                        counts[id(sup)] = counts.get(id(sup), 0) + 1
    for i, s in enumerate(all_sups):
        status = statuses.get(i) or ("applied" if counts.get(id(s)) else "unused")
        report.suppressions.append(SuppressionStatus(s, status, counts.get(id(s), 0)))
    report.findings.sort(key=finding_order)
    report.suppressed.sort(key=finding_order)
    return report


def finding_order(f: Finding) -> tuple[bool, str, int, str, str]:
    """How reports list findings: mandatory first, then by file and line, rule and resource."""
    return f.level != "mandatory", f.location.file or "", f.location.line or 0, f.rule.id, f.resource_name
