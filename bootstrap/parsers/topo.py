"""Topology matrices: ``nvidia-smi topo -m`` and ``npu-smi info -t topo``.

Both print a square matrix of device-to-device link kinds, then per-device CPU (and NUMA) affinity,
then a legend. Columns are TAB separated on a terminal and space aligned once pasted into documents;
link kinds never contain spaces, so the parser splits on whitespace and re-joins the multi-word
affinity headers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ._text import Line, numbered_lines, require_text
from .errors import ParseError

__all__ = ["TopoMatrix", "parse_npu_smi_topo", "parse_nvidia_smi_topo"]

TOOL_NV = "nvidia-smi topo -m"
TOOL_NPU = "npu-smi info -t topo"

# NV# bonded NVLinks; SYS/NODE/PHB/PXB/PIX PCIe paths; SOC is the pre-2017 name of SYS; HCCS Ascend.
_LINK = re.compile(r"^(X|NV\d+|SYS|SOC|NODE|PHB|PXB|PIX|HCCS|HCCS_SW|NA|N/A|PCIE|SIO)$")
_DEVICE = re.compile(r"^(GPU|NIC|NPU|mlx\d_|rocep|ibp|erdma_|CPU)?[A-Za-z0-9_]*\d+$")
_AFFINITY_HEADS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def _empty_map() -> Mapping[str, str | None]:
    return MappingProxyType({})


@dataclass(frozen=True)
class TopoMatrix:
    tool: str
    devices: tuple[str, ...]
    #: ``links[i][j]`` is the link kind between devices[i] and devices[j] ("X" on the diagonal).
    links: tuple[tuple[str, ...], ...]
    cpu_affinity: Mapping[str, str | None] = field(default_factory=_empty_map)
    numa_affinity: Mapping[str, str | None] = field(default_factory=_empty_map)
    #: ``NIC Legend`` mapping, e.g. {"NIC0": "mlx5_0"}; empty when the legend is absent.
    nic_names: Mapping[str, str | None] = field(default_factory=_empty_map)
    gpus: tuple[str, ...] = ()
    nics: tuple[str, ...] = ()

    def link(self, a: str, b: str) -> str:
        return self.links[self.devices.index(a)][self.devices.index(b)]

    def pairs(self, prefix: str = "GPU") -> list[tuple[str, str, str]]:
        """Every unordered pair of devices whose name starts with ``prefix``, with its link kind."""
        names = [d for d in self.devices if d.startswith(prefix)]
        return [(a, b, self.link(a, b)) for i, a in enumerate(names) for b in names[i + 1:]]


def _header_tokens(ln: Line) -> tuple[list[str], list[str]]:
    text = ln.text.strip()
    aff: list[str] = []
    for head in _AFFINITY_HEADS:
        if head in text:
            aff.append(head)
    cut = min((text.index(h) for h in aff), default=len(text))
    devices = text[:cut].split()
    return devices, aff


def _parse_matrix(text: str, tool: str, kinds: str) -> TopoMatrix:
    require_text(tool, text)
    lines = numbered_lines(text)
    it = iter([ln for ln in lines])
    header: Line | None = None
    for ln in it:
        if ln.text.strip():
            header = ln
            break
    if header is None:  # pragma: no cover - require_text already rejected blank input
        raise ParseError(tool, "empty input")
    devices, aff_heads = _header_tokens(header)
    if not devices:
        raise header.fail(tool, "header names no devices")
    for d in devices:
        if not _DEVICE.match(d):
            raise header.fail(tool, f"header token {d!r} is not a device name")
    if len(set(devices)) != len(devices):
        raise header.fail(tool, "header repeats a device name")
    n = len(devices)
    rows: dict[str, tuple[str, ...]] = {}
    cpu: dict[str, str | None] = {}
    numa: dict[str, str | None] = {}
    nic_names: dict[str, str | None] = {}
    tail: list[Line] = []
    for ln in it:
        if not ln.text.strip():
            if len(rows) == n:
                tail = [x for x in it]
                break
            if rows:
                raise ln.fail(tool, f"blank line after {len(rows)} of {n} matrix rows")
            continue
        toks = ln.text.split()
        name = toks[0]
        if name == "Legend:":
            tail = [ln, *it]
            break
        if name not in devices:
            raise ln.fail(tool, f"row {name!r} is not one of the header devices")
        if name in rows:
            raise ln.fail(tool, f"row {name!r} appears twice")
        cells = toks[1:]
        if len(cells) < n:
            raise ln.fail(tool, f"row {name!r} has {len(cells)} link cells, expected {n}")
        link_cells, extra = cells[:n], cells[n:]
        for c in link_cells:
            if not _LINK.match(c):
                raise ln.fail(tool, f"unknown link kind {c!r} (known: {kinds})")
        if link_cells[devices.index(name)] != "X":
            raise ln.fail(tool, f"diagonal cell of {name} is {link_cells[devices.index(name)]!r}, expected 'X'")
        if len(extra) > len(aff_heads):
            raise ln.fail(tool, f"row {name!r} has {len(extra)} affinity cells but the header names {len(aff_heads)}")
        rows[name] = tuple(link_cells)
        values = dict(zip(aff_heads, extra, strict=False))
        cpu[name] = _na(values.get("CPU Affinity"))
        numa[name] = _na(values.get("NUMA Affinity"))
    if len(rows) != n:
        missing = [d for d in devices if d not in rows]
        raise ParseError(tool, f"matrix incomplete: no rows for {', '.join(missing)}")
    matrix = tuple(rows[d] for d in devices)
    for i in range(n):
        for j in range(i + 1, n):
            if matrix[i][j] != matrix[j][i]:
                raise ParseError(tool, f"matrix not symmetric: {devices[i]}->{devices[j]} is {matrix[i][j]}, "
                                       f"{devices[j]}->{devices[i]} is {matrix[j][i]}")
    in_nic_legend = False
    for ln in tail:
        s = ln.text.strip()
        if not s:
            continue
        if s == "NIC Legend:":
            in_nic_legend = True
            continue
        if in_nic_legend:
            m = re.match(r"^(NIC\d+):\s*(\S+)$", s)
            if not m:
                raise ln.fail(tool, "NIC legend line is not 'NICn: name'")
            nic_names[m.group(1)] = m.group(2)
    return TopoMatrix(
        tool=tool, devices=tuple(devices), links=matrix,
        cpu_affinity=MappingProxyType(cpu), numa_affinity=MappingProxyType(numa),
        nic_names=MappingProxyType(nic_names),
        gpus=tuple(d for d in devices if d.startswith(("GPU", "NPU"))),
        nics=tuple(d for d in devices if not d.startswith(("GPU", "NPU"))),
    )


def _na(v: str | None) -> str | None:
    return None if v is None or v in ("N/A", "") else v


def parse_nvidia_smi_topo(text: str) -> TopoMatrix:
    """Parse ``nvidia-smi topo -m`` (GPU and NIC rows, CPU/NUMA affinity, NIC legend)."""
    return _parse_matrix(text, TOOL_NV, "X NV# SYS NODE PHB PXB PIX")


def parse_npu_smi_topo(text: str) -> TopoMatrix:
    """Parse ``npu-smi info -t topo`` (NPU rows, HCCS/PCIe link kinds, CPU affinity)."""
    return _parse_matrix(text, TOOL_NPU, "X HCCS SYS PHB PIX PXB NA")
