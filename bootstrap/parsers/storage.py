"""Local storage views: ``/proc/mdstat``, ``lsblk --json`` and ``nvme list``."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ._text import Line, numbered_lines, require_text
from .errors import ParseError

__all__ = [
    "BlockDevice",
    "LsblkReport",
    "MdArray",
    "MdMember",
    "MdstatReport",
    "NvmeDevice",
    "NvmeListReport",
    "parse_lsblk_json",
    "parse_mdstat",
    "parse_nvme_list",
]

TOOL_MDSTAT = "/proc/mdstat"
TOOL_LSBLK = "lsblk --json"
TOOL_NVME = "nvme list"


# -------------------------------------------------------------------------------------------- mdstat


@dataclass(frozen=True)
class MdMember:
    device: str
    index: int
    failed: bool = False
    spare: bool = False


@dataclass(frozen=True)
class MdArray:
    name: str
    state: str
    level: str | None
    members: tuple[MdMember, ...]
    blocks: int | None = None
    #: "[2/2]" -> (2, 2); None for levels that do not print it (raid0, linear).
    raid_disks: int | None = None
    active_disks: int | None = None
    #: "[UU]"-style member map; "_" marks a missing member.
    status_map: str | None = None
    degraded: bool = False
    #: "recovery", "resync", "check", "reshape" when one is running.
    sync_action: str | None = None
    sync_progress_pct: float | None = None


@dataclass(frozen=True)
class MdstatReport:
    personalities: tuple[str, ...]
    arrays: tuple[MdArray, ...] = ()


_MD_HEAD = re.compile(r"^(?P<name>md\S*) : (?P<state>active|inactive)(?: \((?P<ro>[^)]*)\))?"
                      r"(?: (?P<level>raid\d+|linear|multipath|faulty))?"
                      r"(?P<members>(?: \S+\[\d+\](?:\([A-Z]\))*)*)\s*$")
_MEMBER = re.compile(r"(?P<dev>\S+)\[(?P<idx>\d+)\](?P<flags>(?:\([A-Z]\))*)")
_BLOCKS = re.compile(r"^(?P<blocks>\d+) blocks\b(?P<rest>.*)$")
_COUNTS = re.compile(r"\[(?P<n>\d+)/(?P<a>\d+)\] \[(?P<map>[U_]+)\]")
_SYNC = re.compile(r"(?P<action>recovery|resync|check|reshape|repair)\s*=\s*(?P<pct>[\d.]+)%")


def parse_mdstat(text: str) -> MdstatReport:
    """Parse ``/proc/mdstat``."""
    require_text(TOOL_MDSTAT, text)
    personalities: tuple[str, ...] | None = None
    arrays: list[dict[str, object]] = []
    for ln in numbered_lines(text):
        s = ln.text.strip()
        if not s:
            continue
        if s.startswith("Personalities :") or s == "Personalities:":
            personalities = tuple(re.findall(r"\[([^\]]+)\]", s))
            continue
        if s.startswith("unused devices:"):
            continue
        m = _MD_HEAD.match(s)
        if m:
            members = tuple(MdMember(x.group("dev"), int(x.group("idx")), "(F)" in x.group("flags"),
                                     "(S)" in x.group("flags")) for x in _MEMBER.finditer(m.group("members")))
            arrays.append({"name": m.group("name"), "state": m.group("state"), "level": m.group("level"),
                           "members": members})
            continue
        if not arrays or not ln.text[:1].isspace():
            raise ln.fail(TOOL_MDSTAT, "expected 'mdN : active|inactive ...' or an indented detail line")
        _md_detail(arrays[-1], s, ln)
    if personalities is None:
        raise ParseError(TOOL_MDSTAT, "no 'Personalities :' line")
    out: list[MdArray] = []
    for a in arrays:
        members = tuple(m for m in a["members"] if isinstance(m, MdMember)) \
            if isinstance(a["members"], tuple) else ()
        status_map = a.get("map")
        degraded = (isinstance(status_map, str) and "_" in status_map) or any(x.failed for x in members)
        out.append(MdArray(
            name=str(a["name"]), state=str(a["state"]), level=a["level"] if isinstance(a["level"], str) else None,
            members=members, blocks=_opt_int(a.get("blocks")), raid_disks=_opt_int(a.get("n")),
            active_disks=_opt_int(a.get("a")), status_map=status_map if isinstance(status_map, str) else None,
            degraded=degraded or a["state"] == "inactive",
            sync_action=str(a["action"]) if "action" in a else None,
            sync_progress_pct=float(str(a["pct"])) if "pct" in a else None))
    return MdstatReport(personalities, tuple(out))


def _opt_int(v: object) -> int | None:
    return int(v) if isinstance(v, int) else None


def _md_detail(a: dict[str, object], s: str, ln: Line) -> None:
    mb = _BLOCKS.match(s)
    if mb:
        a["blocks"] = int(mb.group("blocks"))
        mc = _COUNTS.search(mb.group("rest"))
        if mc:
            a["n"], a["a"], a["map"] = int(mc.group("n")), int(mc.group("a")), mc.group("map")
        return
    ms = _SYNC.search(s)
    if ms:
        a["action"], a["pct"] = ms.group("action"), ms.group("pct")
        return
    if s.startswith(("bitmap:", "[", "resync=", "unused")) or "finish=" in s:
        return
    raise ln.fail(TOOL_MDSTAT, "unrecognised array detail line")


# --------------------------------------------------------------------------------------------- lsblk


@dataclass(frozen=True)
class BlockDevice:
    name: str
    type: str
    size: str | None
    mountpoints: tuple[str, ...] = ()
    children: tuple[BlockDevice, ...] = ()


@dataclass(frozen=True)
class LsblkReport:
    devices: tuple[BlockDevice, ...]
    #: whole NVMe disks (type "disk", name "nvme*").
    nvme_disks: tuple[str, ...] = ()
    #: distinct md RAID arrays found anywhere in the tree, e.g. ("md0",) with their level.
    raid_arrays: tuple[tuple[str, str], ...] = ()


def _block(tool: str, obj: object, path: str) -> BlockDevice:
    if not isinstance(obj, dict):
        raise ParseError(tool, f"{path} is not an object")
    name, typ = obj.get("name"), obj.get("type")
    if not isinstance(name, str) or not isinstance(typ, str):
        raise ParseError(tool, f"{path} lacks a string 'name' and 'type'")
    size = obj.get("size")
    mps_raw = obj.get("mountpoints", [obj.get("mountpoint")])
    if not isinstance(mps_raw, list):
        raise ParseError(tool, f"{path} ({name}) 'mountpoints' is not a list")
    kids_raw = obj.get("children", [])
    if not isinstance(kids_raw, list):
        raise ParseError(tool, f"{path} ({name}) 'children' is not a list")
    kids = tuple(_block(tool, k, f"{path}.children[{i}]") for i, k in enumerate(kids_raw))
    return BlockDevice(name, typ, str(size) if size is not None else None,
                       tuple(m for m in mps_raw if isinstance(m, str)), kids)


def parse_lsblk_json(text: str) -> LsblkReport:
    """Parse ``lsblk --json`` (util-linux 2.33+ ``mountpoints`` lists and older ``mountpoint``)."""
    require_text(TOOL_LSBLK, text)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.splitlines()
        bad = lines[exc.lineno - 1] if 0 < exc.lineno <= len(lines) else None
        raise ParseError(TOOL_LSBLK, f"invalid JSON: {exc.msg}", line_no=exc.lineno, line=bad) from exc
    except RecursionError as exc:
        raise ParseError(TOOL_LSBLK, "JSON nested too deeply") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("blockdevices"), list):
        raise ParseError(TOOL_LSBLK, "top level is not an object with a 'blockdevices' list")
    devices = tuple(_block(TOOL_LSBLK, d, f"blockdevices[{i}]") for i, d in enumerate(doc["blockdevices"]))
    nvme = tuple(d.name for d in devices if d.type == "disk" and d.name.startswith("nvme"))
    raids: dict[str, str] = {}

    def walk(d: BlockDevice) -> None:
        if d.type.startswith("raid") or d.type == "linear":
            raids.setdefault(d.name, d.type)
        for c in d.children:
            walk(c)

    for d in devices:
        walk(d)
    return LsblkReport(devices, nvme, tuple(sorted(raids.items())))


# ----------------------------------------------------------------------------------------- nvme list


@dataclass(frozen=True)
class NvmeDevice:
    node: str
    serial: str
    model: str
    namespace: str
    usage: str
    format: str
    firmware: str
    used_bytes: float | None = None
    capacity_bytes: float | None = None


@dataclass(frozen=True)
class NvmeListReport:
    devices: tuple[NvmeDevice, ...]
    #: AWS local instance-store disks ("Amazon EC2 NVMe Instance Storage").
    instance_store: tuple[str, ...] = ()


_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15,
          "KIB": 1024.0, "MIB": 1024.0**2, "GIB": 1024.0**3, "TIB": 1024.0**4}
_USAGE = re.compile(r"^\s*(?P<u>[\d.]+)\s*(?P<uu>[KMGTP]?i?B)\s*/\s*(?P<t>[\d.]+)\s*(?P<tu>[KMGTP]?i?B)\s*$")


def parse_nvme_list(text: str) -> NvmeListReport:
    """Parse ``nvme list`` (the dashed rule under the header gives the column widths)."""
    require_text(TOOL_NVME, text)
    lines = [ln for ln in numbered_lines(text) if ln.text.strip()]
    if len(lines) < 2:
        raise ParseError(TOOL_NVME, "no header and rule lines")
    header, rule = lines[0], lines[1]
    if not re.fullmatch(r"-+(?: -+)*\s*", rule.text):
        raise rule.fail(TOOL_NVME, "second line is not the dashed column rule")
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule.text)]
    names = [header.text[a:b if i + 1 < len(spans) else None].strip() for i, (a, b) in enumerate(spans)]
    want = {"Node", "SN", "Model", "Namespace", "Usage", "Format", "FW Rev"}
    if not want.issubset(names):
        raise header.fail(TOOL_NVME, f"header lacks columns {sorted(want - set(names))}")
    devices: list[NvmeDevice] = []
    for ln in lines[2:]:
        cols: dict[str, str] = {}
        for i, (a, _b) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else None
            cols[names[i]] = ln.text[a:end].strip()
        if not cols["Node"].startswith("/dev/"):
            raise ln.fail(TOOL_NVME, "row does not start with a /dev/ node")
        used = cap = None
        mu = _USAGE.match(cols["Usage"])
        if mu:
            used = float(mu.group("u")) * _UNITS[mu.group("uu").upper()]
            cap = float(mu.group("t")) * _UNITS[mu.group("tu").upper()]
        devices.append(NvmeDevice(cols["Node"], cols["SN"], cols["Model"], cols["Namespace"], cols["Usage"],
                                  cols["Format"], cols["FW Rev"], used, cap))
    if not devices:  # nvme-cli prints "No NVMe devices detected." instead of an empty table
        raise ParseError(TOOL_NVME, "no device rows under the header (the output ends before the first device)")
    store = tuple(d.node for d in devices if "Instance Storage" in d.model)
    return NvmeListReport(tuple(devices), store)
