"""`metalfleet offerings` lists AWS and Alibaba side by side: offline from the shipped catalogue, and with
``--live`` from each provider's own API (both emulators)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from metalfleet.providers.catalog import load_catalog
from metalfleet.testing.alibaba import ACCESS_KEY_ID, ACCESS_KEY_SECRET, REGION, AlibabaEmulator
from metalfleet.testing.ec2 import Ec2Emulator

CLI = [sys.executable, "-m", "metalfleet.stacks.cli", "offerings"]


def test_offerings_lists_aws_and_alibaba_side_by_side(ec2_emulator: Ec2Emulator,
                                                      emulator: AlibabaEmulator) -> None:
    env = {**os.environ, "AWS_ENDPOINT_URL": ec2_emulator.url, "ALIBABA_CLOUD_ECS_ENDPOINT": emulator.url,
           "ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET}
    both = [*CLI, "--provider", "aws", "--provider", "alibaba"]
    before = emulator.calls()
    rows = json.loads(subprocess.run([*both, "--json"], env=env, capture_output=True, text=True, check=True,
                                     timeout=120).stdout)
    catalog = load_catalog()
    assert list(dict.fromkeys((r["provider"], r["name"]) for r in rows)) == [  # a row per region listed
        (e.provider, e.name) for e in catalog.entries if e.provider in ("aws", "alibaba")]
    assert {r["provider"] for r in rows} == {"aws", "alibaba"} and emulator.calls() == before  # offline
    h20 = next(r for r in rows if r["name"] == "ecs.ebmgn8v.48xlarge")
    # eRDMA up to 160 Gbit/s (170 is its VPC bandwidth); the ERI count is not on the family page: unknown
    assert (h20["gpu_model"], h20["fabric"], h20["fabric_cards"], h20["fabric_gbps"]) == ("H20", "erdma", None, 160.0)
    assert h20["unknown"]["fabric_cards"] and h20["unverified"]["gpu_model"]
    only = json.loads(subprocess.run([*both, "--json", "--fabric", "erdma"], env=env, capture_output=True,
                                     text=True, check=True, timeout=120).stdout)
    assert {r["provider"] for r in only} == {"alibaba"}

    # --live: the Alibaba API's answer (it fills what the catalogue leaves unknown, such as the vCPU count)
    live = [*CLI, "--live", "--provider", "alibaba", "--region", REGION]
    [part] = json.loads(subprocess.run([*live, "--json"], env=env, capture_output=True, text=True, check=True,
                                       timeout=120).stdout)
    assert emulator.calls("DescribeInstanceTypes") >= 1  # read from the Alibaba API, not only the catalogue
    h20_live = next(o for o in part["offerings"] if o["name"] == "ecs.ebmgn8v.48xlarge")
    assert (h20_live["gpu_model"], h20_live["fabric"], h20_live["fabric_cards"], h20_live["vcpus"]) == (
        "H20", "erdma", 2, 192)
    assert all(d["shipped"] is not None for d in part["differences"])  # unknown is filled, not a difference
    table = subprocess.run(live, env=env, capture_output=True, text=True, check=True, timeout=120).stdout
    assert "ecs.ebmgn8v.48xlarge" in table and "erdma 2x = 160 Gbps" in table
    assert "alibaba cn-wulanchabu:" in table and "differences from the shipped catalogue:" in table
