"""The planner (providers/planner.py) on small hand-checked catalogues, property tests over generated ones
(hypothesis), currency handling, the emitted cluster spec round-tripping through load_spec, and the cost
chart. Pure functions: no server."""

from __future__ import annotations

import itertools
import math
import xml.etree.ElementTree as ET
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from metalfleet.providers.catalog import Catalog, parse_catalog
from metalfleet.providers.checks import RDMA_FABRICS
from metalfleet.providers.costplot import cost_svg
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import BillingModel, Fabric
from metalfleet.providers.planner import (
    BLOCK_PLACEHOLDER,
    SHARED_PLACEHOLDER,
    InfeasiblePlanError,
    parse_requirements,
    recommend,
    spec_yaml,
)
from metalfleet.providers.spec import load_spec

TODAY = date(2026, 11, 30)


def offering(provider: str, name: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "provider": provider, "name": name, "orderable": True, "baseline": None, "vendor": "nvidia",
        "gpu_model": "H100", "gpu_count": 8, "gpu_memory_gib": 80, "interconnect": "nvswitch",
        "interconnect_gbps": 900.0, "fabric": "efa", "fabric_cards": 32, "fabric_gbps": 3200.0, "vcpus": 192,
        "memory_gib": 2048, "nvme_count": 8, "nvme_size_gib": 3500, "bare_metal": False, "source": "test"}
    base.update(kw)
    return base


def price_list(provider: str, regions: dict[str, dict[str, dict[str, float]]], currency: str = "USD",
               as_of: str = "2026-11-01", **rates: float) -> dict[str, Any]:
    return {"provider": provider, "currency": currency, "as_of": as_of, "source": f"{provider} test prices",
            "regions": regions, **rates}


def catalogue(offerings: list[dict[str, Any]], lists: list[dict[str, Any]]) -> Catalog:
    return parse_catalog({"schema": 1, "offerings": offerings, "price_lists": lists}, "test")


def req(**kw: Any) -> Any:
    data: dict[str, Any] = {"gpus": 16, "duration": {"days": 10}}
    data.update(kw)
    return parse_requirements(data)


#: Two H100 offers (aws-like in USD, a CNY cloud with few CPUs), an A100 and a PCIe box without fabric.
SMALL = catalogue(
    [offering("aws", "big.h100"),
     offering("aws", "big.a100", gpu_model="A100"),
     offering("alibaba", "ebm.h100", fabric="erdma", fabric_cards=2, fabric_gbps=400.0, vcpus=16, bare_metal=True),
     offering("huawei", "pcie.h100", interconnect="pcie", interconnect_gbps=None, fabric="none", fabric_cards=0,
              fabric_gbps=None, nvme_count=1, nvme_size_gib=900)],
    [price_list("aws", {"r1": {"big.h100": {"on_demand": 10.0, "reserved_1y": 6.0, "capacity_block": 5.0},
                               "big.a100": {"on_demand": 1.0}}},
                block_storage_gib_month=0.1, shared_storage_gib_month=0.2, egress_gib=0.05),
     price_list("alibaba", {"r2": {"ebm.h100": {"on_demand": 50.0, "monthly": 20000.0 / 730}}}, currency="CNY"),
     price_list("huawei", {"r3": {"pcie.h100": {"monthly": 4.0}}}, currency="USD")])


def test_the_cheapest_feasible_option_wins_and_the_sums_are_hand_checked() -> None:
    result = recommend(req(gpu="H100", exchange_rates={"CNY": 0.14}), SMALL, today=TODAY)
    totals = {(o.provider, o.billing.value): round(o.total, 2) for o in result.options}
    assert totals == {
        ("aws", "on_demand"): 2 * 10.0 * 240,            # 4800: 2 nodes, 10 days by the hour
        ("aws", "reserved_1y"): 2 * 6.0 * 8760,          # 105120: the whole 1-year term, however short the run
        ("aws", "capacity_block"): 2 * 5.0 * 240,        # 2400: one 10-day block
        ("alibaba", "on_demand"): round(2 * 50.0 * 0.14 * 240, 2),   # 3360 (CNY at 0.14)
        ("alibaba", "monthly"): round(2 * 20000.0 * 0.14, 2),        # 5600: one whole prepaid month
    }
    assert [o.key for o in result.options][:2] == [("aws", "r1", "big.h100", "capacity_block"),
                                                   ("alibaba", "r2", "ebm.h100", "on_demand")]
    best = result.best
    assert best.nodes == 2 and best.gpus == 16 and best.lines[0].detail.startswith("2 nodes x 5 USD/h x 240 h")
    # the PCIe box has no fabric: refused for a 2-node job (fabric rdma by default), with the reason
    assert "huawei pcie.h100: no RDMA fabric (fabric none) for a 2-node job" in [str(r) for r in result.rejected]
    assert "aws big.a100: its GPU is A100, not H100" in [str(r) for r in result.rejected]
    alibaba = next(o for o in result.options if o.provider == "alibaba")
    assert any(w.startswith("2 vCPUs per GPU and the cores are not known: fewer than 4 CPU cores per GPU")
               for w in alibaba.warnings)
    assert "(1 CNY = 0.14 USD)" in alibaba.lines[0].detail
    assert any("exchange rate given: 1 CNY = 0.14 USD" in a for a in result.assumptions)


def test_a_currency_without_a_rate_is_refused_never_guessed() -> None:
    result = recommend(req(gpu="H100"), SMALL, today=TODAY)
    assert {o.provider for o in result.options} == {"aws"}
    assert "alibaba r2 ebm.h100 on_demand: priced in CNY, and exchange_rates gives no rate for CNY" in [
        str(r) for r in result.rejected]
    # the plan's own currency: every USD price converted at the given rate
    in_cny = recommend(req(gpu="H100", billing=["on_demand"], currency="CNY", exchange_rates={"USD": 7.0}), SMALL,
                  today=TODAY)
    assert [(o.provider, round(o.total, 2)) for o in in_cny.options] == [("alibaba", 2 * 50.0 * 240),
                                                                         ("aws", 2 * 10.0 * 7.0 * 240)]


def test_storage_and_egress_are_costed_from_the_price_list_or_flagged_unpriced() -> None:
    result = recommend(req(gpu="H100", billing=["on_demand"], exchange_rates={"CNY": 0.14}, egress_tib=1,
                      storage={"shared_tib": 10, "block_gib_per_node": 1000}, duration={"months": 1}), SMALL,
                  today=TODAY)
    aws = next(o for o in result.options if o.provider == "aws")
    parts = {line.what: round(line.amount, 2) for line in aws.lines}
    assert parts == {"compute": 2 * 10.0 * 730, "block storage": 2 * 1000 * 0.1, "shared storage": 10 * 1024 * 0.2,
                     "egress": 1024 * 0.05}
    alibaba = next(o for o in result.options if o.provider == "alibaba")
    assert alibaba.unpriced == ("block storage", "shared storage", "egress")
    assert any(w.startswith("not counted (the catalogue has no alibaba rate)") for w in alibaba.warnings)


def test_ties_are_ranked_by_name_and_reported() -> None:
    cat = catalogue([offering("aws", "b.h100"), offering("aws", "a.h100"), offering("aws", "c.h100")],
                    [price_list("aws", {"r1": {"a.h100": {"on_demand": 3.0}, "b.h100": {"on_demand": 3.0},
                                               "c.h100": {"on_demand": 3.5}}})])
    result = recommend(req(), cat, today=TODAY)
    assert [o.offering for o in result.ties] == ["a.h100", "b.h100"]
    assert [o.offering for o in result.options] == ["a.h100", "b.h100", "c.h100"]


def test_an_infeasible_request_says_why() -> None:
    result = recommend(req(gpu="B200"), SMALL, today=TODAY)
    assert not result.feasible and result.ties == ()
    with pytest.raises(InfeasiblePlanError) as exc:
        result.best  # noqa: B018
    assert "its GPU is H100, not B200 (3 options)" in str(exc.value)
    assert "aws big.h100: its GPU is H100, not B200" in exc.value.reasons
    over = recommend(req(gpu="H100", budget=1000, exchange_rates={"CNY": 0.14}), SMALL, today=TODAY)
    assert not over.feasible
    assert "aws r1 big.h100 capacity_block: costs 2,400.00 USD, over the budget of 1,000.00 USD" in [
        str(r) for r in over.rejected]
    nowhere = recommend(req(gpu="H100", regions=["eu-1"]), SMALL, today=TODAY)
    assert "aws big.h100: priced only in r1, not in the allowed regions" in [str(r) for r in nowhere.rejected]
    no_billing = recommend(req(gpu="H100", billing=["spot"], providers=["aws"]), SMALL, today=TODAY)
    assert "aws r1 big.h100: no price for an allowed billing model (priced: on_demand, reserved_1y, " \
           "capacity_block)" in [str(r) for r in no_billing.rejected]


def test_fabric_any_warns_instead_of_refusing() -> None:
    result = recommend(req(gpu="H100", fabric="any", providers=["huawei"]), SMALL, today=TODAY)
    [pcie] = result.options
    assert any("no RDMA fabric for a 2-node job" in w for w in pcie.warnings)
    assert any(w.startswith("PCIe-only GPUs (no NVLink/NVSwitch)") for w in pcie.warnings)
    listed = recommend(req(gpu="H100", fabric=["erdma"], exchange_rates={"CNY": 0.14}), SMALL, today=TODAY)
    assert {o.provider for o in listed.options} == {"alibaba"}
    single = recommend(req(gpus=8, gpu="H100", providers=["huawei"]), SMALL, today=TODAY)  # one node: no fabric needed
    assert single.feasible and single.best.nodes == 1


def test_a_priced_billing_model_the_platform_does_not_sell_is_refused_with_why() -> None:
    cat = catalogue([offering("huawei", "bms.h100")],
                    [price_list("huawei", {"r3": {"bms.h100": {"on_demand": 4.0, "monthly": 3.0}}}, currency="USD")])
    result = recommend(req(gpu="H100", providers=["huawei"], cluster={"image": "img-1"}), cat, today=TODAY)
    assert [o.billing.value for o in result.options] == ["monthly"]
    [refused, *unpriced] = [r for r in result.rejected if r.billing is not None]
    assert refused.billing.value == "on_demand" and "yearly/monthly (prePaid) servers only" in refused.reason
    assert unpriced and all(r.reason.startswith("no list price for ") for r in unpriced)
    assert result.cluster_spec()["capacity"]["billing"] == "monthly"


def test_capacity_blocks_bill_whole_blocks_and_warn_when_shorter_than_the_run() -> None:
    terms = {"capacity_block": {"windows": [{"min_days": 1, "max_days": 14}, {"min_days": 21, "max_days": 182,
                                                                              "step_days": 7}],
                                "max_instances": 4, "lead_days": 56}}
    cat = catalogue([offering("aws", "blk.h100", billing_terms=terms)],
                    [price_list("aws", {"r1": {"blk.h100": {"capacity_block": 1.0}}})])
    month = recommend(req(duration={"days": 28}), cat, today=TODAY).best
    assert month.billed_hours == 28 * 24 and "one 28-day Capacity Block" in month.lines[0].detail
    long = recommend(req(duration={"days": 200}), cat, today=TODAY).best
    assert long.billed_hours == 200 * 24  # 182 + 14 + 4 days: cheaper than 182 + 21 (AWS sells no 18-day block)
    assert "3 Capacity Blocks (182 + 14 + 4 days)" in long.lines[0].detail
    assert any(w.startswith("Capacity Block shorter than the run: a block lasts at most 182 days") for w in
               long.warnings)
    too_many = recommend(req(gpus=40), cat, today=TODAY)
    assert [r.reason for r in too_many.rejected if r.billing == BillingModel.CAPACITY_BLOCK] == [
        "a Capacity Block holds at most 4 instances; the job needs 5"]


def test_a_capacity_block_is_costed_as_the_cheapest_sellable_cover_and_says_so() -> None:
    """AWS sells 1-14 days by 1 day and 21-182 days by 7 (91 = 13 x 7 is sold); 3 months (91.25 days) lies
    between 91 and 98: costed as 91 + 1 days, not as one 98-day block, and the option says so."""
    terms = {"capacity_block": {"windows": [{"min_days": 1, "max_days": 14}, {"min_days": 21, "max_days": 182,
                                                                              "step_days": 7}]}}
    cat = catalogue([offering("aws", "blk.h100", billing_terms=terms)],
                    [price_list("aws", {"r1": {"blk.h100": {"capacity_block": 1.0}}})])
    for duration in ({"days": 91}, {"weeks": 13}):
        exact = recommend(req(duration=duration), cat, today=TODAY).best
        assert exact.billed_hours == 91 * 24 and "one 91-day Capacity Block" in exact.lines[0].detail
        assert round(exact.total, 2) == 2 * 1.0 * 91 * 24
        assert not any("no single Capacity Block duration" in w for w in exact.warnings)
    between = recommend(req(duration={"months": 3}), cat, today=TODAY).best
    assert between.run_hours == 2190 and between.billed_hours == 92 * 24
    assert round(between.total, 2) == 2 * 1.0 * 92 * 24  # 4416, not 2 x 98 x 24 = 4704
    assert "2 Capacity Blocks (91 + 1 days)" in between.lines[0].detail
    assert "the run's 91.25 days are no single Capacity Block duration sold (1-14 days, 21-182 days by 7): costed " \
           "as the cheapest cover, 2 blocks of 91 + 1 days, cheaper than one 98-day block" in between.warnings
    gap = recommend(req(duration={"days": 15}), cat, today=TODAY).best  # between 14 and 21
    assert gap.billed_hours == 15 * 24 and "2 Capacity Blocks (14 + 1 days)" in gap.lines[0].detail
    half = recommend(req(duration={"days": 90.5}), cat, today=TODAY).best  # the next sellable block is the cover
    assert half.billed_hours == 91 * 24
    assert any(w.endswith("costed as the cheapest cover, one 91-day block") for w in half.warnings)
    year = recommend(req(duration={"days": 364}), cat, today=TODAY).best
    assert "2 Capacity Blocks (2 x 182 days)" in year.lines[0].detail


def test_a_billing_model_sold_but_without_a_price_is_listed_with_why() -> None:
    from metalfleet.stacks.cli.plan import plan_text

    result = recommend(req(gpu="H100", providers=["aws"]), SMALL, today=TODAY)
    refused = [str(r) for r in result.rejected]
    # aws sells reserved_3y but the list prices only on_demand, reserved_1y and capacity_block; it sells no spot
    assert "aws r1 big.h100 reserved_3y: no list price for reserved_3y of big.h100 in r1" in refused
    assert not any("spot" in r for r in refused)
    assert "  aws r1 big.h100 reserved_3y: no list price for reserved_3y of big.h100 in r1" in \
        plan_text(result).splitlines()
    asked = recommend(req(gpu="H100", providers=["aws"], billing=["on_demand"]), SMALL, today=TODAY)
    assert not any("no list price" in str(r) for r in asked.rejected)  # only the billing models asked for


def test_the_gb_as_gib_assumption_says_it_underestimates() -> None:
    [note] = [a for a in recommend(req(), SMALL, today=TODAY).assumptions if "per GB applied per GiB" in a]
    assert "1 GB = 0.931 GiB" in note and "underestimate, by up to 6.9%" in note and "overestimate" not in note


def test_checklist_warnings_nvme_price_age_reservation_term() -> None:
    result = recommend(req(gpu="H100", providers=["aws"], billing=["reserved_1y"],
                      checks={"min_nvme_tib_per_node": 30, "max_price_age_days": 10}), SMALL, today=TODAY)
    warnings = result.best.warnings
    assert "27.3 TiB local NVMe per node, below 30 TiB" in warnings
    assert "the price is 29 days old (2026-11-01): `metalfleet catalogue refresh` or check the provider's page" \
        in warnings
    assert any(w.startswith("the run lasts 0.3 months but the reservation bills its whole 1-year term")
               for w in warnings)


def test_prepaid_only_offerings_are_not_sold_by_the_hour() -> None:
    cat = catalogue([offering("alibaba", "pre.h100", billing_terms={"prepaid_only": True})],
                    [price_list("alibaba", {"r": {"pre.h100": {"on_demand": 1.0, "monthly": 500.0}}})])
    result = recommend(req(), cat, today=TODAY)
    assert [o.billing for o in result.options] == [BillingModel.MONTHLY]
    assert [str(r) for r in result.rejected] == ["alibaba r pre.h100 on_demand: sold prepaid only",
                                                 "alibaba r pre.h100 reserved_1y: no list price for reserved_1y of "
                                                 "pre.h100 in r",
                                                 "alibaba r pre.h100 reserved_3y: no list price for reserved_3y of "
                                                 "pre.h100 in r"]  # no spot: sold prepaid only


@pytest.mark.parametrize(("data", "field"), [
    ({"gpus": 0}, "gpus"),
    ({"gpus": 8, "nodes": 1}, "(top level)"),
    ({"gpuss": 8}, "gpuss"),
    ({"duration": {"days": 1, "hours": 2}}, "duration"),
    ({"duration": {"fortnights": 1}}, "duration.fortnights"),
    ({"fabric": "ib"}, "fabric"),
    ({"fabric": ["nvlink"]}, "fabric"),
    ({"billing": ["free"]}, "billing.0"),
    ({"currency": "usd"}, "currency"),
    ({"exchange_rates": {"cny": 0.14}}, "exchange_rates"),
    ({"exchange_rates": {"CNY": 0}}, "exchange_rates"),
    ({"budget": -5}, "budget"),
    ({"storage": {"shared_tb": 1}}, "storage.shared_tb"),
])
def test_bad_requirements_name_the_field(data: dict[str, Any], field: str) -> None:
    full = {"gpus": 8, "duration": {"days": 1}, **data}
    if "gpuss" in data:
        del full["gpus"]
        full["nodes"] = 1
    with pytest.raises(InvalidSpecError) as exc:
        parse_requirements(full, "req.yaml")
    assert exc.value.field is not None and exc.value.field.startswith(field), str(exc.value)
    assert str(exc.value).startswith("invalid plan requirements req.yaml:")


def test_an_unknown_provider_is_named() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        recommend(req(providers=["aws", "awz"]), SMALL, today=TODAY)
    assert (exc.value.field, exc.value.value) == ("providers.1", "awz")
    assert "known: aws, alibaba, huawei" in str(exc.value)


def test_the_emitted_spec_round_trips_through_load_spec(tmp_path: Path) -> None:
    requirements = req(gpu="H100", providers=["aws"], billing=["on_demand"], storage={"block_gib_per_node": 500},
                       cluster={"name": "llm-h100", "tags": {"owner": "ml@example.com", "cost-center": "4711"},
                                "spec": {"zone": "r1a", "network": {"subnet_id": "subnet-1"}}})
    result = recommend(requirements, SMALL, today=TODAY)
    path = tmp_path / "cluster.yaml"
    path.write_text(spec_yaml(result.best, requirements, "req.yaml"))
    spec = load_spec(path)
    assert (spec.name, spec.provider, spec.region, spec.zone, spec.offering, spec.count) == (
        "llm-h100", "aws", "r1", "r1a", "big.h100", 2)
    assert spec.capacity.billing == BillingModel.ON_DEMAND and spec.placement.strategy == "cluster"
    assert spec.storage.hot is not None and [v.size_gib for v in spec.storage.data] == [500]
    assert spec.tags == {"owner": "ml@example.com", "cost-center": "4711"}
    assert spec.network.subnet_id == "subnet-1" and spec.image.startswith("resolve:ssm:")
    assert result.cluster_spec() == result.cluster_spec(result.best)



def test_the_costed_shared_file_system_is_written_into_the_spec(tmp_path: Path) -> None:
    requirements = req(gpu="H100", providers=["aws"], billing=["on_demand"], storage={"shared_tib": 10})
    result = recommend(requirements, SMALL, today=TODAY)
    assert "shared storage" in [line.what for line in result.best.lines]
    path = tmp_path / "cluster.yaml"
    text = spec_yaml(result.best, requirements)
    path.write_text(text)
    warm = load_spec(path).storage.warm
    assert warm is not None and (warm.kind, warm.source, warm.mount) == ("fsx-lustre", SHARED_PLACEHOLDER, "/shared")
    assert "make the 10 TiB fsx-lustre file system first" in text
    given = req(gpu="H100", providers=["aws"], billing=["on_demand"], storage={"shared_tib": 10},
                cluster={"spec": {"storage": {"warm": {"source": "fs-1.fsx.r1.amazonaws.com@tcp:/abc"}}}})
    spec = recommend(given, SMALL, today=TODAY).cluster_spec()
    assert spec["storage"]["warm"] == {"kind": "fsx-lustre", "source": "fs-1.fsx.r1.amazonaws.com@tcp:/abc",
                                       "mount": "/shared"}
    assert SHARED_PLACEHOLDER not in spec_yaml(recommend(given, SMALL, today=TODAY).best, given)
    assert "warm" not in recommend(req(gpu="H100", providers=["aws"]), SMALL, today=TODAY).cluster_spec()["storage"]


def test_the_spec_takes_the_first_zone_the_catalogue_lists() -> None:
    cat = catalogue([offering("aws", "z.h100", zones={"r1": ["r1b", "r1c"]})],
                    [price_list("aws", {"r1": {"z.h100": {"on_demand": 1.0}}})])
    assert recommend(req(), cat, today=TODAY).cluster_spec()["zone"] == "r1b"
    override = req(cluster={"spec": {"zone": "r1c"}})
    assert recommend(override, cat, today=TODAY).cluster_spec()["zone"] == "r1c"


def test_a_capacity_block_spec_carries_the_placeholder_and_other_providers_need_an_image(tmp_path: Path) -> None:
    requirements = req(gpu="H100", providers=["aws"], billing=["capacity_block"])
    path = tmp_path / "c.yaml"
    text = spec_yaml(recommend(requirements, SMALL, today=TODAY).best, requirements)
    path.write_text(text)
    spec = load_spec(path)
    assert spec.capacity.capacity_block and spec.capacity.reservation_id == BLOCK_PLACEHOLDER
    assert "buy the block first" in text
    alibaba = req(gpu="H100", providers=["alibaba"], exchange_rates={"CNY": 0.14})
    with pytest.raises(InvalidSpecError) as exc:
        recommend(alibaba, SMALL, today=TODAY).cluster_spec()
    assert exc.value.field == "cluster.image"
    bad = req(gpu="H100", providers=["aws"], cluster={"spec": {"count": 0}})
    with pytest.raises(InvalidSpecError) as exc:
        recommend(bad, SMALL, today=TODAY).cluster_spec()
    assert exc.value.field == "count"


def test_cost_over_time_climbs_to_the_total_and_the_chart_shows_each_option() -> None:
    result = recommend(req(gpu="H100", exchange_rates={"CNY": 0.14}, duration={"days": 40}), SMALL, today=TODAY)
    for o in result.options:
        curve = [o.cost_at(o.run_hours * i / 50) for i in range(51)]
        assert all(b >= a - 1e-6 for a, b in itertools.pairwise(curve)), o.label()
        assert math.isclose(curve[-1], o.total, rel_tol=1e-9), o.label()
    block = next(o for o in result.options if o.billing == BillingModel.CAPACITY_BLOCK)
    assert block.cost_at(0) == pytest.approx(block.total)  # paid at purchase (one 42-day block)
    on_demand = next(o for o in result.options if o.billing == BillingModel.ON_DEMAND and o.provider == "aws")
    assert on_demand.cost_at(on_demand.run_hours / 2) == pytest.approx(on_demand.total / 2)
    svg = cost_svg(result.options, "USD", title="Cost over 40 days")
    root = ET.fromstring(svg)
    lines = root.findall("{http://www.w3.org/2000/svg}polyline")
    assert [float(x.get("data-total") or 0) for x in lines] == [round(o.total, 2) for o in result.options]
    assert "Cost over 40 days" in svg and result.best.label() in svg
    frame = root.find("{http://www.w3.org/2000/svg}rect[@stroke='#888']")
    assert frame is not None
    x0, y0 = float(frame.get("x") or 0), float(frame.get("y") or 0)
    x1, y1 = x0 + float(frame.get("width") or 0), y0 + float(frame.get("height") or 0)
    for line in lines:  # every point inside the plot frame; each line starts at day 0 and ends on the last day
        points = [tuple(map(float, p.split(","))) for p in (line.get("points") or "").split()]
        assert all(x0 - 0.05 <= x <= x1 + 0.05 and y0 - 0.05 <= y <= y1 + 0.05 for x, y in points)
        assert points[0][0] == pytest.approx(x0) and points[-1][0] == pytest.approx(x1)
    top = min(float(p.split(",")[1]) for line in lines for p in (line.get("points") or "").split())
    assert top >= y0 and top < y0 + (y1 - y0) * 0.5  # the dearest option reaches the upper half


# -- properties over generated catalogues and requirements -------------------------------------------------
_MODELS = ["H100", "H200", "A100"]
_FABRICS = [f.value for f in Fabric]
_BILLING = [BillingModel.ON_DEMAND, BillingModel.RESERVED_1Y, BillingModel.CAPACITY_BLOCK, BillingModel.MONTHLY]


@st.composite
def generated(draw: st.DrawFn) -> tuple[Catalog, dict[str, Any]]:
    n = draw(st.integers(1, 6))
    offerings, regions = [], {"r1": {}, "r2": {}}  # type: ignore[var-annotated]
    for i in range(n):
        fabric = draw(st.sampled_from(_FABRICS))
        offerings.append(offering(
            draw(st.sampled_from(["aws", "alibaba"])), f"o{i}", gpu_model=draw(st.sampled_from(_MODELS)),
            gpu_count=draw(st.sampled_from([1, 4, 8])), gpu_memory_gib=draw(st.sampled_from([40, 80, 141])),
            fabric=fabric, fabric_cards=0 if fabric == "none" else 4, vcpus=draw(st.integers(8, 256)),
            orderable=draw(st.booleans()) or i == 0))
        for region in draw(st.sets(st.sampled_from(["r1", "r2"]), min_size=1)):
            models = draw(st.sets(st.sampled_from(_BILLING), min_size=1))
            regions[region][f"o{i}"] = {m.value: draw(st.floats(0.5, 100.0)) for m in models}
    lists = []
    for provider in ("aws", "alibaba"):
        table = {r: {k: v for k, v in t.items() if any(o["name"] == k and o["provider"] == provider
                                                       for o in offerings)} for r, t in regions.items()}
        table = {r: t for r, t in table.items() if t}
        if table:
            lists.append(price_list(provider, table, currency="USD" if provider == "aws" else "CNY"))
    requirements: dict[str, Any] = {
        "duration": {"days": draw(st.integers(1, 400))},
        "exchange_rates": draw(st.sampled_from([{}, {"CNY": 0.14}])),
        "billing": [m.value for m in draw(st.sets(st.sampled_from(_BILLING)))],
        "fabric": draw(st.sampled_from(["rdma", "any"])),
    }
    requirements["gpus" if draw(st.booleans()) else "nodes"] = draw(st.integers(1, 64))
    if draw(st.booleans()):
        requirements["gpu"] = draw(st.sampled_from(_MODELS))
    if draw(st.booleans()):
        requirements["min_gpu_memory_gib"] = draw(st.sampled_from([0, 64, 96]))
    if draw(st.booleans()):
        requirements["regions"] = ["r2"]
    if draw(st.booleans()):
        requirements["budget"] = draw(st.floats(1000, 5e6))
    return catalogue(offerings, lists), requirements


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated())
def test_a_chosen_plan_always_meets_the_requirements(case: tuple[Catalog, dict[str, Any]]) -> None:
    catalog, data = case
    requirements = parse_requirements(data)
    result = recommend(requirements, catalog, today=TODAY)
    considered = [e for e in catalog.entries if e.provider != "fake"]
    for o in result.options:
        e = o.entry
        assert o.gpus >= (requirements.gpus or 0) and o.nodes >= (requirements.nodes or 0)
        assert not requirements.gpu or e.gpu_model in requirements.gpu
        assert (e.gpu_memory_gib or 0) >= requirements.min_gpu_memory_gib
        assert e.orderable
        assert o.nodes == 1 or requirements.fabric == "any" or e.fabric in RDMA_FABRICS
        assert not requirements.regions or o.region in requirements.regions
        assert not requirements.billing or o.billing in requirements.billing
        assert requirements.budget is None or o.total <= requirements.budget + 0.005
        assert o.price.currency == requirements.currency or o.price.currency in requirements.exchange_rates
        assert o.total == pytest.approx(sum(line.amount for line in o.lines))
        assert o.billed_hours >= o.run_hours - 1e-6  # nothing is billed for less than the run
        assert o.nodes * e.gpu_count - e.gpu_count < (requirements.gpus or o.nodes * e.gpu_count)  # no spare node
    totals = [round(o.total, 2) for o in result.options]
    assert totals == sorted(totals)
    # every offering considered is either an option or a refusal with a reason
    accounted = {o.offering for o in result.options} | {r.offering for r in result.rejected}
    assert accounted == {e.name for e in considered}
    assert all(r.reason for r in result.rejected)
    event("feasible" if result.feasible else "infeasible")
    if result.feasible:
        spec = result.cluster_spec() if result.best.provider == "aws" else None
        assert spec is None or (spec["count"] == result.best.nodes and spec["offering"] == result.best.offering)
