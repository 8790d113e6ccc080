"""GPU / NPU checks: count, model, memory, ECC and memory health, persistence, NVSwitch fabric state,
the topology between devices, and NVLinks."""

from __future__ import annotations

import re

from ..parsers.nvidia_smi import NvidiaSmiReport
from ..parsers.nvlink import NvlinkReport
from .baselines import Baseline, GpuBaseline
from .evidence import Evidence
from .verdict import CheckResult, fail, listing, ok, plural, skip, warn

__all__ = ["gpu_checks", "interconnect_checks"]


def gpu_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """gpu-count, gpu-model, gpu-memory (npu-health on Ascend), then ECC, memory health, persistence and
    fabric state from the richest nvidia-smi form handed in."""
    g = b.gpu
    out: list[CheckResult] = []
    want_n = g.count
    pattern = g.name_regex
    model = g.model
    min_mem = g.min_memory_mib
    if b.ascend:
        if not ev.npu:
            topo = next((t for t in ev.topo if t.tool.startswith("npu-smi")), None)
            if topo is not None and want_n is not None:
                n = len(topo.gpus)
                out.append((ok if n == want_n else fail)(
                    "gpu-count", f"{'found' if n == want_n else f'expected {want_n} NPUs, found'} {n} NPUs "
                                 "(npu-smi info -t topo)", n, want_n))
            return out
        npu = ev.npu[0]
        n = npu.npu_count
        if want_n is not None:
            out.append(ok("gpu-count", f"found {n} NPUs (npu-smi info)", n, want_n) if n == want_n else
                       fail("gpu-count", f"expected {want_n} NPUs, found {n} (npu-smi info)", n, want_n))
        if pattern:
            bad = [f"NPU{x.npu_id} is {x.name!r}" for x in npu.npus if not re.search(pattern, x.name)]
            out.append(fail("gpu-model", f"{listing(bad)}, expected a name matching {pattern!r} ({model})",
                             sorted({x.name for x in npu.npus}), pattern) if bad else
                       ok("gpu-model", f"all NPUs are {model} ({', '.join(sorted({x.name for x in npu.npus}))})",
                           sorted({x.name for x in npu.npus}), pattern))
        if min_mem:
            small = [f"NPU{x.npu_id} has {x.hbm_total_mb} MB HBM" for x in npu.npus
                     if x.hbm_total_mb is not None and x.hbm_total_mb < min_mem]
            out.append(fail("gpu-memory", f"{listing(small)}, expected at least {min_mem} MB", None, min_mem)
                       if small else ok("gpu-memory", f"every NPU has at least {min_mem} MB HBM",
                                         min(x.hbm_total_mb or 0 for x in npu.npus) if npu.npus else None,
                                         min_mem))
        bad_health = [f"NPU{x.npu_id} health is {x.health}" for x in npu.npus if x.health.upper() != "OK"]
        out.append(fail("npu-health", listing(bad_health)) if bad_health else
                   ok("npu-health", f"all {n} NPUs report health OK"))
        return out

    if not ev.smi:
        topo = next((t for t in ev.topo if not t.tool.startswith("npu-smi")), None)
        if topo is not None and want_n is not None:
            n = len(topo.gpus)
            out.append(ok("gpu-count", f"found {n} GPUs (nvidia-smi topo -m)", n, want_n) if n == want_n else
                       fail("gpu-count", f"expected {want_n} GPUs, found {n} (nvidia-smi topo -m)", n, want_n))
        return out
    rep = ev.smi[0]
    n = rep.gpu_count
    src = rep.tool
    note = ""
    if rep.attached_gpus is not None and rep.attached_gpus != len(rep.gpus):
        note = f"; the output lists only {plural(len(rep.gpus), 'GPU section')}"
    if want_n is not None:
        out.append(ok("gpu-count", f"found {n} GPUs ({src}){note}", n, want_n) if n == want_n else
                   fail("gpu-count", f"expected {want_n} GPUs, found {n} ({src}){note}", n, want_n))
    named = [x for x in rep.gpus if x.name is not None]
    if pattern:
        if not named:
            out.append(skip("gpu-model", f"{src} output carries no product names", None, pattern))
        else:
            names = sorted({x.name or "" for x in named})
            bad = [f"GPU{x.index} is {x.name!r}" for x in named if not re.search(pattern, x.name or "")]
            out.append(fail("gpu-model", f"{listing(bad)}, expected a name matching {pattern!r} ({model})",
                             names, pattern) if bad else
                       ok("gpu-model", f"all GPUs are {', '.join(names)}", names, pattern))
    mems = [x for x in rep.gpus if x.memory_total_mib is not None]
    if min_mem and mems:
        small = [f"GPU{x.index} has {x.memory_total_mib} MiB" for x in mems if (x.memory_total_mib or 0) < min_mem]
        lowest = min(x.memory_total_mib or 0 for x in mems)
        out.append(fail("gpu-memory", f"{listing(small)}, expected at least {min_mem} MiB", lowest, min_mem)
                   if small else ok("gpu-memory", f"every GPU has at least {min_mem} MiB ({lowest} MiB)",
                                     lowest, min_mem))
    out.extend(_ecc_checks(g, rep))
    out.extend(_persistence_fabric(b, rep))
    return out


def _ecc_checks(g: GpuBaseline, rep: NvidiaSmiReport) -> list[CheckResult]:
    out: list[CheckResult] = []
    modes = [x for x in rep.gpus if x.ecc_mode is not None]
    counts = [x for x in rep.gpus if x.ecc_volatile_uncorrected is not None]
    limit = int(g.max_volatile_uncorrected_ecc or 0)
    if modes or counts:
        problems: list[str] = []
        if g.require_ecc_enabled:
            off = [f"GPU{x.index}" for x in modes if x.ecc_mode != "Enabled"]
            if off:
                problems.append(f"ECC is {modes[0].ecc_mode if len(off) == len(modes) else 'disabled'} on "
                                f"{', '.join(off)}")
        over = [(x.index, x.ecc_volatile_uncorrected or 0) for x in counts if (x.ecc_volatile_uncorrected or 0) > limit]
        problems += [f"GPU{i} has {c} volatile uncorrected ECC errors (limit {limit})" for i, c in over]
        total = sum(x.ecc_volatile_uncorrected or 0 for x in counts)
        out.append(fail("gpu-ecc", listing(problems), total, limit) if problems else
                   ok("gpu-ecc", f"ECC {'enabled, ' if modes else ''}{total} volatile uncorrected errors",
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
            out.append(fail("gpu-memory-health", listing(pending + warned)))
        elif warned:
            out.append(warn("gpu-memory-health", listing(warned)))
        else:
            out.append(ok("gpu-memory-health", "no pending page retirement or row remap"))
    return out


def _persistence_fabric(b: Baseline, rep: NvidiaSmiReport) -> list[CheckResult]:
    out: list[CheckResult] = []
    pm = [x for x in rep.gpus if x.persistence_mode is not None]
    if pm:
        off = [f"GPU{x.index}" for x in pm if not x.persistence_mode]
        if not off:
            out.append(ok("gpu-persistence", "persistence mode on for every GPU"))
        elif b.gpu.require_persistence_mode:
            out.append(fail("gpu-persistence", f"persistence mode is off on {', '.join(off)}"))
        else:
            out.append(warn("gpu-persistence", f"persistence mode is off on {', '.join(off)} "
                                                "(slower first CUDA call; enable nvidia-persistenced)"))
    states = [x for x in rep.gpus if x.fabric_state is not None]
    if states and b.interconnect.kind == "nvlink":
        bad = [f"GPU{x.index} fabric state is {x.fabric_state!r}" for x in states if x.fabric_state != "Completed"]
        out.append(fail("gpu-fabric-state", f"{listing(bad)}, expected 'Completed' (nvidia-fabricmanager)")
                   if bad else ok("gpu-fabric-state", "NVSwitch fabric registration Completed on every GPU"))
    return out


def interconnect_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """gpu-interconnect (the topology link between every device pair) and nvlink-links."""
    ic = b.interconnect
    want = ic.topo_link
    out: list[CheckResult] = []
    ascend = b.ascend
    topo = next((t for t in ev.topo if t.tool.startswith("npu-smi") == ascend), None)
    if want and topo is not None:
        prefix = "NPU" if ascend else "GPU"
        pairs = topo.pairs(prefix)
        bad = [f"{a}<->{c} link is {k}, expected {want}" for a, c, k in pairs if k != want]
        want_n = b.gpu.count
        n = len([d for d in topo.devices if d.startswith(prefix)])
        if want_n is not None and n != want_n:
            bad.insert(0, f"topology shows {n} {prefix}s, expected {want_n}")
        kinds = sorted({k for *_x, k in pairs})
        out.append(fail("gpu-interconnect", listing(bad), kinds, want) if bad else
                   ok("gpu-interconnect", f"all {len(pairs)} {prefix} pairs linked by {want}", kinds, want))
    if ic.kind == "nvlink" and ev.nvlink and not ascend:
        out.append(_nvlink(b, ev.nvlink[0]))
    return out


def _nvlink(b: Baseline, rep: NvlinkReport) -> CheckResult:
    ic = b.interconnect
    want_links = ic.links_per_gpu
    want_speed = ic.link_gbs
    want_n = b.gpu.count
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
        return fail("nvlink-links", listing(bad), active, expected)
    return ok("nvlink-links", f"{len(rep.gpus)} GPUs x {want_links} NVLinks at {want_speed} GB/s", active, expected)

