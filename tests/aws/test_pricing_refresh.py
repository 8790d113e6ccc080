"""`metalfleet catalogue refresh` against the AWS Price List emulator (metalfleet.testing.pricing): boto3's
pricing client over HTTP (SigV4, JSON 1.1), the production path. The emulator answers from its own product
table (made-up figures, decoys included), which each test sets, so a price in the refreshed catalogue can only
have come through the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from metalfleet.providers.aws.pricing import AwsPriceList, prices_from_products
from metalfleet.providers.catalog import catalog_document, catalog_from_file, load_catalog
from metalfleet.providers.errors import ProviderError
from metalfleet.providers.models import BillingModel
from metalfleet.providers.refresh import refresh_document
from metalfleet.providers.retry import RetryPolicy
from metalfleet.testing.pricing import DEFAULT_PRODUCTS, PricingEmulator, product_document, start_pricing_emulator
from tests.emulators.running import running_emulator

CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
FAST = RetryPolicy(attempts=12, base=0.005, cap=0.05)
TODAY = date.today()


@pytest.fixture(scope="module")
def pricing_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PricingEmulator]:
    with running_emulator(lambda log: start_pricing_emulator(log_path=str(log)), tmp_path_factory, "pricing", CREDS,
                          ("AWS_PROFILE", "AWS_ENDPOINT_URL")) as emulator:
        yield emulator


@pytest.fixture
def pricing(pricing_session: PricingEmulator) -> PricingEmulator:
    pricing_session.reset_state()
    return pricing_session


def run(*args: str, home: Path, creds: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "METALFLEET_CATALOG"))}
    env.update(HOME=str(home), **(CREDS if creds else {}))
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False, env=env)


def test_refresh_updates_prices_from_the_api_and_keeps_what_it_did_not_price(pricing: PricingEmulator,
                                                                           tmp_path: Path) -> None:
    out = tmp_path / "catalog.json"
    res = run("catalogue", "refresh", "--out", str(out), "--endpoint-url", pricing.url, home=tmp_path)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    # the emulator's figures (p5 50.0 on demand, 36.0 / 25.0 reserved), not its decoys (Windows 75, Dedicated
    # 55, SQL 65, capacity-reservation products at 0)
    assert "aws us-east-1 p5.48xlarge on_demand: 55.04 -> 50" in text
    assert "aws us-east-1 p5.48xlarge reserved_1y: none -> 36" in text
    assert "aws us-east-1 p5.48xlarge reserved_3y: none -> 25" in text
    assert "kept: aws us-east-1 p5.48xlarge capacity_block 31.464 USD (as of 2025-06-01; the API did not price it)" \
        in text
    assert "still unpriced (listed, no price before or now): aws us-east-1 g5.48xlarge" in text
    catalog = catalog_from_file(str(out))
    shipped = load_catalog()
    assert [(e.provider, e.name) for e in catalog.entries] == [(e.provider, e.name) for e in shipped.entries]
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
    listing = run("offerings", "--catalog", str(out), "--provider", "aws", "--gpu", "H100", "--json", home=tmp_path)
    [row] = json.loads(listing.stdout)
    assert [(p["billing"], p["hourly"], p["age_days"]) for p in row["prices"]] == [
        ("on_demand", 50.0, 0), ("reserved_1y", 36.0, 0), ("reserved_3y", 25.0, 0), ("capacity_block", 31.464,
                                                                                      (TODAY - date(2025, 6, 1)).days)]


def test_a_second_refresh_replaces_the_first_and_never_drops_a_price(pricing: PricingEmulator,
                                                                      tmp_path: Path) -> None:
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    assert run("catalogue", "refresh", "--out", str(first), "--endpoint-url", pricing.url,
               home=tmp_path).returncode == 0
    pricing.set_products([{"instanceType": "p4de.24xlarge", "regionCode": "us-east-1", "on_demand": 23.5}])
    res = run("catalogue", "refresh", "--catalog", str(first), "--out", str(second), "--endpoint-url", pricing.url,
              home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "aws us-east-1 p4de.24xlarge on_demand: 25 -> 23.5" in res.stdout
    assert "1 older refresh list(s) replaced" in res.stdout
    doc = json.loads(second.read_text())
    assert [pl["provider"] for pl in doc["price_lists"]] == ["aws", "aws", "fake"]  # fresh, shipped, fake
    # the API now prices only p5 and p4de: the others keep their earlier prices, dated as before
    pricing.set_products([{"instanceType": "p5.48xlarge", "regionCode": "us-east-1", "on_demand": 49.0}],
                         replace=True)
    third = tmp_path / "three.json"
    res = run("catalogue", "refresh", "--catalog", str(second), "--out", str(third), "--endpoint-url", pricing.url,
              home=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "kept: aws us-east-1 p4de.24xlarge on_demand 23.5 USD" in res.stdout
    catalog = catalog_from_file(str(third))
    assert catalog.prices("aws", "us-east-1", "p4de.24xlarge")[0].hourly == 23.5
    assert catalog.prices("aws", "us-east-1", "p5.48xlarge")[0].hourly == 49.0
    assert catalog.prices("aws", "us-east-1", "p5.48xlarge")[1].hourly == 36.0  # reserved_1y from the 2nd refresh


def test_a_region_the_api_does_not_price_leaves_the_catalogue_alone(pricing: PricingEmulator, tmp_path: Path) -> None:
    res = run("catalogue", "refresh", "--region", "ap-northeast-1", "--out", str(tmp_path / "c.json"),
              "--endpoint-url", pricing.url, home=tmp_path)
    assert res.returncode == 1 and "priced none of" in res.stderr and "left as it was" in res.stderr
    assert not (tmp_path / "c.json").exists()
    west = run("catalogue", "refresh", "--region", "us-west-2", "--out", str(tmp_path / "w.json"), "--endpoint-url",
               pricing.url, home=tmp_path)
    assert west.returncode == 0 and "aws us-west-2 p5.48xlarge on_demand: none -> 51" in west.stdout


def test_refresh_without_credentials_is_an_auth_error(pricing: PricingEmulator, tmp_path: Path) -> None:
    res = run("catalogue", "refresh", "--out", str(tmp_path / "c.json"), "--endpoint-url", pricing.url,
              home=tmp_path, creds=False)
    assert res.returncode == 1 and "no usable AWS credentials" in res.stderr
    assert pricing.calls("GetProducts") == 0


def test_throttling_is_retried_and_the_refresh_completes(pricing: PricingEmulator) -> None:
    pricing.set_faults(throttle=0.4, seed=7)
    fetch = AwsPriceList(endpoint_url=pricing.url, retry=FAST).prices
    doc = refresh_document(catalog_document(), "aws", fetch, currency="USD", source="test")
    assert doc["price_lists"][0]["regions"]["us-east-1"]["p4d.24xlarge"] == {"on_demand": 20.0, "reserved_1y": 13.0}
    assert pricing.stats()["faults"].get("ThrottlingException", 0) > 0


def test_the_emulator_speaks_the_price_list_protocol(pricing: PricingEmulator) -> None:
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


def test_several_products_for_one_type_are_refused_not_guessed() -> None:
    decoys = [json.dumps(product_document(dict(r))) for r in DEFAULT_PRODUCTS if r["instanceType"] == "p5.48xlarge"]
    with pytest.raises(ProviderError, match=r"products for p5\.48xlarge; expected one"):
        prices_from_products(decoys, "p5.48xlarge")
    assert prices_from_products(decoys[:1], "p5.48xlarge") == {
        BillingModel.ON_DEMAND: 50.0, BillingModel.RESERVED_1Y: 36.0, BillingModel.RESERVED_3Y: 25.0}
