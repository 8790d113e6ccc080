"""nccl-tests output (``all_reduce_perf``, ``alltoall_perf``, ... ) including NCCL_DEBUG=INFO lines.

Handles what launchers do to the text: Open MPI ``--tag-output`` prefixes (``[1,0]<stdout>:``, which
can also appear in the middle of a row when ranks interleave), Slurm ``srun -l`` labels (``0: ``),
the old table layout (an ``error`` column, no ``root``), several collectives in one log, header-less
tails, and nccl-tests built without MPI but started under ``mpirun`` (several independent 1-rank runs
whose output interleaves; reported as ``concurrent_runs > 1``).

From NCCL_DEBUG=INFO lines it extracts the network plugin chosen (``NET/IB``, ``NET/OFI``,
``NET/Socket``), intra-node transports (``P2P/IPC``, ``P2P/CUMEM``, ``SHM``...) and whether NVLS
(NVLink SHARP) was set up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ._text import Line, numbered_lines, require_text, strict_float, strict_int
from .errors import ParseError

__all__ = ["NcclRank", "NcclRow", "NcclTestRun", "NcclTestsReport", "parse_nccl_tests"]

TOOL = "nccl-tests"

_MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
_SRUN_LABEL = re.compile(r"^\s*\d+: ")
_NTHREAD = re.compile(r"^#\s*nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)\s+minBytes\s+(?P<min>\d+)\s+"
                      r"maxBytes\s+(?P<max>\d+)")
_VERSION = re.compile(r"^#\s*nccl-tests version (?P<v>\S+)")
_COLL_START = re.compile(r"^#\s*Collective test starting:\s*(?P<name>\S+)")
_RANK = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+(?P<group>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
                   r"device\s+(?P<dev>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$")
_COLS = re.compile(r"^#\s+size\s+count\s+type\s+redop\s+")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<ok>\S+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<v>\S+)")
_ROWISH = re.compile(r"^\s*\d+\s+\d+\s+\S+")
_NCCL_LINE = re.compile(r"NCCL (?P<level>INFO|WARN|TRACE) (?P<msg>.*)$")
_USING_NET = re.compile(r"^Using network (?P<net>.+?)\s*$")
_NET_IB_DEVS = re.compile(r"^NET/IB : Using (?P<devs>.*?)(?:;|$)")
_NET_SOCKET = re.compile(r"^NET/Socket : Using")
_OFI_PROVIDER = re.compile(r"^NET/OFI Selected [Pp]rovider is (?P<prov>\S+)(?: \(found (?P<n>\d+) nics\))?")
_VIA = re.compile(r" via (?P<via>\S+(?: Libfabric)?(?:/\S+)*)")
_NCCL_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
_NRANKS = re.compile(r"\bnranks (?P<n>\d+)\b")
_FAILURE = re.compile(r"Test (?:NCCL|CUDA) failure|Test failure")

_NET_NAMES = {"IB": "NET/IB", "IBext": "NET/IB", "Socket": "NET/Socket", "AWS Libfabric": "NET/OFI",
              "Libfabric": "NET/OFI", "OFI": "NET/OFI"}


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    oop_time_us: float
    oop_algbw_gbs: float
    oop_busbw_gbs: float
    oop_wrong: int | None
    ip_time_us: float
    ip_algbw_gbs: float
    ip_busbw_gbs: float
    ip_wrong: int | None
    #: old nccl-tests printed a max relative error instead of a #wrong count.
    oop_error: float | None = None
    ip_error: float | None = None

    @property
    def busbw_gbs(self) -> float:
        return max(self.oop_busbw_gbs, self.ip_busbw_gbs)


@dataclass(frozen=True)
class NcclRank:
    rank: int
    host: str
    pid: int
    device: int
    bus_id: str
    gpu_name: str


@dataclass(frozen=True)
class NcclTestRun:
    collective: str | None
    rows: tuple[NcclRow, ...] = ()
    ranks: tuple[NcclRank, ...] = ()
    avg_busbw_gbs: float | None = None
    oob_values: int | None = None
    oob_ok: bool | None = None
    n_threads: int | None = None
    n_gpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    #: "new" (root, #wrong) or "old" (error column, no root); None when no column header was seen.
    layout: str | None = None
    #: >1 when several independent runs printed into the same log at once (see module docstring).
    concurrent_runs: int = 1
    wrong_total: int = 0
    peak_busbw_gbs: float | None = None
    largest_size_bytes: int | None = None
    busbw_at_largest_gbs: float | None = None


@dataclass(frozen=True)
class NcclTestsReport:
    runs: tuple[NcclTestRun, ...]
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    #: "NET/IB", "NET/OFI", "NET/Socket", ... from "Using network X"; None without NCCL_DEBUG=INFO.
    net_transport: str | None = None
    network_plugin_name: str | None = None
    ofi_provider: str | None = None
    ofi_nics: int | None = None
    ib_devices: tuple[str, ...] = ()
    #: distinct "via" transports seen on channel setup lines, e.g. ("NET/OFI/GDRDMA", "P2P/CUMEM").
    transports: tuple[str, ...] = ()
    nvls_available: bool = False
    #: NCCL connected NVLS (NVLink SHARP) buffers, so NVLS algorithms were available to the collective.
    nvls_connected: bool = False
    collnet_used: bool = False
    nranks: int | None = None
    debug_lines: int = 0
    warnings: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()


@dataclass
class _Run:
    collective: str | None = None
    rows: list[NcclRow] = field(default_factory=list)
    ranks: list[NcclRank] = field(default_factory=list)
    avg: float | None = None
    oob: int | None = None
    oob_ok: bool | None = None
    params: dict[str, int] = field(default_factory=dict)
    layout: str | None = None
    headers: int = 0
    col_headers: int = 0

    def empty(self) -> bool:
        return not self.rows and self.avg is None


def _clean(text: str) -> str:
    text = _MPI_TAG.sub("", text)
    return _SRUN_LABEL.sub("", text, count=1)


def _wrong(tool: str, tok: str, ln: Line) -> int | None:
    if tok == "N/A":
        return None
    return strict_int(tool, tok, ln, "#wrong")


def _row(ln: Line, text: str, layout: str | None) -> tuple[NcclRow, str]:
    t = text.split()
    if layout is None:
        layout = "new" if len(t) == 13 else "old" if len(t) == 12 else None
    want = 13 if layout == "new" else 12
    if layout is None or len(t) != want:
        raise ln.fail(TOOL, f"result row has {len(t)} fields, expected {want if layout else '12 or 13'}")
    size = strict_int(TOOL, t[0], ln, "size")
    count = strict_int(TOOL, t[1], ln, "count")

    def f(v: str, what: str) -> float:
        return strict_float(TOOL, v, ln, what)

    if layout == "new":
        root = strict_int(TOOL, t[4], ln, "root")
        oop, ip = t[5:9], t[9:13]
        return NcclRow(size, count, t[2], t[3], root,
                       f(oop[0], "time"), f(oop[1], "algbw"), f(oop[2], "busbw"), _wrong(TOOL, oop[3], ln),
                       f(ip[0], "time"), f(ip[1], "algbw"), f(ip[2], "busbw"), _wrong(TOOL, ip[3], ln)), layout
    oop, ip = t[4:8], t[8:12]
    return NcclRow(size, count, t[2], t[3], None,
                   f(oop[0], "time"), f(oop[1], "algbw"), f(oop[2], "busbw"), None,
                   f(ip[0], "time"), f(ip[1], "algbw"), f(ip[2], "busbw"), None,
                   oop_error=None if oop[3] == "N/A" else f(oop[3], "error"),
                   ip_error=None if ip[3] == "N/A" else f(ip[3], "error")), layout


def _freeze(r: _Run) -> NcclTestRun:
    rows = tuple(r.rows)
    wrong = sum((x.oop_wrong or 0) + (x.ip_wrong or 0) for x in rows)
    largest = max(rows, key=lambda x: x.size_bytes) if rows else None
    return NcclTestRun(
        collective=r.collective, rows=rows, ranks=tuple(r.ranks), avg_busbw_gbs=r.avg,
        oob_values=r.oob, oob_ok=r.oob_ok, n_threads=r.params.get("nthread"), n_gpus=r.params.get("ngpus"),
        min_bytes=r.params.get("min"), max_bytes=r.params.get("max"), layout=r.layout,
        concurrent_runs=max(1, r.headers, r.col_headers), wrong_total=wrong,
        peak_busbw_gbs=max((x.busbw_gbs for x in rows), default=None),
        largest_size_bytes=largest.size_bytes if largest else None,
        busbw_at_largest_gbs=largest.busbw_gbs if largest else None,
    )


def parse_nccl_tests(text: str) -> NcclTestsReport:
    """Parse one nccl-tests log (one or more collectives, optional NCCL_DEBUG lines)."""
    require_text(TOOL, text)
    runs: list[_Run] = []
    cur: _Run | None = None
    version = nccl_version = net = plugin = ofi_provider = None
    ofi_nics: int | None = None
    ib_devs: list[str] = []
    transports: set[str] = set()
    nvls_avail = nvls_connected = collnet = False
    nranks: int | None = None
    debug = 0
    warnings: list[str] = []
    failures: list[str] = []
    saw_anything = False

    def new_run() -> _Run:
        r = _Run()
        runs.append(r)
        return r

    for ln in numbered_lines(text):
        s = _clean(ln.text).rstrip()
        if not s.strip():
            continue
        nm = _NCCL_LINE.search(s)
        if nm and not s.lstrip().startswith("#"):
            debug += 1
            msg = nm.group("msg").strip()
            if nm.group("level") == "WARN":
                if len(warnings) < 20:
                    warnings.append(msg)
                continue
            if (m := _USING_NET.match(msg)) is not None:
                plugin = m.group("net")
                net = _NET_NAMES.get(plugin, f"NET/{plugin}")
            elif (m := _NET_IB_DEVS.match(msg)) is not None:
                for d in m.group("devs").split():
                    name = re.sub(r"^\[\d+\]", "", d)
                    if re.fullmatch(r"[\w.-]+:\d+/\w+", name) and name not in ib_devs:
                        ib_devs.append(name)
            elif _NET_SOCKET.match(msg) and net is None:
                net = "NET/Socket"
            elif (m := _OFI_PROVIDER.match(msg)) is not None:
                ofi_provider = m.group("prov")
                ofi_nics = int(m.group("n")) if m.group("n") else ofi_nics
            elif (m := _NCCL_VERSION.match(msg)) is not None:
                nccl_version = m.group("v")
            if "NVLS multicast support is available" in msg:
                nvls_avail = True
            if msg.startswith(("Connected NVLS", "NVLS comm")) or " via NVLS" in msg:
                nvls_connected = True
            if msg.startswith("Connected CollNet") or ("CollNet" in msg and "via" in msg):
                collnet = True
            if (mv := _VIA.search(msg)) is not None:
                via = mv.group("via")
                # "NET/AWS Libfabric/0/GDRDMA" -> "NET/OFI/GDRDMA"; "NET/IB/1/GDRDMA" -> "NET/IB/GDRDMA"
                parts = [p for p in via.split("/") if not p.isdigit()]
                if parts and parts[0] == "NET" and len(parts) > 1:
                    parts[1] = _NET_NAMES.get(parts[1], parts[1]).removeprefix("NET/")
                transports.add("/".join(parts))
            if (mr := _NRANKS.search(msg)) is not None:
                nranks = max(nranks or 0, int(mr.group("n")))
            continue
        if _FAILURE.search(s):
            failures.append(s.strip()[:300])
            continue
        body = s.lstrip()
        if body.startswith("#"):
            saw_anything = True
            if (m := _VERSION.match(body)) is not None:
                version = m.group("v")
                if cur is None or not cur.empty():
                    cur = new_run()
            elif (m := _COLL_START.match(body)) is not None:
                if cur is None or (not cur.empty() and cur.collective is not None) or cur.rows:
                    cur = new_run()
                cur.collective = m.group("name")
            elif (m := _NTHREAD.match(body)) is not None:
                if cur is None or not cur.empty():
                    cur = new_run()
                cur.headers += 1
                cur.params = {k: int(v) for k, v in m.groupdict().items()}
            elif (m := _RANK.match(body)) is not None:
                if cur is None:
                    cur = new_run()
                cur.ranks.append(NcclRank(int(m.group("rank")), m.group("host"), int(m.group("pid")),
                                          int(m.group("dev")), m.group("bus"), m.group("name")))
            elif _COLS.match(body):
                if cur is None or cur.avg is not None:
                    cur = new_run()
                cur.col_headers += 1
                cur.layout = "new" if "root" in body.split() else "old"
            elif (m := _OOB.match(body)) is not None:
                if cur is None:
                    raise ln.fail(TOOL, "'Out of bounds values' before any result")
                cur.oob = (cur.oob or 0) + int(m.group("n"))
                cur.oob_ok = (cur.oob_ok is not False) and m.group("ok") == "OK"
            elif (m := _AVG.match(body)) is not None:
                if cur is None:
                    raise ln.fail(TOOL, "'Avg bus bandwidth' before any result")
                if cur.avg is None:
                    cur.avg = strict_float(TOOL, m.group("v"), ln, "Avg bus bandwidth")
            continue
        if _ROWISH.match(s):
            saw_anything = True
            if cur is None:
                cur = new_run()
            row, cur.layout = _row(ln, s, cur.layout)
            cur.rows.append(row)
            continue
        # Anything else (launcher chatter, hostnames, warnings from other tools) is ignored.
    if not saw_anything:
        raise ParseError(TOOL, "no nccl-tests header, column header or result row found")
    if not failures and not any(r.rows for r in runs):
        # A run that started prints a row per size, or a "Test ... failure" line; '#' lines alone are
        # a log cut off before its results (or not nccl-tests output at all).
        raise ParseError(TOOL, "no result rows (the output ends before the first size row)")
    frozen = tuple(_freeze(r) for r in runs if r.rows or r.avg is not None or r.ranks or r.collective)
    return NcclTestsReport(
        runs=frozen, nccl_tests_version=version, nccl_version=nccl_version, net_transport=net,
        network_plugin_name=plugin, ofi_provider=ofi_provider, ofi_nics=ofi_nics, ib_devices=tuple(ib_devs),
        transports=tuple(sorted(transports)), nvls_available=nvls_avail, nvls_connected=nvls_connected,
        collnet_used=collnet, nranks=nranks, debug_lines=debug, warnings=tuple(warnings),
        failures=tuple(failures),
    )
