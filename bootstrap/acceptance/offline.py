"""Offline analysis: parse saved command outputs, or judge a whole directory of them.

File naming (what ``tools/gpu_acceptance_check.py`` writes; matched case-insensitively against the file
name, then against the name of the folder holding it; the content is sniffed as a fallback, and to pick
between several name rules that match one descriptive name):

==============================================  =====================
file name contains / ends with                  kind
==============================================  =====================
``*.xml`` (e.g. ``nvidia-smi-q-x.xml``)         nvidia-smi-xml
``lsblk*.json``                                 lsblk-json
``default-table`` / ``smi-table``               nvidia-smi
``npu`` + ``topo``                              npu-smi-topo
``topo`` (``topo.txt``, ``nvidia-smi-topo.txt``) nvidia-smi-topo
``nvlink`` + ``-r``/``remote``                  nvlink-remote
``nvlink`` + ``-gt``/``throughput``             nvlink-throughput
``nvlink`` (``nvlink-s.txt``)                   nvlink-status
``hccl``                                        hccl-test
``hccn``                                        hccn-tool
``nccl``, ``all_reduce``, ``alltoall`` ...      nccl-tests
``npu-smi`` + ``-t-common/-memory/...``         npu-smi-detail
``npu-smi``                                     npu-smi
``dcgm``                                        dcgm-diag
``ibstat``                                      ibstat
``ibdev2netdev``                                ibdev2netdev
``erdma``                                       erdma
``ibv_devinfo`` / ``ibv-devinfo``               ibv-devinfo
``fi_info`` / ``fi-info``                       fi-info
``mdstat``                                      mdstat
``nvme-list`` / ``nvme_list``                   nvme-list
``nvidia-smi-q`` / ``nvidia-smi -q`` ...        nvidia-smi-q
``nvidia-smi`` (``nvidia-smi.txt``)             nvidia-smi
==============================================  =====================

Files that match nothing and whose content is not recognised are ignored (``verify_dir`` reports
which files it used in ``Verdict.evidence``); files and folders whose name starts with "." too.
Every other file is read as UTF-8 text: one that is not (or is binary, or too large) stops the run with
a :class:`~metalfleet.providers.textfile.BadFileError` naming it and the byte offset, since a capture
with bad bytes in it is no evidence, and a parse error names the file it came from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from metalfleet.providers.textfile import MAX_OUTPUT_BYTES, BadFileError, read_text_file

from ..parsers import PARSERS, ParseError, parse, sniff_kind, to_jsonable
from .gate import judge
from .verdict import Verdict

__all__ = ["NAME_RULES", "collect_facts", "kind_for_path", "parse_file", "verify_dir"]

NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), k) for p, k in (
    (r"\.xml$", "nvidia-smi-xml"),
    (r"lsblk.*\.json$", "lsblk-json"),
    (r"default-table|smi-table", "nvidia-smi"),
    (r"npu.*topo|topo.*npu", "npu-smi-topo"),
    (r"topo", "nvidia-smi-topo"),
    (r"nvlink.*(?:-r\b|-r-|remote)", "nvlink-remote"),
    (r"nvlink.*(?:-gt|throughput|counter)", "nvlink-throughput"),
    (r"nvlink", "nvlink-status"),
    (r"hccl", "hccl-test"),
    (r"hccn", "hccn-tool"),
    (r"nccl|all_?reduce|alltoall|all_?gather|reduce_?scatter|sendrecv", "nccl-tests"),
    (r"npu-smi.*-t-(?:common|memory|usages|board|health|power|temp)|npu-smi-(?:common|memory|detail)",
     "npu-smi-detail"),
    (r"npu-smi", "npu-smi"),
    (r"dcgm", "dcgm-diag"),
    (r"ibstat", "ibstat"),
    (r"ibdev2netdev", "ibdev2netdev"),
    (r"erdma", "erdma"),
    (r"ibv[_-]devinfo", "ibv-devinfo"),
    (r"fi[_-]info", "fi-info"),
    (r"mdstat", "mdstat"),
    (r"nvme[_-]list", "nvme-list"),
    (r"nvidia-smi[-_ ]?(?:q\b|q-|query)|smi-q\b", "nvidia-smi-q"),
    (r"nvidia-smi", "nvidia-smi"),
    (r"lscpu.*\.json$", "lscpu-json"),
    (r"lscpu", "lscpu"),
    (r"meminfo", "meminfo"),
))


def _by_name(name: str) -> list[str]:
    """Every kind whose rule matches ``name``, in rule order (first = the convention's answer)."""
    low = name.lower()
    return [kind for pattern, kind in NAME_RULES if pattern.search(low)]


def _read(path: Path) -> str:
    """A saved output's text (an empty file is left to its parser: some tools print nothing)."""
    text: str = read_text_file(path, "saved output", limit=MAX_OUTPUT_BYTES, allow_empty=True)
    return text.removeprefix("\ufeff")  # a byte order mark an editor added is no part of the output


def kind_for_path(path: str | Path, text: str | None = None) -> str | None:
    """The parser kind for a saved output: by file name, then folder name, then content.

    Descriptive names can match several rules ("dcgmi-diag-nvlinks12.txt" names both dcgm and nvlink);
    when the content's signature agrees with one of the name/folder candidates, that one wins.
    """
    p = Path(path)
    by_name, by_folder = _by_name(p.name), _by_name(p.parent.name)
    if text is None:
        try:
            text = _read(p)
        except BadFileError:  # judged by its name alone; reading it for real reports the fault
            text = ""
    sniffed = sniff_kind(text)
    if sniffed is not None and sniffed in (*by_name, *by_folder):
        return sniffed
    if by_name:
        return by_name[0]
    if by_folder:
        return by_folder[0]
    return sniffed


def parse_file(kind: str, path: str | Path) -> Any:
    """Parse one saved output and return JSON-ready data. ``kind`` may be "auto".

    Raises BadFileError (not readable as text) or ParseError (naming ``path``).
    """
    p = Path(path)
    text = _read(p)
    if kind == "auto":
        found = kind_for_path(p, text)
        if found is None:
            raise ParseError("auto", f"cannot tell what command produced {p.name}; name the kind "
                                     f"({', '.join(sorted(PARSERS))})", path=str(p))
        kind = found
    try:
        return to_jsonable(parse(kind, text))
    except ParseError as exc:
        raise exc.in_file(str(p)) from None


def collect_facts(directory: str | Path) -> tuple[dict[str, list[Any]], list[str]]:
    """Parse every recognised file under ``directory``: ({kind: [results]}, [relative paths used])."""
    root = Path(directory)
    if not root.is_dir():
        why = "is not a directory" if root.exists() else "does not exist"
        raise BadFileError(f"saved-output folder {root} {why}", path=str(root))
    facts: dict[str, list[Any]] = {}
    used: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        text = _read(path)
        kind = kind_for_path(path, text)
        if kind is None:
            continue
        try:
            facts.setdefault(kind, []).append(parse(kind, text))
        except ParseError as exc:
            raise exc.in_file(str(path)) from None
        used.append(f"{rel.as_posix()}={kind}")
    return facts, used


def verify_dir(path: str | Path, offering: str, overrides: dict[str, Any] | None = None, *,
               node: str | None = None) -> Verdict:
    """Judge every recognised output under ``path`` against ``offering`` (node name: the folder name)."""
    facts, used = collect_facts(path)
    verdict = judge(offering, facts, overrides, node=node or Path(path).resolve().name)
    return Verdict(verdict.offering, verdict.passed, verdict.checks, verdict.threshold, verdict.node, tuple(used))
