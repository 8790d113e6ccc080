"""Fixtures for bootstrap tests: real sshd hosts from tests/hosts (xdist-safe: per-worker addresses)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from metalfleet.bootstrap import RunOptions
from metalfleet.testing.hosts.harness import HostFleet, start_hosts

from ..prereq import require_root


@pytest.fixture
def fleet_factory(tmp_path: Any) -> Iterator[Callable[..., HostFleet]]:
    """start(n, profile, **kw) -> HostFleet; every fleet is stopped at teardown."""
    require_root("simulated hosts (a real sshd per host on 127.x addresses, logging in as user mfnode)")
    fleets: list[HostFleet] = []

    def start(n: int, profile: str = "p5", **kw: Any) -> HostFleet:
        kw.setdefault("config", {"reboot_down_seconds": 1.0})
        fleet = start_hosts(n, profile, **kw)
        fleets.append(fleet)
        return fleet

    yield start
    for f in fleets:
        f.stop()


@pytest.fixture
def run_options(tmp_path: Any) -> RunOptions:
    return RunOptions(log_dir=tmp_path / "logs", reboot_poll=0.2, fact_timeout=60, step_timeout=120)
