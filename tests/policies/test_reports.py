"""`metalfleet policy check` as a CI job runs it: every planted violation across the three clouds, a spec and a
pool inventory, in every format, with the exit codes a pipeline reads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from metalfleet.policies.report import MARKER

from .cases import TAGS, write_plan
from .test_rules_native import ALI, HW_BMS_PROPS, P5, _with

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = json.loads((Path(__file__).parent / "schema" / "sarif-schema-2.1.0.json").read_text())
CLI = [sys.executable, "-m", "metalfleet.stacks.cli", "policy", "check"]

#: (resource, rule) pairs planted in the three plans below, the spec fixture and the inventory fixture.
PLANTED = {
    ("aws_instance.gpu", "MF-NET-001"), ("aws_instance.gpu root volume", "MF-ENC-001"),
    ("aws_instance.gpu", "MF-NET-005"), ("aws_instance.gpu", "MF-TAG-001"),
    ("aws_security_group.ssh ingress[0]", "MF-NET-002"),
    ("alicloud_instance.gpu", "MF-NET-001"), ("alicloud_instance.gpu system disk", "MF-ENC-001"),
    ("alicloud_instance.gpu", "MF-NET-005"), ("alicloud_security_group_rule.ssh", "MF-NET-002"),
    ("huaweicloud_bms_instance.gpu", "MF-NET-001"), ("huaweicloud_bms_instance.gpu system disk", "MF-ENC-001"),
    ("huaweicloud_bms_instance.gpu", "MF-NET-005"), ("huaweicloud_networking_secgroup_rule.ssh", "MF-NET-002"),
    ("bad-p5", "MF-NET-001"), ("bad-p5 network.ssh_ingress_cidrs[0]", "MF-NET-002"),
    ("bad-p5 root volume", "MF-ENC-001"), ("bad-p5", "MF-TAG-001"), ("bad-p5", "MF-TRN-002"),
    ("bad-p5 storage.cold", "MF-ENC-003"),
    ("gpu-02 bmc", "MF-NET-004"), ("gpu-02 bmc", "MF-TRN-001"), ("gpu-03 bmc", "MF-TRN-001"),
    ("gpu-03", "MF-NET-001"), ("gpu-03", "MF-TRN-002"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("inputs")
    aws = write_plan(d / "aws-plan.json", [
        ("aws_instance", "gpu", _with(P5, associatePublicIpAddress=True, metadataOptions=None,
                                      rootBlockDevice={"volumeSize": 500}, tags={"team": "ml"})),
        ("aws_security_group", "ssh", {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                                    "cidrBlocks": ["0.0.0.0/0"]}]}),
    ])
    ali = write_plan(d / "alicloud-plan.json", [
        ("alicloud_instance", "gpu", _with(ALI, internetMaxBandwidthOut=100, systemDiskEncrypted=None,
                                           systemDiskKmsKeyId=None, httpTokens=None)),
        ("alicloud_security_group_rule", "ssh", {"type": "ingress", "ipProtocol": "tcp", "portRange": "22/22",
                                                 "cidrIp": "0.0.0.0/0", "securityGroupId": "sg-1"}),
    ])
    hw = write_plan(d / "huawei-plan.json", [
        ("huaweicloud_bms_instance", "gpu", _with(HW_BMS_PROPS, eipId="eip-1", systemDiskType="SSD")),
        ("huaweicloud_networking_secgroup_rule", "ssh", {"securityGroupId": "sg-1", "direction": "ingress",
                                                         "ethertype": "IPv4", "protocol": "tcp", "ports": "22",
                                                         "remoteIpPrefix": "0.0.0.0/0"}),
    ])
    return [aws, ali, hw, FIXTURES / "bad-cluster.yaml", FIXTURES / "pool.yaml"]


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120, check=False, cwd=cwd)


def test_json_names_every_planted_violation(inputs: list[Path]) -> None:
    out = run(*inputs, "--format", "json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    found = {(f["resource"], f["rule"]) for f in doc["findings"]}
    assert found >= PLANTED, sorted(PLANTED - found)
    assert {i["kind"] for i in doc["inputs"]} == {"terraform-plan", "cluster-spec", "pool-inventory"}
    assert doc["result"] == "fail" and doc["summary"]["mandatory"] >= len(PLANTED)


def test_sarif_is_valid_2_1_0_with_severities_and_locations(inputs: list[Path], tmp_path: Path) -> None:
    out_file = tmp_path / "policy.sarif"
    res = run(*inputs, "--format", "sarif", "--output", out_file)
    assert res.returncode == 1 and "FAIL:" in res.stderr
    sarif = json.loads(out_file.read_text())
    jsonschema.validate(sarif, SCHEMA)
    run0 = sarif["runs"][0]
    rules = {r["id"]: r for r in run0["tool"]["driver"]["rules"]}
    assert rules["MF-NET-002"]["properties"]["security-severity"] == "9.5"
    assert rules["MF-ENC-001"]["properties"]["security-severity"] == "8.0"
    assert any(t.startswith("CIS AWS Foundations Benchmark v3.0.0: 5.2") for t in rules["MF-NET-002"]["properties"]
               ["tags"])
    results = run0["results"]
    assert {r["level"] for r in results} == {"error", "warning"}
    for r in results:
        assert run0["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    spec_hits = [r for r in results if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                 .endswith("bad-cluster.yaml")]
    public = next(r for r in spec_hits if r["ruleId"] == "MF-NET-001")
    assert public["locations"][0]["physicalLocation"]["region"] == {"startLine": 11, "startColumn": 3}
    plan_hit = next(r for r in results if r["properties"]["resource"] == "aws_instance.gpu")
    assert plan_hit["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "aws_instance.gpu"


def test_junit_parses_back(inputs: list[Path]) -> None:
    out = run(*inputs, "--format", "junit")
    root = ET.fromstring(out.stdout)
    assert root.tag == "testsuites"
    failures = [(case.get("classname"), case.find("failure")) for case in root.iter("testcase")]
    failed = {c for c, f in failures if f is not None}
    assert {"MF-NET-001", "MF-NET-002", "MF-ENC-001", "MF-TRN-001", "MF-NET-004"} <= failed
    assert int(root.get("failures") or 0) == sum(1 for _, f in failures if f is not None) >= len(PLANTED)
    passing = {c.get("classname") for c in root.iter("testcase") if c.get("name") == "all resources comply"}
    assert "MF-ADV-002" in passing


ANNOTATION = re.compile(r"^::(error|warning|notice)(?: ((?:[a-z]+=[^,:]*)(?:,[a-z]+=[^,:]*)*))?::(.*)$")


def test_github_annotations_are_workflow_commands(inputs: list[Path], tmp_path: Path) -> None:
    out = run(*[p.relative_to(Path.cwd()) if p.is_relative_to(Path.cwd()) else p for p in inputs], "--format",
              "github")
    lines = out.stdout.splitlines()
    assert lines and all(ANNOTATION.match(line) for line in lines), [x for x in lines if not ANNOTATION.match(x)]
    spec_line = next(x for x in lines if "bad-cluster.yaml" in x and "MF-NET-001" in x)
    assert spec_line.startswith("::error file=tests/policies/fixtures/bad-cluster.yaml,line=11,col=3,title=MF-NET-001 ")
    assert "%0A" not in spec_line
    assert lines[-1].startswith("::notice title=metalfleet policy check::FAIL")


def test_markdown_is_a_pr_comment(inputs: list[Path]) -> None:
    md = run(*inputs, "--format", "markdown").stdout
    assert md.startswith(MARKER + "\n## ❌ metalfleet policy check")
    assert "| 🔴 mandatory | `MF-NET-002` No SSH ingress from 0.0.0.0/0 or ::/0 | critical |" in md
    assert "<summary>How to fix</summary>" in md


def test_exit_codes(tmp_path: Path) -> None:
    clean = tmp_path / "clean.json"
    write_plan(clean, [("aws_instance", "gpu", P5)])
    ok = run(clean)
    assert ok.returncode == 0 and ok.stdout.rstrip().splitlines()[-1].startswith("PASS: 0 mandatory"), ok.stdout
    assert run(FIXTURES / "bad-cluster.yaml").returncode == 1
    bad_inputs = {
        "missing.json": None,
        "binary.json": b"{\x00\x01",
        "broken.json": b'{"format_version": "1.2", "resource_changes": [',
        "other.json": b'{"hello": 1}',
        "list.yaml": b"- a\n- b\n",
        "latin1.yaml": b"name: caf\xe9\n",
        "hosts.yaml": b"hosts: [{name: n0, address: 10.0.0.1}]\n",
    }
    for name, data in bad_inputs.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        res = run(path)
        assert res.returncode == 2, (name, res.stdout, res.stderr)
        err = res.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0], (name, res.stderr)
        assert "Traceback" not in res.stderr
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("rules:\n  MF-NET-001: {allow: maybe}\n")
    res = run(clean, "--config", cfg)
    assert res.returncode == 2 and "rules.MF-NET-001.allow" in res.stderr


def test_tags_in_a_config_change_the_required_set(tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "p.json", [("aws_instance", "gpu", _with(P5, tags={**TAGS, "project": "llm"}))])
    cfg = tmp_path / "policy.yaml"
    cfg.write_text("rules:\n  MF-TAG-001:\n    required: {project: [llm, vision], owner: '.+@example\\.com'}\n")
    assert run(plan, "--config", cfg).returncode == 1, "volumes lack project"
    cfg.write_text("rules:\n  MF-TAG-001:\n    required: {owner: '.+@example\\.com'}\n")
    assert run(plan, "--config", cfg).returncode == 0


def test_validate_shows_policy_findings(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "metalfleet.stacks.cli", "validate"]
    bad = subprocess.run([*cmd, str(FIXTURES / "bad-cluster.yaml")], capture_output=True, text=True, check=False)
    assert bad.returncode == 1
    assert "valid spec" in bad.stdout and "policy: MANDATORY MF-NET-001" in bad.stdout
    skipped = subprocess.run([*cmd, str(FIXTURES / "bad-cluster.yaml"), "--no-policy"], capture_output=True,
                             text=True, check=False)
    assert skipped.returncode == 0 and "policy:" not in skipped.stdout
    root = Path(__file__).resolve().parents[2]
    good = subprocess.run([*cmd, str(root / "examples" / "aws-p5" / "cluster.yaml")], capture_output=True,
                          text=True, check=False)
    assert good.returncode == 0 and "policy: PASS" in good.stdout, good.stdout


def test_large_json_report_is_byte_identical_to_json_dumps(inputs: list[Path]) -> None:
    """A report of 2,000 findings or more is written without building its dicts (report._json_compact); it must
    read exactly as json.dumps of the same document: suppressed findings, YAML lines and columns, absent
    locations, unknown values and non-ASCII text included."""
    from dataclasses import replace as dc_replace

    from msgspec.structs import replace

    from metalfleet.policies import parse_config
    from metalfleet.policies.check import check_paths
    from metalfleet.policies.report import _json_compact, _json_doc, render_json

    config = parse_config({"suppressions": [
        {"rule": "MF-NET-002", "resource": "aws_security_group.ssh*", "reason": "lab network — behind the VPN"},
        {"rule": "MF-ENC-002", "reason": "unused on purpose"}]})
    report = check_paths(inputs, config)
    assert report.suppressed and report.findings
    assert any(f.location.line for f in report.findings) and any(f.location.line is None for f in report.findings)
    odd = replace(report.findings[0], message="Käse \"quoted\" \\ tab\t 🚀", resource_name="gpü-ß", unknown=True,
                  level="advisory")
    report.findings.append(odd)
    assert _json_compact(report) == json.dumps(_json_doc(report)) + "\n"
    big = dc_replace(report, findings=report.findings * (2000 // len(report.findings) + 1))
    text = render_json(big)
    assert text == json.dumps(_json_doc(big)) + "\n"
    assert json.loads(text)["findings"][-1]["message"] == odd.message
