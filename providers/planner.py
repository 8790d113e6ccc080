"""The planner: where to run N GPUs for a while, and what it costs in total, from the offering catalogue.

``recommend(requirements, catalog)`` considers every catalogue offering in every region it is priced in, under every
billing model allowed, refuses what cannot meet the requirements (each refusal says why), and ranks the rest by
total cost of ownership over the run: compute as each billing model bills it (on demand by the hour, reserved
for its whole term, Capacity Blocks in whole bookable blocks, prepaid by the month), block and shared storage,
and data egress, all in one currency at rates the requirements give (never fetched). Warnings come from the
buyers' checklists (CPU cores per GPU, PCIe-only GPUs, no RDMA fabric, small NVMe, short Capacity Blocks).
:meth:`Plan.cluster_spec` turns an option into a cluster spec that :func:`~metalfleet.providers.spec.load_spec`
accepts. Pure: no network, no SDK; the catalogue is data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from .catalog import ANY_REGION, BillingTerms, Catalog, CatalogOffering, load_catalog
from .checks import RDMA_FABRICS
from .errors import InvalidSpecError, MetalfleetError
from .models import PERIOD_HOURS, BillingModel, Interconnect, Price
from .requirements import HOURS_PER_MONTH, HOURS_PER_YEAR, PlanRequirements, load_requirements, parse_requirements
from .spec import billing_problem

__all__ = ["HOURS_PER_MONTH", "CostLine", "InfeasiblePlanError", "Option", "Plan", "PlanRequirements",
           "Rejected", "cluster_spec_for", "load_requirements", "parse_requirements", "recommend", "spec_yaml"]

_TERM_HOURS = {BillingModel.RESERVED_1Y: HOURS_PER_YEAR, BillingModel.RESERVED_3Y: 3 * HOURS_PER_YEAR}
_TIE = 0.005  # totals closer than half a cent are a tie


class InfeasiblePlanError(MetalfleetError):
    """No offering meets the requirements; ``reasons`` says why, offering by offering."""

    def __init__(self, message: str, reasons: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.reasons = tuple(reasons)


# -- results --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CostLine:
    """One part of an option's total, in the plan's currency."""

    what: str
    amount: float
    detail: str


@dataclass(frozen=True)
class Option:
    """One feasible way to run: ``nodes`` x ``entry`` in ``region`` under ``billing``, and what it costs."""

    entry: CatalogOffering
    region: str
    billing: BillingModel
    nodes: int
    price: Price
    rate: float
    billed_hours: float
    lines: tuple[CostLine, ...]
    warnings: tuple[str, ...]
    unpriced: tuple[str, ...]
    run_hours: float

    @property
    def provider(self) -> str:
        return self.entry.provider

    @property
    def offering(self) -> str:
        return self.entry.name

    @property
    def gpus(self) -> int:
        return self.nodes * self.entry.gpu_count

    @property
    def total(self) -> float:
        return sum(line.amount for line in self.lines)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.provider, self.region, self.offering, self.billing.value)

    def label(self) -> str:
        return f"{self.provider} {self.region} {self.nodes}x {self.offering} {self.billing.value}"

    def cost_at(self, hour: float) -> float:
        """What has been paid (or committed) ``hour`` hours into the run: on demand and spot accrue by the hour;
        a Capacity Block is paid in full when each block starts; prepaid months when each month starts; a
        reservation accrues by the hour and its unused rest of the term falls due at the run's end."""
        hour = min(max(hour, 0.0), self.run_hours)
        node_hour = self.nodes * self.price.hourly * self.rate
        compute = next(line.amount for line in self.lines if line.what == "compute")
        others = sum(line.amount for line in self.lines if line.what != "compute")
        share = hour / self.run_hours if self.run_hours else 1.0
        if self.billing == BillingModel.CAPACITY_BLOCK or self.billing == BillingModel.MONTHLY:
            step = self._block_hours()
            started = min(math.floor(hour / step) + 1, math.ceil(self.billed_hours / step - 1e-9))
            paid = min(compute, node_hour * step * started)
        elif self.billing in _TERM_HOURS:
            paid = compute if hour >= self.run_hours else node_hour * hour
        else:
            paid = compute * share
        return paid + others * share

    def _block_hours(self) -> float:
        if self.billing == BillingModel.MONTHLY:
            return HOURS_PER_MONTH
        most = self.entry.billing_terms.block_max_days
        return min(self.billed_hours, 24.0 * most) if most else self.billed_hours


@dataclass(frozen=True)
class Rejected:
    """An offering (in a region, under a billing model where that matters) that cannot run the job, and why."""

    provider: str
    offering: str
    region: str | None
    billing: BillingModel | None
    reason: str
    #: Sold, but the catalogue has no price for it (the plan lists these apart: options it could not price).
    unpriced: bool = False

    def __str__(self) -> str:
        where = " ".join(x for x in (self.provider, self.region or "", self.offering,
                                     self.billing.value if self.billing else "") if x)
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class Plan:
    """The ranked feasible options (cheapest first), the refusals and the assumptions behind the figures."""

    requirements: PlanRequirements
    options: tuple[Option, ...]
    rejected: tuple[Rejected, ...]
    assumptions: tuple[str, ...]

    @property
    def feasible(self) -> bool:
        return bool(self.options)

    @property
    def not_feasible(self) -> tuple[Rejected, ...]:
        """Refusals: what cannot run the job (the unpriced are apart)."""
        return tuple(r for r in self.rejected if not r.unpriced)

    @property
    def unpriced(self) -> tuple[Rejected, ...]:
        """Options that might run the job but could not be priced, each with why."""
        return tuple(r for r in self.rejected if r.unpriced)

    @property
    def best(self) -> Option:
        if not self.options:
            raise InfeasiblePlanError(self.why(), [str(r) for r in self.rejected])
        return self.options[0]

    @property
    def ties(self) -> tuple[Option, ...]:
        """Every option as cheap as the best (the best included); ranked by provider, region, offering, billing."""
        if not self.options:
            return ()
        return tuple(o for o in self.options if abs(o.total - self.options[0].total) <= _TIE)

    def why(self) -> str:
        """Why nothing is feasible: each refusal reason with how many options it refused."""
        counts: dict[str, int] = {}
        for r in self.rejected:
            counts[r.reason] = counts.get(r.reason, 0) + 1
        lines = [f"  {reason} ({n} option{'s' if n != 1 else ''})"
                 for reason, n in sorted(counts.items(), key=lambda kv: -kv[1])]
        return "no offering meets the requirements:\n" + ("\n".join(lines) or "  the catalogue lists no offering")

    def cluster_spec(self, option: Option | None = None) -> dict[str, Any]:
        """The cluster spec (as data) that orders ``option`` (default: the best), validated by ``parse_spec``."""
        return cluster_spec_for(option or self.best, self.requirements)


# -- planning -------------------------------------------------------------------------------------
def _nodes_needed(req: PlanRequirements, entry: CatalogOffering) -> int:
    return req.nodes if req.nodes is not None else math.ceil((req.gpus or 0) / entry.gpu_count)


def _hard_filters(req: PlanRequirements, entry: CatalogOffering, nodes: int) -> str | None:
    """Why ``entry`` cannot run the job anywhere; None when it can."""
    if req.orderable_only and not entry.orderable:
        return "known for inventories only: no metalfleet driver orders it"
    if entry.gpu_count <= 0:
        return "has no GPU"
    if req.gpu and entry.gpu_model.lower() not in {g.lower() for g in req.gpu}:
        return f"its GPU is {entry.gpu_model}, not {' or '.join(req.gpu)}"
    if req.min_gpu_memory_gib:
        if entry.gpu_memory_gib is None:
            return "its GPU memory is not known, and min_gpu_memory_gib asks for it"
        if entry.gpu_memory_gib < req.min_gpu_memory_gib:
            return f"{entry.gpu_memory_gib} GiB per GPU, below min_gpu_memory_gib {req.min_gpu_memory_gib}"
    if req.bare_metal is not None and entry.bare_metal != req.bare_metal:
        return "not bare metal" if req.bare_metal else "bare metal, and bare_metal: false asks for virtualised"
    if nodes > 1:
        if req.fabric == "rdma" and entry.fabric not in RDMA_FABRICS:
            return f"no RDMA fabric (fabric {entry.fabric.value}) for a {nodes}-node job"
        if isinstance(req.fabric, list) and entry.fabric not in req.fabric:
            return f"fabric {entry.fabric.value} is not one of {', '.join(f.value for f in req.fabric)}"
    return None


def _regions(req: PlanRequirements, catalog: Catalog, entry: CatalogOffering) -> list[str]:
    listed = catalog.regions(entry.provider, entry.name)
    out: list[str] = []
    for region in listed:
        if region == ANY_REGION:
            out.extend(r for r in req.regions if r not in out)
        elif not req.regions or region in req.regions:
            out.append(region)
    return out


def _block_cover(terms: BillingTerms, days: float) -> tuple[int, ...]:
    """The Capacity Blocks (days each, longest first) that cover ``days`` for the fewest days billed, then the
    fewest blocks: a run between two sellable durations is billed the cheaper cover, e.g. 91.25 days (3 months)
    as 91 + 1 days, not as one 98-day block.

    The sellable durations are the catalogue's windows; AWS's are, in its words, "in 1-day increments up 14 days,
    and in 7-day increments up to 182 days" (DescribeCapacityBlockOfferings, CapacityDurationHours:
    https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/ec2/aws.sdk.kotlin.services.ec2.model/-describe-capacity-block-offerings-request/capacity-duration-hours.html;
    the EC2 User Guide's Capacity Blocks for ML page, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html,
    lists the same durations)."""
    sizes = sorted({d for w in terms.block_windows for d in range(w.min_days, w.max_days + 1, w.step_days)},
                   reverse=True)
    most = sizes[0]
    need = max(1, math.ceil(days - 1e-9))
    full = max(0, need // most - 1)  # whole longest blocks; the rest (under two of them) is searched exactly
    rest = need - full * most
    # fewest[t]: the fewest blocks adding up to exactly t days (a cover of ``rest`` never needs rest + most days)
    fewest: list[tuple[int, ...] | None] = [()] + [None] * (rest + most)
    for total in range(1, rest + most + 1):
        for size in sizes:
            below = fewest[total - size] if size <= total else None
            best = fewest[total]
            if below is not None and (best is None or len(below) + 1 < len(best)):
                fewest[total] = (*below, size)
    found = next(c for c in fewest[rest:] if c is not None)
    return (most,) * full + tuple(sorted(found, reverse=True))


def _days_text(cover: Sequence[int]) -> str:
    """``182 + 14 + 4``; repeated lengths counted: ``2 x 182 + 21``."""
    counts = {d: cover.count(d) for d in sorted(set(cover), reverse=True)}
    return " + ".join(f"{n} x {d}" if n > 1 else str(d) for d, n in counts.items())


def _billed_hours(billing: BillingModel, entry: CatalogOffering, hours: float) -> tuple[float, str] | str:
    """(hours billed, how) for a run of ``hours``; a string says why this billing model cannot cover it."""
    if billing in _TERM_HOURS:
        term = _TERM_HOURS[billing]
        terms = math.ceil(hours / term - 1e-9)
        return terms * term, f"{terms} x {term / HOURS_PER_YEAR:g}-year term{'s' if terms > 1 else ''}, billed whole"
    if billing == BillingModel.MONTHLY:
        months = math.ceil(hours / HOURS_PER_MONTH - 1e-9)
        return months * HOURS_PER_MONTH, f"{months} prepaid month{'s' if months > 1 else ''} of 730 h"
    if billing == BillingModel.CAPACITY_BLOCK:
        if not entry.billing_terms.block_windows:
            return hours, "Capacity Block (no bookable durations listed: billed by the hour)"
        cover = _block_cover(entry.billing_terms, hours / 24.0)
        if len(cover) == 1:
            return cover[0] * 24.0, f"one {cover[0]}-day Capacity Block"
        return sum(cover) * 24.0, f"{len(cover)} Capacity Blocks ({_days_text(cover)} days)"
    return hours, "by the hour"


def _block_note(terms: BillingTerms, days: float) -> list[str]:
    """What the option says when the run is no single sellable Capacity Block: the cover it is costed as, and
    the one longer block it is cheaper than."""
    cover = _block_cover(terms, days)
    most = terms.block_max_days or 0
    if sum(cover) <= days + 1e-9 and (len(cover) == 1 or days > most):
        return []
    sold = ", ".join(f"{w.min_days}-{w.max_days} days" + (f" by {w.step_days}" if w.step_days > 1 else "")
                     for w in terms.block_windows)
    costed = f"one {cover[0]}-day block" if len(cover) == 1 else \
        f"{len(cover)} blocks of {_days_text(cover)} days"
    single = terms.block_days(days)
    cheaper = f", cheaper than one {single}-day block" if single is not None and single > sum(cover) else ""
    return [f"the run's {days:g} days are no single Capacity Block duration sold ({sold}): costed as the cheapest "
            f"cover, {costed}{cheaper}"]


def _warnings(req: PlanRequirements, entry: CatalogOffering, billing: BillingModel, nodes: int, hours: float,
              price: Price, today: date) -> list[str]:
    out: list[str] = []
    least = req.checks.min_cpu_cores_per_gpu
    cores, threads = entry.cores_per_gpu, entry.cpus_per_gpu
    if cores is not None:
        if cores < least:
            out.append(f"{cores:g} CPU cores per GPU, fewer than {least:g}: data loading may starve the GPUs")
    elif threads is not None:
        if threads / 2 < least:
            out.append(f"{threads:g} vCPUs per GPU and the cores are not known: fewer than {least:g} CPU cores per "
                       "GPU if each core runs 2 threads; data loading may starve the GPUs")
    else:
        out.append("CPU cores per GPU not known: check the data-loading headroom yourself")
    if entry.gpu_count > 1 and entry.interconnect == Interconnect.PCIE:
        out.append(f"PCIe-only GPUs (no NVLink/NVSwitch): {entry.gpu_count}-GPU training is bound by PCIe bandwidth")
    if nodes > 1 and entry.fabric not in RDMA_FABRICS:
        out.append(f"no RDMA fabric for a {nodes}-node job: NCCL falls back to TCP sockets")
    if req.checks.min_nvme_tib_per_node:
        nvme_tib = (entry.nvme_count or 0) * (entry.nvme_size_gib or 0) / 1024
        if nvme_tib < req.checks.min_nvme_tib_per_node:
            known = " (count not known)" if entry.nvme_count is None else \
                "" if entry.nvme_size_gib is not None or not entry.nvme_count else " (size not known)"
            out.append(f"{nvme_tib:.1f} TiB local NVMe per node{known}, below {req.checks.min_nvme_tib_per_node:g} TiB")
    terms = entry.billing_terms
    if billing == BillingModel.CAPACITY_BLOCK:
        most = terms.block_max_days
        if most is not None and hours > most * 24.0:
            out.append(f"Capacity Block shorter than the run: a block lasts at most {most} days and the run "
                       f"{hours / 24:g}; each further block is booked separately and may not be available")
        if terms.block_windows:
            out += _block_note(terms, hours / 24.0)
        if terms.block_lead_days:
            out.append(f"Capacity Blocks are booked at most {terms.block_lead_days} days ahead, paid in full "
                       "at purchase")
    if billing == BillingModel.SPOT:
        out.append("spot capacity can be interrupted" + (f" ({terms.spot_interruption})"
                                                         if terms.spot_interruption else "") +
                   ": checkpoint often; the hourly price moves")
    if billing in _TERM_HOURS and hours < _TERM_HOURS[billing]:
        out.append(f"the run lasts {hours / HOURS_PER_MONTH:.1f} months but the reservation bills its whole "
                   f"{_TERM_HOURS[billing] / HOURS_PER_YEAR:g}-year term")
    age = (today - price.as_of).days
    if age > req.checks.max_price_age_days:
        out.append(f"the price is {age} days old ({price.as_of.isoformat()}): "
                   "`metalfleet catalogue refresh` or check the provider's page")
    return out


def recommend(requirements: PlanRequirements, catalog: Catalog | None = None, *, today: date | None = None) -> Plan:
    """Rank every feasible option for ``requirements`` by total cost over the run (cheapest first; ties in
    provider, region, offering, billing order) and list every refusal with its reason."""
    catalog = catalog or load_catalog()
    today = today or date.today()
    req = requirements
    hours = req.duration.total_hours
    months = hours / HOURS_PER_MONTH
    allowed_billing = req.billing or list(BillingModel)
    providers = req.providers or [p for p in catalog.providers() if p != "fake"]
    for i, name in enumerate(req.providers):
        if name not in catalog.providers():
            raise InvalidSpecError(f"providers.{i}: {name!r} has no offering in the catalogue (known: "
                                   f"{', '.join(catalog.providers())})", field=f"providers.{i}", value=name)
    options: list[Option] = []
    rejected: list[Rejected] = []
    used_lists: dict[tuple[str, str, date], str] = {}

    for entry in catalog.entries:
        if entry.provider not in providers:
            continue
        nodes = _nodes_needed(req, entry) if entry.gpu_count > 0 else 0
        why = _hard_filters(req, entry, nodes)
        if why:
            rejected.append(Rejected(entry.provider, entry.name, None, None, why))
            continue
        regions = _regions(req, catalog, entry)
        if not regions:
            listed = catalog.regions(entry.provider, entry.name)
            why = None if listed else catalog.why_unpriced(entry.provider, ANY_REGION, entry.name)
            reason = (f"priced in no region: {why}" if why else "priced in no region" if not listed
                      else "priced for every region: name the region in `regions`" if listed == [ANY_REGION] else
                      f"priced only in {', '.join(listed)}, not in the allowed regions")
            rejected.append(Rejected(entry.provider, entry.name, None, None, reason, unpriced=why is not None))
            continue
        for region in regions:
            prices = {p.billing: p for p in catalog.prices(entry.provider, region, entry.name)}
            if ANY_REGION in catalog.regions(entry.provider, entry.name):
                for p in catalog.prices(entry.provider, ANY_REGION, entry.name):
                    prices.setdefault(p.billing, p)
            usable = [b for b in allowed_billing if b in prices]
            unpriced = [  # sold there, but the catalogue has no price: say so (and why, where it says), never drop it
                Rejected(entry.provider, entry.name, region, billing,
                         catalog.why_unpriced(entry.provider, region, entry.name, billing)
                         or f"no list price for {billing.value} of {entry.name} in {region}", unpriced=True)
                for billing in allowed_billing if billing not in prices and sold(entry, billing, region)]
            if not usable:
                priced = ", ".join(b.value for b in prices) or "none"
                rejected.extend(unpriced or [Rejected(entry.provider, entry.name, region, None,
                                                      f"no price for an allowed billing model (priced: {priced})")])
                continue
            for billing in usable:
                result = _option(req, catalog, entry, region, billing, prices[billing], nodes, hours, months, today)
                if isinstance(result, str):
                    rejected.append(Rejected(entry.provider, entry.name, region, billing, result))
                else:
                    options.append(result)
                    price = prices[billing]
                    used_lists[(entry.provider, price.currency, price.as_of)] = price.source
            rejected.extend(unpriced)
    order = {b: i for i, b in enumerate(BillingModel)}
    options.sort(key=lambda o: (round(o.total, 2), o.provider, o.region, o.offering, order[o.billing]))
    return Plan(req, tuple(options), tuple(rejected), tuple(_assumptions(req, hours, used_lists)))


def unsold(entry: CatalogOffering, billing: BillingModel, region: str) -> str | None:
    """Why ``entry`` cannot be bought under ``billing`` in ``region`` (its terms or its platform refuse it); None
    where it can. A priced option it refuses is no option; an unpriced model it refuses is not listed unpriced."""
    terms = entry.billing_terms
    if terms.prepaid_only and billing not in (BillingModel.MONTHLY, *_TERM_HOURS):
        return "sold prepaid only"
    problem = billing_problem(entry.provider, billing)
    if problem:  # priced, but not orderable so: the emitted spec would be refused
        return problem
    if billing == BillingModel.CAPACITY_BLOCK and terms.block_regions and region not in terms.block_regions:
        return f"Capacity Blocks of {entry.name} are sold only in {', '.join(terms.block_regions)}"
    return None


def sold(entry: CatalogOffering, billing: BillingModel, region: str) -> bool:
    """Whether ``entry`` is sold under ``billing`` in ``region``, as a catalogue without its price should list it
    unpriced: :func:`unsold` says nothing against it, and a Capacity Block has durations it can be booked for."""
    if billing == BillingModel.CAPACITY_BLOCK and not entry.billing_terms.block_windows:
        return False
    return unsold(entry, billing, region) is None


def _option(req: PlanRequirements, catalog: Catalog, entry: CatalogOffering, region: str, billing: BillingModel,
            price: Price, nodes: int, hours: float, months: float, today: date) -> Option | str:
    terms = entry.billing_terms
    refused = unsold(entry, billing, region)
    if refused:
        return refused
    if billing == BillingModel.CAPACITY_BLOCK and terms.block_max_instances and nodes > terms.block_max_instances:
        return f"a Capacity Block holds at most {terms.block_max_instances} instances; the job needs {nodes}"
    rate = req.rate(price.currency)
    if rate is None:
        return f"priced in {price.currency}, and exchange_rates gives no rate for {price.currency}"
    billed = _billed_hours(billing, entry, hours)
    if isinstance(billed, str):
        return billed
    billed_hours, how = billed
    cur = req.currency
    converted = "" if price.currency == cur else f" (1 {price.currency} = {rate:g} {cur})"
    if price.per == "hour":
        detail = f"{nodes} nodes x {price.hourly:g} {price.currency}/h x {billed_hours:g} h ({how}){converted}"
    else:  # a subscription: as its page lists it, per month or year
        periods = billed_hours / PERIOD_HOURS[price.per]
        detail = (f"{nodes} nodes x {price.listed:,.2f} {price.currency}/{price.per} x {periods:g} {price.per}"
                  f"{'s' if periods != 1 else ''} ({how}){converted}")
    lines = [CostLine("compute", nodes * price.hourly * billed_hours * rate, detail)]
    unpriced: list[str] = []
    price_list = catalog.price_list_for(entry.provider, region, entry.name) or \
        catalog.price_list_for(entry.provider, ANY_REGION, entry.name)
    list_rate = req.rate(price_list.currency) if price_list else None

    def extra(what: str, amount: float, unit_price: float | None, unit: str) -> None:
        if amount <= 0:
            return
        if unit_price is None or list_rate is None or price_list is None:
            unpriced.append(what)
            return
        lines.append(CostLine(what, amount * unit_price * list_rate,
                              f"{amount:g} {unit} x {unit_price:g} {price_list.currency}"))

    block = req.storage.block_gib_per_node * nodes * months
    extra("block storage", block, price_list.block_storage_gib_month if price_list else None, "GiB-months")
    extra("shared storage", req.storage.shared_tib * 1024 * months,
          price_list.shared_storage_gib_month if price_list else None, "GiB-months")
    extra("egress", req.egress_tib * 1024, price_list.egress_gib if price_list else None, "GiB")
    warnings = _warnings(req, entry, billing, nodes, hours, price, today)
    if unpriced:
        warnings.append(f"not counted (the catalogue has no {entry.provider} rate): {', '.join(unpriced)}")
    option = Option(entry=entry, region=region, billing=billing, nodes=nodes, price=price, rate=rate,
                    billed_hours=billed_hours, lines=tuple(lines), warnings=tuple(warnings),
                    unpriced=tuple(unpriced), run_hours=hours)
    if not math.isfinite(option.total):  # finite inputs can still multiply past what a float holds
        return "its total cost overflows a number: check exchange_rates, storage and egress_tib"
    if req.budget is not None and option.total > req.budget + _TIE:
        return f"costs {option.total:,.2f} {cur}, over the budget of {req.budget:,.2f} {cur}"
    return option


def _assumptions(req: PlanRequirements, hours: float, lists: Mapping[tuple[str, str, date], str]) -> list[str]:
    size = f"{req.gpus} GPUs" if req.gpus is not None else f"{req.nodes} nodes"
    out = [f"the run: {size} for {req.duration} = {hours:g} hours (a month is {HOURS_PER_MONTH:g} h, a year "
           f"{HOURS_PER_YEAR:g} h); whole nodes only, so a GPU count is rounded up to full nodes",
           f"every figure in {req.currency}"]
    for code, rate in sorted(req.exchange_rates.items()):
        out.append(f"exchange rate given: 1 {code} = {rate:g} {req.currency} (not fetched; as the requirements say)")
    out += [
        "on demand and spot bill by the hour of the run; reserved terms bill the whole term however short the run; "
        "Capacity Blocks bill whole bookable blocks, paid at purchase; prepaid (monthly) bills whole months",
        "list prices per node-hour as the catalogue dates them; no negotiated discount, Savings Plan, tax or support "
        "fee; spot prices move and are the catalogue's snapshot",
        "local NVMe comes with the node; block storage, shared storage and egress use the provider's catalogue "
        "rates per GiB-month / GiB (a rate per GB applied per GiB: 1 GB = 0.931 GiB, so where a provider bills "
        "per GB these lines are an underestimate, by up to 6.9%)",
    ]
    if req.storage.shared_tib or req.storage.block_gib_per_node or req.egress_tib:
        out.append(f"storage and traffic: {req.storage.shared_tib:g} TiB shared, {req.storage.block_gib_per_node:g} "
                   f"GiB block per node, {req.egress_tib:g} TiB egress over the run")
    for (provider, currency, as_of), source in sorted(lists.items()):
        out.append(f"{provider} prices ({currency}) as of {as_of.isoformat()}: {source}")
    return out


# -- the cluster spec -----------------------------------------------------------------------------
def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) \
            else value
    return out


#: The reservation id an emitted Capacity Block spec carries until the block is bought.
BLOCK_PLACEHOLDER = "cr-00000000000000000"


#: The shared file system each provider's plan costs (its price list's ``shared_storage_gib_month``), as a
#: ``storage.warm.kind``: FSx for Lustre, CPFS, SFS Turbo; NFS elsewhere.
SHARED_KINDS = {"aws": "fsx-lustre", "alibaba": "cpfs", "huawei": "sfs-turbo"}
#: The ``storage.warm.source`` an emitted spec carries until the shared file system is made.
SHARED_PLACEHOLDER = "fill-in:the-shared-file-system-mount-source"


def cluster_spec_for(option: Option, req: PlanRequirements) -> dict[str, Any]:
    """The cluster spec (plain data) ordering ``option``: provider, region, offering, count, billing, placement,
    storage tiers, tags, merged with ``cluster.spec``; checked with ``parse_spec`` (errors name the field)."""
    from .registry import find_record
    from .spec import parse_spec

    entry, defaults = option.entry, req.cluster
    record = find_record(option.provider)
    image = defaults.image or (record.default_image if record else None)
    if image is None:
        raise InvalidSpecError(f"cluster.image: the plan chose {option.provider}, which has no default image: give "
                               "cluster.image in the requirements", field="cluster.image", value=None)
    capacity: dict[str, Any] = {"billing": option.billing.value}
    if option.billing == BillingModel.CAPACITY_BLOCK:
        capacity.update(capacity_block=True, reservation_id=BLOCK_PLACEHOLDER)
    storage: dict[str, Any] = {}
    if entry.nvme_count:
        storage["hot"] = {"raid_level": 0, "filesystem": "xfs", "mount": "/scratch"}
    if req.storage.block_gib_per_node:
        storage["data"] = [{"size_gib": max(8, math.ceil(req.storage.block_gib_per_node))}]
    if req.storage.shared_tib:  # the shared file system the plan costed, mounted on every node
        storage["warm"] = {"kind": SHARED_KINDS.get(option.provider, "nfs"), "source": SHARED_PLACEHOLDER,
                           "mount": "/shared"}
    data: dict[str, Any] = {
        "name": defaults.name, "provider": option.provider, "region": option.region, "offering": entry.name,
        "count": option.nodes, "image": image,
        "placement": {"strategy": "cluster" if option.nodes > 1 else "none"},
        "capacity": capacity, "tags": dict(defaults.tags),
    }
    if storage:
        data["storage"] = storage
    zones = entry.zones.get(option.region) or ()
    if zones:  # the first zone the catalogue lists for the region (a cluster placement group needs one zone)
        data["zone"] = zones[0]
    data = _merge(data, defaults.spec)
    parse_spec(data, "the planned cluster spec")
    return data


#: The suppression a planned Huawei spec carries (examples/huawei-bms/cluster.yaml has the same).
HUAWEI_VOLUME_TAGS = ("# metalfleet:suppress MF-TAG-001 reason: BMS creates the EVS volumes with the server and gives "
                      "them no tags of their own (server_tags tag the server only); the server carries the tags")


def spec_yaml(option: Option, req: PlanRequirements, plan_source: str = "") -> str:
    """The emitted cluster spec as YAML, with a header saying where it came from and what to fill in."""
    import yaml

    data = cluster_spec_for(option, req)
    head = [f"# Planned by `metalfleet plan{' ' + plan_source if plan_source else ''}`: {option.label()},",
            f"# {option.gpus} x {option.entry.gpu_model}, {option.total:,.2f} {req.currency} over {req.duration} "
            "(see the plan's assumptions).",
            "# Validate with: metalfleet validate <this file>. Before `pulumi up`, set the network (subnet_id), ssh "
            "and tags your site needs."]
    if option.billing == BillingModel.CAPACITY_BLOCK:
        head.append(f"# Capacity Block: buy the block first, then put its cr-... id in capacity.reservation_id "
                    f"(now the placeholder {BLOCK_PLACEHOLDER}).")
    warm = (data.get("storage") or {}).get("warm") or {}
    if warm.get("source") == SHARED_PLACEHOLDER:
        head += [f"# Shared file system: make the {req.storage.shared_tib:g} TiB {warm.get('kind')} file system "
                 "first, then put its mount source in storage.warm.source (now the placeholder "
                 f"{SHARED_PLACEHOLDER});",
                 "# policy MF-ENC-003 holds its encryption unknown until the policy config lists it under "
                 "known_encrypted (metalfleet validate --policy-config)."]
    body: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    if data.get("provider") == "huawei" and "\ntags:" in "\n" + body:
        # As examples/huawei-bms carries it: the policy would otherwise flag the root volume on every plan.
        head.append("# Huawei BMS: the EVS volumes it creates with the server take no tags of their own, so the "
                    "suppression of MF-TAG-001 above `tags:` says why; the server itself carries the tags.")
        lines = body.splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.startswith("tags:"))
        lines.insert(at, f"{HUAWEI_VOLUME_TAGS}\n")
        body = "".join(lines)
    return "\n".join(head) + "\n" + body
