"""The one offering catalogue: what each GPU node type is and what it costs (``data/catalog.json``).

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

from .errors import InvalidSpecError
from .models import BillingModel, Fabric, Interconnect, Offering, Price

__all__ = ["ANY_REGION", "Catalog", "CatalogOffering", "PriceList", "Vendor", "load_catalog", "parse_catalog"]

Vendor = Literal["nvidia", "ascend", "none"]
#: The region key of a price list whose prices hold in every region.
ANY_REGION = "*"
_SCHEMA = 1


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
    fabric_cards: int
    fabric_gbps: float | None
    vcpus: int | None
    memory_gib: int | None
    nvme_count: int
    nvme_size_gib: int | None
    bare_metal: bool
    #: The provider's driver lists and orders it; False: known for inventories and baselines only.
    orderable: bool
    #: The acceptance baseline's key in ``bootstrap/acceptance/baselines.json``; None: no baseline yet.
    baseline: str | None
    source: str
    notes: str = ""

    def offering(self, prices: tuple[Price, ...] = ()) -> Offering:
        """The neutral :class:`Offering` from the catalogue's facts alone (unknown figures as 0)."""
        return Offering(
            provider=self.provider, name=self.name, gpu_model=self.gpu_model, gpu_count=self.gpu_count,
            gpu_memory_gib=self.gpu_memory_gib or 0, interconnect=self.interconnect,
            interconnect_gbps=self.interconnect_gbps or 0.0, fabric=self.fabric, fabric_cards=self.fabric_cards,
            fabric_gbps=self.fabric_gbps or 0.0, vcpus=self.vcpus or 0, memory_gib=self.memory_gib or 0,
            nvme_count=self.nvme_count, nvme_size_gib=self.nvme_size_gib or 0, bare_metal=self.bare_metal,
            prices=prices)


@dataclass(frozen=True)
class PriceList:
    """One provider's dated, sourced prices: region (or ``*``) -> offering -> billing model -> hourly."""

    provider: str
    currency: str
    as_of: date
    source: str
    notes: str
    regions: Mapping[str, Mapping[str, Mapping[BillingModel, float]]] = field(default_factory=dict)

    def prices(self, region: str, offering: str) -> tuple[Price, ...]:
        """The prices of ``offering`` in ``region``, in BillingModel order; () where none are listed.
        A regional price names its region in ``source``."""
        if offering in self.regions.get(region, {}):
            entry, source = self.regions[region][offering], f"{self.source} (region {region})"
        elif offering in self.regions.get(ANY_REGION, {}):
            entry, source = self.regions[ANY_REGION][offering], self.source
        else:
            return ()
        return tuple(Price(b, entry[b], self.currency, self.as_of, source) for b in BillingModel if b in entry)


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
        for price_list in self.price_lists:
            if price_list.provider == provider:
                found = price_list.prices(region, name)
                if found:
                    return found
        return ()

    def offerings(self, provider: str, region: str) -> list[Offering]:
        """The orderable offerings of ``provider`` from the catalogue's facts and prices alone."""
        return [e.offering(self.prices(provider, region, e.name)) for e in self.of(provider, orderable=True)]


# -- parsing --------------------------------------------------------------------------------------------
_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {  # name -> (JSON type, may be null)
    "provider": (str, False), "name": (str, False), "vendor": (str, False), "gpu_model": (str, False),
    "gpu_count": (int, False), "gpu_memory_gib": (int, True), "interconnect": (str, False),
    "interconnect_gbps": ((int, float), True), "fabric": (str, False), "fabric_cards": (int, False),
    "fabric_gbps": ((int, float), True), "vcpus": (int, True), "memory_gib": (int, True), "nvme_count": (int, False),
    "nvme_size_gib": (int, True), "bare_metal": (bool, False), "orderable": (bool, False), "baseline": (str, True),
    "source": (str, False), "notes": (str, True),
}
_OPTIONAL = {"notes"}


def _bad(source: str, where: str, value: object, why: str) -> InvalidSpecError:
    return InvalidSpecError(f"offering catalogue {source}: {where}: {why}", field=where, value=value)


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
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _bad(source, f"{where}.{key}", value, f"expected {getattr(kind, '__name__', 'a number')}")
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
    return CatalogOffering(**values)


def _price_list(raw: object, where: str, source: str) -> PriceList:
    if not isinstance(raw, dict):
        raise _bad(source, where, raw, "must be a mapping")
    for key in ("provider", "currency", "as_of", "source", "regions"):
        if key not in raw:
            raise _bad(source, f"{where}.{key}", None, "missing")
    try:
        as_of = date.fromisoformat(str(raw["as_of"]))
    except ValueError:
        raise _bad(source, f"{where}.as_of", raw["as_of"], "not a date (YYYY-MM-DD)") from None
    regions: dict[str, Mapping[str, Mapping[BillingModel, float]]] = {}
    for region, table in dict(raw["regions"]).items():
        offerings: dict[str, Mapping[BillingModel, float]] = {}
        for name, rates in dict(table).items():
            at = f"{where}.regions.{region}.{name}"
            parsed: dict[BillingModel, float] = {}
            for billing, hourly in dict(rates).items():
                try:
                    model = BillingModel(billing)
                except ValueError:
                    raise _bad(source, f"{at}.{billing}", billing,
                               f"not a billing model ({', '.join(BillingModel)})") from None
                if not isinstance(hourly, int | float) or isinstance(hourly, bool) or hourly < 0:
                    raise _bad(source, f"{at}.{billing}", hourly, "expected a price per hour, >= 0")
                parsed[model] = float(hourly)
            offerings[str(name)] = MappingProxyType(parsed)
        regions[str(region)] = MappingProxyType(offerings)
    return PriceList(provider=str(raw["provider"]), currency=str(raw["currency"]), as_of=as_of,
                     source=str(raw["source"]), notes=str(raw.get("notes") or ""), regions=MappingProxyType(regions))


def parse_catalog(doc: object, source: str = "<catalog>") -> Catalog:
    """A :class:`Catalog` from the data file's JSON document; InvalidSpecError naming the field at fault
    (``offerings.3.fabric``), a repeated offering, or a price for an offering the catalogue does not list."""
    if not isinstance(doc, dict):
        raise _bad(source, "(top level)", doc, "must be a mapping")
    if doc.get("schema") != _SCHEMA:
        raise _bad(source, "schema", doc.get("schema"), f"this metalfleet reads schema {_SCHEMA}")
    entries = tuple(_entry(raw, f"offerings.{i}", source) for i, raw in enumerate(doc.get("offerings") or []))
    seen: set[tuple[str, str]] = set()
    for i, e in enumerate(entries):
        if (e.provider, e.name) in seen:
            raise _bad(source, f"offerings.{i}.name", e.name, f"{e.provider} {e.name} is listed twice")
        seen.add((e.provider, e.name))
    lists = tuple(_price_list(raw, f"price_lists.{i}", source) for i, raw in enumerate(doc.get("price_lists") or []))
    for i, price_list in enumerate(lists):
        for region, table in price_list.regions.items():
            for name in table:
                if (price_list.provider, name) not in seen:
                    raise _bad(source, f"price_lists.{i}.regions.{region}.{name}", name,
                               f"a price for an offering the catalogue does not list for {price_list.provider}")
    return Catalog(entries=entries, price_lists=lists)


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalogue shipped with metalfleet (read once per process)."""
    text = resources.files("metalfleet.providers").joinpath("data/catalog.json").read_text(encoding="utf-8")
    return parse_catalog(cast(object, json.loads(text)), "providers/data/catalog.json")
