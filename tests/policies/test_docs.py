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


def test_the_ci_example_runs_both_front_ends_and_its_config_loads() -> None:
    import yaml

    from metalfleet.policies.config import load_config

    root = RULES_MD.parents[1]
    workflow = (root / "examples" / "ci" / "policy-check.yml").read_text()
    steps = yaml.safe_load(workflow)["jobs"]["policy"]["steps"]
    uses = {s.get("uses", "").split("@")[0] for s in steps}
    assert {"github/codeql-action/upload-sarif", "actions/github-script"} <= uses
    assert '--policy-pack "$GITHUB_WORKSPACE/policies/pack"' in workflow
    for fmt in ("sarif", "markdown", "github"):
        assert f"--format {fmt}" in workflow
    config = load_config(root / "examples" / "ci" / "policy.yaml")
    assert config.rules["MF-ENC-002"]["enforcement"] == "advisory"


def test_every_type_the_adapters_read_is_in_the_coverage_table() -> None:
    """The coverage table is derived from the adapters' registries: every type with a reader gives some rule
    something to judge, and every type read for its links is listed with what it settles."""
    from metalfleet.policies.adapters.native import READERS
    from metalfleet.policies.adapters.terraform import LINKS
    from metalfleet.policies.docs import coverage

    listed = {t for clouds in coverage().values() for types in clouds.values() for t in types}
    assert set(READERS) - listed == set()
    text = RULES_MD.read_text(encoding="utf-8")
    assert [t for t in LINKS if f"| `{t}` |" not in text] == []
