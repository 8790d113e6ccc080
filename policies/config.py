"""Policy configuration (``--config policy.yaml``, or the CrossGuard pack's config) and suppressions.

::

    unknown: fail               # a value unknown at plan time: fail | advisory | ignore (per rule too)
    aws:
      ebs_encryption_by_default: false     # the account encrypts new EBS volumes by default
      imds_tokens_required_by_default: false   # account-level instance metadata defaults require tokens
    rules:
      MF-NET-001: {enforcement: advisory, allow: false}
      MF-TAG-001:
        required: {owner: ".+", cost-center: ["4711", "research"]}   # regex, or a list of allowed values
    suppressions:
      - rule: MF-NET-001                 # a rule id (globs allowed: MF-NET-*)
        resource: "aws_instance.bastion*"   # optional glob on the resource name or address
        reason: public bastion for the lab VPC   # required: a suppression without one is a finding
        expires: 2026-03-31              # optional; after it the suppression no longer applies

Every fault is an InvalidSpecError naming the field path (``rules.MF-TAG-001.required``), so the CLI
exits 2 with one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.textfile import read_text_file, shorten

from .model import Location
from .rules import RULES, Rule
from .yamlpos import Positions, load_with_positions

__all__ = ["ENFORCEMENTS", "UNKNOWN_MODES", "PolicyConfig", "RuleSettings", "Suppression", "load_config",
           "parse_config"]

ENFORCEMENTS = ("mandatory", "advisory", "disabled")
UNKNOWN_MODES = ("fail", "advisory", "ignore")
_TOP = ("unknown", "aws", "rules", "suppressions")
_AWS = ("ebs_encryption_by_default", "imds_tokens_required_by_default")


@dataclass(frozen=True)
class Suppression:
    """``rule`` (id or glob) suppressed for ``resource`` (glob; None: every resource in scope).

    ``origin``: where it was written (config file line, or a comment in the input); ``lines``: for a comment,
    the lines of the input it covers (findings located there are suppressed).
    """

    rule: str
    reason: str | None
    expires: date | None = None
    resource: str | None = None
    origin: Location = field(default_factory=Location)
    lines: tuple[int, int] | None = None
    bad_expiry: str | None = None

    def describe(self) -> str:
        scope = f" on {self.resource}" if self.resource else ""
        if self.lines:
            scope = f" on lines {self.lines[0]}-{self.lines[1]} of {self.origin.file}"
        until = f", expires {self.expires.isoformat()}" if self.expires else ""
        return f"{self.rule}{scope}{until}: {self.reason or '(no reason given)'}"


@dataclass(frozen=True)
class RuleSettings:
    enforcement: str
    unknown: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class PolicyConfig:
    unknown: str = "fail"
    ebs_encryption_by_default: bool = False
    imds_tokens_required_by_default: bool = False
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    suppressions: tuple[Suppression, ...] = ()
    source: str | None = None

    def settings(self, r: Rule) -> RuleSettings:
        own = dict(self.rules.get(r.id) or {})
        enforcement = str(own.pop("enforcement", r.enforcement))
        unknown = str(own.pop("unknown", self.unknown))
        params = {**r.defaults(), **own}
        return RuleSettings(enforcement, unknown, params)


def _fail(source: str, path: str, value: object, why: str) -> InvalidSpecError:
    return InvalidSpecError(f"policy config {source}: {path}: {why} (got {shorten(value)})", field=path, value=value)


def _date(value: Any, source: str, path: str) -> date:
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise _fail(source, path, value, "not a date (YYYY-MM-DD)") from None


def _check_param(r: Rule, key: str, value: Any, source: str, path: str) -> Any:
    if key == "enforcement":
        if value not in ENFORCEMENTS:
            raise _fail(source, path, value, f"must be one of {', '.join(ENFORCEMENTS)}")
        return value
    if key == "unknown":
        if value not in UNKNOWN_MODES:
            raise _fail(source, path, value, f"must be one of {', '.join(UNKNOWN_MODES)}")
        return value
    param = r.params.get(key)
    if param is None:
        known = ", ".join(["enforcement", "unknown", *r.params]) or "enforcement, unknown"
        raise _fail(source, path, value, f"{r.id} has no setting {key!r} (known: {known})")
    checks = {"boolean": lambda v: isinstance(v, bool), "integer": lambda v: isinstance(v, int)
              and not isinstance(v, bool), "string": lambda v: isinstance(v, str),
              "array": lambda v: isinstance(v, list), "object": lambda v: isinstance(v, dict)}
    if param.type == "date":
        return None if value is None else _date(value, source, path).isoformat()
    if not checks[param.type](value):
        raise _fail(source, path, value, f"must be a{'n' if param.type[0] in 'aeiou' else ''} {param.type}")
    return value


def _suppression(item: Any, source: str, path: str, origin: Location) -> Suppression:
    if not isinstance(item, dict):
        raise _fail(source, path, item, "a suppression is a mapping with rule, reason and optionally resource, "
                    "expires")
    for key in item:
        if key not in ("rule", "reason", "resource", "expires"):
            raise _fail(source, f"{path}.{key}", item[key], "unknown key (rule, reason, resource, expires)")
    rule_id = item.get("rule")
    if not isinstance(rule_id, str) or not rule_id:
        raise _fail(source, f"{path}.rule", rule_id, "every suppression names a rule id (e.g. MF-NET-001)")
    reason = item.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _fail(source, f"{path}.reason", reason, "must be text")
    resource = item.get("resource")
    if resource is not None and not isinstance(resource, str):
        raise _fail(source, f"{path}.resource", resource, "must be a name or glob")
    expires = _date(item["expires"], source, f"{path}.expires") if item.get("expires") is not None else None
    return Suppression(rule_id, (reason or "").strip() or None, expires, resource, origin)


def parse_config(data: Any, source: str = "<config>", positions: Positions | None = None) -> PolicyConfig:
    """A PolicyConfig from plain data (a YAML/JSON document); faults name the field path."""
    if data is None:
        return PolicyConfig(source=source)
    if not isinstance(data, dict):
        raise _fail(source, "(top level)", data, "must be a mapping")
    for key in data:
        if key not in _TOP:
            raise _fail(source, str(key), data[key], f"unknown key (known: {', '.join(_TOP)})")
    unknown = data.get("unknown", "fail")
    if unknown not in UNKNOWN_MODES:
        raise _fail(source, "unknown", unknown, f"must be one of {', '.join(UNKNOWN_MODES)}")
    aws = data.get("aws") or {}
    if not isinstance(aws, dict):
        raise _fail(source, "aws", aws, "must be a mapping")
    for key, value in aws.items():
        if key not in _AWS:
            raise _fail(source, f"aws.{key}", value, f"unknown key (known: {', '.join(_AWS)})")
        if not isinstance(value, bool):
            raise _fail(source, f"aws.{key}", value, "must be true or false")
    rules: dict[str, dict[str, Any]] = {}
    for rule_id, settings in (data.get("rules") or {}).items():
        r = RULES.get(str(rule_id))
        if r is None:
            raise _fail(source, f"rules.{rule_id}", settings, f"no such rule (known: {', '.join(sorted(RULES))})")
        if isinstance(settings, str):  # MF-ENC-002: mandatory
            settings = {"enforcement": settings}
        if not isinstance(settings, dict):
            raise _fail(source, f"rules.{rule_id}", settings, "must be a mapping of settings or an enforcement "
                        "level")
        rules[r.id] = {k: _check_param(r, k, v, source, f"rules.{rule_id}.{k}") for k, v in settings.items()}
    items = data.get("suppressions") or []
    if not isinstance(items, list):
        raise _fail(source, "suppressions", items, "must be a list")
    sups = []
    for i, item in enumerate(items):
        line, col = positions.get("suppressions", i) if positions else (None, None)
        sups.append(_suppression(item, source, f"suppressions[{i}]", Location(source, line, col)))
    return PolicyConfig(unknown=unknown, ebs_encryption_by_default=bool(aws.get("ebs_encryption_by_default")),
                        imds_tokens_required_by_default=bool(aws.get("imds_tokens_required_by_default")),
                        rules=rules, suppressions=tuple(sups), source=source)


def load_config(path: str | Path) -> PolicyConfig:
    text = read_text_file(path, "policy config", allow_empty=True)
    data, positions = load_with_positions(text, str(path), "policy config")
    return parse_config(data, str(path), positions)


def merge_rule_config(base: PolicyConfig, rule_id: str, settings: Mapping[str, Any]) -> PolicyConfig:
    """``base`` with one rule's settings (the CrossGuard pack's per-policy config) laid over it."""
    r = RULES[rule_id]
    own = {k: _check_param(r, k, v, "pack config", f"{rule_id}.{k}") for k, v in settings.items()
           if k != "suppressions"}
    rules = {**base.rules, rule_id: {**(base.rules.get(rule_id) or {}), **own}}
    sups = list(base.suppressions)
    for i, item in enumerate(settings.get("suppressions") or []):
        s = _suppression({"rule": rule_id, **item} if isinstance(item, dict) else item, "pack config",
                         f"{rule_id}.suppressions[{i}]", Location("pack config", address=f"{rule_id}.suppressions"))
        sups.append(s)
    return PolicyConfig(base.unknown, base.ebs_encryption_by_default, base.imds_tokens_required_by_default, rules,
                        tuple(sups), base.source)
