"""The Huawei driver over HTTP: idempotent ordering without a client token, on documented ground only (lost
answers, re-runs, look-alike servers), yearly/monthly billing and its BSS order, tags, the request it sends, and its
packaging (no SDK at import, registry, pickling)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from metalfleet.providers import (
    AuthError,
    InvalidSpecError,
    NodeSpec,
    NodeState,
    NotFoundError,
    RetryPolicy,
    TransientError,
    get_driver,
    node_specs_for,
    order_cluster,
    parse_spec,
    release_cluster,
)
from metalfleet.providers.huawei import SOLD_BILLING, HuaweiDriver, billing_problem
from metalfleet.providers.huawei.request import key_tag
from metalfleet.providers.models import BillingModel
from metalfleet.testing.huawei import DOMAIN_ID, PROJECT_ID, REGION, TEST_SK, USER_ID, HuaweiEmulator
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data

CAPTURE = Path(__file__).parents[1] / "support" / "fixtures" / "wire" / "huawei-bms-sdk-3.1.219.jsonl"
FAST = RetryPolicy(attempts=8, base=0.001, cap=0.01)


def _lookups(emulator: HuaweiEmulator) -> list[dict[str, str]]:
    return [r["params"]["query"] for r in emulator.requests("ListBareMetalServers")]


def test_a_create_whose_answer_is_lost_is_found_by_its_name_and_key(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(lost_response=1.0, actions=["CreateBareMetalServers"], seed=1)
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("lost-1", 1)))
    node = driver.order(spec)
    assert huawei_emulator.stats()["faults"] == {"LostResponse": 1}
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert [n.id for n in driver.list_nodes("lost-1")] == [node.id]
    assert node.tags["metalfleet:key"] == key_tag(spec.idempotency_key) and node.name == "lost-1-0"
    # found on documented ground: the name filter, never ListBareMetalServers' undocumented tag filter
    assert _lookups(huawei_emulator) and all("tags" not in q for q in _lookups(huawei_emulator))
    assert {q.get("name") for q in _lookups(huawei_emulator)} >= {"lost-1-0"}


def test_a_lost_answer_past_the_grace_is_retried_and_buys_nothing_twice(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(script=[{"action": "ListBareMetalServers", "code": "BMS.9999", "status": 500,
                                        "after": 1, "times": 1}],
                               lost_response=1.0, actions=["CreateBareMetalServers"], seed=1)
    driver = huawei_driver(huawei_emulator, lost_answer_grace=0.0)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("lost-2", 1)))
    with pytest.raises(TransientError):
        driver.order(spec)  # the answer was lost and the one look after it failed too
    node = FAST.call(driver.order, spec)  # the retry looks first: the server the lost call ordered
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert [n.id for n in driver.list_nodes("lost-2")] == [node.id]


def test_a_rerun_with_a_fresh_driver_orders_nothing(huawei_emulator: HuaweiEmulator) -> None:
    spec = parse_spec(huawei_spec_data("rerun", 3))
    first = huawei_driver(huawei_emulator)
    nodes = order_cluster(first, node_specs_for(first, spec), policy=FAST, timeout=30)
    creates = huawei_emulator.calls("CreateBareMetalServers")
    again = huawei_driver(huawei_emulator)
    reordered = order_cluster(again, node_specs_for(again, spec), policy=FAST, timeout=30)
    assert [n.id for n in reordered] == [n.id for n in nodes]
    assert huawei_emulator.calls("CreateBareMetalServers") == creates == 3
    assert release_cluster(again, "rerun", policy=FAST, unsubscribe=True)


def test_look_alike_servers_are_not_taken_for_the_node(huawei_emulator: HuaweiEmulator) -> None:
    """The name filter matches fuzzily (look-1 also answers look-10), and a server may carry the node's name
    without its key: the driver compares both itself, so neither is adopted and nothing is bought twice."""
    from huaweicloudsdkbms.v1 import CreateBareMetalServersRequest

    driver = huawei_driver(huawei_emulator)
    specs = node_specs_for(driver, parse_spec(huawei_spec_data("look", 11)))
    tenth = driver.order(specs[10])
    assert tenth.name == "look-10"
    body = driver.create_request(specs[1])  # a server named look-1 that metalfleet did not order (no key tag)
    body["server"]["server_tags"] = [t for t in body["server"]["server_tags"] if t["key"] != "metalfleet:key"]
    stranger = driver._bms().create_bare_metal_servers(CreateBareMetalServersRequest(body=body))
    assert stranger.order_id
    first = driver.order(specs[1])
    assert first.id != tenth.id and first.tags["metalfleet:key"] == key_tag(specs[1].idempotency_key)
    assert driver.order(specs[1]).id == first.id  # and found again, once
    assert huawei_emulator.calls("CreateBareMetalServers") == 3
    assert sorted(n.name or "" for n in driver.list_nodes("look")) == ["look-1", "look-1", "look-10"]
    assert len(release_cluster(driver, "look", policy=FAST, unsubscribe=True)) == 3
    assert driver.list_nodes("look") == []


def test_an_order_returns_once_its_bss_order_is_completed(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_timing(0.4)
    huawei_emulator.set_faults(script=[{"action": "ShowCustomerOrderDetails", "code": "APIGW.0308", "status": 429,
                                        "times": 3}])
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("paid", 1)))
    node = driver.order(spec)  # throttled order reads are ridden out, no retry policy around it
    assert node.state == NodeState.RUNNING and node.extra["charging_mode"] == "1"
    order_id = node.extra["order_id"]
    billing = huawei_emulator.billing()
    assert billing["orders"][order_id]["status"] == 5 and billing["orders"][order_id]["servers"] == [node.id]
    assert billing["resources"][node.id]["expire_time"] > billing["resources"][node.id]["effective_time"]
    assert huawei_emulator.stats()["faults"] == {"APIGW.0308": 3}
    statuses = [r["status"] for r in huawei_emulator.requests("ShowCustomerOrderDetails")]
    assert statuses[:3] == [429, 429, 429] and statuses[-1] == 200
    release_cluster(driver, "paid", policy=FAST, unsubscribe=True)


@pytest.mark.parametrize(("billing", "period"), [("monthly", ("month", 1)), ("reserved_1y", ("year", 1))])
def test_what_bms_sells_is_ordered_prepaid(huawei_emulator: HuaweiEmulator, billing: str,
                                          period: tuple[str, int]) -> None:
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec({**huawei_spec_data(f"sold-{billing.replace('_', '-')}", 1),
                                      "capacity": {"billing": billing, "release_subscriptions": True}}))
    assert driver.create_request(spec)["server"]["extendparam"] == {
        "chargingMode": "prePaid", "periodType": period[0], "periodNum": period[1], "isAutoRenew": "false",
        "isAutoPay": "true"}
    node = driver.order(spec)
    [sub] = driver.subscriptions([node.id])
    line = huawei_emulator.billing()["orders"][node.extra["order_id"]]["order_line_items"][0]
    assert (line["period_type"], line["period_num"]) == ((3 if period[0] == "year" else 2), 1)
    assert sub.expires_at == line["expire_time"] and sub.node_id == node.id and sub.name == node.name
    start, end = line["effective_time"], line["expire_time"]
    months = (int(end[:4]) - int(start[:4])) * 12 + int(end[5:7]) - int(start[5:7])
    assert months == (12 if period[0] == "year" else 1)
    release_cluster(driver, spec.cluster, policy=FAST, unsubscribe=True)


@pytest.mark.parametrize("billing", ["on_demand", "spot", "reserved_3y", "capacity_block"])
def test_what_bms_does_not_sell_is_refused_offline_naming_capacity_billing(huawei_emulator: HuaweiEmulator,
                                                                           billing: str) -> None:
    assert BillingModel(billing) not in SOLD_BILLING and billing_problem(BillingModel(billing))
    driver = huawei_driver(huawei_emulator)
    [good] = node_specs_for(driver, parse_spec(huawei_spec_data("unsold", 1)))
    values = {f: getattr(good, f) for f in good.__dataclass_fields__}
    before = huawei_emulator.calls()
    with pytest.raises(InvalidSpecError) as info:
        driver.order(NodeSpec(**{**values, "billing": BillingModel(billing)}))
    assert info.value.field == "capacity.billing" and info.value.value == billing
    assert ("monthly" in str(info.value)) and ("reserved_1y" in str(info.value))
    assert huawei_emulator.calls() == before


def test_the_sold_billing_models_are_the_yearly_monthly_ones() -> None:
    assert {BillingModel.MONTHLY, BillingModel.RESERVED_1Y} == SOLD_BILLING
    assert billing_problem(BillingModel.MONTHLY) is None and billing_problem(BillingModel.RESERVED_1Y) is None
    assert "periodNum is 1" in (billing_problem(BillingModel.RESERVED_3Y) or "")
    assert "prePaid" in (billing_problem(BillingModel.ON_DEMAND) or "")


def test_bad_specs_name_their_field_offline(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    [good] = node_specs_for(driver, parse_spec(huawei_spec_data("bad", 1)))
    before = huawei_emulator.calls()
    cases: dict[str, dict[str, object]] = {"network.security_group_ids": {"security_group_ids": ()},
             "network.ssh_ingress_cidrs": {"ssh_ingress_cidrs": ("127.0.0.1/32",)},
             "network.public_ip": {"public_ip": True},
             "zone": {"zone": "us-east-1a"}, "network.vpc_id": {"vpc_id": "vpc-1"},
             "ssh.key_pair": {"key_name": None}, "capacity.billing": {"billing": BillingModel.SPOT},
             "tags.bad key|": {"tags": {"bad key|": "x"}},
             "tags": {"tags": {f"t{i}": "v" for i in range(6)}},  # 6 + metalfleet's 4 > the 9 server_tags
             "storage.root.type": {"root_volume": type(good.root_volume)(size_gib=100, volume_type="ESSD2",
                                                                         kms_key_id=good.root_volume.kms_key_id)},
             "name": {"cluster": "c" * 44}}
    for field, change in cases.items():
        values = {f: getattr(good, f) for f in good.__dataclass_fields__}
        bad = NodeSpec(**{**values, **change})
        with pytest.raises(InvalidSpecError) as info:
            driver.order(bad)
        assert info.value.field == field, (field, info.value)
    assert huawei_emulator.calls() == before


def test_ordering_needs_the_user_and_account_ids(huawei_emulator: HuaweiEmulator,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METALFLEET_HUAWEI_USER_ID")
    monkeypatch.delenv("HUAWEICLOUD_SDK_DOMAIN_ID")
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("ids", 1)))
    with pytest.raises(AuthError) as info:
        driver.order(spec)
    assert info.value.code == "NoUserId"
    assert huawei_emulator.calls("CreateBareMetalServers") == 0
    with pytest.raises(AuthError) as bss:
        huawei_driver(huawei_emulator, user_id=USER_ID).subscriptions(["x"])
    assert bss.value.code == "NoDomainId"


def test_set_tags_adds_overwrites_and_keeps_the_others(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    [node] = order_cluster(driver, node_specs_for(driver, parse_spec(huawei_spec_data("tags", 1))), policy=FAST,
                           timeout=30)
    driver.set_tags(node.id, {"metalfleet:acceptance": "passed"})
    driver.set_tags(node.id, {"metalfleet:acceptance": "quarantined",
                              "metalfleet:acceptance-reason": "npu 3: HBM <low>, see /var/log"})
    tags = huawei_driver(huawei_emulator).get(node.id).tags
    assert tags["metalfleet:acceptance"] == "quarantined" and tags["metalfleet:cluster"] == "tags"
    assert tags["metalfleet:acceptance-reason"] == "npu 3: HBM  low   see  var log"
    assert tags["owner"] == "contract-suite"
    with pytest.raises(NotFoundError):
        driver.set_tags("00000000-0000-4000-8000-000000000000", {"a": "b"})
    with pytest.raises(InvalidSpecError) as info:
        driver.set_tags(node.id, {"k" * 37: "v"})
    assert info.value.field == "tags." + "k" * 37
    release_cluster(driver, "tags", policy=FAST, unsubscribe=True)
    assert driver.get(node.id).state == NodeState.TERMINATED


def test_the_create_request_has_the_shape_the_sdk_sends(huawei_emulator: HuaweiEmulator) -> None:
    """The captured SDK create (tests/support/fixtures/wire) and the driver's body use the same keys (the driver's
    adds the required metadata.op_svc_userid), each one a field of the SDK's CreateServers model."""
    from huaweicloudsdkbms.v1.model.create_servers import CreateServers
    from huaweicloudsdkbms.v1.model.extend_param import ExtendParam
    from huaweicloudsdkbms.v1.model.meta_data_info import MetaDataInfo
    from huaweicloudsdkbms.v1.model.root_volume import RootVolume

    captured = [json.loads(line) for line in CAPTURE.read_text().splitlines()]
    create = next(c for c in captured if c["method"] == "POST" and c["path"].endswith("/baremetalservers"))
    sdk_server = json.loads(create["body"])["server"]
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec({**huawei_spec_data("shape", 1),
                                      "storage": {"kms_key_id": "0f0e0d0c-0b0a-4908-8706-050403020100",
                                                  "data": [{"size_gib": 1000}]}}))
    ours = driver.create_request(spec)["server"]
    assert set(ours) == set(sdk_server) | {"metadata"}
    assert set(ours) <= set(CreateServers.attribute_map.values())
    assert set(ours["metadata"]) == {"op_svc_userid"} <= set(MetaDataInfo.attribute_map.values())
    assert ours["metadata"]["op_svc_userid"] == USER_ID
    assert set(ours["extendparam"]) <= set(ExtendParam.attribute_map.values())
    assert set(ours["root_volume"]) <= set(RootVolume.attribute_map.values())
    assert set(ours["root_volume"]["metadata"]) == set(sdk_server["root_volume"]["metadata"])
    assert ours["metadata_options"] == sdk_server["metadata_options"] == {"http_tokens": "required"}
    assert "publicip" not in ours, "no EIP"
    assert len(ours["server_tags"]) <= 9 and all(len(t["value"]) <= 43 for t in ours["server_tags"])
    assert driver.create_request(spec) == driver.create_request(spec)


def test_importing_the_package_loads_no_sdk() -> None:
    code = ("import sys, metalfleet.providers.huawei; "
            "print([m for m in sys.modules if m.startswith('huaweicloud')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_registry_builds_it_and_a_pickle_holds_no_secret(huawei_emulator: HuaweiEmulator) -> None:
    driver = get_driver("huawei", region=REGION, project_id=PROJECT_ID, endpoint=huawei_emulator.url,
                        bss_endpoint=huawei_emulator.url, sk=TEST_SK)
    assert isinstance(driver, HuaweiDriver)
    blob = pickle.dumps(driver)
    assert TEST_SK.encode() not in blob
    again = pickle.loads(blob)
    assert (again.domain_id, again.user_id, again.bss_endpoint) == (DOMAIN_ID, USER_ID, huawei_emulator.url)
    assert [o.name for o in again.offerings()] == [o.name for o in driver.offerings()]  # keys from the env


def test_the_cluster_spec_refuses_tags_huawei_would_refuse() -> None:
    for tags, field in (({"owner": "a,b"}, "tags.owner"), ({"_sys_x": "y"}, "tags._sys_x"),
                        ({"team": "ml/a"}, "tags.team"), ({"k" * 37: "v"}, "tags." + "k" * 37),
                        ({"owner": "v" * 44}, "tags.owner")):
        with pytest.raises(InvalidSpecError) as info:
            parse_spec({**huawei_spec_data("tags-spec", 1), "tags": tags})
        assert info.value.field == field, tags
    assert parse_spec({**huawei_spec_data("tags-spec", 1), "tags": {"cost-center": "4711", "team": "ml a@b:c"}})


def test_wait_rides_out_throttled_reads(huawei_emulator: HuaweiEmulator) -> None:
    """BMS has no batch status call: a poll is one read per server, and a throttled read only skips that round."""
    driver = huawei_driver(huawei_emulator)
    nodes = order_cluster(driver, node_specs_for(driver, parse_spec(huawei_spec_data("wait-429", 2))), policy=FAST,
                          timeout=30, wait=False)
    huawei_emulator.set_faults(script=[{"action": "ShowBaremetalServerDetails", "code": "APIGW.0308",
                                        "status": 429, "times": 4}])
    fresh = huawei_driver(huawei_emulator)  # knows no last state to keep while a read is throttled
    running = fresh.wait([n.id for n in nodes], timeout=30, poll=0.05)  # no retry policy around it
    assert all(n.state == NodeState.RUNNING for n in running)
    assert huawei_emulator.stats()["faults"] == {"APIGW.0308": 4}
    release_cluster(driver, "wait-429", policy=FAST, unsubscribe=True)
