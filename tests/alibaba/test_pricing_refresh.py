"""`metalfleet catalogue refresh --provider alibaba` against the ECS emulator (metalfleet.testing.alibaba): the
official SDK's DescribePrice over HTTP (ACS3-HMAC-SHA256), the production path. The emulator answers from its
own made-up price table (list prices, a subscription discount, a system disk line), never the catalogue's, so a
price in the refreshed catalogue can only have come through the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from metalfleet.providers.alibaba.pricing import AlibabaPriceList, price_of
from metalfleet.providers.catalog import catalog_document, catalog_from_file, load_catalog
from metalfleet.providers.errors import ProviderError
from metalfleet.providers.models import BillingModel
from metalfleet.providers.refresh import PRICE_SOURCES, refresh_document
from metalfleet.testing.alibaba import PRICES, AlibabaEmulator
from tests.alibaba.conftest import ALL_TYPES, FAST, REGION
from tests.emulators.alibaba_fixtures import ALIBABA_ENV, ecs_call

CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]
TODAY = date.today()
#: What the emulator's table makes of each type: pay-as-you-go per hour, and a month's subscription (15% off the
#: list price) over 730 h. The system disk line is not the instance's price.
EXPECTED = {"ecs.ebmgn8v.48xlarge": (160.0, 85.0), "ecs.ebmgn7ex.32xlarge": (120.5, 68.0),
            "ecs.ebmgn7e.32xlarge": (110.0, 59.5), "ecs.ebmgn7.26xlarge": (80.25, 42.5)}


@pytest.fixture
def ecs(alibaba_emulator: AlibabaEmulator) -> Iterator[AlibabaEmulator]:
    yield alibaba_emulator
    for name, table in PRICES.items():  # the session's emulator: put back any price a test changed
        alibaba_emulator.set_price(name, table["hour"], table["month"])


def run(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ALIBABA_CLOUD_", "METALFLEET_CATALOG"))}
    base.update(HOME=str(home), **(ALIBABA_ENV if env is None else env))
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False, env=base)


def refresh(ecs: AlibabaEmulator, out: Path, *extra: str, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    return run("catalogue", "refresh", "--provider", "alibaba", "--region", REGION, "--out", str(out),
               "--endpoint-url", ecs.url, *extra, home=out.parent, env=env)


def test_alibaba_is_a_price_source_in_cny() -> None:
    src = PRICE_SOURCES["alibaba"]()
    assert src.currency == "CNY" and "DescribePrice" in src.source


def test_refresh_writes_a_dated_cny_price_list_in_front_and_drops_no_offering(ecs: AlibabaEmulator,
                                                                               tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = refresh(ecs, out)
    assert res.returncode == 0, res.stderr
    for name, (hourly, monthly) in EXPECTED.items():
        assert f"alibaba {REGION} {name} on_demand: none -> {hourly:g}" in res.stdout
        assert f"alibaba {REGION} {name} monthly: none -> {monthly:g}" in res.stdout
    assert "8 price(s) changed or added" in res.stdout and "kept:" not in res.stdout
    doc = json.loads(out.read_text())
    front = doc["price_lists"][0]
    assert (front["provider"], front["currency"], front["as_of"]) == ("alibaba", "CNY", TODAY.isoformat())
    assert "DescribePrice" in front["source"] and ecs.url in front["source"]
    assert front["regions"] == {REGION: {n: {"on_demand": h, "monthly": m} for n, (h, m) in EXPECTED.items()}}
    assert doc["price_lists"][1:] == catalog_document()["price_lists"]  # the others, untouched
    catalog, shipped = catalog_from_file(str(out)), load_catalog()
    assert [(e.provider, e.name) for e in catalog.entries] == [(e.provider, e.name) for e in shipped.entries]
    h20 = {p.billing: p for p in catalog.prices("alibaba", REGION, "ecs.ebmgn8v.48xlarge")}
    assert (h20[BillingModel.ON_DEMAND].hourly, h20[BillingModel.ON_DEMAND].currency,
            h20[BillingModel.ON_DEMAND].as_of) == (160.0, "CNY", TODAY)
    assert h20[BillingModel.MONTHLY].hourly == 85.0
    # two DescribePrice calls per orderable offering: PostPaid by the hour, PrePaid for one month
    sent = [r["params"] for r in ecs.requests("DescribePrice")]
    assert len(sent) == 2 * len(ALL_TYPES) == 2 * len(shipped.of("alibaba", orderable=True))
    assert sorted({(p["InstanceType"], p["PriceUnit"], p.get("Period")) for p in sent}) == sorted(
        [(n, "Hour", None) for n in ALL_TYPES] + [(n, "Month", "1") for n in ALL_TYPES])
    assert {(p["RegionId"], p["ResourceType"]) for p in sent} == {(REGION, "instance")}


def test_a_type_the_api_does_not_price_keeps_its_older_price_and_is_reported(ecs: AlibabaEmulator,
                                                                             tmp_path: Path) -> None:
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    assert refresh(ecs, first).returncode == 0
    ecs.set_price("ecs.ebmgn7.26xlarge", None, None)  # ECS no longer prices it here
    ecs.set_price("ecs.ebmgn8v.48xlarge", 150.0, 73000.0)
    res = refresh(ecs, second, "--catalog", str(first))
    assert res.returncode == 0, res.stderr
    assert f"alibaba {REGION} ecs.ebmgn8v.48xlarge on_demand: 160 -> 150" in res.stdout
    assert (f"kept: alibaba {REGION} ecs.ebmgn7.26xlarge on_demand 80.25 CNY (as of {TODAY.isoformat()}; the API "
            "did not price it)") in res.stdout
    assert f"kept: alibaba {REGION} ecs.ebmgn7.26xlarge monthly 42.5 CNY" in res.stdout
    refused = [r for r in ecs.requests("DescribePrice") if r["params"]["InstanceType"] == "ecs.ebmgn7.26xlarge"]
    # the first refresh priced it (hour, month); the second asked once, was refused, did not retry or ask the month
    assert [r["status"] for r in refused] == [200, 200, 400]
    doc = json.loads(second.read_text())
    assert [pl["provider"] for pl in doc["price_lists"][:2]] == ["alibaba", "alibaba"]  # the first is still needed
    assert "ecs.ebmgn7.26xlarge" not in doc["price_lists"][0]["regions"][REGION]
    catalog = catalog_from_file(str(second))
    assert {p.billing: p.hourly for p in catalog.prices("alibaba", REGION, "ecs.ebmgn7.26xlarge")} == {
        BillingModel.ON_DEMAND: 80.25, BillingModel.MONTHLY: 42.5}
    assert catalog.prices("alibaba", REGION, "ecs.ebmgn8v.48xlarge")[0].hourly == 150.0


def test_throttling_is_retried_and_the_refresh_completes(ecs: AlibabaEmulator) -> None:
    ecs.set_faults(throttle=0.4, seed=7)
    fetch = AlibabaPriceList(endpoint=ecs.url, retry=FAST).prices
    doc = refresh_document(catalog_document(), "alibaba", fetch, currency="CNY", source="test", regions=[REGION])
    assert doc["price_lists"][0]["regions"][REGION] == {
        n: {"on_demand": h, "monthly": m} for n, (h, m) in EXPECTED.items()}
    assert ecs.stats()["faults"].get("Throttling.User", 0) > 0


def test_bad_credentials_are_an_auth_error_and_not_retried(ecs: AlibabaEmulator, tmp_path: Path) -> None:
    wrong = {**ALIBABA_ENV, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": "not-the-secret"}
    res = refresh(ecs, tmp_path / "c.json", env=wrong)
    assert res.returncode == 1 and "SignatureDoesNotMatch" in res.stderr and "AccessKey pair" in res.stderr
    assert [r["status"] for r in ecs.requests("DescribePrice")] == [400]  # one refusal, no retry
    assert not (tmp_path / "c.json").exists()
    unknown = {**ALIBABA_ENV, "ALIBABA_CLOUD_ACCESS_KEY_ID": "LTAI5tNobodyKnowsThisKey"}
    res = refresh(ecs, tmp_path / "c.json", env=unknown)
    assert res.returncode == 1 and "InvalidAccessKeyId.NotFound" in res.stderr
    assert len(ecs.requests("DescribePrice")) == 2 and not (tmp_path / "c.json").exists()


def test_describe_price_refuses_an_unknown_type_and_bad_units_as_ecs_does(ecs: AlibabaEmulator) -> None:
    from Tea.exceptions import TeaException

    with pytest.raises(TeaException) as exc:
        ecs_call(ecs, "DescribePrice", {"ResourceType": "instance", "InstanceType": "ecs.nosuch.large"})
    assert exc.value.code == "InvalidInstanceType.ValueNotSupported"
    with pytest.raises(TeaException) as exc:
        ecs_call(ecs, "DescribePrice", {"InstanceType": ALL_TYPES[0], "PriceUnit": "Month", "Period": 10})
    assert exc.value.code == "InvalidPeriod"  # DescribePrice's table: 400 InvalidPeriod
    year = ecs_call(ecs, "DescribePrice", {"InstanceType": ALL_TYPES[0], "PriceUnit": "Year", "Period": 1,
                                           "SystemDisk": {"Size": 100}})
    price = year["PriceInfo"]["Price"]
    assert price["Currency"] == "CNY" and price["OriginalPrice"] == 12 * 73000.0 + 12 * 100 * 0.5
    assert price["TradePrice"] == pytest.approx(price["OriginalPrice"] - price["DiscountPrice"])
    assert [r["RuleId"] for r in year["PriceInfo"]["Rules"]["Rule"]] == [1001]
    assert price_of(year, ALL_TYPES[0]) == pytest.approx(12 * 73000.0 * 0.85)


def test_a_price_in_another_currency_or_without_a_figure_is_refused() -> None:
    body = {"PriceInfo": {"Price": {"TradePrice": 10.0, "Currency": "USD"}}}
    with pytest.raises(ProviderError, match="priced in 'USD', expected CNY"):
        price_of(body, "ecs.x")
    with pytest.raises(ProviderError, match=r"no TradePrice for ecs\.x"):
        price_of({"PriceInfo": {"Price": {"Currency": "CNY"}}}, "ecs.x")
    assert price_of({"PriceInfo": {"Price": {"TradePrice": 7.5, "Currency": "CNY"}}}, "ecs.x") == 7.5
