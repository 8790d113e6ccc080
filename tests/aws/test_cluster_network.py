"""What the spec says about network, placement and keys happens on EC2, and releasing a cluster leaves nothing
metalfleet made for it: checked through AwsDriver on the emulator (its state and recorded requests)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from metalfleet.providers import InvalidSpecError, NodeState, order_cluster, release_cluster
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.contract import ClusterResourcesDriver
from metalfleet.providers.fleet import order_node
from metalfleet.testing.ec2 import Ec2Emulator, default_subnet_id

from .conftest import FAST, Specs

MUTATING = ("CreatePlacementGroup", "CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "RunInstances")


def group_of(ec2: Any, cluster: str) -> dict[str, Any]:
    [group] = ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [f"metalfleet-{cluster}-efa"]}])["SecurityGroups"]
    return dict(group)


def ssh_rules(group: dict[str, Any]) -> set[tuple[int, str]]:
    return {(p["FromPort"], r.get("CidrIp") or r.get("CidrIpv6")) for p in group["IpPermissions"]
            if p["IpProtocol"] == "tcp" for r in [*p.get("IpRanges", []), *p.get("Ipv6Ranges", [])]}


def tagged(ec2: Any, cluster: str) -> tuple[int, int]:
    """Security groups and placement groups carrying metalfleet:cluster=<cluster>."""
    mine = [{"Name": "tag:metalfleet:cluster", "Values": [cluster]}]
    return (len(ec2.describe_security_groups(Filters=mine)["SecurityGroups"]),
            len(ec2.describe_placement_groups(Filters=mine)["PlacementGroups"]))


def test_ssh_ingress_cidrs_are_the_cluster_groups_ssh_rules(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                            specs: Specs) -> None:
    network = {"subnet_id": specs.subnet, "ssh_ingress_cidrs": ["10.0.0.0/16", "192.0.2.7/32", "2001:db8::/32"]}
    [spec] = specs.node_specs(driver, network=network, ssh={"port": 2222})
    driver.order(spec)
    group = group_of(ec2, specs.cluster)
    assert ssh_rules(group) == {(2222, "10.0.0.0/16"), (2222, "192.0.2.7/32"), (2222, "2001:db8::/32")}
    assert any(g["GroupId"] == group["GroupId"] for p in group["IpPermissions"] if p["IpProtocol"] == "-1"
               for g in p["UserIdGroupPairs"]), "the EFA rule between members stays"

    # the spec changes: the group follows it exactly (one added, two revoked, the port moved)
    [changed] = specs.node_specs(driver, network={**network, "ssh_ingress_cidrs": ["10.0.0.0/16", "198.51.100.0/24"]})
    emulator.reset_faults()
    AwsDriver(region=driver.region, endpoint_url=emulator.url).prepare_cluster(changed)
    assert ssh_rules(group_of(ec2, specs.cluster)) == {(22, "10.0.0.0/16"), (22, "198.51.100.0/24")}
    assert emulator.calls("CreateSecurityGroup") == 0 and emulator.calls("RevokeSecurityGroupIngress") == 1

    [closed] = specs.node_specs(driver)
    AwsDriver(region=driver.region, endpoint_url=emulator.url).prepare_cluster(closed)
    assert ssh_rules(group_of(ec2, specs.cluster)) == set()


def test_a_subnet_outside_the_named_vpc_is_refused_before_anything_is_made(driver: AwsDriver, emulator: Ec2Emulator,
                                                                           ec2: Any, specs: Specs) -> None:
    other = ec2.create_vpc(CidrBlock="10.99.0.0/16")["Vpc"]["VpcId"]
    vpc = ec2.describe_subnets(SubnetIds=[specs.subnet])["Subnets"][0]["VpcId"]
    [spec] = specs.node_specs(driver, network={"subnet_id": specs.subnet, "vpc_id": other})
    emulator.reset_faults()
    with pytest.raises(InvalidSpecError) as info:
        driver.order(spec)
    assert info.value.field == "network.vpc_id" and info.value.value == other
    assert other in str(info.value) and vpc in str(info.value) and specs.subnet in str(info.value)
    assert all(emulator.calls(a) == 0 for a in MUTATING)
    assert tagged(ec2, specs.cluster) == (0, 0)

    # the right VPC: the cluster's group is made in it
    [spec] = specs.node_specs(driver, network={"subnet_id": specs.subnet, "vpc_id": vpc})
    AwsDriver(region=driver.region, endpoint_url=emulator.url).order(spec)
    assert group_of(ec2, specs.cluster)["VpcId"] == vpc


@pytest.mark.parametrize(("placement", "expected"), [
    ({"strategy": "spread"}, ("spread", None)),
    ({"strategy": "partition", "partition_count": 3}, ("partition", 3)),
    ({"strategy": "cluster"}, ("cluster", None)),
])
def test_each_placement_strategy_makes_its_group(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs,
                                                placement: dict[str, Any], expected: tuple[str, int | None]) -> None:
    nodes = order_cluster(driver, specs.node_specs(driver, count=2, placement=placement), policy=FAST, timeout=30)
    [group] = ec2.describe_placement_groups(GroupNames=[f"{specs.cluster}-pg"])["PlacementGroups"]
    assert (group["Strategy"], group.get("PartitionCount")) == expected
    [create] = emulator.requests("CreatePlacementGroup")
    assert create["params"]["Strategy"] == expected[0]
    assert {n.extra["placement_group"] for n in nodes} == {f"{specs.cluster}-pg"}


def test_no_placement_group_with_strategy_none(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs) -> None:
    [node] = order_cluster(driver, specs.node_specs(driver, placement={"strategy": "none"}), policy=FAST, timeout=30)
    assert node.extra["placement_group"] is None and emulator.calls("CreatePlacementGroup") == 0


def test_an_existing_group_with_another_strategy_or_partition_count_is_refused(driver: AwsDriver, ec2: Any,
                                                                               specs: Specs) -> None:
    ec2.create_placement_group(GroupName=f"{specs.cluster}-part", Strategy="partition", PartitionCount=2)
    [spread] = specs.node_specs(driver, placement={"strategy": "spread", "group_name": f"{specs.cluster}-part"})
    with pytest.raises(InvalidSpecError) as info:
        driver.order(spread)
    assert info.value.field == "placement.group_name" and "partition" in str(info.value)
    [four] = specs.node_specs(driver, placement={"strategy": "partition", "partition_count": 4,
                                                 "group_name": f"{specs.cluster}-part"})
    with pytest.raises(InvalidSpecError) as info:
        driver.order(four)
    assert info.value.field == "placement.partition_count" and info.value.value == 4


def test_a_cluster_group_in_use_in_another_zone_is_refused_naming_the_group(driver: AwsDriver, ec2: Any,
                                                                            specs: Specs) -> None:
    """The emulator's refusal (InvalidPlacementGroup.InUse), as the driver reports it."""
    shared = f"{specs.cluster}-shared"
    ec2.create_placement_group(GroupName=shared, Strategy="cluster")
    ec2.run_instances(ImageId=specs.cluster_spec().image, InstanceType="p4de.24xlarge", MinCount=1, MaxCount=1,
                      SubnetId=default_subnet_id("us-east-1b"), Placement={"GroupName": shared})
    [spec] = specs.node_specs(driver, placement={"group_name": shared})
    with pytest.raises(InvalidSpecError) as info:
        driver.order(spec)
    assert info.value.field == "placement.group_name" and info.value.code == "InvalidPlacementGroup.InUse"
    assert "us-east-1b" in str(info.value) and driver.list_nodes(specs.cluster) == []


def test_an_unknown_key_pair_is_refused_through_the_driver(driver: AwsDriver, specs: Specs) -> None:
    [spec] = specs.node_specs(driver, ssh={"key_pair": "nobody-has-this"})
    with pytest.raises(InvalidSpecError) as info:
        driver.order(spec)
    assert info.value.code == "InvalidKeyPair.NotFound" and info.value.field == "key_name"
    assert driver.list_nodes(specs.cluster) == []


def test_kms_keys_are_checked_before_launch_and_a_launch_ec2_kills_for_its_key_is_reported(
        driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs) -> None:
    import boto3

    kms = boto3.client("kms", region_name=driver.region, endpoint_url=emulator.url)
    [missing] = specs.node_specs(driver, storage={"kms_key_id": "alias/nobody-made-this"})
    emulator.reset_faults()
    with pytest.raises(InvalidSpecError) as info:
        driver.order(missing)
    assert info.value.field == "storage.root.kms_key_id" and info.value.value == "alias/nobody-made-this"
    assert all(emulator.calls(a) == 0 for a in MUTATING), "refused before anything is made"

    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    alias = f"alias/{specs.cluster}"
    kms.create_alias(AliasName=alias, TargetKeyId=key_id)
    first, second = specs.node_specs(driver, count=2, storage={"kms_key_id": alias})
    assert driver.order(first).state != NodeState.TERMINATED
    # disabled after this driver found it usable: EC2 takes the launch and terminates it (extension m)
    kms.disable_key(KeyId=key_id)
    with pytest.raises(InvalidSpecError) as killed:
        order_node(driver, second, policy=FAST)
    assert killed.value.field == "storage.root.kms_key_id" and "Disabled" in str(killed.value)
    [dead] = [i for r in ec2.describe_instances(Filters=[{"Name": "tag:metalfleet:key",
                                                          "Values": [second.idempotency_key]}])["Reservations"]
              for i in r["Instances"]]
    assert dead["State"]["Name"] == "terminated"
    assert dead["StateReason"]["Code"] == "Client.InvalidKMSKey.InvalidState"
    # the key works again: ordering the node steps past the dead launch to a new generation, buying one node
    kms.enable_key(KeyId=key_id)
    node = order_node(driver, second, policy=FAST)
    assert node.state != NodeState.TERMINATED and node.id != dead["InstanceId"]
    assert node.extra["idempotency_key"] == dataclasses.replace(second, generation=1).idempotency_key
    assert len(driver.list_nodes(specs.cluster)) == 2


def test_release_leaves_nothing_metalfleet_made_and_never_touches_a_users_groups(
        driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs) -> None:
    assert isinstance(driver, ClusterResourcesDriver)
    order_cluster(driver, specs.node_specs(driver, count=2), policy=FAST, timeout=30)
    assert tagged(ec2, specs.cluster) == (1, 1)
    assert driver.release_cluster_resources(specs.cluster) == [], "in use by live nodes: nothing deleted"
    assert tagged(ec2, specs.cluster) == (1, 1)

    release_cluster(driver, specs.cluster, policy=FAST)
    assert driver.list_nodes(specs.cluster) == [] and tagged(ec2, specs.cluster) == (0, 0)
    assert driver.cluster_resources(specs.cluster) == []
    assert release_cluster(driver, specs.cluster, policy=FAST) == []  # again: nothing to do, no error

    # the user's own security group and an existing placement group are used, and outlive the release
    vpc = ec2.describe_subnets(SubnetIds=[specs.subnet])["Subnets"][0]["VpcId"]
    mine = ec2.create_security_group(GroupName=f"{specs.cluster}-mine", Description="mine", VpcId=vpc)["GroupId"]
    ec2.create_placement_group(GroupName=f"{specs.cluster}-theirs", Strategy="cluster")
    user = specs.node_specs(driver, count=2, network={"subnet_id": specs.subnet, "security_group_ids": [mine]},
                            placement={"group_name": f"{specs.cluster}-theirs"})
    fresh = AwsDriver(region=driver.region, endpoint_url=emulator.url, poll=0.02)
    order_cluster(fresh, user, policy=FAST, timeout=30)
    assert fresh.cluster_resources(specs.cluster) == []
    release_cluster(fresh, specs.cluster, policy=FAST)
    assert ec2.describe_security_groups(GroupIds=[mine])["SecurityGroups"]
    assert ec2.describe_placement_groups(GroupNames=[f"{specs.cluster}-theirs"])["PlacementGroups"]


def test_a_failed_order_rolls_back_the_groups_it_made(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                      specs: Specs) -> None:
    from metalfleet.providers import OrderFailed

    emulator.set_faults(capacity_remaining=1)
    with pytest.raises(OrderFailed):
        order_cluster(driver, specs.node_specs(driver, count=2), policy=FAST, timeout=30)
    assert driver.list_nodes(specs.cluster) == [] and tagged(ec2, specs.cluster) == (0, 0)
