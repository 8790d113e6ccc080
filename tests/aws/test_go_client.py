"""A client metalfleet did not write: the official Go SDK (aws-sdk-go-v2, tests/clients/ec2_go) runs the AWS driver's
order flow against the EC2 emulator with the parameters the driver sends, and sends what the reference says EC2
refuses, which the emulator must refuse with the reference's codes."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.aws.network import Net
from metalfleet.testing import reference
from metalfleet.testing.ec2 import Ec2Emulator
from tests.prereq import require_go_client

from .conftest import REGION, ZONE, Specs

REF = reference.load("ec2")


def test_the_go_sdk_runs_the_drivers_flow_and_is_refused_as_ec2_refuses(
        driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs, cluster: str, tmp_path: Path) -> None:
    binary = require_go_client("ec2_go")
    [spec] = specs.node_specs(driver)  # p4de.24xlarge: an EFA interface on each of its 4 network cards
    made = dict(r.split(":", 1) for r in driver.prepare_cluster(dataclasses.replace(spec, placement_group=None)))
    vpc = ec2.describe_subnets(SubnetIds=[spec.subnet_id])["Subnets"][0]["VpcId"]
    net = Net(vpc_id=vpc, zone=ZONE, security_group_ids=(made["security-group"],))
    run = driver.run_instances_request(dataclasses.replace(spec, placement_group=None), net)
    group = f"{cluster}-go"
    config = {"endpoint": emulator.url, "region": REGION, "instance_types": ["p5.48xlarge", "p4de.24xlarge"],
              "placement_group": group, "tags": [{"Key": "client", "Value": "aws-sdk-go-v2"}],
              "key_tag": {"Key": "metalfleet:key", "Value": spec.idempotency_key}, "run": run}
    (tmp_path / "in.json").write_text(json.dumps(config))
    emulator.reset_faults()

    proc = subprocess.run([binary, str(tmp_path / "in.json")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    steps = {s["step"]: s for s in map(json.loads, proc.stdout.splitlines())}
    assert list(steps) == ["describe_instance_types", "create_placement_group", "run_instances",
                           "run_instances_again", "describe_until_running", "create_tags", "refuse_token_mismatch",
                           "refuse_network_card_index", "refuse_unknown_placement_group",
                           "terminate_until_terminated", "delete_placement_group"], proc.stdout

    assert steps["describe_instance_types"]["types"] == {
        "p5.48xlarge": {"gpu_count": 8, "gpu_name": "H100", "gpu_memory_mib": 81920, "network_cards": 32,
                        "efa_supported": True, "efa_max_interfaces": 32},
        "p4de.24xlarge": {"gpu_count": 8, "gpu_name": "A100", "gpu_memory_mib": 81920, "network_cards": 4,
                          "efa_supported": True, "efa_max_interfaces": 4}}
    assert steps["create_placement_group"]["ok"]
    first = steps["run_instances"]
    assert first["ok"] and first["client_token"] == run["ClientToken"] == spec.idempotency_key
    assert first["interfaces"] == 4
    again = steps["run_instances_again"]
    assert (again["reservation"], again["instance"]) == (first["reservation"], first["instance"])
    assert again["instances_with_key"] == 1, "the repeated ClientToken bought nothing"
    running = steps["describe_until_running"]
    assert running["state"] == "running" and running["placement_group"] == group
    assert sorted((n["network_card_index"], n["device_index"], n["interface_type"]) for n in running["interfaces"]) \
        == [(0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa"), (3, 1, "efa")]
    tags = steps["create_tags"]["tags"]
    assert tags["client"] == "aws-sdk-go-v2" and tags["metalfleet:key"] == spec.idempotency_key

    for name, rule_id in (("refuse_token_mismatch", "run-token-mismatch"),
                          ("refuse_network_card_index", "run-nic-card-index-range"),
                          ("refuse_unknown_placement_group", "run-placement-group-exists")):
        rule = REF.rule(rule_id)
        assert (steps[name]["code"], steps[name]["status"]) == (rule.code, rule.status), steps[name]
    assert steps["refuse_network_card_index"]["network_card_index"] == 4  # p4de.24xlarge has cards 0-3

    assert steps["terminate_until_terminated"]["state"] == "terminated"
    assert steps["delete_placement_group"]["ok"]
    assert not ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": [group]}])["PlacementGroups"]

    # the emulator saw the Go SDK's requests: each refusal decided by its rule, the replay by run-token-replay
    runs = emulator.requests("RunInstances")
    refusals = [r for r in runs if r["status"] != 200]
    assert [rule in r.get("rules", []) for r, rule in zip(refusals, (
        "run-token-mismatch", "run-nic-card-index-range", "run-placement-group-exists"), strict=True)] == [True] * 3
    assert "run-token-replay" in runs[1]["rules"]
    # what it sent for RunInstances is what boto3 sends for the driver's parameters (another SDK, the same wire),
    # and so what the table says the driver sends
    go_sent = {k: v for k, v in runs[0]["params"].items() if k not in ("ClientToken", "Placement.GroupName")}
    ec2.run_instances(**{**run, "ClientToken": run["ClientToken"][:50] + "-boto3"})
    boto_sent = {k: v for k, v in emulator.requests("RunInstances")[-1]["params"].items() if k != "ClientToken"}
    assert go_sent == boto_sent
    flat = {reference.flat_name(k) for k in runs[0]["params"] if k not in ("Action", "Version")}
    assert flat <= set(REF.sent("RunInstances")), sorted(flat - set(REF.sent("RunInstances")))
