"""Pure parsers for GPU-server command output: text in, frozen dataclasses out.

Every parser takes the command's text and returns a frozen dataclass, or raises
:class:`ParseError` naming the tool and the offending line. ``PARSERS`` maps kind names to parsers;
``to_jsonable`` turns any result into JSON-ready data.

======================  ===============================================================
kind                    command
======================  ===============================================================
nvidia-smi-xml          ``nvidia-smi -q -x``
nvidia-smi-q            ``nvidia-smi -q`` (also ``-i N`` / ``-d PAGE_RETIREMENT``)
nvidia-smi              ``nvidia-smi`` (default table)
nvidia-smi-topo         ``nvidia-smi topo -m``
nvlink-status           ``nvidia-smi nvlink -s``
nvlink-remote           ``nvidia-smi nvlink -R``
nvlink-throughput       ``nvidia-smi nvlink -gt d``
nccl-tests              ``all_reduce_perf`` & co, with or without NCCL_DEBUG=INFO
ibstat                  ``ibstat``
ibv-devinfo             ``ibv_devinfo``
erdma                   ``ibv_devinfo`` on Alibaba eRDMA hosts
ibdev2netdev            ``ibdev2netdev``
fi-info                 ``fi_info -p efa``
dcgm-diag               ``dcgmi diag -r N``
npu-smi                 ``npu-smi info``
npu-smi-detail          ``npu-smi info -t common|memory|... -i N`` (aliases npu-smi-common/-memory)
npu-smi-topo            ``npu-smi info -t topo``
hccn-tool               ``hccn_tool -i N -ip|-ping|-status|-link|-net_health -g``
hccl-test               ``hccl_test`` (``all_reduce_test`` ...)
mdstat                  ``/proc/mdstat``
lsblk-json              ``lsblk --json``
nvme-list               ``nvme list``
lscpu-json              ``lscpu -J``
lscpu                   ``lscpu``
meminfo                 ``/proc/meminfo``
======================  ===============================================================
"""

from __future__ import annotations

from .errors import ParseError
from .registry import KIND_TOOLS, PARSERS, parse, to_jsonable
from .sniff import sniff_kind

__all__ = ["KIND_TOOLS", "PARSERS", "ParseError", "parse", "sniff_kind", "to_jsonable"]
