"""Yearly/monthly servers end only through BSS, and only when asked: the refusal names each node's expiry and what
unsubscribing refunds; with the opt-in, CancelResourcesSubscription (its disks with it) and BMS deletes the server;
every half-done state a kill or a lost answer can leave is finished by running the release again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from metalfleet.providers import NodeState, RetryPolicy, node_specs_for, order_cluster, parse_spec, release_cluster
from metalfleet.providers.errors import SubscriptionError
from metalfleet.providers.huawei import HuaweiDriver
from metalfleet.providers.huawei.billing import FULL_REFUND_DAYS, Resource, subscription_of
from metalfleet.testing.huawei import HuaweiEmulator
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data

FAST = RetryPolicy(attempts=8, base=0.001, cap=0.01)


def _ordered(emulator: HuaweiEmulator, name: str, count: int = 1) -> tuple[HuaweiDriver, list[str]]:
    driver = huawei_driver(emulator)
    spec = parse_spec({**huawei_spec_data(name, count), "capacity": {"billing": "monthly"}})
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=30)
    return driver, [n.id for n in nodes]


def test_a_release_without_the_opt_in_is_refused_naming_expiry_and_refund(huawei_emulator: HuaweiEmulator) -> None:
    driver, [node_id] = _ordered(huawei_emulator, "sub-refused")
    resource = huawei_emulator.billing()["resources"][node_id]
    with pytest.raises(SubscriptionError) as info:
        driver.release(node_id)
    message = str(info.value)
    assert node_id in message and resource["expire_time"] in message and "refunds it in full" in message
    assert info.value.field == "capacity.release_subscriptions" and info.value.code == "SubscriptionNotReleased"
    [sub] = info.value.subscriptions
    assert (sub.node_id, sub.expires_at, sub.name) == (node_id, resource["expire_time"], "sub-refused-0")
    assert huawei_emulator.calls("CancelResourcesSubscription") == 0
    assert driver.get(node_id).state == NodeState.RUNNING
    release_cluster(driver, "sub-refused", policy=FAST, unsubscribe=True)


def test_unsubscribing_ends_the_server_and_its_disks_once(huawei_emulator: HuaweiEmulator) -> None:
    driver, [node_id] = _ordered(huawei_emulator, "sub-ended")
    before = huawei_emulator.billing()["resources"]
    disks = [k for k, r in before.items() if r["parent_resource_id"] == node_id]
    assert disks and before[node_id]["is_main_resource"] == 1
    driver.release(node_id, unsubscribe=True, timeout=30)
    [call] = huawei_emulator.requests("CancelResourcesSubscription")
    assert call["params"]["body"] == {"resource_ids": [node_id], "unsubscribe_type": 1}
    assert driver.get(node_id).state == NodeState.TERMINATED
    billing = huawei_emulator.billing()
    assert not {node_id, *disks} & set(billing["resources"])
    assert [o["order_type"] for o in billing["orders"].values() if o["servers"] == [node_id]] == [1, 4]
    assert driver.subscriptions([node_id]) == []
    driver.release(node_id, unsubscribe=True)  # gone: a no-op
    assert huawei_emulator.calls("CancelResourcesSubscription") == 1


def test_a_lost_unsubscribe_answer_is_finished_by_the_retry(huawei_emulator: HuaweiEmulator) -> None:
    driver, [node_id] = _ordered(huawei_emulator, "sub-lost")
    huawei_emulator.set_faults(lost_response=1.0, actions=["CancelResourcesSubscription"], seed=1)
    FAST.call(driver.release, node_id, unsubscribe=True, timeout=30)
    assert huawei_emulator.stats()["faults"] == {"LostResponse": 1}
    assert huawei_emulator.calls("CancelResourcesSubscription") == 1, "the retry saw the server deleting"
    assert driver.get(node_id).state == NodeState.TERMINATED


def test_an_unsubscription_bss_already_took_is_not_an_error(huawei_emulator: HuaweiEmulator) -> None:
    """A release that saw the server before an earlier run's unsubscription showed (BSS answers the transaction in
    progress, CBC.99003651) waits for it to go; one that finds the term deleted (CBC.30000067) is done."""
    driver, [node_id] = _ordered(huawei_emulator, "sub-taken")
    stale = driver.get(node_id)
    driver._billing.unsubscribe(node_id)  # another run's unsubscription
    assert driver._unsubscribe(stale) is True
    assert [r["status"] for r in huawei_emulator.requests("CancelResourcesSubscription")] == [200, 400]
    assert huawei_emulator.requests("CancelResourcesSubscription")[-1]["rules"] == ["unsubscribe-in-progress"]
    driver.release(node_id, timeout=30)  # being deleted: no opt-in needed to wait
    assert driver._unsubscribe(stale) is False
    assert huawei_emulator.requests("CancelResourcesSubscription")[-1]["rules"] == ["unsubscribe-gone"]


def test_subscriptions_lists_only_terms_bss_holds(huawei_emulator: HuaweiEmulator) -> None:
    driver, ids = _ordered(huawei_emulator, "sub-list", 2)
    subs = driver.subscriptions([*ids, "00000000-0000-4000-8000-00000000abcd"])
    assert sorted(s.node_id for s in subs) == sorted(ids)
    assert all(s.charge_type == "yearly/monthly (prePaid)" and "CancelResourcesSubscription" in s.how for s in subs)
    queries = [r["params"]["body"] for r in huawei_emulator.requests("ListPayPerUseCustomerResources")]
    assert queries[-1]["only_main_resource"] == 1 and sorted(queries[-1]["resource_ids"]) == sorted(
        [*ids, "00000000-0000-4000-8000-00000000abcd"])
    release_cluster(driver, "sub-list", policy=FAST, unsubscribe=True)


def test_what_unsubscribing_refunds_is_said_as_far_as_bss_says_it_before() -> None:
    bought = datetime(2026, 1, 10, tzinfo=UTC)
    resource = Resource(resource_id="s-1", name="c-0", status=2, is_main=True,
                        effective_time="2026-01-10T00:00:00Z", expire_time="2026-02-10T00:00:00Z")
    early = subscription_of(resource, bought + timedelta(days=FULL_REFUND_DAYS - 1))
    late = subscription_of(resource, bought + timedelta(days=FULL_REFUND_DAYS + 1))
    assert "in full" in (early.refund or "") and "2026-01-10T00:00:00Z" in (early.refund or "")
    assert "unused term" in (late.refund or "") and "ShowRefundOrderDetails" in (late.refund or "")
    assert early.expires_at == late.expires_at == "2026-02-10T00:00:00Z"
