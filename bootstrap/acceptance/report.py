"""Render per-node verdicts as JSON, JUnit XML (one testcase per check per node) or Markdown.

A skipped check (not judged: no evidence, no baseline) is reported as skipped everywhere, never as
passed: JUnit ``<skipped/>``, status "skip" in JSON (and listed under "skipped"), SKIP in Markdown.
A mandatory check that was skipped is a failure (its reason says so).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from ..parsers import to_jsonable
from .verdict import CheckStatus, Verdict

__all__ = ["to_json", "to_junit", "to_markdown", "verdict_to_dict"]


def _node(v: Verdict, i: int) -> str:
    return v.node or f"node{i}"


def verdict_to_dict(v: Verdict, index: int = 0) -> dict[str, Any]:
    return {
        "node": _node(v, index),
        "offering": v.offering,
        "passed": v.passed,
        "threshold": v.threshold,
        "evidence": list(v.evidence),
        "failures": [c.name for c in v.failures],
        "skipped": [c.name for c in v.skipped],
        "mandatory": [c.name for c in v.checks if c.mandatory],
        "checks": [to_jsonable(c) for c in v.checks],
    }


def to_json(verdicts: Sequence[Verdict], *, indent: int | None = 2) -> str:
    doc = {"passed": all(v.passed for v in verdicts),
           "nodes": [verdict_to_dict(v, i) for i, v in enumerate(verdicts)]}
    return json.dumps(doc, indent=indent, allow_nan=False)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable(value), sort_keys=True)


def to_junit(verdicts: Sequence[Verdict], *, suite_name: str = "metalfleet-acceptance") -> str:
    """JUnit XML: a <testsuite> per node, a <testcase> per check; failed checks carry <failure>, skipped
    ones <skipped/>."""
    root = ET.Element("testsuites", name=suite_name)
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for i, v in enumerate(verdicts):
        node = _node(v, i)
        fails = len(v.failures)
        skips = len(v.skipped)
        suite = ET.SubElement(root, "testsuite", name=f"{node} ({v.offering})", tests=str(len(v.checks)),
                              failures=str(fails), errors="0", skipped=str(skips))
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="offering", value=v.offering)
        ET.SubElement(props, "property", name="threshold", value=f"{v.threshold:g}")
        for c in v.checks:
            case = ET.SubElement(suite, "testcase", classname=f"acceptance.{node}", name=c.name)
            if c.mandatory:
                ET.SubElement(ET.SubElement(case, "properties"), "property", name="mandatory", value="true")
            detail = f"measured: {_fmt(c.measured)}\nexpected: {_fmt(c.expected)}"
            if c.failed:
                failure = ET.SubElement(case, "failure", message=c.reason, type="AcceptanceFailure")
                failure.text = f"{c.reason}\n{detail}"
            elif c.skipped:
                ET.SubElement(case, "skipped", message=c.reason)
            else:
                out = ET.SubElement(case, "system-out")
                out.text = (f"WARNING: {c.reason}" if c.status == CheckStatus.WARN else c.reason) + f"\n{detail}"
        totals["tests"] += len(v.checks)
        totals["failures"] += fails
        totals["skipped"] += skips
    for k, n in totals.items():
        root.set(k, str(n))
    root.set("errors", "0")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _cell(value: Any) -> str:
    text = _fmt(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(verdicts: Sequence[Verdict]) -> str:
    """A heading and a table per node; the first line says how many nodes passed (and how many checks
    were skipped: not judged, so not passed either)."""
    passed = sum(1 for v in verdicts if v.passed)
    skipped = sum(len(v.skipped) for v in verdicts)
    head = f"{passed} of {len(verdicts)} nodes passed."
    if skipped:
        head += f" {skipped} check(s) were skipped (not judged; not counted as passed)."
    lines = ["# Node acceptance", "", head, ""]
    for i, v in enumerate(verdicts):
        node = _node(v, i)
        skips = f" ({len(v.skipped)} skipped)" if v.skipped else ""
        lines += [f"## {node} ({v.offering}): {'PASS' if v.passed else 'FAIL'}{skips}", "",
                  f"Threshold {v.threshold:.0%} of baseline; evidence: {', '.join(v.evidence) or 'none'}.", "",
                  "| check | status | mandatory | measured | expected | reason |",
                  "|---|---|---|---|---|---|"]
        for c in v.checks:
            lines.append(f"| {c.name} | {c.status.upper()} | {'yes' if c.mandatory else 'no'} | {_cell(c.measured)} "
                         f"| {_cell(c.expected)} | {_cell(c.reason)} |")
        lines.append("")
    return "\n".join(lines)
