"""The AWS driver in a storm: botocore never retries by itself, waits ride out throttled reads until their own
timeout, and the cluster's groups are deleted through throttling, call by call."""

from __future__ import annotations

import time

import pytest

from metalfleet.providers import NodeState, OperationTimeout, RateLimitedError, RetryPolicy, TransientError
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.fleet import node_specs_for, order_cluster, release_cluster
from metalfleet.testing.ec2 import Ec2Emulator

from .conftest import Specs

FAST = RetryPolicy(base=0.005, cap=0.05, deadline=120)


@pytest.mark.parametrize(("code", "status", "error"), [("RequestLimitExceeded", 503, RateLimitedError),
                                                        ("InternalError", 500, TransientError),
                                                        ("Unavailable", 503, TransientError)])
def test_botocore_does_not_retry_by_itself(driver: AwsDriver, emulator: Ec2Emulator, cluster: str, code: str,
                                           status: int, error: type[Exception]) -> None:
    emulator.set_faults(script=[{"action": "DescribeInstances", "code": code, "status": status, "times": 1}])
    before = emulator.calls("DescribeInstances")
    with pytest.raises(error) as info:
        driver.list_nodes(cluster)
    assert info.value.code == code  # type: ignore[attr-defined]
    assert emulator.calls("DescribeInstances") - before == 1, "one call reached EC2: botocore retried nothing"


def test_a_wait_rides_out_throttled_reads_and_times_out_on_its_own(driver: AwsDriver, emulator: Ec2Emulator,
                                                                    specs: Specs) -> None:
    [node] = order_cluster(driver, node_specs_for(driver, specs.cluster_spec(count=1)), policy=FAST, wait=False)
    emulator.set_faults(throttle=0.5, seed=4)
    [running] = driver.wait([node.id], NodeState.RUNNING, timeout=60, poll=0.01)
    assert running.state == NodeState.RUNNING
    emulator.set_faults(throttle=1.0)
    started = time.monotonic()
    with pytest.raises(OperationTimeout) as info:
        driver.wait([node.id], NodeState.TERMINATED, timeout=1.0, poll=0.05)
    assert time.monotonic() - started < 30, "the wait ends at its own timeout, not later"
    assert "RequestLimitExceeded" in str(info.value) and node.id in str(info.value)
    emulator.set_faults()
    release_cluster(driver, specs.cluster, policy=FAST)


def test_cluster_groups_are_deleted_through_a_storm(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs) -> None:
    nodes = order_cluster(driver, node_specs_for(driver, specs.cluster_spec(count=2)), policy=FAST)
    emulator.set_faults(throttle=0.6, server_error=0.05, seed=8)
    assert sorted(release_cluster(driver, specs.cluster, policy=FAST)) == sorted(n.id for n in nodes)
    emulator.set_faults()
    assert driver.cluster_resources(specs.cluster) == []
    assert driver.list_nodes(specs.cluster) == []
