"""`metalfleet catalogue refresh` against each cloud's pricing API, one suite over the providers (as tests/contract
is for the drivers). Each provider's emulator answers from its own made-up price table (decoys included), never the
catalogue's, so a price in the refreshed catalogue can only have come through the API, by the production path:

* aws: the Price List emulator (metalfleet.testing.pricing), boto3's pricing client (SigV4, JSON 1.1);
* alibaba: the ECS emulator's DescribePrice (metalfleet.testing.alibaba), the official SDK (ACS3-HMAC-SHA256):
  list prices by the hour, as spot, for a month, one and three years; a subscription discount, a system disk line;
* huawei: the Huawei emulator's BSS price inquiries (metalfleet.testing.huawei), on demand and yearly/monthly,
  huaweicloudsdkbss's BssClient (SDK-HMAC-SHA256, checked by the emulator's gateway).

The expected figures are computed here from each emulator's own table (the hours a subscription buys:
metalfleet.providers.requirements), never written out, so a table change cannot leave a test asserting old numbers.

The shared tests run over :data:`CASES` (what each provider sells, its figures, its faults); each provider's own
tests, which have no counterpart on the others, follow under its name.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.providers.alibaba.pricing import UNITS, AlibabaPriceList, price_of
from metalfleet.providers.aws.pricing import AwsPriceList, prices_from_products
from metalfleet.providers.catalog import catalog_document, catalog_from_file, load_catalog, parse_catalog
from metalfleet.providers.errors import AuthError, ProviderError
from metalfleet.providers.huawei.pricing import HuaweiPriceInquiry, hourly_from_answer, period_amount_from_answer
from metalfleet.providers.models import BillingModel
from metalfleet.providers.refresh import PRICE_SOURCES, RefreshReport, refresh_document
from metalfleet.providers.requirements import HOURS_PER_MONTH, HOURS_PER_YEAR
from metalfleet.providers.retry import RetryPolicy
from metalfleet.testing import alibaba as ali
from metalfleet.testing import huawei as hw
from metalfleet.testing.alibaba import AlibabaEmulator
from metalfleet.testing.huawei import DOMAIN_ID, PROJECT_ID, TEST_AK, TEST_SK, HuaweiEmulator
from metalfleet.testing.pricing import DEFAULT_PRODUCTS, PricingEmulator, product_document, start_pricing_emulator
from tests.alibaba.conftest import ALL_TYPES
from tests.emulators.alibaba_fixtures import ALIBABA_ENV, ecs_call
from tests.emulators.huawei_fixtures import FLAVOR
from tests.emulators.running import running_emulator

CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]
FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)
TODAY = date.today()
AWS_CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
HUAWEI_CREDS = {"HUAWEICLOUD_SDK_AK": TEST_AK, "HUAWEICLOUD_SDK_SK": TEST_SK,
                "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID, "HUAWEICLOUD_SDK_DOMAIN_ID": DOMAIN_ID}
#: A second Huawei flavor for the "not priced" case: the emulator's table has no price for it.
UNPRICED = "physical.metalfleet-unpriced.test"
#: Alibaba's subscriptions: billing model -> months bought and the hours they cover.
ALIBABA_TERMS = {"monthly": (1, HOURS_PER_MONTH), "reserved_1y": (12, HOURS_PER_YEAR),
                 "reserved_3y": (36, 3 * HOURS_PER_YEAR)}


def alibaba_expected(table: Mapping[str, Mapping[str, float]] = ali.PRICES) -> dict[str, dict[str, float]]:
    """What a refresh makes of the ECS emulator's table: pay-as-you-go and (for a type sold so) spot per hour; each
    subscription's trade price (the list price less the subscription discount, to the emulator's 4 decimals) over
    the hours it buys. The system disk line is not the instance's price."""
    out: dict[str, dict[str, float]] = {}
    for name in ALL_TYPES:
        row = table[name]
        rates = {"on_demand": row["hour"], **({"spot": row["spot"]} if "spot" in row else {})}
        for billing, (months, hours) in ALIBABA_TERMS.items():
            rates[billing] = round(round(row["month"] * months * (1 - ali.SUBSCRIPTION_DISCOUNT), 4) / hours, 6)
        out[name] = rates
    return out


def huawei_expected(region: str = hw.REGION, flavor: str = FLAVOR) -> dict[str, float]:
    """What a refresh makes of the Huawei emulator's tables: on demand per hour; a month's and a year's price (one
    server, one period) over the hours each covers."""
    return {"on_demand": hw.PRICES[(region, flavor)],
            "monthly": round(hw.PERIOD_PRICES[(region, flavor, 2)] / HOURS_PER_MONTH, 6),
            "reserved_1y": round(hw.PERIOD_PRICES[(region, flavor, 3)] / HOURS_PER_YEAR, 6)}


ALIBABA_PRICES = alibaba_expected()
HUAWEI_PRICES = huawei_expected()


# -- each provider's pricing emulator, its table as shipped ---------------------------------------------------
@pytest.fixture(scope="module")
def pricing_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PricingEmulator]:
    with running_emulator(lambda log: start_pricing_emulator(log_path=str(log)), tmp_path_factory, "pricing",
                          AWS_CREDS, ("AWS_PROFILE", "AWS_ENDPOINT_URL")) as emulator:
        yield emulator


@pytest.fixture
def pricing(pricing_session: PricingEmulator) -> PricingEmulator:
    pricing_session.reset_state()
    return pricing_session


@pytest.fixture
def ecs(alibaba_emulator: AlibabaEmulator) -> Iterator[AlibabaEmulator]:
    yield alibaba_emulator
    for name, table in ali.PRICES.items():  # the session's emulator: put back any price a test changed
        alibaba_emulator.set_price(name, table["hour"], table["month"], table.get("spot"))


@pytest.fixture
def bss(huawei_emulator: HuaweiEmulator) -> Iterator[HuaweiEmulator]:
    yield huawei_emulator
    huawei_emulator.set_price(hw.REGION, UNPRICED, None)
    for period in (2, 3):
        huawei_emulator.set_period_price(hw.REGION, UNPRICED, period, None)
    for (region, flavor), hourly in hw.PRICES.items():
        huawei_emulator.set_price(region, flavor, hourly)
    for (region, flavor, period), amount in hw.PERIOD_PRICES.items():
        huawei_emulator.set_period_price(region, flavor, period, amount)


def inquiry(emulator: HuaweiEmulator, **kw: Any) -> HuaweiPriceInquiry:
    return HuaweiPriceInquiry(endpoint=emulator.url, **{"ak": TEST_AK, "sk": TEST_SK, "domain_id": DOMAIN_ID,
                                                        "project_id": PROJECT_ID, "retry": FAST, **kw})


# -- what each provider's first refresh shows beyond the shared checks ------------------------------------------
def _aws_first_refresh(pricing: PricingEmulator, out: Path, stdout: str) -> None:
    catalog = catalog_from_file(str(out))
    shipped = load_catalog()
    p5 = {p.billing: p for p in catalog.prices("aws", "us-east-1", "p5.48xlarge")}
    assert (p5[BillingModel.ON_DEMAND].hourly, p5[BillingModel.ON_DEMAND].as_of) == (50.0, TODAY)
    assert "AWS Price List query API" in p5[BillingModel.ON_DEMAND].source
    assert (p5[BillingModel.CAPACITY_BLOCK].hourly, p5[BillingModel.CAPACITY_BLOCK].as_of) == (31.464,
                                                                                               date(2025, 6, 1))
    assert pricing.calls("GetProducts") == len(shipped.of("aws"))  # one query per AWS offering in us-east-1
    sent = pricing.requests("GetProducts")[0]["params"]
    assert sent["ServiceCode"] == "AmazonEC2"
    assert {f["Field"]: f["Value"] for f in sent["Filters"]} | {"instanceType": "-"} == {
        "instanceType": "-", "regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared",
        "preInstalledSw": "NA", "capacitystatus": "Used"}
    listing = run(AWS, "offerings", "--catalog", str(out), "--provider", "aws", "--gpu", "H100", "--json",
                  home=out.parent)
    [row] = [r for r in json.loads(listing.stdout) if r.get("region", "us-east-1") == "us-east-1"]
    assert [(p["billing"], p["hourly"], p["age_days"]) for p in row["prices"]] == [
        ("on_demand", 50.0, 0), ("reserved_1y", 36.0, 0), ("reserved_3y", 25.0, 0), ("capacity_block", 31.464,
                                                                                      (TODAY - date(2025, 6, 1)).days)]


def _alibaba_first_refresh(ecs: AlibabaEmulator, out: Path, stdout: str) -> None:
    region = ali.REGION
    count = sum(len(rates) for rates in ALIBABA_PRICES.values())
    assert f"{count} price(s) changed or added" in stdout and "kept:" not in stdout
    front = json.loads(out.read_text())["price_lists"][0]
    assert front["regions"] == {region: ALIBABA_PRICES}
    # a type the emulator does not sell as spot is priced for every other model, not for spot
    unsold = [n for n in ALL_TYPES if "spot" not in ali.PRICES[n]]
    assert unsold and all(set(front["regions"][region][n]) == {"on_demand", *ALIBABA_TERMS} for n in unsold)
    catalog, shipped = catalog_from_file(str(out)), load_catalog()
    h20 = {p.billing: p for p in catalog.prices("alibaba", region, "ecs.ebmgn8v.48xlarge")}
    table = ali.PRICES["ecs.ebmgn8v.48xlarge"]
    assert (h20[BillingModel.ON_DEMAND].hourly, h20[BillingModel.ON_DEMAND].currency,
            h20[BillingModel.ON_DEMAND].as_of) == (table["hour"], "CNY", TODAY)
    assert h20[BillingModel.SPOT].hourly == table["spot"]
    assert h20[BillingModel.MONTHLY].hourly == pytest.approx(table["month"] * 0.85 / HOURS_PER_MONTH)
    assert h20[BillingModel.RESERVED_1Y].hourly == pytest.approx(12 * table["month"] * 0.85 / HOURS_PER_YEAR)
    assert h20[BillingModel.RESERVED_3Y].hourly == pytest.approx(36 * table["month"] * 0.85 / (3 * HOURS_PER_YEAR))
    # one DescribePrice call per billing model and offering ECS prices: PostPaid by the hour, spot by the hour,
    # PrePaid for one month, one year and three years; one (refused) for an offering it does not
    sent = [r["params"] for r in ecs.requests("DescribePrice")]
    listed = [e.name for e in shipped.of("alibaba", orderable=True)]
    assert set(ALL_TYPES) <= set(listed)
    assert len(sent) == len(UNITS) * len(ALL_TYPES) + len(set(listed) - set(ali.PRICES))
    asked = [(p["InstanceType"], p["PriceUnit"], p.get("Period"), p.get("SpotStrategy")) for p in sent
             if p["InstanceType"] in ali.PRICES]
    assert Counter(asked) == Counter((n, unit, period, spot) for n in ALL_TYPES for unit, period, spot in (
        ("Hour", None, None), ("Hour", None, "SpotAsPriceGo"), ("Month", "1", None), ("Year", "1", None),
        ("Year", "3", None)))
    assert {(p["RegionId"], p["ResourceType"]) for p in sent} == {(region, "instance")}
    assert not any("ZoneId" in p or "SpotDuration" in p for p in sent)


def _huawei_first_refresh(bss: HuaweiEmulator, out: Path, stdout: str) -> None:
    region = hw.REGION
    front = json.loads(out.read_text())["price_lists"][0]
    assert front["regions"] == {region: {FLAVOR: HUAWEI_PRICES}}
    prices = {p.billing: p for p in catalog_from_file(str(out)).prices("huawei", region, FLAVOR)}
    assert {b: (p.hourly, p.currency, p.as_of) for b, p in prices.items()} == {
        BillingModel(b): (v, "CNY", TODAY) for b, v in HUAWEI_PRICES.items()}
    assert prices[BillingModel.MONTHLY].hourly == pytest.approx(hw.TERM_PRICES[FLAVOR] / HOURS_PER_MONTH, abs=1e-6)
    assert prices[BillingModel.RESERVED_1Y].hourly == pytest.approx(10 * hw.TERM_PRICES[FLAVOR] / HOURS_PER_YEAR,
                                                                    abs=1e-6)
    periods = [r["params"]["body"] for r in bss.requests("ListRateOnPeriodDetail")]
    assert [b["project_id"] for b in periods] == [PROJECT_ID, PROJECT_ID]
    assert [b["product_infos"] for b in periods] == [[{
        "id": "1", "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
        "resource_spec": FLAVOR, "region": region, "period_type": period, "period_num": 1, "subscription_num": 1}]
        for period in (2, 3)]  # a month, then a year; no available_zone (absent, it is no filter)
    [sent] = [r["params"]["body"] for r in bss.requests("ListOnDemandResourceRatings")]
    assert sent["project_id"] == PROJECT_ID
    [info] = sent["product_infos"]
    assert {k: info[k] for k in ("cloud_service_type", "resource_type", "resource_spec", "region", "usage_factor",
                                 "usage_value", "usage_measure_id", "subscription_num")} == {
        "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
        "resource_spec": FLAVOR, "region": region, "usage_factor": "Duration", "usage_value": 1,
        "usage_measure_id": 4, "subscription_num": 1}


# -- the case table ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One provider's pricing API as the shared tests see it."""

    provider: str
    #: The fixture giving the provider's pricing emulator, its price table as shipped.
    emulator: str
    #: The SDK's environment variables (none inherited by the CLI) and the emulator's credentials in them.
    sdk_env: str
    creds: Mapping[str, str]
    currency: str
    #: What the provider's price source (and so each refreshed price list) names.
    source: str
    region: str
    #: The refresh command's own options for this provider, and lines its first refresh prints.
    refresh: tuple[str, ...]
    first_lines: tuple[str, ...]
    #: The provider's own checks of that first refresh: (emulator, the catalogue written, stdout).
    first_refresh: Callable[[Any, Path, str], None]
    #: The provider's price fetch on an emulator (short retries), and the throttling its emulator answers with.
    fetch: Callable[[Any], Any]
    throttle: Mapping[str, Any]
    throttle_code: str
    #: Prices a throttled refresh still gets in ``region``: all of them, or (``whole_region`` False) some.
    throttled: Mapping[str, Mapping[str, float]]
    whole_region: bool
    #: Regions a refresh_document call names (None: all the catalogue's).
    regions: tuple[str, ...] | None

    def __str__(self) -> str:
        return self.provider


AWS = Case(
    provider="aws", emulator="pricing", sdk_env="AWS_", creds=AWS_CREDS, currency="USD",
    source="AWS Price List query API", region="us-east-1", refresh=(),
    # the emulator's figures (p5 50.0 on demand, 36.0 / 25.0 reserved), not its decoys (Windows 75, Dedicated
    # 55, SQL 65, capacity-reservation products at 0)
    first_lines=("aws us-east-1 p5.48xlarge on_demand: 55.04 -> 50",
                 "aws us-east-1 p5.48xlarge reserved_1y: none -> 36",
                 "aws us-east-1 p5.48xlarge reserved_3y: none -> 25",
                 "kept: aws us-east-1 p5.48xlarge capacity_block 31.464 USD "
                 "(as of 2025-06-01; the API did not price it)",
                 "still unpriced (listed, no price before or now): aws us-east-1 g5.48xlarge"),
    first_refresh=_aws_first_refresh,
    fetch=lambda emulator: AwsPriceList(endpoint_url=emulator.url, retry=FAST).prices,
    throttle={"throttle": 0.4, "seed": 7}, throttle_code="ThrottlingException",
    throttled={"p4d.24xlarge": {"on_demand": 20.0, "reserved_1y": 13.0}}, whole_region=False, regions=None)
ALIBABA = Case(
    provider="alibaba", emulator="ecs", sdk_env="ALIBABA_CLOUD_", creds=ALIBABA_ENV, currency="CNY",
    source="DescribePrice", region=ali.REGION, refresh=("--provider", "alibaba", "--region", ali.REGION),
    first_lines=tuple(f"alibaba {ali.REGION} {name} {billing}: none -> {value:g}"
                      for name, rates in ALIBABA_PRICES.items() for billing, value in rates.items()),
    first_refresh=_alibaba_first_refresh,
    fetch=lambda emulator: AlibabaPriceList(endpoint=emulator.url, retry=FAST).prices,
    throttle={"throttle": 0.4, "seed": 7}, throttle_code="Throttling.User",
    throttled=ALIBABA_PRICES, whole_region=True, regions=(ali.REGION,))
HUAWEI = Case(
    provider="huawei", emulator="bss", sdk_env="HUAWEICLOUD_", creds=HUAWEI_CREDS, currency="CNY",
    source="Huawei Cloud BSS price inquiry", region=hw.REGION, refresh=("--provider", "huawei", "--region", hw.REGION),
    first_lines=tuple(f"huawei {hw.REGION} {FLAVOR} {billing}: none -> {value:g}"
                      for billing, value in HUAWEI_PRICES.items()),
    first_refresh=_huawei_first_refresh,
    fetch=lambda emulator: inquiry(emulator).prices,
    throttle={"throttle": 0.5, "seed": 3}, throttle_code="APIGW.0308",
    throttled={FLAVOR: HUAWEI_PRICES}, whole_region=False, regions=(hw.REGION,))
CASES = (AWS, ALIBABA, HUAWEI)


def run(case: Case, *args: str, home: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI with only ``env`` (default: the emulator's credentials) of the provider's SDK variables."""
    base = {k: v for k, v in os.environ.items() if not k.startswith((case.sdk_env, "METALFLEET_CATALOG"))}
    base.update(HOME=str(home), **(case.creds if env is None else env))
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False, env=base)


def refresh(case: Case, emulator: Any, out: Path, *extra: str, env: Mapping[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """The refresh CLI. The day it says it priced as of must be the day it ran; the tests' expectations (TODAY)
    follow it, so a suite that runs across midnight expects the day the refresh really ran."""
    global TODAY
    before = date.today()
    res = run(case, "catalogue", "refresh", *case.refresh, "--out", str(out), "--endpoint-url", emulator.url, *extra,
              home=out.parent, env=env)
    after = date.today()
    said = re.search(r"as of (\d{4}-\d{2}-\d{2})", res.stdout)
    if said:
        day = date.fromisoformat(said.group(1))
        assert before <= day <= after, f"refreshed as of {day}, run between {before} and {after}"
        TODAY = day
    return res


@pytest.fixture(params=CASES, ids=str)
def case(request: pytest.FixtureRequest) -> Case:
    param: Case = request.param
    return param


@pytest.fixture
def api(case: Case, request: pytest.FixtureRequest) -> Any:
    """The case's pricing emulator."""
    return request.getfixturevalue(case.emulator)


# -- the shared tests ----------------------------------------------------------------------------------------
def test_each_cloud_is_a_price_source_in_its_currency(case: Case) -> None:
    src = PRICE_SOURCES[case.provider]()
    assert src.currency == case.currency and case.source in src.source


def test_refresh_writes_a_dated_price_list_in_front_and_drops_no_offering(case: Case, api: Any,
                                                                          tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = refresh(case, api, out)
    assert res.returncode == 0, res.stderr
    for line in case.first_lines:
        assert line in res.stdout
    doc = json.loads(out.read_text())
    front = doc["price_lists"][0]
    assert (front["provider"], front["currency"], front["as_of"]) == (case.provider, case.currency,
                                                                      TODAY.isoformat())
    assert case.source in front["source"] and api.url in front["source"]
    assert doc["price_lists"][1:] == catalog_document()["price_lists"]  # the others, untouched
    catalog, shipped = catalog_from_file(str(out)), load_catalog()
    assert [(e.provider, e.name) for e in catalog.entries] == [(e.provider, e.name) for e in shipped.entries]
    case.first_refresh(api, out, res.stdout)


def test_throttling_is_retried_and_the_refresh_completes(case: Case, api: Any) -> None:
    api.set_faults(**case.throttle)
    doc = refresh_document(catalog_document(), case.provider, case.fetch(api), currency=case.currency,
                           source="test", **({} if case.regions is None else {"regions": list(case.regions)}))
    got = doc["price_lists"][0]["regions"][case.region]
    assert (got if case.whole_region else {n: got[n] for n in case.throttled}) == case.throttled
    assert api.stats()["faults"].get(case.throttle_code, 0) > 0


# -- aws ------------------------------------------------------------------------------------------------------
def test_aws_a_second_refresh_replaces_the_first_and_never_drops_a_price(pricing: PricingEmulator,
                                                                          tmp_path: Path) -> None:
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    assert refresh(AWS, pricing, first).returncode == 0
    pricing.set_products([{"instanceType": "p4de.24xlarge", "regionCode": "us-east-1", "on_demand": 23.5}])
    res = refresh(AWS, pricing, second, "--catalog", str(first))
    assert res.returncode == 0, res.stderr
    assert "aws us-east-1 p4de.24xlarge on_demand: 25 -> 23.5" in res.stdout
    assert "1 older refresh list(s) replaced" in res.stdout
    doc = json.loads(second.read_text())
    # the fresh list, then the shipped ones (AWS's, the others')
    assert [pl["provider"] for pl in doc["price_lists"]] == ["aws", *(pl["provider"] for pl in
                                                                     catalog_document()["price_lists"])]
    # the API now prices only p5 and p4de: the others keep their earlier prices, dated as before
    pricing.set_products([{"instanceType": "p5.48xlarge", "regionCode": "us-east-1", "on_demand": 49.0}],
                         replace=True)
    third = tmp_path / "three.json"
    res = refresh(AWS, pricing, third, "--catalog", str(second))
    assert res.returncode == 0, res.stderr
    assert "kept: aws us-east-1 p4de.24xlarge on_demand 23.5 USD" in res.stdout
    catalog = catalog_from_file(str(third))
    assert catalog.prices("aws", "us-east-1", "p4de.24xlarge")[0].hourly == 23.5
    assert catalog.prices("aws", "us-east-1", "p5.48xlarge")[0].hourly == 49.0
    assert catalog.prices("aws", "us-east-1", "p5.48xlarge")[1].hourly == 36.0  # reserved_1y from the 2nd refresh


def test_aws_a_region_the_api_does_not_price_leaves_the_catalogue_alone(pricing: PricingEmulator,
                                                                         tmp_path: Path) -> None:
    res = refresh(AWS, pricing, tmp_path / "c.json", "--region", "ap-northeast-1")
    assert res.returncode == 1 and "priced none of" in res.stderr and "left as it was" in res.stderr
    assert not (tmp_path / "c.json").exists()
    west = refresh(AWS, pricing, tmp_path / "w.json", "--region", "us-west-2")
    assert west.returncode == 0 and "aws us-west-2 p5.48xlarge on_demand: none -> 51" in west.stdout


def test_aws_refresh_without_credentials_is_an_auth_error(pricing: PricingEmulator, tmp_path: Path) -> None:
    res = refresh(AWS, pricing, tmp_path / "c.json", env={})
    assert res.returncode == 1 and "no usable AWS credentials" in res.stderr
    assert pricing.calls("GetProducts") == 0


def test_aws_the_emulator_speaks_the_price_list_protocol(pricing: PricingEmulator) -> None:
    import boto3

    client = boto3.client("pricing", region_name="us-east-1", endpoint_url=pricing.url)
    pages = list(client.get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", Filters=[{"Type": "TERM_MATCH", "Field": "instanceType", "Value": "p5.48xlarge"}],
        PaginationConfig={"PageSize": 2}))
    products = [json.loads(p) for page in pages for p in page["PriceList"]]
    assert len(pages) == 4 and len(products) == 7  # p5 in two regions and five decoys, two per page
    assert {p["product"]["attributes"]["capacitystatus"] for p in products} == {
        "Used", "UnusedCapacityReservation", "AllocatedCapacityReservation"}
    with pytest.raises(client.exceptions.InvalidParameterException):
        client.get_products(ServiceCode="AmazonEC2", Filters=[{"Type": "CONTAINS", "Field": "x", "Value": "y"}])
    with pytest.raises(client.exceptions.NotFoundException):
        client.get_products(ServiceCode="AmazonS4")
    request = urllib.request.Request(pricing.url + "/", data=b"{}", method="POST",
                                     headers={"X-Amz-Target": "AWSPriceListService.GetProducts",
                                              "Content-Type": "application/x-amz-json-1.1"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, timeout=10)
    assert exc.value.code == 403 and b"MissingAuthenticationTokenException" in exc.value.read()


def test_aws_several_products_for_one_type_are_refused_not_guessed() -> None:
    decoys = [json.dumps(product_document(dict(r))) for r in DEFAULT_PRODUCTS if r["instanceType"] == "p5.48xlarge"]
    with pytest.raises(ProviderError, match=r"products for p5\.48xlarge; expected one"):
        prices_from_products(decoys, "p5.48xlarge")
    assert prices_from_products(decoys[:1], "p5.48xlarge") == {
        BillingModel.ON_DEMAND: 50.0, BillingModel.RESERVED_1Y: 36.0, BillingModel.RESERVED_3Y: 25.0}


# -- alibaba --------------------------------------------------------------------------------------------------
def test_alibaba_a_type_the_api_does_not_price_keeps_its_older_price_and_is_reported(ecs: AlibabaEmulator,
                                                                                     tmp_path: Path) -> None:
    region, gone, h20 = ali.REGION, "ecs.ebmgn7.26xlarge", "ecs.ebmgn8v.48xlarge"
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    assert refresh(ALIBABA, ecs, first).returncode == 0
    ecs.set_price(gone, None, None)  # ECS no longer prices it here
    ecs.set_price(h20, 150.0, ali.PRICES[h20]["month"])  # nor sells it as spot
    res = refresh(ALIBABA, ecs, second, "--catalog", str(first))
    assert res.returncode == 0, res.stderr
    old = ALIBABA_PRICES
    assert f"alibaba {region} {h20} on_demand: {old[h20]['on_demand']:g} -> 150" in res.stdout
    for billing, value in old[gone].items():
        assert (f"kept: alibaba {region} {gone} {billing} {value:g} CNY (as of {TODAY.isoformat()}; the API did not "
                "price it)") in res.stdout
    # a type priced by the hour but no longer as spot: its spot price is kept and reported, the others are new
    assert (f"kept: alibaba {region} {h20} spot {old[h20]['spot']:g} CNY (as of {TODAY.isoformat()}; the API did "
            "not price it)") in res.stdout
    refused = [r for r in ecs.requests("DescribePrice") if r["params"]["InstanceType"] == gone]
    # the first refresh priced it (all but spot, which it is not sold as); the second asked once, was refused, did
    # not retry or ask the other models
    first_round = [("SpotAsPriceGo", 400) if "SpotStrategy" in params else (None, 200) for params, _ in UNITS.values()]
    assert [(r["params"].get("SpotStrategy"), r["status"]) for r in refused] == [*first_round, (None, 400)]
    doc = json.loads(second.read_text())
    assert [pl["provider"] for pl in doc["price_lists"][:2]] == ["alibaba", "alibaba"]  # the first is still needed
    front = doc["price_lists"][0]["regions"][region]
    assert gone not in front and set(front[h20]) == {"on_demand", *ALIBABA_TERMS}
    catalog = catalog_from_file(str(second))
    assert {p.billing.value: p.hourly for p in catalog.prices("alibaba", region, gone)} == old[gone]
    h20_now = {p.billing: p for p in catalog.prices("alibaba", region, h20)}
    assert (h20_now[BillingModel.ON_DEMAND].hourly, h20_now[BillingModel.ON_DEMAND].as_of) == (150.0, TODAY)
    assert h20_now[BillingModel.SPOT].hourly == old[h20]["spot"]


def test_alibaba_bad_credentials_are_an_auth_error_and_not_retried(ecs: AlibabaEmulator, tmp_path: Path) -> None:
    wrong = {**ALIBABA_ENV, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "not-the-secret"}
    res = refresh(ALIBABA, ecs, tmp_path / "c.json", env=wrong)
    assert res.returncode == 1 and "SignatureDoesNotMatch" in res.stderr and "AccessKey pair" in res.stderr
    assert [r["status"] for r in ecs.requests("DescribePrice")] == [400]  # one refusal, no retry
    assert not (tmp_path / "c.json").exists()
    unknown = {**ALIBABA_ENV, "ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAI5tNobodyKnowsThisKey"}
    res = refresh(ALIBABA, ecs, tmp_path / "c.json", env=unknown)
    assert res.returncode == 1 and "InvalidAccessKeyId.NotFound" in res.stderr
    assert len(ecs.requests("DescribePrice")) == 2 and not (tmp_path / "c.json").exists()


def test_alibaba_describe_price_refuses_an_unknown_type_and_bad_units_as_ecs_does(ecs: AlibabaEmulator) -> None:
    from Tea.exceptions import TeaException

    with pytest.raises(TeaException) as exc:
        ecs_call(ecs, "DescribePrice", {"ResourceType": "instance", "InstanceType": "ecs.nosuch.large"})
    assert exc.value.code == "InvalidInstanceType.ValueNotSupported"
    with pytest.raises(TeaException) as exc:
        ecs_call(ecs, "DescribePrice", {"InstanceType": ALL_TYPES[0], "PriceUnit": "Month", "Period": 10})
    assert exc.value.code == "InvalidPeriod"  # DescribePrice's table: 400 InvalidPeriod
    month = ali.PRICES[ALL_TYPES[0]]["month"]
    year = ecs_call(ecs, "DescribePrice", {"InstanceType": ALL_TYPES[0], "PriceUnit": "Year", "Period": 1,
                                           "SystemDisk": {"Size": 100}})
    price = year["PriceInfo"]["Price"]
    assert price["Currency"] == "CNY" and price["OriginalPrice"] == 12 * month + 12 * 100 * 0.5
    assert price["TradePrice"] == pytest.approx(price["OriginalPrice"] - price["DiscountPrice"])
    assert [r["RuleId"] for r in year["PriceInfo"]["Rules"]["Rule"]] == [1001]
    assert price_of(year, ALL_TYPES[0]) == pytest.approx(12 * month * 0.85)
    three = ecs_call(ecs, "DescribePrice", {"InstanceType": ALL_TYPES[0], "PriceUnit": "Year", "Period": 3})
    assert price_of(three, ALL_TYPES[0]) == pytest.approx(36 * month * 0.85)


def test_alibaba_describe_price_prices_spot_by_the_hour_only_and_not_a_type_not_sold_so(ecs: AlibabaEmulator) -> None:
    from Tea.exceptions import TeaException

    h20, table = ALL_TYPES[0], ali.PRICES[ALL_TYPES[0]]
    spot = ecs_call(ecs, "DescribePrice", {"InstanceType": h20, "SpotStrategy": "SpotAsPriceGo"})
    assert price_of(spot, h20) == table["spot"] < table["hour"]  # PriceUnit Hour and Period 1 are the defaults
    assert spot["PriceInfo"]["Rules"]["Rule"] == []
    # "takes effect only when PriceUnit=Hour and Period=1": a month with a spot strategy is a month's subscription
    month = ecs_call(ecs, "DescribePrice", {"InstanceType": h20, "PriceUnit": "Month", "Period": 1,
                                            "SpotStrategy": "SpotAsPriceGo"})
    assert price_of(month, h20) == pytest.approx(table["month"] * (1 - ali.SUBSCRIPTION_DISCOUNT))
    unsold = next(n for n in ALL_TYPES if "spot" not in ali.PRICES[n])
    with pytest.raises(TeaException) as exc:
        ecs_call(ecs, "DescribePrice", {"InstanceType": unsold, "SpotStrategy": "SpotAsPriceGo"})
    assert exc.value.code == "PriceNotFound"
    assert [r["rules"][-1] for r in ecs.requests("DescribePrice")[-3:]] == [
        "price-spot", "price-spot-subscription", "price-spot-not-found"]
    # the price list leaves that model unpriced and prices the others
    assert set(AlibabaPriceList(endpoint=ecs.url, retry=FAST).prices(ali.REGION, [unsold])[unsold]) == {
        BillingModel.ON_DEMAND, BillingModel.MONTHLY, BillingModel.RESERVED_1Y, BillingModel.RESERVED_3Y}


def test_alibaba_a_price_in_another_currency_or_without_a_figure_is_refused() -> None:
    body = {"PriceInfo": {"Price": {"TradePrice": 10.0, "Currency": "USD"}}}
    with pytest.raises(ProviderError, match="priced in 'USD', expected CNY"):
        price_of(body, "ecs.x")
    with pytest.raises(ProviderError, match=r"no TradePrice for ecs\.x"):
        price_of({"PriceInfo": {"Price": {"Currency": "CNY"}}}, "ecs.x")
    assert price_of({"PriceInfo": {"Price": {"TradePrice": 7.5, "Currency": "CNY"}}}, "ecs.x") == 7.5


# -- huawei ---------------------------------------------------------------------------------------------------
def with_older_prices() -> dict[str, Any]:
    """The shipped catalogue plus an older Huawei price list, every billing model priced (and a second flavor the
    emulator does not price)."""
    doc: dict[str, Any] = copy.deepcopy(catalog_document())
    [entry] = [e for e in doc["offerings"] if e.get("provider") == "huawei"]
    other = copy.deepcopy(entry)
    other["name"] = UNPRICED
    doc["offerings"].append(other)
    doc["price_lists"].append({"provider": "huawei", "currency": "CNY", "as_of": "2025-01-15",
                               "source": "test: an older price list", "regions": {hw.REGION: {
                                   FLAVOR: {"on_demand": 300.0, "monthly": 190.0, "reserved_1y": 150.0},
                                   UNPRICED: {"on_demand": 123.0, "monthly": 99.0, "reserved_1y": 88.0}}}})
    parse_catalog(doc, "test catalogue")
    return doc


def test_huawei_a_flavor_the_api_does_not_price_keeps_its_older_price_and_is_reported(bss: HuaweiEmulator) -> None:
    region = hw.REGION
    bss.set_price(region, FLAVOR, 250.5)
    doc = with_older_prices()
    report = RefreshReport(out="-", as_of=TODAY)
    out = refresh_document(doc, "huawei", inquiry(bss).prices, currency="CNY", source="test", report=report)
    assert out["price_lists"][0]["regions"] == {region: {FLAVOR: {**HUAWEI_PRICES, "on_demand": 250.5}}}
    text = report.text()
    assert f"huawei {region} {FLAVOR} on_demand: 300 -> 250.5" in text
    assert f"huawei {region} {FLAVOR} monthly: 190 -> {HUAWEI_PRICES['monthly']:g}" in text
    for billing, value in (("on_demand", 123), ("monthly", 99), ("reserved_1y", 88)):
        assert (f"kept: huawei {region} {UNPRICED} {billing} {value} CNY (as of 2025-01-15; the API did not price "
                "it)") in text
    catalog = parse_catalog(out, "refreshed")
    assert {p.billing.value: p.hourly for p in catalog.prices("huawei", region, UNPRICED)} == {
        "on_demand": 123.0, "monthly": 99.0, "reserved_1y": 88.0}
    assert {e.name for e in catalog.of("huawei")} == {FLAVOR, UNPRICED}
    # each refusal (CBC.99006006) is an answer, not retried: one per inquiry (on demand, a month, a year)
    for op, count in (("ListOnDemandResourceRatings", 1), ("ListRateOnPeriodDetail", 2)):
        refusals = [r for r in bss.requests(op) if r["params"]["body"]["product_infos"][0]["resource_spec"] == UNPRICED]
        assert [r["status"] for r in refusals] == [400] * count


def test_huawei_a_flavor_priced_on_demand_but_not_for_a_period_is_unpriced_for_that_period(
        bss: HuaweiEmulator) -> None:
    region = hw.REGION
    bss.set_price(region, UNPRICED, 99.5)  # BSS prices it by the hour, for no month or year
    bss.set_period_price(region, FLAVOR, 3, None)  # and the other flavor by the month, not the year
    report = RefreshReport(out="-", as_of=TODAY)
    out = refresh_document(with_older_prices(), "huawei", inquiry(bss).prices, currency="CNY", source="test",
                           report=report)
    assert out["price_lists"][0]["regions"] == {region: {
        UNPRICED: {"on_demand": 99.5},
        FLAVOR: {"on_demand": HUAWEI_PRICES["on_demand"], "monthly": HUAWEI_PRICES["monthly"]}}}
    text = report.text()
    assert f"huawei {region} {UNPRICED} on_demand: 123 -> 99.5" in text
    for name, billing, value in ((UNPRICED, "monthly", 99), (UNPRICED, "reserved_1y", 88),
                                 (FLAVOR, "reserved_1y", 150)):
        assert (f"kept: huawei {region} {name} {billing} {value} CNY (as of 2025-01-15; the API did not price "
                "it)") in text
    assert f"{UNPRICED} monthly:" not in text and f"{FLAVOR} reserved_1y:" not in text  # no price came for them
    # on its own, the inquiry prices exactly the models BSS answered
    assert inquiry(bss).prices(region, [UNPRICED, FLAVOR]) == {
        UNPRICED: {BillingModel.ON_DEMAND: 99.5},
        FLAVOR: {BillingModel.ON_DEMAND: HUAWEI_PRICES["on_demand"], BillingModel.MONTHLY: HUAWEI_PRICES["monthly"]}}


def test_huawei_the_period_inquiry_answers_in_the_sdk_response_shape(bss: HuaweiEmulator) -> None:
    from huaweicloudsdkbss.v2 import (
        ListRateOnPeriodDetailRequest,
        ListRateOnPeriodDetailResponse,
        OfficialWebsiteRatingResult,
        PeriodProductInfo,
        PeriodProductOfficialRatingResult,
        RateOnPeriodReq,
    )
    from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException

    client = inquiry(bss)._bss()

    def ask(**info: Any) -> Any:
        fields = {"id": "1", "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
                  "resource_spec": FLAVOR, "region": hw.REGION, "period_type": 2, "period_num": 1,
                  "subscription_num": 1, **info}
        return client.list_rate_on_period_detail(ListRateOnPeriodDetailRequest(body=RateOnPeriodReq(
            project_id=PROJECT_ID, product_infos=[PeriodProductInfo(**fields)])))

    month = hw.PERIOD_PRICES[(hw.REGION, FLAVOR, 2)]
    answer = ask(period_num=3, subscription_num=2)
    assert isinstance(answer, ListRateOnPeriodDetailResponse) and answer.currency == "CNY"
    official = answer.official_website_rating_result
    assert isinstance(official, OfficialWebsiteRatingResult) and official.measure_id == 1
    assert float(official.official_website_amount) == pytest.approx(6 * month)
    assert [type(r) for r in official.product_rating_results] == [PeriodProductOfficialRatingResult]
    assert period_amount_from_answer(answer, FLAVOR) == pytest.approx(6 * month)
    assert period_amount_from_answer(ask(period_type=3), FLAVOR) == hw.PERIOD_PRICES[(hw.REGION, FLAVOR, 3)]
    assert not answer.optional_discount_rating_results  # returned only where the account has optional discounts
    for bad, code in (({"period_type": 4}, "CBC.99006006"), ({"resource_spec": "physical.nope"}, "CBC.99006006"),
                      ({"period_type": 1}, "CBC.0100"), ({"period_num": 0}, "CBC.0100")):
        with pytest.raises(ClientRequestException) as exc:
            ask(**bad)
        assert (exc.value.status_code, exc.value.error_code) == (400, code), bad


def test_huawei_an_answer_in_another_currency_or_unit_is_refused_not_guessed() -> None:
    from huaweicloudsdkbss.v2 import (
        ListRateOnPeriodDetailResponse,
        OfficialWebsiteRatingResult,
        PeriodProductOfficialRatingResult,
    )

    def answer(currency: str | None, measure: int) -> ListRateOnPeriodDetailResponse:
        line = PeriodProductOfficialRatingResult(id="1", official_website_amount=1000, measure_id=measure)
        return ListRateOnPeriodDetailResponse(currency=currency, official_website_rating_result=(
            OfficialWebsiteRatingResult(official_website_amount=1000, measure_id=measure,
                                        product_rating_results=[line])))

    assert period_amount_from_answer(answer(None, 1), FLAVOR) == 1000.0  # "值为空代表人民币"
    with pytest.raises(ProviderError, match="in USD; expected CNY"):
        period_amount_from_answer(answer("USD", 1), FLAVOR)
    with pytest.raises(ProviderError, match="measure unit 3"):
        period_amount_from_answer(answer("CNY", 3), FLAVOR)
    assert period_amount_from_answer(ListRateOnPeriodDetailResponse(), FLAVOR) is None


def test_huawei_bad_credentials_are_an_auth_error_and_not_retried(bss: HuaweiEmulator,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AuthError, match=r"APIGW\.0301"):
        inquiry(bss, sk="not-the-secret").prices(hw.REGION, [FLAVOR])
    assert len(bss.requests("ListOnDemandResourceRatings")) == 1
    assert bss.requests("ListRateOnPeriodDetail") == []  # the refresh stopped at the first refusal
    monkeypatch.delenv("HUAWEICLOUD_SDK_DOMAIN_ID", raising=False)  # the process's environment, not the SDK
    with pytest.raises(AuthError, match="HUAWEICLOUD_SDK_DOMAIN_ID"):
        inquiry(bss, domain_id=None).prices(hw.REGION, [FLAVOR])
    assert len(bss.requests("ListOnDemandResourceRatings")) == 1  # refused before anything was sent


def test_huawei_the_emulator_answers_in_the_sdk_response_shape(bss: HuaweiEmulator) -> None:
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
             for i, region in enumerate((hw.REGION, "cn-north-4"), 1)]
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
    from huaweicloudsdkcore.auth.credentials import GlobalCredentials
    from huaweicloudsdkcore.sdk_request import SdkRequest

    body = json.dumps({"project_id": PROJECT_ID, "product_infos": [{
        "id": "1", "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
        "resource_spec": FLAVOR, "region": hw.REGION, "usage_factor": "Duration", "usage_value": 1,
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


def test_huawei_an_unknown_flavor_is_refused_with_the_bss_error_body(bss: HuaweiEmulator) -> None:
    from huaweicloudsdkbss.v2 import DemandProductInfo, ListOnDemandResourceRatingsRequest, RateOnDemandReq
    from huaweicloudsdkcore.exceptions.exceptions import ClientRequestException

    client = inquiry(bss)._bss()
    with pytest.raises(ClientRequestException) as exc:
        client.list_on_demand_resource_ratings(ListOnDemandResourceRatingsRequest(body=RateOnDemandReq(
            project_id=PROJECT_ID, product_infos=[DemandProductInfo(
                id="1", cloud_service_type="hws.service.type.bms", resource_type="hws.resource.type.bms",
                resource_spec="physical.nope", region=hw.REGION, usage_factor="Duration", usage_value=1,
                usage_measure_id=4, subscription_num=1)])))
    assert (exc.value.status_code, exc.value.error_code) == (400, "CBC.99006006")
    assert "physical.nope" in exc.value.error_msg
    assert inquiry(bss).prices(hw.REGION, ["physical.nope"]) == {}


# -- issue 22: China requests planned in CNY from what the refresh priced -----------------------------------------
#: Each Chinese cloud's request: its accelerator, and the billing a one-month and a one-year run should pick.
#: A BMS image id (IMS) of the Huawei emulator; Huawei has no default image: a plan's requirements name one.
HUAWEI_IMAGE = "9f8e7d6c-5b4a-4392-8172-6a5b4c3d2e1f"
CHINA_ASKS = {"alibaba": (["A100", "H20"], "monthly", "reserved_1y"), "huawei": (["910B"], "monthly", "reserved_1y")}


@pytest.mark.parametrize("case", [ALIBABA, HUAWEI], ids=str)
def test_china_requests_get_priced_options_in_cny_and_the_spec_validates(case: Case, request: pytest.FixtureRequest,
                                                                         tmp_path: Path) -> None:
    emulator = request.getfixturevalue(case.emulator)
    catalog_path = tmp_path / "catalog.json"
    assert refresh(case, emulator, catalog_path).returncode == 0
    gpus, month_billing, year_billing = CHINA_ASKS[case.provider]
    policy = tmp_path / "policy.yaml"
    # the shared file system's encryption (a placeholder until it exists); a Huawei spec carries its own
    # suppression of MF-TAG-001 for BMS's untagged volumes, as examples/huawei-bms does
    policy.write_text("rules:\n  MF-ENC-003:\n    known_encrypted: ['fill-in:*']\n")
    for months, billing in ((1, month_billing), (12, year_billing)):
        req = tmp_path / f"req-{months}.yaml"
        req.write_text(yaml.safe_dump({
            "gpus": 16, "gpu": gpus, "providers": [case.provider], "regions": [case.region], "currency": "CNY",
            "duration": {"months": months}, "storage": {"shared_tib": 10},
            "billing": ["on_demand", "monthly", "reserved_1y"],  # spot is cheaper still, and interruptible
            "cluster": {"name": f"china-{months}", "tags": {"owner": "ml", "cost-center": "cc-1"},
                        "image": HUAWEI_IMAGE if case.provider == "huawei" else ali.IMAGES[0]}}))
        spec = tmp_path / f"spec-{months}.yaml"
        res = run(case, "plan", str(req), "--catalog", str(catalog_path), "--out", str(spec), "--json",
                  home=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
        plan = json.loads(res.stdout)
        assert plan["currency"] == "CNY" and plan["options"], plan
        best = plan["options"][0]
        assert (best["provider"], best["region"], best["billing"]) == (case.provider, case.region, billing)
        catalog = catalog_from_file(str(catalog_path))
        price = next(p for p in catalog.prices(case.provider, case.region, best["offering"])
                     if p.billing.value == billing)
        hours = HOURS_PER_MONTH * months if billing == "monthly" else HOURS_PER_YEAR
        # compute is billed as the provider bills: whole months, or the whole year's term
        assert best["lines"][0]["amount"] == round(best["nodes"] * price.hourly * hours, 2)
        assert any("shared storage" in line["what"] for line in best["lines"]) or \
            any("shared storage" in u for u in best["unpriced"])
        assert case.source in best["price"]["source"]  # the refreshed price, not a shipped one
        validate = run(case, "validate", str(spec), "--policy-config", str(policy), home=tmp_path)
        assert validate.returncode == 0, validate.stdout + validate.stderr
        assert f"on {case.provider} {case.region}" in validate.stdout
        text = spec.read_text()
        if case.provider == "huawei":  # the suppression stands right above the tags it is about
            lines = text.splitlines()
            at = lines.index("tags:")
            assert lines[at - 1].startswith("# metalfleet:suppress MF-TAG-001 reason: BMS creates the EVS volumes")
            assert "MF-TAG-001" in validate.stdout  # shown as suppressed, with its reason, not as a finding
        else:
            assert "metalfleet:suppress" not in text
