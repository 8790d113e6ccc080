"""Pytest fixtures for the Alibaba Cloud ECS emulator, registered for every test by tests/conftest.py (pytest_plugins).

One emulator per test session (so one per xdist worker), started and stopped by the run itself; faults are
switched off and counters cleared before every test that uses it. The test AccessKey pair is set in the
environment (the SDK's standard variables) only inside the test process and its children.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metalfleet.testing import usage as areas
from metalfleet.testing.alibaba import (
    ACCESS_KEY_ID,
    ACCESS_KEY_SECRET,
    IMAGES,
    KMS_KEY,
    REGION,
    ZONES,
    AlibabaEmulator,
    default_vswitch_id,
)
from tests.emulators.running import running_emulator

__all__ = ["ALIBABA_ENV", "IMAGE", "KMS_KEY", "REGION", "ZONE", "alibaba_emulator", "alibaba_emulator_session",
           "ecs_call", "vswitch"]

ALIBABA_ENV = {"ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET}
ZONE = ZONES[2]
IMAGE = IMAGES[0]


@pytest.fixture(scope="session")
def alibaba_emulator_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlibabaEmulator]:
    with running_emulator(lambda log: AlibabaEmulator.start(log_path=log), tmp_path_factory, "alibaba-emulator",
                          ALIBABA_ENV, ("ALIBABA_CLOUD_SECURITY_TOKEN", "ALIBABA_CLOUD_ECS_ENDPOINT")) as emulator:
        yield emulator


@pytest.fixture
def alibaba_emulator(alibaba_emulator_session: AlibabaEmulator) -> AlibabaEmulator:
    areas.note("emulator")
    alibaba_emulator_session.reset_faults()
    return alibaba_emulator_session


def vswitch(zone: str = ZONE) -> str:
    return default_vswitch_id(zone)


def ecs_call(emulator: AlibabaEmulator, action: str, params: dict[str, Any], *,
             secret: str = ACCESS_KEY_SECRET, access_key: str = ACCESS_KEY_ID) -> dict[str, Any]:
    """One ECS call with the official SDK on the emulator (no driver), for arranging and inspecting state; SDK
    exceptions are raised as they are."""
    from alibabacloud_ecs20140526 import models
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi.models import Config
    from darabonba.runtime import RuntimeOptions

    from metalfleet.providers.alibaba.driver import _snake

    client = Client(Config(access_key_id=access_key, access_key_secret=secret, region_id=REGION,
                           endpoint=emulator.endpoint, protocol="http"))
    request = getattr(models, f"{action}Request")().from_map({"RegionId": REGION, **params})
    response = getattr(client, f"{_snake(action)}_with_options")(request, RuntimeOptions(autoretry=False))
    return dict(response.body.to_map())
