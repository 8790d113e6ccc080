"""``metalfleet policy check``: the rule set over files, for a pull request check (:mod:`metalfleet.policies.check`);
and the policy summary ``validate`` and ``up/preview`` print for their spec.

Exit codes: 0 no mandatory violation, 1 mandatory violations (with ``--baseline``: new ones only), 2 an input,
the config or the baseline cannot be read (one line naming the file).
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metalfleet.policies import Report

__all__ = ["add_commands", "add_policy_flags", "cmd_policy_check", "spec_policy", "spec_policy_lines"]


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy-config", metavar="policy.yaml", help="policy settings and suppressions")
    p.add_argument("--no-policy", action="store_true", help="skip the policy check of the spec")


def spec_policy(args: argparse.Namespace) -> Report | None:
    """The policy findings for the spec a command reads; None with --no-policy."""
    if getattr(args, "no_policy", False):
        return None
    from metalfleet.policies.check import spec_report_for

    return spec_report_for(args.spec, getattr(args, "policy_config", None))


def spec_policy_lines(report: Report) -> str:
    """The findings and the verdict, each line marked ``policy:`` (the command names the spec itself)."""
    from metalfleet.policies.check import summary_lines

    return "\n".join(f"policy: {line}" for line in summary_lines(report))


def cmd_policy_check(args: argparse.Namespace) -> int:
    # A run builds many small objects and frees none until it ends: the cyclic GC would only rescan them.
    gc.disable()
    from metalfleet.policies.baseline import compare, read_baseline, write_baseline
    from metalfleet.policies.check import check_paths
    from metalfleet.policies.config import PolicyConfig, load_config
    from metalfleet.policies.report import render, summary
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
        from metalfleet.policies.fanout import auto_jobs

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
    return int(cmp.exit_code if cmp is not None else report.exit_code)


def add_commands(sub: Any) -> None:
    from metalfleet.policies.report import FORMATS

    p = sub.add_parser("policy", help="policy-as-code checks (encryption, isolation, tags) on specs, inventories, "
                                      "Pulumi and Terraform")
    psub = p.add_subparsers(dest="policy_command", required=True)
    c = psub.add_parser("check", help="check specs, pool inventories, pulumi preview --json / stack export files "
                                      "and Terraform plan JSON (terraform show -json) or .tf files; exit 1 "
                                      "on mandatory violations, 2 on unreadable input")
    c.add_argument("paths", nargs="+", metavar="PATH",
                   help="input files (or folders of .tf files); each one's kind is read from its content")
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
