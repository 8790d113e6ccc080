"""Each class of ECS error code, produced by the emulator and read through the driver's one boundary."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from metalfleet.providers import (
    AuthError,
    CapacityError,
    ConflictError,
    InvalidSpecError,
    NotFoundError,
    OrderFailed,
    QuotaError,
    RateLimitedError,
    TransientError,
    order_cluster,
    release_cluster,
)
from metalfleet.providers.alibaba import AlibabaDriver, translate_error
from metalfleet.providers.errors import ProviderError
from metalfleet.testing.alibaba import AlibabaEmulator

from .conftest import ALL_TYPES, FAST, REGION, ZONE, Specs


def test_no_stock_is_a_capacity_error_naming_zone_and_type(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                             specs: Specs) -> None:
    emulator.set_stock(ZONE, "ecs.ebmgn8v.48xlarge", 0)
    try:
        [spec] = specs.node_specs(driver)
        with pytest.raises(CapacityError) as info:
            driver.order(spec)
    finally:
        emulator.set_stock(ZONE, "ecs.ebmgn8v.48xlarge", 64)
    assert info.value.code == "OperationDenied.NoStock" and info.value.zone == ZONE
    assert ZONE in str(info.value) and "ecs.ebmgn8v.48xlarge" in str(info.value)
    assert not info.value.retryable
    assert driver.list_nodes(specs.cluster) == []


def test_throttling_and_unavailable_are_retryable(driver: AlibabaDriver, emulator: AlibabaEmulator) -> None:
    emulator.set_faults(throttle=1.0, actions=["DescribeInstanceTypes"])
    with pytest.raises(RateLimitedError) as throttled:
        driver.offerings()
    assert throttled.value.code == "Throttling.User" and throttled.value.retryable
    emulator.set_faults(server_error=1.0, actions=["DescribeInstanceTypes"])
    with pytest.raises(TransientError) as unavailable:
        driver.offerings()
    assert unavailable.value.code == "ServiceUnavailable" and unavailable.value.retryable
    assert not isinstance(unavailable.value, RateLimitedError)
    emulator.set_faults()
    assert [o.name for o in driver.offerings()] == ALL_TYPES


def _driver_with(emulator: AlibabaEmulator, key_id: str, secret: str) -> str:
    """Run a driver call in a child process whose environment holds the given AccessKey pair; its error line."""
    code = ("from metalfleet.providers.alibaba import AlibabaDriver\n"
            "from metalfleet.providers import MetalfleetError\n"
            "try:\n"
            f"    AlibabaDriver(region={REGION!r}, endpoint={emulator.url!r}).offerings()\n"
            "except MetalfleetError as exc:\n"
            "    print(type(exc).__name__, exc.code, exc.retryable)\n")
    env = {**os.environ, "ALIBABA_CLOUD_ACCESS_KEY_ID": key_id, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": secret}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=True).stdout.strip()


def test_wrong_secret_and_unknown_key_are_auth_errors_never_retried(emulator: AlibabaEmulator) -> None:
    from metalfleet.testing.alibaba import ACCESS_KEY_ID

    assert _driver_with(emulator, ACCESS_KEY_ID, "not-the-secret") == "AuthError SignatureDoesNotMatch False"
    assert _driver_with(emulator, "LTAI5tNoSuchKey", "x") == "AuthError InvalidAccessKeyId.NotFound False"
    assert emulator.calls("DescribeInstanceTypes") == 2  # one call each: nothing retried


def test_quota_is_a_quota_error(driver: AlibabaDriver, emulator: AlibabaEmulator, specs: Specs) -> None:
    emulator.set_quota(0)
    try:
        [spec] = specs.node_specs(driver)
        with pytest.raises(QuotaError) as info:
            driver.order(spec)
    finally:
        emulator.set_quota(500)
    assert info.value.code == "QuotaExceed.AfterpayInstance" and not info.value.retryable


def test_unknown_key_pair_kms_key_and_image_name_the_spec_field(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                                specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    cases = [
        (replace(spec, key_name="no-such-pair"), "ssh.key_pair", "InvalidKeyPairName.NotFound"),
        (replace(spec, root_volume=replace(spec.root_volume, kms_key_id="key-unknown000000")), "storage.kms_key_id",
         "InvalidParameter.KMSKeyId.NotFound"),
        (replace(spec, image="ubuntu_20_04_x64_20G_alibase_20990101.vhd"), "image", "InvalidImageId.NotFound"),
    ]
    for bad, field, code in cases:
        with pytest.raises(InvalidSpecError) as info:
            driver.order(bad)
        assert (info.value.field, info.value.code) == (field, code)
    assert emulator.calls("RunInstances") == 3
    assert driver.list_nodes(specs.cluster) == []


def test_idempotency_key_reused_with_other_settings_is_a_conflict_naming_the_key(
        driver: AlibabaDriver, specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    node = driver.order(spec)
    try:
        assert driver.order(spec).id == node.id  # the same request: the same instance
        changed = replace(spec, tags={**spec.tags, "team": "someone-else"})
        with pytest.raises(ConflictError) as info:
            driver.order(changed)
        assert info.value.code == "IdempotentParameterMismatch"
        assert spec.idempotency_key in str(info.value)
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)


def test_incorrect_instance_status_is_a_state_error(driver: AlibabaDriver, specs: Specs) -> None:
    [node] = order_cluster(driver, specs.node_specs(driver), policy=FAST, timeout=30)
    try:
        with pytest.raises(ConflictError) as info:
            driver._call("DeleteInstances", {"RegionId": REGION, "InstanceId": [node.id], "Force": False})
        assert info.value.code == "IncorrectInstanceStatus"
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)


def test_unknown_instance_is_not_found(driver: AlibabaDriver) -> None:
    with pytest.raises(NotFoundError):
        driver.get("i-doesnotexist000000000")
    with pytest.raises(NotFoundError):
        driver.set_tags("i-doesnotexist000000000", {"x": "y"})
    driver.release("i-doesnotexist000000000")  # releasing an unknown node is a no-op


def test_capacity_mid_cluster_rolls_back(driver: AlibabaDriver, emulator: AlibabaEmulator, specs: Specs) -> None:
    emulator.set_stock(ZONE, "ecs.ebmgn8v.48xlarge", 1)
    try:
        with pytest.raises(OrderFailed) as info:
            order_cluster(driver, specs.node_specs(driver, count=2), policy=FAST, timeout=30)
    finally:
        emulator.set_stock(ZONE, "ecs.ebmgn8v.48xlarge", 64)
    assert isinstance(info.value.cause, CapacityError) and info.value.cause.zone == ZONE
    assert driver.list_nodes(specs.cluster) == []


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("OperationDenied.NoStock", 403, CapacityError), ("Zone.NotOnSale", 403, CapacityError),
    ("Throttling", 400, RateLimitedError), ("Throttling.Api", 400, RateLimitedError),
    ("ServiceUnavailable", 503, TransientError), ("InternalError", 500, TransientError),
    ("InvalidAccessKeyId.NotFound", 404, AuthError), ("InvalidAccessKeyId.Inactive", 400, AuthError),
    ("SignatureDoesNotMatch", 400, AuthError), ("Forbidden.RAM", 403, AuthError),
    ("QuotaExceed.AfterpayInstance", 403, QuotaError), ("QuotaExceed.ElasticQuota", 403, QuotaError),
    ("IncorrectInstanceStatus", 403, ConflictError), ("IdempotentParameterMismatch", 400, ConflictError),
    ("InvalidVSwitchId.NotFound", 404, InvalidSpecError), ("InvalidInstanceId.NotFound", 404, NotFoundError),
    ("ChargeTypeViolation", 403, ConflictError), ("ExpiredInstance", 400, ConflictError),
    ("InvalidStatus.ValueNotSupported", 400, ConflictError), ("InvalidParameter.Conflict", 400, InvalidSpecError),
    ("InvalidParam.NetworkInterface", 400, InvalidSpecError), ("DeploymentSet.NotFound", 404, InvalidSpecError),
    ("InvalidParameter.KMSKeyId.NotFound", 404, InvalidSpecError), ("MissingParamter", 400, InvalidSpecError),
    ("SomethingNew", 400, ProviderError),
])
def test_code_tables(code: str, status: int, kind: type[Exception]) -> None:
    err = translate_error(code, "m", status, "req-1", "RunInstances", zone="z-a", instance_type="t",
                          client_token="tok")
    assert type(err) is kind
    assert err.code == code and err.request_id == "req-1" and err.provider == "alibaba"
    assert err.retryable == (kind in (RateLimitedError, TransientError))
