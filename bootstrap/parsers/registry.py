"""Kind name -> parser, a guarded ``parse()``, and ``to_jsonable()`` for any parser result."""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from .ascend import parse_hccl_test, parse_hccn_tool, parse_npu_smi, parse_npu_smi_detail
from .cpu import parse_lscpu, parse_lscpu_json, parse_meminfo
from .dcgm import parse_dcgm_diag
from .efa import parse_fi_info
from .errors import ParseError
from .infiniband import parse_erdma, parse_ibdev2netdev, parse_ibstat, parse_ibv_devinfo
from .nccl_tests import parse_nccl_tests
from .nvidia_smi import parse_nvidia_smi_q, parse_nvidia_smi_table, parse_nvidia_smi_xml
from .nvlink import parse_nvlink
from .storage import parse_lsblk_json, parse_mdstat, parse_nvme_list
from .topo import parse_npu_smi_topo, parse_nvidia_smi_topo

__all__ = ["KIND_TOOLS", "PARSERS", "Parser", "parse", "to_jsonable"]

Parser = Callable[[str], Any]

#: kind -> (command the output comes from, parser). Aliases share a parser.
_TABLE: dict[str, tuple[str, Parser]] = {
    "nvidia-smi-xml": ("nvidia-smi -q -x", parse_nvidia_smi_xml),
    "nvidia-smi-q": ("nvidia-smi -q", parse_nvidia_smi_q),
    "nvidia-smi": ("nvidia-smi", parse_nvidia_smi_table),
    "nvidia-smi-topo": ("nvidia-smi topo -m", parse_nvidia_smi_topo),
    "nvlink-status": ("nvidia-smi nvlink -s", parse_nvlink),
    "nvlink-remote": ("nvidia-smi nvlink -R", parse_nvlink),
    "nvlink-throughput": ("nvidia-smi nvlink -gt d", parse_nvlink),
    "nccl-tests": ("nccl-tests (all_reduce_perf ...)", parse_nccl_tests),
    "ibstat": ("ibstat", parse_ibstat),
    "ibv-devinfo": ("ibv_devinfo", parse_ibv_devinfo),
    "erdma": ("ibv_devinfo (eRDMA)", parse_erdma),
    "ibdev2netdev": ("ibdev2netdev", parse_ibdev2netdev),
    "fi-info": ("fi_info -p efa", parse_fi_info),
    "dcgm-diag": ("dcgmi diag", parse_dcgm_diag),
    "npu-smi": ("npu-smi info", parse_npu_smi),
    "npu-smi-detail": ("npu-smi info -t <type> -i <id>", parse_npu_smi_detail),
    "npu-smi-common": ("npu-smi info -t common -i <id>", parse_npu_smi_detail),
    "npu-smi-memory": ("npu-smi info -t memory -i <id>", parse_npu_smi_detail),
    "npu-smi-topo": ("npu-smi info -t topo", parse_npu_smi_topo),
    "hccn-tool": ("hccn_tool -i <n> ... -g", parse_hccn_tool),
    "hccl-test": ("hccl_test", parse_hccl_test),
    "mdstat": ("/proc/mdstat", parse_mdstat),
    "lsblk-json": ("lsblk --json", parse_lsblk_json),
    "nvme-list": ("nvme list", parse_nvme_list),
    "lscpu-json": ("lscpu -J", parse_lscpu_json),
    "lscpu": ("lscpu", parse_lscpu),
    "meminfo": ("/proc/meminfo", parse_meminfo),
}

#: kind -> the command whose output it parses (for messages and docs).
KIND_TOOLS: dict[str, str] = {k: tool for k, (tool, _f) in _TABLE.items()}

# Exceptions a parser bug could leak; the guard turns them into ParseError(internal=True).
_LEAKS = (ValueError, IndexError, KeyError, AttributeError, TypeError, UnicodeError, OverflowError,
          ZeroDivisionError, AssertionError, RecursionError, StopIteration)


def _guard(kind: str, tool: str, fn: Parser) -> Parser:
    @functools.wraps(fn)
    def wrapped(text: str) -> Any:
        try:
            return fn(text)
        except ParseError:
            raise
        except _LEAKS as exc:
            raise ParseError(tool, f"internal parser error in {kind!r}: {type(exc).__name__}: {exc}",
                             internal=True) from exc

    return wrapped


#: kind name -> parser(text) -> frozen dataclass. Every parser raises only ParseError on bad input.
PARSERS: dict[str, Parser] = {k: _guard(k, tool, fn) for k, (tool, fn) in _TABLE.items()}


def parse(kind: str, text: str) -> Any:
    """Parse ``text`` as output of ``kind``; unknown kinds raise ParseError too."""
    fn = PARSERS.get(kind)
    if fn is None:
        raise ParseError(kind, f"no parser for kind {kind!r}; known kinds: {', '.join(sorted(PARSERS))}")
    return fn(text)


def to_jsonable(result: Any) -> Any:
    """Turn a parser result (nested frozen dataclasses, tuples, mappings) into JSON-ready data.

    Non-finite floats become None so ``json.dumps(..., allow_nan=False)`` always works.
    """
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        out = {f.name: to_jsonable(getattr(result, f.name)) for f in dataclasses.fields(result)}
        return out
    if isinstance(result, enum.Enum):
        return to_jsonable(result.value)
    if isinstance(result, Mapping):
        return {str(k): to_jsonable(v) for k, v in result.items()}
    if isinstance(result, list | tuple | set | frozenset):
        items = sorted(result, key=str) if isinstance(result, set | frozenset) else result
        return [to_jsonable(v) for v in items]
    if isinstance(result, float):
        return result if math.isfinite(result) else None
    if result is None or isinstance(result, str | int | bool):
        return result
    raise TypeError(f"cannot make {type(result).__name__} JSON-ready")
