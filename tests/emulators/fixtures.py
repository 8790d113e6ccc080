"""Pytest fixtures for the EC2 emulator, registered for every test by tests/conftest.py (pytest_plugins).

One emulator per test session (so one per xdist worker), started and stopped by the run itself;
faults are switched off and counters cleared before every test that uses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metalfleet.testing import usage as areas
from metalfleet.testing.ec2 import Ec2Emulator, start_ec2_emulator
from tests.emulators.running import running_emulator

#: Fake credentials for the emulator, set only inside the test process and its children.
EMULATOR_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
REGION = "us-east-1"
ZONE = "us-east-1a"
#: An image moto knows (Ubuntu, root device /dev/sda1).
IMAGE = "ami-1e749f67"
KMS_KEY = "alias/metalfleet-test"


@pytest.fixture(scope="session")
def ec2_emulator_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ec2Emulator]:
    with running_emulator(lambda log: start_ec2_emulator(log_path=log), tmp_path_factory, "ec2-emulator",
                          EMULATOR_ENV, ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2")) as emulator:
        ensure_kms_key(emulator, KMS_KEY)  # the test specs' volume key: an unknown key fails the launch
        yield emulator


@pytest.fixture
def ec2_emulator(ec2_emulator_session: Ec2Emulator) -> Ec2Emulator:
    areas.note("emulator")
    ec2_emulator_session.reset_faults()
    return ec2_emulator_session


def ec2_client(emulator: Ec2Emulator) -> Any:
    """A plain boto3 client on the emulator, for arranging and inspecting state around the driver."""
    import boto3
    from botocore.config import Config

    return boto3.client("ec2", region_name=REGION, endpoint_url=emulator.url,
                        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


def ensure_kms_key(emulator: Ec2Emulator, alias: str) -> str:
    """The id of the KMS key ``alias`` names in the emulator's KMS (extension m), created if missing."""
    import boto3

    kms = boto3.client("kms", region_name=REGION, endpoint_url=emulator.url)
    aliases = {a["AliasName"]: a.get("TargetKeyId") for a in kms.list_aliases()["Aliases"]}
    if aliases.get(alias):
        return str(aliases[alias])
    key_id = str(kms.create_key(Description=f"metalfleet tests: {alias}")["KeyMetadata"]["KeyId"])
    kms.create_alias(AliasName=alias, TargetKeyId=key_id)
    return key_id


def default_subnet(emulator: Ec2Emulator, zone: str = ZONE) -> str:
    subnets = ec2_client(emulator).describe_subnets(
        Filters=[{"Name": "availability-zone", "Values": [zone]}, {"Name": "default-for-az", "Values": ["true"]}])
    return str(subnets["Subnets"][0]["SubnetId"])
