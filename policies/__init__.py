"""metalfleet.policies: one rule set for GPU infrastructure, over a neutral resource view.

Adapters read metalfleet cluster specs, IPMI/Redfish pool inventories, Pulumi resources (the CrossGuard
pack, ``pulumi preview --json``, ``pulumi stack export``) and Terraform plan JSON; rules are pure functions
(:mod:`.rules`); :func:`evaluate` applies enforcement, unknown values and suppressions; :mod:`.report`
writes text, Markdown, SARIF, JUnit, JSON and GitHub annotations. :func:`check_paths` judges files (``metalfleet
policy check``), ``policies/pack`` the CrossGuard pack. The rule table is RULES.md.
"""

from __future__ import annotations

from .check import check_paths
from .config import PolicyConfig, Suppression, load_config, parse_config
from .engine import Finding, Report, evaluate
from .model import UNKNOWN
from .rules import RULES, Rule

__all__ = ["RULES", "UNKNOWN", "Finding", "PolicyConfig", "Report", "Rule", "Suppression", "check_paths",
           "evaluate", "load_config", "parse_config"]
