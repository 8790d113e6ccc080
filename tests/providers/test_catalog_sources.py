"""Issue 22: the China catalogue says where every figure comes from, says why the ones it lacks are unknown,
lists what it cannot price and why, and the planner costs subscriptions as the providers bill them."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from metalfleet.providers.catalog import FIGURES, IDENTITY, catalog_document, load_catalog, parse_catalog
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import BillingModel, Fabric, Interconnect
from metalfleet.providers.planner import recommend
from metalfleet.providers.requirements import parse_requirements

TODAY = date(2026, 12, 1)
#: The providers' own domains: a figure of theirs is cited to one of these.
OWN_DOMAINS = {"alibaba": ("alibabacloud.com", "aliyun.com"), "huawei": ("huaweicloud.com", "huawei.com")}
CHINA = ("alibaba", "huawei")


@pytest.mark.parametrize("provider", CHINA)
def test_every_china_figure_has_a_source_on_the_providers_own_pages_or_a_reason(provider: str) -> None:
    entries = load_catalog().of(provider)
    assert entries
    for e in entries:
        assert e.figure_gaps() == [], f"{e.name}: {e.figure_gaps()}"
        for s in e.sources:
            host = urlparse(s.url).hostname or ""
            assert host.endswith(OWN_DOMAINS[provider]), f"{e.name}: {s.url} is not {provider}'s own page"
            assert s.read <= TODAY and s.says.strip() and s.fields
        for figure in FIGURES:  # unknown figures are null; null figures say why
            assert (getattr(e, figure) is None) == (figure in e.unknown), (e.name, figure)
        assert set(e.unverified) <= set(IDENTITY)


def test_a_planted_gap_is_found() -> None:
    doc = catalog_document()
    entry = next(o for o in doc["offerings"] if o["name"] == "ecs.ebmgn7ex.32xlarge")
    for source in entry["sources"]:
        source["fields"] = [f for f in source["fields"] if f != "vcpus"] or ["bare_metal"]
    planted = parse_catalog(doc).get("alibaba", "ecs.ebmgn7ex.32xlarge")
    assert planted is not None and planted.figure_gaps() == ["vcpus: 128 cited by no source"]
    entry["vcpus"] = None
    assert parse_catalog(doc).get("alibaba", "ecs.ebmgn7ex.32xlarge").figure_gaps() == [  # type: ignore[union-attr]
        "vcpus: null without an `unknown` reason"]


def test_the_fact_errors_of_the_issue_are_fixed() -> None:
    cat = load_catalog()
    ex = cat.require("alibaba", "ecs.ebmgn7ex.32xlarge")
    assert (ex.fabric, ex.fabric_cards, ex.fabric_gbps) == (Fabric.ERDMA, 2, 160.0)  # 2 ERIs, not 4
    assert any("fabric_cards" in s.fields and "ERI" in s.says for s in ex.sources)
    v8 = cat.require("alibaba", "ecs.ebmgn8v.48xlarge")
    assert v8.fabric_gbps == 160.0  # eRDMA up to 160; 170 is the VPC bandwidth
    assert any("fabric_gbps" in s.fields and "160" in s.says for s in v8.sources)
    npu = cat.require("huawei", "physical.kat2e.48xlarge.8.313t")
    assert (npu.interconnect, npu.fabric) == (Interconnect.HCCS, Fabric.ROCE)  # HCCS inside, RoCE between servers
    assert npu.gpu_memory_gib is None and "32 GB" in npu.unknown["gpu_memory_gib"]  # not folded into 64 GB


@pytest.mark.parametrize(("change", "field", "why"), [
    (lambda e: e.update(vcpus=128, unknown={"vcpus": "x"}), "unknown.vcpus", "a known figure has no unknown"),
    (lambda e: e.update(unverified={"vcpus": "x"}), "unverified.vcpus", "may be unverified"),
    (lambda e: e.update(unknown={"colour": "x"}), "unknown.colour", "not a figure"),
    (lambda e: e.update(sources=[{"url": "http://x", "read": "2026-12-01", "fields": ["vcpus"], "says": "s"}]),
     "sources.0.url", "https"),
    (lambda e: e.update(sources=[{"url": "https://x", "read": "yesterday", "fields": ["vcpus"], "says": "s"}]),
     "sources.0.read", "not a date"),
    (lambda e: e.update(sources=[{"url": "https://x", "read": "2026-12-01", "fields": ["speed"], "says": "s"}]),
     "sources.0.fields", "not a figure"),
])
def test_a_bad_source_or_reason_names_its_field(change: Any, field: str, why: str) -> None:
    doc = catalog_document()
    index = next(i for i, o in enumerate(doc["offerings"]) if o["name"] == "ecs.ebmgn7ex.32xlarge")
    change(doc["offerings"][index])
    with pytest.raises(InvalidSpecError) as exc:
        parse_catalog(doc, "test")
    assert exc.value.field == f"offerings.{index}.{field}" and why in str(exc.value)


def test_unpriced_offerings_are_listed_with_why_and_the_planner_says_so() -> None:
    cat = load_catalog()
    for e in cat.of("alibaba") + cat.of("huawei"):
        why = cat.why_unpriced(e.provider, "cn-beijing", e.name, BillingModel.MONTHLY)
        assert why and "catalogue refresh" in why, e.name
    plan = recommend(parse_requirements({"gpus": 16, "gpu": ["910B"], "providers": ["huawei"], "currency": "CNY",
                                         "duration": {"months": 1}}), cat, today=TODAY)
    assert not plan.options
    [refusal] = plan.unpriced
    assert refusal.offering == "physical.kat2e.48xlarge.8.313t" and "price inquiry" in refusal.reason
    assert plan.not_feasible == ()


def _cny(**prices: Any) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(catalog_document())
    doc["price_lists"].insert(0, {"provider": "huawei", "currency": "CNY", "as_of": "2026-11-20",
                                  "source": "test prices", "regions": {"cn-north-4": {
                                      "physical.kat2e.48xlarge.8.313t": prices}}})
    return doc


def test_subscriptions_are_listed_per_period_and_costed_in_whole_months_or_years() -> None:
    cat = parse_catalog(_cny(monthly={"month": 120000}, reserved_1y={"year": 1200000}), "test")
    prices = {p.billing: p for p in cat.prices("huawei", "cn-north-4", "physical.kat2e.48xlarge.8.313t")}
    monthly, yearly = prices[BillingModel.MONTHLY], prices[BillingModel.RESERVED_1Y]
    assert (monthly.per, round(monthly.listed, 6), yearly.per, round(yearly.listed, 6)) == (
        "month", 120000.0, "year", 1200000.0)
    base = {"gpus": 16, "gpu": ["910B"], "providers": ["huawei"], "currency": "CNY", "regions": ["cn-north-4"]}
    month = recommend(parse_requirements({**base, "duration": {"months": 1}}), cat, today=TODAY)
    best = month.best
    assert (best.billing, best.nodes, round(best.total, 2)) == (BillingModel.MONTHLY, 2, 240000.0)
    assert "2 nodes x 120,000.00 CNY/month x 1 month" in best.lines[0].detail
    # a year: twelve months cost 1,440,000 per node; the yearly term 1,200,000 (its discount) wins
    year = recommend(parse_requirements({**base, "duration": {"months": 12}}), cat, today=TODAY)
    totals = {o.billing: round(o.total, 2) for o in year.options}
    assert totals == {BillingModel.RESERVED_1Y: 2400000.0, BillingModel.MONTHLY: 2880000.0}
    assert year.best.billing == BillingModel.RESERVED_1Y
    # a run of 1.2 months bills 2 whole months
    part = recommend(parse_requirements({**base, "duration": {"days": 36}}), cat, today=TODAY)
    assert round(next(o for o in part.options if o.billing == BillingModel.MONTHLY).total, 2) == 480000.0


def test_a_price_per_period_that_is_no_period_names_its_field() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        parse_catalog(_cny(monthly={"fortnight": 5}), "test")
    assert exc.value.field == "price_lists.0.regions.cn-north-4.physical.kat2e.48xlarge.8.313t.monthly"


def test_capacity_blocks_are_refused_where_aws_does_not_sell_them_and_unpriced_where_it_does() -> None:
    cat = load_catalog()
    p5en = cat.require("aws", "p5en.48xlarge")
    assert p5en.billing_terms.block_regions == ("us-east-2",)
    base = {"gpus": 16, "gpu": ["H200"], "providers": ["aws"], "duration": {"days": 7}, "billing": ["capacity_block"]}
    east1 = recommend(parse_requirements({**base, "regions": ["us-east-1"]}), cat, today=TODAY)
    assert not any(r.offering == "p5en.48xlarge" and r.unpriced for r in east1.rejected)
    why = cat.why_unpriced("aws", "us-east-2", "p5en.48xlarge", BillingModel.CAPACITY_BLOCK)
    assert why and "DescribeCapacityBlockOfferings" in why
    assert cat.require("aws", "p4d.24xlarge").billing_terms.block_windows  # p4d is sold as Capacity Blocks too


def test_offerings_show_unknown_figures_and_unpriced_offerings_with_why(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", "offerings", "--provider", "alibaba",
                          "--provider", "huawei"], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "not priced:" in out.stdout and "unknown figures" in out.stdout and "unverified" in out.stdout
    row = next(line for line in out.stdout.splitlines() if line.startswith("huawei"))
    assert "roce unknown = unknown Gbps" in row and "unpriced" in row
    listed = json.loads(subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", "offerings", "--provider",
                                        "huawei", "--json"], capture_output=True, text=True, timeout=120,
                                       check=True).stdout)
    assert listed[0]["vcpus"] is None and listed[0]["unknown"]["vcpus"] and listed[0]["unpriced"]
