"""The CrossGuard pack (policies/pack) under the real engine: `pulumi preview --policy-pack policies/pack`.

The engine starts the pack through our language host's RunPlugin, in the interpreter metalfleet runs (engine_env
sets PULUMI_PYTHON_CMD; the pack's PulumiPolicy.yaml names no virtualenv). examples/aws-p5 previews against the
EC2 emulator (no simulated hosts: a preview orders nothing) and passes; tests/policies/bad-stack fails, and the
output names every planted rule.

Native pulumi-aws/alicloud/huaweicloud resources are not previewed here: their provider plugins are binaries
that cannot be fetched on this machine. The pack reads them through the same validate seam the unit tests call
(test_rules_native.py), with the SDK's own argument objects.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from metalfleet.policies.check import check_paths
from metalfleet.stacks.engine import engine_env
from metalfleet.testing.ec2 import Ec2Emulator, start_ec2_emulator
from tests.stacks.projects import link_test_environment

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-policy")]

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "policies" / "pack"
ACCESS = {"aws_access_key_id": "AKIAPOLICYE2E0000000", "aws_secret_access_key": "policy-e2e-secret",
          "region_name": "us-east-1"}


def _pulumi(path: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["pulumi", *args], cwd=path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _stack(project: Path, tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    link_test_environment(project)
    env = {**os.environ, **engine_env()}
    env.update({"PULUMI_HOME": str(tmp / "home"), "PULUMI_CONFIG_PASSPHRASE": "policy-e2e", **(extra or {})})
    env.pop("METALFLEET_POLICY_CONFIG", None)
    state = tmp / "state"
    state.mkdir()
    _pulumi(project, env, "login", f"file://{state}")
    _pulumi(project, env, "stack", "init", "e2e")
    return env


@pytest.fixture(scope="module")
def ec2() -> Iterator[Ec2Emulator]:
    with start_ec2_emulator() as emu:
        yield emu


def _emulator_account(ec2: Ec2Emulator, tmp: Path) -> None:
    """The example's key pair and EBS key, as an account that can run it has them."""
    key = tmp / "operator"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    client: Any = boto3.client("ec2", endpoint_url=ec2.url, **ACCESS)
    client.import_key_pair(KeyName="metalfleet-p5", PublicKeyMaterial=Path(f"{key}.pub").read_bytes())
    kms: Any = boto3.client("kms", endpoint_url=ec2.url, **ACCESS)
    kms.create_alias(AliasName="alias/metalfleet-ebs", TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])


def test_the_pack_passes_the_example(tmp_path: Path, ec2: Ec2Emulator) -> None:
    _emulator_account(ec2, tmp_path)
    project = tmp_path / "aws-p5"
    shutil.copytree(ROOT / "examples" / "aws-p5", project, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    env = _stack(project, tmp_path, {"AWS_ENDPOINT_URL": ec2.url, "AWS_ACCESS_KEY_ID": ACCESS["aws_access_key_id"],
                                     "AWS_SECRET_ACCESS_KEY": ACCESS["aws_secret_access_key"],
                                     "AWS_DEFAULT_REGION": "us-east-1"})
    proc = _pulumi(project, env, "preview", "--policy-pack", str(PACK), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "metalfleet@" in out, "the engine ran the pack"
    assert "mandatory" not in out and "MF-" not in out, out


#: A Huawei node: BMS gives the volumes it creates with a server no tags, so the tag rule cannot pass them.
UNKNOWN_HW = "the tags of bad-hw-0 root volume is unknown"


def test_the_pack_blocks_the_bad_stack(tmp_path: Path) -> None:
    project = tmp_path / "bad-stack"
    shutil.copytree(ROOT / "tests" / "policies" / "bad-stack", project,
                    ignore=shutil.ignore_patterns("venv", "__pycache__"))
    env = _stack(project, tmp_path)
    proc = _pulumi(project, env, "preview", "--policy-pack", str(PACK), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    planted = {
        "MF-NET-001": "bad-p5-0 gets a public address",
        "MF-ENC-001": "bad-p5-0 root volume is not encrypted",
        "MF-TAG-001": "bad-p5-0 lacks required tag(s) owner, cost-center",
        "MF-NET-002": "lets 0.0.0.0/0 reach SSH (port 22)",
        "MF-TRN-002": "SSH to bad-p5-0-bootstrap accepts host keys it has never seen",
        "MF-ENC-003": "encryption of s3 bucket s3://training-data",
    }
    for rule_id, text in planted.items():
        assert re.search(rf"- \[mandatory\] \[severity: \w+\]  {rule_id}  ", out), (rule_id, out)
        assert text in out, (rule_id, text, out)
    assert UNKNOWN_HW in out, out  # unknown is not compliant: it blocks too

    # Enforcement per rule comes from the pack's config: made advisory, a rule no longer blocks.
    config = tmp_path / "pack-config.json"
    config.write_text(json.dumps({rule: {"enforcementLevel": "advisory"} for rule in planted}))
    relaxed = _pulumi(project, env, "preview", "--policy-pack", str(PACK), "--policy-pack-config", str(config),
                      check=False)
    out = relaxed.stdout + relaxed.stderr
    assert relaxed.returncode == 0, out
    assert re.search(r"- \[advisory\] \[severity: high\]  MF-NET-001  ", out) and "[mandatory]" not in out, out

    # The same stack as `pulumi preview --json` for `metalfleet policy check`: the same findings.
    preview = tmp_path / "preview.json"
    preview.write_text(_pulumi(project, env, "preview", "--json").stdout)
    report = check_paths([preview])
    assert report.inputs[0].kind == "pulumi-preview" and report.exit_code == 1
    for rule_id, text in planted.items():
        assert any(f.rule.id == rule_id and text in f.message for f in report.findings), (rule_id, report.findings)
