"""argparse subcommands ``parse`` and ``verify`` (wired into the main CLI elsewhere).

Handlers return an exit code: 0 pass, 1 acceptance failed, 2 usage or parse error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from metalfleet.providers.errors import InvalidSpecError

from ..parsers import PARSERS, ParseError
from .baselines import known_offerings
from .offline import parse_file, verify_dir
from .report import to_json, to_junit, to_markdown

__all__ = ["add_cli_commands", "cmd_parse", "cmd_verify"]


def add_cli_commands(subparsers: Any) -> None:
    """Register ``parse`` and ``verify`` on an ``ArgumentParser.add_subparsers()`` object."""
    p = subparsers.add_parser("parse", help="parse one saved command output",
                              description="Parse a saved command output (KIND 'auto' guesses from name/content).")
    p.add_argument("kind", metavar="KIND", choices=["auto", *sorted(PARSERS)],
                   help="auto, or one of: " + ", ".join(sorted(PARSERS)))
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="print the parsed result as JSON")
    p.set_defaults(func=cmd_parse)

    v = subparsers.add_parser("verify", help="judge a directory of saved outputs against an offering baseline",
                              description="Judge saved outputs (see metalfleet.bootstrap.acceptance.offline for "
                                          "file naming) against an offering's acceptance baseline.")
    v.add_argument("--from-dir", required=True, metavar="DIR", dest="from_dir")
    v.add_argument("--offering", required=True, metavar="NAME", help="one of: " + ", ".join(known_offerings()))
    v.add_argument("--node", metavar="NAME", help="node name in reports (default: the directory name)")
    v.add_argument("--threshold", type=float, metavar="FRACTION", help="pass fraction of baseline (default 0.9)")
    v.add_argument("--override", action="append", default=[], metavar="PATH=JSON",
                   help="override a baseline field, e.g. nccl.all_reduce.intra_node_ring_busbw_gbs=300")
    v.add_argument("--json", action="store_true", help="print the verdict as JSON")
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
    try:
        doc = parse_file(args.kind, args.file)
    except ParseError as exc:
        print(f"parse error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2, allow_nan=False) if args.json else _summary(doc))
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.override:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            raise InvalidSpecError(f"--override wants PATH=JSON, got {item!r}", field="override", value=item)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = out
        keys = path.split(".")
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    if args.threshold is not None:
        out["threshold"] = args.threshold
    return out


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        verdict = verify_dir(args.from_dir, args.offering, _overrides(args) or None, node=args.node)
    except ParseError as exc:
        print(f"parse error: {exc}", file=sys.stderr)
        return 2
    except InvalidSpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (NotADirectoryError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.junit:
        Path(args.junit).write_text(to_junit([verdict]), encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(to_markdown([verdict]), encoding="utf-8")
    if args.json:
        print(to_json([verdict]))
    else:
        print(f"{verdict.node} ({verdict.offering}): {'PASS' if verdict.passed else 'FAIL'}")
        for c in verdict.checks:
            print(f"  {c.status.upper():4s}  {c.name}: {c.reason}")
    return 0 if verdict.passed else 1
