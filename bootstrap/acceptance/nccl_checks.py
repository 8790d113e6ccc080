"""Collective checks: nccl-tests correctness, launch, transport and all_reduce bus bandwidth against the
baseline (intra-node ring / NVLS, or multi-node); hccl_test on Ascend, normalised to bus bandwidth."""

from __future__ import annotations

from metalfleet.providers.checks import RDMA_FABRICS

from ..parsers.nccl_tests import NcclTestRun, NcclTestsReport
from .baselines import Baseline
from .evidence import Evidence
from .verdict import CheckResult, fail, listing, ok, skip

__all__ = ["collective_checks", "hccl_checks", "nccl_checks"]


def collective_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """The collective checks from what the node runs: hccl_test on Ascend, nccl-tests elsewhere."""
    return hccl_checks(b, ev) if b.ascend else nccl_checks(b, ev)


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


def nccl_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """nccl-correctness, nccl-launch, nccl-transport and allreduce-busbw from the nccl-tests logs."""
    out: list[CheckResult] = []
    if not ev.nccl:
        return out
    thr = float(b.threshold)
    fabric = b.fabric.kind
    gpus = b.gpu.count or 0
    wrong = [f"{r.collective or 'nccl-tests'} reported {r.wrong_total} wrong results" for rep in ev.nccl
             for r in rep.runs if r.wrong_total]
    wrong += [f"{r.collective or 'nccl-tests'}: out of bounds values {r.oob_values} FAILED" for rep in ev.nccl
              for r in rep.runs if r.oob_ok is False]
    wrong += [f"test failure: {f}" for rep in ev.nccl for f in rep.failures]
    out.append(fail("nccl-correctness", listing(wrong)) if wrong else
               ok("nccl-correctness", "no wrong results (#wrong 0, out-of-bounds 0)"))

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
    out.append(fail("nccl-launch", listing(launch)) if launch else
               ok("nccl-launch", "one multi-rank run per collective"))

    nets = [r for r in ev.nccl if r.net_transport is not None]
    if fabric in RDMA_FABRICS:
        if not nets:
            out.append(skip("nccl-transport", "no NCCL_DEBUG=INFO lines in the log; network transport not verified",
                             None, b.fabric.nccl_net))
        else:
            used = nets[0].net_transport
            want_net = b.fabric.nccl_net
            if used == "NET/Socket":
                out.append(fail("nccl-transport", f"NCCL used NET/Socket on an RDMA fabric ({fabric})",
                                 used, want_net))
            elif want_net and used != want_net:
                out.append(fail("nccl-transport", f"NCCL used {used}, expected {want_net} on {fabric}",
                                 used, want_net))
            elif fabric == "efa" and nets[0].ofi_provider not in (None, "efa"):
                out.append(fail("nccl-transport", f"aws-ofi-nccl selected provider {nets[0].ofi_provider!r}, "
                                                   "expected 'efa'", nets[0].ofi_provider, "efa"))
            else:
                gdr = [t for t in nets[0].transports if t.startswith("NET/")]
                out.append(ok("nccl-transport", f"NCCL used {used}" + (f" ({', '.join(gdr)})" if gdr else ""),
                               used, want_net))

    ar = b.nccl.all_reduce
    min_bytes = int(b.nccl.measure_min_bytes or 0)
    candidates = [(rep, run) for rep in ev.nccl for run in _allreduce_runs(rep)]
    if not candidates:
        failed = [f for rep in ev.nccl for f in rep.failures]
        return [*out, skip("allreduce-busbw", "no all_reduce results in the nccl-tests log"
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
        return [*out, fail("allreduce-busbw", f"all_reduce busbw {measured:.1f} GB/s cannot be judged: "
                                               f"{run.concurrent_runs} runs interleave in the log"
                                               + (", each with a single rank (busbw 0 by definition)"
                                                  if nranks == 1 else ""), measured, None)]
    if nranks == 1:
        return [*out, fail("allreduce-busbw", f"all_reduce busbw {measured:.1f} GB/s: the run had a single rank, "
                                               "so bus bandwidth is 0 by definition; not a bandwidth measurement",
                            measured, None)]
    if multi:
        nodes = len(hosts) or (nranks // gpus if nranks and gpus else 2)
        base, how = ar.multi_node(nodes)
        label = f"multi-node ({len(hosts) or '?'} hosts, {nranks} ranks), {how}"
    else:
        algo: str
        if rep.debug_lines:
            algo = "nvls" if rep.nvls_connected else "ring"
            if not rep.nvls_connected and ar.intra_node_nvls_busbw_gbs:
                notes.append("NCCL did not connect NVLS on an NVSwitch system")
        else:
            algo = ar.algorithm_when_unknown or "ring"
            notes.append(f"no NCCL_DEBUG lines, algorithm assumed {algo}")
        base = {"ring": ar.intra_node_ring_busbw_gbs, "nvls": ar.intra_node_nvls_busbw_gbs}.get(algo)
        if base is None and algo == "nvls":
            base, algo = ar.intra_node_ring_busbw_gbs, "ring"
        label = f"intra-node {algo}"
    if base is None:
        return [*out, skip("allreduce-busbw", f"all_reduce busbw {measured:.1f} GB/s; no {label} baseline for "
                                               f"{b.name} ({'; '.join(notes)})", measured, None)]
    frac = measured / float(base)
    reason = (f"all_reduce busbw {measured:.1f} GB/s is {frac:.0%} of baseline {float(base):.1f} "
              f"(threshold {thr:.0%}); baseline for {label}; {'; '.join(notes)}")
    return [*out, (ok if frac >= thr else fail)("allreduce-busbw", reason, measured, float(base))]


def hccl_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """nccl-correctness and allreduce-busbw from hccl_test (Ascend), its algbw normalised to busbw."""
    out: list[CheckResult] = []
    if not ev.hccl:
        return out
    rep = max(ev.hccl, key=lambda r: r.peak_algbw_gbs or 0)
    failed = sum(r.failed_checks for r in ev.hccl)
    out.append(fail("nccl-correctness", f"hccl_test check_result failed on {failed} rows") if failed else
               ok("nccl-correctness", "hccl_test check_result success on every row"))
    h = b.hccl
    n = int(h.ranks or b.gpu.count or 0)
    min_bytes = int(h.measure_min_bytes or 0)
    big = [r for r in rep.rows if r.size_bytes >= min_bytes] or [max(rep.rows, key=lambda r: r.size_bytes)]
    best = max(big, key=lambda r: r.algbw_gbs)
    if n < 2:
        return [*out, skip("allreduce-busbw", "hccl_test reports algorithm bandwidth; rank count unknown, "
                                               "cannot normalise to busbw", best.algbw_gbs, None)]
    factor = 2 * (n - 1) / n
    busbw = best.algbw_gbs * factor
    norm = (f"hccl_test reports algorithm bandwidth {best.algbw_gbs:g} GB/s at {best.size_bytes} B; normalised to "
            f"busbw = algbw x 2(n-1)/n = algbw x {factor:g} (n={n}) = {busbw:.1f} GB/s")
    measured = {"busbw_gbs": round(busbw, 3), "algbw_gbs": best.algbw_gbs, "ranks": n,
                "normalisation": "busbw = algbw * 2(n-1)/n"}
    base = h.all_reduce.intra_node_busbw_gbs
    if base is None:
        return [*out, skip("allreduce-busbw", f"{norm}; no baseline for {b.name}", measured, None)]
    frac = busbw / float(base)
    thr = float(b.threshold)
    reason = (f"all_reduce busbw {busbw:.1f} GB/s is {frac:.0%} of baseline {float(base):.1f} "
              f"(threshold {thr:.0%}); {norm}")
    return [*out, (ok if frac >= thr else fail)("allreduce-busbw", reason, measured, float(base))]

