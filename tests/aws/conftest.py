"""Fixtures for the AWS tests: the emulator, a driver on it, a boto3 client to inspect state."""

from __future__ import annotations

from typing import Any

import pytest

from metalfleet.providers import RetryPolicy
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing.ec2 import Ec2Emulator
from tests.emulators.fixtures import (
    IMAGE,
    KMS_KEY,
    REGION,
    ZONE,
    default_subnet,
    ec2_client,
)
from tests.specs import Specs, cluster_name

FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)


@pytest.fixture
def emulator(ec2_emulator: Ec2Emulator) -> Ec2Emulator:
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
    return cluster_name("aws-", request.node.nodeid)


@pytest.fixture
def specs(cluster: str, subnet: str) -> Specs:
    return Specs("aws", cluster, "p4de.24xlarge", subnet, KMS_KEY)


__all__ = ["FAST", "IMAGE", "KMS_KEY", "REGION", "ZONE", "Specs"]
