"""`metalfleet offerings` lists AWS and Alibaba side by side, each from its own API (both emulators)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from metalfleet.testing.alibaba import ACCESS_KEY_ID, ACCESS_KEY_SECRET, AlibabaEmulator
from metalfleet.testing.ec2 import Ec2Emulator
from tests.emulators.fixtures import ec2_emulator, ec2_emulator_session  # noqa: F401  (fixtures)


def test_offerings_lists_aws_and_alibaba_side_by_side(ec2_emulator: Ec2Emulator,  # noqa: F811
                                                      emulator: AlibabaEmulator) -> None:
    env = {**os.environ, "AWS_ENDPOINT_URL": ec2_emulator.url, "ALIBABA_CLOUD_ECS_ENDPOINT": emulator.url,
           "ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET}
    cli = [sys.executable, "-m", "metalfleet.stacks.cli", "offerings", "--provider", "aws", "--provider", "alibaba"]
    rows = json.loads(subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, check=True,
                                     timeout=120).stdout)
    assert [r["provider"] for r in rows] == ["aws"] * 4 + ["alibaba"] * 4
    h20 = next(r for r in rows if r["name"] == "ecs.ebmgn8v.48xlarge")
    assert (h20["gpu_model"], h20["fabric"], h20["fabric_cards"], h20["fabric_gbps"], h20["vcpus"]) == (
        "H20", "erdma", 2, 170.0, 192)
    assert emulator.calls("DescribeInstanceTypes") == 1  # read from the Alibaba API, not only the catalogue
    table = subprocess.run(cli, env=env, capture_output=True, text=True, check=True, timeout=120).stdout
    assert "alibaba   ecs.ebmgn8v.48xlarge" in table and "erdma 2x = 170 Gbps" in table
    assert "aws       p5.48xlarge" in table
    only = json.loads(subprocess.run([*cli, "--json", "--fabric", "erdma"], env=env, capture_output=True, text=True,
                                     check=True, timeout=120).stdout)
    assert {r["provider"] for r in only} == {"alibaba"}
