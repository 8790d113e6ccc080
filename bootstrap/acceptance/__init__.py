"""Node acceptance: parsed evidence + per-offering baselines -> a pass/fail Verdict, and its reports.

A node joins the cluster only after it proves it is healthy (GPU count/model/ECC, links up, fabric
ports active) and fast (all_reduce bus bandwidth within the threshold of the offering's baseline).
"""

from __future__ import annotations

from .baselines import known_offerings, load_baselines, resolve_baseline
from .gate import CHECK_NAMES, CheckResult, Verdict, judge

__all__ = ["CHECK_NAMES", "CheckResult", "Verdict", "judge", "known_offerings", "load_baselines", "resolve_baseline"]
