"""Inputs for the policy tests, built the way each tool writes them.

- Pulumi: the CrossGuard SDK's own ``ResourceValidationArgs`` around inputs wrapped by its
  ``unknown_checking_proxy`` (what the engine hands a pack); rules run through the pack's policies.
- Terraform: plan JSON in the ``terraform show -json`` layout (format 1.2: ``resource_changes`` with ``after`` and
  ``after_unknown``, ``configuration`` with expressions and references); blocks are lists of one object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from metalfleet.policies.crossguard import build_policies

#: Pulumi's sentinel for an input unknown during preview.
PULUMI_UNKNOWN = UNKNOWN_STRING_VALUE
_MAPS = {"tags", "volumeTags", "tagsAll", "labels", "metadata"}

#: A compliant tag set (MF-TAG-001's default: owner and cost-center).
TAGS = {"owner": "ml-platform@example.com", "cost-center": "4711"}


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def urn(type_name: str, name: str) -> str:
    return f"urn:pulumi:test::proj::{type_name}::{name}"


def pulumi_args(type_name: str, props: Mapping[str, Any], name: str = "res",
                config: Mapping[str, Any] | None = None) -> ResourceValidationArgs:
    return ResourceValidationArgs(type_name, unknown_checking_proxy(dict(props)), urn(type_name, name), name, _opts(),
                                  None, dict(config) if config else None)


_POLICIES: dict[str, Any] = {}


def policy(rule_id: str) -> Any:
    if not _POLICIES:
        _POLICIES.update({p.name: p for p in build_policies()})  # as the pack does: config from the environment
    return _POLICIES[rule_id]


def run_pack(rule_id: str, type_name: str, props: Mapping[str, Any], name: str = "res",
             config: Mapping[str, Any] | None = None) -> list[str]:
    """Violations policy ``rule_id`` of the pack reports for one resource (through its validate seam)."""
    reported: list[str] = []

    def report(message: str, urn_: str | None = None) -> None:
        assert urn_ == urn(type_name, name)
        reported.append(message)

    policy(rule_id).validate(pulumi_args(type_name, props, name, config), report)
    return reported


def run_stack(rule_id: str, resources: list[tuple[str, Mapping[str, Any], str]],
              config: Mapping[str, Any] | None = None) -> list[str]:
    reported: list[str] = []
    items = [PolicyResource(t, unknown_checking_proxy(dict(p)), urn(t, n), n, _opts(), None, None, [], {})
             for t, p, n in resources]
    policy(rule_id).validate(StackValidationArgs(items, dict(config) if config else None),
                             lambda m, u=None: reported.append(m))
    return reported


# ------------------------------------------------------------------------------------------ Terraform

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
#: Pulumi's plural names of Terraform's repeated blocks.
#: Where pulumi-aws names a block in the plural and Terraform in the singular (aws_instance only: a launch template's
#: blocks are plural in both).
_TF_NAMES = {"aws_instance": {"ebs_block_devices": "ebs_block_device", "network_interfaces": "network_interface"}}


def to_tf(value: Any, in_map: bool = False, tf_type: str = "") -> Any:
    """Pulumi-style inputs (camelCase, nested objects) as Terraform plan values (snake_case, blocks as lists)."""
    if isinstance(value, dict):
        if in_map:
            return dict(value)
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _CAMEL.sub(r"_\1", k).lower()
            key = _TF_NAMES.get(tf_type, {}).get(key, key)
            is_map = k in _MAPS
            conv = to_tf(v, is_map)
            if isinstance(v, dict) and not is_map:
                conv = [conv]
            out[key] = conv
        return out
    if isinstance(value, list):
        return [to_tf(v) for v in value]
    return value


def _split_unknown(value: Any) -> tuple[Any, Any]:
    """(after, after_unknown) from values where PULUMI_UNKNOWN marks what is known only after apply."""
    if value == PULUMI_UNKNOWN:
        return None, True
    if isinstance(value, dict):
        after, unknown = {}, {}
        for k, v in value.items():
            a, u = _split_unknown(v)
            after[k] = a
            if u:
                unknown[k] = u
        return after, unknown
    if isinstance(value, list):
        pairs = [_split_unknown(v) for v in value]
        unknowns = [u for _, u in pairs]
        return [a for a, _ in pairs], unknowns if any(unknowns) else []
    return value, False


def tf_plan(resources: list[tuple[str, str, Mapping[str, Any]]],
            references: Mapping[str, Mapping[str, list[str]]] | None = None) -> dict[str, Any]:
    """A plan creating ``resources`` ((type, name, Pulumi-style inputs)); ``references``: address -> attribute ->
    referenced addresses, as ``configuration`` records them for expressions not known at plan time."""
    changes, planned, config = [], [], []
    refs = references or {}
    for tf_type, name, props in resources:
        base = name.split("[")[0]
        index = int(name.split("[")[1].rstrip("]")) if "[" in name else None
        after, unknown = _split_unknown(to_tf(dict(props), tf_type=tf_type))
        address = f"{tf_type}.{name}"
        common = {"address": address, "mode": "managed", "type": tf_type, "name": base,
                  "provider_name": f"registry.terraform.io/hashicorp/{tf_type.split('_')[0]}"}
        if index is not None:
            common["index"] = index
        planned.append({**common, "schema_version": 1, "values": after, "sensitive_values": {}})
        changes.append({**common, "change": {"actions": ["create"], "before": None, "after": after,
                                             "after_unknown": unknown or {}, "before_sensitive": False,
                                             "after_sensitive": {}}})
        cfg_address = f"{tf_type}.{base}"
        if not any(c["address"] == cfg_address for c in config):
            exprs = {k: {"references": v} for k, v in refs.get(cfg_address, {}).items()}
            config.append({"address": cfg_address, "mode": "managed", "type": tf_type, "name": base,
                           "provider_config_key": tf_type.split("_")[0], "expressions": exprs,
                           "schema_version": 1})
    return {"format_version": "1.2", "terraform_version": "1.9.5",
            "planned_values": {"root_module": {"resources": planned}}, "resource_changes": changes,
            "configuration": {"root_module": {"resources": config}}, "timestamp": "2026-01-01T00:00:00Z",
            "applyable": True, "complete": True, "errored": False}


def write_plan(path: Path, resources: list[tuple[str, str, Mapping[str, Any]]],
               references: Mapping[str, Mapping[str, list[str]]] | None = None) -> Path:
    path.write_text(json.dumps(tf_plan(resources, references), indent=1))
    return path
