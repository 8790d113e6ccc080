"""nvidia-smi in its three printed forms: ``-q -x`` (XML), ``-q`` (indented text) and the default table.

All three produce the same :class:`NvidiaSmiReport`, so the acceptance gate does not care which one a
node handed in. Fields a form does not print are ``None`` (the table has no retired pages, a
``-q -d PAGE_RETIREMENT`` capture has no product names).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from ._text import Line, lenient_float, lenient_int, na_to_none, numbered_lines, require_text, yes_no
from .errors import ParseError

__all__ = [
    "NvidiaSmiGpu",
    "NvidiaSmiReport",
    "parse_nvidia_smi_q",
    "parse_nvidia_smi_table",
    "parse_nvidia_smi_xml",
]

TOOL_XML = "nvidia-smi -q -x"
TOOL_Q = "nvidia-smi -q"
TOOL_TABLE = "nvidia-smi"


@dataclass(frozen=True)
class NvidiaSmiGpu:
    """One GPU's section of an nvidia-smi report (None: the form read does not show the field)."""

    index: int
    name: str | None = None
    bus_id: str | None = None
    uuid: str | None = None
    serial: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    persistence_mode: bool | None = None
    mig_mode: str | None = None
    #: "Enabled" / "Disabled"; None when the form does not say.
    ecc_mode: str | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    ecc_volatile_corrected: int | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    temperature_c: float | None = None
    utilization_gpu_pct: float | None = None
    performance_state: str | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_max_limit_w: float | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    max_clock_sm_mhz: int | None = None
    max_clock_mem_mhz: int | None = None
    fabric_state: str | None = None
    processes: int | None = None


@dataclass(frozen=True)
class NvidiaSmiReport:
    tool: str
    driver_version: str | None
    cuda_version: str | None
    #: What the tool says is attached (``Attached GPUs``); may exceed ``len(gpus)`` for ``-i N`` captures.
    attached_gpus: int | None
    gpus: tuple[NvidiaSmiGpu, ...] = field(default_factory=tuple)
    gpu_count: int = 0

    @staticmethod
    def build(tool: str, driver: str | None, cuda: str | None, attached: int | None,
              gpus: list[NvidiaSmiGpu]) -> NvidiaSmiReport:
        count = attached if attached is not None else len(gpus)
        return NvidiaSmiReport(tool, driver, cuda, attached, tuple(gpus), count)


# --------------------------------------------------------------------------------------------- XML


def _xt(elem: ET.Element | None, path: str) -> str | None:
    if elem is None:
        return None
    e = elem.find(path)
    if e is None or e.text is None:
        return None
    return e.text.strip()


def _sum_counts(elem: ET.Element | None, names: tuple[str, ...]) -> int | None:
    """Sum the numeric values among ``names`` under ``elem``; None when none is numeric."""
    total: int | None = None
    for n in names:
        v = lenient_int(_xt(elem, n))
        if v is not None:
            total = (total or 0) + v
    return total


_UNCORR = ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
           "sram_uncorrectable_secded", "double_bit/total")
_CORR = ("dram_correctable", "sram_correctable", "single_bit/total")


def _xml_gpu(index: int, g: ET.Element) -> NvidiaSmiGpu:
    ecc = g.find("ecc_errors")
    vol = ecc.find("volatile") if ecc is not None else None
    agg = ecc.find("aggregate") if ecc is not None else None
    rp = g.find("retired_pages")
    rr = g.find("remapped_rows")
    power = g.find("gpu_power_readings")
    if power is None:
        power = g.find("power_readings")
    draw = _xt(power, "power_draw") or _xt(power, "instant_power_draw") or _xt(power, "average_power_draw")
    limit = (_xt(power, "current_power_limit") or _xt(power, "enforced_power_limit")
             or _xt(power, "power_limit"))
    pending = yes_no(_xt(rp, "pending_retirement"))
    if pending is None:
        pending = yes_no(_xt(rp, "pending_blacklist"))
    processes = g.find("processes")
    return NvidiaSmiGpu(
        index=index,
        name=na_to_none(_xt(g, "product_name")),
        bus_id=na_to_none(_xt(g, "pci/pci_bus_id")) or na_to_none(g.get("id")),
        uuid=na_to_none(_xt(g, "uuid")),
        serial=na_to_none(_xt(g, "serial")),
        memory_total_mib=lenient_int(_xt(g, "fb_memory_usage/total")),
        memory_used_mib=lenient_int(_xt(g, "fb_memory_usage/used")),
        persistence_mode=yes_no(_xt(g, "persistence_mode")),
        mig_mode=na_to_none(_xt(g, "mig_mode/current_mig")),
        ecc_mode=na_to_none(_xt(g, "ecc_mode/current_ecc")),
        ecc_volatile_uncorrected=_sum_counts(vol, _UNCORR),
        ecc_aggregate_uncorrected=_sum_counts(agg, _UNCORR),
        ecc_volatile_corrected=_sum_counts(vol, _CORR),
        retired_pages_single_bit=lenient_int(_xt(rp, "multiple_single_bit_retirement/retired_count")),
        retired_pages_double_bit=lenient_int(_xt(rp, "double_bit_retirement/retired_count")),
        retired_pages_pending=pending,
        remapped_rows_correctable=lenient_int(_xt(rr, "remapped_row_corr")),
        remapped_rows_uncorrectable=lenient_int(_xt(rr, "remapped_row_unc")),
        remapped_rows_pending=yes_no(_xt(rr, "remapped_row_pending")),
        remapped_rows_failure=yes_no(_xt(rr, "remapped_row_failure")),
        temperature_c=lenient_float(_xt(g, "temperature/gpu_temp")),
        utilization_gpu_pct=lenient_float(_xt(g, "utilization/gpu_util")),
        performance_state=na_to_none(_xt(g, "performance_state")),
        power_draw_w=lenient_float(draw),
        power_limit_w=lenient_float(limit),
        power_max_limit_w=lenient_float(_xt(power, "max_power_limit")),
        clock_sm_mhz=lenient_int(_xt(g, "clocks/sm_clock")),
        clock_mem_mhz=lenient_int(_xt(g, "clocks/mem_clock")),
        max_clock_sm_mhz=lenient_int(_xt(g, "max_clocks/sm_clock")),
        max_clock_mem_mhz=lenient_int(_xt(g, "max_clocks/mem_clock")),
        fabric_state=na_to_none(_xt(g, "fabric/state")),
        processes=len(processes.findall("process_info")) if processes is not None else None,
    )


def parse_nvidia_smi_xml(text: str) -> NvidiaSmiReport:
    """Parse ``nvidia-smi -q -x``."""
    require_text(TOOL_XML, text)
    try:
        root = ET.fromstring(text.lstrip("\ufeff"))
    except ET.ParseError as exc:
        line_no, _col = exc.position
        lines = text.splitlines()
        bad = lines[line_no - 1] if 0 < line_no <= len(lines) else None
        raise ParseError(TOOL_XML, f"not well-formed XML: {exc}", line_no=line_no, line=bad) from exc
    if root.tag != "nvidia_smi_log":
        raise ParseError(TOOL_XML, f"root element is <{root.tag}>, expected <nvidia_smi_log>")
    attached_text = _xt(root, "attached_gpus")
    attached = lenient_int(attached_text)
    if attached_text is not None and attached is None:
        raise ParseError(TOOL_XML, f"<attached_gpus> is not a number: {attached_text!r}")
    gpus = [_xml_gpu(i, g) for i, g in enumerate(root.findall("gpu"))]
    if attached is None and not gpus:
        raise ParseError(TOOL_XML, "neither <attached_gpus> nor any <gpu> element")
    return NvidiaSmiReport.build(TOOL_XML, na_to_none(_xt(root, "driver_version")),
                                 na_to_none(_xt(root, "cuda_version")), attached, gpus)


# ------------------------------------------------------------------------------------- -q (text)


@dataclass
class _Node:
    key: str
    value: str | None
    line: Line
    children: list[_Node] = field(default_factory=list)

    def find(self, *path: str) -> _Node | None:
        node: _Node | None = self
        for part in path:
            if node is None:
                return None
            want = part.lower()
            node = next((c for c in node.children if c.key.lower() == want), None)
        return node

    def get(self, *path: str) -> str | None:
        n = self.find(*path)
        return n.value if n is not None else None

    def first(self, *paths: tuple[str, ...]) -> str | None:
        for p in paths:
            v = self.get(*p)
            if v is not None and na_to_none(v) is not None:
                return v
        return None


_KV = re.compile(r"^(?P<key>[^:]*?\S)\s+:(?: (?P<value>.*))?$")
_BANNER = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
_GPU_HEADER = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])$")


def _q_tree(lines: list[Line]) -> _Node:
    root = _Node("<root>", None, Line(0, ""))
    stack: list[tuple[int, _Node]] = [(-1, root)]
    for ln in lines:
        raw = ln.text.expandtabs(4)
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        body = raw.strip()
        m = _KV.match(body)
        node = _Node(m.group("key").strip(), (m.group("value") or "").strip(), ln) if m else _Node(body, None, ln)
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].children.append(node)
        stack.append((indent, node))
    return root


def _count_sum(section: _Node | None, names: tuple[str, ...]) -> int | None:
    if section is None:
        return None
    total: int | None = None
    for child in section.children:
        if any(child.key.lower().startswith(n) for n in names):
            v = lenient_int(child.value)
            if v is not None:
                total = (total or 0) + v
    return total


def _q_gpu(index: int, g: _Node, bus: str) -> NvidiaSmiGpu:
    vol = g.find("ECC Errors", "Volatile")
    agg = g.find("ECC Errors", "Aggregate")
    uncorr = ("dram uncorrectable", "sram uncorrectable", "double bit")
    corr = ("dram correctable", "sram correctable", "single bit")
    # Pre-Ampere layout nests "Double Bit" > "Total"; flatten that.
    v_unc = _count_sum(vol, uncorr)
    a_unc = _count_sum(agg, uncorr)
    if v_unc is None and vol is not None and vol.find("Double Bit") is not None:
        v_unc = lenient_int(vol.get("Double Bit", "Total"))
    if a_unc is None and agg is not None and agg.find("Double Bit") is not None:
        a_unc = lenient_int(agg.get("Double Bit", "Total"))
    power_paths = [("GPU Power Readings",), ("Power Readings",)]
    draw = limit = maxlim = None
    for p in power_paths:
        draw = draw or na_to_none(g.get(*p, "Power Draw")) or na_to_none(g.get(*p, "Instantaneous Power Draw"))
        limit = (limit or na_to_none(g.get(*p, "Current Power Limit"))
                 or na_to_none(g.get(*p, "Enforced Power Limit")) or na_to_none(g.get(*p, "Power Limit")))
        maxlim = maxlim or na_to_none(g.get(*p, "Max Power Limit"))
    pending = yes_no(g.get("Retired Pages", "Pending Page Retirement"))
    if pending is None:
        pending = yes_no(g.get("Retired Pages", "Pending Page Blacklist"))
    procs = g.find("Processes")
    nprocs: int | None = None
    if procs is not None:
        nprocs = sum(1 for c in procs.children if c.key.lower() == "process id")
    return NvidiaSmiGpu(
        index=index,
        name=na_to_none(g.get("Product Name")),
        bus_id=bus,
        uuid=na_to_none(g.get("GPU UUID")),
        serial=na_to_none(g.get("Serial Number")),
        memory_total_mib=lenient_int(g.get("FB Memory Usage", "Total")),
        memory_used_mib=lenient_int(g.get("FB Memory Usage", "Used")),
        persistence_mode=yes_no(g.get("Persistence Mode")),
        mig_mode=na_to_none(g.get("MIG Mode", "Current")),
        ecc_mode=na_to_none(g.get("ECC Mode", "Current")),
        ecc_volatile_uncorrected=v_unc,
        ecc_aggregate_uncorrected=a_unc,
        ecc_volatile_corrected=_count_sum(vol, corr),
        retired_pages_single_bit=lenient_int(g.get("Retired Pages", "Single Bit ECC")),
        retired_pages_double_bit=lenient_int(g.get("Retired Pages", "Double Bit ECC")),
        retired_pages_pending=pending,
        remapped_rows_correctable=lenient_int(g.get("Remapped Rows", "Correctable Error")),
        remapped_rows_uncorrectable=lenient_int(g.get("Remapped Rows", "Uncorrectable Error")),
        remapped_rows_pending=yes_no(g.get("Remapped Rows", "Pending")),
        remapped_rows_failure=yes_no(g.get("Remapped Rows", "Remapping Failure Occurred")),
        temperature_c=lenient_float(g.get("Temperature", "GPU Current Temp")),
        utilization_gpu_pct=lenient_float(g.get("Utilization", "Gpu")),
        performance_state=na_to_none(g.get("Performance State")),
        power_draw_w=lenient_float(draw),
        power_limit_w=lenient_float(limit),
        power_max_limit_w=lenient_float(maxlim),
        clock_sm_mhz=lenient_int(g.get("Clocks", "SM")),
        clock_mem_mhz=lenient_int(g.get("Clocks", "Memory")),
        max_clock_sm_mhz=lenient_int(g.get("Max Clocks", "SM")),
        max_clock_mem_mhz=lenient_int(g.get("Max Clocks", "Memory")),
        fabric_state=na_to_none(g.get("Fabric", "State")),
        processes=nprocs,
    )


_Q_TOP_KEYS = {"timestamp", "driver version", "cuda version", "attached gpus"}


def parse_nvidia_smi_q(text: str) -> NvidiaSmiReport:
    """Parse ``nvidia-smi -q`` (optionally ``-i N`` / ``-d SECTION``) text output."""
    require_text(TOOL_Q, text)
    root = _q_tree(numbered_lines(text))
    driver = cuda = None
    attached: int | None = None
    gpus: list[NvidiaSmiGpu] = []
    seen_banner = False
    for node in root.children:
        if node.value is None and _BANNER.match(node.key):
            seen_banner = True
            continue
        if node.value is None:
            m = _GPU_HEADER.match(node.key)
            if not m:
                raise node.line.fail(TOOL_Q, "unexpected top-level line (expected 'GPU <bus id>' or 'Key : value')")
            gpus.append(_q_gpu(len(gpus), node, m.group("bus")))
            continue
        key = node.key.lower()
        if key not in _Q_TOP_KEYS:
            raise node.line.fail(TOOL_Q, f"unexpected top-level key {node.key!r}")
        if node.children:
            raise node.children[0].line.fail(TOOL_Q, f"unexpected indented line under {node.key!r}")
        if key == "driver version":
            driver = na_to_none(node.value)
        elif key == "cuda version":
            cuda = na_to_none(node.value)
        elif key == "attached gpus":
            attached = lenient_int(node.value)
            if attached is None:
                raise node.line.fail(TOOL_Q, "Attached GPUs is not a number")
    if not seen_banner and not gpus:
        raise ParseError(TOOL_Q, "no 'NVSMI LOG' banner and no GPU section")
    if not gpus and attached != 0:  # nvidia-smi prints "No devices were found" instead of an empty log
        raise ParseError(TOOL_Q, "no 'GPU <bus id>' section (the output ends before the first GPU)")
    return NvidiaSmiReport.build(TOOL_Q, driver, cuda, attached, gpus)


# ------------------------------------------------------------------------------------ the table

_TABLE_HEAD = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s+(?P<driver>\S+)\s+CUDA Version:\s+(?P<cuda>\S+)")
_ROW1_NAME = re.compile(r"^\s*(?P<idx>\d+)\s+(?P<name>.*?)\s+(?P<pm>On|Off)\s*$")
_ROW1_BUS = re.compile(r"^\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+(?P<disp>\S+)\s*$")
_ROW2_A = re.compile(
    r"^\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<perf>\S+)\s+(?P<pwr>\S+)\s*/\s*(?P<cap>\S+)\s*$")
_ROW2_MEM = re.compile(r"^\s*(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s*$")
_ROW2_C = re.compile(r"^\s*(?P<util>\S+)\s+(?P<mode>.+?)\s*$")


def _str_or_none(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _cells(ln: Line) -> list[str]:
    body = ln.text.rstrip()
    if not (body.startswith("|") and body.endswith("|")):
        return []
    return body[1:-1].split("|")


def parse_nvidia_smi_table(text: str) -> NvidiaSmiReport:
    """Parse the default ``nvidia-smi`` table (old and new column layouts)."""
    require_text(TOOL_TABLE, text)
    lines = numbered_lines(text)
    driver = cuda = None
    gpus: list[dict[str, object]] = []
    section = "pre"  # pre -> gpus -> other (MIG devices, processes)
    pending_row = 0  # which row of the current GPU block comes next (1, 2, 3)
    proc_counts: dict[int, int] = {}
    for ln in lines:
        s = ln.text.strip()
        if not s:
            continue
        if section == "pre":
            m = _TABLE_HEAD.search(s)
            if m:
                driver, cuda = m.group("driver"), na_to_none(m.group("cuda"))
            elif s.startswith("|=") and driver is not None:
                section, pending_row = "gpus", 1
            continue
        if section == "gpus":
            if s.startswith("+") and s.endswith("+"):
                pending_row = 1
                continue
            if not s.startswith("|"):
                # The blank/space line or a new table starts after the last GPU block.
                section = "other"
                continue
            cells = _cells(ln)
            if len(cells) == 1 and ("Processes:" in cells[0] or "MIG devices:" in cells[0]):
                section = "procs" if "Processes:" in cells[0] else "other"
                continue
            if len(cells) != 3:
                raise ln.fail(TOOL_TABLE, f"GPU row has {len(cells)} cells, expected 3")
            if pending_row == 1:
                m1, m2 = _ROW1_NAME.match(cells[0]), _ROW1_BUS.match(cells[1])
                if not (m1 and m2):
                    raise ln.fail(TOOL_TABLE, "first GPU row is not 'index name persistence | bus-id disp | ecc'")
                ecc_cell = cells[2].strip()
                gpus.append({
                    "index": int(m1.group("idx")), "name": m1.group("name").strip(),
                    "pm": m1.group("pm") == "On", "bus": m2.group("bus"),
                    "ecc_mode": "Disabled" if ecc_cell == "Off" else ("Enabled" if ecc_cell.isdigit() else None),
                    "ecc_unc": int(ecc_cell) if ecc_cell.isdigit() else None,
                })
                pending_row = 2
            elif pending_row == 2:
                ma, mm, mc = _ROW2_A.match(cells[0]), _ROW2_MEM.match(cells[1]), _ROW2_C.match(cells[2])
                if not (ma and mm and mc):
                    raise ln.fail(TOOL_TABLE, "second GPU row is not 'fan temp perf power | memory | util mode'")
                gpus[-1].update(temp=ma.group("temp"), perf=ma.group("perf"), pwr=ma.group("pwr"),
                                cap=ma.group("cap"), used=int(mm.group("used")), total=int(mm.group("total")),
                                util=mc.group("util"))
                pending_row = 3
            elif pending_row == 3:
                gpus[-1]["mig"] = na_to_none(cells[2].strip())
                pending_row = 4
            else:
                raise ln.fail(TOOL_TABLE, "more than three rows in one GPU block")
            continue
        if section in ("other", "procs"):
            cells = _cells(ln)
            if len(cells) == 1 and "Processes:" in cells[0]:
                section = "procs"
                continue
            if section == "procs" and len(cells) == 1:
                m = re.match(r"^\s*(\d+)\s+\S+\s+\S+\s+\d+\s+\S+\s", cells[0])
                if m:
                    gi = int(m.group(1))
                    proc_counts[gi] = proc_counts.get(gi, 0) + 1
    if driver is None:
        raise ParseError(TOOL_TABLE, "no 'NVIDIA-SMI ... Driver Version ... CUDA Version' header")
    if section == "pre":
        raise ParseError(TOOL_TABLE, "no GPU table after the header")
    if not gpus:  # without GPUs nvidia-smi prints "No devices were found", never an empty table
        raise ParseError(TOOL_TABLE, "no GPU rows in the table (the output ends before the first GPU)")
    out: list[NvidiaSmiGpu] = []
    for g in gpus:
        if "total" not in g:
            raise ParseError(TOOL_TABLE, f"GPU {g['index']} block is incomplete (no memory row)")
        idx = int(str(g["index"]))
        out.append(NvidiaSmiGpu(
            index=idx, name=str(g["name"]), bus_id=str(g["bus"]),
            memory_total_mib=int(str(g["total"])), memory_used_mib=int(str(g["used"])),
            persistence_mode=bool(g["pm"]), mig_mode=_str_or_none(g.get("mig")),
            ecc_mode=g["ecc_mode"] if isinstance(g["ecc_mode"], str) else None,
            ecc_volatile_uncorrected=g["ecc_unc"] if isinstance(g["ecc_unc"], int) else None,
            temperature_c=lenient_float(str(g["temp"])), utilization_gpu_pct=lenient_float(str(g["util"])),
            performance_state=na_to_none(str(g["perf"])), power_draw_w=lenient_float(str(g["pwr"])),
            power_limit_w=lenient_float(str(g["cap"])),
            processes=proc_counts.get(idx, 0) if section == "procs" else None,
        ))
    return NvidiaSmiReport.build(TOOL_TABLE, driver, cuda, None, out)
