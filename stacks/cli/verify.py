"""``metalfleet parse`` and ``metalfleet verify`` over the acceptance gate (:mod:`metalfleet.bootstrap.acceptance`).

``verify`` judges either saved outputs (``--from-dir DIR --offering NAME``) or live nodes over SSH:
an inventory file (``metalfleet verify hosts.yaml``) or a cluster spec, whose hosts are the
provider's live nodes of that cluster (``metalfleet verify cluster.yaml --driver-config KEY=VALUE``;
:mod:`metalfleet.bootstrap.acceptance.targets`).

Handlers return an exit code: 0 pass, 1 acceptance failed, 2 usage or parse error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .flags import add_driver_config
from .output import add_json, dump, write_report

__all__ = ["add_commands", "cmd_parse", "cmd_verify"]


def add_commands(subparsers: Any) -> None:
    from metalfleet.bootstrap.acceptance.baselines import known_offerings
    from metalfleet.bootstrap.parsers import PARSERS
    from metalfleet.providers.tags import TAG_ACCEPTANCE

    p = subparsers.add_parser("parse", help="parse one saved command output",
                              description="Parse a saved command output (KIND 'auto' guesses from name/content).")
    p.add_argument("kind", metavar="KIND", choices=["auto", *sorted(PARSERS)],
                   help="auto, or one of: " + ", ".join(sorted(PARSERS)))
    p.add_argument("file", metavar="FILE")
    add_json(p, "print the parsed result as JSON")
    p.set_defaults(func=cmd_parse)

    v = subparsers.add_parser(
        "verify", help="acceptance-check live nodes (INVENTORY or SPEC) or a directory of saved outputs",
        description="Run the acceptance checks on every host of an inventory file, or on the provider's live "
                    "nodes of a cluster spec, and judge each against its offering's baseline; or judge saved "
                    "outputs (--from-dir; see metalfleet.bootstrap.acceptance.offline for file naming). "
                    "Exit 0 when every node passes, 1 when any fails, 2 on a usage error.")
    v.add_argument("target", nargs="?", metavar="INVENTORY|SPEC",
                   help="inventory YAML (hosts:) or cluster spec YAML (provider:, count:)")
    v.add_argument("--from-dir", metavar="DIR", dest="from_dir", help="judge saved outputs instead of live nodes")
    v.add_argument("--offering", metavar="NAME",
                   help="baseline to judge against (required with --from-dir; live: instead of each host's own); "
                        "one of: " + ", ".join(known_offerings()))
    v.add_argument("--node", metavar="NAME", help="node name in reports (default: the directory name)")
    v.add_argument("--limit", action="append", metavar="HOST",
                   help="live: only hosts matching a name/address glob or label=value (repeatable)")
    v.add_argument("--save-dir", metavar="DIR", dest="save_dir",
                   help="live: save every host's raw outputs under DIR/<host>/ (re-judge with --from-dir); a "
                        "name that is not a plain lower-case file name gets a short hash (gpu/1: gpu_1+43310e83c7fd)")
    add_driver_config(v, "SPEC: non-secret driver setting (credentials come from the environment)")
    v.add_argument("--quarantine-file", metavar="FILE", dest="quarantine_file",
                   help="live: record failed hosts there (label acceptance=quarantined) and drop hosts that pass")
    v.add_argument("--tag-failed", action="store_true", dest="tag_failed",
                   help=f"SPEC: tag failed nodes {TAG_ACCEPTANCE}=quarantined through the driver")
    v.add_argument("--no-nccl", action="store_true", dest="no_nccl", help="live: skip all_reduce_perf")
    v.add_argument("--no-multi-node", action="store_true", dest="no_multi_node",
                   help="live: skip the all_reduce across nodes")
    v.add_argument("--no-localise", action="store_true", dest="no_localise",
                   help="live: when the all_reduce across nodes fails, do not run the rounds (pairs, re-pairs, "
                        "per-interface runs, bisection) that name the nodes, links or switch group at fault")
    v.add_argument("--dcgm", type=int, choices=(0, 1, 2), default=0, help="live: also run dcgmi diag -r N")
    v.add_argument("--workers", type=int, default=32, help="live: hosts checked at once (default 32)")
    v.add_argument("-v", "--verbose", action="store_true", help="live: show every probe as it finishes")
    v.add_argument("--threshold", type=float, metavar="FRACTION", help="pass fraction of baseline (default 0.9)")
    v.add_argument("--override", action="append", default=[], metavar="PATH=JSON",
                   help="override a baseline field, e.g. nccl.all_reduce.intra_node_ring_busbw_gbs=300")
    add_json(v, "print the verdict as JSON")
    v.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    v.add_argument("--markdown", metavar="FILE", help="write a Markdown report")
    v.set_defaults(func=cmd_verify)


def _summary(doc: Any) -> str:
    if not isinstance(doc, dict):
        return json.dumps(doc)
    parts = []
    for key, value in doc.items():
        if isinstance(value, list):
            parts.append(f"{key}: {len(value)} item(s)")
        elif isinstance(value, dict):
            parts.append(f"{key}: {len(value)} field(s)")
        elif value is not None:
            parts.append(f"{key}: {value}")
    return "\n".join(parts)


def cmd_parse(args: argparse.Namespace) -> int:
    from metalfleet.bootstrap.acceptance.offline import parse_file
    from metalfleet.bootstrap.parsers import ParseError
    from metalfleet.providers.errors import InvalidSpecError

    try:
        doc = parse_file(args.kind, args.file)
    except ParseError as exc:  # names the tool, the line and the file
        print(f"parse error: {exc.message}", file=sys.stderr)
        return 2
    except InvalidSpecError as exc:  # not readable as text: names the file (and the bad byte's offset)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dump(doc, allow_nan=False) if args.json else _summary(doc))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from metalfleet.bootstrap.acceptance.offline import verify_dir
    from metalfleet.bootstrap.acceptance.report import to_json, to_junit, to_markdown
    from metalfleet.bootstrap.acceptance.targets import parse_overrides
    from metalfleet.bootstrap.parsers import ParseError
    from metalfleet.providers.errors import InvalidSpecError

    if args.from_dir and args.target:
        print("error: give INVENTORY|SPEC or --from-dir DIR, not both", file=sys.stderr)
        return 2
    if not args.from_dir:
        if not args.target:
            print("error: verify needs INVENTORY|SPEC, or --from-dir DIR --offering NAME", file=sys.stderr)
            return 2
        return _verify_live(args)
    if not args.offering:
        print("error: --from-dir needs --offering NAME", file=sys.stderr)
        return 2
    try:
        verdict = verify_dir(args.from_dir, args.offering, parse_overrides(args.override, args.threshold) or None,
                             node=args.node)
        if args.junit:
            write_report(args.junit, to_junit([verdict]), "JUnit report")
        if args.markdown:
            write_report(args.markdown, to_markdown([verdict]), "Markdown report")
    except ParseError as exc:  # names the tool, the line and the file
        print(f"parse error: {exc.message}", file=sys.stderr)
        return 2
    except InvalidSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # walking the folder (a sub-folder that cannot be listed)
        print(f"error: cannot read saved outputs under {args.from_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.json:
        print(to_json([verdict]))
    else:
        skipped = f", {len(verdict.skipped)} check(s) skipped (not judged)" if verdict.skipped else ""
        print(f"{verdict.node} ({verdict.offering}): {'PASS' if verdict.passed else 'FAIL'}{skipped}")
        for c in verdict.checks:
            print(f"  {c.status.upper():4s}  {c.name}{' (mandatory)' if c.mandatory else ''}: {c.reason}")
    return 0 if verdict.passed else 1


class _Progress:
    """Host-done lines on stderr (every probe with -v)."""

    def __init__(self, verbose: bool) -> None:
        from metalfleet.bootstrap.progress import TerminalProgress

        self.term = TerminalProgress(sys.stderr, verbose=verbose)
        self.verbose = verbose

    def __call__(self, ev: Any) -> None:
        if ev.kind == "host-done" or self.verbose:
            self.term(ev)


def _verify_live(args: argparse.Namespace) -> int:
    from metalfleet.bootstrap.acceptance.live import format_table, run_acceptance
    from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
    from metalfleet.bootstrap.acceptance.quarantine import load_quarantine, write_quarantine
    from metalfleet.bootstrap.acceptance.targets import (
        check_save_dir,
        load_verify_target,
        parse_overrides,
        record_nodes,
    )
    from metalfleet.bootstrap.sessions import select_hosts
    from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

    try:
        target = load_verify_target(args.target, args.driver_config, parse_overrides(args.override, args.threshold))
        inventory = target.inventory
        if args.quarantine_file:
            load_quarantine(args.quarantine_file)  # a file that cannot be updated fails before the run
        options = AcceptanceOptions(nccl=not args.no_nccl, multi_node=not args.no_multi_node,
                                    localise=not args.no_localise, dcgm_level=args.dcgm)
        if args.limit and not select_hosts(inventory.hosts, args.limit):
            print(f"error: --limit {' '.join(args.limit)} matches no host of {args.target}", file=sys.stderr)
            return 2
        if args.save_dir:
            check_save_dir(Path(args.save_dir), select_hosts(inventory.hosts, args.limit), args.offering)
        report = run_acceptance(inventory, offering=args.offering, overrides=target.overrides or None,
                                progress=_Progress(args.verbose), max_workers=max(1, args.workers),
                                limit=args.limit, options=options, save_dir=args.save_dir)
    except MetalfleetError as exc:  # a bad input (InvalidSpecError) or a driver that cannot list the nodes
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if target.driver is not None:
        for line in record_nodes(report, target, tag_failed=args.tag_failed):
            print(line, file=sys.stderr)
    print(report.to_json() if args.json else format_table(report))
    try:
        if args.quarantine_file:
            write_quarantine(report, args.quarantine_file)
        if args.junit:
            write_report(args.junit, report.to_junit(), "JUnit report")
        if args.markdown:
            write_report(args.markdown, report.to_markdown(), "Markdown report")
    except InvalidSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot write quarantine file {args.quarantine_file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0 if report.passed else 1
