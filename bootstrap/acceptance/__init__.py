"""Node acceptance: parsed evidence + per-offering baselines -> a pass/fail Verdict, and its reports.

A node joins the cluster only after it proves it is healthy (GPU count/model/ECC, links up, fabric
ports active) and fast (all_reduce bus bandwidth within the threshold of the offering's baseline).

A check that could not be judged is reported as skipped, never as passed; see :mod:`.gate`.

The checks are declared once, in :mod:`.checks`. Pure parts (parsers, baselines, gate and its check
modules, reports, offline, the table) import nothing outside the standard library, ``providers.errors``,
``providers.textfile`` and the check names and RDMA fabrics (``providers.checks``); a test imports them
in a fresh interpreter and finds no paramiko. The live parts load on first use: :func:`run_acceptance`
(:mod:`.live`, over any connector of :mod:`..sessions`), :func:`format_table` (:mod:`.table`),
:class:`AcceptanceOptions` (:mod:`.probes`), :func:`accept_cluster` and the quarantine file (:mod:`.quarantine`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .baselines import known_offerings, load_baselines, resolve_baseline
from .checks import CHECK_NAMES
from .gate import applicable_checks, judge
from .verdict import CheckResult, CheckStatus, Verdict

if TYPE_CHECKING:
    from .live import run_acceptance
    from .probes import AcceptanceOptions
    from .quarantine import AcceptanceOutcome, accept_cluster, write_quarantine
    from .results import AcceptanceReport, NodeAcceptance
    from .table import format_table

__all__ = [
    "CHECK_NAMES",
    "AcceptanceOptions",
    "AcceptanceOutcome",
    "AcceptanceReport",
    "CheckResult",
    "CheckStatus",
    "NodeAcceptance",
    "Verdict",
    "accept_cluster",
    "applicable_checks",
    "format_table",
    "judge",
    "known_offerings",
    "load_baselines",
    "resolve_baseline",
    "run_acceptance",
    "write_quarantine",
]

_LAZY = {
    "AcceptanceReport": ".results", "NodeAcceptance": ".results", "format_table": ".table", "run_acceptance": ".live",
    "AcceptanceOptions": ".probes",
    "AcceptanceOutcome": ".quarantine", "accept_cluster": ".quarantine", "write_quarantine": ".quarantine",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
