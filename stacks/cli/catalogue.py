"""``metalfleet catalogue refresh``: update catalogue prices from the providers' pricing APIs
(:func:`metalfleet.providers.refresh.refresh_catalogue`; never drops an offering)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands", "cmd_catalogue_refresh"]


def cmd_catalogue_refresh(args: argparse.Namespace) -> int:
    from metalfleet.providers.refresh import refresh_catalogue

    report = refresh_catalogue(args.catalog, args.out, providers=args.provider or ["aws"],
                               regions=args.region or None, endpoint_url=args.endpoint_url)
    print(report.text())
    return 0


def add_commands(sub: Any) -> None:
    from metalfleet.providers.refresh import PRICE_SOURCES

    c = sub.add_parser("catalogue", help="the offering catalogue")
    csub = c.add_subparsers(dest="catalogue_command", required=True)
    r = csub.add_parser("refresh", help="update catalogue prices from the providers' pricing APIs (AWS Price List "
                                        "query API, Alibaba ECS DescribePrice, Huawei BSS price inquiry); never "
                                        "drops an offering")
    r.add_argument("--provider", action="append", choices=sorted(PRICE_SOURCES),
                   help="provider with a pricing API client (default aws)")
    r.add_argument("--region", action="append", help="region to price (repeatable; default: the regions the "
                                                     "catalogue prices)")
    r.add_argument("--catalog", metavar="catalog.json", help="the catalogue to start from (default: the shipped one)")
    r.add_argument("--out", metavar="catalog.json", required=True,
                   help="where to write the refreshed catalogue (use it with --catalog or $METALFLEET_CATALOG)")
    r.add_argument("--endpoint-url", help="the pricing API endpoint (default: the provider's; a local emulator)")
    r.set_defaults(func=cmd_catalogue_refresh)
