"""The rule set as Pulumi CrossGuard policies: one ResourceValidationPolicy per rule, two stack policies for
suppressions. The pack folder (``policies/pack``) only assembles a PolicyPack from :func:`build_policies`.

Each policy's ``validate(args, report_violation)`` turns the resource into neutral views
(:mod:`.adapters.pulumi`, reading inputs without tripping the SDK's unknown-value checks, so a value unknown at
preview is judged as UNKNOWN instead of skipping the policy), runs that one rule through the same engine as
``metalfleet policy check`` and reports what it finds. Configuration, by precedence:

- the pack's config (``pulumi preview --policy-pack-config file.json``): per policy ``enforcementLevel`` plus the
  rule's settings (see RULES.md), ``unknown`` and ``suppressions`` (a list of ``{resource, reason, expires}``);
- a metalfleet policy config file named by ``METALFLEET_POLICY_CONFIG`` (the format ``--config`` reads).

``pulumi_policy`` is imported only when policies are built, so this module loads without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from .adapters import assumptions
from .adapters.pulumi import pulumi_resources
from .config import PolicyConfig, load_config, merge_rule_config
from .engine import Report, evaluate
from .model import Resource
from .rules import FRAMEWORKS, RULES, Rule, ordered

__all__ = ["CONFIG_ENV", "PACK_NAME", "build_policies", "config_schema", "stack_validator", "validator"]

PACK_NAME = "metalfleet"
CONFIG_ENV = "METALFLEET_POLICY_CONFIG"
ReportViolation = Callable[..., None]


def base_config() -> PolicyConfig:
    path = os.environ.get(CONFIG_ENV)
    return load_config(path) if path else PolicyConfig()


def _config(base: PolicyConfig, rule_id: str, args: Any) -> PolicyConfig:
    own = dict(args.get_config() or {}) if hasattr(args, "get_config") else {}
    return merge_rule_config(base, rule_id, own) if own else base


def _resources(args: Any, config: PolicyConfig) -> list[Resource]:
    return pulumi_resources(args.resource_type, args.props, args.name, args.urn, assume=assumptions(config))


def _message(f: Any) -> str:
    where = (f.location.file and f.location.line and f" ({f.location.file}:{f.location.line})") or ""
    unknown = " [unknown]" if f.unknown else ""
    return f"{f.rule.id} [{f.rule.severity}]{unknown}: {f.message}{where}"


def validator(rule_id: str, base: PolicyConfig | None = None, today: date | None = None) -> \
        Callable[[Any, ReportViolation], None]:
    """The ``validate(args, report_violation)`` of rule ``rule_id``'s resource policy."""
    rule = RULES[rule_id]

    def validate(args: Any, report_violation: ReportViolation) -> None:
        config = _config(base if base is not None else base_config(), rule_id, args)
        resources = _resources(args, config)
        if not any(r.kind in rule.kinds for r in resources):
            return
        report = evaluate(resources, config, rules=[rule], today=today)
        for f in report.findings:
            if f.rule.id == rule_id:
                report_violation(_message(f), args.urn)

    return validate


def _stack_report(args: Any, base: PolicyConfig, today: date | None) -> Report:
    resources: list[Resource] = []
    for r in args.resources:
        resources.extend(pulumi_resources(r.resource_type, r.props, r.name, r.urn, assume=assumptions(base)))
    return evaluate(resources, base, today=today)


def stack_validator(rule_id: str, base: PolicyConfig | None = None, today: date | None = None) -> \
        Callable[[Any, ReportViolation], None]:
    """MF-SUP-001 (suppressions without a reason) and MF-SUP-002 (suppressed findings, listed) over the stack."""

    def validate(args: Any, report_violation: ReportViolation) -> None:
        cfg = base if base is not None else base_config()
        own = dict(args.get_config() or {}) if hasattr(args, "get_config") else {}
        cfg = merge_rule_config(cfg, rule_id, {k: v for k, v in own.items() if k != "suppressions"}) if own else cfg
        report = _stack_report(args, cfg, today)
        if rule_id == "MF-SUP-001":
            for f in report.findings:
                if f.rule.id == "MF-SUP-001":
                    report_violation(f"{f.rule.id}: {f.message} (declared at {f.location.describe()})")
            return
        for f in report.suppressed:
            s = f.suppressed_by
            until = f", expires {s.expires.isoformat()}" if s and s.expires else ""
            report_violation(f"MF-SUP-002: {f.rule.id} suppressed on {f.resource_name}: {f.message} — reason: "
                             f"{s.reason if s else ''}{until}")
        for st in report.suppressions:
            if st.status in ("expired", "unused"):
                report_violation(f"MF-SUP-002: suppression {st.status}: {st.suppression.describe()}")

    return validate


_JSON_TYPES = {"boolean": "boolean", "integer": "integer", "string": "string", "array": "array", "object": "object",
               "date": "string"}


def config_schema(rule: Rule) -> dict[str, dict[str, Any]]:
    """The JSON schema of a policy's config properties (the engine checks --policy-pack-config against it)."""
    props: dict[str, dict[str, Any]] = {
        name: {"type": _JSON_TYPES[p.type], "description": p.description} for name, p in rule.params.items()}
    props["unknown"] = {"type": "string", "enum": ["fail", "advisory", "ignore"],
                        "description": "a value unknown at preview: fail (a violation), advisory or ignore"}
    props["suppressions"] = {"type": "array", "description": "suppressions of this rule: {resource, reason, expires}",
                             "items": {"type": "object", "properties": {
                                 "resource": {"type": "string"}, "reason": {"type": "string"},
                                 "expires": {"type": "string"}}}}
    return props


def _framework_tags(rule: Rule) -> list[str]:
    return [f"{FRAMEWORKS[k]}: {ref}" for k, refs in rule.frameworks.items() for ref in refs]


def build_policies(base: PolicyConfig | None = None) -> list[Any]:
    """Every rule as a CrossGuard policy (pulumi_policy objects; constructing them starts nothing)."""
    from pulumi_policy import (
        EnforcementLevel,
        PolicyComplianceFramework,
        PolicyConfigSchema,
        ResourceValidationPolicy,
        Severity,
        StackValidationPolicy,
    )

    levels = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY,
              "disabled": EnforcementLevel.DISABLED}
    policies: list[Any] = []
    for rule in ordered():
        common: Mapping[str, Any] = {
            "name": rule.id,
            "description": rule.title,
            "display_name": f"{rule.id} {rule.title}",
            "enforcement_level": levels[rule.enforcement],
            "severity": Severity(rule.severity),
            "framework": PolicyComplianceFramework(
                name="ISO/IEC 27001", version="2022",
                reference=", ".join(rule.frameworks.get("iso27001", ())),
                specification=rule.rationale),
            "tags": _framework_tags(rule),
            "remediation_steps": rule.remediation,
            "config_schema": PolicyConfigSchema(properties=config_schema(rule)),
        }
        if rule.kinds:
            policies.append(ResourceValidationPolicy(validate=validator(rule.id, base), **common))
        else:
            policies.append(StackValidationPolicy(validate=stack_validator(rule.id, base), **common))
    return policies
