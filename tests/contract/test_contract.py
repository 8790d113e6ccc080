"""The ComputeDriver contract, run against every driver (see conftest.py for the harness)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from metalfleet.providers import (
    CapacityError,
    InvalidSpecError,
    MetalfleetError,
    NodeSpec,
    NodeState,
    OrderFailed,
    node_specs_for,
    order_cluster,
    release_cluster,
)
from metalfleet.providers.contract import ClusterResourcesDriver, SubscriptionDriver
from metalfleet.providers.errors import SubscriptionError

from .conftest import CountingPolicy, Harness

ORDER_PROC = Path(__file__).with_name("order_proc.py")


def test_lifecycle_order_wait_get_list_release(harness: Harness, policy: CountingPolicy) -> None:
    driver = harness.driver()
    [spec] = node_specs_for(driver, harness.spec(count=1))

    node = driver.order(spec)
    assert node.state in (NodeState.PENDING, NodeState.RUNNING)
    assert node.offering == spec.offering
    seen: list[list[NodeState]] = []
    [running] = driver.wait([node.id], NodeState.RUNNING, timeout=30, poll=0.01,
                            progress=lambda ns: seen.append([n.state for n in ns]))
    assert running.id == node.id and running.state == NodeState.RUNNING
    assert seen and seen[-1] == [NodeState.RUNNING]

    got = driver.get(node.id)
    assert got.id == node.id and got.state == NodeState.RUNNING
    assert got.tags["metalfleet:cluster"] == harness.cluster
    assert got.zone == harness.zone
    assert got.private_ip
    assert [n.id for n in driver.list_nodes(harness.cluster)] == [node.id]
    assert driver.list_nodes(harness.cluster + "-other") == []

    driver.release(node.id, wait=True, timeout=30, unsubscribe=True)
    assert driver.get(node.id).state == NodeState.TERMINATED
    assert driver.list_nodes(harness.cluster) == []
    driver.release(node.id, unsubscribe=True)  # releasing a gone node is a no-op
    assert driver.get(node.id).state == NodeState.TERMINATED


def test_rerun_with_same_keys_creates_nothing_new(harness: Harness, policy: CountingPolicy) -> None:
    driver = harness.driver()
    spec = harness.spec(count=3)
    first = order_cluster(driver, node_specs_for(driver, spec), policy=policy, timeout=30)
    assert len({n.id for n in first}) == 3

    again = order_cluster(driver, node_specs_for(driver, spec), policy=policy, timeout=30)
    fresh = harness.driver()  # no cache shared with the first driver: only the keys can match
    third = order_cluster(fresh, node_specs_for(fresh, spec), policy=policy, timeout=30)

    assert [n.id for n in again] == [n.id for n in first]
    assert [n.id for n in third] == [n.id for n in first]
    live = fresh.list_nodes(harness.cluster)
    assert sorted(n.id for n in live) == sorted(n.id for n in first)
    assert all(n.state == NodeState.RUNNING for n in third)


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        proc.kill()
        raise AssertionError(f"child printed nothing within {timeout}s")
    return proc.stdout.readline().strip()


def test_order_killed_mid_way_then_rerun_leaves_exactly_the_nodes(harness: Harness) -> None:
    driver = harness.driver()
    count = 4
    job = {"driver": harness.driver_config(), "spec": harness.spec(count=count).model_dump(mode="json")}
    env = dict(os.environ)

    proc = subprocess.Popen([sys.executable, str(ORDER_PROC), json.dumps({**job, "pause": 30})],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = _readline(proc, 60)
        assert line.startswith("ORDERED "), line
        first_id = line.split()[1]
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout:
            proc.stdout.close()

    mid = driver.list_nodes(harness.cluster)
    assert [n.id for n in mid] == [first_id], "the kill should land after exactly one purchase"

    done = subprocess.run([sys.executable, str(ORDER_PROC), json.dumps(job)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    ids = done.stdout.strip().splitlines()[-1].split()[1:]

    live = driver.list_nodes(harness.cluster)
    assert len(ids) == count == len(set(ids))
    assert sorted(n.id for n in live) == sorted(ids), "no duplicates, no orphans"
    assert first_id in ids, "the node bought before the crash is reused, not bought again"
    assert sorted(n.tags["metalfleet:index"] for n in live) == [str(i) for i in range(count)]
    assert all(n.state == NodeState.RUNNING for n in live)


def test_throttling_at_30_percent_still_completes(harness: Harness, policy: CountingPolicy) -> None:
    driver = harness.driver(throttle=0.3, seed=11)
    spec = harness.spec(count=4)
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=policy, timeout=60, max_workers=4)
    assert len({n.id for n in nodes}) == 4
    assert all(n.state == NodeState.RUNNING for n in nodes)
    if harness.emulator is not None:
        assert harness.emulator.stats()["faults"].get(harness.throttle_code, 0) > 0
    if harness.pool is not None:  # the pool's BMC client reads a throttled Redfish answer again itself
        assert sum(harness.pool.redfish.stats()["faults"].values()) > 0, "30% throttling should have hit the BMCs"
    else:
        assert policy.retries > 0, "30% throttling should have cost some retries"
    harness.faults_off()
    clean = harness.driver()
    assert sorted(n.id for n in clean.list_nodes(harness.cluster)) == sorted(n.id for n in nodes)
    assert release_cluster(clean, harness.cluster, policy=policy, unsubscribe=True)
    assert clean.list_nodes(harness.cluster) == []


def test_capacity_error_names_the_zone_and_leaves_no_half_cluster(harness: Harness, policy: CountingPolicy) -> None:
    driver = harness.driver(capacity=1)
    spec = harness.spec(count=3)
    specs = node_specs_for(driver, spec)

    with pytest.raises(OrderFailed) as info:
        order_cluster(driver, specs, policy=policy, timeout=30)

    exc = info.value
    assert isinstance(exc.cause, CapacityError)
    assert exc.cause.zone == harness.zone
    assert harness.zone in str(exc)
    assert "2 of 3 node(s) failed" in str(exc)
    assert len(exc.released) == 1 and exc.kept == []
    assert policy.retries == 0, "capacity errors are not retried"
    harness.faults_off()
    assert harness.driver().list_nodes(harness.cluster) == []
    if harness.emulator is not None:
        assert harness.emulator.calls(harness.create_action) == 3


def test_bad_spec_is_refused_before_any_api_call(harness: Harness) -> None:
    driver = harness.driver()
    [good] = node_specs_for(driver, harness.spec(count=1))
    bad = NodeSpec(**{**{f: getattr(good, f) for f in good.__dataclass_fields__}, "image": ""})

    before = harness.api_calls(driver)
    with pytest.raises(InvalidSpecError) as info:
        driver.validate(bad)
    assert info.value.field == "image"
    with pytest.raises(InvalidSpecError) as info:
        driver.order(bad)
    assert info.value.field == "image" and info.value.value == ""
    assert harness.calls_between(driver, before) == 0

    unknown = NodeSpec(**{**{f: getattr(good, f) for f in good.__dataclass_fields__}, "offering": "nope.1x"})
    before = harness.api_calls(driver)
    with pytest.raises(InvalidSpecError) as info:
        driver.order(unknown)
    assert info.value.field == "offering" and info.value.value == "nope.1x"
    assert harness.calls_between(driver, before) == 0
    assert driver.list_nodes(harness.cluster) == []


def test_unknown_offering_in_cluster_spec_fails_planning_without_buying(harness: Harness) -> None:
    driver = harness.driver()
    with pytest.raises(InvalidSpecError) as info:
        node_specs_for(driver, harness.spec(count=2, offering="nope.8xnothing"))
    assert info.value.field == "offering"
    assert "nope.8xnothing" in str(info.value)
    if harness.emulator is not None:  # offerings() may read the catalogue; nothing is created
        assert set(harness.emulator.stats()["by_action"]) <= harness.read_actions
    assert driver.list_nodes(harness.cluster) == []


def test_release_cluster_releases_only_that_cluster(harness: Harness, policy: CountingPolicy) -> None:
    driver = harness.driver()
    mine = order_cluster(driver, node_specs_for(driver, harness.spec(count=2)), policy=policy, timeout=30)
    other_name = harness.cluster + "-b"
    other = order_cluster(driver, node_specs_for(driver, harness.spec(count=1, name=other_name)), policy=policy,
                          timeout=30)

    released = release_cluster(driver, harness.cluster, policy=policy, unsubscribe=True)

    assert sorted(released) == sorted(n.id for n in mine)
    assert driver.list_nodes(harness.cluster) == []
    assert [n.id for n in driver.list_nodes(other_name)] == [other[0].id]
    assert all(driver.get(n.id).state == NodeState.TERMINATED for n in mine)
    # nothing made for the released cluster is left (AWS: its security and placement group); the other keeps its own
    assert harness.made_for(harness.cluster) == []
    kept = harness.made_for(other_name)
    assert len(kept) == (0 if harness.kind == "fake" else harness.shared_resources)
    if isinstance(driver, ClusterResourcesDriver):
        assert sorted(driver.cluster_resources(other_name)) == sorted(kept)
    release_cluster(driver, other_name, policy=policy, unsubscribe=True)
    assert harness.made_for(other_name) == [] and driver.list_nodes(other_name) == []


def _kill_after_first(proc: subprocess.Popen[str], marker: str) -> str:
    try:
        line = _readline(proc, 90)
        assert line.startswith(marker), line
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        return line.split()[1]
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout:
            proc.stdout.close()


@pytest.mark.parametrize("when", ["mid-release", "between-releases"])
def test_release_killed_mid_way_then_rerun_leaves_nothing(harness: Harness, policy: CountingPolicy,
                                                          when: str) -> None:
    """kill -9 while a release is under way (the first node asked to go, not yet gone) or between two nodes'
    releases, then release again: every node is gone, nothing made for the cluster is left, nothing errs on the
    half-done state. Subscriptions included where the platform sells them (the release ends them)."""
    driver = harness.driver()
    spec = harness.subscription_spec(count=3) or harness.spec(count=3)
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=policy, timeout=60)
    job = {"driver": harness.driver_config(), "spec": spec.model_dump(mode="json"), "mode": "release",
           "pause": 30, "wait": when == "between-releases"}
    proc = subprocess.Popen([sys.executable, str(ORDER_PROC), json.dumps(job)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    first = _kill_after_first(proc, "RELEASED ")
    assert first in {n.id for n in nodes}
    assert len(driver.list_nodes(harness.cluster)) >= 2, "the kill should land before the other nodes went"

    done = subprocess.run([sys.executable, str(ORDER_PROC), json.dumps({**job, "pause": 0, "wait": True})],
                          capture_output=True, text=True, env=dict(os.environ), timeout=180)
    assert done.returncode == 0, done.stderr
    assert driver.list_nodes(harness.cluster) == []
    assert all(driver.get(n.id).state == NodeState.TERMINATED for n in nodes)
    assert harness.made_for(harness.cluster) == []


def test_subscriptions_are_released_only_when_opted_in(harness: Harness, policy: CountingPolicy) -> None:
    """A node bought for a term is not ended by a plain release: the cluster release is refused whole, naming each
    node and its expiry, and nothing is released; with the opt-in, all go. A platform that sells no term refuses
    the spec offline, naming capacity.billing."""
    driver = harness.driver()
    spec = harness.subscription_spec(count=2)
    if spec is None:
        with pytest.raises(InvalidSpecError) as refused:
            node_specs_for(driver, harness.spec(count=2, capacity={"billing": "monthly"}))
        assert refused.value.field == "capacity.billing"
        if harness.emulator is not None:
            assert harness.emulator.calls(harness.create_action) == 0
        assert driver.list_nodes(harness.cluster) == []
        return
    assert isinstance(driver, SubscriptionDriver)
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=policy, timeout=60)
    ids = sorted(n.id for n in nodes)
    subs = driver.subscriptions(ids)
    assert sorted(s.node_id for s in subs) == ids
    assert all(s.expires_at and s.expires_at[:4].isdigit() for s in subs), subs

    with pytest.raises(SubscriptionError) as info:
        release_cluster(driver, harness.cluster, policy=policy)
    message = str(info.value)
    assert all(i in message for i in ids) and all(str(s.expires_at) in message for s in subs)
    assert info.value.field == "capacity.release_subscriptions"
    assert "--unsubscribe" in message
    with pytest.raises(SubscriptionError):
        driver.release(ids[0], wait=True, timeout=30)
    assert sorted(n.id for n in driver.list_nodes(harness.cluster)) == ids, "a refused release releases nothing"

    assert sorted(release_cluster(driver, harness.cluster, policy=policy, unsubscribe=True)) == ids
    assert driver.list_nodes(harness.cluster) == []
    assert driver.subscriptions(ids) == []
    assert harness.made_for(harness.cluster) == []
    try:  # releasing them again is a no-op
        release_cluster(driver, harness.cluster, policy=policy, unsubscribe=True)
    except MetalfleetError as exc:  # pragma: no cover - the assertion names the failure
        raise AssertionError(f"a second release of a released cluster failed: {exc}") from exc
