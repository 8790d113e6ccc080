"""The BMS emulator itself: its answers have the shapes the SDK's models read, it routes what the real SDK sends
(the wire capture), and its gateway refuses what the real one refuses. (Every rule of its reference table, and
every field it answers, is held to the table by tests/huawei/test_reference.py.)"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import RetryPolicy, node_specs_for, order_cluster, parse_spec, release_cluster
from metalfleet.testing.huawei import (
    DOMAIN_ID,
    PROJECT_ID,
    TEST_AK,
    TEST_SK,
    HuaweiEmulator,
    canonical_request,
    identify,
    signature,
)
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data

CAPTURE = Path(__file__).parents[1] / "support" / "fixtures" / "wire" / "huawei-bms-sdk-3.1.219.jsonl"


BMS, BSS = "huaweicloudsdkbms.v1.model", "huaweicloudsdkbss.v2.model"


def _model(name: str, package: str = BMS) -> Any:
    import importlib

    return getattr(importlib.import_module(package), name)


def unknown_keys(doc: Any, model: str, package: str = BMS, where: str = "") -> list[str]:
    """Keys of ``doc`` that the SDK model ``model`` (recursively) has no field for."""
    cls = _model(model, package)
    by_wire = {wire: attr for attr, wire in cls.attribute_map.items()}
    out = []
    for key, value in doc.items():
        if key not in by_wire:
            out.append(f"{where}{key}")
            continue
        kind = cls.openapi_types[by_wire[key]]
        inner = re.fullmatch(r"list\[(\w+)\]", kind) or re.fullmatch(r"dict\(str, list\[(\w+)\]\)", kind)
        if kind[:1].isupper() and isinstance(value, dict):
            out += unknown_keys(value, kind, package, f"{where}{key}.")
        elif inner and inner.group(1)[:1].isupper():
            items = value if isinstance(value, list) else [i for v in value.values() for i in v]
            out += [k for item in items for k in unknown_keys(item, inner.group(1), package, f"{where}{key}[].")]
    return out


def _get(emulator: HuaweiEmulator, path: str, *, sk: str = TEST_SK, bss: bool = False) -> Any:
    """A GET signed as the gateway checks it, answering the raw JSON (the SDK would drop unknown keys)."""
    date = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    host = emulator.url.removeprefix("http://")
    route, _, query = path.partition("?")
    scope = {"x-domain-id": DOMAIN_ID} if bss else {"x-project-id": PROJECT_ID}
    headers = {"host": host, "x-sdk-date": date, **scope}
    signed = sorted(headers)
    sig = signature(sk, date, canonical_request("GET", route, query, headers, signed, b""))
    req = urllib.request.Request(emulator.url + path, headers={
        "X-Sdk-Date": date, **({"X-Domain-Id": DOMAIN_ID} if bss else {"X-Project-Id": PROJECT_ID}),
        "Authorization": f"SDK-HMAC-SHA256 Access={TEST_AK}, SignedHeaders={';'.join(signed)}, Signature={sig}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_answers_have_the_shapes_the_sdk_models_read(huawei_emulator: HuaweiEmulator) -> None:
    driver = huawei_driver(huawei_emulator)
    nodes = order_cluster(driver, node_specs_for(driver, parse_spec(huawei_spec_data("shapes", 2))), timeout=30,
                          policy=RetryPolicy(attempts=4, base=0.001, cap=0.01))
    base = f"/v1/{PROJECT_ID}"
    flavors = _get(huawei_emulator, f"{base}/baremetalservers/flavors")
    assert flavors["flavors"] and unknown_keys(flavors, "ListBaremetalFlavorDetailExtendsResponse") == []
    detail = _get(huawei_emulator, f"{base}/baremetalservers/{nodes[0].id}")
    assert unknown_keys(detail, "ListBareMetalServerDetailsResponse") == []
    listed = _get(huawei_emulator, f"{base}/baremetalservers/detail?limit=1&offset=2&tags=metalfleet:cluster=shapes")
    assert listed["count"] == 2 and len(listed["servers"]) == 1, "page 2 of 1-server pages"
    assert unknown_keys(listed, "ListBareMetalServersResponse") == []
    job_id = huawei_emulator.requests("ShowJobInfos")[0]["params"]["path"]["job_id"]
    job = _get(huawei_emulator, f"{base}/jobs/{job_id}")
    assert job["status"] == "SUCCESS" and job["entities"]["sub_jobs"][0]["entities"]["server_id"]
    assert unknown_keys(job, "ShowJobInfosResponse") == []
    order_id = nodes[0].extra["order_id"]
    order = _get(huawei_emulator, f"/v2/orders/customer-orders/details/{order_id}", bss=True)
    assert order["order_info"]["status"] == 5 and unknown_keys(order, "ShowCustomerOrderDetailsResponse", BSS) == []
    release_cluster(driver, "shapes", unsubscribe=True)


def test_an_unsigned_or_badly_signed_call_gets_the_gateways_error_body(huawei_emulator: HuaweiEmulator) -> None:
    for sk in ("not-the-secret",):
        with pytest.raises(urllib.error.HTTPError) as info:
            _get(huawei_emulator, f"/v1/{PROJECT_ID}/baremetalservers/flavors", sk=sk)
        assert info.value.code == 401
        body = json.loads(info.value.read())
        assert body["error_code"] == "APIGW.0301" and body["error_msg"] and body["request_id"]
        assert info.value.headers["X-Request-Id"] == body["request_id"]
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(huawei_emulator.url + f"/v1/{PROJECT_ID}/baremetalservers/flavors", timeout=10)
    assert info.value.code == 401


def test_it_routes_every_request_the_real_sdk_sent() -> None:
    """The captured SDK requests (fixtures/wire) are the actions the emulator names them."""
    captured = [json.loads(line) for line in CAPTURE.read_text().splitlines()]
    names = []
    for c in captured:
        environ = {"PATH_INFO": c["path"], "REQUEST_METHOD": c["method"],
                   "QUERY_STRING": "&".join(f"{k}={v}" for k, vs in c["query"].items() for v in vs)}
        found = identify(environ, c["body"].encode())
        assert found is not None
        names.append(found[0])
    assert names == ["CreateBareMetalServers", "ShowJobInfos", "ShowBaremetalServerDetails",
                     "ListBaremetalFlavorDetailExtends", "BaremetalServersAction", "DeleteBaremetalServer",
                     "ShowBaremetalServerDetails"]
    for c in captured:  # the Python SDK signs these headers (the gateway requires x-sdk-date only)
        signed = re.search(r"SignedHeaders=([^,]+)", c["headers"]["Authorization"])
        assert signed and {"host", "x-sdk-date", "x-project-id"} <= set(signed.group(1).split(";"))
