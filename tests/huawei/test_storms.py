"""The Huawei driver under throttling storms, lost answers and racing runs, over HTTP against the emulator.

The SDK retries nothing by itself (every throttled call reaches the emulator once and comes back with the gateway's
own code and request id); a throttled create costs no lost-answer grace, a lost one does; a wait or an order
wait rides out throttled reads and, when the storm outlasts its timeout, ends with OperationTimeout in bounded
time; and two runs ordering one node at once (BMS has no client token) converge on its oldest server, the other
one unsubscribed.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests

from metalfleet.providers import (
    MetalfleetError,
    NodeSpec,
    NodeState,
    OperationTimeout,
    RateLimitedError,
    RetryPolicy,
    TransientError,
    node_specs_for,
    order_cluster,
    parse_spec,
)
from metalfleet.providers.huawei import HuaweiDriver
from metalfleet.providers.huawei.errors import translate_sdk_error
from metalfleet.providers.huawei.jobs import follow_job
from metalfleet.providers.huawei.request import create_request, key_tag
from metalfleet.providers.huawei.transport import RetryAfterExceptionHandler, retry_after_seconds
from metalfleet.testing.huawei import USER_ID, HuaweiEmulator
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data

FAST = RetryPolicy(base=0.001, cap=0.01, deadline=60)
THROTTLE = {"code": "APIGW.0308", "status": 429, "message": "The throttling threshold has been reached: policy user "
            "over ratelimit,limit:20,time:1 second"}
#: A generous bound that proves "did not hang" (the measured hangs were 900 s and more), not a timing.
NO_HANG = 30.0


def _one(driver: HuaweiDriver, name: str) -> NodeSpec:
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data(name, 1)))
    return spec


def _live(driver: HuaweiDriver, cluster: str) -> list[Any]:
    """The cluster's servers that are neither gone nor being deleted."""
    return [n for n in driver.list_nodes(cluster) if n.extra.get("task_state") != "deleting"]


# -- the SDK never retries by itself --------------------------------------------------------------------------------
def _sdk_calls(driver: HuaweiDriver, emulator: HuaweiEmulator) -> dict[str, Any]:
    spec = _one(driver, "sdk-calls")
    node = driver.order(spec)
    return {
        "ShowBaremetalServerDetails": lambda: driver.get(node.id),
        "ListBareMetalServers": lambda: driver.list_nodes("sdk-calls"),
        "ShowCustomerOrderDetails": lambda: driver._billing.order_status(str(node.extra["order_id"])),
        "ListPayPerUseCustomerResources": lambda: driver.subscriptions([node.id]),
        "CreateBareMetalServers": lambda: driver.order(_one(driver, "sdk-calls-2")),
    }


@pytest.mark.parametrize("action", ["ShowBaremetalServerDetails", "ListBareMetalServers", "ShowCustomerOrderDetails",
                                    "ListPayPerUseCustomerResources", "CreateBareMetalServers"])
def test_a_throttled_call_reaches_the_service_once_and_keeps_the_gateways_answer(
        huawei_emulator: HuaweiEmulator, action: str) -> None:
    driver = huawei_driver(huawei_emulator)
    call = _sdk_calls(driver, huawei_emulator)[action]
    before = huawei_emulator.calls(action)
    huawei_emulator.set_faults(script=[{"action": action, **THROTTLE, "times": 1}])
    with pytest.raises(RateLimitedError) as info:
        call()  # no RetryPolicy: whatever retrying happens here would be the SDK's
    assert huawei_emulator.calls(action) == before + 1, "the SDK sent the throttled call again by itself"
    # the gateway's own code and request id: not urllib3's "too many 429 error responses" with a bodiless 429
    assert info.value.code == "APIGW.0308" and info.value.request_id
    assert "too many 429" not in str(info.value)
    assert info.value.retry_after is None  # the emulator sends no Retry-After (no reference says the gateway does)


class RetryingSdkDriver(HuaweiDriver):  # type: ignore[misc]  # (metalfleet.* is Any to mypy here)
    """A driver whose HttpConfig asks the SDK for 3 retries: its transport must still retry nothing."""

    def _config(self) -> Any:
        config = super()._config()
        config.retry_times = 3
        return config


def test_even_an_sdk_told_to_retry_sends_a_throttled_call_once(huawei_emulator: HuaweiEmulator) -> None:
    from metalfleet.testing.huawei import PROJECT_ID, REGION

    driver = RetryingSdkDriver(region=REGION, project_id=PROJECT_ID, endpoint=huawei_emulator.url,
                               bss_endpoint=huawei_emulator.url, poll=0.02)
    huawei_emulator.set_faults(script=[{"action": "ListBaremetalFlavorDetailExtends", **THROTTLE, "times": 1}])
    with pytest.raises(RateLimitedError):
        driver.offerings()
    assert huawei_emulator.calls("ListBaremetalFlavorDetailExtends") == 1
    assert driver.offerings()  # the next call (the policy's retry) is answered


def test_a_retry_after_header_is_kept_on_the_rate_limited_error() -> None:
    from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException

    answer = requests.Response()
    answer.status_code = 429
    answer._content = b'{"error_code": "APIGW.0308", "error_msg": "The throttling threshold has been reached"}'
    answer.headers["Retry-After"] = "7"
    answer.headers["X-Request-Id"] = "r-1"
    with pytest.raises(ClientRequestException) as info:
        RetryAfterExceptionHandler.new().handle_exception(None, answer)
    err = translate_sdk_error(info.value, "ListBareMetalServers")
    assert isinstance(err, RateLimitedError) and err.retry_after == 7.0 and err.request_id == "r-1"
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date already past: retry now
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None


# -- a throttled create costs no lost-answer grace; a lost answer does ------------------------------------------------
def test_a_throttled_create_is_retried_at_once_without_looking_for_a_server(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator, lost_answer_grace=30.0)
    spec = _one(driver, "throttled-create")
    huawei_emulator.set_faults(script=[{"action": "CreateBareMetalServers", **THROTTLE, "times": 1}])
    started = time.monotonic()
    node = FAST.call(driver.order, spec)
    assert huawei_emulator.calls("CreateBareMetalServers") == 2
    # one lookup before each create and the one re-read that converges: no grace spent looking for a server a
    # 429 never made (30 s of lookups every 0.02 s would be hundreds)
    assert huawei_emulator.calls("ListBareMetalServers") == 3
    assert [n.id for n in _live(driver, "throttled-create")] == [node.id]
    assert time.monotonic() - started < NO_HANG


def test_a_create_whose_answer_is_lost_is_looked_for_and_found(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator, lost_answer_grace=30.0)
    spec = _one(driver, "lost-create")
    huawei_emulator.set_faults(lost_response=1.0, actions=["CreateBareMetalServers"], seed=2)
    node = driver.order(spec)  # no retry needed: the grace found what the lost answer ordered
    assert huawei_emulator.stats()["faults"] == {"LostResponse": 1}
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert [n.id for n in _live(driver, "lost-create")] == [node.id]


def test_a_create_whose_answer_times_out_is_transient_and_found(huawei_emulator: HuaweiEmulator) -> None:
    # the read timeout the SDK lets through as a bare requests error: the boundary makes it a lost answer
    driver = huawei_driver(huawei_emulator, read_timeout=0.3, lost_answer_grace=30.0)
    spec = _one(driver, "slow-create")
    huawei_emulator.set_faults(latency_ms=1200, actions=["CreateBareMetalServers"])
    node = FAST.call(driver.order, spec)
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert [n.id for n in _live(driver, "slow-create")] == [node.id]
    huawei_emulator.set_faults(latency_ms=1200, actions=["ListBareMetalServers"])
    with pytest.raises(TransientError) as info:  # a read that times out: transient too (a GET's is urllib3's)
        driver.list_nodes("slow-create")
    assert info.value.retryable


# -- waits ride out throttled reads, and end in bounded time when the storm outlasts them -----------------------------
def test_a_wait_rides_out_half_of_its_reads_throttled(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    specs = node_specs_for(driver, parse_spec(huawei_spec_data("storm-wait", 3)))
    nodes = order_cluster(driver, specs, wait=False, policy=FAST)
    for n in nodes:
        driver.release(n.id, wait=False, unsubscribe=True)
    huawei_emulator.set_faults(throttle=0.5, seed=7)
    gone = driver.wait([n.id for n in nodes], NodeState.TERMINATED, timeout=120)
    assert [n.state for n in gone] == [NodeState.TERMINATED] * 3
    assert huawei_emulator.stats()["faults"].get("APIGW.0308", 0) > 0, "the storm never happened"


def test_a_wait_whose_every_read_is_throttled_times_out_within_its_timeout(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    node = driver.order(_one(driver, "storm-wait-all"))
    driver.release(node.id, wait=False, unsubscribe=True)
    huawei_emulator.set_faults(throttle=1.0, actions=["ShowBaremetalServerDetails"])
    started = time.monotonic()
    with pytest.raises(OperationTimeout) as info:
        FAST.call(driver.wait, [node.id], NodeState.TERMINATED, timeout=3)  # a timeout is not retried
    assert time.monotonic() - started < NO_HANG
    assert node.id in str(info.value) and "throttled" in str(info.value) and "APIGW.0308" in str(info.value)
    assert huawei_emulator.stats()["faults"]["APIGW.0308"] > 1, "the wait kept polling until its timeout"


def test_an_order_whose_status_reads_are_all_throttled_ends_at_its_job_timeout(
        huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator, job_timeout=3.0)
    spec = _one(driver, "storm-order")
    huawei_emulator.set_faults(script=[{"action": "ShowCustomerOrderDetails", **THROTTLE, "times": -1}])
    started = time.monotonic()
    with pytest.raises(OperationTimeout) as info:
        FAST.call(driver.order, spec)  # OperationTimeout, not the last 429: the policy does not wait it again
    assert time.monotonic() - started < NO_HANG
    assert info.value.code == "OrderNotCompleted" and "APIGW.0308" in str(info.value)
    assert huawei_emulator.calls("CreateBareMetalServers") == 1
    assert huawei_emulator.calls("ShowCustomerOrderDetails") > 1, "the order wait kept polling"


def test_an_order_rides_out_half_of_its_calls_throttled(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    specs = node_specs_for(driver, parse_spec(huawei_spec_data("storm-half", 4)))
    huawei_emulator.set_faults(throttle=0.5, seed=11)
    nodes = order_cluster(driver, specs, policy=FAST, timeout=120)
    assert huawei_emulator.stats()["faults"].get("APIGW.0308", 0) > 4, "the storm never happened"
    huawei_emulator.reset_faults()
    assert sorted(n.id for n in nodes) == sorted(n.id for n in _live(driver, "storm-half"))
    assert len(nodes) == 4 and all(n.state == NodeState.RUNNING for n in nodes)


def test_following_a_job_whose_polls_are_all_throttled_ends_at_its_timeout(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    driver.order(_one(driver, "storm-job"))
    [job_id] = [r["params"]["path"]["job_id"] for r in huawei_emulator.requests("ShowJobInfos")][:1]
    huawei_emulator.set_faults(throttle=1.0, actions=["ShowJobInfos"])
    started = time.monotonic()
    with pytest.raises(OperationTimeout) as info:
        follow_job(driver._bms, job_id, timeout=2, poll=0.05)
    assert time.monotonic() - started < NO_HANG and "APIGW.0308" in str(info.value)


# -- racing runs converge on one server per node ----------------------------------------------------------------------
def _servers_made(driver: HuaweiDriver, emulator: HuaweiEmulator, name: str) -> list[str]:
    """Every server the emulator's purchase orders opened under server name ``name`` (deleted ones too)."""
    ids = [sid for o in emulator.billing()["orders"].values() if o["order_type"] == 1 for sid in o["servers"]]
    return [sid for sid in ids if driver.get(sid).extra.get("server_name") == name]


def _gone_or_going(node: Any) -> bool:
    return bool(node.state == NodeState.TERMINATED or node.extra.get("task_state") == "deleting")


def test_two_drivers_ordering_one_node_at_once_converge_on_its_oldest_server(huawei_emulator: HuaweiEmulator) -> None:
    huawei_emulator.set_faults(latency_ms=100)  # both lookups and both creates are in flight together
    raced = 0
    for attempt in range(3):
        drivers = [huawei_driver(huawei_emulator), huawei_driver(huawei_emulator)]  # no shared cache
        spec = _one(drivers[0], f"race-{attempt}")
        barrier = threading.Barrier(2)
        got: list[str] = []
        errors: list[BaseException] = []

        def run(driver: HuaweiDriver, spec: NodeSpec = spec, barrier: threading.Barrier = barrier,
                got: list[str] = got, errors: list[BaseException] = errors) -> None:
            try:
                barrier.wait()
                got.append(driver.order(spec).id)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(d,)) for d in drivers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        observer = huawei_driver(huawei_emulator)
        made = _servers_made(observer, huawei_emulator, spec.name)
        raced += len(made) == 2
        [live] = _live(observer, spec.cluster)
        assert got == [live.id, live.id], "both runs answer the one server that stays"
        assert live.tags["metalfleet:key"] == key_tag(spec.idempotency_key)
        for twin in (sid for sid in made if sid != live.id):
            assert _gone_or_going(observer.get(twin)), f"duplicate {twin} was not unsubscribed"
            assert observer.get(twin).extra.get("created", "") >= live.extra["created"], "the oldest one stays"
        assert len(huawei_emulator.requests("CancelResourcesSubscription")) >= len(made) - 1
    assert raced, "no attempt made two servers: the race was not exercised"


def test_a_duplicate_a_crashed_run_left_is_released_and_the_oldest_kept(huawei_emulator: HuaweiEmulator) -> None:
    from huaweicloudsdkbms.v1 import CreateBareMetalServersRequest

    driver = huawei_driver(huawei_emulator)
    spec = _one(driver, "twin")
    first = driver.order(spec)
    # what a racing run that died after its create left: a second server of the node, made through the SDK
    other = huawei_driver(huawei_emulator)
    other._bms().create_bare_metal_servers(CreateBareMetalServersRequest(body=create_request(spec, USER_ID)))
    assert len(_live(driver, "twin")) == 2
    again = huawei_driver(huawei_emulator).order(spec)  # a re-run finds both: the oldest is the node
    assert again.id == first.id
    assert [n.id for n in _live(driver, "twin")] == [first.id]
    assert huawei_emulator.calls("CreateBareMetalServers") == 2 and \
        len(huawei_emulator.requests("CancelResourcesSubscription")) == 1


@pytest.mark.parametrize("machines", ["one", "two"])
def test_two_runs_of_one_cluster_at_once_make_each_node_once(huawei_emulator: HuaweiEmulator, machines: str) -> None:
    """On one machine the cluster's lock serialises the runs; two machines share no lock (``lock=False``), so
    there the driver's convergence alone makes each node once."""
    huawei_emulator.set_faults(latency_ms=100)
    cluster = f"race-cluster-{machines}"
    drivers = [huawei_driver(huawei_emulator), huawei_driver(huawei_emulator)]
    specs = [node_specs_for(d, parse_spec(huawei_spec_data(cluster, 4))) for d in drivers]
    barrier = threading.Barrier(2)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            nodes = order_cluster(drivers[i], specs[i], policy=FAST, timeout=120, lock=machines == "one")
            results.append(sorted(n.id for n in nodes))
        except MetalfleetError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    live = sorted(n.id for n in _live(huawei_driver(huawei_emulator), cluster))
    assert len(live) == 4 and results == [live, live]
    if machines == "two":
        assert huawei_emulator.calls("CreateBareMetalServers") > 4, "the runs did not race"


def test_every_run_sorts_a_nodes_servers_alike_oldest_first_then_by_id() -> None:
    from metalfleet.providers.huawei.observe import age

    def server(sid: str, created: str | None) -> Any:
        from metalfleet.providers.models import Node

        return Node(id=sid, provider="huawei", region="r", state=NodeState.RUNNING, offering="",
                    extra={"created": created})

    servers = [server("b", "2026-01-01T00:00:01Z"), server("c", None), server("z", "2026-01-01T00:00:00Z"),
               server("a", "2026-01-01T00:00:01Z")]
    assert [n.id for n in sorted(servers, key=age)] == ["z", "a", "b", "c"]
    assert [n.id for n in sorted(reversed(servers), key=age)] == ["z", "a", "b", "c"]
