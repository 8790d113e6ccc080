"""Error mapping: every class of Huawei error, through the emulator and the SDK, lands in the one error tree."""

from __future__ import annotations

import uuid

import pytest

from metalfleet.providers import (
    AuthError,
    CapacityError,
    ConflictError,
    InvalidSpecError,
    NodeState,
    NotFoundError,
    ProviderError,
    QuotaError,
    RateLimitedError,
    RetryPolicy,
    TransientError,
    node_specs_for,
    order_cluster,
    parse_spec,
    release_cluster,
)
from metalfleet.providers.fleet import OrderFailed
from metalfleet.providers.huawei import HuaweiDriver
from metalfleet.providers.huawei.errors import translate
from metalfleet.providers.huawei.jobs import follow_job
from metalfleet.testing.huawei import PROJECT_ID, REGION, TEST_AK, HuaweiEmulator
from tests.emulators.huawei_fixtures import FLAVOR, ZONE, huawei_driver, huawei_spec_data


@pytest.mark.parametrize(("code", "message", "status", "kind", "field"), [
    ("APIGW.0301", "Incorrect IAM authentication information", 401, AuthError, None),
    ("APIGW.0308", "The throttling threshold has been reached", 429, RateLimitedError, None),
    ("BMS.0005", "Role check fail, reason: You do not have permission or your balance is insufficient.", 400,
     AuthError, None),
    ("BMS.0008", "Fail to query flavor [x], reason: y.", 400, InvalidSpecError, "offering"),
    ("BMS.0010", "Fail to query image [x], reason: y.", 400, InvalidSpecError, "image"),
    ("BMS.0012", "The number of IP addresses in the selected subnet[x] is insufficient.", 400, InvalidSpecError,
     "network.subnet_id"),
    ("BMS.0006", "Fail to operate baremetal server, reason: flavor f is sold out in availability zone z.", 400,
     CapacityError, None),
    ("BMS.0006", "Fail to operate baremetal server, reason: insufficient quota.", 400, QuotaError, None),
    ("BMS.0001", "Fail to parse request, reason: x.", 400, InvalidSpecError, None),
    ("BMS.0002", "The BMS service is unavailable.", 400, TransientError, None),
    ("BMS.9999", "Internal server error.", 500, TransientError, None),
    ("BMS.0001", "server x does not exist", 404, NotFoundError, None),
    ("Other.1", "conflict", 409, ProviderError, None),
    ("CBC.0250", "消息流量控制。", 429, RateLimitedError, None),
    ("CBC.0151", "访问拒绝。", 403, AuthError, None),
    ("CBC.0999", "其他错误。", 500, TransientError, None),
    ("CBC.30000010", "无效订单(可能是订单不存在),不能进行操作。", 400, NotFoundError, None),
    ("CBC.99003012", "资源ID不存在。", 400, NotFoundError, None),
    ("CBC.30000067", "资源已被删除或者资源未被纳管,不支持退订。", 400, NotFoundError, None),
    ("CBC.99003651", "交易正在进行中,不可以退订。", 400, ConflictError, None),
    ("CBC.0100", "参数错误。", 400, InvalidSpecError, None),
])
def test_translation_table(code: str, message: str, status: int, kind: type, field: str | None) -> None:
    exc = translate(code, message, status, "Call", request_id="r1", zone="cn-southwest-2a", flavor="f")
    assert type(exc) is kind
    assert exc.code == code and exc.request_id == "r1" and exc.provider == "huawei"
    assert getattr(exc, "field", None) == field
    assert exc.retryable == (kind in (RateLimitedError, TransientError))
    if kind is CapacityError:
        assert isinstance(exc, CapacityError) and exc.zone == "cn-southwest-2a" and "cn-southwest-2a" in str(exc)


def test_wrong_secret_is_refused_by_the_gateway_and_never_retried(huawei_emulator: HuaweiEmulator) -> None:
    bad = HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=huawei_emulator.url, ak=TEST_AK, sk="wrong",
                       poll=0.02)
    with pytest.raises(AuthError) as info:
        RetryPolicy(attempts=5, base=0.001, cap=0.01).call(bad.offerings)
    assert info.value.code == "APIGW.0301" and "verify aksk signature fail" in str(info.value)
    assert info.value.request_id
    assert huawei_emulator.calls("ListBaremetalFlavorDetailExtends") == 1, "auth errors are not retried"
    assert [r["status"] for r in huawei_emulator.requests()] == [401]


def test_a_request_dated_outside_the_skew_window_is_refused(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.advance_clock(20 * 60)  # the server's clock runs 20 minutes ahead of the signer's
    with pytest.raises(AuthError) as info:
        huawei_driver(huawei_emulator).offerings()
    assert info.value.code == "APIGW.0301" and "X-Sdk-Date" in str(info.value)
    huawei_emulator.reset_faults()
    assert huawei_driver(huawei_emulator).offerings()  # within 15 minutes again: accepted


def test_throttling_is_rate_limited_and_retried(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(script=[{"action": "ListBaremetalFlavorDetailExtends", "code": "APIGW.0308",
                                        "status": 429, "times": 2}])
    with pytest.raises(RateLimitedError):
        huawei_driver(huawei_emulator).offerings()
    offers = RetryPolicy(attempts=5, base=0.001, cap=0.01).call(huawei_driver(huawei_emulator).offerings)
    assert [o.name for o in offers] == [FLAVOR]
    assert huawei_emulator.stats()["faults"] == {"APIGW.0308": 2}


def test_no_stock_is_a_capacity_error_naming_the_az_and_flavor(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_stock(ZONE, FLAVOR, 0)
    driver = huawei_driver(huawei_emulator)
    assert driver.offerings()[0].extra["az_status"][ZONE] == "sellout"
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("err-stock", 1)))
    with pytest.raises(CapacityError) as info:
        driver.order(spec)
    assert info.value.zone == ZONE and ZONE in str(info.value) and FLAVOR in str(info.value)
    assert not info.value.retryable
    assert driver.list_nodes("err-stock") == []


def test_quota_is_a_quota_error(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_quota(0)
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("err-quota", 1)))
    with pytest.raises(QuotaError) as info:
        driver.order(spec)
    assert info.value.code == "BMS.0006" and not info.value.retryable


def test_an_image_bms_does_not_know_names_the_image_field(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    other = str(uuid.UUID(int=7))
    [spec] = node_specs_for(driver, parse_spec({**huawei_spec_data("err-image", 1), "image": other}))
    with pytest.raises(InvalidSpecError) as info:
        driver.order(spec)
    assert info.value.field == "image" and info.value.code == "BMS.0010"


def test_a_server_error_is_transient(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(server_error=1.0, seed=1)
    with pytest.raises(TransientError) as info:
        huawei_driver(huawei_emulator).offerings()
    assert info.value.code == "BMS.9999" and info.value.retryable


def test_an_unknown_server_is_not_found(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    with pytest.raises(NotFoundError):
        driver.get(str(uuid.UUID(int=1)))
    driver.release(str(uuid.UUID(int=1)))  # releasing what does not exist is a no-op


def test_a_failed_job_fails_the_order_with_its_reason(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(fail_jobs="Fail to operate baremetal server, reason: flavor is sold out.")
    driver = huawei_driver(huawei_emulator)
    specs = node_specs_for(driver, parse_spec(huawei_spec_data("err-job", 1)))
    policy = RetryPolicy(attempts=2, base=0.001, cap=0.01)
    with pytest.raises(OrderFailed) as info:  # kept: the failed server stays for a look
        order_cluster(driver, specs, timeout=20, policy=policy, rollback=False)
    assert "sold out" in str(info.value) and "ERROR" in str(info.value)
    assert isinstance(info.value.cause, ProviderError) and info.value.cause.code == "ServerFailed"
    [failed] = driver.list_nodes("err-job")  # an ERROR server is still there (and billed): release ends it
    assert info.value.kept == [failed.id]
    assert failed.state == NodeState.ERROR and failed.extra["state_reason"].endswith("sold out.")
    assert [s.node_id for s in driver.subscriptions([failed.id])] == [failed.id]
    assert release_cluster(driver, "err-job", unsubscribe=True) == [failed.id]
    assert driver.list_nodes("err-job") == []
    with pytest.raises(OrderFailed) as rolled:  # rolled back (the spec opts in to ending subscriptions)
        order_cluster(driver, node_specs_for(driver, parse_spec(huawei_spec_data("err-job-2", 1))), timeout=20,
                      policy=policy)
    assert "sold out" in str(rolled.value) and len(rolled.value.released) == 1
    assert driver.list_nodes("err-job-2") == []


def test_following_a_failed_job_raises_its_error(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(fail_jobs="Fail to operate baremetal server, reason: flavor is sold out.")
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("err-follow", 1)))
    node = driver.order(spec)  # the job names its server at once; the failure comes when the job ends
    job_id = _last_job(huawei_emulator)
    with pytest.raises(CapacityError) as info:
        follow_job(driver._bms, job_id, timeout=10, poll=0.02, zone=ZONE, flavor=FLAVOR)
    assert info.value.zone == ZONE
    with pytest.raises(ProviderError) as failed:
        driver.wait([node.id], timeout=10, poll=0.02)
    assert "ERROR" in str(failed.value) and "sold out" in str(failed.value)


def _last_job(emulator: HuaweiEmulator) -> str:
    """The job the driver followed last (ShowJobInfos' path, as the emulator logged it)."""
    paths = [r for r in emulator.requests() if r["action"] == "ShowJobInfos"]
    assert paths, "the driver followed no job"
    return str(paths[-1]["params"]["path"]["job_id"])
