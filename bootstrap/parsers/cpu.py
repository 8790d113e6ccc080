"""A node's CPUs and memory: ``lscpu -J``, ``lscpu`` and ``/proc/meminfo``.

A scheduler's node definition (Slurm's ``Sockets``, ``CoresPerSocket``, ``ThreadsPerCore``, ``CPUs``,
``RealMemory``) is read from these, so it says what the node has rather than what a table claims.

util-linux prints ``lscpu`` in two layouts, each as text and as JSON: flat (one ``Field: value`` per
line, or a flat ``[{field, data}]`` list), which is what a pipe or an SSH session without a terminal
gets, and hierarchic (2.37 and later, on a terminal: sections indented under ``Vendor ID:``,
``Caches (sum of all):``..., or nested ``children`` in JSON). Both parse to the same report. Field
names are util-linux's English ones (run it under ``LC_ALL=C``: they are translated otherwise).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ._text import numbered_lines, require_text
from .errors import ParseError

__all__ = ["LscpuReport", "MemInfo", "parse_lscpu", "parse_lscpu_json", "parse_meminfo"]

TOOL_LSCPU = "lscpu"
TOOL_LSCPU_JSON = "lscpu -J"
TOOL_MEMINFO = "/proc/meminfo"


@dataclass(frozen=True)
class LscpuReport:
    """What ``lscpu`` says, in the order it says it.

    ``fields``: every (name, value) pair, names without the trailing colon, sections flattened (a
    section heading such as ``Caches (sum of all)`` has the value ``""``). The named attributes are
    the first occurrence of each field: on a hybrid CPU (several ``Model name`` sections, e.g. big and
    little ARM cores) they describe the first section, and ``model_names`` lists them all. A count
    util-linux prints as ``-`` (``Socket(s): -`` on some ARM servers) is None.
    """

    fields: tuple[tuple[str, str], ...]
    cpus: int
    architecture: str | None = None
    vendor: str | None = None
    model: str | None = None
    model_names: tuple[str, ...] = ()
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    numa_nodes: int | None = None
    online: str | None = None

    def get(self, name: str) -> str | None:
        """The first value of field ``name`` (without its colon), or None."""
        return next((v for k, v in self.fields if k == name), None)


def _count(value: str | None) -> int | None:
    v = (value or "").strip()
    return int(v) if re.fullmatch(r"\d+", v) else None


def _report(tool: str, pairs: list[tuple[str, str]]) -> LscpuReport:
    first: dict[str, str] = {}
    for k, v in pairs:
        first.setdefault(k, v)
    cpus = _count(first.get("CPU(s)"))
    if cpus is None:
        raise ParseError(tool, "no 'CPU(s):' count (is this lscpu's output?)")
    return LscpuReport(
        fields=tuple(pairs), cpus=cpus, architecture=first.get("Architecture") or None,
        vendor=first.get("Vendor ID") or None, model=first.get("Model name") or None,
        model_names=tuple(v for k, v in pairs if k == "Model name" and v),
        sockets=_count(first.get("Socket(s)")), cores_per_socket=_count(first.get("Core(s) per socket")),
        threads_per_core=_count(first.get("Thread(s) per core")), numa_nodes=_count(first.get("NUMA node(s)")),
        online=first.get("On-line CPU(s) list") or None)


# ------------------------------------------------------------------------------------- lscpu -J


def parse_lscpu_json(text: str) -> LscpuReport:
    """Parse ``lscpu -J`` (``--json``): the flat ``[{field, data}]`` list or the nested ``children`` form."""
    require_text(TOOL_LSCPU_JSON, text)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(TOOL_LSCPU_JSON, f"not JSON: {type(exc).__name__}: {exc}") from None
    entries = doc.get("lscpu") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ParseError(TOOL_LSCPU_JSON, "expected an object with an 'lscpu' list")
    pairs: list[tuple[str, str]] = []

    def walk(items: list[Any], depth: int) -> None:
        if depth > 16:
            raise ParseError(TOOL_LSCPU_JSON, "'children' nested deeper than lscpu prints")
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("field"), str):
                raise ParseError(TOOL_LSCPU_JSON, f"entry without a 'field' string: {str(item)[:80]!r}")
            data = item.get("data")
            if data is not None and not isinstance(data, str | int | float):
                raise ParseError(TOOL_LSCPU_JSON, f"field {item['field']!r} has a 'data' that is not text")
            pairs.append((item["field"].strip().removesuffix(":"), "" if data is None else str(data).strip()))
            kids = item.get("children")
            if kids is not None:
                if not isinstance(kids, list):
                    raise ParseError(TOOL_LSCPU_JSON, f"field {item['field']!r} has 'children' that is not a list")
                walk(kids, depth + 1)

    walk(entries, 0)
    return _report(TOOL_LSCPU_JSON, pairs)


# ---------------------------------------------------------------------------------------- lscpu

#: ``<indent>Field name:<padding>value``; a heading (``NUMA:``) has no value.
_FIELD = re.compile(r"^(?P<indent> *)(?P<name>[^\s:][^:]*):(?: +(?P<value>.*?))?\s*$")


def parse_lscpu(text: str) -> LscpuReport:
    """Parse ``lscpu``'s text (flat or hierarchic).

    Every value starts at one column; a line indented to that column or beyond continues the value
    above it (``Flags`` wraps on a terminal), so a colon inside a value never starts a field.
    """
    require_text(TOOL_LSCPU, text)
    pairs: list[tuple[str, str]] = []
    column: int | None = None
    for ln in numbered_lines(text):
        raw = ln.text.expandtabs()
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if column is not None and pairs and indent >= column:
            name, value = pairs[-1]
            pairs[-1] = (name, value + raw[column:])  # a terminal wraps mid-word: the chunks join as they are
            continue
        m = _FIELD.match(raw)
        if m is None:
            raise ln.fail(TOOL_LSCPU, "expected 'Field:   value'")
        value = m.group("value") or ""
        if value and column is None:
            column = m.start("value")
        pairs.append((m.group("name").strip(), raw[m.start("value"):] if value else ""))
    return _report(TOOL_LSCPU, [(k, v.strip()) for k, v in pairs])


# -------------------------------------------------------------------------------- /proc/meminfo


@dataclass(frozen=True)
class MemInfo:
    """``/proc/meminfo``: ``values`` in the kernel's order, in kB where it says kB (counts otherwise)."""

    total_kib: int
    values: tuple[tuple[str, int], ...]
    available_kib: int | None = None

    @property
    def total_mib(self) -> int:
        """MemTotal in MiB (rounded down): Slurm's ``RealMemory`` unit."""
        return self.total_kib // 1024

    def get(self, name: str) -> int | None:
        return next((v for k, v in self.values if k == name), None)


_MEMINFO = re.compile(r"^(?P<name>[A-Za-z0-9_()]+):\s+(?P<value>\d+)(?: (?P<unit>kB))?\s*$")


def parse_meminfo(text: str) -> MemInfo:
    """Parse ``/proc/meminfo`` (``Name:   value kB`` per line; HugePages counts have no unit)."""
    require_text(TOOL_MEMINFO, text)
    values: list[tuple[str, int]] = []
    for ln in numbered_lines(text):
        if not ln.text.strip():
            continue
        m = _MEMINFO.match(ln.text)
        if m is None:
            raise ln.fail(TOOL_MEMINFO, "expected 'Name:   value kB'")
        values.append((m.group("name"), int(m.group("value"))))
    found = dict(values)
    if "MemTotal" not in found:
        raise ParseError(TOOL_MEMINFO, "no 'MemTotal:' line")
    return MemInfo(total_kib=found["MemTotal"], values=tuple(values), available_kib=found.get("MemAvailable"))
