"""Pytest fixtures for the Huawei BMS emulator, imported by the conftests that need one.

One emulator per test session (so one per xdist worker); faults off, counters cleared, stock, quota and job timing
back to their defaults before every test that uses it. The SDK's credential variables are set to the emulator's
test keys inside the test process and its children only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metalfleet.testing import usage as areas
from metalfleet.testing.huawei import FLAVORS, PROJECT_ID, REGION, TEST_AK, TEST_SK, WORLD, ZONES, HuaweiEmulator
from tests.emulators.running import running_emulator

__all__ = ["FLAVOR", "HUAWEI_ENV", "REGION", "ZONE", "huawei_driver", "huawei_emulator", "huawei_emulator_session",
           "huawei_spec_data"]

HUAWEI_ENV = {"HUAWEICLOUD_SDK_AK": TEST_AK, "HUAWEICLOUD_SDK_SK": TEST_SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID}
ZONE = ZONES[0]
FLAVOR = next(iter(FLAVORS))
KEY_PAIR = "metalfleet-test"


@pytest.fixture(scope="session")
def huawei_emulator_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HuaweiEmulator]:
    with running_emulator(lambda log: HuaweiEmulator.start(log_path=log), tmp_path_factory, "huawei-emulator",
                          HUAWEI_ENV) as emulator:
        yield emulator


@pytest.fixture
def huawei_emulator(huawei_emulator_session: HuaweiEmulator) -> HuaweiEmulator:
    areas.note("emulator")
    emulator = huawei_emulator_session
    emulator.reset_faults()
    emulator.set_timing(0.2)
    emulator.set_quota(1000)
    for zone in ZONES:
        emulator.set_stock(zone, FLAVOR, 64)
    return emulator


def huawei_driver(emulator: HuaweiEmulator, **kw: Any) -> Any:
    """A HuaweiDriver on the emulator (credentials from the environment, as in production)."""
    from metalfleet.providers.huawei import HuaweiDriver

    return HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=emulator.url,
                        **{"poll": 0.02, "lost_answer_grace": 2.0, **kw})


def huawei_spec_data(name: str, count: int, zone: str = ZONE) -> dict[str, Any]:
    """A cluster spec (as data) the emulator's world accepts."""
    return {"name": name, "provider": "huawei", "region": REGION, "zone": zone, "offering": FLAVOR, "count": count,
            "image": WORLD["image_id"],
            "network": {"vpc_id": WORLD["vpc_id"], "subnet_id": WORLD["subnet_id"],
                        "security_group_ids": [WORLD["security_group_id"]]},
            "storage": {"kms_key_id": WORLD["kms_key_id"]}, "ssh": {"key_pair": KEY_PAIR},
            "tags": {"owner": "contract-suite"}}
