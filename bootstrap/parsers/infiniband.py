"""RDMA device listings: ``ibstat``, ``ibv_devinfo`` (InfiniBand, RoCE and Alibaba eRDMA) and ``ibdev2netdev``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ._text import Line, lenient_float, numbered_lines, require_text, strict_int
from .errors import ParseError

__all__ = [
    "IbDevice",
    "IbPort",
    "Ibdev2netdevEntry",
    "Ibdev2netdevReport",
    "IbstatReport",
    "IbvDevice",
    "IbvDevinfoReport",
    "IbvPort",
    "parse_erdma",
    "parse_ibdev2netdev",
    "parse_ibstat",
    "parse_ibv_devinfo",
]

TOOL_IBSTAT = "ibstat"
TOOL_IBV = "ibv_devinfo"
TOOL_ERDMA = "ibv_devinfo (eRDMA)"
TOOL_IB2NET = "ibdev2netdev"


# ------------------------------------------------------------------------------------------ ibstat


@dataclass(frozen=True)
class IbPort:
    number: int
    state: str | None = None
    physical_state: str | None = None
    rate_gbps: float | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    link_layer: str | None = None
    port_guid: str | None = None


@dataclass(frozen=True)
class IbDevice:
    name: str
    ca_type: str | None = None
    num_ports: int | None = None
    firmware: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    ports: tuple[IbPort, ...] = ()


@dataclass(frozen=True)
class IbstatReport:
    devices: tuple[IbDevice, ...] = ()
    #: ``ibpanic:`` / ``ibwarn:`` lines the tool printed (e.g. a device that vanished mid-listing).
    errors: tuple[str, ...] = ()


_CA = re.compile(r"^CA '(?P<name>[^']+)'\s*$")
_IBSTAT_KV = re.compile(r"^\s+(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*?)\s*$")
_PORT_HDR = re.compile(r"^\s+Port (?P<n>\d+):\s*$")
_CA_KEYS = {"CA type": "ca_type", "Number of ports": "num_ports", "Firmware version": "firmware",
            "Hardware version": "hardware_version", "Node GUID": "node_guid",
            "System image GUID": "system_image_guid"}
_PORT_KEYS = {"State", "Physical state", "Rate", "Base lid", "LMC", "SM lid", "Capability mask",
              "Port GUID", "Link layer"}


def parse_ibstat(text: str) -> IbstatReport:
    """Parse ``ibstat`` (tab or space indented; ``ibpanic``/``ibwarn`` lines kept as errors)."""
    require_text(TOOL_IBSTAT, text)
    devices: list[IbDevice] = []
    errors: list[str] = []
    port: IbPort | None = None
    port_indent = 0

    def flush_port() -> None:
        nonlocal port
        if port is not None:
            devices[-1] = replace(devices[-1], ports=(*devices[-1].ports, port))
            port = None

    for ln in numbered_lines(text):
        if not ln.text.strip():
            continue
        if ln.text.startswith(("ibpanic:", "ibwarn:", "ibstat:")):
            errors.append(ln.text.strip())
            continue
        m = _CA.match(ln.text)
        if m:
            if devices:
                flush_port()
            devices.append(IbDevice(m.group("name")))
            continue
        if not devices:
            raise ln.fail(TOOL_IBSTAT, "expected \"CA '<name>'\"")
        raw = ln.text.expandtabs(8)
        indent = len(raw) - len(raw.lstrip())
        mp = _PORT_HDR.match(ln.text)
        if mp:
            flush_port()
            port = IbPort(int(mp.group("n")))
            port_indent = indent
            continue
        mk = _IBSTAT_KV.match(ln.text)
        if not mk:
            raise ln.fail(TOOL_IBSTAT, "expected 'Key: value'")
        key, value = mk.group("key"), mk.group("value")
        if port is not None and indent > port_indent:
            if key not in _PORT_KEYS:
                raise ln.fail(TOOL_IBSTAT, f"unknown port field {key!r}")
            port = _port_field(port, key, value, ln)
            continue
        flush_port()
        attr = _CA_KEYS.get(key)
        if attr is None:
            raise ln.fail(TOOL_IBSTAT, f"unknown CA field {key!r}")
        if attr == "num_ports":
            devices[-1] = replace(devices[-1], num_ports=strict_int(TOOL_IBSTAT, value, ln, "Number of ports"))
        else:
            devices[-1] = replace(devices[-1], **{attr: value})  # type: ignore[arg-type]
    if devices:
        flush_port()
    if not devices and not errors:
        raise ParseError(TOOL_IBSTAT, "no CA found")
    return IbstatReport(tuple(devices), tuple(errors))


def _port_field(port: IbPort, key: str, value: str, ln: Line) -> IbPort:
    if key == "State":
        return replace(port, state=value)
    if key == "Physical state":
        return replace(port, physical_state=value)
    if key == "Rate":
        rate = lenient_float(value)
        if rate is None:
            raise ln.fail(TOOL_IBSTAT, "Rate is not a number")
        return replace(port, rate_gbps=rate)
    if key == "Base lid":
        return replace(port, base_lid=strict_int(TOOL_IBSTAT, value, ln, "Base lid"))
    if key == "SM lid":
        return replace(port, sm_lid=strict_int(TOOL_IBSTAT, value, ln, "SM lid"))
    if key == "Link layer":
        return replace(port, link_layer=value)
    if key == "Port GUID":
        return replace(port, port_guid=value)
    return port


# ------------------------------------------------------------------------------------- ibv_devinfo


@dataclass(frozen=True)
class IbvPort:
    number: int
    state: str | None = None
    #: numeric code from "PORT_ACTIVE (4)"
    state_code: int | None = None
    max_mtu: int | None = None
    active_mtu: int | None = None
    sm_lid: int | None = None
    port_lid: int | None = None
    link_layer: str | None = None
    extra: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class IbvDevice:
    hca_id: str
    transport: str | None = None
    fw_ver: str | None = None
    node_guid: str | None = None
    vendor_id: str | None = None
    vendor_part_id: str | None = None
    board_id: str | None = None
    phys_port_cnt: int | None = None
    ports: tuple[IbvPort, ...] = ()
    is_erdma: bool = False
    extra: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class IbvDevinfoReport:
    tool: str
    devices: tuple[IbvDevice, ...] = ()
    erdma_devices: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()


_IBV_KV = re.compile(r"^\s*(?P<key>[A-Za-z_][^:]*?):\s*(?P<value>.*?)\s*$")
_IBV_DEV_KEYS = {"transport", "fw_ver", "node_guid", "vendor_id", "vendor_part_id", "board_id", "phys_port_cnt"}
_STATE = re.compile(r"^(?P<name>\S+)\s*\((?P<code>\d+)\)$")
_MTU = re.compile(r"^(?P<v>\d+)(?:\s*\(\d+\))?$")


def _mtu(value: str, ln: Line, tool: str) -> int:
    m = _MTU.match(value)
    if not m:
        raise ln.fail(tool, f"MTU is not a number: {value!r}")
    return int(m.group("v"))


def _ibv(text: str, tool: str) -> IbvDevinfoReport:
    require_text(tool, text)
    devices: list[IbvDevice] = []
    messages: list[str] = []
    port: IbvPort | None = None
    dev_extra: list[tuple[str, str]] = []
    port_extra: list[tuple[str, str]] = []

    def flush_port() -> None:
        nonlocal port, port_extra
        if port is not None:
            devices[-1] = replace(devices[-1], ports=(*devices[-1].ports, replace(port, extra=tuple(port_extra))))
            port, port_extra = None, []

    def flush_dev() -> None:
        nonlocal dev_extra
        if devices:
            flush_port()
            devices[-1] = replace(devices[-1], extra=tuple(dev_extra))
            dev_extra = []

    for ln in numbered_lines(text):
        s = ln.text.strip()
        if not s:
            continue
        if s in ("No IB devices found", "Failed to get IB devices list: Function not implemented") or \
                s.startswith(("Failed to", "libibverbs:", "ibv_devinfo:")):
            messages.append(s)
            continue
        m = _IBV_KV.match(ln.text)
        if not m:
            if devices and ln.text[:1].isspace():
                # ``-v`` prints flag lists as bare indented continuation lines.
                (port_extra if port is not None else dev_extra).append(("", s))
                continue
            raise ln.fail(tool, "expected 'key: value'")
        key, value = m.group("key").strip(), m.group("value")
        if key == "hca_id":
            flush_dev()
            if not value:
                raise ln.fail(tool, "hca_id without a name")
            devices.append(IbvDevice(value))
            continue
        if not devices:
            raise ln.fail(tool, "field before the first 'hca_id:'")
        if key == "Device ports" and not value:
            continue
        if key == "port":
            flush_port()
            port = IbvPort(strict_int(tool, value, ln, "port"))
            continue
        if port is not None:
            if key == "state":
                ms = _STATE.match(value)
                if not ms:
                    raise ln.fail(tool, f"port state is not 'NAME (code)': {value!r}")
                port = replace(port, state=ms.group("name"), state_code=int(ms.group("code")))
            elif key == "max_mtu":
                port = replace(port, max_mtu=_mtu(value, ln, tool))
            elif key == "active_mtu":
                port = replace(port, active_mtu=_mtu(value, ln, tool))
            elif key == "sm_lid":
                port = replace(port, sm_lid=strict_int(tool, value, ln, "sm_lid"))
            elif key == "port_lid":
                port = replace(port, port_lid=strict_int(tool, value, ln, "port_lid"))
            elif key == "link_layer":
                port = replace(port, link_layer=value)
            else:
                port_extra.append((key, value))
            continue
        if key in _IBV_DEV_KEYS:
            if key == "phys_port_cnt":
                devices[-1] = replace(devices[-1], phys_port_cnt=strict_int(tool, value, ln, "phys_port_cnt"))
            elif key == "transport":
                erdma = value.lower().startswith("erdma") or devices[-1].hca_id.startswith("erdma")
                devices[-1] = replace(devices[-1], transport=value, is_erdma=erdma)
            else:
                devices[-1] = replace(devices[-1], **{key: value})  # type: ignore[arg-type]
        else:
            dev_extra.append((key, value))
    flush_dev()
    if not devices and not messages:
        raise ParseError(tool, "no 'hca_id:' found")
    erdma = tuple(d.hca_id for d in devices if d.is_erdma or d.hca_id.startswith("erdma"))
    return IbvDevinfoReport(tool, tuple(devices), erdma, tuple(messages))


def parse_ibv_devinfo(text: str) -> IbvDevinfoReport:
    """Parse ``ibv_devinfo`` (with or without ``-v``; unknown fields are kept in ``extra``)."""
    return _ibv(text, TOOL_IBV)


def parse_erdma(text: str) -> IbvDevinfoReport:
    """Parse ``ibv_devinfo`` from an Alibaba eRDMA host (``erdma_N`` devices, transport ``eRDMA``)."""
    return _ibv(text, TOOL_ERDMA)


# ------------------------------------------------------------------------------------ ibdev2netdev


@dataclass(frozen=True)
class Ibdev2netdevEntry:
    device: str
    port: int
    netdev: str
    state: str


@dataclass(frozen=True)
class Ibdev2netdevReport:
    entries: tuple[Ibdev2netdevEntry, ...] = field(default_factory=tuple)


_IB2NET = re.compile(r"^(?P<dev>\S+) port (?P<port>\d+) ==> (?P<net>\S+) \((?P<state>[^)]*)\)\s*$")


def parse_ibdev2netdev(text: str) -> Ibdev2netdevReport:
    """Parse ``ibdev2netdev`` (``mlx5_0 port 1 ==> ib0 (Up)``)."""
    require_text(TOOL_IB2NET, text)
    out: list[Ibdev2netdevEntry] = []
    for ln in numbered_lines(text):
        if not ln.text.strip():
            continue
        m = _IB2NET.match(ln.text.strip())
        if not m:
            raise ln.fail(TOOL_IB2NET, "expected '<dev> port <n> ==> <netdev> (<state>)'")
        out.append(Ibdev2netdevEntry(m.group("dev"), int(m.group("port")), m.group("net"), m.group("state")))
    return Ibdev2netdevReport(tuple(out))
