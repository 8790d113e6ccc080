"""The one offering catalogue: what each GPU node type is and what it costs (``data/catalog.json``, and the
catalogue JSON a third-party provider's record ships, merged after it).

Before it, five tables (the AWS driver's, the fake driver's, the inventory's, the acceptance baselines and
a price file) described the same offerings and could disagree. Now:

* drivers read it: the AWS driver orders the ``orderable`` AWS entries, merges each with the live
  DescribeInstanceTypes answer (live facts win; the catalogue adds what the API does not say, such as
  NVLink bandwidth, and the prices), and the fake driver sells exactly the fake entries;
* inventories take a host's hardware traits from it (:func:`metalfleet.bootstrap.inventory.traits_for`);
* each GPU entry names its acceptance baseline (``baseline``), and a test keeps the two in step.

Standard library only (plus the kernel's models), like :mod:`~metalfleet.providers.checks`: tools that run
on GPU hosts with a bare python3 may read it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

from .errors import InvalidSpecError
from .models import PERIOD_HOURS, BillingModel, Fabric, Interconnect, Offering, Price

__all__ = ["ANY_REGION", "FIGURES", "IDENTITY", "BillingTerms", "BlockWindow", "Catalog", "CatalogOffering",
           "FigureSource", "PriceList", "Unpriced", "Vendor", "catalog_document", "catalog_from_file", "load_catalog",
           "offered_record", "orderable_offerings", "parse_catalog"]

Vendor = Literal["nvidia", "ascend", "none"]
#: The region key of a price list whose prices hold in every region.
ANY_REGION = "*"
_SCHEMA = 1
#: The hardware figures of an entry: each is cited by one of its ``sources`` or is null with an ``unknown`` reason
#: (tests/providers/test_catalog_sources.py holds the shipped catalogue to it).
#: The figures an entry must give (not nullable): uncited, they carry an ``unverified`` reason instead.
IDENTITY = ("gpu_model", "gpu_count", "interconnect", "fabric", "bare_metal")
FIGURES = ("gpu_model", "gpu_count", "gpu_memory_gib", "interconnect", "interconnect_gbps", "fabric", "fabric_cards",
           "fabric_gbps", "vcpus", "cpu_cores", "memory_gib", "nvme_count", "nvme_size_gib", "bare_metal")


@dataclass(frozen=True)
class FigureSource:
    """Where figures of an entry come from: the provider's own page (``url``), the day it was read, the
    figures it gives (``fields``) and what it says, in a few words."""

    url: str
    read: date
    fields: tuple[str, ...]
    says: str
    #: The page's own "last updated" date where it shows one ("" where not).
    page_updated: str = ""
    #: How the page's text was read where not from the page itself (e.g. the provider's published docs source).
    via: str = ""


@dataclass(frozen=True)
class BlockWindow:
    """Capacity Block durations a provider sells: ``min_days`` to ``max_days`` in steps of ``step_days``."""

    min_days: int
    max_days: int
    step_days: int = 1

    def fit(self, days: float) -> int | None:
        """The shortest bookable duration (days) of this window covering ``days``; None when it cannot."""
        if days > self.max_days:
            return None
        whole = max(self.min_days, math.ceil(days - 1e-9))
        steps = -(-(whole - self.min_days) // self.step_days)
        length = self.min_days + steps * self.step_days
        return length if length <= self.max_days else None


@dataclass(frozen=True)
class BillingTerms:
    """Constraints on how an offering can be bought (optional in the data; the defaults constrain nothing).

    ``prepaid_only``: sold only prepaid (subscription, e.g. Alibaba prePaid bare metal): no pay-as-you-go price.
    ``block_windows``/``block_max_instances``/``block_lead_days``: Capacity Block durations, the most instances
    of one block and how far ahead one can be booked. ``spot_interruption``: what a spot interruption looks
    like (notice given), shown with spot prices."""

    prepaid_only: bool = False
    block_windows: tuple[BlockWindow, ...] = ()
    block_max_instances: int | None = None
    block_lead_days: int | None = None
    #: Regions that sell Capacity Blocks of the offering (empty: not listed, any region it is priced in).
    block_regions: tuple[str, ...] = ()
    spot_interruption: str = ""
    notes: str = ""

    def block_days(self, days: float) -> int | None:
        """The shortest bookable Capacity Block covering ``days``; None when no window covers it."""
        fits = [f for f in (w.fit(days) for w in self.block_windows) if f is not None]
        return min(fits) if fits else None

    @property
    def block_max_days(self) -> int | None:
        return max((w.max_days for w in self.block_windows), default=None)


@dataclass(frozen=True)
class CatalogOffering:
    """One node type as the catalogue knows it. ``None``: not known from a source (a driver fills it from its
    provider's API). Units as on :class:`~metalfleet.providers.models.Offering`."""

    provider: str
    name: str
    vendor: Vendor
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int | None
    interconnect: Interconnect
    interconnect_gbps: float | None
    fabric: Fabric
    fabric_cards: int | None
    fabric_gbps: float | None
    vcpus: int | None
    memory_gib: int | None
    nvme_count: int | None
    nvme_size_gib: int | None
    bare_metal: bool
    #: The provider's driver lists and orders it; False: known for inventories and baselines only.
    orderable: bool
    #: The acceptance baseline's key in ``bootstrap/acceptance/baselines.json``; None: no baseline yet.
    baseline: str | None
    source: str
    notes: str = ""
    #: Regions the offering is known to be sold in (besides those its price lists name); () where not listed.
    regions: tuple[str, ...] = ()
    #: Zones known to sell it, as ``region`` -> zones; empty where not listed.
    zones: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    billing_terms: BillingTerms = BillingTerms()
    #: Physical CPU cores (vCPUs count hardware threads); None where no source gives them.
    cpu_cores: int | None = None
    #: Where each figure comes from (the provider's pages, dated).
    sources: tuple[FigureSource, ...] = ()
    #: figure -> why it is not known (the figure is None).
    unknown: Mapping[str, str] = field(default_factory=dict)
    #: figure -> why it is given though no source states it: only for the figures an entry cannot leave out
    #: (:data:`IDENTITY`), e.g. a GPU model the provider's page does not name; shown as unverified.
    unverified: Mapping[str, str] = field(default_factory=dict)

    def cited(self, figure: str) -> list[FigureSource]:
        """The sources that give ``figure``."""
        return [s for s in self.sources if figure in s.fields]

    def figure_gaps(self) -> list[str]:
        """Figures neither cited by a source nor null with a reason: what a catalogue entry must not have."""
        gaps = []
        for figure in FIGURES:
            value = getattr(self, figure)
            if value is None:
                if not self.unknown.get(figure):
                    gaps.append(f"{figure}: null without an `unknown` reason")
            elif not self.cited(figure) and not self.unverified.get(figure):
                gaps.append(f"{figure}: {value!r} cited by no source")
        return gaps

    @property
    def cpus_per_gpu(self) -> float | None:
        """vCPUs per GPU (None where the vCPUs are not known or the node has no GPU)."""
        return self.vcpus / self.gpu_count if self.vcpus and self.gpu_count else None

    @property
    def cores_per_gpu(self) -> float | None:
        """Physical CPU cores per GPU (None where the cores are not known or the node has no GPU)."""
        return self.cpu_cores / self.gpu_count if self.cpu_cores and self.gpu_count else None

    def offering(self, prices: tuple[Price, ...] = ()) -> Offering:
        """The neutral :class:`Offering` from the catalogue's facts alone (unknown figures as 0)."""
        return Offering(
            provider=self.provider, name=self.name, gpu_model=self.gpu_model, gpu_count=self.gpu_count,
            gpu_memory_gib=self.gpu_memory_gib or 0, interconnect=self.interconnect,
            interconnect_gbps=self.interconnect_gbps or 0.0, fabric=self.fabric, fabric_cards=self.fabric_cards or 0,
            fabric_gbps=self.fabric_gbps or 0.0, vcpus=self.vcpus or 0, memory_gib=self.memory_gib or 0,
            nvme_count=self.nvme_count or 0, nvme_size_gib=self.nvme_size_gib or 0, bare_metal=self.bare_metal,
            prices=prices)


@dataclass(frozen=True)
class Unpriced:
    """Offerings a price list knows are sold but cannot price, and why (``regions`` / ``billing`` empty: all)."""

    offering: str
    why: str
    regions: tuple[str, ...] = ()
    billing: tuple[BillingModel, ...] = ()

    def covers(self, region: str, name: str, billing: BillingModel | None) -> bool:
        return name == self.offering and (not self.regions or region in self.regions or ANY_REGION in self.regions) \
            and (billing is None or not self.billing or billing in self.billing)


@dataclass(frozen=True)
class PriceList:
    """One provider's dated, sourced prices: region (or ``*``) -> offering -> billing model -> hourly."""

    provider: str
    currency: str
    as_of: date
    source: str
    notes: str
    regions: Mapping[str, Mapping[str, Mapping[BillingModel, float]]] = field(default_factory=dict)
    #: Optional rates for the cost of ownership (None: not known): block storage and shared (parallel file
    #: system) storage per GiB-month, data egress to the internet per GiB; in ``currency``.
    block_storage_gib_month: float | None = None
    shared_storage_gib_month: float | None = None
    egress_gib: float | None = None
    #: (region, offering, billing) -> the period a price is listed per where it is not an hour (month, year).
    listed_per: Mapping[tuple[str, str, BillingModel], str] = field(default_factory=dict)
    #: What is sold but not priced here, with why.
    unpriced: tuple[Unpriced, ...] = ()
    #: What the refresh that wrote this list changed (region, offering, billing, old, new per hour); () otherwise.
    changed: tuple[Mapping[str, Any], ...] = ()

    def prices(self, region: str, offering: str) -> tuple[Price, ...]:
        """The prices of ``offering`` in ``region``, in BillingModel order; () where none are listed.
        A regional price names its region in ``source``."""
        if offering in self.regions.get(region, {}):
            key, source = region, f"{self.source} (region {region})"
        elif offering in self.regions.get(ANY_REGION, {}):
            key, source = ANY_REGION, self.source
        else:
            return ()
        entry = self.regions[key][offering]
        return tuple(Price(b, entry[b], self.currency, self.as_of, source,
                           self.listed_per.get((key, offering, b), "hour")) for b in BillingModel if b in entry)


@dataclass(frozen=True)
class Catalog:
    """Every known offering (in the data file's order) and every price list."""

    entries: tuple[CatalogOffering, ...]
    price_lists: tuple[PriceList, ...] = ()

    def get(self, provider: str | None, name: str | None) -> CatalogOffering | None:
        return next((e for e in self.entries if e.provider == provider and e.name == name), None)

    def require(self, provider: str, name: str, *, field: str = "offering") -> CatalogOffering:
        """The entry, or an InvalidSpecError naming ``field`` and the offerings known for ``provider``."""
        entry = self.get(provider, name)
        if entry is None:
            known = ", ".join(e.name for e in self.of(provider)) or "none"
            raise InvalidSpecError(f"offering {name!r} of provider {provider!r} is not in metalfleet's offering "
                                   f"catalogue (known for {provider}: {known})", field=field, value=name,
                                   provider=provider)
        return entry

    def of(self, provider: str, *, orderable: bool | None = None) -> list[CatalogOffering]:
        """The entries of ``provider`` (only the orderable ones, or only the others, when asked)."""
        return [e for e in self.entries if e.provider == provider and (orderable is None or e.orderable == orderable)]

    def prices(self, provider: str, region: str, name: str) -> tuple[Price, ...]:
        """Every billing model's price, in BillingModel order: for each model the first price list that
        prices it (a refreshed list goes before the one it updates, which keeps what the refresh did not see)."""
        found: dict[BillingModel, Price] = {}
        for price_list in self.price_lists:
            if price_list.provider == provider:
                for price in price_list.prices(region, name):
                    found.setdefault(price.billing, price)
        return tuple(found[b] for b in BillingModel if b in found)

    def why_unpriced(self, provider: str, region: str, name: str, billing: BillingModel | None = None) -> str | None:
        """Why no price of ``name`` in ``region`` (under ``billing``) is listed, where a price list of ``provider``
        says (the list and its date named); None where none does."""
        return next((f"{u.why} ({pl.provider} price list of {pl.as_of.isoformat()})"
                     for pl, u in self.unpriced(provider, region, name) if u.covers(region, name, billing)), None)

    def unpriced(self, provider: str, region: str | None, name: str) -> list[tuple[PriceList, Unpriced]]:
        """Every record of ``provider``'s price lists saying ``name`` is sold but unpriced in ``region`` (None:
        in any region)."""
        return [(pl, u) for pl in self.price_lists if pl.provider == provider for u in pl.unpriced
                if u.offering == name and (region is None or u.covers(region, name, None))]

    def regions(self, provider: str, name: str) -> list[str]:
        """Regions an offering is listed in: its own ``regions`` then every region a price list prices it in
        (``*``: every region), in first-seen order."""
        entry = self.get(provider, name)
        out = list(entry.regions) if entry else []
        for price_list in self.price_lists:
            if price_list.provider == provider:
                out.extend(r for r, table in price_list.regions.items() if name in table and r not in out)
        return out

    def price_list_for(self, provider: str, region: str, name: str | None = None) -> PriceList | None:
        """The first price list of ``provider`` covering ``region`` (and ``name``, when given)."""
        for price_list in self.price_lists:
            if price_list.provider != provider:
                continue
            for key in (region, ANY_REGION):
                if key in price_list.regions and (name is None or name in price_list.regions[key]):
                    return price_list
        return None

    def providers(self) -> list[str]:
        """Every provider with an entry, in the data file's order."""
        return list(dict.fromkeys(e.provider for e in self.entries))

    def offerings(self, provider: str, region: str) -> list[Offering]:
        """The orderable offerings of ``provider`` from the catalogue's facts and prices alone."""
        return [e.offering(self.prices(provider, region, e.name)) for e in self.of(provider, orderable=True)]


# -- parsing --------------------------------------------------------------------------------------------
_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {  # name -> (JSON type, may be null)
    "provider": (str, False), "name": (str, False), "vendor": (str, False), "gpu_model": (str, False),
    "gpu_count": (int, False), "gpu_memory_gib": (int, True), "interconnect": (str, False),
    "interconnect_gbps": ((int, float), True), "fabric": (str, False), "fabric_cards": (int, True),
    "fabric_gbps": ((int, float), True), "vcpus": (int, True), "memory_gib": (int, True), "nvme_count": (int, True),
    "nvme_size_gib": (int, True), "bare_metal": (bool, False), "orderable": (bool, False), "baseline": (str, True),
    "source": (str, False), "notes": (str, True), "regions": (list, False), "zones": (dict, False),
    "billing_terms": (dict, False), "cpu_cores": (int, True), "sources": (list, False), "unknown": (dict, False),
    "unverified": (dict, False),
}
_OPTIONAL = {"notes", "regions", "zones", "billing_terms", "cpu_cores", "sources", "unknown", "unverified"}
_TERMS = {"prepaid_only": bool, "capacity_block": dict, "spot_interruption": str, "notes": str}
_BLOCK = {"windows": list, "max_instances": int, "lead_days": int, "regions": list}


def _bad(source: str, where: str, value: object, why: str) -> InvalidSpecError:
    from .textfile import shorten

    shown = "{...}" if isinstance(value, dict) else "[...]" if isinstance(value, list) else shorten(value)
    return InvalidSpecError(f"offering catalogue {source}: {where}: {why} (got {shown})", field=where, value=value)


def _mapping(raw: object, where: str, source: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _bad(source, where, raw, "must be a mapping")
    return raw


def _list(raw: object, where: str, source: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _bad(source, where, raw, "must be a list")
    return raw


#: Fields that count or measure something: a negative value is no offering.
_NON_NEGATIVE = {"gpu_count", "gpu_memory_gib", "interconnect_gbps", "fabric_cards", "fabric_gbps", "vcpus",
                 "memory_gib", "nvme_count", "nvme_size_gib", "cpu_cores"}


def _entry(raw: object, where: str, source: str) -> CatalogOffering:
    if not isinstance(raw, dict):
        raise _bad(source, where, raw, "must be a mapping")
    for key in raw:
        if key not in _FIELDS:
            raise _bad(source, f"{where}.{key}", raw[key], "unknown key")
    values: dict[str, Any] = {}
    for key, (kind, nullable) in _FIELDS.items():
        if key not in raw:
            if key in _OPTIONAL:
                continue
            raise _bad(source, f"{where}.{key}", None, "missing")
        value = raw[key]
        if value is None and nullable:
            values[key] = None
            continue
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise _bad(source, f"{where}.{key}", value, f"expected {getattr(kind, '__name__', 'a number')}")
        if key in _NON_NEGATIVE and isinstance(value, int | float) and value < 0:
            raise _bad(source, f"{where}.{key}", value, "must be >= 0")
        values[key] = value
    if values["vendor"] not in get_args(Vendor):
        raise _bad(source, f"{where}.vendor", values["vendor"], f"not one of {', '.join(get_args(Vendor))}")
    try:
        values["interconnect"] = Interconnect(values["interconnect"])
    except ValueError:
        raise _bad(source, f"{where}.interconnect", values["interconnect"],
                   f"not one of {', '.join(Interconnect)}") from None
    try:
        values["fabric"] = Fabric(values["fabric"])
    except ValueError:
        raise _bad(source, f"{where}.fabric", values["fabric"], f"not one of {', '.join(Fabric)}") from None
    for key in ("interconnect_gbps", "fabric_gbps"):
        if values[key] is not None:
            values[key] = float(values[key])
    values["notes"] = values.get("notes") or ""
    values["regions"] = tuple(_strings(values.get("regions") or [], f"{where}.regions", source))
    values["zones"] = MappingProxyType({
        str(r): tuple(_strings(z, f"{where}.zones.{r}", source)) for r, z in (values.get("zones") or {}).items()})
    values["billing_terms"] = _terms(values.get("billing_terms") or {}, f"{where}.billing_terms", source)
    values["sources"] = tuple(_figure_source(s, f"{where}.sources.{i}", source)
                              for i, s in enumerate(values.get("sources") or []))
    values["unknown"] = _reasons(values.get("unknown") or {}, FIGURES, f"not a figure ({', '.join(FIGURES)})",
                                 "expected the reason the figure is not known", f"{where}.unknown", source)
    for figure, why in values["unknown"].items():
        if values.get(figure) is not None:
            raise _bad(source, f"{where}.unknown.{figure}", why,
                       f"{figure} is given ({values[figure]!r}): a known figure has no unknown reason")
    values["unverified"] = _reasons(values.get("unverified") or {}, IDENTITY,
                                    f"only {', '.join(IDENTITY)} may be unverified; an unknown other figure is null "
                                    "with an `unknown` reason", "expected why the figure is given without a source",
                                    f"{where}.unverified", source)
    return CatalogOffering(**values)


def _reasons(raw: dict[str, Any], figures: tuple[str, ...], not_one: str, no_reason: str, where: str,
             source: str) -> Mapping[str, str]:
    """``unknown`` / ``unverified``: figure -> a reason, each figure one of ``figures``, each reason words."""
    for figure, why in raw.items():
        if figure not in figures:
            raise _bad(source, f"{where}.{figure}", figure, not_one)
        if not isinstance(why, str) or not why.strip():
            raise _bad(source, f"{where}.{figure}", why, no_reason)
    return MappingProxyType(dict(raw))


def _figure_source(raw: object, where: str, source: str) -> FigureSource:
    if not isinstance(raw, dict):
        raise _bad(source, where, raw, "must be a mapping of url, read, fields, says")
    _typed(raw, {"url": str, "read": str, "fields": list, "says": str, "page_updated": str, "via": str}, where,
           source)
    for key in ("url", "read", "fields", "says"):
        if not raw.get(key):
            raise _bad(source, f"{where}.{key}", raw.get(key), "missing")
    if not str(raw["url"]).startswith("https://"):
        raise _bad(source, f"{where}.url", raw["url"], "expected an https:// address")
    try:
        read = date.fromisoformat(str(raw["read"]))
    except ValueError:
        raise _bad(source, f"{where}.read", raw["read"], "not a date (YYYY-MM-DD)") from None
    fields = _strings(raw["fields"], f"{where}.fields", source)
    for figure in fields:
        if figure not in FIGURES:
            raise _bad(source, f"{where}.fields", figure, f"not a figure ({', '.join(FIGURES)})")
    return FigureSource(url=str(raw["url"]), read=read, fields=tuple(fields), says=str(raw["says"]),
                        page_updated=str(raw.get("page_updated") or ""), via=str(raw.get("via") or ""))


def _strings(raw: object, where: str, source: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise _bad(source, where, raw, "expected a list of names")
    return list(raw)


def _typed(raw: dict[str, Any], spec: Mapping[str, type], where: str, source: str) -> None:
    for key, value in raw.items():
        kind = spec.get(key)
        if kind is None:
            raise _bad(source, f"{where}.{key}", value, f"unknown key (known: {', '.join(spec)})")
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise _bad(source, f"{where}.{key}", value, f"expected {kind.__name__}")
        if kind is int and isinstance(value, int) and value < 0:
            raise _bad(source, f"{where}.{key}", value, "must be >= 0")


def _terms(raw: dict[str, Any], where: str, source: str) -> BillingTerms:
    _typed(raw, _TERMS, where, source)
    block: dict[str, Any] = raw.get("capacity_block") or {}
    _typed(block, _BLOCK, f"{where}.capacity_block", source)
    windows = []
    for i, w in enumerate(block.get("windows") or []):
        at = f"{where}.capacity_block.windows.{i}"
        if not isinstance(w, dict):
            raise _bad(source, at, w, "must be a mapping of min_days, max_days, step_days")
        _typed(w, {"min_days": int, "max_days": int, "step_days": int}, at, source)
        window = BlockWindow(int(w.get("min_days", 1)), int(w.get("max_days", 0)), int(w.get("step_days", 1)))
        if not 1 <= window.min_days <= window.max_days or window.step_days < 1:
            raise _bad(source, at, w, "needs 1 <= min_days <= max_days and step_days >= 1")
        windows.append(window)
    return BillingTerms(prepaid_only=bool(raw.get("prepaid_only", False)), block_windows=tuple(windows),
                        block_max_instances=block.get("max_instances"), block_lead_days=block.get("lead_days"),
                        block_regions=tuple(_strings(block["regions"], f"{where}.capacity_block.regions", source))
                        if block.get("regions") else (),
                        spot_interruption=str(raw.get("spot_interruption", "")), notes=str(raw.get("notes", "")))


def _price_list(raw: object, where: str, source: str) -> PriceList:
    if not isinstance(raw, dict):
        raise _bad(source, where, raw, "must be a mapping")
    for key in ("provider", "currency", "as_of", "source", "regions"):
        if key not in raw:
            raise _bad(source, f"{where}.{key}", None, "missing")
    for key in ("provider", "currency", "as_of", "source"):
        if not isinstance(raw[key], str) or not raw[key]:
            raise _bad(source, f"{where}.{key}", raw[key], "expected a non-empty string")
    if raw.get("notes") is not None and not isinstance(raw["notes"], str):
        raise _bad(source, f"{where}.notes", raw["notes"], "expected str")
    try:
        as_of = date.fromisoformat(str(raw["as_of"]))
    except ValueError:
        raise _bad(source, f"{where}.as_of", raw["as_of"], "not a date (YYYY-MM-DD)") from None
    regions: dict[str, Mapping[str, Mapping[BillingModel, float]]] = {}
    listed_per: dict[tuple[str, str, BillingModel], str] = {}
    for region, table in _mapping(raw["regions"], f"{where}.regions", source).items():
        offerings: dict[str, Mapping[BillingModel, float]] = {}
        for name, rates in _mapping(table, f"{where}.regions.{region}", source).items():
            at = f"{where}.regions.{region}.{name}"
            parsed: dict[BillingModel, float] = {}
            for billing, value in _mapping(rates, at, source).items():
                try:
                    model = BillingModel(billing)
                except ValueError:
                    raise _bad(source, f"{at}.{billing}", billing,
                               f"not a billing model ({', '.join(BillingModel)})") from None
                per, amount = _rate(value, f"{at}.{billing}", source)
                parsed[model] = amount / PERIOD_HOURS[per]
                if per != "hour":
                    listed_per[(str(region), str(name), model)] = per
            offerings[str(name)] = MappingProxyType(parsed)
        regions[str(region)] = MappingProxyType(offerings)
    unpriced = tuple(_unpriced(u, f"{where}.unpriced.{i}", source)
                     for i, u in enumerate(_list(raw.get("unpriced"), f"{where}.unpriced", source)))
    changed = tuple(MappingProxyType(_mapping(c, f"{where}.changed.{i}", source))
                    for i, c in enumerate(_list(raw.get("changed"), f"{where}.changed", source)))
    extras: dict[str, float | None] = {}
    for key in ("block_storage_gib_month", "shared_storage_gib_month", "egress_gib"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value < 0):
            raise _bad(source, f"{where}.{key}", value, "expected a price, >= 0")
        extras[key] = None if value is None else float(value)
    for key in raw:
        if key not in _PRICE_LIST_KEYS:
            raise _bad(source, f"{where}.{key}", raw[key], f"unknown key (known: {', '.join(_PRICE_LIST_KEYS)})")
    return PriceList(provider=str(raw["provider"]), currency=str(raw["currency"]), as_of=as_of,
                     source=str(raw["source"]), notes=str(raw.get("notes") or ""), regions=MappingProxyType(regions),
                     listed_per=MappingProxyType(listed_per), unpriced=unpriced, changed=changed, **extras)


_PRICE_LIST_KEYS = ("provider", "currency", "as_of", "source", "notes", "regions", "block_storage_gib_month",
                    "shared_storage_gib_month", "egress_gib", "unpriced", "changed")


def _rate(value: object, where: str, source: str) -> tuple[str, float]:
    """(period, amount) of one price: a number is per hour; ``{"month": 98000}`` / ``{"year": ...}`` is a
    subscription's price as its page lists it."""
    if isinstance(value, dict):
        if len(value) != 1 or next(iter(value)) not in PERIOD_HOURS:
            raise _bad(source, where, value, f"expected a price per hour, or one of {{{', '.join(PERIOD_HOURS)}: "
                                             "price}")
        per, amount = next(iter(value.items()))
    else:
        per, amount = "hour", value
    if not isinstance(amount, int | float) or isinstance(amount, bool) or amount < 0:
        raise _bad(source, where, amount, f"expected a price per {per}, >= 0")
    return str(per), float(amount)


def _unpriced(raw: object, where: str, source: str) -> Unpriced:
    if not isinstance(raw, dict):
        raise _bad(source, where, raw, "must be a mapping of offering, why, regions, billing")
    _typed(raw, {"offering": str, "why": str, "regions": list, "billing": list}, where, source)
    for key in ("offering", "why"):
        if not raw.get(key):
            raise _bad(source, f"{where}.{key}", raw.get(key), "missing")
    billing = []
    for value in _strings(raw.get("billing") or [], f"{where}.billing", source) if raw.get("billing") else []:
        try:
            billing.append(BillingModel(value))
        except ValueError:
            raise _bad(source, f"{where}.billing", value, f"not a billing model ({', '.join(BillingModel)})") from None
    regions = _strings(raw["regions"], f"{where}.regions", source) if raw.get("regions") else []
    return Unpriced(offering=str(raw["offering"]), why=str(raw["why"]), regions=tuple(regions),
                    billing=tuple(billing))


def parse_catalog(doc: object, source: str = "<catalog>") -> Catalog:
    """A :class:`Catalog` from the data file's JSON document; InvalidSpecError naming the field at fault
    (``offerings.3.fabric``), a repeated offering, or a price for an offering the catalogue does not list."""
    if not isinstance(doc, dict):
        raise _bad(source, "(top level)", doc, "must be a mapping")
    if doc.get("schema") != _SCHEMA or isinstance(doc.get("schema"), bool):
        raise _bad(source, "schema", doc.get("schema"), f"this metalfleet reads schema {_SCHEMA}")
    entries = tuple(_entry(raw, f"offerings.{i}", source)
                    for i, raw in enumerate(_list(doc.get("offerings"), "offerings", source)))
    seen: set[tuple[str, str]] = set()
    for i, e in enumerate(entries):
        if (e.provider, e.name) in seen:
            raise _bad(source, f"offerings.{i}.name", e.name, f"{e.provider} {e.name} is listed twice")
        seen.add((e.provider, e.name))
    lists = tuple(_price_list(raw, f"price_lists.{i}", source)
                  for i, raw in enumerate(_list(doc.get("price_lists"), "price_lists", source)))
    for i, price_list in enumerate(lists):
        for region, table in price_list.regions.items():
            for name in table:
                if (price_list.provider, name) not in seen:
                    raise _bad(source, f"price_lists.{i}.regions.{region}.{name}", name,
                               f"a price for an offering the catalogue does not list for {price_list.provider}")
        for j, u in enumerate(price_list.unpriced):
            if (price_list.provider, u.offering) not in seen:
                raise _bad(source, f"price_lists.{i}.unpriced.{j}.offering", u.offering,
                           f"an offering the catalogue does not list for {price_list.provider}")
    return Catalog(entries=entries, price_lists=lists)


def catalog_from_file(path: str, what: str = "offering catalogue") -> Catalog:
    """A catalogue from a JSON file (such as one ``metalfleet catalogue refresh`` wrote): read as every user
    file is (:func:`~metalfleet.providers.textfile.read_json_file`: a size limit, UTF-8, bounded nesting), so
    bad bytes or bad JSON are a one-line BadFileError naming the file; a bad value names its field."""
    from .textfile import read_json_file

    return parse_catalog(read_json_file(path, what), path)


#: The catalogue shipped with metalfleet (its built-in providers' records name it).
SHIPPED = "metalfleet.providers:data/catalog.json"


def _read(resource: str) -> dict[str, Any]:
    package, _, path = resource.partition(":")
    return cast(dict[str, Any], json.loads(resources.files(package).joinpath(path).read_text(encoding="utf-8")))


def _resources() -> list[str]:
    """The shipped catalogue, then each other catalogue a registered provider record ships (once each; metalfleet
    not installed, as on a GPU host's bare python3, registers none: the shipped one alone)."""
    from .registry import provider_records

    return list(dict.fromkeys([SHIPPED, *(r.catalogue for r in provider_records() if r.catalogue)]))


def catalog_document() -> dict[str, Any]:
    """The catalogue's JSON document (a fresh copy: callers may change it): the shipped one, with the offerings and
    price lists of every third-party provider's catalogue after its own."""
    first, *others = _resources()
    doc = _read(first)
    for resource in others:
        extra = _read(resource)
        doc["offerings"] = [*doc.get("offerings", []), *extra.get("offerings", [])]
        doc["price_lists"] = [*doc.get("price_lists", []), *extra.get("price_lists", [])]
    return doc


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalogue (:func:`catalog_document`; read once per process)."""
    resources_read = _resources()
    where = "providers/data/catalog.json" if len(resources_read) == 1 else " + ".join(resources_read)
    return parse_catalog(cast(object, catalog_document()), where)


def offered_record(records: Mapping[str, dict[str, Any]], offering: str, region: str,
                   provider: str) -> dict[str, Any]:
    """A driver's API record of ``offering`` (its instance types by name, ``records``); InvalidSpecError
    (``offering``) where the region does not sell it."""
    info = records.get(offering)
    if info is None:
        raise InvalidSpecError(f"{offering} is not offered in {region}", field="offering", value=offering,
                               provider=provider)
    return info


def orderable_offerings(catalog: Catalog, provider: str, records: Mapping[str, dict[str, Any]], region: str,
                        make: Callable[[Mapping[str, Any], CatalogOffering, Catalog, str], Offering]) -> list[Offering]:
    """The catalogue's orderable offerings of ``provider`` that its API lists (``records``), in the catalogue's
    order, each made by the driver's ``make(record, entry, catalog, region)``."""
    return [make(records[e.name], e, catalog, region)
            for e in catalog.of(provider, orderable=True) if e.name in records]
