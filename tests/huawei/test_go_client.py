"""A client metalfleet did not write: the official Go SDK (huaweicloud-sdk-go-v3, tests/clients/huawei_go) runs the
driver's core flow on the emulator with the very body the driver sends (flavors; the yearly/monthly create; its BSS
order and BMS job to a running server; the server details decoded; listed by name; tagged; its term read from BSS;
unsubscribed; gone), signing as the Go SDK does (no host among the signed headers), and sends requests the
reference table says are refused, which must be refused with the table's codes."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from metalfleet.providers import node_specs_for, parse_spec
from metalfleet.testing import reference
from metalfleet.testing.huawei import DOMAIN_ID, PROJECT_ID, TEST_AK, TEST_SK, HuaweiEmulator
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data
from tests.prereq import require_go_client

REF = reference.load("huawei-bms")


def _refusal(rule_id: str) -> dict[str, Any]:
    rule = REF.rule(rule_id)
    return {"status": rule.status, "code": rule.code}


def test_the_official_go_sdk_runs_the_driver_flow_and_is_refused_as_the_reference_says(
        huawei_emulator: HuaweiEmulator) -> None:
    binary = require_go_client("huawei_go")
    driver = huawei_driver(huawei_emulator)
    [spec] = node_specs_for(driver, parse_spec(huawei_spec_data("go-client", 1)))
    create = driver.create_request(spec)
    job = {"endpoint": huawei_emulator.url, "ak": TEST_AK, "sk": TEST_SK, "project_id": PROJECT_ID,
           "domain_id": DOMAIN_ID, "create": create, "timeout_s": 60,
           "tags": [{"key": "metalfleet:acceptance", "value": "passed"}]}
    huawei_emulator.reset_faults()  # the log from here on is the Go client's
    proc = subprocess.run([binary, json.dumps(job)], capture_output=True, text=True, timeout=180, check=False)
    steps = {s["step"]: s for s in map(json.loads, proc.stdout.splitlines())}
    assert proc.returncode == 0 and steps.get("done", {}).get("ok"), proc.stdout + proc.stderr

    assert steps["flavors"]["ok"] and steps["flavors"]["flavors"] == [spec.offering]
    assert steps["create"]["order_id"] and steps["create"]["job_id"]
    assert steps["order"]["status"] == 5
    server_id = steps["job"]["server_id"]
    assert steps["job"]["status"] == "SUCCESS" and server_id
    show = steps["show"]
    assert (show["status"], show["name"], show["charging_mode"]) == ("ACTIVE", "go-client-0", "1")
    assert show["order_id"] == steps["create"]["order_id"]
    assert show["delete_on_termination"] == ["true"], "decoded as the models' string"
    assert "__type_baremetal" in show["tags"] and "metalfleet:cluster=go-client" in show["tags"]
    assert steps["list"]["names"] == ["go-client-0"]
    assert "metalfleet:acceptance=passed" in steps["tag"]["tags"]
    assert steps["term"]["expire_times"] and steps["term"]["expire_times"][0] > "2000"
    assert len(steps["unsubscribe"]["order_ids"]) == 1
    assert steps["gone"]["status"] == "DELETED"
    for step, rule in (("refused_postpaid", "create-postpaid"), ("refused_period", "create-period-num"),
                       ("refused_signature", "gateway-signature"), ("refused_unsubscribe_gone", "unsubscribe-gone")):
        error = steps[step]["error"]
        assert {"status": error["status"], "code": error["code"]} == _refusal(rule), (step, error)
        assert error["request_id"]

    log = huawei_emulator.requests()
    created = [e for e in log if e["action"] == "CreateBareMetalServers" and e["status"] == 200]
    assert [e["params"]["body"] for e in created] == [create], "the Go SDK sent the driver's body as it is"
    assert log and all("gateway-host-optional" in (e.get("rules") or []) for e in log), "the Go SDK signs no host"
    by_step = {"create-postpaid": 0, "create-period-num": 0, "gateway-signature": 0, "unsubscribe-gone": 0}
    for e in log:
        for rule in e.get("rules") or []:
            if rule in by_step:
                by_step[rule] += 1
    assert by_step == dict.fromkeys(by_step, 1), by_step
