"""Registry, retry policy, error tree and fleet fan-out, on the fake driver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from metalfleet.providers import (
    AuthError,
    CapacityError,
    InvalidSpecError,
    NodeState,
    OrderFailed,
    QuotaError,
    RateLimitedError,
    RetryPolicy,
    TransientError,
    get_driver,
    node_specs_for,
    order_cluster,
    parse_spec,
    release_cluster,
)
from metalfleet.providers.fake import FakeDriver

SPEC = {"name": "kern", "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 4,
        "image": "img"}


def test_importing_the_kernel_loads_no_cloud_sdk() -> None:
    code = ("import sys, metalfleet.providers as p; p.get_driver('fake'); "
            "bad=[m for m in sys.modules if m.split('.')[0] in "
            "('boto3','botocore','alibabacloud_ecs20140526','huaweicloudsdkbms','pulumi','paramiko')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_unknown_driver_names_the_provider() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        get_driver("nimbus")
    assert exc.value.field == "provider" and "nimbus" in str(exc.value) and "fake" in str(exc.value)


def test_error_str_carries_provider_code_and_request_id() -> None:
    e = CapacityError("no p5 in use1-az4", zone="use1-az4", provider="aws", code="InsufficientInstanceCapacity",
                      request_id="r-1")
    assert str(e) == "no p5 in use1-az4 [provider=aws, code=InsufficientInstanceCapacity, request_id=r-1]"
    assert e.zone == "use1-az4"


@pytest.mark.parametrize("exc,retried", [
    (RateLimitedError("slow down"), True),
    (TransientError("503"), True),
    (AuthError("bad key"), False),
    (QuotaError("vcpu"), False),
    (CapacityError("none"), False),
    (InvalidSpecError("bad"), False),
])
def test_retry_policy_retries_only_transient_faults(exc: Exception, retried: bool) -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise exc
        return "ok"

    policy = RetryPolicy(attempts=5, base=0.001, cap=0.002)
    if retried:
        assert policy.call(flaky) == "ok" and len(calls) == 3
    else:
        with pytest.raises(type(exc)):
            policy.call(flaky)
        assert len(calls) == 1


def test_retry_policy_is_bounded() -> None:
    calls = []

    def always() -> None:
        calls.append(1)
        raise RateLimitedError("again")

    with pytest.raises(RateLimitedError):
        RetryPolicy(attempts=4, base=0.001, cap=0.002).call(always)
    assert len(calls) == 4


def test_requirements_pick_the_cheapest_fitting_offering() -> None:
    d = FakeDriver()
    spec = parse_spec({**SPEC, "offering": None, "requirements": {"min_gpus": 8}})
    assert node_specs_for(d, spec)[0].offering == "fake.8xa100"
    spec = parse_spec({**SPEC, "offering": None, "requirements": {"gpu": "h100"}})
    assert node_specs_for(d, spec)[0].offering == "fake.8xh100"
    with pytest.raises(InvalidSpecError) as exc:
        node_specs_for(d, parse_spec({**SPEC, "offering": None, "requirements": {"gpu": "B200"}}))
    assert exc.value.field == "requirements"


def test_order_cluster_fans_out_and_is_idempotent(tmp_path: Path) -> None:
    d = FakeDriver(state_path=tmp_path / "s.json", boot_seconds=0.05)
    specs = node_specs_for(d, parse_spec(SPEC))
    seen = []
    nodes = order_cluster(d, specs, progress=lambda ns: seen.append([n.state for n in ns]))
    assert [n.state for n in nodes] == [NodeState.RUNNING] * 4
    assert seen and seen[-1] == [NodeState.RUNNING] * 4
    again = order_cluster(d, specs)
    assert sorted(n.id for n in again) == sorted(n.id for n in nodes)
    assert release_cluster(d, "kern") and d.list_nodes("kern") == []


def test_capacity_failure_rolls_back_and_says_so(tmp_path: Path) -> None:
    d = FakeDriver(state_path=tmp_path / "s.json", capacity=2)
    with pytest.raises(OrderFailed) as exc:
        order_cluster(d, node_specs_for(d, parse_spec(SPEC)))
    err = exc.value
    assert isinstance(err.cause, CapacityError)
    assert "2 of 4 node(s) failed" in str(err) and "released 2" in str(err)
    assert d.list_nodes("kern") == []


def test_throttled_calls_are_retried_to_completion(tmp_path: Path) -> None:
    d = FakeDriver(state_path=tmp_path / "s.json", throttle=0.3, seed=7)
    nodes = order_cluster(d, node_specs_for(d, parse_spec(SPEC)), policy=RetryPolicy(attempts=30, base=0.001, cap=0.01))
    assert len({n.id for n in nodes}) == 4
    assert len(FakeDriver(state_path=tmp_path / "s.json").list_nodes("kern")) == 4
