"""The Huawei driver over HTTP: idempotent ordering without a client token (lost answers, re-runs), billing,
tags, the request it sends, and its packaging (no SDK at import, registry, pickling)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from metalfleet.providers import (
    InvalidSpecError,
    NodeSpec,
    NodeState,
    NotFoundError,
    RetryPolicy,
    TransientError,
    get_driver,
    order_cluster,
    parse_spec,
    plan,
    release_cluster,
)
from metalfleet.providers.huawei import HuaweiDriver
from metalfleet.providers.huawei.validation import check_billing
from metalfleet.providers.models import BillingModel
from metalfleet.testing.huawei import PROJECT_ID, REGION, TEST_SK, HuaweiEmulator
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data

CAPTURE = Path(__file__).parents[1] / "support" / "fixtures" / "wire" / "huawei-bms-sdk-3.1.219.jsonl"
FAST = RetryPolicy(attempts=8, base=0.001, cap=0.01)


def test_a_create_whose_answer_is_lost_is_found_by_its_key(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(lost_response=1.0, actions=["CreateBareMetalServers"], seed=1)
    driver = huawei_driver(huawei_emulator)
    [spec] = plan(driver, parse_spec(huawei_spec_data("lost-1", 1)))
    node = driver.order(spec)
    assert huawei_emulator.stats()["faults"] == {"LostResponse": 1}
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert [n.id for n in driver.list_nodes("lost-1")] == [node.id]
    assert node.tags["metalfleet:key"] == spec.idempotency_key and node.name == "lost-1-0"


def test_a_lost_answer_past_the_grace_is_retried_and_buys_nothing_twice(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(script=[{"action": "ListBareMetalServers", "code": "BMS.9999", "status": 500,
                                        "after": 1, "times": 1}],
                               lost_response=1.0, actions=["CreateBareMetalServers"], seed=1)
    driver = huawei_driver(huawei_emulator, lost_answer_grace=0.0)
    [spec] = plan(driver, parse_spec(huawei_spec_data("lost-2", 1)))
    with pytest.raises(TransientError):
        driver.order(spec)  # the answer was lost and the one look after it failed too
    node = FAST.call(driver.order, spec)  # the retry looks first: the server the lost call ordered
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert [n.id for n in driver.list_nodes("lost-2")] == [node.id]


def test_a_rerun_with_a_fresh_driver_orders_nothing(huawei_emulator: HuaweiEmulator) -> None:
    spec = parse_spec(huawei_spec_data("rerun", 3))
    first = huawei_driver(huawei_emulator)
    nodes = order_cluster(first, plan(first, spec), policy=FAST, timeout=30)
    creates = huawei_emulator.calls("CreateBareMetalServers")
    again = huawei_driver(huawei_emulator)
    assert [n.id for n in order_cluster(again, plan(again, spec), policy=FAST, timeout=30)] == [n.id for n in nodes]
    assert huawei_emulator.calls("CreateBareMetalServers") == creates == 3
    assert release_cluster(again, "rerun", policy=FAST)


def test_prepaid_orders_and_its_release_is_refused_naming_billing(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    [spec] = plan(driver, parse_spec({**huawei_spec_data("prepaid", 1), "capacity": {"billing": "monthly"}}))
    request = driver.create_request(spec)["server"]["extendparam"]
    assert request == {"chargingMode": "prePaid", "periodType": "month", "periodNum": 1, "isAutoRenew": "false",
                       "isAutoPay": "true"}
    node = driver.order(spec)
    [running] = driver.wait([node.id], timeout=10, poll=0.02)
    assert running.extra["charging_mode"] == "1"
    with pytest.raises(InvalidSpecError) as info:
        driver.release(node.id)
    assert info.value.field == "capacity.billing" and "unsubscribe" in str(info.value)
    huawei_emulator.reset_state()  # the emulator stands in for the billing centre's unsubscribe


def test_a_prepaid_only_flavor_refuses_on_demand_before_any_call() -> None:
    spec = NodeSpec(cluster="c", index=0, offering="physical.x", region=REGION, image="i")
    with pytest.raises(InvalidSpecError) as info:
        check_billing(spec, ("prePaid",))
    assert info.value.field == "capacity.billing" and info.value.value == "on_demand"
    assert "monthly" in str(info.value)
    check_billing(spec, ("postPaid", "prePaid"))


def test_bad_specs_name_their_field_offline(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    [good] = plan(driver, parse_spec(huawei_spec_data("bad", 1)))
    before = huawei_emulator.calls()
    cases: dict[str, dict[str, object]] = {"network.security_group_ids": {"security_group_ids": ()},
             "network.ssh_ingress_cidrs": {"ssh_ingress_cidrs": ("127.0.0.1/32",)},
             "zone": {"zone": "us-east-1a"}, "network.vpc_id": {"vpc_id": "vpc-1"},
             "ssh.key_pair": {"key_name": None}, "capacity.billing": {"billing": BillingModel.SPOT},
             "tags.bad key!": {"tags": {"bad key!": "x"}}}
    for field, change in cases.items():
        values = {f: getattr(good, f) for f in good.__dataclass_fields__}
        bad = NodeSpec(**{**values, **change})
        with pytest.raises(InvalidSpecError) as info:
            driver.order(bad)
        assert info.value.field == field, (field, info.value)
    assert huawei_emulator.calls() == before


def test_set_tags_adds_and_keeps_the_others(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    [node] = order_cluster(driver, plan(driver, parse_spec(huawei_spec_data("tags", 1))), policy=FAST, timeout=30)
    driver.set_tags(node.id, {"metalfleet:acceptance": "quarantined", "metalfleet:acceptance-reason": "npu-health"})
    tags = huawei_driver(huawei_emulator).get(node.id).tags
    assert tags["metalfleet:acceptance"] == "quarantined" and tags["metalfleet:cluster"] == "tags"
    assert tags["owner"] == "contract-suite"
    with pytest.raises(NotFoundError):
        driver.set_tags("00000000-0000-4000-8000-000000000000", {"a": "b"})
    release_cluster(driver, "tags", policy=FAST)
    assert driver.get(node.id).state == NodeState.TERMINATED


def test_the_create_request_has_the_shape_the_sdk_sends(huawei_emulator: HuaweiEmulator) -> None:
    """The captured SDK create (tests/support/fixtures/wire) and the driver's body use the same keys, each one a
    field of the SDK's CreateServers model."""
    from huaweicloudsdkbms.v1.model.create_servers import CreateServers
    from huaweicloudsdkbms.v1.model.extend_param import ExtendParam
    from huaweicloudsdkbms.v1.model.root_volume import RootVolume

    captured = [json.loads(line) for line in CAPTURE.read_text().splitlines()]
    create = next(c for c in captured if c["method"] == "POST" and c["path"].endswith("/baremetalservers"))
    sdk_server = json.loads(create["body"])["server"]
    driver = huawei_driver(huawei_emulator)
    [spec] = plan(driver, parse_spec({**huawei_spec_data("shape", 1),
                                      "storage": {"kms_key_id": "0f0e0d0c-0b0a-4908-8706-050403020100",
                                                  "data": [{"size_gib": 1000}]}}))
    ours = driver.create_request(spec)["server"]
    assert set(ours) == set(sdk_server)
    fields = set(CreateServers.attribute_map.values())
    assert set(ours) <= fields
    assert set(ours["extendparam"]) <= set(ExtendParam.attribute_map.values())
    assert set(ours["root_volume"]) <= set(RootVolume.attribute_map.values())
    assert set(ours["root_volume"]["metadata"]) == set(sdk_server["root_volume"]["metadata"])
    assert ours["metadata_options"] == sdk_server["metadata_options"] == {"http_tokens": "required"}
    assert "publicip" not in ours, "no EIP unless the spec asks"
    assert driver.create_request(spec) == driver.create_request(spec)


def test_importing_the_package_loads_no_sdk() -> None:
    code = ("import sys, metalfleet.providers.huawei; "
            "print([m for m in sys.modules if m.startswith('huaweicloud')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_registry_builds_it_and_a_pickle_holds_no_secret(huawei_emulator: HuaweiEmulator) -> None:
    driver = get_driver("huawei", region=REGION, project_id=PROJECT_ID, endpoint=huawei_emulator.url,
                        sk=TEST_SK)
    assert isinstance(driver, HuaweiDriver)
    blob = pickle.dumps(driver)
    assert TEST_SK.encode() not in blob
    again = pickle.loads(blob)
    assert [o.name for o in again.offerings()] == [o.name for o in driver.offerings()]  # keys from the env


def test_the_cluster_spec_refuses_tags_huawei_would_refuse() -> None:
    with pytest.raises(InvalidSpecError) as info:
        parse_spec({**huawei_spec_data("tags-spec", 1), "tags": {"owner": "a,b"}})
    assert info.value.field == "tags.owner" and info.value.value == "a,b"
    with pytest.raises(InvalidSpecError) as info:
        parse_spec({**huawei_spec_data("tags-spec", 1), "tags": {"_sys_x": "y"}})
    assert info.value.field == "tags._sys_x"
    assert parse_spec({**huawei_spec_data("tags-spec", 1), "tags": {"cost-center": "4711", "team": "ml/a@b"}})


def test_wait_rides_out_throttled_reads(huawei_emulator: HuaweiEmulator) -> None:
    """BMS has no batch status call: a poll is one read per server, and a throttled read only skips that round."""
    driver = huawei_driver(huawei_emulator)
    nodes = order_cluster(driver, plan(driver, parse_spec(huawei_spec_data("wait-429", 2))), policy=FAST,
                          timeout=30, wait=False)
    huawei_emulator.set_faults(script=[{"action": "ShowBaremetalServerDetails", "code": "APIGW.0308",
                                        "status": 429, "times": 4}])
    running = driver.wait([n.id for n in nodes], timeout=30, poll=0.05)  # no retry policy around it
    assert all(n.state == NodeState.RUNNING for n in running)
    assert huawei_emulator.stats()["faults"] == {"APIGW.0308": 4}
    release_cluster(driver, "wait-429", policy=FAST)
