"""Fixtures for the Alibaba tests: the ECS emulator, a driver on it, specs for its region."""

from __future__ import annotations

import pytest

from metalfleet.providers import RetryPolicy
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.testing.alibaba import AlibabaEmulator
from tests.emulators.alibaba_fixtures import (
    IMAGE,
    KMS_KEY,
    REGION,
    ZONE,
    vswitch,
)
from tests.specs import Specs, cluster_name

FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)
#: The orderable Alibaba offerings, in the catalogue's order (the emulator sells each of them).
ALL_TYPES = ["ecs.ebmgn8v.48xlarge", "ecs.ebmgn7ex.32xlarge", "ecs.ebmgn7e.32xlarge", "ecs.ebmgn7.26xlarge"]


@pytest.fixture
def emulator(alibaba_emulator: AlibabaEmulator) -> AlibabaEmulator:
    return alibaba_emulator


@pytest.fixture
def driver(emulator: AlibabaEmulator) -> AlibabaDriver:
    return AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.02)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    return cluster_name("ali-", request.node.nodeid)


@pytest.fixture
def specs(cluster: str) -> Specs:
    return Specs("alibaba", cluster, "ecs.ebmgn8v.48xlarge", vswitch(), KMS_KEY)


__all__ = ["ALL_TYPES", "FAST", "IMAGE", "KMS_KEY", "REGION", "ZONE", "Specs"]
