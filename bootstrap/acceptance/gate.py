"""The acceptance gate: parsed evidence from one node + an offering baseline -> a Verdict.

``judge(offering, facts)`` takes ``facts`` as ``{kind: parsed result}`` (a kind may map to a list of
results, e.g. one ``hccn-tool`` output per NPU NIC) and reports every check that applies to the
offering as ``pass``, ``warn`` (passed, worth a look), ``fail`` or ``skip``. A check is *skipped* when
it could not be judged: no evidence for it, or no baseline value to compare with (the measurement is
still reported). A skipped check never counts as passed. The *mandatory* checks (the baseline's
``required`` list, or the spec's ``acceptance.mandatory``) must pass: a mandatory check that was
skipped fails the node, its reason saying it was skipped and why. The verdict passes when no check
failed.

The checks (their names, what each judges, which nodes it applies to, its evidence and baseline value)
are :mod:`.checks`'s registry; they are judged by subject in :mod:`.gpu_checks`, :mod:`.fabric_checks`,
:mod:`.nccl_checks` and :mod:`.node_checks`; :mod:`.evidence` sorts what is handed in; the result types are
:mod:`.verdict`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from metalfleet.providers.errors import InvalidSpecError

from .baselines import Baseline, resolve_baseline
from .checks import CHECK_NAMES, CHECKS, JUDGES, check
from .evidence import Evidence, collect
from .verdict import CheckResult, CheckStatus, Verdict, skip

__all__ = ["applicable_checks", "judge"]


def applicable_checks(b: Baseline) -> tuple[str, ...]:
    """The checks a node of baseline ``b`` is judged on (each reported, skipped when it could not be judged).

    The extras (``dcgm-diag``, ``storage-raid``) are reported when their evidence is there.
    """
    return tuple(c.name for c in CHECKS if c.applies is not None and c.applies(b))


def _not_judged(name: str, b: Baseline, ev: Evidence) -> CheckResult:
    c = check(name)
    if not c.evidence(ev):
        return skip(name, f"no evidence for {name}: supply {c.hint}")
    path = c.baseline_field
    if path and b.value(path) is None:
        return skip(name, f"not judged: no baseline value {path} for {b.name}")
    return skip(name, f"no evidence for {name} in the outputs given (they do not show it): supply {c.hint}")


def judge(offering_name: str, facts: Mapping[str, Any], overrides: dict[str, Any] | None = None, *,
          node: str | None = None, scope: Iterable[str] | None = None) -> Verdict:
    """Judge one node's parsed evidence against the offering's baseline (plus ``overrides``).

    ``scope``: the checks to report (default: those that apply to the offering, plus any extra the
    evidence allows); mandatory checks outside it are not asked for (a run across nodes is judged on
    :data:`.checks.NCCL_CHECKS` only).
    """
    b = resolve_baseline(offering_name, overrides)
    for name in b.required:
        if name not in CHECK_NAMES:
            raise InvalidSpecError(f"unknown check {name!r} in required; known: {', '.join(CHECK_NAMES)}",
                                   field="required", value=name)
    wanted = set(applicable_checks(b) if scope is None else scope)
    unknown = sorted(wanted - set(CHECK_NAMES))
    if unknown:
        raise InvalidSpecError(f"unknown check {unknown[0]!r} in scope", field="scope", value=unknown[0])
    ev = collect(facts)
    checks = [c for fn in JUDGES for c in fn(b, ev)]
    if scope is not None:
        checks = [c for c in checks if c.name in wanted]
    mandatory = {n for n in b.required if scope is None or n in wanted}
    have = {c.name for c in checks}
    checks += [_not_judged(n, b, ev) for n in CHECK_NAMES if (n in wanted or n in mandatory) and n not in have]
    judged = []
    for c in checks:
        if c.name in mandatory:
            c = replace(c, mandatory=True)
            if c.skipped:
                c = replace(c, status=CheckStatus.FAIL, passed=False, reason=f"mandatory check skipped: {c.reason}")
        judged.append(c)
    order = {n: i for i, n in enumerate(CHECK_NAMES)}
    judged.sort(key=lambda c: order.get(c.name, len(order)))
    return Verdict(offering=b.name, passed=not any(c.failed for c in judged), checks=tuple(judged),
                   threshold=float(b.threshold), node=node, evidence=tuple(sorted(facts)))
