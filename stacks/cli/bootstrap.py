"""``metalfleet bootstrap``: make hosts training-ready over SSH (:func:`metalfleet.bootstrap.run_bootstrap`), an
inventory's or a cluster spec's live nodes."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .flags import add_driver_config, driver_for
from .output import add_json, dump

__all__ = ["add_commands", "cmd_bootstrap"]


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from metalfleet.bootstrap import TerminalProgress, live_inventory, profile_for_spec, run_bootstrap
    from metalfleet.bootstrap.inventory import load_target
    from metalfleet.providers import ClusterSpec

    target = load_target(args.target)
    if isinstance(target, ClusterSpec):
        spec = target
        inventory, _nodes = live_inventory(spec, driver_for(spec, args.driver_config))
        profile = args.profile or profile_for_spec(spec)
    else:
        inventory = target
        profile = args.profile
    progress = None if args.json else TerminalProgress(sys.stderr, verbose=args.verbose)
    report = run_bootstrap(inventory, profile, dry_run=args.dry_run, limit=args.limit, progress=progress,
                           log_dir=args.log_dir, max_fail_percentage=args.max_fail_percentage)
    print(dump(report.to_dict()) if args.json else report.format_text())
    return 0 if report.ok else 1


def add_commands(sub: Any) -> None:
    b = sub.add_parser("bootstrap", help="make hosts training-ready over SSH (driver, fabric, NCCL, storage)")
    b.add_argument("target", help="an inventory YAML, or a cluster spec whose live nodes are bootstrapped")
    b.add_argument("--dry-run", action="store_true", help="read facts and print every command that would run")
    b.add_argument("--limit", action="append", help="host name/address glob or label=value (repeatable)")
    b.add_argument("--profile", help="profile name (default: from the spec, else gpu-node)")
    b.add_argument("--log-dir", help="per-host command logs go here")
    b.add_argument("--max-fail-percentage", type=float, default=None,
                   help="stop starting hosts once this share of them failed")
    add_driver_config(b)
    b.add_argument("--verbose", action="store_true")
    add_json(b)
    b.set_defaults(func=cmd_bootstrap)
