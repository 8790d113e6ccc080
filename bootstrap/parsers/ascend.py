"""Huawei Ascend tools: ``npu-smi info`` (device table and ``-t common/memory/...`` key-value views),
``hccn_tool`` (NPU NIC: ``-ip -g``, ``-ping -g``, ``-status -g``, ``-link -g``, ``-net_health -g``) and the
``hccl_test`` performance table.

``npu-smi info -t topo`` lives in :mod:`.topo` (same matrix layout as ``nvidia-smi topo -m``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._text import Line, lenient_float, lenient_int, numbered_lines, require_text, strict_float, strict_int
from .errors import ParseError

__all__ = [
    "HcclTestReport",
    "HcclTestRow",
    "HccnIp",
    "HccnLink",
    "HccnNetHealth",
    "HccnPing",
    "HccnPortStatus",
    "NpuInfo",
    "NpuSmiDetail",
    "NpuSmiReport",
    "parse_hccl_test",
    "parse_hccn_tool",
    "parse_npu_smi",
    "parse_npu_smi_detail",
]

TOOL_NPU = "npu-smi info"
TOOL_NPU_DETAIL = "npu-smi info -t"
TOOL_HCCN = "hccn_tool"
TOOL_HCCL = "hccl_test"


# ------------------------------------------------------------------------------ npu-smi info table


@dataclass(frozen=True)
class NpuInfo:
    npu_id: int
    name: str
    health: str
    power_w: float | None
    temp_c: float | None
    chip_id: int | None = None
    bus_id: str | None = None
    aicore_pct: float | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None


@dataclass(frozen=True)
class NpuSmiReport:
    version: str | None
    npus: tuple[NpuInfo, ...] = ()
    npu_count: int = 0
    processes: int | None = None


_NPU_VERSION = re.compile(r"npu-smi\s+(?P<v>\S+)\s+Version:\s*(?P<v2>\S+)")
_NPU_ROW1 = re.compile(r"^\s*(?P<id>\d+)\s+(?P<name>\S.*?)\s*$")
_NPU_ROW2_ID = re.compile(r"^\s*(?P<chip>\d+)\s*$")
_USED_TOTAL = re.compile(r"(?P<u>\d+)\s*/\s*(?P<t>\d+)")
_BUS = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")


def parse_npu_smi(text: str) -> NpuSmiReport:
    """Parse the ``npu-smi info`` device table (two rows per NPU chip)."""
    require_text(TOOL_NPU, text)
    version: str | None = None
    npus: list[NpuInfo] = []
    state = "pre"  # pre -> devices -> procs
    pending: NpuInfo | None = None
    procs = 0
    saw_proc_table = False
    for ln in numbered_lines(text):
        s = ln.text.strip()
        if not s:
            continue
        if s.startswith("+"):
            if pending is not None:
                raise ln.fail(TOOL_NPU, "NPU row without its second (chip/bus) row")
            if state == "pre" and s.startswith("+="):
                state = "devices"
            continue
        if not (s.startswith("|") and s.endswith("|")):
            raise ln.fail(TOOL_NPU, "line outside the table")
        cells = [c.strip() for c in s[1:-1].split("|")]
        if state == "pre":
            m = _NPU_VERSION.search(s)
            if m:
                version = m.group("v2")
            continue
        if state == "devices" and len(cells) == 3 and "Process id" in cells[1]:
            state, saw_proc_table = "procs", True
            continue
        if state == "procs":
            if len(cells) >= 2 and cells[1].isdigit():
                procs += 1
            continue
        if len(cells) != 3:
            if len(cells) >= 3 and "Process" in s:
                state, saw_proc_table = "procs", True
                continue
            raise ln.fail(TOOL_NPU, f"device row has {len(cells)} cells, expected 3")
        if pending is None:
            m1 = _NPU_ROW1.match(cells[0])
            if not m1:
                raise ln.fail(TOOL_NPU, "first NPU row does not start with '<id> <name>'")
            nums = cells[2].split()
            if len(nums) < 2:
                raise ln.fail(TOOL_NPU, "first NPU row lacks power and temperature")
            pending = NpuInfo(int(m1.group("id")), m1.group("name"), cells[1],
                              lenient_float(nums[0]), lenient_float(nums[1]))
            continue
        m2 = _NPU_ROW2_ID.match(cells[0])
        if not m2 or not _BUS.match(cells[1]):
            raise ln.fail(TOOL_NPU, "second NPU row is not '<chip> | <bus id> | ...'")
        pairs = _USED_TOTAL.findall(cells[2])
        head = cells[2].split()
        if len(pairs) < 2 or not head:
            raise ln.fail(TOOL_NPU, "second NPU row lacks memory and HBM usage")
        npus.append(NpuInfo(
            pending.npu_id, pending.name, pending.health, pending.power_w, pending.temp_c,
            chip_id=int(m2.group("chip")), bus_id=cells[1], aicore_pct=lenient_float(head[0]),
            memory_used_mb=int(pairs[0][0]), memory_total_mb=int(pairs[0][1]),
            hbm_used_mb=int(pairs[1][0]), hbm_total_mb=int(pairs[1][1])))
        pending = None
    if pending is not None:
        raise ParseError(TOOL_NPU, f"NPU {pending.npu_id} has no second (chip/bus) row")
    if state == "pre":
        raise ParseError(TOOL_NPU, "no device table (no '+====' header rule)")
    if not npus:  # the table npu-smi prints always has a row pair per NPU chip
        raise ParseError(TOOL_NPU, "no NPU rows in the device table (the output ends before the first NPU)")
    count = len({n.npu_id for n in npus})
    return NpuSmiReport(version, tuple(npus), count, procs if saw_proc_table else None)


# ------------------------------------------------------------------------- npu-smi info -t <type>


@dataclass(frozen=True)
class NpuSmiDetail:
    """``npu-smi info -t common|memory|usages|board|... -i N``: key/value groups (keys may repeat)."""

    npu_id: int | None
    chip_count: int | None
    groups: tuple[tuple[tuple[str, str], ...], ...]
    hbm_capacity_mb: int | None = None
    hbm_usage_pct: float | None = None
    aicore_count: int | None = None
    aicore_freq_mhz: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None


_DETAIL_KV = re.compile(r"^\s*(?P<key>\S[^:]*?)\s*:\s*(?P<value>.*?)\s*$")


def parse_npu_smi_detail(text: str) -> NpuSmiDetail:
    """Parse ``npu-smi info -t <type> -i <id>`` output (``Key : value`` lines in blank-line groups)."""
    require_text(TOOL_NPU_DETAIL, text)
    groups: list[list[tuple[str, str]]] = [[]]
    for ln in numbered_lines(text):
        if not ln.text.strip():
            if groups[-1]:
                groups.append([])
            continue
        m = _DETAIL_KV.match(ln.text)
        if not m or (" : " not in ln.text and "\t:" not in ln.text):
            raise ln.fail(TOOL_NPU_DETAIL, "expected 'Key : value'")
        groups[-1].append((m.group("key"), m.group("value")))
    groups = [g for g in groups if g]
    flat = [kv for g in groups for kv in g]
    if not flat:
        raise ParseError(TOOL_NPU_DETAIL, "no 'Key : value' lines")

    def first(key: str) -> str | None:
        return next((v for k, v in flat if k.lower() == key.lower()), None)

    npu_id = lenient_int(first("NPU ID"))
    if npu_id is None:
        raise ParseError(TOOL_NPU_DETAIL, "no 'NPU ID' line")
    return NpuSmiDetail(
        npu_id=npu_id, chip_count=lenient_int(first("Chip Count")),
        groups=tuple(tuple(g) for g in groups),
        hbm_capacity_mb=lenient_int(first("HBM Capacity(MB)")),
        hbm_usage_pct=lenient_float(first("HBM Usage Rate(%)")),
        aicore_count=lenient_int(first("Aicore Count")),
        aicore_freq_mhz=lenient_int(first("Aicore Freq(MHZ)")),
        temperature_c=lenient_float(first("Temperature(C)")),
        power_w=lenient_float(first("NPU Real-time Power(W)")),
    )


# ---------------------------------------------------------------------------------------- hccn_tool


@dataclass(frozen=True)
class HccnIp:
    ipaddr: str
    netmask: str | None


@dataclass(frozen=True)
class HccnPing:
    device: int | None
    target: str
    transmitted: int
    received: int
    loss_pct: float
    rtt_ms: tuple[float, ...] = ()


@dataclass(frozen=True)
class HccnPortStatus:
    """``hccn_tool -i N -status -g``: the NPU NIC's ethtool-style settings."""

    netdev: str
    speed_mbps: int | None
    duplex: str | None
    link_detected: bool | None
    port: str | None = None


@dataclass(frozen=True)
class HccnLink:
    status: str


@dataclass(frozen=True)
class HccnNetHealth:
    status: str


HccnResult = HccnIp | HccnPing | HccnPortStatus | HccnLink | HccnNetHealth


_PING_HEAD = re.compile(r"^device (?P<dev>\d+) PING (?P<target>\S+)\s*$")
_PING_RECV = re.compile(r"^recv seq=(?P<seq>\d+),\s*time=(?P<t>[\d.]+)\s*ms\s*$")
_PING_SUM = re.compile(r"^(?P<tx>\d+) packets transmitted, (?P<rx>\d+) received, (?P<loss>[\d.]+)% packet loss")
_STATUS_HEAD = re.compile(r"^Netdev status:\s*Settings for (?P<dev>\S+):\s*$")
_ETHTOOL_KV = re.compile(r"^\s+(?P<key>[A-Za-z][A-Za-z -]*?):\s*(?P<value>.*?)\s*$")


def parse_hccn_tool(text: str) -> HccnResult:
    """Parse one ``hccn_tool -i N <cmd> -g`` output; which command is told by the text itself."""
    require_text(TOOL_HCCN, text)
    lines = [ln for ln in numbered_lines(text) if ln.text.strip()]
    first = lines[0]
    s0 = first.text.strip()
    if s0.startswith("ipaddr:"):
        return _hccn_ip(lines)
    if _PING_HEAD.match(s0):
        return _hccn_ping(lines)
    if _STATUS_HEAD.match(s0):
        return _hccn_status(lines)
    low = s0.lower()
    if low.startswith("link status:"):
        if len(lines) > 1:
            raise lines[1].fail(TOOL_HCCN, "unexpected line after 'link status:'")
        return HccnLink(s0.split(":", 1)[1].strip())
    if low.startswith("net health status:"):
        if len(lines) > 1:
            raise lines[1].fail(TOOL_HCCN, "unexpected line after 'net health status:'")
        return HccnNetHealth(s0.split(":", 1)[1].strip())
    raise first.fail(TOOL_HCCN, "not a known hccn_tool output (-ip, -ping, -status, -link, -net_health)")


def _hccn_ip(lines: list[Line]) -> HccnIp:
    vals: dict[str, str] = {}
    for ln in lines:
        m = re.match(r"^(ipaddr|netmask):\s*(\S+)\s*$", ln.text.strip())
        if not m:
            raise ln.fail(TOOL_HCCN, "expected 'ipaddr:' or 'netmask:'")
        vals[m.group(1)] = m.group(2)
    if "ipaddr" not in vals:
        raise ParseError(TOOL_HCCN, "no ipaddr line")
    return HccnIp(vals["ipaddr"], vals.get("netmask"))


def _hccn_ping(lines: list[Line]) -> HccnPing:
    head = _PING_HEAD.match(lines[0].text.strip())
    assert head is not None
    rtts: list[float] = []
    summary: re.Match[str] | None = None
    for ln in lines[1:]:
        s = ln.text.strip()
        if summary is not None:
            raise ln.fail(TOOL_HCCN, "line after the ping summary")
        if (m := _PING_RECV.match(s)) is not None:
            rtts.append(strict_float(TOOL_HCCN, m.group("t"), ln, "ping time"))
            continue
        if (m := _PING_SUM.match(s)) is not None:
            summary = m
            continue
        if s.startswith(("timeout", "recv timeout", "no reply")):
            continue
        raise ln.fail(TOOL_HCCN, "expected 'recv seq=..' or the packets transmitted summary")
    if summary is None:
        raise ParseError(TOOL_HCCN, "ping output has no 'packets transmitted' summary")
    return HccnPing(int(head.group("dev")), head.group("target"), int(summary.group("tx")),
                    int(summary.group("rx")), float(summary.group("loss")), tuple(rtts))


def _hccn_status(lines: list[Line]) -> HccnPortStatus:
    head = _STATUS_HEAD.match(lines[0].text.strip())
    assert head is not None
    values: dict[str, str] = {}
    for ln in lines[1:]:
        m = _ETHTOOL_KV.match(ln.text)
        if m:
            values.setdefault(m.group("key"), m.group("value"))
            continue
        if ln.text[:1].isspace():
            continue  # continuation of a multi-line value (link mode lists, message level names)
        raise ln.fail(TOOL_HCCN, "expected an indented ethtool 'Key: value' line")
    speed_text = values.get("Speed")
    speed: int | None = None
    if speed_text is not None and speed_text not in ("Unknown!", "Unknown"):
        m = re.match(r"^(\d+)Mb/s$", speed_text)
        if not m:
            raise ParseError(TOOL_HCCN, f"Speed is not '<n>Mb/s': {speed_text!r}")
        speed = int(m.group(1))
    link = values.get("Link detected")
    return HccnPortStatus(head.group("dev"), speed, values.get("Duplex"),
                          None if link is None else link.lower() == "yes", values.get("Port"))


# ---------------------------------------------------------------------------------------- hccl_test


@dataclass(frozen=True)
class HcclTestRow:
    size_bytes: int
    avg_time_us: float
    algbw_gbs: float
    check_result: str


@dataclass(frozen=True)
class HcclTestReport:
    """``hccl_test`` (e.g. ``all_reduce_test``) table. Its bandwidth column is ALGORITHM bandwidth."""

    rows: tuple[HcclTestRow, ...]
    peak_algbw_gbs: float | None = None
    largest_size_bytes: int | None = None
    algbw_at_largest_gbs: float | None = None
    failed_checks: int = 0


_HCCL_HEAD = re.compile(r"^data_size\(Bytes\):\s*\|\s*a(?:ve)?g_time\(us\):\s*\|\s*alg_bandwidth\(GB/s\):\s*\|"
                        r"\s*check_result:\s*$")


def parse_hccl_test(text: str) -> HcclTestReport:
    """Parse the ``data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:`` table."""
    require_text(TOOL_HCCL, text)
    rows: list[HcclTestRow] = []
    in_table = False
    for ln in numbered_lines(text):
        s = ln.text.strip()
        if not s:
            continue
        if _HCCL_HEAD.match(s):
            in_table = True
            continue
        if not in_table:
            continue  # launcher / environment chatter before the table
        cells = [c.strip() for c in s.split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            if re.match(r"^\d", s):
                raise ln.fail(TOOL_HCCL, "result row is not 'size | time | algbw | check'")
            in_table = False  # the table ended; later chatter is ignored
            continue
        rows.append(HcclTestRow(strict_int(TOOL_HCCL, cells[0], ln, "data_size"),
                                strict_float(TOOL_HCCL, cells[1], ln, "aveg_time"),
                                strict_float(TOOL_HCCL, cells[2], ln, "alg_bandwidth"), cells[3]))
    if not rows:
        raise ParseError(TOOL_HCCL, "no hccl_test result table (header 'data_size(Bytes): | ...')")
    largest = max(rows, key=lambda r: r.size_bytes)
    return HcclTestReport(tuple(rows), max(r.algbw_gbs for r in rows), largest.size_bytes, largest.algbw_gbs,
                          sum(1 for r in rows if r.check_result.lower() == "failed"))
