"""policies/RULES.md is generated from the rules: it must match what the generator prints today."""

from __future__ import annotations

from pathlib import Path

from metalfleet.policies.docs import render_rules_md
from metalfleet.policies.rules import RULES

RULES_MD = Path(__file__).resolve().parents[2] / "policies" / "RULES.md"


def test_rules_md_is_up_to_date() -> None:
    assert RULES_MD.read_text(encoding="utf-8") == render_rules_md(), (
        "policies/RULES.md is stale: run `.venv/bin/python -m metalfleet.policies.docs > policies/RULES.md`")


def test_every_rule_is_documented_with_its_mapping() -> None:
    text = RULES_MD.read_text(encoding="utf-8")
    for rule in RULES.values():
        assert f"### {rule.id}" in text
        assert rule.frameworks.get("iso27001"), f"{rule.id} maps to no ISO 27001 control"
        assert rule.frameworks.get("soc2"), f"{rule.id} maps to no SOC 2 criterion"
