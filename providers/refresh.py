"""``metalfleet catalogue refresh``: new dated prices from each provider's pricing API, never a dropped offering.

A refresh adds one price list per provider at the front of the catalogue's ``price_lists`` (dated today, its
source naming the API), so :meth:`Catalog.prices` takes the fresh figure for each billing model the API priced
and keeps the older, older-dated one for everything it did not (AWS's Price List has no Capacity Block rates).
Offerings are never removed or changed; an offering the API did not price is reported, with the price it keeps.
A refresh list is dropped only when a newer refresh prices everything it priced. The result is checked before
it is written: every offering still listed, every price point still priced.

Price sources are per provider (:data:`PRICE_SOURCES`, from each provider record's ``price_source``): AWS's is
the Price List query API (USD), Alibaba's ECS DescribePrice (CNY: pay-as-you-go and spot by the hour, a month, one
and three years of subscription), Huawei's the BSS price inquiry (CNY: on demand, and a month or a year of the
yearly/monthly servers BMS creates). The written list says what it changed (``changed``: region, offering,
billing, old and new per hour), so the file itself records the refresh, not only its console report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from .catalog import ANY_REGION, Catalog, catalog_document, parse_catalog
from .errors import InvalidSpecError, MetalfleetError
from .models import BillingModel
from .record import PriceFetch, PriceSource, load_target

__all__ = ["PRICE_SOURCES", "PriceChange", "RefreshReport", "refresh_catalogue", "refresh_document"]

#: Marks a price list a refresh wrote (its ``notes`` start with it).
REFRESH_MARK = "metalfleet catalogue refresh"


class _PriceSources(Mapping[str, Callable[[], PriceSource]]):
    """provider -> its pricing API, read from the registered provider records (a record with no price source has
    none); each value builds the provider's :class:`PriceSource` when called (importing its pricing module)."""

    def _names(self) -> list[str]:
        from .registry import provider_records

        return [r.name for r in provider_records() if r.price_source is not None]

    def __getitem__(self, name: str) -> Callable[[], PriceSource]:
        from .registry import find_record

        record = find_record(name)
        source = record.price_source if record else None
        if source is None:
            raise KeyError(name)
        return lambda: load_target(source)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


#: provider -> its pricing API.
PRICE_SOURCES: Mapping[str, Callable[[], PriceSource]] = _PriceSources()


@dataclass(frozen=True)
class PriceChange:
    provider: str
    region: str
    name: str
    billing: BillingModel
    old: float | None
    new: float


@dataclass
class RefreshReport:
    """What a refresh changed, confirmed, and could not price (with what the catalogue keeps for it)."""

    out: str
    as_of: date
    changes: list[PriceChange] = field(default_factory=list)
    unchanged: int = 0
    kept: list[str] = field(default_factory=list)
    unpriced: list[str] = field(default_factory=list)
    dropped_lists: int = 0

    def text(self) -> str:
        lines = [f"refreshed prices as of {self.as_of.isoformat()} written to {self.out}"]
        for c in self.changes:
            old = "none" if c.old is None else f"{c.old:g}"
            lines.append(f"  {c.provider} {c.region} {c.name} {c.billing.value}: {old} -> {c.new:g}")
        lines.append(f"  {len(self.changes)} price(s) changed or added, {self.unchanged} confirmed unchanged")
        lines += [f"  kept: {k}" for k in self.kept]
        lines += [f"  still unpriced (listed, no price before or now): {u}" for u in self.unpriced]
        if self.dropped_lists:
            lines.append(f"  {self.dropped_lists} older refresh list(s) replaced (everything they priced is priced "
                         "again)")
        lines.append("no offering was dropped; use it with: metalfleet offerings --catalog "
                     f"{self.out} (or METALFLEET_CATALOG={self.out})")
        return "\n".join(lines)


def _priced_points(catalog: Catalog) -> set[tuple[str, str, str, BillingModel]]:
    return {(pl.provider, region, name, billing) for pl in catalog.price_lists
            for region, table in pl.regions.items() for name, rates in table.items() for billing in rates}


def refresh_document(doc: dict[str, Any], provider: str, fetch: PriceFetch, *, currency: str, source: str,
                     regions: Sequence[str] | None = None, today: date | None = None,
                     report: RefreshReport | None = None) -> dict[str, Any]:
    """``doc`` (a catalogue document) with a fresh price list for ``provider`` from ``fetch``; checked."""
    from .planner import sold

    today = today or date.today()
    before = parse_catalog(doc, "the catalogue to refresh")
    report = report or RefreshReport(out="-", as_of=today)
    names = [e.name for e in before.of(provider)]
    if not names:
        raise InvalidSpecError(f"provider {provider!r} has no offering in the catalogue", field="provider",
                               value=provider)
    wanted = list(regions or [])
    if not wanted:
        for pl in before.price_lists:
            if pl.provider == provider:
                wanted += [r for r in pl.regions if r != ANY_REGION and r not in wanted]
    if not wanted:
        raise InvalidSpecError(f"{provider}: the catalogue prices no region; name one with --region",
                               field="region", value=None)
    fresh: dict[str, dict[str, dict[str, float]]] = {}
    for region in wanted:
        answer = fetch(region, names)
        for name in names:
            old = {p.billing: p.hourly for p in before.prices(provider, region, name)}
            new = dict(answer.get(name) or {})
            if new:
                fresh.setdefault(region, {})[name] = {b.value: float(v) for b, v in new.items()}
            elif not old:
                report.unpriced.append(f"{provider} {region} {name}")
            for billing, value in new.items():
                if old.get(billing) == value:
                    report.unchanged += 1
                else:
                    report.changes.append(PriceChange(provider, region, name, billing, old.get(billing), value))
            if new:  # priced some models: name each sold model it could not price and that had no price before
                entry = before.require(provider, name)
                for billing in BillingModel:
                    if billing not in new and billing not in old and sold(entry, billing, region):
                        report.unpriced.append(f"{provider} {region} {name} {billing.value}")
            for billing, value in old.items():
                if billing not in new:
                    price = next(p for p in before.prices(provider, region, name) if p.billing == billing)
                    report.kept.append(f"{provider} {region} {name} {billing.value} {value:g} "
                                       f"{price.currency} (as of {price.as_of.isoformat()}; the API did not price it)")
    if not fresh:
        raise MetalfleetError(f"{provider}: the pricing API priced none of {', '.join(names)} in "
                              f"{', '.join(wanted)}; the catalogue is left as it was", provider=provider)
    changed_here = [c for c in report.changes if c.provider == provider]
    new_list = {"provider": provider, "currency": currency, "as_of": today.isoformat(), "source": source,
                "notes": f"{REFRESH_MARK} on {today.isoformat()}: only the prices the API gave; the lists below keep "
                         f"the rest; {len(changed_here)} price(s) changed or added", "regions": fresh,
                "changed": [{"region": c.region, "offering": c.name, "billing": c.billing.value, "old": c.old,
                             "new": c.new} for c in changed_here]}
    out = dict(doc)
    fresh_points = {(r, n, b) for r, t in fresh.items() for n, rates in t.items() for b in rates}
    kept_lists = []
    for raw in doc.get("price_lists") or []:
        mine = raw.get("provider") == provider and str(raw.get("notes", "")).startswith(REFRESH_MARK)
        points = {(r, n, b) for r, t in (raw.get("regions") or {}).items() for n, rates in t.items() for b in rates}
        if mine and points <= fresh_points:
            report.dropped_lists += 1
            continue
        kept_lists.append(raw)
    out["price_lists"] = [new_list, *kept_lists]
    after = parse_catalog(out, "the refreshed catalogue")
    lost_entries = {(e.provider, e.name) for e in before.entries} - {(e.provider, e.name) for e in after.entries}
    # every price point priced before is still priced (by some list) after
    lost_points = {(p, r, n, b) for p, r, n, b in _priced_points(before)
                   if b not in {x.billing for x in after.prices(p, r, n)}}
    if lost_entries or lost_points:  # a defect in the refresh, never a user error: refuse to write
        raise MetalfleetError(f"refresh would drop offerings {sorted(lost_entries)} or prices {sorted(lost_points)}")
    return out


def refresh_catalogue(catalog_path: str | None, out: str, *, providers: Sequence[str] = ("aws",),
                      regions: Sequence[str] | None = None, endpoint_url: str | None = None,
                      today: date | None = None) -> RefreshReport:
    """Refresh ``providers``' prices in the catalogue at ``catalog_path`` (default: the shipped one), write
    ``out``, and report what changed."""
    from .textfile import check_output_path, read_json_file

    today = today or date.today()
    check_output_path(out, "--out file")  # before any API call: a bad --out costs nothing
    if catalog_path:
        doc = read_json_file(catalog_path, "offering catalogue (--catalog)")
        parse_catalog(doc, catalog_path)  # a bad value is named with the file, before any API call
    else:
        doc = catalog_document()
    report = RefreshReport(out=out, as_of=today)
    for provider in providers:
        if provider not in PRICE_SOURCES:
            raise InvalidSpecError(f"no pricing API client for provider {provider!r} yet (have: "
                                   f"{', '.join(PRICE_SOURCES)})", field="provider", value=provider)
        src = PRICE_SOURCES[provider]()
        where = f" at {endpoint_url}" if endpoint_url else ""
        doc = refresh_document(doc, provider, src.make(endpoint_url), currency=src.currency,
                               source=f"{src.source}{where}, fetched {today.isoformat()}", regions=regions,
                               today=today, report=report)
    from .textfile import write_text_file

    write_text_file(out, json.dumps(doc, indent=2) + "\n", "--out file")
    return report
