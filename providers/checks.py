"""The acceptance gate's check names (standard library only).

metalfleet.bootstrap.acceptance.gate judges them; they live in the kernel so that a cluster spec naming
one is validated before anything runs, and so that tools/gpu_acceptance_check.py (which runs on GPU
hosts with a bare python3) can import the gate without pydantic or PyYAML.
"""

from __future__ import annotations

__all__ = ["ACCEPTANCE_CHECKS"]

ACCEPTANCE_CHECKS: tuple[str, ...] = (
    "gpu-count", "gpu-model", "gpu-memory", "gpu-ecc", "gpu-memory-health", "gpu-persistence", "gpu-fabric-state",
    "gpu-interconnect", "nvlink-links", "fabric-ports", "nccl-correctness", "nccl-launch", "nccl-transport",
    "allreduce-busbw", "dcgm-diag", "npu-health", "npu-nic", "storage-raid", "storage-nvme",
)
