"""Generate policies/RULES.md from the rules and the defaults table: ``python -m metalfleet.policies.docs``.

tests/policies/test_docs.py fails when the checked-in RULES.md differs from what this prints.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import date
from typing import Any

from .adapters.common import Assumptions
from .adapters.native import READERS, native_resources
from .adapters.terraform import LINKS
from .config import parse_config
from .defaults import DEFAULTS
from .engine import evaluate
from .model import UNKNOWN, Location
from .rules import FRAMEWORKS, ordered

__all__ = ["coverage", "render_rules_md"]

_KINDS = {"compute": "compute nodes", "volume": "volumes", "security_rule": "security rules", "address": "public "
          "addresses", "storage": "buckets / file systems", "bmc": "BMC endpoints", "reservation": "capacity "
          "reservations"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


_CLOUDS = {"aws": "AWS", "alicloud": "Alibaba Cloud", "huaweicloud": "Huawei Cloud"}


def _cloud(tf_type: str) -> str:
    return _CLOUDS[tf_type.split("_", 1)[0]]


class _Block(dict[str, Any]):
    """A probe of a resource's attributes: every block present (one, a probe again), every attribute ``value`` but
    ``unknown``, unknown at plan time; the names asked for are recorded in ``asked``."""

    def __init__(self, value: Any, unknown: str | None = None, asked: set[str] | None = None) -> None:
        super().__init__()
        self.value, self.unknown = value, unknown
        self.asked: set[str] = set() if asked is None else asked

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Any:
        self.asked.add(key)
        return UNKNOWN if key == self.unknown else [_Block(self.value, self.unknown, self.asked)]

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return UNKNOWN if key == self.unknown else self.value


def coverage() -> Mapping[str, Mapping[str, tuple[str, ...]]]:
    """Rule id -> cloud -> the resource types it judges, from the adapters' own registry (:data:`.native.READERS`):
    a type counts for a rule when its reader's views give the rule something to judge on some probe of its
    attributes: all absent, all unknown at plan time, every block present with its attributes all absent or all
    unknown, or all true but one unknown (each attribute the reader asks for in turn, so an encrypted volume's key
    is judged too), with and without EBS encryption by default. Derived from what dispatch runs, so the table cannot
    drift from it."""
    config = parse_config({"rules": {"MF-ADV-002": {"planned_run_end": "2100-01-01"}}})
    found: dict[str, dict[str, set[str]]] = {}
    for tf_type, reader in READERS.items():
        asked: set[str] = set()
        probes: list[dict[str, Any]] = [{}, dict.fromkeys(reader.fields, UNKNOWN), _Block(None),
                                        _Block(UNKNOWN), _Block(True, None, asked)]
        views = []
        for i in range(2):  # the second round: each attribute the first one asked for, unknown in turn
            for props in probes:
                for assume in (Assumptions(), Assumptions(ebs_encryption_by_default=True)):
                    views += native_resources(tf_type, props, tf_type, Location(), "terraform", assume, None, 2)
            probes = [_Block(True, key) for key in sorted(asked)] if i == 0 else []
        for f in evaluate(views, config, today=date(2000, 1, 1)).findings:
            found.setdefault(f.rule.id, {}).setdefault(_cloud(tf_type), set()).add(tf_type)
    return {rule: {cloud: tuple(sorted(types)) for cloud, types in clouds.items()} for rule, clouds in found.items()}


def _driver_fact_rows() -> list[str]:
    """What each registered provider's driver guarantees for the rules (its record's ``policy_facts``)."""
    from metalfleet.providers.registry import provider_records

    rows = []
    for record in provider_records():
        facts = record.policy_facts
        for key, g in (("http_tokens", facts and facts.metadata_tokens), ("volume_tags", facts and facts.volume_tags)):
            if g:
                rows.append(f"| `metalfleet.{record.name}.{key}` | {_cell(g.meaning)} | {_cell(g.source)} |")
    return rows


def _coverage_md() -> list[str]:
    table = coverage()
    out = [
        "## Coverage: the resource types each rule reads",
        "",
        "Native resources of the aws, alicloud and huaweicloud providers, in Terraform's type names (Pulumi's "
        "bridged providers map to the same readers). Generated from the adapters' registry of readers: a type is "
        "listed for a rule when its views give the rule something to judge; — where no type of that cloud does "
        "(a Huawei Cloud disk is encrypted only with a KMS key it names, so MF-ENC-002 has nothing to fail there).",
        "",
        "| Rule | " + " | ".join(_CLOUDS.values()) + " |",
        "|---|" + "---|" * len(_CLOUDS),
    ]
    for r in ordered():
        if r.id in table:
            cells = [", ".join(f"`{t}`" for t in table[r.id].get(c, ())) or "—" for c in _CLOUDS.values()]
            out.append(f"| [{r.id}](#{r.id.lower()}) | " + " | ".join(cells) + " |")
    out += [
        "",
        "Read from a Terraform plan for the links they make (their references in the plan's configuration):",
        "",
        "| Cloud | Resource type | What it settles |",
        "|---|---|---|",
    ]
    for tf_type in sorted(LINKS, key=lambda t: (list(_CLOUDS).index(t.split("_", 1)[0]), t)):
        out.append(f"| {_cloud(tf_type)} | `{tf_type}` | {_cell(LINKS[tf_type])} |")
    return [*out, ""]


def render_rules_md() -> str:
    rules = ordered()
    out = [
        "<!-- Generated by `python -m metalfleet.policies.docs > policies/RULES.md`; do not edit by hand. -->",
        "# metalfleet policy rules",
        "",
        "One rule set, three front ends: `metalfleet policy check` (specs, pool inventories, `pulumi preview "
        "--json`, `pulumi stack export`, Terraform plan JSON), the CrossGuard pack `policies/pack` (`pulumi preview "
        "--policy-pack policies/pack`) and the policy lines of `metalfleet validate` / `up` / `preview`.",
        "",
        "A value the input cannot show (unknown at plan time, a driver that does not say) is **unknown** and "
        "fails a mandatory rule unless the rule's `unknown` setting says `advisory` or `ignore`. An absent "
        "attribute takes the provider's documented default (table below).",
        "",
        "| Rule | Title | Severity | Default | Checks | " + " | ".join(FRAMEWORKS.values()) + " |",
        "|---|---|---|---|---|" + "---|" * len(FRAMEWORKS),
    ]
    for r in rules:
        kinds = ", ".join(_KINDS[k] for k in r.kinds) or "suppressions"
        maps = [_cell("; ".join(r.frameworks.get(k, ())) or "—") for k in FRAMEWORKS]
        out.append(f"| [{r.id}](#{r.id.lower()}) | {_cell(r.title)} | {r.severity} | {r.enforcement} | {kinds} | "
                   + " | ".join(maps) + " |")
    out += ["", "## Rules", ""]
    for r in rules:
        out += [f"### {r.id}", "", f"**{r.title}** (`{r.name}`) — severity {r.severity}, {r.enforcement} by default.",
                "", f"*Why:* {r.rationale}", "", f"*Fix:* {r.remediation}", ""]
        settings = [("enforcement", "mandatory, advisory or disabled", r.enforcement),
                    ("unknown", "fail, advisory or ignore", "fail (or the config's top-level unknown)")]
        settings += [(k, p.description, repr(p.default)) for k, p in r.params.items()]
        out += ["| Setting | Meaning | Default |", "|---|---|---|"]
        out += [f"| `{k}` | {_cell(d)} | `{_cell(str(v))}` |" for k, d, v in settings]
        out.append("")
    out += _coverage_md()
    out += [
        "## Defaults: what an absent attribute means",
        "",
        "| Attribute | Absent means | Source |",
        "|---|---|---|",
    ]
    out += [f"| `{d.key}` | {_cell(d.meaning)} | {_cell(d.source)} |" for d in DEFAULTS.values()]
    out += _driver_fact_rows()
    out += [
        "",
        "## Settings and suppressions",
        "",
        "`metalfleet policy check --config policy.yaml` (and the pack, through `METALFLEET_POLICY_CONFIG`):",
        "",
        "```yaml",
        "unknown: fail                 # fail | advisory | ignore",
        "aws:",
        "  ebs_encryption_by_default: false",
        "  imds_tokens_required_by_default: false",
        "rules:",
        "  MF-ENC-002: mandatory       # an enforcement level alone",
        "  MF-TAG-001:",
        "    required: {owner: \".+\", cost-center: [\"4711\", \"research\"]}",
        "suppressions:",
        "  - rule: MF-NET-001",
        "    resource: \"aws_instance.bastion*\"",
        "    reason: public bastion of the lab VPC",
        "    expires: 2026-03-31",
        "```",
        "",
        "In a cluster spec, a pool inventory or a .tf file beside a plan, a comment suppresses the block below it "
        "(or, in a .tf file, the resource block it is in):",
        "",
        "```yaml",
        "network:",
        "  # metalfleet:suppress MF-NET-001 expires=2026-03-31 reason: lab cluster reached over its public IP",
        "  public_ip: true",
        "```",
        "",
        "In the CrossGuard pack, `pulumi preview --policy-pack-config config.json` sets each policy's "
        "`enforcementLevel`, its settings, `unknown` and `suppressions` (`[{resource, reason, expires}]`). A "
        "suppression without a reason suppresses nothing and is an MF-SUP-001 finding; every report lists the "
        "suppressions with their state (applied, unused, expired, invalid).",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_rules_md())
