"""The emulator kit on its own (metalfleet.testing.kit), with a tiny fake service (kit_fake.py) behind its fault
middleware: throttle, 5xx, lost responses, scripted errors, capacity, latency, the clock and the control
endpoint in process; then the same emulator as a process (LISTENING line, control over HTTP, SIGTERM,
parent-pid watchdog); then the simulated-host registry with a real VM-mode host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import Client

from metalfleet.providers.console import host_keys_from_console
from metalfleet.testing.kit import (
    Clock,
    EmulatorClient,
    FaultSwitch,
    SimHosts,
    console_text,
)
from tests.conftest import part_area

from .kit_fake import CODES, FakeEmulator, build

REPO = Path(__file__).resolve().parents[2]


class Emu:
    """The fake service behind the kit's middleware, called in process through WSGI."""

    def __init__(self) -> None:
        self.switch = FaultSwitch(CODES, capacity_actions={"Buy"})
        self.clock = Clock()
        app, self.service = build(self.switch, self.clock)
        self.client = Client(app)

    def call(self, action: str, **params: Any) -> tuple[int, dict[str, Any], dict[str, str]]:
        resp = self.client.post("/", data={"Action": action, **{k: str(v) for k, v in params.items()}})
        return resp.status_code, json.loads(resp.get_data()), dict(resp.headers)

    def control(self, method: str, what: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        resp = self.client.open(f"/_metalfleet/{what}", method=method, json=body if method == "POST" else None)
        return resp.status_code, json.loads(resp.get_data())


@pytest.fixture
def emu() -> Emu:
    return Emu()


def test_throttle_answers_the_providers_error_and_never_reaches_the_service(emu: Emu) -> None:
    assert emu.control("POST", "faults", {"throttle": 1.0}) == (200, {"ok": True})
    status, body, headers = emu.call("Echo", A=1)
    assert status == 400 and body["Code"] == "Throttling.User" and body["Message"] == CODES.throttle.message
    assert headers["x-acs-request-id"] == body["RequestId"] and headers["Content-Type"] == "application/json"
    assert emu.service.calls == 0
    stats = emu.control("GET", "stats")[1]
    assert stats == {"requests": 1, "by_action": {"Echo": 1}, "faults": {"Throttling.User": 1}}
    assert emu.control("GET", "requests")[1] == [{"action": "Echo", "params": {"Action": "Echo", "A": "1"},
                                                  "status": 400}]


def test_a_seeded_fraction_is_reproducible_and_limited_to_its_actions(emu: Emu) -> None:
    def run() -> list[int]:
        emu.control("POST", "faults", {"throttle": 0.3, "server_error": 0.1, "seed": 7, "actions": ["Echo"]})
        return [emu.call("Echo")[0] for _ in range(200)]

    first, second = run(), run()
    assert first == second  # same seed, same faults
    assert 30 <= first.count(400) <= 90 and 5 <= first.count(503) <= 40 and first.count(200) >= 100
    assert all(emu.call("Now")[0] == 200 for _ in range(50))  # not in "actions": never faulted


def test_lost_response_lets_the_service_work_then_answers_a_server_error(emu: Emu) -> None:
    emu.control("POST", "faults", {"lost_response": 1.0})
    status, body, _ = emu.call("Buy", Count=2)
    assert (status, body["Code"]) == (503, "ServiceUnavailable")
    emu.control("POST", "faults", {})
    assert emu.call("Calls")[1] == {"Calls": 2, "Bought": 2}  # the purchase happened; only its answer was lost
    assert emu.control("GET", "stats")[1]["faults"] == {"LostResponse": 1}
    assert [e["status"] for e in emu.control("GET", "requests?action=Buy")[1]] == [503]


def test_script_skips_then_fails_chosen_calls_deterministically(emu: Emu) -> None:
    emu.control("POST", "faults", {"script": [
        {"action": "Buy", "code": "QuotaExceed.Instance", "status": 403, "after": 1, "times": 2},
        {"action": "Now", "code": "InternalError", "status": 500, "message": "down for good", "times": -1}]})
    buys = [emu.call("Buy") for _ in range(4)]
    assert [s for s, _, _ in buys] == [200, 403, 403, 200]
    assert buys[1][1]["Code"] == "QuotaExceed.Instance" and buys[1][1]["Message"] == "Injected QuotaExceed.Instance " \
                                                                                      "for Buy."
    assert [emu.call("Now")[1]["Message"] for _ in range(3)] == ["down for good"] * 3
    assert emu.call("Echo")[0] == 200  # no script entry for it
    assert emu.control("GET", "stats")[1]["faults"] == {"QuotaExceed.Instance": 2, "InternalError": 3}


def test_capacity_is_the_services_answer_and_counted(emu: Emu) -> None:
    emu.control("POST", "faults", {"capacity_remaining": 3})
    assert [emu.call("Buy", Count=2)[0], emu.call("Buy", Count=2)[0], emu.call("Buy", Count=1)[0]] == [200, 403, 200]
    status, body, _ = emu.call("Buy", Count=1, Zone="cn-beijing-h")
    assert status == 403 and body["Code"] == "OperationDenied.NoStock" and "cn-beijing-h" in body["Message"]
    emu.control("POST", "faults", {"capacity": 1.0})
    assert emu.call("Buy")[0] == 403 and emu.call("Echo")[0] == 200  # only capacity actions
    assert emu.control("GET", "stats")[1]["faults"] == {"OperationDenied.NoStock": 3}


def test_latency_delays_only_the_named_actions(emu: Emu) -> None:
    emu.control("POST", "faults", {"latency_ms": 150, "actions": ["Echo"]})
    started = time.monotonic()
    assert emu.call("Echo")[0] == 200
    assert time.monotonic() - started >= 0.15  # a lower bound: the middleware slept at least that long


def test_clock_moves_forward_and_reset_brings_it_back(emu: Emu) -> None:
    before = datetime.fromisoformat(emu.call("Now")[1]["Now"])
    status, moved = emu.control("POST", "clock", {"advance_seconds": 3600})
    assert status == 200
    seen = datetime.fromisoformat(emu.call("Now")[1]["Now"])
    assert 3600 <= (seen - before).total_seconds() < 3660
    assert datetime.fromisoformat(moved["now"]) <= seen
    assert emu.control("POST", "reset", {}) == (200, {"ok": True})
    assert (datetime.fromisoformat(emu.call("Now")[1]["Now"]) - before).total_seconds() < 60


def test_control_endpoint_refusals_extras_and_reset(emu: Emu) -> None:
    status, body = emu.control("POST", "faults", {"throttel": 0.5})
    assert status == 400 and "throttel" in body["error"]
    assert emu.control("POST", "faults", {"throttle": 2})[0] == 400
    assert emu.control("GET", "nothing")[0] == 404
    assert emu.control("GET", "sim-hosts")[0] == 404  # this emulator has no simulated hosts
    assert emu.client.get("/health").status_code == 200  # not an API call: passed through, not counted
    emu.call("Buy", Count=2)
    assert len(emu.control("GET", "bought")[1]) == 2  # the provider's own control endpoint
    emu.control("POST", "reset", {})
    assert emu.control("GET", "stats")[1] == {"requests": 0, "by_action": {}, "faults": {}}
    assert len(emu.control("GET", "bought")[1]) == 2  # a plain reset keeps the service's state
    emu.control("POST", "reset", {"state": True})
    assert emu.control("GET", "bought")[1] == []


def test_extra_fault_keys_are_the_providers() -> None:
    switch = FaultSwitch(CODES, extra_keys={"job_failure"})
    switch.configure({"job_failure": 0.5, "throttle": 0.1})
    assert switch.faults.extra == {"job_failure": 0.5} and switch.faults.throttle == 0.1
    with pytest.raises(ValueError, match="job_failure"):
        FaultSwitch(CODES).configure({"job_failure": 0.5})


def test_console_text_carries_the_host_key_for_the_driver() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    public = Ed25519PrivateKey.generate().public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    key = public.decode() + " i-1-hostkey"
    aws = console_text("127.77.0.5", key, datetime(2025, 1, 2))
    assert host_keys_from_console(aws) == (" ".join(key.split()[:2]) + " root@ip-127-77-0-5",)
    assert "\r\n" in aws and "DataSourceEc2Local" in aws
    ali = console_text("127.77.0.6", key, datetime(2025, 1, 2), kernel="5.10.134-16.al8.x86_64",
                       datasource="DataSourceAliYun", interface="eth0", hostname="iZ2ze0abcZ")
    assert host_keys_from_console(ali) == (" ".join(key.split()[:2]) + " root@iZ2ze0abcZ",)
    assert "DataSourceAliYun" in ali and "5.10.134-16.al8" in ali and "ip-127" not in ali


def test_sim_host_rules_match_by_tags() -> None:
    sims = SimHosts(provider="alibaba")
    sims.configure([{"tags": {"metalfleet:index": "1"}, "config": {"gpu": {"count": 7}}},
                    {"tags": {}, "config": {"gpu": {"model": "H20"}, "x": 1}}])
    assert sims.config_for({"metalfleet:index": "1"}) == {"gpu": {"count": 7, "model": "H20"}, "x": 1}
    assert sims.config_for({"metalfleet:index": "2"}) == {"gpu": {"model": "H20"}, "x": 1}
    with pytest.raises(ValueError, match="sim-host rule"):
        sims.configure([{"tags": {}, "conf": {}}])


def test_the_suite_counts_any_emulator_client_as_an_emulator() -> None:
    class Other(EmulatorClient):
        module = "x"

    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdout=subprocess.PIPE)
    proc.wait()
    try:
        assert part_area(Other(proc, "127.0.0.1", 1)) == "emulator"
        assert part_area(FakeEmulator(proc, "127.0.0.1", 1)) == "emulator"
        assert part_area(object()) is None
    finally:
        assert proc.stdout is not None
        proc.stdout.close()


# -- as a process ----------------------------------------------------------------------------------
@pytest.fixture
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m tests.emulators.kit_fake`` finds this checkout's tests package from any working directory."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))


def _post(url: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    data = "&".join(f"{k}={v}" for k, v in form.items()).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_process_starts_serves_faults_over_http_and_stops(importable: None) -> None:
    with FakeEmulator.start() as emu:
        assert emu.port > 0 and emu.url == f"http://127.0.0.1:{emu.port}"
        emu.set_faults(script=[{"action": "Buy", "code": "Throttling.User", "status": 400, "times": 1}])
        assert _post(emu.url, {"Action": "Buy"})[1]["Code"] == "Throttling.User"
        assert _post(emu.url, {"Action": "Buy", "Count": "2"})[0] == 200
        assert emu.calls("Buy") == 2 and emu.calls() == 2 and emu.stats()["faults"] == {"Throttling.User": 1}
        assert [r["status"] for r in emu.requests("Buy")] == [400, 200]
        first = datetime.fromisoformat(_post(emu.url, {"Action": "Now"})[1]["Now"])
        assert (datetime.fromisoformat(emu.advance_clock(86400)) - first).total_seconds() >= 86400
        with pytest.raises(RuntimeError, match="unknown fault setting"):
            emu.set_faults(nonsense=1)
        emu.reset_faults()
        assert emu.calls() == 0
        emu.reset_state()
        assert emu.control("GET", "bought") == []
    assert emu.process.returncode == 0  # SIGTERM: a clean exit


def test_process_exits_when_its_parent_is_gone(importable: None) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = subprocess.Popen([sys.executable, "-m", FakeEmulator.module, "--port", "0", "--quiet",
                               "--parent-pid", str(parent.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.stdout is not None
        line = server.stdout.readline().decode()
        assert line.startswith("LISTENING "), server.stderr.read().decode() if server.stderr else line
        parent.kill()
        parent.wait()
        assert server.wait(timeout=15) == 0  # the watchdog polls once a second
    finally:
        for proc in (parent, server):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for stream in (server.stdout, server.stderr):
            if stream:
                stream.close()


# -- simulated hosts ---------------------------------------------------------------------------------
@pytest.mark.requires_root("simulated hosts (namespaces, mounts, sshd)")
def test_sim_hosts_boot_per_instance_keep_consoles_and_apply_ssh_rules() -> None:
    sims = SimHosts(provider="alibaba", console=lambda a, k, t: console_text(a, k, t, hostname="iZtestZ"))
    sims.configure([{"tags": {"metalfleet:index": "3"}, "config": {"note": "rule-applied"}}])
    try:
        host = sims.boot("i-kit0001", "ecs.ebmgn8v.48xlarge", [], {"metalfleet:index": "3"},
                         fabric={"kind": "erdma", "nics": 2, "nic_gbps": 200.0})
        assert host.index == 3 and host.fleet.profile == "alibaba-h20"
        assert host.config()["note"] == "rule-applied" and host.config()["fabric"]["kind"] == "erdma"
        [listed] = sims.listing()
        assert listed["instance_id"] == "i-kit0001" and listed["profile"] == "alibaba-h20" and listed["running"]
        console = sims.console("i-kit0001") or ""
        assert host_keys_from_console(console) == (" ".join(host.host_key.split()[:2]) + " root@iZtestZ",)
        seen: list[str] = []

        def sources(instance_id: str, h: Any) -> list[str]:
            seen.append(instance_id)
            return ["10.0.0.0/8"]

        sims.apply_ssh_rules(sources)
        sims.apply_ssh_rules(sources)  # unchanged: not sent to the host again
        assert seen == ["i-kit0001", "i-kit0001"] and host.ssh_allow == ("10.0.0.0/8",)
        sims.power_off("i-kit0001")
        assert sims.listing()[0]["running"] is False
        sims.power_on("i-kit0001")
        assert sims.listing()[0]["running"] is True
        sims.stop("i-kit0001")
        assert sims.listing() == [] and sims.get("i-kit0001") is None
        assert sims.console("i-kit0001") == console  # a cloud keeps the console after the instance is gone
    finally:
        sims.stop_all()
