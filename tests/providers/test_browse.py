"""Browsing the catalogue (providers/browse.py) and the catalogue's optional schema fields: regions, zones,
billing terms (prepaid only, Capacity Block windows, spot interruption), storage and egress rates, and prices
merged over several price lists. Pure functions: no server."""

from __future__ import annotations

import copy
from datetime import date
from typing import Any

import pytest

from metalfleet.providers.browse import catalogue_rows, live_differences, price_age
from metalfleet.providers.catalog import BlockWindow, catalog_document, load_catalog, parse_catalog
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import BillingModel, Fabric

TODAY = date(2026, 11, 30)


def test_every_catalogue_offering_is_a_row_with_its_region_prices_and_constraints() -> None:
    catalog = load_catalog()
    rows = catalogue_rows(catalog)
    assert {(r.provider, r.name) for r in rows} == {(e.provider, e.name) for e in catalog.entries}
    p5 = next(r for r in rows if r.name == "p5.48xlarge")
    assert (p5.region, p5.gpu_model, p5.gpu_count, p5.gpu_memory_gib, p5.fabric, p5.fabric_gbps, p5.rdma) == (
        "us-east-1", "H100", 8, 80, Fabric.EFA, 3200.0, True)
    assert p5.cpus_per_gpu == 24 and p5.cores_per_gpu == 12 and p5.nvme_count == 8 and p5.bare_metal is False
    assert p5.billing_models == ("on_demand", "capacity_block")
    assert any(c.startswith("capacity blocks 1-14 d, 21-182 d by 7 d, at most 64 nodes") for c in p5.constraints)
    p5en = next(r for r in rows if r.name == "p5en.48xlarge")
    assert p5en.billing_models == ("on_demand", "capacity_block (unpriced)")
    h20 = next(r for r in rows if r.name == "ecs.ebmgn8v.48xlarge")
    assert h20.region is None and h20.prices == () and h20.orderable  # no sourced Alibaba price list yet
    row = p5.to_dict(TODAY)
    assert row["prices"][0]["age_days"] == (TODAY - date(2025, 6, 1)).days and row["rdma"] is True


def test_rows_filter_like_the_command_line() -> None:
    catalog = load_catalog()
    assert [r.name for r in catalogue_rows(catalog, providers=["aws"], gpu="h200")] == ["p5en.48xlarge",
                                                                                        "p5e.48xlarge"]
    assert [r.name for r in catalogue_rows(catalog, providers=["aws"], orderable_only=True, fabric=Fabric.EFA,
                                           gpu="A100")] == ["p4de.24xlarge", "p4d.24xlarge"]
    fake = catalogue_rows(catalog, providers=["fake"], region="anywhere-9")
    assert [(r.region, r.prices[0].hourly) for r in fake] == [("anywhere-9", 20.0), ("anywhere-9", 12.0)]
    assert catalogue_rows(catalog, min_gpus=9) == []
    west = catalogue_rows(catalog, region="eu-west-1")  # nothing AWS is priced there; fake is priced everywhere
    assert [(r.provider, r.region) for r in west] == [("fake", "eu-west-1"), ("fake", "eu-west-1")]


@pytest.mark.parametrize(("as_of", "text"), [
    (date(2026, 11, 30), "2026-11-30 (0 days old)"), (date(2026, 11, 29), "2026-11-29 (1 day old)"),
    (date(2026, 10, 1), "2026-10-01 (60 days old)"), (date(2025, 6, 1), "2025-06-01 (17 months old)"),
    (date(2027, 1, 1), "2027-01-01 (dated in the future)"),
])
def test_price_age_reads_in_days_then_months(as_of: date, text: str) -> None:
    assert price_age(as_of, TODAY) == text


def test_live_differences_name_each_figure_price_and_missing_offering() -> None:
    catalog = load_catalog()
    p5 = catalog.require("aws", "p5.48xlarge").offering(catalog.prices("aws", "us-east-1", "p5.48xlarge"))
    same = [p5]
    assert [str(d) for d in live_differences(catalog, "aws", "us-east-1", same)
            if d.name == "p5.48xlarge"] == []
    import dataclasses

    changed = dataclasses.replace(p5, vcpus=190, prices=p5.prices[:1])
    extra = dataclasses.replace(p5, name="p6.48xlarge")
    diffs = {(d.name, d.field): (d.shipped, d.live) for d in live_differences(catalog, "aws", "us-east-1",
                                                                              [changed, extra])}
    assert diffs[("p5.48xlarge", "vcpus")] == (192, 190)
    assert diffs[("p5.48xlarge", "price.capacity_block")] == (31.464, None)
    assert diffs[("p6.48xlarge", "offering")] == (None, "offered")
    assert diffs[("p4d.24xlarge", "offering")] == ("orderable", None)
    assert ("p5.48xlarge", "gpu_model") not in diffs


def _doc() -> dict[str, Any]:
    return copy.deepcopy(catalog_document())


def test_optional_schema_fields_parse_with_defaults_and_values() -> None:
    doc = _doc()
    doc["offerings"][0]["regions"] = ["us-west-2"]
    doc["offerings"][0]["zones"] = {"us-west-2": ["us-west-2a", "us-west-2b"]}
    doc["offerings"][1]["billing_terms"] = {"prepaid_only": True}
    catalog = parse_catalog(doc)
    p5 = catalog.require("aws", "p5.48xlarge")
    assert p5.zones["us-west-2"] == ("us-west-2a", "us-west-2b")
    assert catalog.regions("aws", "p5.48xlarge") == ["us-west-2", "us-east-1"]
    assert catalog.require("aws", "p5en.48xlarge").billing_terms.prepaid_only is True
    assert catalog.require("aws", "p4de.24xlarge").billing_terms.block_windows == ()  # absent: unconstrained
    terms = p5.billing_terms
    assert terms.block_max_days == 182 and terms.block_max_instances == 64 and terms.block_lead_days == 56
    aws = catalog.price_list_for("aws", "us-east-1")
    assert aws is not None and (aws.block_storage_gib_month, aws.shared_storage_gib_month, aws.egress_gib) == (
        0.08, 0.145, 0.09)


@pytest.mark.parametrize(("days", "booked"), [(0.5, 1), (1, 1), (13.2, 14), (14, 14), (14.5, 21), (22, 28),
                                              (91.25, 98), (182, 182), (183, None)])
def test_capacity_block_durations_round_up_to_a_bookable_block(days: float, booked: int | None) -> None:
    assert load_catalog().require("aws", "p5.48xlarge").billing_terms.block_days(days) == booked


def test_a_block_window_never_books_past_its_end() -> None:
    assert BlockWindow(1, 10, 4).fit(9.5) is None  # 1, 5, 9 then 13 > 10
    assert BlockWindow(1, 10, 4).fit(8) == 9


@pytest.mark.parametrize(("where", "value", "field"), [
    (("offerings", 0, "regions"), "us-east-1", "offerings.0.regions"),
    (("offerings", 0, "zones"), {"us-east-1": "us-east-1a"}, "offerings.0.zones.us-east-1"),
    (("offerings", 0, "billing_terms"), {"prepaid": True}, "offerings.0.billing_terms.prepaid"),
    (("offerings", 0, "billing_terms"), {"capacity_block": {"windows": [{"min_days": 5, "max_days": 2}]}},
     "offerings.0.billing_terms.capacity_block.windows.0"),
    (("offerings", 0, "billing_terms"), {"capacity_block": {"max_instances": "64"}},
     "offerings.0.billing_terms.capacity_block.max_instances"),
    (("price_lists", 0, "egress_gib"), -1, "price_lists.0.egress_gib"),
])
def test_a_bad_optional_field_is_named(where: tuple[Any, ...], value: Any, field: str) -> None:
    doc = _doc()
    node: Any = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(InvalidSpecError) as exc:
        parse_catalog(doc, "c.json")
    assert exc.value.field == field, str(exc.value)


def test_a_refreshed_price_list_goes_first_and_keeps_what_it_did_not_price() -> None:
    doc = _doc()
    doc["price_lists"].insert(0, {"provider": "aws", "currency": "USD", "as_of": "2026-11-30", "source": "refresh",
                                  "regions": {"us-east-1": {"p5.48xlarge": {"on_demand": 50.0}}}})
    catalog = parse_catalog(doc)
    [on_demand, block] = catalog.prices("aws", "us-east-1", "p5.48xlarge")
    assert (on_demand.hourly, on_demand.as_of, on_demand.source) == (50.0, date(2026, 11, 30),
                                                                     "refresh (region us-east-1)")
    assert (block.billing, block.hourly, block.as_of) == (BillingModel.CAPACITY_BLOCK, 31.464, date(2025, 6, 1))


def test_browsing_imports_no_pydantic_yaml_or_cloud_sdk() -> None:
    """`metalfleet offerings` offline needs only the standard library and the catalogue."""
    import json
    import subprocess
    import sys

    code = ("import json, sys\nimport metalfleet.providers.browse\nprint(json.dumps(sorted(m for m in "
            "('pydantic', 'yaml', 'boto3', 'botocore', 'tenacity') if m in sys.modules)))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == []
