"""A baseline of accepted findings, so a pull request check fails only on the findings the change adds.

``metalfleet policy check --write-baseline FILE`` records the current findings; ``--baseline FILE`` then sorts
each finding into *new* (not in the baseline: only these decide exit 1), *accepted* (in it: listed, not
failing), and names the baseline entries no longer found as *fixed*.

A finding is matched by its fingerprint: rule id, resource identity (name and type) and the finding's subject
(the attribute path it is about, list positions left out, and whether the value is unknown or known bad). Line
numbers and message wording are not part of it, so an unrelated edit above a resource, or a reworded message,
does not turn an accepted finding into a new one. Two findings with one fingerprint (one rule, one resource,
two faults the input places at the same address) are counted: a baseline with one such entry accepts one.
The rule, resource and message are stored beside the fingerprint for the reviewer of the baseline file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .engine import Finding, Report

__all__ = ["FORMAT_KEY", "Comparison", "Entry", "compare", "dumps", "entry_for", "fingerprint", "read_baseline",
           "subject", "write_baseline"]

#: The key (and version) that marks a file as a metalfleet policy baseline.
FORMAT_KEY = "metalfleet_policy_baseline"
VERSION = 1
WHAT = "--baseline file"
_FP = re.compile(r"^[0-9a-f]{32}$")
#: List positions in an attribute path (``hosts.1.bmc``, ``ingress[0]``): left out of the subject, since the
#: resource's own name already says which one, and an entry added above would otherwise renumber the rest.
_POSITION = re.compile(r"\.\d+(?=\.|$)|\[[^\]]*\]")

State = Literal["new", "accepted"]


@dataclass(frozen=True, order=True)
class Entry:
    """One accepted finding as the baseline file records it (ordered as the file lists them)."""

    rule: str
    resource: str
    subject: str
    fingerprint: str
    resource_type: str = ""
    message: str = ""

    def as_json(self) -> dict[str, str]:
        return {"fingerprint": self.fingerprint, "rule": self.rule, "resource": self.resource,
                "resource_type": self.resource_type, "subject": self.subject, "message": self.message}


def subject(f: Finding) -> str:
    """What the finding is about within its resource: the attribute path of its location (when the input names
    one other than the resource itself), without list positions, and ``unknown`` for a value not known."""
    address = f.location.address or ""
    path = "" if address in ("", f.resource_name) else _POSITION.sub("", address)
    return f"{path}{'?unknown' if f.unknown else ''}"


def fingerprint(f: Finding) -> str:
    key = "\x00".join((f.rule.id, f.resource_name, f.resource_type, subject(f)))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def entry_for(f: Finding) -> Entry:
    return Entry(f.rule.id, f.resource_name, subject(f), fingerprint(f), f.resource_type, f.message)


def dumps(findings: Iterable[Finding]) -> str:
    """The baseline file for ``findings``: JSON, entries sorted, the same bytes for the same findings."""
    entries = sorted(entry_for(f) for f in findings)
    doc = {FORMAT_KEY: VERSION, "findings": [e.as_json() for e in entries]}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_baseline(path: str | Path, report: Report) -> int:
    """Record the report's findings (not the suppressed ones: a suppression already accepts those); the count."""
    from metalfleet.providers.textfile import write_text_file

    write_text_file(path, dumps(report.findings), "--write-baseline file")
    return len(report.findings)


def read_baseline(path: str | Path) -> list[Entry]:
    """The entries of a baseline file; a file that cannot be read or is not a baseline is a one-line
    BadFileError (exit 2) naming the file and the fault."""
    from metalfleet.providers.textfile import BadFileError, read_json_file

    doc = read_json_file(path, WHAT)

    def bad(why: str) -> BadFileError:
        return BadFileError(f"{WHAT} {path} is not a metalfleet policy baseline: {why}", path=str(path))

    if not isinstance(doc, dict):
        raise bad(f"the document is a {_kind(doc)}, not an object")
    if FORMAT_KEY not in doc:
        raise bad(f"no {FORMAT_KEY!r} key (write one with --write-baseline)")
    if doc[FORMAT_KEY] != VERSION or isinstance(doc[FORMAT_KEY], bool):
        raise bad(f"{FORMAT_KEY} is {json.dumps(doc[FORMAT_KEY])}; this metalfleet reads version {VERSION}")
    items = doc.get("findings")
    if not isinstance(items, list):
        raise bad(f"'findings' is {'missing' if items is None else 'a ' + _kind(items)}, not a list")
    entries = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise bad(f"findings[{i}] is a {_kind(item)}, not an object")
        fp = item.get("fingerprint")
        if not isinstance(fp, str) or not _FP.match(fp):
            raise bad(f"findings[{i}].fingerprint is not 32 lowercase hex digits")
        for key in ("rule", "resource", "resource_type", "subject", "message"):
            if not isinstance(item.get(key, ""), str):
                raise bad(f"findings[{i}].{key} is a {_kind(item[key])}, not a string")
        if not item.get("rule"):
            raise bad(f"findings[{i}] has no rule")
        entries.append(Entry(item["rule"], item.get("resource", ""), item.get("subject", ""), fp,
                             item.get("resource_type", ""), item.get("message", "")))
    return entries


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


@dataclass
class Comparison:
    """A report's findings against a baseline: which are new and accepted, and which entries are fixed."""

    path: str
    accepted: set[int] = field(default_factory=set)  # id() of the accepted findings (the report keeps them alive)
    fixed: list[Entry] = field(default_factory=list)
    new_blocking: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def state(self, f: Finding) -> State:
        return "accepted" if id(f) in self.accepted else "new"

    def is_new(self, f: Finding) -> bool:
        return id(f) not in self.accepted

    @property
    def exit_code(self) -> int:
        return 1 if self.new_blocking else 0


def compare(report: Report, entries: Sequence[Entry], path: str | Path = "") -> Comparison:
    """Sort the report's findings (and suppressed findings, so a baseline entry now suppressed is not called
    fixed) into new and accepted. Among findings sharing a fingerprint, those whose message is the recorded one
    are accepted first, then the rest in report order, up to the number of entries."""
    cmp = Comparison(str(path))
    by_fp: dict[str, list[Entry]] = {}
    for e in entries:
        by_fp.setdefault(e.fingerprint, []).append(e)
    groups: dict[str, list[Finding]] = {}
    for f in [*report.findings, *report.suppressed]:
        groups.setdefault(fingerprint(f), []).append(f)
    for fp, group in groups.items():
        left = by_fp.pop(fp, [])
        if not left:
            continue
        rest = []
        for f in group:
            hit = next((e for e in left if e.message == f.message), None)
            if hit is None:
                rest.append(f)
            else:
                left.remove(hit)
                cmp.accepted.add(id(f))
        for f in rest:
            if not left:
                break
            left.pop(0)
            cmp.accepted.add(id(f))
        cmp.fixed += left
    for left in by_fp.values():
        cmp.fixed += left
    cmp.fixed.sort()
    new = [f for f in report.findings if id(f) not in cmp.accepted]
    cmp.new_blocking = sum(1 for f in new if f.blocking)
    cmp.counts = {"new": len(new), "accepted": len(report.findings) - len(new), "fixed": len(cmp.fixed)}
    return cmp
