"""The one offering catalogue (providers/data/catalog.json): its parser, its prices, and its agreement with
the acceptance baselines (bootstrap/acceptance/baselines.json), which are kept where they are and typed
elsewhere: every GPU offering names a baseline and every baseline is named by one offering, and where both
give a figure they give the same one, except for the differences listed (with why) below."""

from __future__ import annotations

import copy
import json
from datetime import date
from importlib import resources
from typing import Any, get_args

import pytest

from metalfleet.providers.catalog import ANY_REGION, Catalog, Vendor, load_catalog, parse_catalog
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import BillingModel, Fabric, Interconnect

#: GPU offerings the catalogue knows without an acceptance baseline, and why.
NO_BASELINE = {
    ("aws", "p5e.48xlarge"): "known for inventories only; no sourced baseline figures yet",
    ("aws", "g5.48xlarge"): "known for inventories only (PCIe A10G, no fabric); no baseline yet",
    ("alibaba", "ecs.ebmgn7ex.32xlarge"): "orderable (Alibaba driver); no sourced baseline figures yet",
    ("alibaba", "ecs.ebmgn7e.32xlarge"): "orderable (Alibaba driver); no sourced baseline figures yet",
    ("alibaba", "ecs.ebmgn7.26xlarge"): "orderable (Alibaba driver); no sourced baseline figures yet",
    ("alibaba", "ecs.ebmgn8is.32xlarge"): "orderable (Alibaba driver); no sourced baseline figures yet",
}
#: Fields where the catalogue and the baseline knowingly differ, and why.
DIFFERENCES: dict[tuple[str, str, str], str] = {}
#: A baseline's interconnect kind -> the catalogue interconnects it covers.
_INTERCONNECT = {"nvlink": {Interconnect.NVSWITCH, Interconnect.NVLINK}, "hccs": {Interconnect.HCCS},
                 "pcie": {Interconnect.PCIE}}


def _raw() -> dict[str, Any]:
    text = resources.files("metalfleet.providers").joinpath("data/catalog.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def _baselines() -> dict[str, Any]:
    text = resources.files("metalfleet.bootstrap.acceptance").joinpath("baselines.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def test_every_gpu_offering_has_a_baseline_and_every_baseline_an_offering() -> None:
    catalog, baselines = load_catalog(), _baselines()["offerings"]
    gpu = [e for e in catalog.entries if e.gpu_count > 0]
    assert {(e.provider, e.name) for e in gpu if e.baseline is None} == set(NO_BASELINE)
    named = [e.baseline for e in catalog.entries if e.baseline is not None]
    assert sorted(named) == sorted(set(named)), "two offerings name the same baseline"
    assert set(named) == set(baselines), (
        f"baselines without a catalogue offering: {sorted(set(baselines) - set(named))}; "
        f"offerings naming a missing baseline: {sorted(set(named) - set(baselines))}")


def _comparisons(entry: Any, base: dict[str, Any], defaults: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """field -> (catalogue value, baseline value), for every figure both give."""
    gpu, fabric, storage = base.get("gpu", {}), base.get("fabric", {}), base.get("storage", {})
    out: dict[str, tuple[Any, Any]] = {
        "provider": (entry.provider, base.get("provider")),
        "accelerator": (entry.vendor, base.get("accelerator", defaults["accelerator"])),
        "gpu.model": (entry.gpu_model, gpu.get("model")),
        "gpu.count": (entry.gpu_count, gpu.get("count")),
        "fabric.kind": (entry.fabric.value, fabric.get("kind", defaults["fabric"]["kind"])),
    }
    if gpu.get("min_memory_mib") is not None and entry.gpu_memory_gib is not None:
        # the baseline's figure is the least a healthy GPU may report: never above the nominal size
        out["gpu.min_memory_mib"] = (True, entry.gpu_memory_gib * 1024 >= gpu["min_memory_mib"])
    if fabric.get("ports") is not None and entry.fabric_cards is not None:
        out["fabric.ports"] = (entry.fabric_cards, fabric["ports"])
    if fabric.get("total_gbps") is not None and entry.fabric_gbps is not None:
        out["fabric.total_gbps"] = (entry.fabric_gbps, float(fabric["total_gbps"]))
    if storage.get("nvme_count") is not None and entry.nvme_count is not None:
        out["storage.nvme_count"] = (entry.nvme_count, storage["nvme_count"])
    kind = (base.get("interconnect") or {}).get("kind")
    if kind is not None:
        out["interconnect.kind"] = (True, entry.interconnect in _INTERCONNECT[kind])
    return out


def test_catalogue_and_baselines_give_the_same_figures() -> None:
    doc = _baselines()
    disagree, known = [], []
    for entry in load_catalog().entries:
        if entry.baseline is None:
            continue
        for field, (ours, theirs) in _comparisons(entry, doc["offerings"][entry.baseline], doc["defaults"]).items():
            if ours != theirs:
                (known if (entry.provider, entry.name, field) in DIFFERENCES else disagree).append(
                    (entry.provider, entry.name, field, ours, theirs))
    assert disagree == []
    assert {k[:3] for k in known} == set(DIFFERENCES), "a listed difference is gone: drop it from DIFFERENCES"


def test_the_shipped_catalogue_parses_and_answers() -> None:
    catalog = load_catalog()
    p5 = catalog.require("aws", "p5.48xlarge")
    assert (p5.gpu_model, p5.gpu_count, p5.fabric, p5.fabric_cards, p5.interconnect) == (
        "H100", 8, Fabric.EFA, 32, Interconnect.NVSWITCH)
    assert [e.name for e in catalog.of("aws", orderable=True)] == [
        "p5.48xlarge", "p5en.48xlarge", "p4de.24xlarge", "p4d.24xlarge"]
    [on_demand, block] = catalog.prices("aws", "us-east-1", "p5.48xlarge")
    assert (on_demand.billing, on_demand.hourly, on_demand.currency, on_demand.as_of) == (
        BillingModel.ON_DEMAND, 55.04, "USD", date(2025, 6, 1))
    assert block.billing == BillingModel.CAPACITY_BLOCK and on_demand.source.endswith("(region us-east-1)")
    assert catalog.prices("aws", "eu-west-1", "p5.48xlarge") == ()  # no price list for that region
    fake = catalog.offerings("fake", "anywhere-1")  # a price list for every region (*)
    assert [(o.name, o.price().hourly if o.price() else None) for o in fake] == [("fake.8xh100", 20.0),
                                                                                ("fake.8xa100", 12.0)]
    assert fake[0].price() is not None and fake[0].price().source == "fake"  # type: ignore[union-attr]
    assert get_args(Vendor) == ("nvidia", "ascend", "none")


def test_an_unknown_offering_is_an_error_naming_the_field_and_the_known_ones() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        load_catalog().require("fake", "fake.1xh100", field="hosts.2.offering")
    assert exc.value.field == "hosts.2.offering" and exc.value.value == "fake.1xh100"
    assert "fake.8xh100, fake.8xa100" in str(exc.value)


def _broken(path: tuple[Any, ...], value: Any, *, delete: bool = False) -> dict[str, Any]:
    doc = copy.deepcopy(_raw())
    node: Any = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


@pytest.mark.parametrize(("path", "value", "delete", "field"), [
    (("offerings", 2, "fabric"), "nvlink-switch", False, "offerings.2.fabric"),
    (("offerings", 0, "interconnect"), "ether", False, "offerings.0.interconnect"),
    (("offerings", 1, "gpu_count"), "8", False, "offerings.1.gpu_count"),
    (("offerings", 1, "gpu_count"), True, False, "offerings.1.gpu_count"),
    (("offerings", 3, "vendor"), "amd", False, "offerings.3.vendor"),
    (("offerings", 0, "source"), None, True, "offerings.0.source"),
    (("offerings", 0, "fabirc"), "efa", False, "offerings.0.fabirc"),
    (("price_lists", 0, "as_of"), "June 2025", False, "price_lists.0.as_of"),
    (("price_lists", 0, "regions", "us-east-1", "p5.48xlarge", "hourly"), 1.0, False,
     "price_lists.0.regions.us-east-1.p5.48xlarge.hourly"),
    (("price_lists", 0, "regions", "us-east-1", "p5.48xlarge", "on_demand"), -3, False,
     "price_lists.0.regions.us-east-1.p5.48xlarge.on_demand"),
    (("price_lists", 3, "regions", ANY_REGION, "fake.1xb200"), {"on_demand": 9.0}, False,
     f"price_lists.3.regions.{ANY_REGION}.fake.1xb200"),
    (("schema",), 2, False, "schema"),
])
def test_a_broken_catalogue_names_the_field(path: tuple[Any, ...], value: Any, delete: bool, field: str) -> None:
    with pytest.raises(InvalidSpecError) as exc:
        parse_catalog(_broken(path, value, delete=delete), "catalog.json")
    assert exc.value.field == field, str(exc.value)
    assert str(exc.value).startswith(f"offering catalogue catalog.json: {field}:")


def test_an_offering_listed_twice_is_refused() -> None:
    doc = _raw()
    doc["offerings"].append(dict(doc["offerings"][0]))
    with pytest.raises(InvalidSpecError, match=r"aws p5\.48xlarge is listed twice") as exc:
        parse_catalog(doc)
    assert exc.value.field == f"offerings.{len(doc['offerings']) - 1}.name"


def test_unknown_figures_stay_unknown_until_an_offering_is_built() -> None:
    catalog: Catalog = load_catalog()
    npu = catalog.require("huawei", "physical.kat2e.48xlarge.8.313t")
    assert npu.vcpus is None and npu.memory_gib is None  # the Huawei driver reads them from the flavor list
    assert npu.unknown["vcpus"] and npu.unknown["fabric_cards"]  # each with why
    offering = npu.offering()
    assert (offering.vcpus, offering.memory_gib, offering.fabric, offering.fabric_cards) == (0, 0, Fabric.ROCE, 0)
