"""`metalfleet catalogue refresh --provider huawei` against the Huawei emulator's BSS price inquiry
(metalfleet.testing.huawei): huaweicloudsdkbss's BssClient over HTTP (SDK-HMAC-SHA256, checked by the emulator's
gateway), the production path. The emulator answers from its own price table (made-up CNY figures), which the
tests set, so a price in the refreshed catalogue can only have come through the API."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers.catalog import catalog_document, catalog_from_file, load_catalog, parse_catalog
from metalfleet.providers.errors import AuthError
from metalfleet.providers.huawei.pricing import HuaweiPriceInquiry, hourly_from_answer
from metalfleet.providers.models import BillingModel
from metalfleet.providers.refresh import RefreshReport, refresh_document
from metalfleet.providers.retry import RetryPolicy
from metalfleet.testing.huawei import DOMAIN_ID, PRICES, PROJECT_ID, REGION, TEST_AK, TEST_SK, HuaweiEmulator
from tests.emulators.huawei_fixtures import FLAVOR

CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]
CREDS = {"HUAWEICLOUD_SDK_AK": TEST_AK, "HUAWEICLOUD_SDK_SK": TEST_SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID,
         "HUAWEICLOUD_SDK_DOMAIN_ID": DOMAIN_ID}
FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)
TODAY = date.today()
#: A second Huawei flavor for the "not priced" case: the emulator's table has no price for it.
UNPRICED = "physical.metalfleet-unpriced.test"


@pytest.fixture
def bss(huawei_emulator: HuaweiEmulator) -> Iterator[HuaweiEmulator]:
    """The emulator with its price table as shipped (restored after the test)."""
    yield huawei_emulator
    huawei_emulator.set_price(REGION, UNPRICED, None)
    for (region, flavor), hourly in PRICES.items():
        huawei_emulator.set_price(region, flavor, hourly)


def inquiry(emulator: HuaweiEmulator, **kw: Any) -> HuaweiPriceInquiry:
    return HuaweiPriceInquiry(endpoint=emulator.url, **{"ak": TEST_AK, "sk": TEST_SK, "domain_id": DOMAIN_ID,
                                                        "project_id": PROJECT_ID, "retry": FAST, **kw})


def with_older_prices() -> dict[str, Any]:
    """The shipped catalogue plus an older Huawei price list (and a second flavor the emulator does not price)."""
    doc = copy.deepcopy(catalog_document())
    [entry] = [e for e in doc["offerings"] if e.get("provider") == "huawei"]
    other = copy.deepcopy(entry)
    other["name"] = UNPRICED
    doc["offerings"].append(other)
    doc["price_lists"].append({"provider": "huawei", "currency": "CNY", "as_of": "2025-01-15",
                               "source": "test: an older price list", "regions": {REGION: {
                                   FLAVOR: {"on_demand": 300.0}, UNPRICED: {"on_demand": 123.0}}}})
    parse_catalog(doc, "test catalogue")
    return doc


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUAWEICLOUD_", "METALFLEET_CATALOG"))}
    env.update(HOME=str(home), **CREDS)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False, env=env)


def test_refresh_writes_a_dated_cny_price_list_in_front_and_drops_no_offering(bss: HuaweiEmulator,
                                                                              tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = run("catalogue", "refresh", "--provider", "huawei", "--region", REGION, "--out", str(out),
              "--endpoint-url", bss.url, home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"huawei {REGION} {FLAVOR} on_demand: none -> 271.35" in res.stdout
    doc = json.loads(out.read_text())
    front = doc["price_lists"][0]
    assert (front["provider"], front["currency"], front["as_of"]) == ("huawei", "CNY", TODAY.isoformat())
    assert front["regions"] == {REGION: {FLAVOR: {"on_demand": 271.35}}}
    assert "Huawei Cloud BSS price inquiry" in front["source"] and bss.url in front["source"]
    catalog = catalog_from_file(str(out))
    shipped = load_catalog()
    assert [(e.provider, e.name) for e in catalog.entries] == [(e.provider, e.name) for e in shipped.entries]
    [price] = catalog.prices("huawei", REGION, FLAVOR)
    assert (price.billing, price.hourly, price.currency, price.as_of) == (BillingModel.ON_DEMAND, 271.35, "CNY",
                                                                          TODAY)
    [sent] = [r["params"]["body"] for r in bss.requests("ListOnDemandResourceRatings")]
    assert sent["project_id"] == PROJECT_ID
    [info] = sent["product_infos"]
    assert {k: info[k] for k in ("cloud_service_type", "resource_type", "resource_spec", "region", "usage_factor",
                                 "usage_value", "usage_measure_id", "subscription_num")} == {
        "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
        "resource_spec": FLAVOR, "region": REGION, "usage_factor": "Duration", "usage_value": 1,
        "usage_measure_id": 4, "subscription_num": 1}


def test_a_flavor_the_api_does_not_price_keeps_its_older_price_and_is_reported(bss: HuaweiEmulator) -> None:
    bss.set_price(REGION, FLAVOR, 250.5)
    doc = with_older_prices()
    report = RefreshReport(out="-", as_of=TODAY)
    out = refresh_document(doc, "huawei", inquiry(bss).prices, currency="CNY", source="test", report=report)
    assert out["price_lists"][0]["regions"] == {REGION: {FLAVOR: {"on_demand": 250.5}}}
    text = report.text()
    assert f"huawei {REGION} {FLAVOR} on_demand: 300 -> 250.5" in text
    assert f"kept: huawei {REGION} {UNPRICED} on_demand 123 CNY (as of 2025-01-15; the API did not price it)" in text
    catalog = parse_catalog(out, "refreshed")
    assert catalog.prices("huawei", REGION, UNPRICED)[0].hourly == 123.0
    assert {e.name for e in catalog.of("huawei")} == {FLAVOR, UNPRICED}
    refusals = [r for r in bss.requests("ListOnDemandResourceRatings")
                if r["params"]["body"]["product_infos"][0]["resource_spec"] == UNPRICED]
    assert len(refusals) == 1  # the API's refusal (CBC.99006006) is an answer, not retried


def test_throttling_is_retried_and_the_refresh_completes(bss: HuaweiEmulator) -> None:
    bss.set_faults(throttle=0.5, seed=3)
    doc = refresh_document(catalog_document(), "huawei", inquiry(bss).prices, currency="CNY", source="test",
                           regions=[REGION])
    assert doc["price_lists"][0]["regions"][REGION][FLAVOR] == {"on_demand": 271.35}
    assert bss.stats()["faults"].get("APIGW.0308", 0) > 0


def test_bad_credentials_are_an_auth_error_and_not_retried(bss: HuaweiEmulator,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AuthError, match=r"APIGW\.0301"):
        inquiry(bss, sk="not-the-secret").prices(REGION, [FLAVOR])
    assert len(bss.requests("ListOnDemandResourceRatings")) == 1
    monkeypatch.delenv("HUAWEICLOUD_SDK_DOMAIN_ID", raising=False)  # the process's environment, not the SDK
    with pytest.raises(AuthError, match="HUAWEICLOUD_SDK_DOMAIN_ID"):
        inquiry(bss, domain_id=None).prices(REGION, [FLAVOR])
    assert len(bss.requests("ListOnDemandResourceRatings")) == 1  # refused before anything was sent


def test_the_emulator_answers_in_the_sdk_response_shape(bss: HuaweiEmulator) -> None:
    from huaweicloudsdkbss.v2 import (
        DemandProductInfo,
        DemandProductRatingResult,
        ListOnDemandResourceRatingsRequest,
        ListOnDemandResourceRatingsResponse,
        RateOnDemandReq,
    )

    client = inquiry(bss)._bss()

    infos = [DemandProductInfo(id=str(i), cloud_service_type="hws.service.type.bms",
                               resource_type="hws.resource.type.bms", resource_spec=FLAVOR, region=region,
                               usage_factor="Duration", usage_value=2, usage_measure_id=4, subscription_num=1)
             for i, region in enumerate((REGION, "cn-north-4"), 1)]
    answer = client.list_on_demand_resource_ratings(ListOnDemandResourceRatingsRequest(
        body=RateOnDemandReq(project_id=PROJECT_ID, inquiry_precision=0, product_infos=infos)))
    assert isinstance(answer, ListOnDemandResourceRatingsResponse)
    assert answer.currency == "CNY" and answer.measure_id == 1
    assert float(answer.official_website_amount) == pytest.approx(2 * (271.35 + 268.8))
    assert [type(r) for r in answer.product_rating_results] == [DemandProductRatingResult] * 2
    assert [(r.id, float(r.official_website_amount)) for r in answer.product_rating_results] == [
        ("1", 542.7), ("2", 537.6)]
    # every key of the emulator's answer is one the SDK's models read
    doc = _raw_answer(bss)
    assert set(doc) <= set(ListOnDemandResourceRatingsResponse.attribute_map.values())
    for result in doc["product_rating_results"]:
        assert set(result) <= set(DemandProductRatingResult.attribute_map.values())
    assert hourly_from_answer(answer, FLAVOR) == 542.7


def _raw_answer(emulator: HuaweiEmulator) -> dict[str, Any]:
    """The emulator's answer to an inquiry as raw JSON (signed by the SDK's own signer, sent with urllib)."""
    import urllib.request

    from huaweicloudsdkcore.auth.credentials import GlobalCredentials
    from huaweicloudsdkcore.sdk_request import SdkRequest

    body = json.dumps({"project_id": PROJECT_ID, "product_infos": [{
        "id": "1", "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
        "resource_spec": FLAVOR, "region": REGION, "usage_factor": "Duration", "usage_value": 1,
        "usage_measure_id": 4, "subscription_num": 1}]})
    host = emulator.url.split("://", 1)[1]
    request = SdkRequest(method="POST", schema="http", host=host, resource_path="/v2/bills/ratings/on-demand-resources",
                         query_params=[], header_params={"Content-Type": "application/json", "X-Domain-Id": DOMAIN_ID},
                         body=body)
    signed = GlobalCredentials(TEST_AK, TEST_SK, DOMAIN_ID).sign_request(request)
    req = urllib.request.Request(emulator.url + "/v2/bills/ratings/on-demand-resources", data=body.encode(),
                                 method="POST", headers=dict(signed.header_params))
    with urllib.request.urlopen(req, timeout=10) as resp:
        doc: dict[str, Any] = json.loads(resp.read())
    return doc


def test_an_unknown_flavor_is_refused_with_the_bss_error_body(bss: HuaweiEmulator) -> None:
    from huaweicloudsdkbss.v2 import DemandProductInfo, ListOnDemandResourceRatingsRequest, RateOnDemandReq
    from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException

    client = inquiry(bss)._bss()
    with pytest.raises(ClientRequestException) as exc:
        client.list_on_demand_resource_ratings(ListOnDemandResourceRatingsRequest(body=RateOnDemandReq(
            project_id=PROJECT_ID, product_infos=[DemandProductInfo(
                id="1", cloud_service_type="hws.service.type.bms", resource_type="hws.resource.type.bms",
                resource_spec="physical.nope", region=REGION, usage_factor="Duration", usage_value=1,
                usage_measure_id=4, subscription_num=1)])))
    assert (exc.value.status_code, exc.value.error_code) == (400, "CBC.99006006")
    assert "physical.nope" in exc.value.error_msg
    assert inquiry(bss).prices(REGION, ["physical.nope"]) == {}
