"""AwsDriver's one error boundary, its offline validation, and crash safety of an in-flight RunInstances."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import (
    AuthError,
    BillingModel,
    CapacityError,
    ConflictError,
    InvalidSpecError,
    MetalfleetError,
    NodeSpec,
    NodeState,
    NotFoundError,
    ProviderError,
    QuotaError,
    RateLimitedError,
    TransientError,
    VolumeSpec,
)
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing.ec2 import Ec2Emulator

from .conftest import KMS_KEY, REGION, ZONE, Specs

ORDER_PROC = Path(__file__).parents[1] / "contract" / "order_proc.py"


@pytest.mark.parametrize(("code", "status", "expected"), [
    ("InsufficientInstanceCapacity", 500, CapacityError),
    ("RequestLimitExceeded", 503, RateLimitedError),
    ("Throttling", 400, RateLimitedError),
    ("AuthFailure", 401, AuthError),
    ("UnauthorizedOperation", 403, AuthError),
    ("InstanceLimitExceeded", 400, QuotaError),
    ("VcpuLimitExceeded", 400, QuotaError),
    ("InvalidParameterValue", 400, InvalidSpecError),
    ("InvalidParameterCombination", 400, InvalidSpecError),
    ("InternalError", 500, TransientError),
    ("Unavailable", 503, TransientError),
    ("ServiceUnavailable", 503, TransientError),
    ("IdempotentParameterMismatch", 400, ConflictError),
    ("SomethingEC2AddsNextYear", 400, ProviderError),
])
def test_error_mapping_on_run_instances(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs, code: str,
                                        status: int, expected: type[MetalfleetError]) -> None:
    [spec] = specs.node_specs(driver)
    emulator.set_faults(script=[{"action": "RunInstances", "code": code, "status": status}])

    with pytest.raises(MetalfleetError) as info:
        driver.order(spec)

    exc = info.value
    assert type(exc) is expected
    assert exc.provider == "aws" and exc.code == code and exc.request_id
    assert type(exc.__cause__).__name__ == "ClientError"  # raise ... from exc
    assert emulator.calls("RunInstances") == 1, "botocore must not retry on its own"
    if expected is CapacityError:
        assert isinstance(exc, CapacityError) and exc.zone == ZONE
        assert ZONE in str(exc) and "p4de.24xlarge" in str(exc)
    assert exc.retryable is issubclass(expected, TransientError)


def test_throttling_on_reads_is_rate_limited(driver: AwsDriver, emulator: Ec2Emulator) -> None:
    emulator.set_faults(script=[{"action": "DescribeInstances", "code": "RequestLimitExceeded", "status": 503}])
    with pytest.raises(RateLimitedError):
        driver.list_nodes("anything")
    assert driver.list_nodes("anything") == []  # the script failed exactly one call


def test_real_not_found_errors(driver: AwsDriver, specs: Specs) -> None:
    with pytest.raises(NotFoundError) as info:
        driver.get("i-0123456789abcdef0")
    assert info.value.code == "InvalidInstanceID.NotFound"
    driver.release("i-0123456789abcdef0")  # gone (or never there): nothing to do

    [spec] = specs.node_specs(driver)
    with pytest.raises(InvalidSpecError) as bad_subnet:
        driver.order(dataclasses.replace(spec, subnet_id="subnet-0123456789abcdef0"))
    assert bad_subnet.value.field == "network.subnet_id" and bad_subnet.value.code == "InvalidSubnetID.NotFound"

    with pytest.raises(InvalidSpecError) as bad_image:
        driver.order(dataclasses.replace(spec, image="ami-0123456789abcdef0"))
    assert bad_image.value.field == "image"

    with pytest.raises(InvalidSpecError) as bad_cr:
        driver.order(dataclasses.replace(spec, capacity_reservation_id="cr-0123456789abcdef0"))
    assert bad_cr.value.field == "capacity.reservation_id"


def test_same_key_other_settings_is_a_conflict(driver: AwsDriver, specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    driver.order(spec)
    with pytest.raises(ConflictError) as info:
        driver.order(dataclasses.replace(spec, root_volume=VolumeSpec(size_gib=400, kms_key_id=KMS_KEY)))
    assert info.value.code == "IdempotentParameterMismatch" and "generation" in str(info.value)
    assert len(driver.list_nodes(spec.cluster)) == 1


def test_capacity_reservation_full_is_a_capacity_error(driver: AwsDriver, ec2: Any, specs: Specs) -> None:
    cr_id = ec2.create_capacity_reservation(InstanceType="p4de.24xlarge", InstancePlatform="Linux/UNIX",
                                            AvailabilityZone=ZONE, InstanceCount=1)["CapacityReservation"][
        "CapacityReservationId"]
    first, second = specs.node_specs(driver, count=2, capacity={"reservation_id": cr_id})
    driver.order(first)
    with pytest.raises(CapacityError) as info:
        driver.order(second)
    assert info.value.code == "ReservationCapacityExceeded" and info.value.zone == ZONE


def test_connection_refused_is_transient() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    driver = AwsDriver(region=REGION, endpoint_url=f"http://127.0.0.1:{port}", connect_timeout=1)
    with pytest.raises(TransientError) as info:
        driver.get("i-0123456789abcdef0")
    assert info.value.code == "EndpointConnectionError" and info.value.retryable


def test_missing_credentials_is_an_auth_error(emulator: Ec2Emulator, monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(AuthError) as info:
        AwsDriver(region=REGION, endpoint_url=emulator.url).get("i-0123456789abcdef0")
    assert info.value.code == "NoCredentialsError"
    assert "testing" not in str(info.value)


def _replace(spec: NodeSpec, **changes: Any) -> NodeSpec:
    return dataclasses.replace(spec, **changes)


@pytest.mark.parametrize(("change", "field"), [
    ({"offering": "p3.16xlarge"}, "offering"),
    ({"image": ""}, "image"),
    ({"image": "ubuntu-22.04"}, "image"),
    ({"image": "resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/"
               "ami-id"}, "storage.root.device_name"),
    ({"region": "us-west-2"}, "region"),
    ({"zone": "eu-west-1a"}, "zone"),
    ({"subnet_id": None}, "network.subnet_id"),
    ({"subnet_id": "my-subnet"}, "network.subnet_id"),
    ({"security_group_ids": ("default",)}, "network.security_group_ids"),
    ({"billing": BillingModel.SPOT}, "capacity.billing"),
    ({"billing": BillingModel.CAPACITY_BLOCK}, "capacity.capacity_block"),
    ({"capacity_block": True}, "capacity.reservation_id"),
    ({"capacity_reservation_id": "reservation-1"}, "capacity.reservation_id"),
    ({"root_volume": VolumeSpec(size_gib=200, kms_key_id="my key")}, "storage.root.kms_key_id"),
    ({"root_volume": VolumeSpec(size_gib=200, encrypted=False, kms_key_id="alias/k")}, "storage.root.encrypted"),
    ({"data_volumes": (VolumeSpec(size_gib=100, volume_type="ssd"),)}, "storage.data.0.type"),
    ({"tags": {"aws:owner": "me"}}, "tags.aws:owner"),
    ({"tags": {"a$(id)": "me"}}, "tags.a$(id)"),
    ({"tags": {"team": "ml;rm -rf"}}, "tags.team"),
    ({"tags": {f"k{i}": "v" for i in range(45)}}, "tags"),
    ({"vpc_id": "my-vpc"}, "network.vpc_id"),
    ({"ssh_ingress_cidrs": ("10.0.0.0/8", "10.0.0.1/8")}, "network.ssh_ingress_cidrs[1]"),
    ({"ssh_ingress_cidrs": ("10.0.0.0/8",), "security_group_ids": ("sg-0123456789abcdef0",)},
     "network.ssh_ingress_cidrs"),
    ({"placement_strategy": "rack"}, "placement.strategy"),
    ({"placement_strategy": "spread", "index": 7}, "placement.strategy"),
    ({"placement_strategy": "partition"}, "placement.partition_count"),
    ({"placement_strategy": "partition", "placement_partitions": 8}, "placement.partition_count"),
    ({"placement_partitions": 2}, "placement.partition_count"),
    ({"user_data": "x" * 20000}, "user_data"),
])
def test_validate_refuses_offline_naming_the_field(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs,
                                                   change: dict[str, Any], field: str) -> None:
    [good] = specs.node_specs(driver)
    bad = _replace(good, **change)
    emulator.reset_faults()

    with pytest.raises(InvalidSpecError) as info:
        driver.validate(bad)
    assert info.value.field == field
    assert info.value.provider == "aws"
    with pytest.raises(InvalidSpecError):
        driver.order(bad)
    assert emulator.calls() == 0, "validation makes no API call"


def test_zone_that_disagrees_with_the_subnet_is_refused_before_buying(driver: AwsDriver, emulator: Ec2Emulator,
                                                                      specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    with pytest.raises(InvalidSpecError) as info:
        driver.order(_replace(spec, zone="us-east-1b"))
    assert info.value.field == "zone" and "us-east-1a" in str(info.value)
    assert emulator.calls("RunInstances") == 0


def test_lost_responses_are_retried_without_buying_twice(driver: AwsDriver, emulator: Ec2Emulator,
                                                         specs: Specs) -> None:
    from metalfleet.providers import order_cluster

    from .conftest import FAST

    node_specs = specs.node_specs(driver, count=6)
    driver.offerings()
    emulator.set_faults(lost_response=0.5, actions=["RunInstances"], seed=1)
    nodes = order_cluster(driver, node_specs, policy=FAST, timeout=30)
    assert emulator.stats()["faults"].get("LostResponse", 0) > 0
    emulator.set_faults()
    assert len({n.id for n in nodes}) == 6
    assert sorted(n.id for n in driver.list_nodes(specs.cluster)) == sorted(n.id for n in nodes)


def test_kill_while_run_instances_is_in_flight(driver: AwsDriver, emulator: Ec2Emulator, ec2: Any,
                                               specs: Specs) -> None:
    """The server gets RunInstances, the client dies before the answer: a re-run must find that instance."""
    job = {"driver": {"kind": "aws", "region": REGION, "endpoint_url": emulator.url, "poll": 0.02},
           "spec": specs.cluster_spec(count=1).model_dump(mode="json")}
    emulator.set_faults(latency_ms=1500, actions=["RunInstances"])
    proc = subprocess.Popen([sys.executable, str(ORDER_PROC), json.dumps(job)], stdout=subprocess.DEVNULL,
                            env=dict(os.environ))
    try:
        deadline = time.monotonic() + 30
        while emulator.calls("RunInstances") == 0:
            assert time.monotonic() < deadline and proc.poll() is None, "RunInstances never arrived"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    def bought() -> list[str]:
        res = ec2.describe_instances(Filters=[{"Name": "tag:metalfleet:cluster", "Values": [specs.cluster]}])
        return [i["InstanceId"] for r in res["Reservations"] for i in r["Instances"]]

    deadline = time.monotonic() + 10
    while not bought():  # the server finishes the purchase the dead client asked for
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [orphan] = bought()

    emulator.set_faults()
    done = subprocess.run([sys.executable, str(ORDER_PROC), json.dumps(job)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == orphan
    assert bought() == [orphan]


def test_endpoint_from_standard_env(emulator: Ec2Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", emulator.url)
    driver = AwsDriver(region=REGION)
    assert {o.name for o in driver.offerings()} == {"p5.48xlarge", "p5en.48xlarge", "p4de.24xlarge", "p4d.24xlarge"}
    assert emulator.calls("DescribeInstanceTypes") == 1


def test_driver_pickles_as_plain_config(driver: AwsDriver, emulator: Ec2Emulator) -> None:
    driver.offerings()  # the client and caches now exist
    blob = pickle.dumps(driver)
    assert b"botocore" not in blob
    copy = pickle.loads(blob)
    assert (copy.region, copy.endpoint_url, copy.poll) == (driver.region, driver.endpoint_url, driver.poll)
    assert len(copy.offerings()) == 4


def test_provider_package_imports_no_sdk() -> None:
    code = ("import sys, metalfleet.providers, metalfleet.providers.aws; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_reordering_a_released_cluster_buys_replacements_never_the_dead(driver: AwsDriver, specs: Specs) -> None:
    from metalfleet.providers import node_specs_for, order_cluster, release_cluster

    from .conftest import FAST

    spec = specs.cluster_spec(count=2)
    first = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=30)
    release_cluster(driver, spec.name, policy=FAST)

    [node0, _] = node_specs_for(driver, spec)
    replayed = driver.order(node0)  # the key still names the node it bought: report it as gone
    assert replayed.id == first[0].id and replayed.state == NodeState.TERMINATED

    again = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=30)
    assert not {n.id for n in again} & {n.id for n in first}
    assert sorted(n.id for n in driver.list_nodes(spec.name)) == sorted(n.id for n in again)
    wanted = {s.idempotency_key for s in node_specs_for(driver, spec, {0: 1, 1: 1})}
    assert {n.extra["idempotency_key"] for n in again} == wanted


def test_state_table_maps_every_ec2_state_and_falls_back_to_unknown() -> None:
    from metalfleet.providers import NodeState
    from metalfleet.providers.aws import STATE_TABLE

    assert {k: NodeState.map(STATE_TABLE, k) for k in
            ("pending", "running", "stopping", "stopped", "shutting-down", "terminated")} == {
        "pending": NodeState.PENDING, "running": NodeState.RUNNING, "stopping": NodeState.STOPPING,
        "stopped": NodeState.STOPPED, "shutting-down": NodeState.TERMINATING, "terminated": NodeState.TERMINATED}
    assert NodeState.map(STATE_TABLE, "hibernating") == NodeState.UNKNOWN
    assert NodeState.map(STATE_TABLE, None) == NodeState.UNKNOWN


def test_tag_order_does_not_change_the_request(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    first = driver.order(spec)
    reordered = dataclasses.replace(spec, tags=dict(reversed(list(spec.tags.items()))))
    assert list(reordered.tags) != list(spec.tags)
    assert driver.order(reordered).id == first.id  # a replay, not IdempotentParameterMismatch
