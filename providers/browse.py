"""Browsing the offering catalogue: one normalised row per offering and region, and what a live answer changes.

``metalfleet offerings`` reads the shipped catalogue by default, so anyone can compare providers before holding
any credentials; ``--live`` asks each provider's driver and :func:`live_differences` says where the answer and the
shipped data disagree. Pure functions over :class:`~metalfleet.providers.catalog.Catalog` (no SDK, no network):
the CLI renders what they return (``stacks/cli/offerings.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from .catalog import Catalog, CatalogOffering
from .checks import RDMA_FABRICS
from .models import BillingModel, Fabric, Interconnect, Offering, Price

__all__ = ["Difference", "OfferingRow", "catalogue_rows", "live_differences", "price_age"]


def price_age(as_of: date, today: date) -> str:
    """``2025-06-01 (18 months old)``: how old a price is, in the unit a buyer reads."""
    days = (today - as_of).days
    if days < 0:
        return f"{as_of.isoformat()} (dated in the future)"
    if days < 62:
        return f"{as_of.isoformat()} ({days} day{'s' if days != 1 else ''} old)"
    return f"{as_of.isoformat()} ({days * 12 // 365} months old)"


@dataclass(frozen=True)
class OfferingRow:
    """One offering in one region, normalised across providers (None: not known from any source)."""

    provider: str
    name: str
    region: str | None
    vendor: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int | None
    interconnect: Interconnect
    interconnect_gbps: float | None
    fabric: Fabric
    fabric_cards: int | None
    fabric_gbps: float | None
    vcpus: int | None
    cpus_per_gpu: float | None
    cores_per_gpu: float | None
    nvme_count: int | None
    nvme_size_gib: int | None
    bare_metal: bool
    orderable: bool
    billing_models: tuple[str, ...]
    prices: tuple[Price, ...]
    constraints: tuple[str, ...]
    memory_gib: int | None = None
    cpu_cores: int | None = None
    #: figure -> why it is not known (its value is None).
    unknown: Mapping[str, str] = field(default_factory=dict)
    #: figure -> why it is given though no provider page states it.
    unverified: Mapping[str, str] = field(default_factory=dict)
    #: What is sold here but not priced, and why: ``monthly, reserved_1y: <why>``.
    unpriced: tuple[str, ...] = ()

    @property
    def rdma(self) -> bool:
        return self.fabric in RDMA_FABRICS

    def to_dict(self, today: date) -> dict[str, Any]:
        return {
            "provider": self.provider, "name": self.name, "region": self.region, "vendor": self.vendor,
            "gpu_model": self.gpu_model, "gpu_count": self.gpu_count, "gpu_memory_gib": self.gpu_memory_gib,
            "interconnect": self.interconnect.value, "interconnect_gbps": self.interconnect_gbps,
            "fabric": self.fabric.value, "fabric_cards": self.fabric_cards, "fabric_gbps": self.fabric_gbps,
            "rdma": self.rdma, "vcpus": self.vcpus, "cpus_per_gpu": self.cpus_per_gpu,
            "cores_per_gpu": self.cores_per_gpu, "nvme_count": self.nvme_count,
            "nvme_size_gib": self.nvme_size_gib, "bare_metal": self.bare_metal, "orderable": self.orderable,
            "memory_gib": self.memory_gib, "cpu_cores": self.cpu_cores,
            "billing_models": list(self.billing_models), "constraints": list(self.constraints),
            "prices": [{"billing": p.billing.value, "hourly": p.hourly, "per": p.per, "listed": p.listed,
                        "currency": p.currency, "as_of": p.as_of.isoformat(), "age_days": (today - p.as_of).days,
                        "source": p.source}
                       for p in self.prices],
            "unknown": dict(self.unknown), "unverified": dict(self.unverified), "unpriced": list(self.unpriced),
        }


def _constraints(entry: CatalogOffering) -> tuple[str, ...]:
    terms, out = entry.billing_terms, []
    if terms.prepaid_only:
        out.append("prepaid only")
    if terms.block_windows:
        windows = ", ".join(f"{w.min_days}-{w.max_days} d" + (f" by {w.step_days} d" if w.step_days > 1 else "")
                            for w in terms.block_windows)
        most = f", at most {terms.block_max_instances} nodes" if terms.block_max_instances else ""
        out.append(f"capacity blocks {windows}{most}")
    if terms.spot_interruption:
        out.append(f"spot: {terms.spot_interruption}")
    return tuple(out)


def catalogue_rows(catalog: Catalog, *, providers: Sequence[str] = (), region: str | None = None,
                   gpu: str | None = None, min_gpus: int = 0, fabric: Fabric | None = None,
                   orderable_only: bool = False) -> list[OfferingRow]:
    """Every catalogue offering as rows: one per region it is priced or listed in, one with region None where it
    has none; with ``region``, only the offerings listed or priced there. Filters as ``metalfleet offerings``'s."""
    rows: list[OfferingRow] = []
    for e in catalog.entries:
        if (providers and e.provider not in providers) or (orderable_only and not e.orderable):
            continue
        if (gpu and e.gpu_model.lower() != gpu.lower()) or e.gpu_count < min_gpus or (fabric and e.fabric != fabric):
            continue
        regions: list[str | None] = list(catalog.regions(e.provider, e.name)) or [None]
        if "*" in regions:
            regions = [region or "*", *(r for r in regions if r != "*")]
        if region is not None:  # only where it is listed or priced (a price for every region counts)
            regions = [r for r in regions if r == region]
        for r in dict.fromkeys(regions):
            prices = catalog.prices(e.provider, r, e.name) if r is not None else ()
            billing = tuple(p.billing.value for p in prices)
            if e.billing_terms.block_windows and BillingModel.CAPACITY_BLOCK.value not in billing:
                billing += (f"{BillingModel.CAPACITY_BLOCK.value} (unpriced)",)
            unpriced = []
            for price_list, u in catalog.unpriced(e.provider, r, e.name):
                models = [b.value for b in u.billing if b.value not in billing] if u.billing else []
                if u.billing and not models:
                    continue  # priced by a newer list
                billing += tuple(f"{m} (unpriced)" for m in models) or ("(unpriced)",)
                unpriced.append(f"{', '.join(models) or 'every billing model'}: {u.why} (price list of "
                                f"{price_list.as_of.isoformat()})")
            rows.append(OfferingRow(
                provider=e.provider, name=e.name, region=r, vendor=e.vendor, gpu_model=e.gpu_model,
                gpu_count=e.gpu_count, gpu_memory_gib=e.gpu_memory_gib, interconnect=e.interconnect,
                interconnect_gbps=e.interconnect_gbps, fabric=e.fabric, fabric_cards=e.fabric_cards,
                fabric_gbps=e.fabric_gbps, vcpus=e.vcpus, cpus_per_gpu=e.cpus_per_gpu,
                cores_per_gpu=e.cores_per_gpu, nvme_count=e.nvme_count,
                nvme_size_gib=e.nvme_size_gib, bare_metal=e.bare_metal, orderable=e.orderable,
                billing_models=billing, prices=prices, constraints=_constraints(e), memory_gib=e.memory_gib,
                cpu_cores=e.cpu_cores, unknown=e.unknown, unverified=e.unverified,
                unpriced=tuple(dict.fromkeys(unpriced))))
    return rows


@dataclass(frozen=True)
class Difference:
    """Where a provider's live answer and the shipped catalogue disagree (``shipped``/``live`` None: absent)."""

    provider: str
    name: str
    region: str
    field: str
    shipped: object
    live: object

    def __str__(self) -> str:
        def show(v: object) -> str:
            return "absent" if v is None else str(v)

        return f"{self.provider} {self.name} ({self.region}) {self.field}: shipped {show(self.shipped)}, " \
               f"live {show(self.live)}"


_COMPARED = ("gpu_model", "gpu_count", "gpu_memory_gib", "interconnect", "interconnect_gbps", "fabric",
             "fabric_cards", "fabric_gbps", "vcpus", "memory_gib", "nvme_count", "nvme_size_gib", "bare_metal")


def live_differences(catalog: Catalog, provider: str, region: str, live: Iterable[Offering]) -> list[Difference]:
    """What ``live`` (a driver's ``offerings()`` in ``region``) says differently from the shipped catalogue:
    each known figure that differs (a figure the catalogue does not know is no difference), each price, each
    shipped orderable offering the answer lacks and each live offering the catalogue does not list."""
    out: list[Difference] = []
    seen: set[str] = set()
    for o in live:
        seen.add(o.name)
        entry = catalog.get(provider, o.name)
        if entry is None:
            out.append(Difference(provider, o.name, region, "offering", None, "offered"))
            continue
        for key in _COMPARED:
            shipped, now = getattr(entry, key), getattr(o, key)
            if shipped is not None and shipped != now:
                out.append(Difference(provider, o.name, region, key, shipped, now))
        cores = o.extra.get("cpu_cores")  # where the driver reports them (AWS: DefaultCores)
        if cores and entry.cpu_cores is not None and cores != entry.cpu_cores:
            out.append(Difference(provider, o.name, region, "cpu_cores", entry.cpu_cores, cores))
        shipped_prices = {p.billing: p.hourly for p in catalog.prices(provider, region, o.name)}
        live_prices = {p.billing: p.hourly for p in o.prices}
        for billing in BillingModel:
            if shipped_prices.get(billing) != live_prices.get(billing):
                out.append(Difference(provider, o.name, region, f"price.{billing.value}",
                                      shipped_prices.get(billing), live_prices.get(billing)))
    for entry in catalog.of(provider, orderable=True):
        if entry.name not in seen:
            out.append(Difference(provider, entry.name, region, "offering", "orderable", None))
    return out
