"""``nvidia-smi nvlink`` outputs: ``-s`` (link speed / inactive), ``-R`` (remote end) and ``-gt d`` (data counters).

All three print ``GPU n: <name> (UUID: ...)`` followed by indented ``Link k: ...`` lines; they differ only
in what follows ``Link k:``, so one parser reads all of them into :class:`NvlinkReport`. A GPU whose
links are all down prints ``NVML: Unable to retrieve NVLink information as all links are inActive``;
a GPU without NVLink prints nothing at all (an empty file is a valid report with no GPUs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ._text import numbered_lines
from .errors import ParseError

__all__ = ["NvlinkGpu", "NvlinkLink", "NvlinkReport", "parse_nvlink"]

TOOL = "nvidia-smi nvlink"

_GPU = re.compile(r"^GPU (?P<idx>\d+): (?P<name>.*?)(?: \(UUID: (?P<uuid>[^)]*)\))?\s*$")
_LINK = re.compile(r"^\s+Link (?P<link>\d+): (?P<rest>.*?)\s*$")
_SPEED = re.compile(r"^(?P<gbs>\d+(?:\.\d+)?) GB/s$")
_REMOTE = re.compile(r"^Remote Device (?P<bus>[0-9A-Fa-f:.]+): Link (?P<rlink>\d+)$")
_DATA = re.compile(r"^Data (?P<dir>Tx|Rx): (?P<kib>\d+) KiB$")
_ALL_INACTIVE = re.compile(r"^NVML: .*all links are inactive", re.IGNORECASE)


@dataclass(frozen=True)
class NvlinkLink:
    link: int
    speed_gbs: float | None = None
    inactive: bool = False
    remote_bus_id: str | None = None
    remote_link: int | None = None
    tx_kib: int | None = None
    rx_kib: int | None = None


@dataclass(frozen=True)
class NvlinkGpu:
    index: int
    name: str
    uuid: str | None
    links: tuple[NvlinkLink, ...] = ()
    #: True when NVML reported that every link is inactive (the GPU has no working NVLink).
    all_inactive: bool = False
    active_links: int = 0
    inactive_links: int = 0


@dataclass(frozen=True)
class NvlinkReport:
    gpus: tuple[NvlinkGpu, ...] = ()


def parse_nvlink(text: str) -> NvlinkReport:
    """Parse ``nvidia-smi nvlink -s`` / ``-R`` / ``-gt d`` output (an empty input has no GPUs)."""
    if not isinstance(text, str):
        raise ParseError(TOOL, f"expected text, got {type(text).__name__}")
    gpus: list[NvlinkGpu] = []
    links: dict[int, NvlinkLink] = {}

    def close() -> None:
        if gpus:
            ordered = tuple(links[k] for k in sorted(links))
            active = sum(1 for lk in ordered if not lk.inactive and lk.speed_gbs is not None)
            inactive = sum(1 for lk in ordered if lk.inactive)
            gpus[-1] = replace(gpus[-1], links=ordered, active_links=active, inactive_links=inactive)

    for ln in numbered_lines(text):
        if not ln.text.strip():
            continue
        m = _GPU.match(ln.text)
        if m:
            close()
            links = {}
            gpus.append(NvlinkGpu(int(m.group("idx")), m.group("name"), m.group("uuid")))
            continue
        if not gpus:
            raise ln.fail(TOOL, "line before the first 'GPU n:' header")
        if _ALL_INACTIVE.match(ln.text.strip()):
            if links:
                raise ln.fail(TOOL, "'all links are inactive' after link lines")
            gpus[-1] = replace(gpus[-1], all_inactive=True)
            continue
        m = _LINK.match(ln.text)
        if not m:
            raise ln.fail(TOOL, "expected 'Link n: ...'")
        if gpus[-1].all_inactive:
            raise ln.fail(TOOL, "link line after 'all links are inactive'")
        k = int(m.group("link"))
        rest = m.group("rest")
        cur = links.get(k, NvlinkLink(k))
        if rest == "<inactive>":
            new = replace(cur, inactive=True)
        elif (ms := _SPEED.match(rest)) is not None:
            new = replace(cur, speed_gbs=float(ms.group("gbs")))
        elif (mr := _REMOTE.match(rest)) is not None:
            new = replace(cur, remote_bus_id=mr.group("bus"), remote_link=int(mr.group("rlink")))
        elif (md := _DATA.match(rest)) is not None:
            kib = int(md.group("kib"))
            new = replace(cur, tx_kib=kib) if md.group("dir") == "Tx" else replace(cur, rx_kib=kib)
        else:
            raise ln.fail(TOOL, f"unrecognised link value {rest!r}")
        if k in links and new == cur:
            raise ln.fail(TOOL, f"link {k} repeated")
        links[k] = new
    close()
    return NvlinkReport(tuple(gpus))
