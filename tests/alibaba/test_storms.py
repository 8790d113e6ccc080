"""The Alibaba driver under races and storms, on the ECS emulator (real HTTP, ACS3 signatures checked).

* Two runs ordering one cluster at once (two drivers, no shared cache, no lock) converge: both succeed, the
  cluster has its N nodes and one security group and one deployment set (the creates carry the cluster's
  ClientToken; a racer's RunInstances then matches the other's and is answered with the same instance).
* The Tea SDK retries nothing by itself: one throttle, one 5xx, one read timeout each reach the emulator once
  and leave the driver as the retryable error the policy retries.
* A storm of throttling and 5xx (and lost answers) is ridden out by a deadline policy: the order completes with
  every node running, and the release leaves no instance, group or set.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

import pytest

from metalfleet.providers import (
    NodeState,
    RateLimitedError,
    RetryPolicy,
    TransientError,
    node_specs_for,
    order_cluster,
    release_cluster,
)
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.providers.alibaba.errors import boundary
from metalfleet.providers.alibaba.network import MAX_TOKEN_GENERATIONS, resource_token
from metalfleet.providers.alibaba.subscription import conversion_token
from metalfleet.providers.errors import ProviderError
from metalfleet.testing.alibaba import AlibabaEmulator
from tests.emulators.alibaba_fixtures import ecs_call

from .conftest import REGION, Specs

T = TypeVar("T")
#: The storm policy: short waits, a deadline (no attempt cap) that a 50% storm never reaches on 4 nodes.
STORM = RetryPolicy(base=0.005, cap=0.05, deadline=120)


def live(emulator: AlibabaEmulator, cluster: str) -> list[str]:
    """The cluster's instances ECS lists (the cloud's own listing, not the driver's)."""
    resp = ecs_call(emulator, "DescribeInstances", {"MaxResults": 100,
                                                     "Tag": [{"Key": "metalfleet:cluster", "Value": cluster}]})
    return sorted(i["InstanceId"] for i in resp["Instances"]["Instance"])


def made_for(emulator: AlibabaEmulator, cluster: str) -> list[str]:
    """The groups tagged with the cluster and the sets described for it, as ECS lists them (as the contract
    suite's Harness.made_for lists them)."""
    groups = ecs_call(emulator, "DescribeSecurityGroups", {"Tag": [{"Key": "metalfleet:cluster", "Value": cluster}]})
    sets: list[dict[str, Any]] = []
    page = 1
    while True:
        resp = ecs_call(emulator, "DescribeDeploymentSets", {"PageSize": 50, "PageNumber": page})
        sets += resp["DeploymentSets"]["DeploymentSet"]
        if page * 50 >= int(resp["TotalCount"]):
            break
        page += 1
    return ([f"security-group:{g['SecurityGroupId']}" for g in groups["SecurityGroups"]["SecurityGroup"]]
            + [f"deployment-set:{d['DeploymentSetId']}" for d in sets
               if d.get("DeploymentSetDescription") == f"metalfleet:cluster={cluster}"])


def kinds(resources: list[str]) -> list[str]:
    return sorted(r.partition(":")[0] for r in resources)


def at_once(n: int, fn: Callable[[int], T]) -> list[T | BaseException]:
    """``fn(0) ... fn(n-1)`` on ``n`` threads released together; each one's result or exception."""
    barrier = threading.Barrier(n)
    out: list[T | BaseException] = [RuntimeError("did not run")] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = fn(i)
        except BaseException as exc:  # reported by the test
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a racer hung"
    return out


def fresh_driver(emulator: AlibabaEmulator) -> AlibabaDriver:
    return AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.02)


# -- races ---------------------------------------------------------------------------------------------------
def test_two_orders_of_one_cluster_at_once_converge(emulator: AlibabaEmulator, specs: Specs) -> None:
    """Two runs, each its own driver, order the same 4-node cluster at once (100 ms per call, so both look for
    the cluster's group and set before either has made them; without the fleet's lock on this machine, as two
    machines would): both succeed with the same 4 nodes, and the cluster has one security group and one
    deployment set. Released and ordered again by two racers, the
    cluster gets new ones (the tokens of the deleted ones are stepped past), again one of each."""
    spec = specs.cluster_spec(count=4)
    drivers = [fresh_driver(emulator) for _ in range(2)]
    plans = [node_specs_for(d, spec) for d in drivers]
    emulator.set_faults(latency_ms=100)
    results = at_once(2, lambda i: order_cluster(drivers[i], plans[i], policy=STORM, timeout=60, lock=False))
    emulator.set_faults()
    for r in results:
        assert not isinstance(r, BaseException), r
    ids = [sorted(n.id for n in r) for r in results if not isinstance(r, BaseException)]
    assert ids[0] == ids[1] == live(emulator, spec.name) and len(ids[0]) == 4
    first = made_for(emulator, spec.name)
    assert kinds(first) == ["deployment-set", "security-group"], first

    release_cluster(drivers[0], spec.name, policy=STORM)
    assert live(emulator, spec.name) == [] and made_for(emulator, spec.name) == []
    again = [fresh_driver(emulator) for _ in range(2)]
    emulator.set_faults(latency_ms=100)
    results = at_once(2, lambda i: order_cluster(again[i], node_specs_for(again[i], spec), policy=STORM, timeout=60,
                                                 lock=False))
    emulator.set_faults()
    for r in results:
        assert not isinstance(r, BaseException), r
    assert len(live(emulator, spec.name)) == 4
    second = made_for(emulator, spec.name)
    assert kinds(second) == ["deployment-set", "security-group"] and not set(second) & set(first), (first, second)
    release_cluster(again[0], spec.name, policy=STORM)
    assert live(emulator, spec.name) == [] and made_for(emulator, spec.name) == []


def test_drivers_racing_node_by_node_without_any_lock_make_one_of_each(emulator: AlibabaEmulator,
                                                                        specs: Specs) -> None:
    """No fleet, no lock: two drivers' order() of every node of the cluster, all eight calls at once. Each node
    is bought once (both racers' RunInstances carry the same parameters and key) and the cluster has one group
    and one set."""
    spec = specs.cluster_spec(count=4)
    drivers = [fresh_driver(emulator) for _ in range(2)]
    nodes = [node_specs_for(d, spec) for d in drivers]
    emulator.set_faults(latency_ms=100)
    results = at_once(8, lambda i: STORM.call(drivers[i % 2].order, nodes[i % 2][i // 2]))
    emulator.set_faults()
    for r in results:
        assert not isinstance(r, BaseException), r
    by_index: dict[int, set[str]] = {i // 2: set() for i in range(8)}  # node index -> the ids both racers got
    for i, r in enumerate(results):
        assert not isinstance(r, BaseException)
        by_index[i // 2].add(r.id)
    assert all(len(got) == 1 for got in by_index.values()), by_index
    assert sorted(next(iter(g)) for g in by_index.values()) == live(emulator, spec.name)
    assert kinds(made_for(emulator, spec.name)) == ["deployment-set", "security-group"]
    release_cluster(drivers[1], spec.name, policy=STORM)
    assert live(emulator, spec.name) == [] and made_for(emulator, spec.name) == []


def test_the_cluster_tokens_are_the_clusters_own(emulator: AlibabaEmulator) -> None:
    """The same cluster and region give the same token (whoever asks), another cluster, region or generation
    another; each within ECS's 64 ASCII characters."""
    a = resource_token("sg", REGION, "c1", "vpc-1")
    assert a == resource_token("sg", REGION, "c1", "vpc-1")
    others = {resource_token("sg", REGION, "c2", "vpc-1"), resource_token("sg", "cn-beijing", "c1", "vpc-1"),
              resource_token("sg", REGION, "c1", "vpc-1", generation=1), resource_token("ds", REGION, "c1", "vpc-1")}
    assert a not in others and len(others) == 4
    longest = resource_token("ds", REGION, "x" * 200, "y" * 200, generation=MAX_TOKEN_GENERATIONS - 1)
    assert all(len(t) <= 64 and t.isascii() for t in (a, longest, *others))


# -- the SDK retries nothing by itself -------------------------------------------------------------------------
@pytest.mark.parametrize(("code", "status", "error"), [("Throttling.User", 400, RateLimitedError),
                                                       ("ServiceUnavailable", 503, TransientError),
                                                       ("InternalError", 500, TransientError)])
def test_one_fault_is_one_request_and_a_retryable_error(emulator: AlibabaEmulator, driver: AlibabaDriver,
                                                        specs: Specs, code: str, status: int,
                                                        error: type[TransientError]) -> None:
    """One scripted fault on DescribeInstances, one driver call without a retry policy: the fault leaves as the
    retryable error and exactly one request reached ECS (the SDK did not try again)."""
    emulator.set_faults(script=[{"action": "DescribeInstances", "code": code, "status": status, "times": 1}])
    with pytest.raises(error) as info:
        driver.list_nodes(specs.cluster)
    assert info.value.code == code and info.value.retryable
    assert emulator.calls("DescribeInstances") == 1
    assert driver.list_nodes(specs.cluster) == []  # the script is spent: the next call is answered
    assert emulator.calls("DescribeInstances") == 2


def test_a_read_timeout_is_one_request_and_transient(emulator: AlibabaEmulator, specs: Specs) -> None:
    """An answer that never comes in time (the SDK's UnretryableException, a TeaException subclass) is a
    TransientError, not an untyped ProviderError, and the SDK sent the request once."""
    impatient = AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.02, read_timeout=0.3)
    emulator.set_faults(latency_ms=1500, actions=["DescribeInstances"])
    with pytest.raises(TransientError) as info:
        impatient.list_nodes(specs.cluster)
    assert info.value.retryable and not isinstance(info.value, ProviderError)
    assert emulator.calls("DescribeInstances") == 1


def test_retry_after_from_the_sdk_is_seconds_on_the_error() -> None:
    """The SDK reads ECS's ``x-acs-retry-after`` into ThrottlingException.retry_after (milliseconds): the
    RateLimitedError carries it in seconds, for the policy to wait."""
    from alibabacloud_tea_openapi.exceptions import ThrottlingException

    sdk = ThrottlingException(status_code=400, code="Throttling.User", message="flow control", retry_after=1500,
                              data={"Code": "Throttling.User", "Message": "flow control", "RequestId": "r-1"},
                              request_id="r-1")
    with pytest.raises(RateLimitedError) as info, boundary("DescribeInstances"):
        raise sdk
    assert info.value.retry_after == 1.5 and info.value.request_id == "r-1"


def test_a_throttled_console_read_is_not_no_host_keys(emulator: AlibabaEmulator, driver: AlibabaDriver,
                                                      specs: Specs) -> None:
    """Asked for a running node's host keys, a throttled console read is a RateLimitedError (for the policy to
    retry), not an answer without keys; the wait, whose job is the state, reads the consoles as a bonus and
    still answers RUNNING when one read is throttled."""
    [spec] = specs.node_specs(driver)
    node = driver.order(spec)
    emulator.set_faults(script=[{"action": "GetInstanceConsoleOutput", "code": "Throttling.User", "times": 1}])
    [ran] = driver.wait([node.id], timeout=30)
    assert ran.state == NodeState.RUNNING and emulator.calls("GetInstanceConsoleOutput") == 1
    emulator.set_faults(script=[{"action": "GetInstanceConsoleOutput", "code": "Throttling.User", "times": 1}])
    with pytest.raises(RateLimitedError):
        driver.get(node.id, host_keys=True)
    assert STORM.call(driver.get, node.id, host_keys=True).state == NodeState.RUNNING
    assert emulator.calls("GetInstanceConsoleOutput") == 3  # the wait's, the throttled one, its retry
    release_cluster(driver, specs.cluster, policy=STORM)


# -- storms ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lost", [0.0, 0.1], ids=["throttle+5xx", "throttle+5xx+lost-answers"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_storm_is_ridden_out_and_the_release_leaves_nothing(emulator: AlibabaEmulator, specs: Specs,
                                                              seed: int, lost: float) -> None:
    """Half the calls throttled, 5% answered 503 (and, in one variant, 10% of answers lost after ECS did the
    work): a 4-node order with a deadline policy completes with 4 running nodes and no duplicate of anything;
    release_cluster under the same storm leaves no instance, no security group and no deployment set."""
    driver = fresh_driver(emulator)
    spec = specs.cluster_spec(count=4, placement={"strategy": "cluster"})
    nodes = node_specs_for(driver, spec)
    storm = {"throttle": 0.5, "server_error": 0.05, "lost_response": lost, "seed": seed}
    emulator.set_faults(**storm)
    ordered = order_cluster(driver, nodes, policy=STORM, timeout=120)
    faults = emulator.stats()["faults"]
    emulator.set_faults()
    assert faults.get("Throttling.User", 0) > 0 and faults.get("ServiceUnavailable", 0) > 0, faults
    assert [n.state for n in ordered] == [NodeState.RUNNING] * 4
    assert sorted(n.id for n in ordered) == live(emulator, spec.name)
    assert kinds(made_for(emulator, spec.name)) == ["deployment-set", "security-group"]

    emulator.set_faults(**{**storm, "seed": seed + 100})
    released = release_cluster(driver, spec.name, policy=STORM)
    emulator.set_faults()
    assert sorted(released) == sorted(n.id for n in ordered)
    assert live(emulator, spec.name) == []
    assert made_for(emulator, spec.name) == []


def test_an_unexpired_subscription_is_converted_and_released_through_a_storm(emulator: AlibabaEmulator,
                                                                           specs: Specs) -> None:
    """The PrePaid release (ModifyInstanceChargeType with its own ClientToken, then DeleteInstances) under
    throttling, 5xx and lost answers: each node converted once, released, nothing left."""
    driver = fresh_driver(emulator)
    spec = specs.cluster_spec(count=2, capacity={"billing": "monthly"})
    ordered = order_cluster(driver, [replace(n, release_subscriptions=True) for n in node_specs_for(driver, spec)],
                            policy=STORM, timeout=60)
    emulator.set_faults(throttle=0.5, server_error=0.05, lost_response=0.1, seed=5)
    release_cluster(driver, spec.name, policy=STORM, unsubscribe=True)
    emulator.set_faults()
    assert live(emulator, spec.name) == [] and made_for(emulator, spec.name) == []
    tokens = {e["params"].get("ClientToken") for e in emulator.requests("ModifyInstanceChargeType")}
    assert tokens == {conversion_token(n.id) for n in ordered}  # every retry with the node's own token
