"""The policy check over files: what ``metalfleet policy check`` runs for a pull request, and the policy summary
``metalfleet validate`` and ``up/preview`` print for their spec. The command line is
:mod:`metalfleet.stacks.cli.policy`; this module knows nothing of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from .adapters import LoadedInput, load_input
from .config import PolicyConfig, load_config
from .engine import InputSummary, Report, evaluate
from .report import render

__all__ = ["check_paths", "spec_report_for", "summary_lines"]


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
    report.inputs = [InputSummary(li.path, li.kind, len(li.resources), tuple(li.notices)) for li in loaded]
    return report


def spec_report_for(spec_path: str | Path, config_path: str | Path | None = None) -> Report:
    """The policy report for one cluster spec (``metalfleet validate``, ``up``, ``preview``)."""
    config = load_config(config_path) if config_path else PolicyConfig()
    return check_paths([spec_path], config)


def summary_lines(report: Report) -> list[str]:
    """Short lines for a command's own output: each finding and suppression, then the verdict."""
    text = render(report, "text").splitlines()
    return text[1:]  # without the input line (the caller names the spec)
