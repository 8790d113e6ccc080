"""The Huawei BMS emulator fixtures (one emulator per session; state reset per test where it matters)."""

from __future__ import annotations

from tests.emulators.huawei_fixtures import (  # noqa: F401  (fixtures)
    huawei_emulator,
    huawei_emulator_session,
)
