"""`metalfleet policy check --jobs N`: one large input divided among processes gives, finding for finding, the
report one process gives; errors are the same errors, and no process is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from metalfleet.policies.adapters import load_input, open_input
from metalfleet.policies.check import check_paths
from metalfleet.policies.config import PolicyConfig, parse_config
from metalfleet.policies.engine import evaluate
from metalfleet.policies.fanout import BYTES_PER_JOB, _share, auto_jobs
from metalfleet.policies.report import FORMATS, render
from metalfleet.policies.rules import RULES
from metalfleet.providers.textfile import BadFileError

from .cases import write_plan
from .test_rules_native import ALI, P5, _with

FIXTURES = Path(__file__).parent / "fixtures"
TODAY = date(2026, 1, 15)
#: Processes this test process forked (the hook runs in the parent after each os.fork).
FORKS: list[int] = []
os.register_at_fork(after_in_parent=lambda: FORKS.append(1))
CONFIG = {"suppressions": [
    {"rule": "MF-NET-*", "resource": "aws_instance.bastion*", "reason": "the lab's jump hosts"},
    {"rule": "MF-ENC-001", "resource": "aws_instance.nothing*", "reason": "matches nothing"},
    {"rule": "MF-TAG-001", "resource": "aws_instance.old*", "reason": "ended", "expires": "2025-12-31"}]}


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Instances good and bad in every way the rules judge, a security group open to the world, and .tf comments:
    a suppression with a reason, one without (a finding of its own) and one that expired."""
    d = tmp_path_factory.mktemp("divided")
    resources: list[tuple[str, str, dict[str, object]]] = []
    for i in range(60):
        bad = {0: {"associatePublicIpAddress": True}, 1: {"metadataOptions": None},
               2: {"rootBlockDevice": {"volumeSize": 500}}, 3: {"tags": {"team": "ml"}}, 4: {}}[i % 5]
        resources.append(("aws_instance", f"gpu{i:02d}", _with(P5, **bad)))
    resources += [("aws_instance", "bastion", _with(P5, associatePublicIpAddress=True)),
                  ("aws_instance", "old", _with(P5, tags={"team": "ml"})),
                  ("aws_instance", "noreason", _with(P5, associatePublicIpAddress=True)),
                  ("alicloud_instance", "ali", _with(ALI, internetMaxBandwidthOut=100)),
                  ("aws_security_group", "ssh", {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                                              "cidrBlocks": ["0.0.0.0/0"]}]})]
    (d / "main.tf").write_text(
        'resource "aws_instance" "gpu06" {\n'
        '  # metalfleet:suppress MF-NET-005 reason: image without IMDSv2 support, replaced next sprint\n'
        '}\n\n'
        'resource "aws_instance" "noreason" {\n'
        '  # metalfleet:suppress MF-NET-001\n'
        '}\n\n'
        'resource "aws_instance" "gpu03" {\n'
        '  # metalfleet:suppress MF-TAG-001 expires=2025-01-01 reason: ended long ago\n'
        '}\n')
    return write_plan(d / "plan.json", resources)


def _reports(path: Path, jobs: int) -> dict[str, str]:
    report = check_paths([path], parse_config(CONFIG), jobs=jobs, today=TODAY)
    return {fmt: render(report, fmt) for fmt in FORMATS}


@pytest.mark.parametrize("jobs", [2, 3, 7])
def test_a_divided_plan_reports_what_one_process_reports(plan: Path, jobs: int) -> None:
    one = _reports(plan, 1)
    forked = len(FORKS)
    assert _reports(plan, jobs) == one
    assert len(FORKS) - forked == jobs - 1, "each share but the first was judged in a process of its own"
    report = check_paths([plan], parse_config(CONFIG), jobs=jobs, today=TODAY)
    assert report.resources == 2 * 63 + 2 + 1 and report.inputs[0].resources == report.resources
    assert [f.rule.id for f in report.findings].count("MF-SUP-001") == 1, "the reason-less comment, once"
    statuses = {(s.suppression.rule, s.status, s.count) for s in report.suppressions}
    assert statuses == {("MF-NET-*", "applied", 1), ("MF-ENC-001", "unused", 0), ("MF-TAG-001", "expired", 0),
                        ("MF-NET-005", "applied", 1), ("MF-NET-001", "invalid", 0)}
    assert {f.resource_name for f in report.suppressed} == {"aws_instance.bastion", "aws_instance.gpu06"}
    for f in [*report.findings, *report.suppressed]:
        assert f.rule is RULES[f.rule.id], "a child's finding points at this process's rule"
    own = {id(s.suppression) for s in report.suppressions}
    assert all(id(f.suppressed_by) in own for f in report.suppressed)


def test_the_shares_cover_every_resource_once(plan: Path) -> None:
    whole = [r.name for r in load_input(plan, PolicyConfig()).resources]
    for n in (2, 3, 7, 200):
        shares = [r.name for i in range(n) for r in load_input(plan, PolicyConfig(), part=(i, n)).resources]
        assert shares == whole


def test_inputs_that_are_not_plans_are_not_divided(plan: Path) -> None:
    for path in (FIXTURES / "bad-cluster.yaml", FIXTURES / "pool.yaml"):
        assert _reports(path, 3) == _reports(path, 1)
        assert load_input(path, PolicyConfig(), part=(1, 3)).resources == []


def test_a_share_whose_process_sent_nothing_is_done_here(plan: Path) -> None:
    """A child that failed or was killed sends nothing: its share is computed in the caller, bound to the caller's
    rules and suppressions like a share a child sent."""
    config = parse_config(CONFIG)
    opened = open_input(plan, config)
    mine = evaluate(opened.views(), config, suppressions=opened.suppressions, today=TODAY)
    sups = [s.suppression for s in mine.suppressions]
    count, share = _share(b"", opened, config, TODAY, (0, 1), sups)
    assert count == len(opened.views())
    assert [(f.rule.id, f.resource_name, f.message) for f in share.findings] == \
        [(f.rule.id, f.resource_name, f.message) for f in mine.findings]
    assert all(f.rule is RULES[f.rule.id] for f in share.findings)
    assert share.suppressed and all(any(f.suppressed_by is s for s in sups) for f in share.suppressed)


def _children() -> set[int]:
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        found.update(int(p) for p in (task / "children").read_text().split())
    return found


@pytest.mark.parametrize("content, expected", [
    (b'{"format_version": "1.2", "resource_changes": [', "is not valid JSON"),
    (b'{"format_version": "1.2", "resource_changes": {"a": 1}}', "not a Terraform plan this tool can read"),
    (b"\x00\x01binary", "policy input"),
])
def test_errors_are_the_single_process_errors_and_no_process_is_left(tmp_path: Path, content: bytes,
                                                                      expected: str) -> None:
    bad = tmp_path / "plan.json"
    bad.write_bytes(content)
    before = _children()
    messages = []
    for jobs in (1, 3):
        with pytest.raises(BadFileError) as err:
            check_paths([bad], jobs=jobs)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and expected in messages[0]
    assert _children() <= before, "every forked process was waited for"


def test_cli_jobs(plan: Path, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "metalfleet.stacks.cli", "policy", "check", str(plan), "--format", "sarif"]
    outs = [subprocess.run([*cli, "--jobs", j], capture_output=True, text=True, timeout=120, check=False)
            for j in ("1", "4")]
    assert outs[0].returncode == outs[1].returncode == 1 and outs[0].stdout == outs[1].stdout
    for bad, why in (("0", "between 1 and 64"), ("two", "whole number")):
        res = subprocess.run([*cli, "--jobs", bad], capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 2 and "--jobs" in res.stderr and why in res.stderr


def test_auto_jobs_one_process_per_8_mib_up_to_the_cpus(plan: Path, tmp_path: Path) -> None:
    assert auto_jobs([str(plan)]) == 1, "a small input is not worth a second process"
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(4 * BYTES_PER_JOB)
    cpus = len(os.sched_getaffinity(0))
    assert auto_jobs([str(big)]) == min(cpus, 4)
    assert auto_jobs([str(big), str(plan)]) == 1, "several inputs are judged together in one process"
    assert auto_jobs([str(tmp_path / "missing.json")]) == 1
