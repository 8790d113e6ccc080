"""The acceptance gate's check names and the fabrics that carry RDMA (standard library only).

metalfleet.bootstrap.acceptance.gate judges the checks; they live in the kernel so that a cluster spec
naming one is validated before anything runs, and so that tools/gpu_acceptance_check.py (which runs on
GPU hosts with a bare python3, 3.10 included) can import the gate without pydantic or PyYAML. The RDMA
fabric set lives here for the same reason: the gate, the catalogue browser and the planner share it, and
:mod:`.models` (its ``StrEnum`` is 3.11+) is not importable on such a host.
"""

from __future__ import annotations

__all__ = ["ACCEPTANCE_CHECKS", "RDMA_FABRICS"]

ACCEPTANCE_CHECKS: tuple[str, ...] = (
    "gpu-count", "gpu-model", "gpu-memory", "gpu-ecc", "gpu-memory-health", "gpu-persistence", "gpu-fabric-state",
    "gpu-interconnect", "nvlink-links", "fabric-ports", "nccl-correctness", "nccl-launch", "nccl-transport",
    "allreduce-busbw", "dcgm-diag", "npu-health", "npu-nic", "storage-raid", "storage-nvme",
)

#: The :class:`~metalfleet.providers.models.Fabric` values that carry RDMA between nodes (GPUDirect RDMA,
#: NCCL's IB / OFI network plugins, HCCL over RoCE); every other value (``none``) is plain TCP. ``hccs``
#: counts: as a *fabric* it names the Ascend NPUs' own 200GE RoCE ports, which HCCN sets up and HCCL
#: reaches other servers through (the catalogue's note on the Huawei offering says so); the on-package
#: HCCS mesh between the NPUs of one server is :class:`~metalfleet.providers.models.Interconnect` ``hccs``.
#: Strings, so a baseline's ``fabric.kind`` and a ``Fabric`` member are both looked up as they are.
RDMA_FABRICS: frozenset[str] = frozenset({"efa", "infiniband", "roce", "erdma", "hccs"})
