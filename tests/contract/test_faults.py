"""The fault suite: the contract's orders and releases under races, storms, lost answers, failed waits, failed
rollbacks, kill -9 and a failed scale-up, on every driver (see conftest.py for the harness).

After each case the cloud itself is read with every fault off (``Harness.orphans``): exactly the nodes that should
exist, none twice, and nothing else made for the cluster (security and placement groups, deployment sets, AWS
volumes and network interfaces).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import (
    CapacityError,
    Node,
    NodeState,
    OperationTimeout,
    OrderFailed,
    RetryPolicy,
    node_specs_for,
    order_cluster,
)
from metalfleet.providers.fleet import release_cluster
from metalfleet.providers.runstate import leftovers

from .conftest import Harness

ORDER_PROC = Path(__file__).with_name("order_proc.py")
CLOUDS = ["aws", "huawei", "alibaba", "ipmi"]


def fast(deadline: float = 120.0) -> RetryPolicy:
    """The production policy (deadline, no attempt cap) with short waits."""
    return RetryPolicy(base=0.005, cap=0.05, deadline=deadline)


def storm(h: Harness, throttle: float = 0.5, server_error: float = 0.05, seed: int = 5) -> None:
    h.faults(throttle=throttle, server_error=server_error, seed=seed)


def _child(job: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(ORDER_PROC), json.dumps(job)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _lines_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    """Read the child's lines until one starts with ``marker`` (returned last); fails on EOF or timeout."""
    assert proc.stdout is not None
    lines: list[str] = []
    end = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            proc.kill()
            raise AssertionError(f"no {marker!r} line within {timeout}s; got {lines}")
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"the child ended before {marker!r}: {lines} {err[-2000:]}")
        lines.append(line.strip())
        if line.startswith(marker):
            return lines


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()


def _assert_exactly(h: Harness, ids: list[str], count: int) -> None:
    nodes = h.cloud_nodes(h.cluster)
    assert len(ids) == count == len(set(ids))
    assert sorted(n.id for n in nodes) == sorted(ids), "no duplicates, no orphans"
    assert sorted(int(n.tags["metalfleet:index"]) for n in nodes) == list(range(count))


def _assert_nothing_left(h: Harness) -> None:
    assert h.orphans(h.cluster) == []
    assert leftovers(h.driver(), h.cluster) == {}


def _job(h: Harness, count: int, **extra: Any) -> dict[str, Any]:
    return {"driver": h.driver_config(), "spec": h.spec(count=count).model_dump(mode="json"), **extra}


# -- races ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lock", [True, False], ids=["locked", "no-lock"])
@pytest.mark.parametrize("harness", CLOUDS, indirect=True)
def test_two_orders_at_once_converge_to_one_cluster(harness: Harness, lock: bool) -> None:
    """Two processes order the same spec at the same moment: both end with the same nodes, exactly ``count`` of
    them, and one set of shared resources. ``no-lock``: without the machine's cluster lock (as two machines would
    race), the providers' own idempotency and the drivers' convergence must hold it alone."""
    h = harness
    count = 3
    if h.emulator is not None:
        h.faults(latency_ms=60)  # both creates in flight at once
    job = _job(h, count, workers=count, lock=lock, start_at=time.time() + 2.0)
    procs = [_child(job), _child(job)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, f"{out}\n{err[-3000:]}"
        outs.append(out.strip().splitlines()[-1].split()[1:])
    assert sorted(outs[0]) == sorted(outs[1]), "both runs name the same nodes"
    _assert_exactly(h, outs[0], count)
    assert len(h.made_for(h.cluster)) == h.shared_resources, h.made_for(h.cluster)
    release_cluster(h.driver(), h.cluster, policy=fast(), unsubscribe=True)
    _assert_nothing_left(h)


# -- storms -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("harness", CLOUDS, indirect=True)
def test_a_storm_is_ridden_out_and_its_release_leaves_nothing(harness: Harness) -> None:
    """About half the calls throttled and some 5xx: the order completes (the policy has a deadline, not an attempt
    count), then the release under the same storm leaves nothing."""
    h = harness
    driver = h.driver()
    storm(h)
    nodes = order_cluster(driver, node_specs_for(driver, h.spec(count=3), policy=fast()), policy=fast(), timeout=120)
    assert all(n.state == NodeState.RUNNING for n in nodes)
    assert sum(h.fault_stats().values()) > 0, "the storm should have hit"
    _assert_exactly(h, [n.id for n in nodes], 3)
    storm(h, seed=6)
    assert sorted(release_cluster(driver, h.cluster, policy=fast(), unsubscribe=True)) == sorted(n.id for n in nodes)
    _assert_nothing_left(h)


@pytest.mark.parametrize("harness", ["aws", "huawei", "alibaba"], indirect=True)
def test_a_throttle_on_the_first_call_does_not_end_the_order(harness: Harness) -> None:
    """The offerings read at planning runs under the policy too: one scripted throttle there is retried. (The pool
    reads its offerings from its inventory file: no call to throttle.)"""
    h = harness
    driver = h.driver()
    first = "DescribeInstanceTypes" if h.kind != "huawei" else "ListBaremetalFlavorDetailExtends"
    h.faults(script=[{"action": first, "code": h.throttle_code, "status": h.throttle_status, "times": 1}])
    specs = node_specs_for(driver, h.spec(count=1), policy=fast())
    assert len(specs) == 1
    assert h.fault_stats().get(h.throttle_code) == 1, "the throttle should have met the offerings read"
    assert h.emulator is not None and h.emulator.calls(first) == 2, "read once, throttled, read again"


@pytest.mark.parametrize("harness", CLOUDS, indirect=True)
def test_lost_create_answers_buy_nothing_twice(harness: Harness) -> None:
    """Half the create answers are lost after the cloud took the order (on the pool: the BMCs' answers to power-on):
    the retries find each node by its key."""
    h = harness
    driver = h.driver()
    h.faults(lost_response=0.5, actions=[h.create_action], seed=3)
    count = 4 if h.kind == "ipmi" else 3  # every host of the pool, so its Redfish ones are among them
    nodes = order_cluster(driver, node_specs_for(driver, h.spec(count=count)), policy=fast(), timeout=120)
    assert h.fault_stats().get("LostResponse", 0) > 0
    _assert_exactly(h, [n.id for n in nodes], count)
    release_cluster(h.driver(), h.cluster, policy=fast(), unsubscribe=True)
    _assert_nothing_left(h)


# -- failures after the creates ---------------------------------------------------------------------------------


#: Huawei's order itself waits until the server runs (its BSS order paid, its job done), so its final wait has
#: nothing left to read: there the storm meets the last order's own wait.
_STUCK = [pytest.param(k, w, id=f"{k}-{w}") for k in CLOUDS for w in ("wait", "last-order")
          if not (k == "huawei" and w == "wait")]


@pytest.mark.parametrize(("harness", "when"), _STUCK, indirect=["harness"])
def test_a_wait_and_rollback_that_cannot_finish_name_every_node_left(harness: Harness, when: str) -> None:
    """Every call throttled once the nodes are bought (``wait``: all of them, the wait gives up; ``last-order``: all
    but the last, whose order gives up): the rollback cannot release them either, and the error says so, naming each
    node left (never "no node was created"); the leftovers file lists them; a release with the faults gone leaves
    nothing."""
    h = harness
    driver = h.driver()
    count = 4 if h.kind == "ipmi" else 2  # the pool's Redfish hosts are the ones a fault can reach
    trigger = count if when == "wait" else count - 1
    bought: list[Node] = []

    def on_ordered(node: Node) -> None:
        bought.append(node)
        if len(bought) == trigger:
            h.faults(throttle=1.0)

    with pytest.raises(OrderFailed) as info:
        order_cluster(driver, node_specs_for(driver, h.spec(count=count)), policy=fast(deadline=2.0), timeout=8,
                      on_ordered=on_ordered, max_workers=count if when == "wait" else 1)
    exc = info.value
    assert exc.cause.retryable or isinstance(exc.cause, OperationTimeout), exc.cause
    assert str(exc).startswith("the wait") == (when == "wait") and "no node was created" not in str(exc)
    assert exc.leftovers, str(exc)
    for node_id in exc.leftovers:
        assert node_id in str(exc)
    h.faults_off()
    assert set(leftovers(h.driver(), h.cluster)) == set(exc.leftovers)
    released = release_cluster(h.driver(), h.cluster, policy=fast(), unsubscribe=True)
    assert set(exc.leftovers) <= set(released)
    _assert_nothing_left(h)


@pytest.mark.parametrize("harness", ["fake", *CLOUDS], indirect=True)
def test_a_throttled_rollback_is_retried_and_keeps_the_cause(harness: Harness) -> None:
    """Capacity for one node of three, and throttling all along: the rollback rides the throttling out, the error's
    cause is still the capacity error, and nothing is left."""
    h = harness
    driver = h.driver(capacity=1, throttle=0.4, seed=9)
    with pytest.raises(OrderFailed) as info:
        order_cluster(driver, node_specs_for(driver, h.spec(count=3), policy=fast()), policy=fast(), timeout=120)
    exc = info.value
    assert isinstance(exc.cause, CapacityError), exc.cause
    assert len(exc.released) == 1 and exc.kept == [] and exc.leftovers == {}
    if h.kind == "fake":
        assert h.driver().list_nodes(h.cluster) == []
        return
    _assert_nothing_left(h)


@pytest.mark.parametrize("harness", ["fake", *CLOUDS], indirect=True)
def test_a_failed_scale_up_keeps_what_existed(harness: Harness) -> None:
    """2 nodes, then the same cluster at 4 with capacity for one more: the order fails and rolls back only the node
    it made; the 2 from before and the cluster's shared resources stay."""
    h = harness
    driver = h.driver()
    first = order_cluster(driver, node_specs_for(driver, h.spec(count=2)), policy=fast(), timeout=60)
    shared = h.made_for(h.cluster)
    bigger = h.driver(capacity=3 if h.kind in ("ipmi", "fake") else 1)  # the fake and the pool: in all
    with pytest.raises(OrderFailed) as info:
        order_cluster(bigger, node_specs_for(bigger, h.spec(count=4)), policy=fast(), timeout=60)
    exc = info.value
    assert isinstance(exc.cause, CapacityError), exc.cause
    assert sorted(exc.existing) == sorted(n.id for n in first)
    assert len(exc.released) == 1 and set(exc.released).isdisjoint(exc.existing)
    assert "before this order are untouched" in str(exc)
    h.faults_off()
    live = h.driver().list_nodes(h.cluster)
    assert sorted(n.id for n in live) == sorted(n.id for n in first), "no node from before is lost"
    assert all(n.state == NodeState.RUNNING for n in live)
    assert h.made_for(h.cluster) == shared
    release_cluster(h.driver(), h.cluster, policy=fast(), unsubscribe=True)
    if h.kind != "fake":
        _assert_nothing_left(h)


# -- kill -9 ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("harness", CLOUDS, indirect=True)
def test_kill_during_the_wait_then_rerun_leaves_exactly_the_nodes(harness: Harness) -> None:
    h = harness
    count = 3
    proc = _child(_job(h, count, workers=count, wait_pause=60))
    lines = _lines_until(proc, "WAITING", 120)
    _kill(proc)
    bought = [ln.split()[1] for ln in lines if ln.startswith("ORDERED ")]
    assert len(bought) == count
    done = subprocess.run([sys.executable, str(ORDER_PROC), json.dumps(_job(h, count, workers=count))],
                          capture_output=True, text=True, env=dict(os.environ), timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = done.stdout.strip().splitlines()[-1].split()[1:]
    assert sorted(ids) == sorted(bought), "the re-run reuses every node the killed run bought"
    _assert_exactly(h, ids, count)
    release_cluster(h.driver(), h.cluster, policy=fast(), unsubscribe=True)
    _assert_nothing_left(h)


@pytest.mark.parametrize("harness", CLOUDS, indirect=True)
def test_kill_during_the_rollback_then_release_leaves_nothing(harness: Harness) -> None:
    """Capacity for two nodes of three: the child's rollback is asked to release a node and killed right then; a
    release of the spec afterwards ends every node and everything made for the cluster."""
    h = harness
    h.driver(capacity=2)  # switches the fault on for the child too (it is the cloud's)
    proc = _child(_job(h, 3, workers=1, rollback_pause=60))
    lines = _lines_until(proc, "ROLLING ", 180)
    _kill(proc)
    assert any(ln.startswith("ORDERED ") for ln in lines)
    h.faults_off()
    release_cluster(h.driver(), h.cluster, policy=fast(), unsubscribe=True)
    _assert_nothing_left(h)
