"""Guess the kind of a captured output from its text (fallback when the file name says nothing)."""

from __future__ import annotations

import re

__all__ = ["sniff_kind"]

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nvidia-smi-xml", re.compile(r"<nvidia_smi_log\b")),
    ("nvidia-smi-q", re.compile(r"^=+\s*NVSMI LOG\s*=+\s*$", re.M)),
    ("nvidia-smi", re.compile(r"NVIDIA-SMI \S+\s+Driver Version:")),
    ("npu-smi", re.compile(r"npu-smi \S+\s+Version:")),
    ("npu-smi-topo", re.compile(r"^\s*NPU0\s+NPU1?.*CPU Affinity", re.M)),
    ("nvidia-smi-topo", re.compile(r"^\s*GPU0\b.*(?:CPU Affinity|NIC0|GPU1)", re.M)),
    ("nccl-tests", re.compile(r"^(?:.*<stdout>:|\d+: )?#\s*(?:nThread \d|\s*size\s+count\s+type|Avg bus bandwidth)",
                              re.M)),
    ("hccl-test", re.compile(r"data_size\(Bytes\):\s*\|")),
    ("dcgm-diag", re.compile(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", re.M)),
    ("ibstat", re.compile(r"^CA '[^']+'", re.M)),
    ("erdma", re.compile(r"^hca_id:\s*erdma_|transport:\s*eRDMA", re.M)),
    ("ibv-devinfo", re.compile(r"^hca_id:\s*\S", re.M)),
    ("fi-info", re.compile(r"^provider:\s*\S+\s*\n\s+fabric:", re.M)),
    ("ibdev2netdev", re.compile(r"^\S+ port \d+ ==> \S+ \(", re.M)),
    ("mdstat", re.compile(r"^Personalities\s*:", re.M)),
    ("lsblk-json", re.compile(r'^\s*\{\s*"blockdevices"\s*:')),
    ("nvme-list", re.compile(r"^Node\s+.*SN\s+Model\s+Namespace\s+Usage", re.M)),
    ("nvlink-remote", re.compile(r"^\s+Link \d+: Remote Device", re.M)),
    ("nvlink-throughput", re.compile(r"^\s+Link \d+: Data [TR]x:", re.M)),
    ("nvlink-status", re.compile(r"^GPU \d+: .*\n(?:\s+Link \d+: |NVML: )", re.M)),
    ("npu-smi-detail", re.compile(r"^\s*NPU ID\s+:\s*\d+", re.M)),
    ("hccn-tool", re.compile(r"^(?:ipaddr:|device \d+ PING |Netdev status:|link status:|net health status:)", re.M)),
    ("lscpu-json", re.compile(r'^\s*\{\s*"lscpu"\s*:')),
    ("lscpu", re.compile(r"^Architecture:[ \t]+\S+[ \t]*$(?:\n.*){0,8}\n[ \t]*CPU\(s\):[ \t]+\d+[ \t]*$", re.M)),
    ("meminfo", re.compile(r"^MemTotal:[ \t]+\d+ kB[ \t]*$", re.M)),
)


def sniff_kind(text: str) -> str | None:
    """The first kind whose signature appears in ``text`` (None when nothing matches)."""
    head = text[:200_000]
    for kind, pattern in _RULES:
        if pattern.search(head):
            return kind
    return None
