"""Small helpers shared by the parsers: numbered lines, strict/lenient number conversion."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import ParseError

_NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_NOT_AVAILABLE = {"", "n/a", "[n/a]", "na", "unknown", "not supported", "[not supported]", "-"}


@dataclass(frozen=True)
class Line:
    """One input line with its 1-based number (tabs kept; trailing newline removed)."""

    no: int
    text: str

    def fail(self, tool: str, reason: str) -> ParseError:
        return ParseError(tool, reason, line_no=self.no, line=self.text)


def numbered_lines(text: str) -> list[Line]:
    """Split ``text`` into numbered lines; CRLF and lone CR are treated as line ends."""
    return [Line(i, t) for i, t in enumerate(text.splitlines(), start=1)]


def nonblank(lines: list[Line]) -> Iterator[Line]:
    return (ln for ln in lines if ln.text.strip())


def require_text(tool: str, text: str) -> None:
    if not isinstance(text, str):
        raise ParseError(tool, f"expected text, got {type(text).__name__}")
    if not text.strip():
        raise ParseError(tool, "empty input")


def strict_int(tool: str, value: str, line: Line, what: str) -> int:
    v = value.strip()
    if not re.fullmatch(r"[-+]?\d+", v):
        raise line.fail(tool, f"{what} is not an integer: {value!r}")
    return int(v)


def strict_float(tool: str, value: str, line: Line, what: str) -> float:
    v = value.strip()
    if not _NUM.fullmatch(v):
        raise line.fail(tool, f"{what} is not a number: {value!r}")
    return float(v)


def lenient_float(value: str | None) -> float | None:
    """The leading number of ``value`` ("700.00 W" -> 700.0); None for N/A-like or non-numeric text."""
    if value is None:
        return None
    v = value.strip()
    if v.lower() in _NOT_AVAILABLE:
        return None
    m = _NUM.match(v)
    return float(m.group(0)) if m else None


def lenient_int(value: str | None) -> int | None:
    f = lenient_float(value)
    if f is None or f != f or f in (float("inf"), float("-inf")):
        return None
    return int(f)


def yes_no(value: str | None) -> bool | None:
    """Enabled/Yes/On/Active -> True, Disabled/No/Off/Not Active -> False, anything else -> None."""
    if value is None:
        return None
    v = value.strip().lower()
    if v in {"enabled", "yes", "on", "active", "true"}:
        return True
    if v in {"disabled", "no", "off", "not active", "false"}:
        return False
    return None


def na_to_none(value: str | None) -> str | None:
    if value is None:
        return None
    v = value.strip()
    return None if v.lower() in _NOT_AVAILABLE else v
