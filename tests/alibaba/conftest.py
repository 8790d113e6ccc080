"""Fixtures for the Alibaba tests: the ECS emulator, a driver on it, specs for its region."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from metalfleet.providers import ClusterSpec, NodeSpec, RetryPolicy, node_specs_for, parse_spec
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.testing.alibaba import AlibabaEmulator
from tests.emulators.alibaba_fixtures import (
    IMAGE,
    KMS_KEY,
    REGION,
    ZONE,
    alibaba_emulator,  # noqa: F401  (fixture)
    alibaba_emulator_session,  # noqa: F401  (fixture)
    vswitch,
)

FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)
#: The orderable Alibaba offerings, in the catalogue's order (the emulator sells each of them).
ALL_TYPES = ["ecs.ebmgn8v.48xlarge", "ecs.ebmgn7ex.32xlarge", "ecs.ebmgn7e.32xlarge", "ecs.ebmgn7.26xlarge"]


@pytest.fixture
def emulator(alibaba_emulator: AlibabaEmulator) -> AlibabaEmulator:  # noqa: F811
    return alibaba_emulator


@pytest.fixture
def driver(emulator: AlibabaEmulator) -> AlibabaDriver:
    return AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.02)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    return "ali-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]


class Specs:
    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def cluster_spec(self, offering: str = "ecs.ebmgn8v.48xlarge", count: int = 1, **overrides: Any) -> ClusterSpec:
        data: dict[str, Any] = {
            "name": self.cluster, "provider": "alibaba", "region": REGION, "zone": ZONE, "offering": offering,
            "count": count, "image": IMAGE, "network": {"subnet_id": vswitch()},
            "storage": {"kms_key_id": KMS_KEY, "data": [{"size_gib": 500}]},
            "tags": {"team": "ml-infra", "cost-center": "4711"},
        }
        data.update(overrides)
        return parse_spec(data)

    def node_specs(self, driver: AlibabaDriver, offering: str = "ecs.ebmgn8v.48xlarge", count: int = 1,
                   **overrides: Any) -> list[NodeSpec]:
        return node_specs_for(driver, self.cluster_spec(offering, count, **overrides))


@pytest.fixture
def specs(cluster: str) -> Specs:
    return Specs(cluster)


__all__ = ["ALL_TYPES", "FAST", "IMAGE", "KMS_KEY", "REGION", "ZONE", "Specs"]
