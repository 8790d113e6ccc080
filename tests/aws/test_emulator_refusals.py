"""The EC2 emulator refuses what AWS refuses (extensions j-m, o), with AWS's error codes: plain boto3 over HTTP,
for the refusals the driver cannot be made to produce (it builds interfaces from the type's own data).
The driver's side of each refusal it can produce is in test_cluster_network.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from metalfleet.testing.ec2 import Ec2Emulator, default_subnet_id

from .conftest import IMAGE, KMS_KEY, REGION


def code_of(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def nics(subnet: str, cards: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"NetworkCardIndex": c, "DeviceIndex": 0 if c == 0 else 1, "InterfaceType": "efa", "SubnetId": subnet,
             "DeleteOnTermination": True, **extra} for c in range(cards)]


def launch(ec2: Any, subnet: str, interfaces: list[dict[str, Any]] | None = None, itype: str = "p4de.24xlarge",
           **kw: Any) -> dict[str, Any]:
    inst: dict[str, Any] = ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, InstanceType=itype,
                                             NetworkInterfaces=interfaces or nics(subnet, 1), **kw)["Instances"][0]
    return inst


def refused(ec2: Any, subnet: str, interfaces: list[dict[str, Any]] | None = None, **kw: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        launch(ec2, subnet, interfaces, **kw)
    return code_of(info), str(info.value.response["Error"]["Message"])


def test_more_network_cards_or_efa_interfaces_than_the_type_has(ec2: Any, subnet: str) -> None:
    code, message = refused(ec2, subnet, nics(subnet, 5))  # p4de.24xlarge: 4 cards
    assert code == "InvalidParameterValue" and "Network card index 4" in message and "p4de.24xlarge" in message
    code, _ = refused(ec2, subnet, nics(subnet, 33), itype="p5.48xlarge")  # 32 cards
    assert code == "InvalidParameterValue"
    five_efa = [*nics(subnet, 4), {"NetworkCardIndex": 0, "DeviceIndex": 1, "InterfaceType": "efa",
                                   "SubnetId": subnet, "DeleteOnTermination": True}]
    code, message = refused(ec2, subnet, five_efa)  # 4 EFA at most
    assert code == "AttachmentLimitExceeded" and "EFA interface count 5" in message
    code, _ = refused(ec2, subnet, nics(subnet, 1), itype="m5.large")  # no EFA at all
    assert code == "AttachmentLimitExceeded"
    crowded = [{"NetworkCardIndex": 0, "DeviceIndex": d, "SubnetId": subnet} for d in range(16)]
    code, message = refused(ec2, subnet, crowded)  # a p4de card takes 15 interfaces
    assert code == "AttachmentLimitExceeded" and "network card 0" in message
    # what the type has is accepted
    assert launch(ec2, subnet, nics(subnet, 32), itype="p5.48xlarge")["InstanceId"]


def test_duplicate_card_and_device_index(ec2: Any, subnet: str) -> None:
    twice = nics(subnet, 2)
    twice[1]["NetworkCardIndex"] = 0
    twice[1]["DeviceIndex"] = 0
    code, message = refused(ec2, subnet, twice)
    assert code == "InvalidParameterValue" and "unique device index" in message
    same_device_other_card = nics(subnet, 3)  # cards 1 and 2 both at DeviceIndex 1: fine, as on AWS
    assert launch(ec2, subnet, same_device_other_card)["InstanceId"]


def test_a_key_pair_that_does_not_exist(ec2: Any, subnet: str) -> None:
    code, message = refused(ec2, subnet, KeyName="nobody")
    assert code == "InvalidKeyPair.NotFound" and "'nobody'" in message
    ec2.create_key_pair(KeyName="somebody")
    assert launch(ec2, subnet, KeyName="somebody")["InstanceId"]


def test_a_kms_key_that_does_not_exist_or_is_disabled_kills_the_launch(ec2: Any, emulator: Ec2Emulator,
                                                                       subnet: str) -> None:
    kms = boto3.client("kms", region_name=REGION, endpoint_url=emulator.url)
    disabled = kms.create_key()["KeyMetadata"]
    kms.disable_key(KeyId=disabled["KeyId"])

    def volume(key: str) -> list[dict[str, Any]]:
        return [{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 100, "Encrypted": True, "KmsKeyId": key}}]

    for key in ("alias/nobody-made-this", disabled["Arn"], f"arn:aws:kms:{REGION}:123456789012:alias/none"):
        inst = launch(ec2, subnet, BlockDeviceMappings=volume(key))
        assert inst["State"]["Name"] == "pending", "EC2 takes the launch ..."
        [now] = ec2.describe_instances(InstanceIds=[inst["InstanceId"]])["Reservations"][0]["Instances"]
        assert now["State"]["Name"] == "terminated", "... and terminates it at once"
        assert now["StateReason"]["Code"] == "Client.InvalidKMSKey.InvalidState"
        assert "incorrect state" in now["StateReason"]["Message"]
    good = kms.describe_key(KeyId=KMS_KEY)["KeyMetadata"]
    for key in (KMS_KEY, good["KeyId"], good["Arn"], f"arn:aws:kms:{REGION}:123456789012:{KMS_KEY}"):
        inst = launch(ec2, subnet, BlockDeviceMappings=volume(key))
        [now] = ec2.describe_instances(InstanceIds=[inst["InstanceId"]])["Reservations"][0]["Instances"]
        assert now["State"]["Name"] == "running", key


def test_placement_strategies_are_kept(ec2: Any, subnet: str, cluster: str) -> None:
    other_zone = default_subnet_id("us-east-1b")
    ec2.create_placement_group(GroupName=f"{cluster}-c", Strategy="cluster")
    launch(ec2, subnet, Placement={"GroupName": f"{cluster}-c"})
    code, message = refused(ec2, other_zone, [{"DeviceIndex": 0, "SubnetId": other_zone}],
                            Placement={"GroupName": f"{cluster}-c"})
    assert code == "InvalidPlacementGroup.InUse" and "in use in another availability zone: us-east-1a" in message

    ec2.create_placement_group(GroupName=f"{cluster}-s", Strategy="spread")
    ids = [launch(ec2, subnet, Placement={"GroupName": f"{cluster}-s"})["InstanceId"] for _ in range(7)]
    code, message = refused(ec2, subnet, Placement={"GroupName": f"{cluster}-s"})
    assert code == "InvalidParameterValue" and "at most 7" in message
    assert launch(ec2, other_zone, [{"DeviceIndex": 0, "SubnetId": other_zone}],
                  Placement={"GroupName": f"{cluster}-s"})["InstanceId"], "7 per zone: another zone has room"
    ec2.terminate_instances(InstanceIds=ids[:1])
    assert launch(ec2, subnet, Placement={"GroupName": f"{cluster}-s"})["InstanceId"]

    with pytest.raises(ClientError) as eight:
        ec2.create_placement_group(GroupName=f"{cluster}-p8", Strategy="partition", PartitionCount=8)
    assert code_of(eight) == "InvalidParameterValue"
    ec2.create_placement_group(GroupName=f"{cluster}-p", Strategy="partition", PartitionCount=3)
    code, _ = refused(ec2, subnet, Placement={"GroupName": f"{cluster}-p", "PartitionNumber": 4})
    assert code == "InvalidParameterValue"
    assert launch(ec2, subnet, Placement={"GroupName": f"{cluster}-p", "PartitionNumber": 3})["InstanceId"]


def test_a_capacity_block_is_scheduled_until_its_start(ec2: Any, emulator: Ec2Emulator, subnet: str) -> None:
    [offer] = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=2,
                                                    CapacityDurationHours=24)["CapacityBlockOfferings"]
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                        InstancePlatform="Linux/UNIX")["CapacityReservation"]
    cr_id = block["CapacityReservationId"]
    assert (block["State"], block["AvailableInstanceCount"], block["TotalInstanceCount"]) == ("scheduled", 0, 2)
    assert block["StartDate"] == offer["StartDate"] and block["EndDate"] == offer["EndDate"]
    into = {"InstanceMarketOptions": {"MarketType": "capacity-block"}, "CapacityReservationSpecification": {
        "CapacityReservationTarget": {"CapacityReservationId": cr_id}}}

    def state() -> tuple[str, int]:
        [cr] = ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"]
        return cr["State"], cr["AvailableInstanceCount"]

    code, message = refused(ec2, subnet, itype="p5.48xlarge", **into)
    assert code == "InvalidCapacityReservationState.PendingActivation" and "not active yet" in message
    now = emulator.advance_clock((offer["StartDate"] - block["CreateDate"]).total_seconds() + 1)
    assert now >= offer["StartDate"].isoformat()[:19]
    assert state() == ("active", 2)
    iid = launch(ec2, subnet, itype="p5.48xlarge", **into)["InstanceId"]
    assert state() == ("active", 1)
    ec2.terminate_instances(InstanceIds=[iid])
    assert state() == ("active", 2)
    iid = launch(ec2, subnet, itype="p5.48xlarge", **into)["InstanceId"]
    emulator.advance_clock(timedelta(hours=23, minutes=31).total_seconds())  # 29 minutes left: EC2 terminates
    [gone] = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"]
    assert gone["State"]["Name"] == "terminated"
    assert state() == ("active", 2)
    emulator.advance_clock(timedelta(minutes=30).total_seconds())
    assert state() == ("expired", 0)
    code, _ = refused(ec2, subnet, itype="p5.48xlarge", **into)
    assert code == "InvalidCapacityReservationId.NotFound"
    emulator.reset_faults()  # a reset puts the clock back: the block is scheduled again
    assert state() == ("scheduled", 0)


def test_a_security_group_in_use_cannot_be_deleted(ec2: Any, subnet: str, cluster: str) -> None:
    vpc = ec2.describe_subnets(SubnetIds=[subnet])["Subnets"][0]["VpcId"]
    used = ec2.create_security_group(GroupName=f"{cluster}-used", Description="x", VpcId=vpc)["GroupId"]
    referrer = ec2.create_security_group(GroupName=f"{cluster}-ref", Description="x", VpcId=vpc)["GroupId"]
    iid = launch(ec2, subnet, [{"DeviceIndex": 0, "SubnetId": subnet, "Groups": [used],
                                "DeleteOnTermination": True}])["InstanceId"]
    with pytest.raises(ClientError) as busy:
        ec2.delete_security_group(GroupId=used)
    assert code_of(busy) == "DependencyViolation" and used in str(busy.value)
    ec2.terminate_instances(InstanceIds=[iid])
    ec2.authorize_security_group_ingress(GroupId=referrer, IpPermissions=[
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": used}]}])
    with pytest.raises(ClientError) as referenced:
        ec2.delete_security_group(GroupId=used)
    assert code_of(referenced) == "DependencyViolation"
    ec2.delete_security_group(GroupId=referrer)
    ec2.delete_security_group(GroupId=used)
    assert not ec2.describe_security_groups(Filters=[{"Name": "group-id", "Values": [used]}])["SecurityGroups"]
    [default] = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]},
                                                      {"Name": "group-name", "Values": ["default"]}])[
        "SecurityGroups"]
    with pytest.raises(ClientError) as cannot:
        ec2.delete_security_group(GroupId=default["GroupId"])
    assert code_of(cannot) == "CannotDelete"
