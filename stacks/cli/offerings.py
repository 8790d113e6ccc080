"""``metalfleet offerings``: the shipped catalogue by default (offline, no credentials), the providers with --live
(:mod:`metalfleet.providers.browse` selects and compares; this module renders)."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import date
from typing import TYPE_CHECKING, Any

from .flags import bounded_int
from .output import add_json, dump, text_table

if TYPE_CHECKING:
    from metalfleet.providers.browse import OfferingRow
    from metalfleet.providers.catalog import Catalog

__all__ = ["CATALOG_ENV", "add_commands", "catalog_for", "cmd_offerings", "row_cells"]

#: A catalogue file to read instead of the shipped one (as ``--catalog``), e.g. one a refresh wrote.
CATALOG_ENV = "METALFLEET_CATALOG"
HEADER = ["provider", "name", "region", "accelerators", "interconnect", "fabric", "vcpus", "memory", "nvme",
          "bare metal", "billing (per node)", "price as of"]
#: How a figure no source gives is shown (``--json``: null, with the reason under ``unknown``).
UNKNOWN = "unknown"


def catalog_for(path: str | None) -> Catalog:
    """``--catalog`` (or $METALFLEET_CATALOG), else the catalogue shipped with metalfleet. A bad file is a
    one-line error naming the file and where it came from (the flag or the variable)."""
    from metalfleet.providers.catalog import catalog_from_file, load_catalog

    if path:
        return catalog_from_file(path, "offering catalogue (--catalog)")
    env = os.environ.get(CATALOG_ENV)
    if env:
        return catalog_from_file(env, f"offering catalogue (${CATALOG_ENV})")
    return load_catalog()


def _n(value: float | None, unit: str = "") -> str:
    return UNKNOWN if value is None else f"{value:g}{unit}"


def _price(p: Any) -> str:
    unit = "h" if p.per == "hour" else p.per
    amount = f"{p.listed:,.2f}" if p.per != "hour" else f"{p.hourly:g}"
    return f"{p.billing.value} {amount} {p.currency}/{unit}"


def row_cells(row: OfferingRow, today: date) -> list[str]:
    from metalfleet.providers.browse import price_age
    from metalfleet.providers.models import Fabric

    memory = f" {row.gpu_memory_gib} GiB" if row.gpu_memory_gib is not None else f" {UNKNOWN} GiB"
    gpus = f"{row.gpu_count}x {row.gpu_model}{memory}" if row.gpu_count else "-"
    link = row.interconnect.value + (f" {_n(row.interconnect_gbps)} GB/s" if row.gpu_count > 1 else "")
    cards = UNKNOWN if row.fabric_cards is None else f"{row.fabric_cards}x"
    fabric = f"{row.fabric.value} {cards} = {_n(row.fabric_gbps)} Gbps"
    fabric = "-" if row.fabric == Fabric.NONE else fabric
    if row.nvme_count is None:
        nvme = UNKNOWN
    else:
        nvme = f"{row.nvme_count}x{_n(row.nvme_size_gib)} GiB" if row.nvme_count else "none"
    cpus = _n(row.vcpus) + (f" ({row.cpu_cores} cores)" if row.cpu_cores else "")
    ram = f"{_n(row.memory_gib)} GiB" if row.memory_gib is not None else UNKNOWN
    billing = ", ".join(_price(p) for p in row.prices)
    unpriced = ["unpriced" if b == "(unpriced)" else b for b in row.billing_models if b.endswith("(unpriced)")]
    billing = ", ".join(x for x in [billing, *unpriced] if x) or "-"
    ages = sorted({p.as_of for p in row.prices})
    age = "; ".join(price_age(d, today) for d in ages) or "-"
    bare = "yes" if row.bare_metal else "no"
    name = row.name if row.orderable else f"{row.name} (inventory only)"
    return [row.provider, name, row.region or "-", gpus, link, fabric, cpus, ram, nvme, bare, billing, age]


def cmd_offerings(args: argparse.Namespace) -> int:
    from metalfleet.providers.browse import catalogue_rows
    from metalfleet.providers.errors import InvalidSpecError
    from metalfleet.providers.models import Fabric

    catalog, today = catalog_for(args.catalog), date.today()
    providers = args.provider or []
    known = catalog.providers()
    for name in providers:
        if name not in known:
            raise InvalidSpecError(f"--provider {name!r}: no offerings in the catalogue (known: {', '.join(known)})",
                                   field="provider", value=name)
    fabric = Fabric(args.fabric) if args.fabric else None
    rows = catalogue_rows(catalog, providers=providers, region=args.region, gpu=args.gpu, min_gpus=args.min_gpus,
                          fabric=fabric, orderable_only=args.orderable or args.live)
    if args.live:
        return _live(args, catalog, providers or known, rows, today)
    if args.json:
        print(dump([r.to_dict(today) for r in rows]))
        return 0
    print(text_table([row_cells(r, today) for r in rows], HEADER))
    sections = {
        "billing constraints": [f"  {r.provider} {r.name}: {c}" for r in rows for c in r.constraints],
        "not priced": [f"  {r.provider} {r.region or '-'} {r.name}: {u}" for r in rows for u in r.unpriced],
        "unverified (given, but no provider page states them)": [
            f"  {r.provider} {r.name}: {k}: {why}" for r in rows for k, why in r.unverified.items()],
        "unknown figures (no provider page gives them)": [
            f"  {r.provider} {r.name}: {k}: {why}" for r in rows for k, why in r.unknown.items()],
    }
    for title, lines in sections.items():
        if lines:
            print(f"\n{title}:\n" + "\n".join(dict.fromkeys(lines)))
    print(f"\n{len(rows)} offering(s) from the shipped catalogue ({'--catalog' if args.catalog else 'offline'}); "
          "prices are list prices as dated; `metalfleet offerings --live` asks the providers.")
    return 0


def _live(args: argparse.Namespace, catalog: Catalog, providers: list[str], rows: list[OfferingRow],
          today: date) -> int:
    """Ask each provider's driver; print its offerings and what differs from the shipped data."""
    from metalfleet.providers import get_driver
    from metalfleet.providers.browse import live_differences
    from metalfleet.providers.errors import MetalfleetError
    from metalfleet.providers.registry import available_drivers
    from metalfleet.providers.retry import DEFAULT_POLICY

    failed = 0
    report: list[dict[str, Any]] = []
    for name in providers:
        if name not in available_drivers():
            print(f"{name}: no driver in this metalfleet: shipped data only", file=sys.stderr)
            continue
        priced = sorted({r.region for r in rows if r.provider == name and r.region and r.region != "*"})
        regions: list[str | None] = [args.region] if args.region else [*priced] or [None]
        for region in regions:
            try:
                driver = get_driver(name, **({"region": region} if region else {}))
                live = DEFAULT_POLICY.call(driver.offerings)  # a throttle is ridden out, as when ordering
            except MetalfleetError as exc:
                print(f"{name} {region or ''}: {exc}", file=sys.stderr)
                failed += 1
                continue
            where = region or str(getattr(driver, "region", "-"))
            diffs = live_differences(catalog, name, where, live)
            report.append({"provider": name, "region": where, "offerings": [o.to_dict() for o in live],
                           "differences": [{"name": d.name, "field": d.field, "shipped": d.shipped, "live": d.live}
                                           for d in diffs]})
    if args.json:
        print(dump(report, default=str))
    else:
        for part in report:
            print(f"{part['provider']} {part['region']}: {len(part['offerings'])} offering(s) live")
            print(text_table([[o["name"], f"{o['gpu_count']}x {o['gpu_model']} {o['gpu_memory_gib']} GiB",
                               f"{o['fabric']} {o['fabric_cards']}x = {o['fabric_gbps']:g} Gbps", str(o["vcpus"]),
                               f"{o['memory_gib']} GiB"] for o in part["offerings"]],
                             ["name", "accelerators", "fabric", "vcpus", "memory"]))
            diffs = part["differences"]
            print(f"differences from the shipped catalogue: {len(diffs) or 'none'}")
            for d in diffs:
                shipped = "absent" if d["shipped"] is None else d["shipped"]
                live_value = "absent" if d["live"] is None else d["live"]
                print(f"  {d['name']} {d['field']}: shipped {shipped}, live {live_value}")
    return 1 if failed else 0


def add_commands(sub: Any) -> None:
    from metalfleet.providers.models import Fabric

    o = sub.add_parser("offerings", help="list normalised GPU offerings (shipped catalogue; --live asks providers)")
    o.add_argument("--provider", action="append", help="provider name (repeatable; default: every provider)")
    o.add_argument("--region", help="only this region (with --live: the region to ask)")
    o.add_argument("--gpu", help="GPU/NPU model, e.g. H100")
    o.add_argument("--min-gpus", type=bounded_int(0, 1024), default=0, help="at least this many GPUs per node")
    o.add_argument("--fabric", choices=[f.value for f in Fabric])
    o.add_argument("--orderable", action="store_true", help="only offerings metalfleet's drivers order")
    o.add_argument("--live", action="store_true",
                   help="ask each provider (credentials from the environment) and show what differs from the "
                        "shipped data")
    o.add_argument("--catalog", metavar="catalog.json", help=f"read this catalogue file (or ${CATALOG_ENV})")
    add_json(o)
    o.set_defaults(func=cmd_offerings)
