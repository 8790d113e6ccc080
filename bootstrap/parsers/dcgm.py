"""``dcgmi diag -r N`` result table (DCGM 2.x/3.x/4.x box layout)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ._text import numbered_lines, require_text
from .errors import ParseError

__all__ = ["DcgmDiagReport", "DcgmTest", "parse_dcgm_diag"]

TOOL = "dcgmi diag"

_SECTION = re.compile(r"^[|+]-+\s+(?P<name>[A-Za-z][A-Za-z /]*?)\s+-+\+-+[|+]\s*$")
_RULE = re.compile(r"^\+[-=]+\+[-=]+\+\s*$")
_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<value>.*)\|\s*$")
_STATUS = re.compile(r"^(?P<s>Pass|Fail|Skip|Warn|Error)\b", re.IGNORECASE)
_DETAIL_NAMES = {"warning", "info", "error"}


def _empty() -> Mapping[str, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class DcgmTest:
    name: str
    section: str | None
    #: "Pass", "Fail", "Warn", "Skip" (worst of the result lines), or None if no line starts with one.
    status: str | None
    results: tuple[str, ...] = ()
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class DcgmDiagReport:
    tests: tuple[DcgmTest, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=_empty)
    messages: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    warned: tuple[str, ...] = ()


_RANK = {"fail": 4, "error": 4, "warn": 3, "pass": 1, "skip": 0}


def _status(results: list[str]) -> str | None:
    best: tuple[int, str] | None = None
    for r in results:
        m = _STATUS.match(r)
        if m:
            s = m.group("s").capitalize()
            rank = _RANK[s.lower()]
            if best is None or rank > best[0]:
                best = (rank, "Fail" if s == "Error" else s)
    return best[1] if best else None


def parse_dcgm_diag(text: str) -> DcgmDiagReport:
    """Parse the ``dcgmi diag`` box table; lines outside the box are kept as messages."""
    require_text(TOOL, text)
    section: str | None = None
    tests: list[tuple[str, str | None, list[str], list[str]]] = []
    metadata: dict[str, str] = {}
    messages: list[str] = []
    saw_header = False
    last_meta: str | None = None
    for ln in numbered_lines(text):
        s = ln.text.rstrip()
        if not s.strip():
            continue
        ms = _SECTION.match(s)
        if ms:
            section = ms.group("name").strip()
            continue
        if _RULE.match(s):
            continue
        if s.startswith(("|", "+")):
            mr = _ROW.match(s)
            if not mr:
                raise ln.fail(TOOL, "table line is not '| name | result |'")
            name, value = mr.group("name").strip(), mr.group("value").strip()
            if "|" in value:
                raise ln.fail(TOOL, "table row has more than two cells")
            if name == "Diagnostic" and value == "Result":
                saw_header = True
                continue
            if not saw_header:
                raise ln.fail(TOOL, "table row before the 'Diagnostic | Result' header")
            if section == "Metadata":
                if name:
                    metadata[name] = value
                    last_meta = name
                elif last_meta is not None:
                    metadata[last_meta] += " " + value
                continue
            if not name or name.lower() in _DETAIL_NAMES:
                if not tests:
                    raise ln.fail(TOOL, "continuation row before any test row")
                (tests[-1][2] if not name and not tests[-1][3] else tests[-1][3]).append(
                    value if not name else f"{name}: {value}")
                continue
            tests.append((name, section, [value], []))
            continue
        messages.append(s.strip())
    if not saw_header:
        if messages and any(m.lower().startswith("error") for m in messages):
            return DcgmDiagReport(messages=tuple(messages))
        raise ParseError(TOOL, "no 'Diagnostic | Result' table and no error message")
    frozen = tuple(DcgmTest(n, sec, _status(res), tuple(res), tuple(det)) for n, sec, res, det in tests)
    return DcgmDiagReport(
        tests=frozen, metadata=MappingProxyType(metadata), messages=tuple(messages),
        failed=tuple(t.name for t in frozen if t.status == "Fail"),
        warned=tuple(t.name for t in frozen if t.status == "Warn"),
    )
