"""``fi_info -p efa`` (libfabric provider listing) for AWS EFA hosts."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ._text import numbered_lines, require_text
from .errors import ParseError

__all__ = ["FiInfoEntry", "FiInfoReport", "parse_fi_info"]

TOOL = "fi_info"

_PROVIDER = re.compile(r"^provider:\s*(?P<v>\S+)\s*$")
_FIELD = re.compile(r"^\s+(?P<key>fabric|domain|version|type|protocol):\s*(?P<v>.*?)\s*$")


@dataclass(frozen=True)
class FiInfoEntry:
    provider: str
    fabric: str | None = None
    domain: str | None = None
    version: str | None = None
    type: str | None = None
    protocol: str | None = None


@dataclass(frozen=True)
class FiInfoReport:
    entries: tuple[FiInfoEntry, ...] = ()
    #: distinct devices behind EFA domains ("rdmap79s0-rdm" and "rdmap79s0-dgrm" are one device).
    efa_devices: tuple[str, ...] = ()
    #: True when the last entry stops before its domain (output cut, e.g. by ``| head``).
    last_entry_incomplete: bool = False
    errors: tuple[str, ...] = ()


def parse_fi_info(text: str) -> FiInfoReport:
    """Parse the default (non-verbose) ``fi_info`` listing."""
    require_text(TOOL, text)
    entries: list[FiInfoEntry] = []
    errors: list[str] = []
    for ln in numbered_lines(text):
        if not ln.text.strip():
            continue
        if ln.text.startswith(("fi_getinfo:", "fi_info:")):
            errors.append(ln.text.strip())
            continue
        m = _PROVIDER.match(ln.text)
        if m:
            entries.append(FiInfoEntry(m.group("v")))
            continue
        f = _FIELD.match(ln.text)
        if not f:
            raise ln.fail(TOOL, "expected 'provider: X' or an indented 'fabric/domain/version/type/protocol: X'")
        if not entries:
            raise ln.fail(TOOL, "field before the first 'provider:'")
        key = f.group("key")
        if getattr(entries[-1], key) is not None:
            raise ln.fail(TOOL, f"{key} repeated within one provider entry")
        entries[-1] = replace(entries[-1], **{key: f.group("v")})
    if not entries and not errors:
        raise ParseError(TOOL, "no 'provider:' entry found")
    devices: list[str] = []
    for e in entries:
        if e.provider == "efa" and e.domain:
            dev = re.sub(r"-(rdm|dgrm)$", "", e.domain)
            if dev not in devices:
                devices.append(dev)
    incomplete = bool(entries) and entries[-1].domain is None
    return FiInfoReport(tuple(entries), tuple(devices), incomplete, tuple(errors))
