"""Run-wide rules: no silent skips, and a count of the tests that ran in each area.

``make test`` fails when any test was skipped, unless ``METALFLEET_ALLOW_SKIPS=1`` is set (CI never
sets it): a prerequisite that is missing must fail with a message (tests/prereq.py), not hide.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

from metalfleet.testing import usage as areas
from metalfleet.testing.kit import EmulatorClient
from tests.prereq import require_root

#: The emulators' fixtures, registered once for every test folder (pytest reads ``pytest_plugins`` only here, in
#: the rootdir's conftest). A session-scoped emulator still starts only when a test asks for it.
pytest_plugins = ["tests.emulators.fixtures", "tests.emulators.alibaba_fixtures", "tests.emulators.huawei_fixtures"]

ALLOW_SKIPS = "METALFLEET_ALLOW_SKIPS"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
    areas.reset()
    if item.get_closest_marker("e2e") is not None:
        areas.note("engine e2e")
    yield


@pytest.fixture(autouse=True)
def _state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own metalfleet state folder (cluster locks, leftovers), inherited by the processes it starts:
    nothing a test run does lands in the user's ~/.local/state."""
    from metalfleet.providers.runstate import STATE_DIR_ENV

    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path_factory.mktemp("state")))


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("requires_root")
    if marker is not None:
        require_root(str(marker.args[0]) if marker.args else "this test")


#: Fixture values that show a test used a real part even when a wider-scoped fixture started it earlier.
_PART_TYPES = {"HostFleet": "sim host", "SimHost": "sim host", "VmHost": "sim host", "SimFleet": "sim host",
               "SlurmCluster": "sim host"}


def part_area(value: object) -> str | None:
    """The area a fixture value shows a test used: any emulator's client object (a subclass of the emulator kit's
    EmulatorClient, whatever cloud it emulates) is an "emulator"; simulated hosts by their class name."""
    if isinstance(value, EmulatorClient):
        return "emulator"
    return _PART_TYPES.get(type(value).__name__)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "setup":
        for value in getattr(item, "funcargs", {}).values():
            area = part_area(value)
            if area:
                areas.note(area)
    if report.when == "teardown":
        report.user_properties.append(("area", areas.strongest()))


class _Tally:
    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.skipped: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and report.when in ("setup", "call"):
            self.skipped.append(report.nodeid)
        if report.when == "teardown":
            area = dict(report.user_properties).get("area", "unit")
            self.ran[str(area)] += 1

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        tr = terminalreporter
        counts = ", ".join(f"{area}: {self.ran.get(area, 0)}" for area in areas.AREAS)
        tr.write_line(f"metalfleet: tests run per area - {counts}")
        if self.skipped and os.environ.get(ALLOW_SKIPS) != "1":
            tr.write_line(f"metalfleet: {len(self.skipped)} test(s) skipped; a skip is a failure here "
                          f"(set {ALLOW_SKIPS}=1 to allow skips locally):", red=True, bold=True)
            for nodeid in self.skipped[:20]:
                tr.write_line(f"  skipped: {nodeid}", red=True)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.skipped and os.environ.get(ALLOW_SKIPS) != "1" and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    # Only the controller (or a run without xdist) tallies: workers send their reports to it.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Tally(), "metalfleet-tally")
