"""Suppressions: in the input (comments in specs, inventories, .tf files) or in a config file; a reason is required,
an expiry ends them, and every report lists them."""

from __future__ import annotations

import json
import os
from datetime import date
from pathlib import Path

import pytest

from metalfleet.policies.check import check_paths
from metalfleet.policies.config import load_config, parse_config
from metalfleet.providers.errors import InvalidSpecError

from .cases import run_stack, write_plan
from .test_rules_native import AWS_INSTANCE, P5, _with

FIXTURES = Path(__file__).parent / "fixtures"
TODAY = date(2026, 1, 15)


def _spec_with(tmp_path: Path, comment: str) -> Path:
    text = (FIXTURES / "bad-cluster.yaml").read_text()
    text = text.replace("  public_ip: true", f"  {comment}\n  public_ip: true")
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def test_a_comment_suppresses_the_block_below_it(tmp_path: Path) -> None:
    path = _spec_with(tmp_path, "# metalfleet:suppress MF-NET-001 expires=2026-06-30 reason: lab cluster behind a VPN")
    report = check_paths([path], today=TODAY)
    assert "MF-NET-001" not in {f.rule.id for f in report.findings}
    (sup,) = [f for f in report.suppressed if f.rule.id == "MF-NET-001"]
    assert sup.suppressed_by is not None and sup.suppressed_by.reason == "lab cluster behind a VPN"
    (status,) = report.suppressions
    assert status.status == "applied" and status.count == 1
    assert "MF-NET-002" in {f.rule.id for f in report.findings}, "other rules on the next lines still apply"


def test_an_expired_suppression_no_longer_applies(tmp_path: Path) -> None:
    path = _spec_with(tmp_path, "# metalfleet:suppress MF-NET-001 expires=2025-12-31 reason: temporary")
    report = check_paths([path], today=TODAY)
    assert "MF-NET-001" in {f.rule.id for f in report.findings}
    assert [s.status for s in report.suppressions] == ["expired"]


def test_a_suppression_without_a_reason_is_a_finding(tmp_path: Path) -> None:
    path = _spec_with(tmp_path, "# metalfleet:suppress MF-NET-001")
    report = check_paths([path], today=TODAY)
    ids = [f.rule.id for f in report.findings]
    assert "MF-NET-001" in ids and "MF-SUP-001" in ids
    (sup,) = [f for f in report.findings if f.rule.id == "MF-SUP-001"]
    assert sup.blocking and sup.location.line == 11 and sup.location.file == str(path)
    assert [s.status for s in report.suppressions] == ["invalid"]


def test_config_suppressions_by_resource_glob(tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "plan.json", [("aws_instance", "bastion", _with(P5, associatePublicIpAddress=True)),
                                               ("aws_instance", "gpu", _with(P5, associatePublicIpAddress=True))])
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("suppressions:\n  - rule: MF-NET-*\n    resource: aws_instance.bastion*\n"
                   "    reason: the lab's jump host\n  - rule: MF-ENC-001\n    reason: never used\n")
    report = check_paths([plan], load_config(cfg), today=TODAY)
    assert [f.resource_name for f in report.findings if f.rule.id == "MF-NET-001"] == ["aws_instance.gpu"]
    assert [f.resource_name for f in report.suppressed] == ["aws_instance.bastion"]
    assert [(s.status, s.suppression.origin.line) for s in report.suppressions] == [("applied", 2), ("unused", 5)]


def test_suppression_comments_in_tf_files_beside_the_plan(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(
        'resource "aws_instance" "bastion" {\n'
        '  # metalfleet:suppress MF-NET-001 reason: public jump host, SSH keys only\n'
        '  instance_type = "p5.48xlarge"\n'
        '  associate_public_ip_address = true\n'
        '}\n\n'
        'resource "aws_instance" "gpu" {\n'
        '  instance_type = "p5.48xlarge"\n'
        '  associate_public_ip_address = true\n'
        '}\n')
    plan = write_plan(tmp_path / "plan.json", [("aws_instance", "bastion", _with(P5, associatePublicIpAddress=True)),
                                               ("aws_instance", "gpu", _with(P5, associatePublicIpAddress=True))])
    report = check_paths([plan], today=TODAY)
    (left,) = [f for f in report.findings if f.rule.id == "MF-NET-001"]
    assert left.resource_name == "aws_instance.gpu"
    assert (left.location.file, left.location.line) == (str(tmp_path / "main.tf"), 7), "located at its block"
    assert [f.resource_name for f in report.suppressed] == ["aws_instance.bastion"]


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    for data, field in [({"rules": {"MF-XYZ-9": {}}}, "rules.MF-XYZ-9"),
                        ({"rules": {"MF-NET-001": {"allow": "yes"}}}, "rules.MF-NET-001.allow"),
                        ({"suppressions": [{"reason": "x"}]}, "suppressions[0].rule"),
                        ({"suppressions": [{"rule": "MF-NET-001", "reason": "x", "expires": "soon"}]},
                         "suppressions[0].expires"),
                        ({"unknown": "maybe"}, "unknown"), ({"nope": 1}, "nope")]:
        with pytest.raises(InvalidSpecError) as err:
            parse_config(data, "policy.yaml")
        assert err.value.field == field and f"policy.yaml: {field}:" in str(err.value)


def test_the_pack_reports_suppressions_through_its_stack_policies(tmp_path: Path) -> None:
    public = _with(P5, associatePublicIpAddress=True)
    resources = [(AWS_INSTANCE, public, "bastion")]
    cfg = tmp_path / "policy.yaml"
    cfg.write_text(json.dumps({"suppressions": [{"rule": "MF-NET-001", "resource": "bastion", "reason": "jump host"},
                                                {"rule": "MF-ENC-001", "resource": "x"}]}))
    os.environ["METALFLEET_POLICY_CONFIG"] = str(cfg)
    try:
        listed = run_stack("MF-SUP-002", resources)
        invalid = run_stack("MF-SUP-001", resources)
    finally:
        del os.environ["METALFLEET_POLICY_CONFIG"]
    assert any("MF-NET-001 suppressed on bastion" in m and "jump host" in m for m in listed), listed
    (message,) = invalid
    assert message.startswith("MF-SUP-001: suppression of MF-ENC-001 on x has no reason, so it suppresses nothing "
                              f"(declared at {cfg}:1"), message
