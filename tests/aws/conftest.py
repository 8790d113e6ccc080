"""Fixtures for the AWS tests: the emulator, a driver on it, a boto3 client to inspect state."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from metalfleet.providers import ClusterSpec, NodeSpec, RetryPolicy, node_specs_for, parse_spec
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing.ec2 import Ec2Emulator
from tests.emulators.fixtures import (
    IMAGE,
    KMS_KEY,
    REGION,
    ZONE,
    default_subnet,
    ec2_client,
    ec2_emulator,  # noqa: F401  (fixture)
    ec2_emulator_session,  # noqa: F401  (fixture)
)

FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)


@pytest.fixture
def emulator(ec2_emulator: Ec2Emulator) -> Ec2Emulator:  # noqa: F811
    return ec2_emulator


@pytest.fixture
def ec2(emulator: Ec2Emulator) -> Any:
    return ec2_client(emulator)


@pytest.fixture
def subnet(emulator: Ec2Emulator) -> str:
    return default_subnet(emulator)


@pytest.fixture
def driver(emulator: Ec2Emulator) -> AwsDriver:
    return AwsDriver(region=REGION, endpoint_url=emulator.url, poll=0.02)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    return "aws-" + hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:10]


class Specs:
    def __init__(self, cluster: str, subnet: str) -> None:
        self.cluster = cluster
        self.subnet = subnet

    def cluster_spec(self, offering: str = "p4de.24xlarge", count: int = 1, **overrides: Any) -> ClusterSpec:
        data: dict[str, Any] = {
            "name": self.cluster, "provider": "aws", "region": REGION, "zone": ZONE, "offering": offering,
            "count": count, "image": IMAGE, "network": {"subnet_id": self.subnet},
            "storage": {"kms_key_id": KMS_KEY, "data": [{"size_gib": 500}]},
            "tags": {"team": "ml-infra", "cost-center": "4711"},
        }
        data.update(overrides)
        return parse_spec(data)

    def node_specs(self, driver: AwsDriver, offering: str = "p4de.24xlarge", count: int = 1,
                   **overrides: Any) -> list[NodeSpec]:
        return node_specs_for(driver, self.cluster_spec(offering, count, **overrides))


@pytest.fixture
def specs(cluster: str, subnet: str) -> Specs:
    return Specs(cluster, subnet)


__all__ = ["FAST", "IMAGE", "KMS_KEY", "REGION", "ZONE", "Specs"]
