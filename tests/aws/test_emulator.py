"""The EC2 emulator's extensions over moto and its fault switch, exercised with plain boto3 over HTTP."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from botocore.exceptions import ClientError

from metalfleet.testing.ec2 import Ec2Emulator

from .conftest import IMAGE, ZONE


def efa_nics(subnet: str, cards: int) -> list[dict[str, Any]]:
    return [{"NetworkCardIndex": c, "DeviceIndex": 0 if c == 0 else 1, "InterfaceType": "efa", "SubnetId": subnet,
             "DeleteOnTermination": True} for c in range(cards)]


def run(ec2: Any, subnet: str, token: str, cards: int = 4, **kw: Any) -> dict[str, Any]:
    resp: dict[str, Any] = ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, InstanceType="p4de.24xlarge",
                                             ClientToken=token, NetworkInterfaces=efa_nics(subnet, cards), **kw)
    return resp


def with_token(ec2: Any, token: str) -> list[str]:
    """Instance ids launched with ``token`` (moto has no client-token filter; filter here)."""
    reservations = ec2.describe_instances()["Reservations"]
    return [i["InstanceId"] for r in reservations for i in r["Instances"] if i.get("ClientToken") == token]


def code_of(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def test_placement_groups(ec2: Any, cluster: str) -> None:
    pg = ec2.create_placement_group(GroupName=cluster, Strategy="cluster")["PlacementGroup"]
    assert pg["GroupName"] == cluster and pg["Strategy"] == "cluster" and pg["GroupId"].startswith("pg-")
    with pytest.raises(ClientError) as dup:
        ec2.create_placement_group(GroupName=cluster, Strategy="cluster")
    assert code_of(dup) == "InvalidPlacementGroup.Duplicate"
    assert [g["GroupName"] for g in ec2.describe_placement_groups(GroupNames=[cluster])["PlacementGroups"]] == [
        cluster]
    assert ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": [cluster + "x"]}])[
        "PlacementGroups"] == []
    with pytest.raises(ClientError) as unknown:
        ec2.describe_placement_groups(GroupNames=[cluster + "x"])
    assert code_of(unknown) == "InvalidPlacementGroup.Unknown"


def test_run_instances_needs_an_existing_placement_group(ec2: Any, subnet: str, cluster: str) -> None:
    with pytest.raises(ClientError) as info:
        run(ec2, subnet, cluster, Placement={"GroupName": cluster + "-missing"})
    assert code_of(info) == "InvalidPlacementGroup.Unknown"


def test_client_token_is_idempotent_across_requests(ec2: Any, emulator: Ec2Emulator, subnet: str,
                                                    cluster: str) -> None:
    first = run(ec2, subnet, cluster)["Instances"][0]["InstanceId"]
    second = run(ec2, subnet, cluster)["Instances"][0]["InstanceId"]
    assert first == second
    assert emulator.calls("RunInstances") == 2
    assert with_token(ec2, cluster) == [first]
    with pytest.raises(ClientError) as info:
        run(ec2, subnet, cluster, cards=2)
    assert code_of(info) == "IdempotentParameterMismatch"
    ec2.terminate_instances(InstanceIds=[first])
    with pytest.raises(ClientError) as dead:  # the token stays used, and EC2 says its instance is gone
        run(ec2, subnet, cluster)
    assert code_of(dead) == "IdempotentInstanceTerminated"
    assert with_token(ec2, cluster) == [first]


def test_efa_interfaces_keep_card_and_type(ec2: Any, subnet: str, cluster: str) -> None:
    iid = run(ec2, subnet, cluster, cards=4)["Instances"][0]["InstanceId"]
    inst = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    got = sorted((n["Attachment"]["NetworkCardIndex"], n["Attachment"]["DeviceIndex"], n["InterfaceType"])
                 for n in inst["NetworkInterfaces"])
    assert got == [(0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa"), (3, 1, "efa")]
    assert "PublicIpAddress" not in inst  # several interfaces: no auto-assigned public IPv4, as on AWS
    nics = efa_nics(subnet, 2)
    nics[0]["AssociatePublicIpAddress"] = True
    with pytest.raises(ClientError) as info:
        ec2.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, InstanceType="p4de.24xlarge",
                          NetworkInterfaces=nics)
    assert code_of(info) == "InvalidParameterCombination"
    ec2.terminate_instances(InstanceIds=[iid])
    ec2.terminate_instances(InstanceIds=[iid])  # terminating twice is a no-op, as on AWS


def test_capacity_reservations(ec2: Any, subnet: str, cluster: str) -> None:
    cr = ec2.create_capacity_reservation(InstanceType="p4de.24xlarge", InstancePlatform="Linux/UNIX",
                                         AvailabilityZone=ZONE, InstanceCount=1)["CapacityReservation"]
    cr_id = cr["CapacityReservationId"]
    assert (cr["State"], cr["AvailableInstanceCount"], cr["ReservationType"]) == ("active", 1, "default")
    target = {"CapacityReservationTarget": {"CapacityReservationId": cr_id}}
    inst = run(ec2, subnet, cluster + "-1", CapacityReservationSpecification=target)["Instances"][0]
    described = ec2.describe_instances(InstanceIds=[inst["InstanceId"]])["Reservations"][0]["Instances"][0]
    assert described["CapacityReservationId"] == cr_id
    with pytest.raises(ClientError) as full:
        run(ec2, subnet, cluster + "-2", CapacityReservationSpecification=target)
    assert code_of(full) == "ReservationCapacityExceeded"
    with pytest.raises(ClientError) as market:
        run(ec2, subnet, cluster + "-3", CapacityReservationSpecification=target,
            InstanceMarketOptions={"MarketType": "capacity-block"})
    assert code_of(market) == "InvalidParameterCombination"
    ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])
    assert ec2.describe_capacity_reservations(CapacityReservationIds=[cr_id])["CapacityReservations"][0][
        "AvailableInstanceCount"] == 1
    assert ec2.cancel_capacity_reservation(CapacityReservationId=cr_id)["Return"] is True
    with pytest.raises(ClientError) as missing:
        ec2.describe_capacity_reservations(CapacityReservationIds=["cr-0123456789abcdef0"])
    assert code_of(missing) == "InvalidCapacityReservationId.NotFound"


@pytest.mark.parametrize(("name", "gpu", "mib", "cards", "efa"), [
    ("p5.48xlarge", "H100", 81920, 32, 32), ("p5en.48xlarge", "H200", 144384, 16, 16),
    ("p4de.24xlarge", "A100", 81920, 4, 4), ("p4d.24xlarge", "A100", 40960, 4, 4)])
def test_instance_type_data_is_right(ec2: Any, name: str, gpu: str, mib: int, cards: int, efa: int) -> None:
    [t] = ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
    [g] = t["GpuInfo"]["Gpus"]
    assert (g["Name"], g["Count"], g["MemoryInfo"]["SizeInMiB"]) == (gpu, 8, mib)
    net = t["NetworkInfo"]
    assert net["MaximumNetworkCards"] == len(net["NetworkCards"]) == cards
    assert net["EfaSupported"] is True and net["EfaInfo"]["MaximumEfaInterfaces"] == efa


def test_fault_switch_answers_ec2_shaped_errors(ec2: Any, emulator: Ec2Emulator, subnet: str, cluster: str) -> None:
    emulator.set_faults(throttle=1.0)
    with pytest.raises(ClientError) as throttled:
        ec2.describe_instances()
    assert code_of(throttled) == "RequestLimitExceeded"
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert throttled.value.response["ResponseMetadata"]["RequestId"]

    emulator.set_faults(server_error=1.0)
    with pytest.raises(ClientError) as internal:
        ec2.describe_instances()
    assert (code_of(internal), internal.value.response["ResponseMetadata"]["HTTPStatusCode"]) == ("InternalError", 500)

    emulator.set_faults(capacity=1.0)
    ec2.describe_instances()  # capacity faults hit RunInstances only
    with pytest.raises(ClientError) as capacity:
        run(ec2, subnet, cluster)
    assert code_of(capacity) == "InsufficientInstanceCapacity"
    assert capacity.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert ZONE in capacity.value.response["Error"]["Message"]

    emulator.set_faults(script=[{"action": "DescribeInstances", "code": "AuthFailure", "status": 401, "after": 1,
                                 "times": 1}])
    ec2.describe_instances()
    with pytest.raises(ClientError) as auth:
        ec2.describe_instances()
    assert code_of(auth) == "AuthFailure"
    ec2.describe_instances()
    assert emulator.stats()["faults"]["AuthFailure"] == 1


def test_fault_switch_is_seeded_and_resettable(ec2: Any, emulator: Ec2Emulator) -> None:
    def pattern() -> list[bool]:
        out = []
        for _ in range(20):
            try:
                ec2.describe_availability_zones()
                out.append(True)
            except ClientError:
                out.append(False)
        return out

    emulator.set_faults(throttle=0.5, seed=42)
    a = pattern()
    emulator.set_faults(throttle=0.5, seed=42)
    assert pattern() == a and not all(a) and any(a)
    emulator.reset_faults()
    assert all(pattern())
    assert emulator.stats()["by_action"] == {"DescribeAvailabilityZones": 20}


def test_latency_and_control_errors(ec2: Any, emulator: Ec2Emulator) -> None:
    emulator.set_faults(latency_ms=200)
    t = time.monotonic()
    ec2.describe_availability_zones()
    assert time.monotonic() - t >= 0.2
    with pytest.raises(RuntimeError, match="unknown fault"):
        emulator.set_faults(throtle=0.3)
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(emulator.url + "/_metalfleet/nothing")


def test_lost_response_does_the_work(ec2: Any, emulator: Ec2Emulator, subnet: str, cluster: str) -> None:
    emulator.set_faults(lost_response=1.0, actions=["RunInstances"])
    with pytest.raises(ClientError) as lost:
        run(ec2, subnet, cluster)
    assert code_of(lost) == "InternalError"
    emulator.set_faults()
    iid = run(ec2, subnet, cluster)["Instances"][0]["InstanceId"]
    assert with_token(ec2, cluster) == [iid]
