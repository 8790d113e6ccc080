"""What AwsDriver asks EC2 for, checked on the requests the emulator recorded and on the state it made."""

from __future__ import annotations

from typing import Any

import pytest

from metalfleet.providers import InvalidSpecError, NodeState, node_specs_for, order_cluster
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing.ec2 import Ec2Emulator

from .conftest import FAST, KMS_KEY, ZONE, Specs


def run_requests(emulator: Ec2Emulator, ok_only: bool = True) -> list[dict[str, str]]:
    return [r["params"] for r in emulator.requests("RunInstances") if not ok_only or r["status"] == 200]


def indexed(params: dict[str, str], prefix: str) -> list[dict[str, str]]:
    """``Prefix.N.Field`` query parameters regrouped as one dict per N, in N order."""
    groups: dict[int, dict[str, str]] = {}
    for key, value in params.items():
        if key.startswith(prefix + "."):
            n, _, rest = key[len(prefix) + 1:].partition(".")
            groups.setdefault(int(n), {})[rest] = value
    return [groups[n] for n in sorted(groups)]


def describe(ec2: Any, instance_id: str) -> dict[str, Any]:
    inst: dict[str, Any] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    return inst


@pytest.mark.parametrize(("offering", "cards"), [("p5.48xlarge", 32), ("p5en.48xlarge", 16),
                                                 ("p4de.24xlarge", 4), ("p4d.24xlarge", 4)])
def test_one_efa_interface_per_network_card(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs,
                                            subnet: str, offering: str, cards: int) -> None:
    [spec] = specs.node_specs(driver, offering)
    node = driver.order(spec)

    [params] = run_requests(emulator)
    nics = indexed(params, "NetworkInterface")
    assert len(nics) == cards
    assert [int(n["NetworkCardIndex"]) for n in nics] == list(range(cards))
    assert [int(n["DeviceIndex"]) for n in nics] == [0] + [1] * (cards - 1)
    assert {n["InterfaceType"] for n in nics} == {"efa"}
    assert {n["SubnetId"] for n in nics} == {subnet}
    assert {n["DeleteOnTermination"] for n in nics} == {"true"}
    assert "SubnetId" not in params and "SecurityGroupId.1" not in params  # only per interface

    seen = describe(ec2, node.id)["NetworkInterfaces"]
    assert sorted((n["Attachment"]["NetworkCardIndex"], n["Attachment"]["DeviceIndex"], n["InterfaceType"])
                  for n in seen) == [(0, 0, "efa")] + [(c, 1, "efa") for c in range(1, cards)]
    assert node.extra["efa_interfaces"] == cards


def test_placement_group_created_once_and_reused(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                 specs: Specs) -> None:
    nodes = order_cluster(driver, specs.node_specs(driver, count=3), policy=FAST, timeout=30)
    again = AwsDriver(region=driver.region, endpoint_url=emulator.url, poll=0.02)
    order_cluster(again, specs.node_specs(again, count=3), policy=FAST, timeout=30)

    creates = emulator.requests("CreatePlacementGroup")
    assert len(creates) == 1
    assert creates[0]["params"]["GroupName"] == f"{specs.cluster}-pg"
    assert creates[0]["params"]["Strategy"] == "cluster"
    [group] = ec2.describe_placement_groups(GroupNames=[f"{specs.cluster}-pg"])["PlacementGroups"]
    assert group["Strategy"] == "cluster"
    assert {r["Placement.GroupName"] for r in run_requests(emulator)} == {f"{specs.cluster}-pg"}
    assert {describe(ec2, n.id)["Placement"]["GroupName"] for n in nodes} == {f"{specs.cluster}-pg"}


def test_existing_placement_group_is_used_not_recreated(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                        specs: Specs) -> None:
    ec2.create_placement_group(GroupName="shared-pg", Strategy="cluster")
    emulator.reset_faults()
    driver.order(specs.node_specs(driver, placement={"group_name": "shared-pg"})[0])
    assert emulator.calls("CreatePlacementGroup") == 0
    assert run_requests(emulator)[0]["Placement.GroupName"] == "shared-pg"


def test_imdsv2_required(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs) -> None:
    node = driver.order(specs.node_specs(driver)[0])
    [params] = run_requests(emulator)
    assert params["MetadataOptions.HttpTokens"] == "required"
    assert params["MetadataOptions.HttpEndpoint"] == "enabled"
    assert describe(ec2, node.id)["MetadataOptions"]["HttpTokens"] == "required"


def test_root_and_data_volumes_encrypted_with_the_kms_key_and_tagged(driver: AwsDriver, emulator: Ec2Emulator,
                                                                     ec2: Any, specs: Specs) -> None:
    node = driver.order(specs.node_specs(driver)[0])

    [params] = run_requests(emulator)
    bdm = indexed(params, "BlockDeviceMapping")
    assert [b["DeviceName"] for b in bdm] == ["/dev/sda1", "/dev/sdf"]  # root device from the AMI
    assert {(b["Ebs.Encrypted"], b["Ebs.KmsKeyId"], b["Ebs.DeleteOnTermination"]) for b in bdm} == {
        ("true", KMS_KEY, "true")}
    volumes = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id", "Values": [node.id]}])["Volumes"]
    assert sorted(v["Size"] for v in volumes) == [200, 500]
    for v in volumes:
        assert v["Encrypted"] is True and v["KmsKeyId"] == KMS_KEY
        tags = {t["Key"]: t["Value"] for t in v["Tags"]}
        assert tags["metalfleet:cluster"] == specs.cluster
        assert tags["team"] == "ml-infra"
        assert tags["metalfleet:key"] == node.extra["idempotency_key"]


def test_tags_on_instance_volumes_and_interfaces(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                 specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    node = driver.order(spec)
    [params] = run_requests(emulator)
    kinds = {t["ResourceType"]: {tag["Key"]: tag["Value"] for tag in indexed(
        {k.split(".", 2)[2]: v for k, v in params.items() if k.startswith(f"TagSpecification.{i}.Tag.")}, "Tag")}
        for i, t in enumerate(indexed(params, "TagSpecification"), start=1)}
    assert set(kinds) == {"instance", "volume", "network-interface"}
    expected = {"Name": f"{specs.cluster}-0", "metalfleet:cluster": specs.cluster, "metalfleet:index": "0",
                "metalfleet:key": spec.idempotency_key, "team": "ml-infra", "cost-center": "4711"}
    for tags in kinds.values():
        assert tags == expected
    instance_tags = {t["Key"]: t["Value"] for t in describe(ec2, node.id)["Tags"]}
    assert instance_tags == expected == dict(node.tags)


def test_client_token_is_the_idempotency_key(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs) -> None:
    specs_ = specs.node_specs(driver, count=2)
    order_cluster(driver, specs_, policy=FAST, timeout=30)
    assert sorted(r["ClientToken"] for r in run_requests(emulator)) == sorted(s.idempotency_key for s in specs_)


def test_no_public_ip_unless_asked(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs) -> None:
    node = driver.order(specs.node_specs(driver)[0])
    [params] = run_requests(emulator)
    assert not any("AssociatePublicIpAddress" in k for k in params)
    inst = describe(ec2, node.id)
    assert "PublicIpAddress" not in inst and node.public_ip is None
    assert emulator.calls("AllocateAddress") == 0


def test_public_ip_is_an_elastic_ip_released_with_the_node(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                           specs: Specs) -> None:
    [spec] = specs.node_specs(driver, network={"subnet_id": specs.subnet, "public_ip": True})
    node = driver.order(spec)
    assert node.public_ip
    assert driver.order(spec).public_ip == node.public_ip  # a re-run finds the same address
    assert emulator.calls("AllocateAddress") == 1
    [address] = ec2.describe_addresses(Filters=[{"Name": "tag:metalfleet:key", "Values": [spec.idempotency_key]}])[
        "Addresses"]
    assert address["PublicIp"] == node.public_ip

    driver.release(node.id)
    assert ec2.describe_addresses(Filters=[{"Name": "tag:metalfleet:key", "Values": [spec.idempotency_key]}])[
        "Addresses"] == []


def test_security_group_per_cluster_with_self_referencing_rules(driver: AwsDriver, emulator: Ec2Emulator,
                                                                ec2: Any, specs: Specs) -> None:
    order_cluster(driver, specs.node_specs(driver, count=2), policy=FAST, timeout=30)
    [group] = ec2.describe_security_groups(
        Filters=[{"Name": "group-name", "Values": [f"metalfleet-{specs.cluster}-efa"]}])["SecurityGroups"]
    gid = group["GroupId"]

    def self_all(perms: list[dict[str, Any]]) -> bool:
        return any(p["IpProtocol"] == "-1" and any(g["GroupId"] == gid for g in p.get("UserIdGroupPairs", []))
                   for p in perms)

    assert self_all(group["IpPermissions"])
    assert self_all(group["IpPermissionsEgress"])
    assert not any(r.get("CidrIp") == "0.0.0.0/0" for p in group["IpPermissions"] for r in p.get("IpRanges", []))
    assert emulator.calls("CreateSecurityGroup") == 1
    for params in run_requests(emulator):
        assert {n["SecurityGroupId.1"] for n in indexed(params, "NetworkInterface")} == {gid}

    emulator.reset_faults()
    fresh = AwsDriver(region=driver.region, endpoint_url=emulator.url, poll=0.02)
    order_cluster(fresh, specs.node_specs(fresh, count=2), policy=FAST, timeout=30)
    assert emulator.calls("CreateSecurityGroup") == 0
    assert emulator.calls("AuthorizeSecurityGroupIngress") == 0


def test_security_group_half_made_by_a_crash_is_completed(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                                          specs: Specs, subnet: str) -> None:
    vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    gid = ec2.create_security_group(GroupName=f"metalfleet-{specs.cluster}-efa", Description="x", VpcId=vpc)[
        "GroupId"]
    emulator.reset_faults()
    driver.order(specs.node_specs(driver)[0])
    group = ec2.describe_security_groups(GroupIds=[gid])["SecurityGroups"][0]
    assert any(g["GroupId"] == gid for p in group["IpPermissions"] for g in p.get("UserIdGroupPairs", []))
    assert emulator.calls("CreateSecurityGroup") == 0


def test_given_security_groups_are_used_as_is(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs,
                                              subnet: str) -> None:
    vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    gid = ec2.create_security_group(GroupName=f"{specs.cluster}-mine", Description="mine", VpcId=vpc)["GroupId"]
    emulator.reset_faults()
    driver.order(specs.node_specs(driver, network={"subnet_id": subnet, "security_group_ids": [gid]})[0])
    assert emulator.calls("CreateSecurityGroup") == 0
    assert {n["SecurityGroupId.1"] for n in indexed(run_requests(emulator)[0], "NetworkInterface")} == {gid}


def test_capacity_reservation_targeting(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs) -> None:
    cr = ec2.create_capacity_reservation(InstanceType="p4de.24xlarge", InstancePlatform="Linux/UNIX",
                                         AvailabilityZone=ZONE, InstanceCount=2,
                                         InstanceMatchCriteria="targeted")["CapacityReservation"]
    cr_id = cr["CapacityReservationId"]
    nodes = order_cluster(driver, specs.node_specs(driver, count=2, capacity={"reservation_id": cr_id}),
                          policy=FAST, timeout=30)

    for params in run_requests(emulator):
        assert params["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == cr_id
        assert "InstanceMarketOptions.MarketType" not in params
    assert {n.extra["capacity_reservation_id"] for n in nodes} == {cr_id}
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"][0][
        "AvailableInstanceCount"] == 0

    driver.release(nodes[0].id)
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"][0][
        "AvailableInstanceCount"] == 1


def test_capacity_block_targeting(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any, specs: Specs) -> None:
    [offer] = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=1,
                                                    CapacityDurationHours=24)["CapacityBlockOfferings"]
    assert offer["UpfrontFee"] == f"{31.464 * 24:.2f}"  # the catalogue's p5 block rate per instance-hour
    assert ec2.describe_capacity_block_offerings(InstanceType="m5.large", InstanceCount=1,
                                                 CapacityDurationHours=24)["CapacityBlockOfferings"] == []
    cr_id = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                        InstancePlatform="Linux/UNIX")["CapacityReservation"]["CapacityReservationId"]
    [spec] = specs.node_specs(driver, "p5.48xlarge", capacity={"billing": "capacity_block", "reservation_id": cr_id,
                                                              "capacity_block": True})
    # a block is scheduled until its start (11:30 UTC): EC2 shows no capacity in it and takes no launch until then
    [block] = ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"]
    assert (block["State"], block["AvailableInstanceCount"]) == ("scheduled", 0)
    assert (block["StartDate"].hour, block["StartDate"].minute) == (11, 30)
    with pytest.raises(InvalidSpecError) as early:
        driver.order(spec)
    assert early.value.field == "capacity.reservation_id"
    assert early.value.code == "InvalidCapacityReservationState.PendingActivation"
    assert "scheduled" in str(early.value) and str(offer["StartDate"].year) in str(early.value)
    assert driver.list_nodes(spec.cluster) == []

    emulator.advance_clock((block["StartDate"] - block["CreateDate"]).total_seconds() + 1)  # past the start
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"][0][
        "State"] == "active"
    node = driver.order(spec)
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"][0][
        "AvailableInstanceCount"] == 0

    [params] = run_requests(emulator)
    assert params["InstanceMarketOptions.MarketType"] == "capacity-block"
    assert params["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == cr_id
    assert node.extra["lifecycle"] == "capacity-block"
    assert node.extra["capacity_reservation_id"] == cr_id


def test_wait_fails_fast_when_a_node_terminates(driver: AwsDriver, ec2: Any, specs: Specs) -> None:
    node = driver.order(specs.node_specs(driver)[0])
    ec2.terminate_instances(InstanceIds=[node.id])
    with pytest.raises(Exception) as info:
        driver.wait([node.id], NodeState.RUNNING, timeout=30, poll=0.01)
    assert "terminated" in str(info.value) and node.id in str(info.value)


def test_one_setup_for_many_parallel_orders(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs) -> None:
    emulator.reset_faults()  # count from here: the fixtures looked up the subnet
    order_cluster(driver, specs.node_specs(driver, "p5.48xlarge", count=16), policy=FAST, timeout=30)
    by_action = emulator.stats()["by_action"]
    assert by_action["RunInstances"] == 16
    for action in ("DescribeSubnets", "DescribeImages", "DescribePlacementGroups", "CreatePlacementGroup",
                   "CreateSecurityGroup", "DescribeInstanceTypes"):
        assert by_action[action] == 1, action


def test_plan_then_order_uses_offering_from_requirements(driver: AwsDriver, specs: Specs) -> None:
    spec = specs.cluster_spec(offering=None, requirements={"gpu": "H200", "min_gpus": 8})
    [node_spec] = node_specs_for(driver, spec)
    assert node_spec.offering == "p5en.48xlarge"
