"""``metalfleet policy check``: the rule set over files, for a pull request check.

Exit codes: 0 no mandatory violation, 1 mandatory violations (with ``--baseline``: new ones only), 2 an input,
the config or the baseline cannot be read (one line naming the file).
Also the policy summary ``metalfleet validate`` and ``up/preview`` print for their spec.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

from .adapters import LoadedInput, load_input
from .baseline import compare, read_baseline, write_baseline
from .config import PolicyConfig, load_config
from .engine import InputSummary, Report, evaluate
from .report import FORMATS, render, summary

__all__ = ["add_cli_commands", "check_paths", "cmd_policy_check", "spec_report_for", "summary_lines"]


def check_paths(paths: Sequence[str | Path], config: PolicyConfig | None = None, *,
                tf_dir: str | Path | None = None, today: date | None = None, jobs: int = 1) -> Report:
    """Load every input (kind from its content) and judge all their resources together. ``jobs`` > 1 divides a
    single input among that many processes (:mod:`.fanout`; the report is the same)."""
    config = config or PolicyConfig()
    if jobs > 1 and len(paths) == 1 and hasattr(os, "fork"):
        from .fanout import check_divided

        return check_divided(str(paths[0]), config, jobs, tf_dir=tf_dir, today=today)
    loaded: list[LoadedInput] = [load_input(p, config, tf_dir) for p in paths]
    resources = [r for li in loaded for r in li.resources]
    report = evaluate(resources, config, suppressions=[s for li in loaded for s in li.suppressions], today=today)
    report.inputs = [InputSummary(li.path, li.kind, len(li.resources)) for li in loaded]
    return report


def spec_report_for(spec_path: str | Path, config_path: str | Path | None = None) -> Report:
    """The policy report for one cluster spec (``metalfleet validate``, ``up``, ``preview``)."""
    config = load_config(config_path) if config_path else PolicyConfig()
    return check_paths([spec_path], config)


def summary_lines(report: Report) -> list[str]:
    """Short lines for a command's own output: each finding and suppression, then the verdict."""
    text = render(report, "text").splitlines()
    return text[1:]  # without the input line (the caller names the spec)


def cmd_policy_check(args: argparse.Namespace) -> int:
    # A run builds many small objects and frees none until it ends: the cyclic GC would only rescan them.
    gc.disable()
    from metalfleet.providers.errors import InvalidSpecError
    from metalfleet.providers.textfile import check_output_path, write_text_file

    if args.output is not None:  # checked before any work: a bad --output costs nothing and leaves nothing
        check_output_path(args.output, "--output file")
    if args.tf_dir is not None and not Path(args.tf_dir).is_dir():
        why = "no such folder" if not Path(args.tf_dir).exists() else "not a folder"
        raise InvalidSpecError(f"--tf-dir {args.tf_dir}: {why} (the Terraform configuration's folder)",
                               field="tf-dir", value=args.tf_dir)
    if args.write_baseline is not None:
        check_output_path(args.write_baseline, "--write-baseline file")
    entries = read_baseline(args.baseline) if args.baseline is not None else None  # before any work, as --output
    config = load_config(args.config) if args.config else PolicyConfig()
    jobs = args.jobs
    if jobs is None:
        from .fanout import auto_jobs

        jobs = auto_jobs(args.paths)
    report = check_paths(args.paths, config, tf_dir=args.tf_dir, jobs=jobs)
    cmp = compare(report, entries, args.baseline) if entries is not None else None
    out = render(report, args.format, baseline=cmp)
    if args.output:
        write_text_file(args.output, out, "--output file")
        print(summary(report, cmp), file=sys.stderr)
    else:
        sys.stdout.write(out)
    if args.write_baseline is not None:
        n = write_baseline(args.write_baseline, report)
        print(f"wrote {n} finding(s) to the baseline {args.write_baseline}", file=sys.stderr)
        if cmp is None:
            return 0  # recording the findings accepts them; with --baseline too, the comparison decides
    return cmp.exit_code if cmp is not None else report.exit_code


def add_cli_commands(sub: Any) -> None:
    """``metalfleet policy check`` (registered by metalfleet.stacks.cli)."""
    p = sub.add_parser("policy", help="policy-as-code checks (encryption, isolation, tags) on specs, inventories, "
                                      "Pulumi and Terraform")
    psub = p.add_subparsers(dest="policy_command", required=True)
    c = psub.add_parser("check", help="check specs, pool inventories, pulumi preview --json / stack export files "
                                      "and Terraform plan JSON (terraform show -json; .tf source is refused); exit 1 "
                                      "on mandatory violations, 2 on unreadable input")
    c.add_argument("paths", nargs="+", metavar="PATH", help="input files; each one's kind is read from its content")
    c.add_argument("--format", choices=sorted(FORMATS), default="text")
    c.add_argument("--output", metavar="FILE", help="write the report here (a one-line verdict goes to stderr)")
    c.add_argument("--config", metavar="policy.yaml", help="rule settings and suppressions")
    c.add_argument("--tf-dir", metavar="DIR", help="the Terraform configuration a plan was made from (default: the "
                                                   "plan's folder), for file and line locations and comments")
    c.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                   help="processes to divide one large input among (default: one per 8 MiB of input, at most the "
                        "CPUs available; 1: one process)")
    c.add_argument("--baseline", metavar="FILE",
                   help="accepted findings (from --write-baseline): they are listed but do not fail; only new "
                        "mandatory findings exit 1, and entries no longer found are reported fixed")
    c.add_argument("--write-baseline", metavar="FILE",
                   help="record the current findings (not the suppressed ones) as the accepted baseline; exit 0 "
                        "unless --baseline is given too")
    c.set_defaults(func=cmd_policy_check)


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--jobs takes a whole number of processes, not {text!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"--jobs must be between 1 and 64, not {n}")
    return n
