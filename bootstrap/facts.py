"""Facts: a command (argv) plus a pure parser of its stdout and exit status.

A fact never runs anything itself; the engine batches every fact a host needs into one exec
channel (:func:`metalfleet.bootstrap.script.fact_script`) and hands each parser its slice of the
output. Facts are frozen dataclasses, so equal facts are read once per round trip.

Parsers are forgiving: a missing tool (rc 127) or file reads as "absent", never as an exception,
because "not installed yet" is the normal state on a fresh node.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .parsers.ascend import HccnIp, parse_hccn_tool
from .parsers.cpu import parse_lscpu, parse_lscpu_json, parse_meminfo
from .parsers.errors import ParseError
from .parsers.infiniband import parse_ibstat
from .parsers.storage import parse_mdstat

__all__ = [
    "BlockDevice",
    "BlockDevices",
    "BootId",
    "CommandPaths",
    "CpuLayout",
    "CpuTopology",
    "Fact",
    "FactValues",
    "FiProviders",
    "FileContent",
    "FileHashes",
    "GpuDriverState",
    "HccnAddress",
    "IbPort",
    "IbStat",
    "KernelModules",
    "MdArray",
    "MdStat",
    "MemoryTotal",
    "MountEntry",
    "Mounts",
    "NvidiaSmi",
    "NvmeDevice",
    "NvmeList",
    "OsRelease",
    "PackageVersions",
    "PathsExist",
    "RawCommand",
    "SystemdUnits",
    "UnitState",
    "package_manager",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Fact(ABC, Generic[T_co]):
    """Subclasses are frozen dataclasses: their fields are the fact's arguments."""

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that prints the raw fact (run as root, stdin from /dev/null)."""

    @abstractmethod
    def parse(self, stdout: str, rc: int) -> T_co:
        """Turn the raw output into a value. Pure: no I/O."""

    @property
    def label(self) -> str:
        args = ",".join(str(v) for v in self.__dict__.values())
        return f"{type(self).__name__}({args})" if args else type(self).__name__


class FactValues:
    """Parsed fact values of one host, typed by the fact asked for."""

    def __init__(self, values: Mapping[Fact[Any], Any] | None = None) -> None:
        self._values: dict[Fact[Any], Any] = dict(values or {})

    def __getitem__(self, fact: Fact[T]) -> T:
        try:
            return self._values[fact]  # type: ignore[no-any-return]
        except KeyError:
            raise KeyError(f"fact {fact.label} was not gathered; list it in the step's facts()") from None

    def __contains__(self, fact: object) -> bool:
        return fact in self._values

    def update(self, values: Mapping[Fact[Any], Any]) -> None:
        self._values.update(values)

    def clear(self) -> None:
        self._values.clear()

    def items(self) -> list[tuple[Fact[Any], Any]]:
        return list(self._values.items())


def _sh(script: str, *args: str) -> list[str]:
    return ["sh", "-c", script, "sh", *args]


# --------------------------------------------------------------------------------------------
# Files and system


@dataclass(frozen=True)
class OsRelease(Fact[dict[str, str]]):
    path: str = "/etc/os-release"

    def command(self) -> list[str]:
        return ["cat", self.path]

    def parse(self, stdout: str, rc: int) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() and not key.startswith("#"):
                out[key.strip()] = value.strip().strip('"').strip("'")
        return out


def package_manager(os_release: Mapping[str, str]) -> str:
    """"apt" or "dnf" from /etc/os-release (ID and ID_LIKE)."""
    ids = {os_release.get("ID", "")} | set(os_release.get("ID_LIKE", "").split())
    if ids & {"rhel", "centos", "fedora", "rocky", "almalinux", "amzn", "ol", "alinux", "openeuler", "euleros",
              "anolis"}:
        return "dnf"
    return "apt"


@dataclass(frozen=True)
class FileContent(Fact["str | None"]):
    path: str

    def command(self) -> list[str]:
        return ["cat", self.path]

    def parse(self, stdout: str, rc: int) -> str | None:
        return stdout if rc == 0 else None


@dataclass(frozen=True)
class FileHashes(Fact[dict[str, "str | None"]]):
    """sha256 of each path; None for a path that is not a regular file."""

    paths: tuple[str, ...]

    def command(self) -> list[str]:
        return _sh('for f; do if [ -f "$f" ]; then sha256sum < "$f" | cut -d" " -f1; else echo -; fi; done',
                   *self.paths)

    def parse(self, stdout: str, rc: int) -> dict[str, str | None]:
        lines = stdout.split()
        out: dict[str, str | None] = {}
        for i, p in enumerate(self.paths):
            v = lines[i] if i < len(lines) else "-"
            out[p] = v if len(v) == 64 else None
        return out


@dataclass(frozen=True)
class PathsExist(Fact[frozenset[str]]):
    paths: tuple[str, ...]

    def command(self) -> list[str]:
        return _sh('for p; do if [ -e "$p" ]; then printf "%s\\n" "$p"; fi; done', *self.paths)

    def parse(self, stdout: str, rc: int) -> frozenset[str]:
        return frozenset(line for line in stdout.splitlines() if line in self.paths)


@dataclass(frozen=True)
class CommandPaths(Fact[dict[str, "str | None"]]):
    names: tuple[str, ...]

    def command(self) -> list[str]:
        return _sh('for c; do p=$(command -v "$c") || p=-; printf "%s\\n" "$p"; done', *self.names)

    def parse(self, stdout: str, rc: int) -> dict[str, str | None]:
        lines = stdout.splitlines()
        return {n: (lines[i] if i < len(lines) and lines[i] != "-" else None) for i, n in enumerate(self.names)}


@dataclass(frozen=True)
class BootId(Fact["str | None"]):
    """The kernel's boot id: changes on every boot, so a reboot is confirmed, not assumed."""

    path: str = "/proc/sys/kernel/random/boot_id"

    def command(self) -> list[str]:
        return ["cat", self.path]

    def parse(self, stdout: str, rc: int) -> str | None:
        value = stdout.strip()
        return value if rc == 0 and value else None


# --------------------------------------------------------------------------------------------
# CPUs and memory (what a scheduler's node definition states)


@dataclass(frozen=True)
class CpuLayout:
    """The node's CPUs as ``lscpu`` counts them: Slurm's ``Sockets``, ``CoresPerSocket``, ``ThreadsPerCore``
    and ``CPUs``. A count lscpu does not give (``Socket(s): -`` on some ARM servers) is None."""

    sockets: int | None
    cores_per_socket: int | None
    threads_per_core: int | None
    cpus: int
    model: str | None = None
    numa_nodes: int | None = None


@dataclass(frozen=True)
class CpuTopology(Fact["CpuLayout | None"]):
    """``lscpu -J`` (plain ``lscpu`` where util-linux is older than its JSON output), under ``LC_ALL=C``
    because lscpu translates its field names.

    None when lscpu is not installed (rc 127), fails, or prints something that is not lscpu's output.
    """

    def command(self) -> list[str]:
        return _sh("LC_ALL=C; export LC_ALL; lscpu -J 2>/dev/null || lscpu")

    def parse(self, stdout: str, rc: int) -> CpuLayout | None:
        if rc != 0 or not stdout.strip():
            return None
        try:
            report = parse_lscpu_json(stdout) if stdout.lstrip().startswith("{") else parse_lscpu(stdout)
        except ParseError:
            return None
        return CpuLayout(sockets=report.sockets, cores_per_socket=report.cores_per_socket,
                         threads_per_core=report.threads_per_core, cpus=report.cpus, model=report.model,
                         numa_nodes=report.numa_nodes)


@dataclass(frozen=True)
class MemoryTotal(Fact["int | None"]):
    """MemTotal of ``/proc/meminfo`` in MiB (Slurm's ``RealMemory`` unit), rounded down: what the kernel
    manages, a little below the installed memory. None when the file is missing or has no MemTotal.

    ``path`` is the node's path under its filesystem root (``host.path("/proc/meminfo")``), as for
    :class:`MdStat`.
    """

    path: str = "/proc/meminfo"

    def command(self) -> list[str]:
        return ["cat", self.path]

    def parse(self, stdout: str, rc: int) -> int | None:
        if rc != 0 or not stdout.strip():
            return None
        try:
            return parse_meminfo(stdout).total_mib
        except ParseError:
            return None


# --------------------------------------------------------------------------------------------
# Packages, modules, services


@dataclass(frozen=True)
class PackageVersions(Fact[dict[str, str]]):
    """Installed version of each named package; packages not installed are absent."""

    manager: str
    names: tuple[str, ...]

    def command(self) -> list[str]:
        if self.manager == "dnf":
            return ["rpm", "-q", "--qf", "%{NAME}\\t%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\tii\\n", *self.names]
        return ["dpkg-query", "-W", "-f", "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n", *self.names]

    def parse(self, stdout: str, rc: int) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in stdout.splitlines():
            parts = line.split("\t")
            if len(parts) >= 3 and parts[2].strip().startswith("ii") and parts[1]:
                version = parts[1]
                if self.manager == "dnf" and version.startswith("0:"):
                    version = version[2:]
                out[parts[0]] = version
        return out


@dataclass(frozen=True)
class KernelModules(Fact[frozenset[str]]):
    """Loaded kernel modules (``lsmod``), with '-' and '_' treated alike as the kernel does."""

    def command(self) -> list[str]:
        return ["lsmod"]

    def parse(self, stdout: str, rc: int) -> frozenset[str]:
        names = set()
        for line in stdout.splitlines()[1:]:
            if line.strip():
                names.add(line.split()[0].replace("-", "_"))
        return frozenset(names)


@dataclass(frozen=True)
class UnitState:
    exists: bool
    enabled: str
    active: str

    @property
    def is_enabled(self) -> bool:
        return self.enabled in ("enabled", "enabled-runtime", "static", "alias")

    @property
    def is_active(self) -> bool:
        return self.active == "active"


@dataclass(frozen=True)
class SystemdUnits(Fact[dict[str, UnitState]]):
    units: tuple[str, ...]

    def command(self) -> list[str]:
        return ["systemctl", "show", "--property=Id,LoadState,UnitFileState,ActiveState", "--", *self.units]

    def parse(self, stdout: str, rc: int) -> dict[str, UnitState]:
        blocks: list[dict[str, str]] = []
        current: dict[str, str] = {}
        for line in stdout.splitlines():
            if not line.strip():
                if current:
                    blocks.append(current)
                    current = {}
                continue
            k, _, v = line.partition("=")
            current[k] = v
        if current:
            blocks.append(current)
        out: dict[str, UnitState] = {}
        for unit, block in zip(self.units, blocks, strict=False):
            out[unit] = UnitState(exists=block.get("LoadState", "not-found") == "loaded",
                                  enabled=block.get("UnitFileState", ""), active=block.get("ActiveState", ""))
        for unit in self.units:
            out.setdefault(unit, UnitState(False, "", ""))
        return out


# --------------------------------------------------------------------------------------------
# GPUs and fabric


@dataclass(frozen=True)
class GpuDriverState:
    """``nvidia-smi`` as seen now: ``driver`` None when no driver answers (absent or not loaded)."""

    driver: str | None
    names: tuple[str, ...] = ()
    error: str = ""

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class NvidiaSmi(Fact[GpuDriverState]):
    def command(self) -> list[str]:
        return ["nvidia-smi", "--query-gpu=index,name,driver_version", "--format=csv,noheader"]

    def parse(self, stdout: str, rc: int) -> GpuDriverState:
        if rc != 0:
            return GpuDriverState(None, (), stdout.strip().splitlines()[0] if stdout.strip() else f"rc={rc}")
        names: list[str] = []
        driver: str | None = None
        for line in stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 3 and parts[0].isdigit():
                names.append(parts[1])
                driver = parts[2]
        return GpuDriverState(driver, tuple(names))


@dataclass(frozen=True)
class IbPort:
    ca: str
    port: int
    state: str
    rate: int
    link_layer: str


@dataclass(frozen=True)
class IbStat(Fact[tuple[IbPort, ...]]):
    """``ibstat`` reduced to what the steps need: CA, port, state, rate, link layer."""

    def command(self) -> list[str]:
        return ["ibstat"]

    def parse(self, stdout: str, rc: int) -> tuple[IbPort, ...]:
        if rc != 0 or not stdout.strip():
            return ()
        report = parse_ibstat(stdout)
        return tuple(IbPort(dev.name, port.number, port.state or "", int(port.rate_gbps or 0), port.link_layer or "")
                     for dev in report.devices for port in dev.ports)


@dataclass(frozen=True)
class FiProviders(Fact[tuple[str, ...]]):
    """Domains libfabric offers for ``provider`` (``fi_info -p efa``): empty when none."""

    provider: str = "efa"

    def command(self) -> list[str]:
        return ["fi_info", "-p", self.provider, "-t", "FI_EP_RDM"]

    def parse(self, stdout: str, rc: int) -> tuple[str, ...]:
        if rc != 0:
            return ()
        return tuple(dict.fromkeys(m.group(1) for m in re.finditer(r"domain:\s*(\S+)", stdout)))


@dataclass(frozen=True)
class HccnAddress(Fact["HccnIp | None"]):
    """``hccn_tool -i N -ip -g``: an NPU NIC's address and netmask, read by the acceptance parser.

    None when the tool is absent or fails, or prints something that is not an address (unset).
    """

    nic: int

    def command(self) -> list[str]:
        return ["hccn_tool", "-i", str(self.nic), "-ip", "-g"]

    def parse(self, stdout: str, rc: int) -> HccnIp | None:
        if rc != 0 or not stdout.strip():
            return None
        try:
            result = parse_hccn_tool(stdout)
        except ParseError:
            return None
        return result if isinstance(result, HccnIp) else None


# --------------------------------------------------------------------------------------------
# Storage


@dataclass(frozen=True)
class BlockDevice:
    name: str
    path: str
    type: str
    size: int
    fstype: str | None
    mountpoint: str | None
    model: str | None
    label: str | None
    parent: str | None
    children: tuple[str, ...] = ()


def _size(value: Any) -> int:
    """lsblk sizes: bytes with --bytes, else '7T', '63.8M'."""
    if isinstance(value, int):
        return value
    text = str(value or "").strip()
    if text.isdigit():
        return int(text)
    m = re.match(r"^([\d.]+)([BKMGTPE]?)$", text)
    if not m:
        return 0
    return int(float(m.group(1)) * 1024 ** "BKMGTPE".index(m.group(2) or "B"))


@dataclass(frozen=True)
class BlockDevices(Fact[tuple[BlockDevice, ...]]):
    """``lsblk --json`` flattened, children before their parents' other children."""

    def command(self) -> list[str]:
        return ["lsblk", "--json", "--bytes", "--output", "NAME,PATH,TYPE,SIZE,FSTYPE,MOUNTPOINT,MODEL,LABEL"]

    def parse(self, stdout: str, rc: int) -> tuple[BlockDevice, ...]:
        if rc != 0 or not stdout.strip():
            return ()
        data = json.loads(stdout)
        out: list[BlockDevice] = []

        def walk(node: dict[str, Any], parent: str | None) -> None:
            name = str(node.get("name", ""))
            kids = node.get("children") or []
            mountpoint = node.get("mountpoint") or next((m for m in node.get("mountpoints") or [] if m), None)
            out.append(BlockDevice(
                name=name, path=str(node.get("path") or f"/dev/{name}"), type=str(node.get("type", "")),
                size=_size(node.get("size")), fstype=node.get("fstype") or None, mountpoint=mountpoint,
                model=(node.get("model") or "").strip() or None, label=node.get("label") or None, parent=parent,
                children=tuple(str(k.get("name", "")) for k in kids)))
            for k in kids:
                walk(k, name)

        for dev in data.get("blockdevices", []):
            walk(dev, None)
        return tuple(out)


@dataclass(frozen=True)
class NvmeDevice:
    path: str
    model: str
    size: int


@dataclass(frozen=True)
class NvmeList(Fact[tuple[NvmeDevice, ...]]):
    """``nvme list -o json``: tells local instance-store NVMe from network volumes by model."""

    def command(self) -> list[str]:
        return ["nvme", "list", "-o", "json"]

    def parse(self, stdout: str, rc: int) -> tuple[NvmeDevice, ...]:
        if rc != 0 or not stdout.strip():
            return ()
        data = json.loads(stdout)
        out = []
        for d in data.get("Devices", []):
            path = d.get("DevicePath") or (f"/dev/{d['NameSpace']}" if "NameSpace" in d else "")
            out.append(NvmeDevice(path=str(path), model=str(d.get("ModelNumber", "")).strip(),
                                  size=int(d.get("PhysicalSize", 0) or 0)))
        return tuple(out)


@dataclass(frozen=True)
class MdArray:
    name: str
    level: str
    state: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class MdStat(Fact[tuple[MdArray, ...]]):
    path: str = "/proc/mdstat"

    def command(self) -> list[str]:
        return ["cat", self.path]

    def parse(self, stdout: str, rc: int) -> tuple[MdArray, ...]:
        if rc != 0 or not stdout.strip():
            return ()
        return tuple(MdArray(a.name, a.level or "", a.state, tuple(m.device for m in a.members))
                     for a in parse_mdstat(stdout).arrays)


@dataclass(frozen=True)
class MountEntry:
    source: str
    target: str
    fstype: str
    options: str


@dataclass(frozen=True)
class Mounts(Fact[tuple[MountEntry, ...]]):
    path: str = "/proc/mounts"

    def command(self) -> list[str]:
        return ["cat", self.path]

    def parse(self, stdout: str, rc: int) -> tuple[MountEntry, ...]:
        out = []
        for line in stdout.splitlines():
            parts = line.split()
            if len(parts) >= 4:
                out.append(MountEntry(*(p.replace("\\040", " ") for p in parts[:4])))
        return tuple(out)


@dataclass(frozen=True)
class RawCommand(Fact[tuple[int, str]]):
    """Any read-only command: (rc, stdout). For one-off facts in profiles and benchmarks."""

    argv: tuple[str, ...] = field(default=())

    def command(self) -> list[str]:
        return list(self.argv)

    def parse(self, stdout: str, rc: int) -> tuple[int, str]:
        return rc, stdout
