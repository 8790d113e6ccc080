"""``metalfleet policy check --baseline / --write-baseline``: a pull request fails only on the findings it adds,
in every report format, and a baseline that cannot be read is refused (exit 2), never a silent pass."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from metalfleet.policies.baseline import Entry, compare, dumps, entry_for, fingerprint
from metalfleet.policies.engine import Finding, Report
from metalfleet.policies.model import Location
from metalfleet.policies.report import MARKER
from metalfleet.policies.rules import RULES

from .cases import write_plan
from .test_reports import ANNOTATION, SCHEMA
from .test_rules_native import P5, _with

FIXTURES = Path(__file__).parent / "fixtures"
CLI = [sys.executable, "-m", "metalfleet.stacks.cli", "policy", "check"]
SPEC_FINDINGS = 7  # bad-cluster.yaml: 6 mandatory, 1 advisory


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120, check=False)


def _public_node_plan(path: Path, *, open_ssh: bool = False) -> Path:
    """A plan with a public GPU node (MF-NET-001 ...), and with ``open_ssh`` a world-open SSH group added."""
    resources: list[tuple[str, str, Mapping[str, Any]]] = [
        ("aws_instance", "gpu", _with(P5, associatePublicIpAddress=True))]
    if open_ssh:
        resources.append(("aws_security_group", "ssh", {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                                                     "cidrBlocks": ["0.0.0.0/0"]}]}))
    return write_plan(path, resources)


@pytest.fixture
def spec_baseline(tmp_path: Path) -> Path:
    base = tmp_path / "baseline.json"
    res = run(FIXTURES / "bad-cluster.yaml", "--write-baseline", base)
    assert res.returncode == 0, res.stderr  # recording accepts the findings: not a failure
    assert f"wrote {SPEC_FINDINGS} finding(s)" in res.stderr
    return base


def test_write_baseline_is_sorted_deterministic_and_reviewable(spec_baseline: Path, tmp_path: Path) -> None:
    doc = json.loads(spec_baseline.read_text())
    assert doc["metalfleet_policy_baseline"] == 1
    entries = doc["findings"]
    assert len(entries) == SPEC_FINDINGS
    keys = [(e["rule"], e["resource"], e["subject"], e["fingerprint"]) for e in entries]
    assert keys == sorted(keys)
    public = next(e for e in entries if e["rule"] == "MF-NET-001")
    assert public == {"fingerprint": public["fingerprint"], "rule": "MF-NET-001", "resource": "bad-p5",
                      "resource_type": "cluster spec", "subject": "network.public_ip",
                      "message": "bad-p5 gets a public address"}
    unknown = next(e for e in entries if e["rule"] == "MF-ENC-003")
    assert unknown["subject"] == "storage.cold?unknown"
    again = tmp_path / "again.json"
    assert run(FIXTURES / "bad-cluster.yaml", "--write-baseline", again).returncode == 0
    assert again.read_bytes() == spec_baseline.read_bytes()


def test_all_accepted_passes_and_every_format_says_so(spec_baseline: Path) -> None:
    spec = FIXTURES / "bad-cluster.yaml"
    assert run(spec).returncode == 1, "without the baseline the spec fails"
    res = run(spec, "--baseline", spec_baseline, "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["result"] == "pass"
    assert doc["summary"]["baseline"] == {"file": str(spec_baseline), "new_mandatory": 0, "new": 0,
                                          "accepted": SPEC_FINDINGS, "fixed": 0}
    assert doc["summary"]["mandatory"] == SPEC_FINDINGS - 1, "the totals still count every finding"
    assert {f["baseline"] for f in doc["findings"]} == {"accepted"} and doc["fixed"] == []
    text = run(spec, "--baseline", spec_baseline).stdout
    assert "MANDATORY (accepted) MF-NET-001" in text and text.splitlines()[-1].startswith("PASS: 0 new mandatory")
    github = run(spec, "--baseline", spec_baseline, "--format", "github").stdout.splitlines()
    assert all(ANNOTATION.match(x) for x in github)
    assert [x for x in github if x.startswith(("::error", "::warning"))] == [], "no annotation for accepted findings"
    junit = ET.fromstring(run(spec, "--baseline", spec_baseline, "--format", "junit").stdout)
    assert junit.get("failures") == "0" and int(junit.get("skipped") or 0) == SPEC_FINDINGS, "accepted: skipped"


def test_an_unrelated_edit_does_not_churn_the_baseline(spec_baseline: Path, tmp_path: Path) -> None:
    """Lines shift (a comment block above everything), the file moves: the fingerprints stay."""
    moved = tmp_path / "elsewhere" / "cluster.yaml"
    moved.parent.mkdir()
    moved.write_text("# reviewed in PR 42\n# owner: ml-platform\n\n" + (FIXTURES / "bad-cluster.yaml").read_text())
    res = run(moved, "--baseline", spec_baseline, "--format", "json")
    assert res.returncode == 0, res.stdout
    doc = json.loads(res.stdout)
    assert doc["summary"]["baseline"]["accepted"] == SPEC_FINDINGS and doc["summary"]["baseline"]["new"] == 0
    assert next(f for f in doc["findings"] if f["rule"] == "MF-NET-001")["location"]["line"] == 14


def test_a_reworded_message_in_the_baseline_still_matches(spec_baseline: Path) -> None:
    doc = json.loads(spec_baseline.read_text())
    for e in doc["findings"]:
        e["message"] = "worded by an older metalfleet"
    spec_baseline.write_text(json.dumps(doc))
    res = run(FIXTURES / "bad-cluster.yaml", "--baseline", spec_baseline, "--format", "json")
    assert res.returncode == 0 and json.loads(res.stdout)["summary"]["baseline"]["accepted"] == SPEC_FINDINGS


def test_a_pr_fails_only_on_what_it_adds_and_the_comment_shows_new_fixed_accepted(tmp_path: Path) -> None:
    base = tmp_path / "policy-baseline.json"
    before = _public_node_plan(tmp_path / "before.json")
    assert run(before, "--write-baseline", base).returncode == 0
    accepted = len(json.loads(base.read_text())["findings"])
    assert accepted >= 1

    after = _public_node_plan(tmp_path / "after.json", open_ssh=True)  # the PR adds a world-open SSH group
    res = run(after, "--baseline", base, "--format", "json")
    assert res.returncode == 1
    doc = json.loads(res.stdout)
    new = [(f["rule"], f["resource"]) for f in doc["findings"] if f["baseline"] == "new"]
    assert new == [("MF-NET-002", "aws_security_group.ssh ingress[0]")]
    assert sum(f["baseline"] == "accepted" for f in doc["findings"]) == accepted

    md = run(after, "--baseline", base, "--format", "markdown").stdout
    assert md.startswith(MARKER + "\n## ❌ metalfleet policy check")
    assert "### New (1)" in md and "### Fixed (0)" in md and f"Accepted by the baseline ({accepted})" in md
    new_section = md.split("### New (1)")[1].split("### Fixed")[0]
    assert "`MF-NET-002`" in new_section and "MF-NET-001" not in new_section

    github = run(after, "--baseline", base, "--format", "github").stdout.splitlines()
    errors = [x for x in github if x.startswith("::error")]
    assert len(errors) == 1 and "MF-NET-002" in errors[0]

    # the PR's next push makes the node private: its findings are fixed, only the SSH group is left (and new)
    fixed_plan = write_plan(tmp_path / "fixed.json", [
        ("aws_instance", "gpu", P5),
        ("aws_security_group", "ssh", {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                                    "cidrBlocks": ["0.0.0.0/0"]}]})])
    md = run(fixed_plan, "--baseline", base, "--format", "markdown").stdout
    assert "### New (1)" in md and f"### Fixed ({accepted})" in md and "Accepted by the baseline (0)" in md
    assert "| `MF-NET-001` | `aws_instance.gpu` |" in md


def test_sarif_baseline_state_is_valid_2_1_0(tmp_path: Path) -> None:
    base = tmp_path / "b.json"
    assert run(_public_node_plan(tmp_path / "before.json"), "--write-baseline", base).returncode == 0
    doc = json.loads(base.read_text())
    gone = {"fingerprint": "0" * 32, "rule": "MF-ENC-001", "resource": "aws_ebs_volume.old",
            "resource_type": "aws_ebs_volume", "subject": "", "message": "aws_ebs_volume.old is not encrypted"}
    doc["findings"].append(gone)
    base.write_text(json.dumps(doc))
    out = tmp_path / "policy.sarif"
    res = run(_public_node_plan(tmp_path / "after.json", open_ssh=True), "--baseline", base, "--format", "sarif",
              "--output", out)
    assert res.returncode == 1 and res.stderr.startswith("FAIL: 1 new mandatory")
    sarif = json.loads(out.read_text())
    jsonschema.validate(sarif, SCHEMA)
    results = sarif["runs"][0]["results"]
    states = {(r["ruleId"], r["properties"]["resource"]): r["baselineState"] for r in results}
    assert states[("MF-NET-002", "aws_security_group.ssh ingress[0]")] == "new"
    assert states[("MF-NET-001", "aws_instance.gpu")] == "unchanged"
    assert states[("MF-ENC-001", "aws_ebs_volume.old")] == "absent"
    assert {r["level"] for r in results if r["baselineState"] == "unchanged"} <= {"warning"}
    assert all(r["partialFingerprints"]["metalfleetBaseline/v1"] for r in results)


def _finding(message: str, line: int) -> Finding:
    return Finding(RULES["MF-TRN-001"], "gpu-02 bmc", "pool inventory host", "ipmi", "inventory", message,
                   Location("pool.yaml", line, 1, "gpu-02 bmc"), "mandatory")


def test_findings_sharing_a_fingerprint_are_counted_and_matched_by_message_first() -> None:
    a, b = _finding("uses IPMI 1.5 'lan'", 3), _finding("uses cipher suite 0", 4)
    assert fingerprint(a) == fingerprint(b), "same rule, resource and subject: one fingerprint"
    report = Report(findings=[a, b])
    cmp = compare(report, [entry_for(b)])
    assert (cmp.state(a), cmp.state(b)) == ("new", "accepted"), "the entry with b's message accepts b, not a"
    assert cmp.exit_code == 1 and cmp.counts == {"new": 1, "accepted": 1, "fixed": 0}
    both = compare(report, [entry_for(a), entry_for(b)])
    assert both.exit_code == 0 and both.fixed == []
    three = compare(report, [entry_for(a), entry_for(b), Entry("MF-TRN-001", "gpu-02 bmc", "", fingerprint(a),
                                                               message="an older third fault")])
    assert [e.message for e in three.fixed] == ["an older third fault"]
    assert dumps([a, b]) == dumps([b, a])


BAD_BASELINES = {
    "not-json.json": ("{", "is not valid JSON at line 1"),
    "list.json": ("[]", "the document is a list, not an object"),
    "other.json": ('{"findings": []}', "no 'metalfleet_policy_baseline' key"),
    "version.json": ('{"metalfleet_policy_baseline": 2, "findings": []}', "reads version 1"),
    "no-findings.json": ('{"metalfleet_policy_baseline": 1}', "'findings' is missing"),
    "findings-str.json": ('{"metalfleet_policy_baseline": 1, "findings": "x"}', "'findings' is a string"),
    "entry.json": ('{"metalfleet_policy_baseline": 1, "findings": [3]}', "findings[0] is a number"),
    "fingerprint.json": ('{"metalfleet_policy_baseline": 1, "findings": [{"rule": "MF-NET-001", '
                         '"fingerprint": "xyz"}]}', "findings[0].fingerprint is not 32"),
    "rule.json": ('{"metalfleet_policy_baseline": 1, "findings": [{"fingerprint": "' + "a" * 32 + '"}]}',
                  "findings[0] has no rule"),
    "binary.json": (b"\x00\xff", "--baseline file"),
    "missing.json": (None, "no such file"),
}


@pytest.mark.parametrize("name", sorted(BAD_BASELINES))
def test_an_unreadable_or_malformed_baseline_is_exit_2_with_one_line(name: str, tmp_path: Path) -> None:
    content, why = BAD_BASELINES[name]
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    res = run(FIXTURES / "bad-cluster.yaml", "--baseline", path)
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0] and why in err[0], res.stderr
    assert res.stdout == "", "refused before any report"


def test_write_baseline_into_a_missing_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    res = run(FIXTURES / "bad-cluster.yaml", "--write-baseline", tmp_path / "nope" / "b.json")
    assert res.returncode == 2 and res.stdout == "" and "--write-baseline file" in res.stderr
