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

The checks themselves live by subject: :mod:`.gpu_checks`, :mod:`.fabric_checks`, :mod:`.nccl_checks`
and :mod:`.node_checks`; :mod:`.evidence` sorts what is handed in; the result types are :mod:`.verdict`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from metalfleet.providers.errors import InvalidSpecError

from .baselines import Baseline, resolve_baseline
from .evidence import Evidence, collect
from .fabric_checks import fabric_checks
from .gpu_checks import gpu_checks, interconnect_checks
from .nccl_checks import hccl_checks, nccl_checks
from .node_checks import dcgm_checks, storage_checks
from .verdict import (
    CHECK_NAMES,
    EXTRA_CHECKS,
    FAIL,
    NCCL_CHECKS,
    PASS,
    RDMA_FABRICS,
    SKIP,
    WARN,
    CheckResult,
    Verdict,
    skip,
)

__all__ = ["CHECK_NAMES", "EXTRA_CHECKS", "FAIL", "NCCL_CHECKS", "PASS", "SKIP", "WARN", "CheckResult", "Verdict",
           "applicable_checks", "judge"]

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


def applicable_checks(b: Baseline) -> tuple[str, ...]:
    """The checks a node of baseline ``b`` is judged on (each reported, skipped when it could not be judged).

    ``dcgm-diag`` and ``storage-raid`` are extras: reported when their evidence is there.
    """
    ascend = b.ascend
    fabric = b.fabric.kind or "none"
    nvlink = b.interconnect.kind == "nvlink"
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


def _has_evidence(name: str, ev: Evidence) -> bool:
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


def _not_judged(name: str, b: Baseline, ev: Evidence) -> CheckResult:
    hint = _EVIDENCE_HINT.get(name, "its output")
    if not _has_evidence(name, ev):
        return skip(name, f"no evidence for {name}: supply {hint}")
    path = _BASELINE_FIELD.get(name)
    if path and b.value(path) is None:
        return skip(name, f"not judged: no baseline value {path} for {b.name}")
    return skip(name, f"no evidence for {name} in the outputs given (they do not show it): supply {hint}")


def judge(offering_name: str, facts: Mapping[str, Any], overrides: dict[str, Any] | None = None, *,
          node: str | None = None, scope: Iterable[str] | None = None) -> Verdict:
    """Judge one node's parsed evidence against the offering's baseline (plus ``overrides``).

    ``scope``: the checks to report (default: those that apply to the offering, plus any extra the
    evidence allows); mandatory checks outside it are not asked for (a run across nodes is judged on
    :data:`NCCL_CHECKS` only).
    """
    b = resolve_baseline(offering_name, overrides)
    for name in b.required:
        if name not in CHECK_NAMES:
            raise InvalidSpecError(f"unknown check {name!r} in required; known: {', '.join(CHECK_NAMES)}",
                                   field="required", value=name)
    wanted = set(applicable_checks(b) if scope is None else scope)
    unknown = sorted(wanted - set(CHECK_NAMES))
    if unknown:
        raise InvalidSpecError(f"unknown check {unknown[0]!r} in scope", field="scope", value=unknown[0])
    ev = collect(facts)
    checks: list[CheckResult] = []
    checks += gpu_checks(b, ev)
    checks += interconnect_checks(b, ev)
    checks += fabric_checks(b, ev)
    checks += hccl_checks(b, ev) if b.ascend else nccl_checks(b, ev)
    checks += dcgm_checks(ev)
    checks += storage_checks(b, ev)
    if scope is not None:
        checks = [c for c in checks if c.name in wanted]
    mandatory = {n for n in b.required if scope is None or n in wanted}
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
    return Verdict(offering=b.name, passed=not any(c.status == FAIL for c in judged), checks=tuple(judged),
                   threshold=float(b.threshold), node=node, evidence=tuple(sorted(facts)))
