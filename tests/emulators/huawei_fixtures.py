"""Pytest fixtures for the Huawei BMS/BSS emulator, registered for every test by tests/conftest.py (pytest_plugins).

One emulator per test session (so one per xdist worker); faults off, counters cleared, stock, quota and job timing
back to their defaults before every test that uses it. The SDK's credential variables (keys, project, account)
and the IAM user id are set to the emulator's test values inside the test process and its children only, and so
is the BSS endpoint (the emulator serves BMS and BSS on one port): a driver a child process builds from a driver
config without ``bss_endpoint`` reaches the emulator too, never the real billing service.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from metalfleet.testing import usage as areas
from metalfleet.testing.huawei import (
    DOMAIN_ID,
    FLAVORS,
    PROJECT_ID,
    REGION,
    TEST_AK,
    TEST_SK,
    USER_ID,
    WORLD,
    ZONES,
    HuaweiEmulator,
)
from tests.emulators.running import running_emulator

__all__ = ["BSS_ENV", "FLAVOR", "HUAWEI_ENV", "REGION", "ZONE", "huawei_driver", "huawei_emulator",
           "huawei_emulator_session", "huawei_spec_data"]

HUAWEI_ENV = {"HUAWEICLOUD_SDK_AK": TEST_AK, "HUAWEICLOUD_SDK_SK": TEST_SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID,
              "HUAWEICLOUD_SDK_DOMAIN_ID": DOMAIN_ID, "METALFLEET_HUAWEI_USER_ID": USER_ID}
#: Where a driver without ``bss_endpoint`` sends its BSS calls (set to the session emulator's URL).
BSS_ENV = "METALFLEET_HUAWEI_BSS_ENDPOINT"
ZONE = ZONES[0]
FLAVOR = next(iter(FLAVORS))
KEY_PAIR = "metalfleet-test"


@pytest.fixture(scope="session")
def huawei_emulator_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HuaweiEmulator]:
    with running_emulator(lambda log: HuaweiEmulator.start(log_path=log), tmp_path_factory, "huawei-emulator",
                          HUAWEI_ENV) as emulator:
        saved = os.environ.get(BSS_ENV)
        os.environ[BSS_ENV] = emulator.url
        try:
            yield emulator
        finally:
            if saved is None:
                os.environ.pop(BSS_ENV, None)
            else:
                os.environ[BSS_ENV] = saved


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
    """A HuaweiDriver on the emulator, BMS and BSS (credentials, project, account and user id from the
    environment, as in production)."""
    from metalfleet.providers.huawei import HuaweiDriver

    return HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=emulator.url,
                        **{"bss_endpoint": emulator.url, "poll": 0.02, "lost_answer_grace": 2.0, **kw})


def huawei_spec_data(name: str, count: int, zone: str = ZONE) -> dict[str, Any]:
    """A cluster spec (as data) the emulator's world and the real service take: yearly/monthly servers (BMS sells
    no other), bought monthly and ended early on release (``release_subscriptions``)."""
    return {"name": name, "provider": "huawei", "count": count, **huawei_spec_base(zone)}


def huawei_spec_base(zone: str | None = None) -> dict[str, Any]:
    """:func:`huawei_spec_data` without its name, provider and count (tests/specs.py's Huawei base)."""
    return {"region": REGION, "zone": zone or ZONE, "offering": FLAVOR, "image": WORLD["image_id"],
            "network": {"vpc_id": WORLD["vpc_id"], "subnet_id": WORLD["subnet_id"],
                        "security_group_ids": [WORLD["security_group_id"]]},
            "capacity": {"billing": "monthly", "release_subscriptions": True},
            "storage": {"kms_key_id": WORLD["kms_key_id"]}, "ssh": {"key_pair": KEY_PAIR},
            "tags": {"owner": "contract-suite"}}
