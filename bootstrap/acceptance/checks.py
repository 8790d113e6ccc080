"""The acceptance check registry: every check the gate judges, declared once.

A :class:`Check` says what the check is, which nodes it applies to, what judges it, which evidence could
speak to it, what to hand in when there is none and which baseline value it compares with. The gate
(:mod:`.gate`), the probes (:mod:`.probes`), the live runner (:mod:`.live`) and the spec (through
``metalfleet.providers.checks.ACCEPTANCE_CHECKS``, the names the kernel validates a spec against before
anything runs; a test keeps the two equal) all read :data:`CHECKS`. Adding a check is one entry here (and its
name in the kernel's list), plus the lines of its subject module that judge it.

A judging function (:data:`Judge`) may produce several checks: those that read the same output (one
``nvidia-smi -q -x`` gives count, model, memory, ECC...); the gate calls each function once. Standard
library only, like every check module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metalfleet.providers.checks import RDMA_FABRICS

from .baselines import Baseline
from .evidence import Evidence
from .fabric_checks import fabric_checks
from .gpu_checks import gpu_checks, interconnect_checks
from .nccl_checks import collective_checks
from .node_checks import dcgm_checks, storage_checks
from .verdict import CheckResult

__all__ = ["CHECKS", "CHECK_NAMES", "EXTRA_CHECKS", "JUDGES", "NCCL_CHECKS", "Check", "Judge", "check"]

#: Judges one node's evidence against its baseline: the results of the checks it produces (those it can judge).
Judge = Callable[[Baseline, Evidence], list[CheckResult]]


def _fabric(b: Baseline) -> bool:
    return (b.fabric.kind or "none") != "none"


def _nvidia(b: Baseline) -> bool:
    return not b.ascend


def _nvlink(b: Baseline) -> bool:
    return not b.ascend and b.interconnect.kind == "nvlink"


def _always(b: Baseline) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """One acceptance check (its name is stable: used in ``required``, ``acceptance.mandatory`` and reports)."""

    name: str
    #: What it judges (the gate's documentation).
    about: str
    #: The function that judges it (with the other checks read from the same output).
    judged_by: Judge
    #: Whether the evidence handed in could speak to it at all (else it is skipped as having none).
    evidence: Callable[[Evidence], bool]
    #: Whether a node of this baseline is judged on it; None: an extra, reported only when its evidence is
    #: there or it was asked for.
    applies: Callable[[Baseline], bool] | None
    #: What to hand in when it has no evidence.
    hint: str = "its output"
    #: The dotted baseline value it compares with (without one, it is skipped as not judged).
    baseline_field: str | None = None
    #: Judged on a run across nodes too (the collective checks).
    across_nodes: bool = False


def _gpu_evidence(ev: Evidence) -> bool:
    return bool(ev.smi or ev.npu)


_SMI = "nvidia-smi -q -x"
_SMI_OR_NPU = "nvidia-smi -q -x (or npu-smi info on Ascend)"
_NCCL_LOG = "an all_reduce_perf log"

#: Every check, in report order (the order of ``ACCEPTANCE_CHECKS``).
CHECKS: tuple[Check, ...] = (
    Check("gpu-count", "number of GPUs/NPUs (nvidia-smi -q -x / -q / table, npu-smi info, topo as fallback)",
          gpu_checks, lambda ev: bool(ev.smi or ev.npu or ev.topo), _always,
          "nvidia-smi -q -x (or nvidia-smi -q / nvidia-smi; npu-smi info on Ascend)", "gpu.count"),
    Check("gpu-model", "every device name matches the offering's ``gpu.name_regex``",
          gpu_checks, _gpu_evidence, _always, _SMI_OR_NPU, "gpu.name_regex"),
    Check("gpu-memory", "every device has at least ``gpu.min_memory_mib``",
          gpu_checks, _gpu_evidence, _always, _SMI_OR_NPU, "gpu.min_memory_mib"),
    Check("gpu-ecc", "ECC enabled (when required) and volatile uncorrected ECC count within the limit",
          gpu_checks, _gpu_evidence, _nvidia, _SMI),
    Check("gpu-memory-health", "no page retirement / row remap pending, no remap failure (warns on remapped rows)",
          gpu_checks, _gpu_evidence, _nvidia, _SMI),
    Check("gpu-persistence", "persistence mode (a warning unless ``gpu.require_persistence_mode``)",
          gpu_checks, _gpu_evidence, _nvidia),
    Check("gpu-fabric-state", 'NVSwitch fabric registration "Completed" (H100-era ``Fabric State``)',
          gpu_checks, _gpu_evidence, _nvlink),
    Check("gpu-interconnect", "topology link between every GPU pair is ``interconnect.topo_link`` (NV18, HCCS...)",
          interconnect_checks, lambda ev: bool(ev.topo), _always,
          "nvidia-smi topo -m (npu-smi info -t topo on Ascend)", "interconnect.topo_link"),
    Check("nvlink-links", "every GPU has ``links_per_gpu`` active NVLinks at ``link_gbs``",
          interconnect_checks, lambda ev: bool(ev.nvlink), _nvlink, "nvidia-smi nvlink -s",
          "interconnect.links_per_gpu"),
    Check("fabric-ports", "scale-out ports: count, state and rate for IB / RoCE / EFA / eRDMA / NPU RoCE",
          fabric_checks,
          lambda ev: bool(ev.ibstat or ev.ibv or ev.fi or ev.hccn or [r for r in ev.nccl if r.ofi_nics is not None]),
          _fabric, "ibstat / ibv_devinfo / fi_info -p efa / hccn_tool -status, depending on the fabric",
          "fabric.ports"),
    Check("nccl-correctness", 'nccl-tests #wrong == 0 and "Out of bounds values : 0 OK"; hccl_test check_result',
          collective_checks, lambda ev: bool(ev.nccl or ev.hccl), _always, _NCCL_LOG, across_nodes=True),
    Check("nccl-launch", "the log is one real multi-rank run (not N independent 1-rank runs)",
          collective_checks, lambda ev: bool(ev.nccl), _nvidia, _NCCL_LOG, across_nodes=True),
    Check("nccl-transport", "NCCL's network plugin fits the fabric (never NET/Socket on an RDMA fabric)",
          collective_checks, lambda ev: bool(ev.nccl), lambda b: _nvidia(b) and b.fabric.kind in RDMA_FABRICS,
          "an all_reduce_perf log run with NCCL_DEBUG=INFO", across_nodes=True),
    Check("allreduce-busbw", "all_reduce bus bandwidth >= threshold x baseline (hccl_test algbw normalised)",
          collective_checks, lambda ev: bool(ev.nccl or ev.hccl), _always,
          "an all_reduce_perf log (hccl_test all_reduce_test on Ascend)", across_nodes=True),
    Check("dcgm-diag", "dcgmi diag has no failed test",
          dcgm_checks, lambda ev: bool(ev.dcgm), None, "dcgmi diag -r 2"),
    Check("npu-health", "npu-smi reports every NPU as OK",
          gpu_checks, lambda ev: bool(ev.npu), lambda b: b.ascend, "npu-smi info"),
    Check("npu-nic", "hccn_tool: link up, net health, ping without loss",
          fabric_checks, lambda ev: bool(ev.hccn), lambda b: b.ascend and _fabric(b),
          "hccn_tool -i N -link -g / -ping -g"),
    Check("storage-raid", "/proc/mdstat arrays not degraded",
          storage_checks, lambda ev: bool(ev.mdstat), None, "/proc/mdstat"),
    Check("storage-nvme", "at least ``storage.nvme_count`` local NVMe disks",
          storage_checks, lambda ev: bool(ev.nvme or ev.lsblk), _nvidia, "lsblk --json or nvme list",
          "storage.nvme_count"),
)

_BY_NAME = {c.name: c for c in CHECKS}

#: Every check's name, in report order.
CHECK_NAMES: tuple[str, ...] = tuple(_BY_NAME)
#: The checks a run across nodes is judged on.
NCCL_CHECKS: tuple[str, ...] = tuple(c.name for c in CHECKS if c.across_nodes)
#: The checks reported only when their evidence is there or was asked for (not part of every node's judgement).
EXTRA_CHECKS: tuple[str, ...] = tuple(c.name for c in CHECKS if c.applies is None)
#: Every judging function once, in the order of the first check each produces.
JUDGES: tuple[Judge, ...] = tuple(dict.fromkeys(c.judged_by for c in CHECKS))


def check(name: str) -> Check:
    """The registered check ``name`` (KeyError for a name that is none)."""
    return _BY_NAME[name]

