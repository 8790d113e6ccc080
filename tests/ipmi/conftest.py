"""Fixtures for the pool tests: one simulated pool per module (2 hosts behind ipmi_sim, 2 behind the sushy-tools
Redfish emulator, each a VM-mode GPU host that its BMC powers on and off), a fresh inventory and claim store per
test."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import ClusterSpec, RetryPolicy
from metalfleet.providers.contract import PowerState
from metalfleet.providers.ipmi import IpmiDriver
from metalfleet.testing import usage as areas
from metalfleet.testing.bmc import BmcPool, start_bmc_pool
from metalfleet.testing.retrycount import CountingPolicy as _Counting
from tests import specs
from tests.prereq import require_root, require_tool

#: The module's pool: host0, host1 behind IPMI (ipmi_sim), host2, host3 behind Redfish (sushy-tools).
PROTOCOLS = ("ipmi", "ipmi", "redfish", "redfish")
POOL = "pool-a"
OFFERING = "pool.8xh100-ib"
FAST = RetryPolicy(attempts=4, base=0.01, cap=0.05)


class CountingPolicy(_Counting):
    """The production retry policy with short waits (at most ``attempts`` tries), counting the retries it makes."""

    def __init__(self, attempts: int = 4) -> None:
        super().__init__(attempts=attempts, base=0.01, cap=0.05, deadline=None)


def require_bmc_tools() -> None:
    require_root("the pool's simulated GPU hosts (VM mode: namespaces and mounts)")
    for tool in ("ipmi_sim", "ipmitool"):
        require_tool(tool, "Debian: apt-get install openipmi ipmitool, or `make bmc-tools`")


@pytest.fixture(scope="module")
def bmc_pool() -> Iterator[BmcPool]:
    require_bmc_tools()
    with start_bmc_pool(PROTOCOLS) as pool:
        yield pool


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    return "pl-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]


@pytest.fixture
def inventory(bmc_pool: BmcPool, tmp_path: Path) -> Path:
    areas.note("sim host")  # the module's pool: its hosts and BMC simulators
    return bmc_pool.write_inventory(tmp_path / "pool.yaml", pool=POOL)


@pytest.fixture
def driver(inventory: Path, tmp_path: Path, bmc_pool: BmcPool) -> Iterator[IpmiDriver]:
    d = IpmiDriver(inventory, tmp_path / "claims.json", poll=0.05)
    yield d
    for h in bmc_pool.hosts:  # the next test starts from a pool that is off, as a fresh one is
        host = d.pool.host(h.name)
        if host is not None and bmc_pool.power(h.name) == "on":
            d.bmc(host).set_power(PowerState.OFF, wait=True, timeout=30)


def cluster_spec(name: str, count: int = 1, **overrides: Any) -> ClusterSpec:
    """A spec on the module's pool, tagged as these tests' own."""
    return specs.cluster_spec("ipmi", name, count, **{"region": POOL, "offering": OFFERING,
                                                      "tags": {"owner": "pool-tests"}, **overrides})
