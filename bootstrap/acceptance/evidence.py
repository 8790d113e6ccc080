"""Parsed outputs handed to the gate, sorted by what they are (one list per parser result type)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
from ..parsers.nccl_tests import NcclTestsReport
from ..parsers.nvidia_smi import NvidiaSmiReport
from ..parsers.nvlink import NvlinkReport
from ..parsers.storage import LsblkReport, MdstatReport, NvmeListReport
from ..parsers.topo import TopoMatrix

__all__ = ["Evidence", "collect"]


@dataclass
class Evidence:
    """One node's parsed outputs, by type (a kind may be handed in more than once: one hccn_tool per NIC)."""

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


def collect(facts: Mapping[str, Any]) -> Evidence:
    """``{kind: result or [results]}`` -> Evidence; a value that is no parser result is an InvalidSpecError."""
    ev = Evidence()
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
