"""The acceptance gate: parsed evidence from one node + an offering baseline -> a Verdict.

``judge(offering, facts)`` takes ``facts`` as ``{kind: parsed result}`` (a kind may map to a list of
results, e.g. one ``hccn-tool`` output per NPU NIC) and reports every check that applies to the
offering as ``pass``, ``warn`` (passed, worth a look), ``fail`` or ``skip``. A check is *skipped* when
it could not be judged: no evidence for it, or no baseline value to compare with (the measurement is
still reported). A skipped check never counts as passed. The *mandatory* checks (the baseline's
``required`` list, or the spec's ``acceptance.mandatory``) must pass: a mandatory check that was
skipped fails the node, its reason saying it was skipped and why. The verdict passes when no check
failed.

Check names (stable; used in ``required`` and in reports):

===================  ==================================================================================
gpu-count            number of GPUs/NPUs (nvidia-smi -q -x / -q / table, npu-smi info, topo as fallback)
gpu-model            every device name matches the offering's ``gpu.name_regex``
gpu-memory           every device has at least ``gpu.min_memory_mib``
gpu-ecc              ECC enabled (when required) and volatile uncorrected ECC count within the limit
gpu-memory-health    no page retirement / row remap pending, no remap failure (warns on remapped rows)
gpu-persistence      persistence mode (a warning unless ``gpu.require_persistence_mode``)
gpu-fabric-state     NVSwitch fabric registration "Completed" (H100-era ``Fabric State``)
gpu-interconnect     topology link between every GPU pair is ``interconnect.topo_link`` (NV18, HCCS...)
nvlink-links         every GPU has ``links_per_gpu`` active NVLinks at ``link_gbs``
fabric-ports         scale-out ports: count, state and rate for IB / RoCE / EFA / eRDMA / NPU RoCE
nccl-correctness     nccl-tests #wrong == 0 and "Out of bounds values : 0 OK"; hccl_test check_result
nccl-launch          the log is one real multi-rank run (not N independent 1-rank runs)
nccl-transport       NCCL's network plugin fits the fabric (never NET/Socket on an RDMA fabric)
allreduce-busbw      all_reduce bus bandwidth >= threshold x baseline (hccl_test algbw normalised)
dcgm-diag            dcgmi diag has no failed test
npu-health           npu-smi reports every NPU as OK
npu-nic              hccn_tool: link up, net health, ping without loss
storage-raid         /proc/mdstat arrays not degraded
storage-nvme         at least ``storage.nvme_count`` local NVMe disks
===================  ==================================================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from metalfleet.providers.checks import ACCEPTANCE_CHECKS
from metalfleet.providers.errors import InvalidSpecError

from ..parsers.ascend import (
    HcclTestReport,
    HccnIp,
    HccnLink,
    HccnNetHealth,
    HccnPing,
    HccnPortStatus,
    NpuSmiDetail,
    NpuSmiReport,
)
from ..parsers.dcgm import DcgmDiagReport
from ..parsers.efa import FiInfoReport
from ..parsers.infiniband import Ibdev2netdevReport, IbstatReport, IbvDevinfoReport
from ..parsers.nccl_tests import NcclTestRun, NcclTestsReport
from ..parsers.nvidia_smi import NvidiaSmiReport
from ..parsers.nvlink import NvlinkReport
from ..parsers.storage import LsblkReport, MdstatReport, NvmeListReport
from ..parsers.topo import TopoMatrix
from .baselines import resolve_baseline

__all__ = ["CHECK_NAMES", "EXTRA_CHECKS", "NCCL_CHECKS", "CheckResult", "Verdict", "applicable_checks", "judge"]

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
RDMA_FABRICS = {"efa", "infiniband", "roce", "erdma"}

#: Every check, in report order (the list lives beside the spec, which validates names against it).
CHECK_NAMES: tuple[str, ...] = ACCEPTANCE_CHECKS

#: The NCCL checks (what a run across nodes is judged on).
NCCL_CHECKS = ("nccl-correctness", "nccl-launch", "nccl-transport", "allreduce-busbw")
#: Checks reported only when their evidence is there or was asked for (not part of every node's judgement).
EXTRA_CHECKS = ("dcgm-diag", "storage-raid")

#: The baseline value a check compares with (a check whose value is null is skipped).
_BASELINE_FIELD = {
    "gpu-count": "gpu.count", "gpu-model": "gpu.name_regex", "gpu-memory": "gpu.min_memory_mib",
    "gpu-interconnect": "interconnect.topo_link", "nvlink-links": "interconnect.links_per_gpu",
    "fabric-ports": "fabric.ports", "storage-nvme": "storage.nvme_count",
}

#: What to hand in when a check has no evidence.
_EVIDENCE_HINT = {
    "gpu-count": "nvidia-smi -q -x (or nvidia-smi -q / nvidia-smi; npu-smi info on Ascend)",
    "gpu-model": "nvidia-smi -q -x (or npu-smi info on Ascend)",
    "gpu-memory": "nvidia-smi -q -x (or npu-smi info on Ascend)",
    "gpu-ecc": "nvidia-smi -q -x",
    "gpu-memory-health": "nvidia-smi -q -x",
    "gpu-interconnect": "nvidia-smi topo -m (npu-smi info -t topo on Ascend)",
    "nvlink-links": "nvidia-smi nvlink -s",
    "fabric-ports": "ibstat / ibv_devinfo / fi_info -p efa / hccn_tool -status, depending on the fabric",
    "nccl-correctness": "an all_reduce_perf log",
    "nccl-launch": "an all_reduce_perf log",
    "nccl-transport": "an all_reduce_perf log run with NCCL_DEBUG=INFO",
    "allreduce-busbw": "an all_reduce_perf log (hccl_test all_reduce_test on Ascend)",
    "dcgm-diag": "dcgmi diag -r 2",
    "npu-health": "npu-smi info",
    "npu-nic": "hccn_tool -i N -link -g / -ping -g",
    "storage-raid": "/proc/mdstat",
    "storage-nvme": "lsblk --json or nvme list",
}


@dataclass(frozen=True)
class CheckResult:
    name: str
    #: True for "pass" and "warn" only: a skipped check is not a passed one.
    passed: bool
    reason: str
    measured: Any = None
    expected: Any = None
    #: "pass", "fail", "warn" (passed, but worth a look) or "skip" (not judged: no evidence or no baseline).
    status: str = PASS
    #: The node must pass this check (a skip of it is a failure).
    mandatory: bool = False

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    @property
    def skipped(self) -> bool:
        return self.status == SKIP


@dataclass(frozen=True)
class Verdict:
    offering: str
    #: No check failed (a mandatory check that was skipped is a failed one).
    passed: bool
    checks: tuple[CheckResult, ...]
    threshold: float
    node: str | None = None
    #: the evidence kinds that were judged
    evidence: tuple[str, ...] = ()

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status == FAIL)

    @property
    def skipped(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.status == SKIP)

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)


def _ok(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, True, reason, measured, expected, PASS)


def _fail(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, False, reason, measured, expected, FAIL)


def _warn(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, True, reason, measured, expected, WARN)


def _skip(name: str, reason: str, measured: Any = None, expected: Any = None) -> CheckResult:
    return CheckResult(name, False, reason, measured, expected, SKIP)


def _listing(items: list[str], limit: int = 6) -> str:
    if len(items) <= limit:
        return "; ".join(items)
    return "; ".join(items[:limit]) + f"; and {len(items) - limit} more"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ------------------------------------------------------------------------------------ evidence


@dataclass
class _Evidence:
    smi: list[NvidiaSmiReport] = field(default_factory=list)
    topo: list[TopoMatrix] = field(default_factory=list)
    nvlink: list[NvlinkReport] = field(default_factory=list)
    nccl: list[NcclTestsReport] = field(default_factory=list)
    ibstat: list[IbstatReport] = field(default_factory=list)
    ibv: list[IbvDevinfoReport] = field(default_factory=list)
    ib2net: list[Ibdev2netdevReport] = field(default_factory=list)
    fi: list[FiInfoReport] = field(default_factory=list)
    dcgm: list[DcgmDiagReport] = field(default_factory=list)
    npu: list[NpuSmiReport] = field(default_factory=list)
    npu_detail: list[NpuSmiDetail] = field(default_factory=list)
    hccn: list[HccnIp | HccnLink | HccnNetHealth | HccnPing | HccnPortStatus] = field(default_factory=list)
    hccl: list[HcclTestReport] = field(default_factory=list)
    mdstat: list[MdstatReport] = field(default_factory=list)
    lsblk: list[LsblkReport] = field(default_factory=list)
    nvme: list[NvmeListReport] = field(default_factory=list)


_SLOTS: tuple[tuple[type, str], ...] = (
    (NvidiaSmiReport, "smi"), (TopoMatrix, "topo"), (NvlinkReport, "nvlink"), (NcclTestsReport, "nccl"),
    (IbstatReport, "ibstat"), (IbvDevinfoReport, "ibv"), (Ibdev2netdevReport, "ib2net"), (FiInfoReport, "fi"),
    (DcgmDiagReport, "dcgm"), (NpuSmiReport, "npu"), (NpuSmiDetail, "npu_detail"), (HcclTestReport, "hccl"),
    (MdstatReport, "mdstat"), (LsblkReport, "lsblk"), (NvmeListReport, "nvme"),
)
_HCCN_TYPES = (HccnIp, HccnLink, HccnNetHealth, HccnPing, HccnPortStatus)


def _collect(facts: Mapping[str, Any]) -> _Evidence:
    ev = _Evidence()
    for kind, value in facts.items():
        items: Iterable[Any] = value if isinstance(value, list | tuple) else [value]
        for item in items:
            if isinstance(item, _HCCN_TYPES):
                ev.hccn.append(item)
                continue
            for typ, slot in _SLOTS:
                if isinstance(item, typ):
                    getattr(ev, slot).append(item)
                    break
            else:
                raise InvalidSpecError(f"facts[{kind!r}] is a {type(item).__name__}, not a parser result",
                                       field=f"facts.{kind}")
    # Richest nvidia-smi form first: XML, then -q, then the table.
    order = {"nvidia-smi -q -x": 0, "nvidia-smi -q": 1, "nvidia-smi": 2}
    ev.smi.sort(key=lambda r: order.get(r.tool, 9))
    return ev


# ------------------------------------------------------------------------------------- checks


def _gpu_checks(b: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    g = b["gpu"]
    out: list[CheckResult] = []
    want_n = g.get("count")
    pattern = g.get("name_regex")
    model = g.get("model")
    min_mem = g.get("min_memory_mib")
    if b["accelerator"] == "ascend":
        if not ev.npu:
            topo = next((t for t in ev.topo if t.tool.startswith("npu-smi")), None)
            if topo is not None and want_n is not None:
                n = len(topo.gpus)
                out.append((_ok if n == want_n else _fail)(
                    "gpu-count", f"{'found' if n == want_n else f'expected {want_n} NPUs, found'} {n} NPUs "
                                 "(npu-smi info -t topo)", n, want_n))
            return out
        npu = ev.npu[0]
        n = npu.npu_count
        if want_n is not None:
            out.append(_ok("gpu-count", f"found {n} NPUs (npu-smi info)", n, want_n) if n == want_n else
                       _fail("gpu-count", f"expected {want_n} NPUs, found {n} (npu-smi info)", n, want_n))
        if pattern:
            bad = [f"NPU{x.npu_id} is {x.name!r}" for x in npu.npus if not re.search(pattern, x.name)]
            out.append(_fail("gpu-model", f"{_listing(bad)}, expected a name matching {pattern!r} ({model})",
                             sorted({x.name for x in npu.npus}), pattern) if bad else
                       _ok("gpu-model", f"all NPUs are {model} ({', '.join(sorted({x.name for x in npu.npus}))})",
                           sorted({x.name for x in npu.npus}), pattern))
        if min_mem:
            small = [f"NPU{x.npu_id} has {x.hbm_total_mb} MB HBM" for x in npu.npus
                     if x.hbm_total_mb is not None and x.hbm_total_mb < min_mem]
            out.append(_fail("gpu-memory", f"{_listing(small)}, expected at least {min_mem} MB", None, min_mem)
                       if small else _ok("gpu-memory", f"every NPU has at least {min_mem} MB HBM",
                                         min(x.hbm_total_mb or 0 for x in npu.npus) if npu.npus else None,
                                         min_mem))
        bad_health = [f"NPU{x.npu_id} health is {x.health}" for x in npu.npus if x.health.upper() != "OK"]
        out.append(_fail("npu-health", _listing(bad_health)) if bad_health else
                   _ok("npu-health", f"all {n} NPUs report health OK"))
        return out

    if not ev.smi:
        topo = next((t for t in ev.topo if not t.tool.startswith("npu-smi")), None)
        if topo is not None and want_n is not None:
            n = len(topo.gpus)
            out.append(_ok("gpu-count", f"found {n} GPUs (nvidia-smi topo -m)", n, want_n) if n == want_n else
                       _fail("gpu-count", f"expected {want_n} GPUs, found {n} (nvidia-smi topo -m)", n, want_n))
        return out
    rep = ev.smi[0]
    n = rep.gpu_count
    src = rep.tool
    note = ""
    if rep.attached_gpus is not None and rep.attached_gpus != len(rep.gpus):
        note = f"; the output lists only {_plural(len(rep.gpus), 'GPU section')}"
    if want_n is not None:
        out.append(_ok("gpu-count", f"found {n} GPUs ({src}){note}", n, want_n) if n == want_n else
                   _fail("gpu-count", f"expected {want_n} GPUs, found {n} ({src}){note}", n, want_n))
    named = [x for x in rep.gpus if x.name is not None]
    if pattern:
        if not named:
            out.append(_skip("gpu-model", f"{src} output carries no product names", None, pattern))
        else:
            names = sorted({x.name or "" for x in named})
            bad = [f"GPU{x.index} is {x.name!r}" for x in named if not re.search(pattern, x.name or "")]
            out.append(_fail("gpu-model", f"{_listing(bad)}, expected a name matching {pattern!r} ({model})",
                             names, pattern) if bad else
                       _ok("gpu-model", f"all GPUs are {', '.join(names)}", names, pattern))
    mems = [x for x in rep.gpus if x.memory_total_mib is not None]
    if min_mem and mems:
        small = [f"GPU{x.index} has {x.memory_total_mib} MiB" for x in mems if (x.memory_total_mib or 0) < min_mem]
        lowest = min(x.memory_total_mib or 0 for x in mems)
        out.append(_fail("gpu-memory", f"{_listing(small)}, expected at least {min_mem} MiB", lowest, min_mem)
                   if small else _ok("gpu-memory", f"every GPU has at least {min_mem} MiB ({lowest} MiB)",
                                     lowest, min_mem))
    out.extend(_ecc_checks(g, rep))
    out.extend(_persistence_fabric(b, rep))
    return out


def _ecc_checks(g: dict[str, Any], rep: NvidiaSmiReport) -> list[CheckResult]:
    out: list[CheckResult] = []
    modes = [x for x in rep.gpus if x.ecc_mode is not None]
    counts = [x for x in rep.gpus if x.ecc_volatile_uncorrected is not None]
    limit = int(g.get("max_volatile_uncorrected_ecc") or 0)
    if modes or counts:
        problems: list[str] = []
        if g.get("require_ecc_enabled"):
            off = [f"GPU{x.index}" for x in modes if x.ecc_mode != "Enabled"]
            if off:
                problems.append(f"ECC is {modes[0].ecc_mode if len(off) == len(modes) else 'disabled'} on "
                                f"{', '.join(off)}")
        over = [(x.index, x.ecc_volatile_uncorrected or 0) for x in counts if (x.ecc_volatile_uncorrected or 0) > limit]
        problems += [f"GPU{i} has {c} volatile uncorrected ECC errors (limit {limit})" for i, c in over]
        total = sum(x.ecc_volatile_uncorrected or 0 for x in counts)
        out.append(_fail("gpu-ecc", _listing(problems), total, limit) if problems else
                   _ok("gpu-ecc", f"ECC {'enabled, ' if modes else ''}{total} volatile uncorrected errors",
                       total, limit))
    pending: list[str] = []
    warned: list[str] = []
    seen = False
    for x in rep.gpus:
        if x.retired_pages_pending is not None or x.remapped_rows_pending is not None or \
                x.remapped_rows_failure is not None:
            seen = True
        if x.retired_pages_pending:
            pending.append(f"GPU{x.index} has a page retirement pending (reset the GPU)")
        if x.remapped_rows_pending:
            pending.append(f"GPU{x.index} has a row remap pending (reset the GPU)")
        if x.remapped_rows_failure:
            pending.append(f"GPU{x.index} had a row-remapping failure (RMA candidate)")
        if x.remapped_rows_uncorrectable:
            warned.append(f"GPU{x.index} remapped {x.remapped_rows_uncorrectable} rows after uncorrectable errors")
        if x.retired_pages_double_bit:
            warned.append(f"GPU{x.index} retired {x.retired_pages_double_bit} pages after double-bit errors")
    if seen:
        if pending:
            out.append(_fail("gpu-memory-health", _listing(pending + warned)))
        elif warned:
            out.append(_warn("gpu-memory-health", _listing(warned)))
        else:
            out.append(_ok("gpu-memory-health", "no pending page retirement or row remap"))
    return out


def _persistence_fabric(b: dict[str, Any], rep: NvidiaSmiReport) -> list[CheckResult]:
    out: list[CheckResult] = []
    pm = [x for x in rep.gpus if x.persistence_mode is not None]
    if pm:
        off = [f"GPU{x.index}" for x in pm if not x.persistence_mode]
        if not off:
            out.append(_ok("gpu-persistence", "persistence mode on for every GPU"))
        elif b["gpu"].get("require_persistence_mode"):
            out.append(_fail("gpu-persistence", f"persistence mode is off on {', '.join(off)}"))
        else:
            out.append(_warn("gpu-persistence", f"persistence mode is off on {', '.join(off)} "
                                                "(slower first CUDA call; enable nvidia-persistenced)"))
    states = [x for x in rep.gpus if x.fabric_state is not None]
    if states and b["interconnect"].get("kind") == "nvlink":
        bad = [f"GPU{x.index} fabric state is {x.fabric_state!r}" for x in states if x.fabric_state != "Completed"]
        out.append(_fail("gpu-fabric-state", f"{_listing(bad)}, expected 'Completed' (nvidia-fabricmanager)")
                   if bad else _ok("gpu-fabric-state", "NVSwitch fabric registration Completed on every GPU"))
    return out


def _interconnect(b: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    ic = b["interconnect"]
    want = ic.get("topo_link")
    out: list[CheckResult] = []
    ascend = b["accelerator"] == "ascend"
    topo = next((t for t in ev.topo if t.tool.startswith("npu-smi") == ascend), None)
    if want and topo is not None:
        prefix = "NPU" if ascend else "GPU"
        pairs = topo.pairs(prefix)
        bad = [f"{a}<->{c} link is {k}, expected {want}" for a, c, k in pairs if k != want]
        want_n = b["gpu"].get("count")
        n = len([d for d in topo.devices if d.startswith(prefix)])
        if want_n is not None and n != want_n:
            bad.insert(0, f"topology shows {n} {prefix}s, expected {want_n}")
        kinds = sorted({k for *_x, k in pairs})
        out.append(_fail("gpu-interconnect", _listing(bad), kinds, want) if bad else
                   _ok("gpu-interconnect", f"all {len(pairs)} {prefix} pairs linked by {want}", kinds, want))
    if ic.get("kind") == "nvlink" and ev.nvlink and not ascend:
        out.append(_nvlink(b, ev.nvlink[0]))
    return out


def _nvlink(b: dict[str, Any], rep: NvlinkReport) -> CheckResult:
    ic = b["interconnect"]
    want_links = ic.get("links_per_gpu")
    want_speed = ic.get("link_gbs")
    want_n = b["gpu"].get("count")
    bad: list[str] = []
    if want_n is not None and len(rep.gpus) != want_n:
        bad.append(f"nvlink status lists {len(rep.gpus)} GPUs, expected {want_n}")
    for g in rep.gpus:
        if g.all_inactive:
            bad.append(f"GPU{g.index}: all NVLinks inactive")
            continue
        bad += [f"GPU{g.index} link {lk.link} is inactive" for lk in g.links if lk.inactive]
        if want_links is not None and g.active_links < want_links:
            bad.append(f"GPU{g.index} has {g.active_links} active NVLinks, expected {want_links}")
        if want_speed:
            bad += [f"GPU{g.index} link {lk.link} runs at {lk.speed_gbs} GB/s, expected {want_speed}"
                    for lk in g.links if lk.speed_gbs is not None and lk.speed_gbs < want_speed * 0.99]
    active = sum(g.active_links for g in rep.gpus)
    expected = f"{want_links} x {want_speed} GB/s per GPU"
    if bad:
        return _fail("nvlink-links", _listing(bad), active, expected)
    return _ok("nvlink-links", f"{len(rep.gpus)} GPUs x {want_links} NVLinks at {want_speed} GB/s", active, expected)


def _fabric(b: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    fab = b["fabric"]
    kind = fab.get("kind")
    want = fab.get("ports")
    rate = fab.get("port_gbps")
    if kind in (None, "none") or want is None:
        return []
    if b["accelerator"] == "ascend":
        return _ascend_nics(fab, ev)
    if kind == "efa":
        return _efa(fab, ev)
    if kind == "erdma":
        return _erdma(fab, ev)
    layer = "InfiniBand" if kind == "infiniband" else "Ethernet"
    if ev.ibstat:
        rep = ev.ibstat[0]
        ports = [(d.name, pt) for d in rep.devices for pt in d.ports if pt.link_layer == layer]
        problems = [f"ibstat error: {e}" for e in rep.errors]
        if kind == "roce":
            # Front-end / storage NICs are Ethernet too: the fabric ports are the ones at the fabric rate.
            ports = [(n, pt) for n, pt in ports if rate is None or (pt.rate_gbps or 0) >= rate]
        for name, pt in ports:
            if pt.state != "Active":
                problems.append(f"{name} port {pt.number} is {pt.state}")
            elif pt.physical_state not in (None, "LinkUp"):
                problems.append(f"{name} port {pt.number} physical state is {pt.physical_state}")
            if kind == "infiniband" and rate is not None and pt.rate_gbps != rate:
                problems.append(f"{name} port {pt.number} rate is {pt.rate_gbps:g} Gb/s, expected {rate}")
        up = sum(1 for _n, pt in ports if pt.state == "Active")
        if len(ports) < want:
            at = f" at >= {rate} Gb/s" if kind == "roce" else ""
            problems.insert(0, f"found {len(ports)} {layer} ports{at}, expected {want}")
        expected = f"{want} x {rate} Gb/s {layer}"
        if problems:
            return [_fail("fabric-ports", _listing(problems), up, expected)]
        return [_ok("fabric-ports", f"{len(ports)} {layer} ports Active at {rate} Gb/s (ibstat)", up, expected)]
    if ev.ibv:
        rep2 = ev.ibv[0]
        vports = [(d.hca_id, pt) for d in rep2.devices for pt in d.ports if pt.link_layer == layer]
        problems = [f"{n} port {pt.number} is {pt.state}" for n, pt in vports if pt.state != "PORT_ACTIVE"]
        if len(vports) < want:
            problems.insert(0, f"found {len(vports)} {layer} ports, expected {want}")
        active = sum(1 for _n, pt in vports if pt.state == "PORT_ACTIVE")
        note = " (ibv_devinfo shows no link rate; rate not checked)"
        if problems:
            return [_fail("fabric-ports", _listing(problems) + note, active, want)]
        return [_ok("fabric-ports", f"{len(vports)} {layer} ports PORT_ACTIVE{note}", active, want)]
    return []


def _efa(fab: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    want = fab["ports"]
    if ev.fi:
        rep = ev.fi[0]
        n = len(rep.efa_devices)
        cut = " (fi_info output ends mid-entry: it was cut)" if rep.last_entry_incomplete else ""
        if n != want:
            return [_fail("fabric-ports", f"expected {want} EFA devices, fi_info shows {n}{cut}", n, want)]
        return [_ok("fabric-ports", f"{n} EFA devices in fi_info{cut}", n, want)]
    nics = next((r.ofi_nics for r in ev.nccl if r.ofi_nics is not None), None)
    if nics is not None:
        prov = next((r.ofi_provider for r in ev.nccl if r.ofi_provider), None)
        if prov != "efa":
            return [_fail("fabric-ports", f"aws-ofi-nccl selected provider {prov!r}, expected 'efa'", nics, want)]
        if nics != want:
            return [_fail("fabric-ports", f"expected {want} EFA devices, aws-ofi-nccl found {nics}", nics, want)]
        return [_ok("fabric-ports", f"aws-ofi-nccl found {nics} EFA NICs", nics, want)]
    return []


def _erdma(fab: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    want = fab["ports"]
    if not ev.ibv:
        return []
    devs = [d for r in ev.ibv for d in r.devices if d.is_erdma]
    problems = [f"{d.hca_id} port {pt.number} is {pt.state}" for d in devs for pt in d.ports
                if pt.state != "PORT_ACTIVE"]
    if len(devs) < want:
        problems.insert(0, f"expected {want} eRDMA devices, found {len(devs)}")
    names = [d.hca_id for d in devs]
    if problems:
        return [_fail("fabric-ports", _listing(problems), names, want)]
    return [_ok("fabric-ports", f"{len(devs)} eRDMA devices, ports PORT_ACTIVE", names, want)]


def _ascend_nics(fab: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    out: list[CheckResult] = []
    want, rate = fab["ports"], fab.get("port_gbps")
    statuses = [h for h in ev.hccn if isinstance(h, HccnPortStatus)]
    if statuses:
        problems: list[str] = []
        if len(statuses) < want:
            problems.append(f"hccn_tool status for {len(statuses)} of {want} NPU NICs")
        for s in statuses:
            if s.link_detected is not True:
                problems.append(f"{s.netdev} link not detected")
            if rate is not None and s.speed_mbps != rate * 1000:
                problems.append(f"{s.netdev} speed is {s.speed_mbps} Mb/s, expected {rate * 1000}")
        up = sum(1 for s in statuses if s.link_detected)
        out.append(_fail("fabric-ports", _listing(problems), up, f"{want} x {rate} Gb/s") if problems else
                   _ok("fabric-ports", f"{len(statuses)} NPU NICs up at {rate} Gb/s", up, f"{want} x {rate} Gb/s"))
    nic: list[str] = []
    seen = False
    for h in ev.hccn:
        if isinstance(h, HccnLink):
            seen = True
            if h.status.upper() != "UP":
                nic.append(f"NPU NIC link status is {h.status}")
        elif isinstance(h, HccnNetHealth):
            seen = True
            if h.status.lower() != "success":
                nic.append(f"NPU NIC net health is {h.status}")
        elif isinstance(h, HccnPing):
            seen = True
            if h.loss_pct > 0 or h.received < h.transmitted:
                nic.append(f"ping from NPU {h.device} to {h.target} lost {h.loss_pct:g}% "
                           f"({h.received}/{h.transmitted} received)")
    if seen:
        out.append(_fail("npu-nic", _listing(nic)) if nic else _ok("npu-nic", "NPU NIC link, health and ping OK"))
    return out


def _allreduce_runs(rep: NcclTestsReport) -> list[NcclTestRun]:
    """Runs named all_reduce, or unnamed runs whose rows reduce (alltoall/allgather print redop 'none')."""
    return [r for r in rep.runs if r.rows and (
        "all_reduce" in (r.collective or "") or (r.collective is None and r.rows[0].redop != "none"))]


def _measure(run: NcclTestRun, min_bytes: int) -> tuple[float, int, str]:
    big = [r for r in run.rows if r.size_bytes >= min_bytes]
    if big:
        best = max(big, key=lambda r: r.busbw_gbs)
        return best.busbw_gbs, best.size_bytes, f"peak over sizes >= {min_bytes} B"
    largest = max(run.rows, key=lambda r: r.size_bytes)
    return largest.busbw_gbs, largest.size_bytes, f"largest size tested ({largest.size_bytes} B < {min_bytes} B)"


def _nccl(b: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    out: list[CheckResult] = []
    if not ev.nccl:
        return out
    thr = float(b["threshold"])
    fabric = b["fabric"].get("kind")
    gpus = b["gpu"].get("count") or 0
    wrong = [f"{r.collective or 'nccl-tests'} reported {r.wrong_total} wrong results" for rep in ev.nccl
             for r in rep.runs if r.wrong_total]
    wrong += [f"{r.collective or 'nccl-tests'}: out of bounds values {r.oob_values} FAILED" for rep in ev.nccl
              for r in rep.runs if r.oob_ok is False]
    wrong += [f"test failure: {f}" for rep in ev.nccl for f in rep.failures]
    out.append(_fail("nccl-correctness", _listing(wrong)) if wrong else
               _ok("nccl-correctness", "no wrong results (#wrong 0, out-of-bounds 0)"))

    launch: list[str] = []
    for rep in ev.nccl:
        for r in rep.runs:
            hosts = {x.host for x in r.ranks}
            if r.concurrent_runs > 1:
                launch.append(f"{r.concurrent_runs} nccl-tests runs wrote into one log at once "
                              f"({'each with 1 rank' if rep.nranks == 1 else 'interleaved'}); "
                              "nccl-tests built without MPI but started under mpirun?")
            elif len(hosts) > 1 and r.ranks and {x.rank for x in r.ranks} == {0}:
                launch.append(f"every process is rank 0 of its own 1-rank job on {len(hosts)} hosts")
    out.append(_fail("nccl-launch", _listing(launch)) if launch else
               _ok("nccl-launch", "one multi-rank run per collective"))

    nets = [r for r in ev.nccl if r.net_transport is not None]
    if fabric in RDMA_FABRICS:
        if not nets:
            out.append(_skip("nccl-transport", "no NCCL_DEBUG=INFO lines in the log; network transport not verified",
                             None, b["fabric"].get("nccl_net")))
        else:
            used = nets[0].net_transport
            want_net = b["fabric"].get("nccl_net")
            if used == "NET/Socket":
                out.append(_fail("nccl-transport", f"NCCL used NET/Socket on an RDMA fabric ({fabric})",
                                 used, want_net))
            elif want_net and used != want_net:
                out.append(_fail("nccl-transport", f"NCCL used {used}, expected {want_net} on {fabric}",
                                 used, want_net))
            elif fabric == "efa" and nets[0].ofi_provider not in (None, "efa"):
                out.append(_fail("nccl-transport", f"aws-ofi-nccl selected provider {nets[0].ofi_provider!r}, "
                                                   "expected 'efa'", nets[0].ofi_provider, "efa"))
            else:
                gdr = [t for t in nets[0].transports if t.startswith("NET/")]
                out.append(_ok("nccl-transport", f"NCCL used {used}" + (f" ({', '.join(gdr)})" if gdr else ""),
                               used, want_net))

    ar = b["nccl"]["all_reduce"]
    min_bytes = int(b["nccl"].get("measure_min_bytes") or 0)
    candidates = [(rep, run) for rep in ev.nccl for run in _allreduce_runs(rep)]
    if not candidates:
        failed = [f for rep in ev.nccl for f in rep.failures]
        return [*out, _skip("allreduce-busbw", "no all_reduce results in the nccl-tests log"
                            + (f" (the run failed: {failed[0]})" if failed else ""))]
    scored = [(_measure(run, min_bytes), rep, run) for rep, run in candidates]
    (measured, size, how), rep, run = max(scored, key=lambda t: t[0][0])
    # A tail-only log may list only its last ranks: the highest rank number still bounds the size.
    nranks = rep.nranks or (max(x.rank for x in run.ranks) + 1 if run.ranks else None)
    hosts = {x.host for x in run.ranks}
    multi = len(hosts) > 1 or bool(nranks is not None and gpus and nranks > gpus)
    notes: list[str] = [f"at {size} B, {how}"]
    if run.collective is None:
        notes.append("collective name not in the log; taken as all_reduce")
    if run.concurrent_runs > 1:
        return [*out, _fail("allreduce-busbw", f"all_reduce busbw {measured:.1f} GB/s cannot be judged: "
                                               f"{run.concurrent_runs} runs interleave in the log"
                                               + (", each with a single rank (busbw 0 by definition)"
                                                  if nranks == 1 else ""), measured, None)]
    if nranks == 1:
        return [*out, _fail("allreduce-busbw", f"all_reduce busbw {measured:.1f} GB/s: the run had a single rank, "
                                               "so bus bandwidth is 0 by definition; not a bandwidth measurement",
                            measured, None)]
    if multi:
        base, label = ar.get("multi_node_busbw_gbs"), f"multi-node ({len(hosts) or '?'} hosts, {nranks} ranks)"
    else:
        algo: str
        if rep.debug_lines:
            algo = "nvls" if rep.nvls_connected else "ring"
            if not rep.nvls_connected and ar.get("intra_node_nvls_busbw_gbs"):
                notes.append("NCCL did not connect NVLS on an NVSwitch system")
        else:
            algo = ar.get("algorithm_when_unknown") or "ring"
            notes.append(f"no NCCL_DEBUG lines, algorithm assumed {algo}")
        base = ar.get(f"intra_node_{algo}_busbw_gbs")
        if base is None and algo == "nvls":
            base, algo = ar.get("intra_node_ring_busbw_gbs"), "ring"
        label = f"intra-node {algo}"
    if base is None:
        return [*out, _skip("allreduce-busbw", f"all_reduce busbw {measured:.1f} GB/s; no {label} baseline for "
                                               f"{b['name']} ({'; '.join(notes)})", measured, None)]
    frac = measured / float(base)
    reason = (f"all_reduce busbw {measured:.1f} GB/s is {frac:.0%} of baseline {float(base):.1f} "
              f"(threshold {thr:.0%}); baseline for {label}; {'; '.join(notes)}")
    return [*out, (_ok if frac >= thr else _fail)("allreduce-busbw", reason, measured, float(base))]


def _hccl(b: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    out: list[CheckResult] = []
    if not ev.hccl:
        return out
    rep = max(ev.hccl, key=lambda r: r.peak_algbw_gbs or 0)
    failed = sum(r.failed_checks for r in ev.hccl)
    out.append(_fail("nccl-correctness", f"hccl_test check_result failed on {failed} rows") if failed else
               _ok("nccl-correctness", "hccl_test check_result success on every row"))
    h = b["hccl"]
    n = int(h.get("ranks") or b["gpu"].get("count") or 0)
    min_bytes = int(h.get("measure_min_bytes") or 0)
    big = [r for r in rep.rows if r.size_bytes >= min_bytes] or [max(rep.rows, key=lambda r: r.size_bytes)]
    best = max(big, key=lambda r: r.algbw_gbs)
    if n < 2:
        return [*out, _skip("allreduce-busbw", "hccl_test reports algorithm bandwidth; rank count unknown, "
                                               "cannot normalise to busbw", best.algbw_gbs, None)]
    factor = 2 * (n - 1) / n
    busbw = best.algbw_gbs * factor
    norm = (f"hccl_test reports algorithm bandwidth {best.algbw_gbs:g} GB/s at {best.size_bytes} B; normalised to "
            f"busbw = algbw x 2(n-1)/n = algbw x {factor:g} (n={n}) = {busbw:.1f} GB/s")
    measured = {"busbw_gbs": round(busbw, 3), "algbw_gbs": best.algbw_gbs, "ranks": n,
                "normalisation": "busbw = algbw * 2(n-1)/n"}
    base = h["all_reduce"].get("intra_node_busbw_gbs")
    if base is None:
        return [*out, _skip("allreduce-busbw", f"{norm}; no baseline for {b['name']}", measured, None)]
    frac = busbw / float(base)
    thr = float(b["threshold"])
    reason = (f"all_reduce busbw {busbw:.1f} GB/s is {frac:.0%} of baseline {float(base):.1f} "
              f"(threshold {thr:.0%}); {norm}")
    return [*out, (_ok if frac >= thr else _fail)("allreduce-busbw", reason, measured, float(base))]


def _dcgm(ev: _Evidence) -> list[CheckResult]:
    if not ev.dcgm:
        return []
    rep = ev.dcgm[0]
    if not rep.tests:
        return [_fail("dcgm-diag", f"dcgmi diag did not run: {_listing(list(rep.messages))}")]
    if rep.failed:
        detail = [f"{t.name} ({'; '.join(t.results + t.details)})" for t in rep.tests if t.status == "Fail"]
        return [_fail("dcgm-diag", f"dcgmi diag failed: {_listing(detail)}", list(rep.failed))]
    if rep.warned:
        return [_warn("dcgm-diag", f"dcgmi diag warnings: {', '.join(rep.warned)}", list(rep.warned))]
    return [_ok("dcgm-diag", f"dcgmi diag: all {len(rep.tests)} tests passed")]


def _storage(b: dict[str, Any], ev: _Evidence) -> list[CheckResult]:
    out: list[CheckResult] = []
    if ev.mdstat:
        arrays = [a for r in ev.mdstat for a in r.arrays]
        bad = [f"{a.name} is degraded ({a.status_map or a.state})" for a in arrays if a.degraded]
        syncing = [f"{a.name} {a.sync_action} at {a.sync_progress_pct}%" for a in arrays if a.sync_action]
        if bad:
            out.append(_fail("storage-raid", _listing(bad)))
        elif syncing:
            out.append(_warn("storage-raid", _listing(syncing)))
        else:
            out.append(_ok("storage-raid", f"{_plural(len(arrays), 'md array')}, none degraded"))
    want = b["storage"].get("nvme_count")
    if want:
        found: int | None = None
        src = ""
        if ev.nvme:
            store = ev.nvme[0].instance_store
            found = len(store) if b.get("provider") == "aws" else len(ev.nvme[0].devices)
            src = "nvme list" + (" (instance storage)" if b.get("provider") == "aws" else "")
        elif ev.lsblk:
            found, src = len(ev.lsblk[0].nvme_disks), "lsblk"
        if found is not None:
            out.append(_ok("storage-nvme", f"{found} local NVMe disks ({src})", found, want) if found >= want else
                       _fail("storage-nvme", f"expected {want} local NVMe disks, found {found} ({src})", found, want))
    return out


# ------------------------------------------------------------------------------------- judge


def applicable_checks(b: Mapping[str, Any]) -> tuple[str, ...]:
    """The checks a node of baseline ``b`` is judged on (each reported, skipped when it could not be judged).

    ``dcgm-diag`` and ``storage-raid`` are extras: reported when their evidence is there.
    """
    ascend = b["accelerator"] == "ascend"
    fabric = (b.get("fabric") or {}).get("kind") or "none"
    nvlink = (b.get("interconnect") or {}).get("kind") == "nvlink"
    if ascend:
        names = ["gpu-count", "gpu-model", "gpu-memory", "npu-health", "gpu-interconnect", "fabric-ports", "npu-nic",
                 "nccl-correctness", "allreduce-busbw"]
    else:
        names = ["gpu-count", "gpu-model", "gpu-memory", "gpu-ecc", "gpu-memory-health", "gpu-persistence",
                 *(["gpu-fabric-state", "nvlink-links"] if nvlink else []), "gpu-interconnect",
                 *(["fabric-ports"] if fabric != "none" else []), "nccl-correctness", "nccl-launch",
                 *(["nccl-transport"] if fabric in RDMA_FABRICS else []), "allreduce-busbw", "storage-nvme"]
    if ascend and fabric == "none":
        names = [n for n in names if n not in ("fabric-ports", "npu-nic")]
    return tuple(n for n in CHECK_NAMES if n in names)


def _has_evidence(name: str, ev: _Evidence) -> bool:
    """Whether the evidence handed in could speak to check ``name`` at all."""
    if name.startswith("gpu-") and name != "gpu-interconnect":
        return bool(ev.smi or ev.npu or (name == "gpu-count" and ev.topo))
    return bool({
        "gpu-interconnect": ev.topo, "nvlink-links": ev.nvlink,
        "fabric-ports": ev.ibstat or ev.ibv or ev.fi or ev.hccn or [r for r in ev.nccl if r.ofi_nics is not None],
        "nccl-correctness": ev.nccl or ev.hccl, "nccl-launch": ev.nccl, "nccl-transport": ev.nccl,
        "allreduce-busbw": ev.nccl or ev.hccl, "dcgm-diag": ev.dcgm, "npu-health": ev.npu, "npu-nic": ev.hccn,
        "storage-raid": ev.mdstat, "storage-nvme": ev.nvme or ev.lsblk,
    }.get(name))


def _not_judged(name: str, b: Mapping[str, Any], ev: _Evidence) -> CheckResult:
    hint = _EVIDENCE_HINT.get(name, "its output")
    if not _has_evidence(name, ev):
        return _skip(name, f"no evidence for {name}: supply {hint}")
    path = _BASELINE_FIELD.get(name)
    value: Any = b
    for key in (path or "").split(".") if path else []:
        value = value.get(key) if isinstance(value, Mapping) else None
    if path and value is None:
        return _skip(name, f"not judged: no baseline value {path} for {b['name']}")
    return _skip(name, f"no evidence for {name} in the outputs given (they do not show it): supply {hint}")


def judge(offering_name: str, facts: Mapping[str, Any], overrides: dict[str, Any] | None = None, *,
          node: str | None = None, scope: Iterable[str] | None = None) -> Verdict:
    """Judge one node's parsed evidence against the offering's baseline (plus ``overrides``).

    ``scope``: the checks to report (default: those that apply to the offering, plus any extra the
    evidence allows); mandatory checks outside it are not asked for (a run across nodes is judged on
    :data:`NCCL_CHECKS` only).
    """
    b = resolve_baseline(offering_name, overrides)
    for name in b["required"]:
        if name not in CHECK_NAMES:
            raise InvalidSpecError(f"unknown check {name!r} in required; known: {', '.join(CHECK_NAMES)}",
                                   field="required", value=name)
    wanted = set(applicable_checks(b) if scope is None else scope)
    unknown = sorted(wanted - set(CHECK_NAMES))
    if unknown:
        raise InvalidSpecError(f"unknown check {unknown[0]!r} in scope", field="scope", value=unknown[0])
    ev = _collect(facts)
    checks: list[CheckResult] = []
    checks += _gpu_checks(b, ev)
    checks += _interconnect(b, ev)
    checks += _fabric(b, ev)
    if b["accelerator"] == "ascend":
        checks += _hccl(b, ev)
    else:
        checks += _nccl(b, ev)
    checks += _dcgm(ev)
    checks += _storage(b, ev)
    if scope is not None:
        checks = [c for c in checks if c.name in wanted]
    mandatory = {n for n in b["required"] if scope is None or n in wanted}
    have = {c.name for c in checks}
    checks += [_not_judged(n, b, ev) for n in CHECK_NAMES if (n in wanted or n in mandatory) and n not in have]
    judged = []
    for c in checks:
        if c.name in mandatory:
            c = replace(c, mandatory=True)
            if c.status == SKIP:
                c = replace(c, status=FAIL, passed=False, reason=f"mandatory check skipped: {c.reason}")
        judged.append(c)
    order = {n: i for i, n in enumerate(CHECK_NAMES)}
    judged.sort(key=lambda c: order.get(c.name, len(order)))
    return Verdict(offering=b["name"], passed=not any(c.status == FAIL for c in judged), checks=tuple(judged),
                   threshold=float(b["threshold"]), node=node, evidence=tuple(sorted(facts)))
