"""`pulumi up` of examples/aws-p5 with the real engine, our language host, and the EC2 emulator.

This is the path pipeline users take: a project folder (Pulumi.yaml + __main__.py + cluster.yaml)
and the plain `pulumi` CLI. boto3 inside the dynamic provider reaches the emulator only through
AWS_ENDPOINT_URL, as it would reach AWS through its defaults.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from metalfleet.stacks.engine import engine_env
from tests.emulators.ec2_server import Ec2Emulator, start_ec2_emulator

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-aws")]

ROOT = Path(__file__).resolve().parents[2]
SECRET = "mf-e2e-secret-must-never-reach-state-0123456789"


@pytest.fixture(scope="module")
def ec2() -> Iterator[Ec2Emulator]:
    with start_ec2_emulator() as emu:
        yield emu


class Project:
    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["pulumi", *args], cwd=self.path, env=self.env, capture_output=True, text=True,
                              timeout=300, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def outputs(self) -> dict[str, object]:
        return json.loads(self.pulumi("stack", "output", "--json").stdout)  # type: ignore[no-any-return]


@pytest.fixture
def project(tmp_path: Path, ec2: Ec2Emulator) -> Project:
    proj = tmp_path / "aws-p5"
    shutil.copytree(ROOT / "examples" / "aws-p5", proj)
    env = {**os.environ, **engine_env()}
    env.update({
        "PULUMI_HOME": str(tmp_path / "home"),
        "PULUMI_CONFIG_PASSPHRASE": "e2e-passphrase",
        "AWS_ENDPOINT_URL": ec2.url,
        "AWS_ACCESS_KEY_ID": "AKIAE2ETESTKEY000000",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
    })
    env.pop("AWS_PROFILE", None)
    p = Project(proj, env)
    (tmp_path / "state").mkdir()
    p.pulumi("login", f"file://{tmp_path / 'state'}")
    p.pulumi("stack", "init", "e2e")
    return p


def _live(ec2: Ec2Emulator, cluster: str) -> list[str]:
    client = boto3.client("ec2", endpoint_url=ec2.url, region_name="us-east-1",
                          aws_access_key_id="AKIAE2ETESTKEY000000", aws_secret_access_key=SECRET)
    res = client.describe_instances(Filters=[
        {"Name": "tag:metalfleet:cluster", "Values": [cluster]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
    ])
    return sorted(i["InstanceId"] for r in res["Reservations"] for i in r["Instances"])


def test_pulumi_up_refresh_replace_destroy(project: Project, ec2: Ec2Emulator, tmp_path: Path) -> None:
    from metalfleet.providers import load_spec

    spec = load_spec(project.path / "cluster.yaml")
    project.pulumi("up", "--yes", "--skip-preview")
    out = project.outputs()
    ids = out["node_ids"]
    assert isinstance(ids, list) and len(ids) == spec.count
    assert _live(ec2, spec.name) == sorted(ids)
    assert str(out["hostfile"]).count("slots=8") == spec.count

    # A second `up` changes nothing: preview with --expect-no-changes fails on any diff.
    project.pulumi("preview", "--expect-no-changes")
    project.pulumi("up", "--yes", "--skip-preview")
    assert _live(ec2, spec.name) == sorted(ids)

    # Terminated behind Pulumi's back: refresh drops it, the next up replaces only that node.
    boto3.client("ec2", endpoint_url=ec2.url, region_name="us-east-1", aws_access_key_id="AKIAE2ETESTKEY000000",
                 aws_secret_access_key=SECRET).terminate_instances(InstanceIds=[ids[0]])
    project.pulumi("refresh", "--yes", "--skip-preview")
    drift = project.pulumi("preview", "--expect-no-changes", check=False)
    assert drift.returncode != 0, "after refresh the missing node must show as a change"
    project.pulumi("up", "--yes", "--skip-preview")
    new_ids = project.outputs()["node_ids"]
    assert isinstance(new_ids, list)
    assert new_ids[1:] == ids[1:] and new_ids[0] != ids[0]
    assert _live(ec2, spec.name) == sorted(new_ids)

    project.pulumi("destroy", "--yes", "--skip-preview")
    assert _live(ec2, spec.name) == []

    state = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert state, "the file backend wrote no state"
    assert SECRET not in state
    assert "AKIAE2ETESTKEY000000" not in state
