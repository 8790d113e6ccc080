"""examples/aws-p5/cluster.yaml validates, plans offline and orders unchanged on the emulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metalfleet.providers import NodeState, load_spec, node_specs_for, order_cluster, release_cluster
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing.ec2 import Ec2Emulator, default_subnet_id
from tests.emulators.fixtures import ec2_client, ensure_kms_key

from .conftest import FAST


def sg_of(ec2: Any, instance_id: str) -> str:
    inst = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    primary = next(n for n in inst["NetworkInterfaces"] if n["Attachment"]["DeviceIndex"] == 0)
    return str(primary["Groups"][0]["GroupId"])

EXAMPLE = Path(__file__).parents[2] / "examples" / "aws-p5" / "cluster.yaml"


def test_example_cluster_yaml(driver: AwsDriver, emulator: Ec2Emulator) -> None:
    spec = load_spec(EXAMPLE)
    assert (spec.provider, spec.region, spec.offering, spec.count) == ("aws", "us-east-1", "p5.48xlarge", 2)
    assert spec.placement.strategy == "cluster" and spec.storage.kms_key_id
    assert spec.network.subnet_id == default_subnet_id("us-east-1a")
    specs = node_specs_for(driver, spec)
    assert {s.root_volume.kms_key_id for s in specs} == {spec.storage.kms_key_id}

    assert spec.network.ssh_ingress_cidrs and not spec.network.security_group_ids
    assert spec.storage.kms_key_id
    # the example's EBS key and key pair, as the AWS account it is written for has them
    ensure_kms_key(emulator, spec.storage.kms_key_id)
    ec2 = ec2_client(emulator)
    if not ec2.describe_key_pairs(Filters=[{"Name": "key-name", "Values": [spec.ssh.key_pair]}])["KeyPairs"]:
        ec2.create_key_pair(KeyName=spec.ssh.key_pair)

    nodes = order_cluster(driver, specs, policy=FAST, timeout=30)
    try:
        assert [n.name for n in nodes] == ["llm-p5-0", "llm-p5-1"]
        assert all(n.state == NodeState.RUNNING and n.extra["efa_interfaces"] == 32 for n in nodes)
        assert {n.zone for n in nodes} == {"us-east-1a"}
        assert sorted(driver.cluster_resources(spec.name)) == [
            "placement-group:llm-p5-pg", f"security-group:{sg_of(ec2, nodes[0].id)}"]
    finally:
        release_cluster(driver, spec.name, policy=FAST)
    assert driver.list_nodes(spec.name) == []
    assert driver.cluster_resources(spec.name) == []  # the cluster's security and placement group went too
