"""Storage tiers: hot (local NVMe RAID0), warm (parallel file system client), cold (object storage).

The hot tier never reformats: a device or array that already holds a filesystem (or a partition
table, or is part of another array) is left alone, and ``mkfs`` is run without ``-f`` so even a
stale fact cannot make it overwrite a signature it did not see.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import StepError
from ..facts import BlockDevice, BlockDevices, Fact, FactValues, FileContent, MdStat, Mounts, NvmeList, PackageVersions
from ..step import Action, Command, NoOp, Step, StepContext
from .common import ensure_line, manager, os_fact, packages_plan

__all__ = ["ColdTier", "HotTier", "WarmTier", "fstab_has", "local_nvme"]

#: NVMe models that are network volumes, not local disks.
NETWORK_NVME_MODELS = ("Amazon Elastic Block Store", "Alibaba Cloud Elastic Block Storage", "ESSD", "EVS")


def fstab_has(fstab: str | None, target: str) -> bool:
    for line in (fstab or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and not parts[0].startswith("#") and parts[1] == target:
            return True
    return False


def _mounted(mounts: Sequence[Any], target: str) -> bool:
    return any(m.target == target for m in mounts)


def local_nvme(devices: Sequence[BlockDevice], nvme_models: dict[str, str]) -> tuple[list[BlockDevice], list[str]]:
    """(NVMe disks free for the array, reasons for the ones left alone)."""
    by_name = {d.name: d for d in devices}
    skipped: list[str] = []
    free: list[BlockDevice] = []

    def in_use(d: BlockDevice) -> str | None:
        if d.fstype:
            return f"holds {d.fstype}"
        if d.mountpoint:
            return f"mounted at {d.mountpoint}"
        for c in d.children:
            child = by_name.get(c)
            if child is not None:
                return f"has {child.type} {child.name}"
        return None

    for d in devices:
        if d.type != "disk" or not d.name.startswith("nvme") or d.parent is not None:
            continue
        model = nvme_models.get(d.path) or d.model or ""
        if any(m in model for m in NETWORK_NVME_MODELS):
            skipped.append(f"{d.path} is a network volume ({model})")
            continue
        why = in_use(d)
        if why:
            skipped.append(f"{d.path} {why}: left alone")
            continue
        free.append(d)
    return free, skipped


@dataclass(frozen=True)
class HotSettings:
    mount: str | None = None
    filesystem: Literal["xfs", "ext4"] = "xfs"
    label: str = "mf-scratch"
    md_device: str = "/dev/md0"
    md_name: str = "mf-scratch"
    #: Explicit member devices; None discovers local NVMe (instance store).
    devices: tuple[str, ...] | None = None
    mount_options: str = "defaults,noatime,nofail"


class HotTier(Step[HotSettings]):
    """Local NVMe as one RAID0 array with a filesystem, mounted and in fstab."""

    name = "storage-hot"
    title = "hot tier: NVMe RAID0"
    Settings = HotSettings

    @property
    def wanted(self) -> bool:
        return self.settings.mount is not None

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [BlockDevices(), NvmeList(), MdStat(ctx.path("/proc/mdstat")), Mounts(ctx.path("/proc/mounts")),
                FileContent(ctx.path("/etc/fstab"))]

    def _existing(self, devices: Sequence[BlockDevice]) -> BlockDevice | None:
        s = self.settings
        md = s.md_device.rsplit("/", 1)[-1]
        for d in devices:
            if d.label == s.label or (d.type.startswith("raid") and d.name == md):
                return d
        return None

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        assert s.mount is not None
        devices = facts[BlockDevices()]
        target = ctx.path(s.mount)
        existing = self._existing(devices)
        source = f"LABEL={s.label}"
        if existing is not None:
            device = existing.path
            if existing.fstype:
                source = f"LABEL={existing.label}" if existing.label else device
            if existing.mountpoint and existing.mountpoint != target:
                yield NoOp(f"{device} is already mounted at {existing.mountpoint}: left as it is")
                return
            if existing.fstype or existing.mountpoint:
                yield NoOp(f"{device} already holds {existing.fstype or 'a mounted filesystem'}"
                           + (f" (label {existing.label})" if existing.label else "") + ": not reformatted")
            else:
                yield NoOp(f"{device} exists")
                yield Command((f"mkfs.{s.filesystem}", "-L", s.label, device), f"make {s.filesystem} on {device}")
        else:
            models = {n.path: n.model for n in facts[NvmeList()]}
            if s.devices is not None:
                by_path = {d.path: d for d in devices}
                free, skipped = local_nvme([by_path[p] for p in s.devices if p in by_path], models)
                missing = [p for p in s.devices if p not in by_path]
                if missing or skipped:
                    raise StepError(f"hot tier devices not usable: {', '.join(missing + skipped)}")
            else:
                free, skipped = local_nvme(devices, models)
            for why in skipped:
                yield NoOp(why)
            if not free:
                yield NoOp("no free local NVMe: no hot tier on this host")
                return
            paths = [d.path for d in sorted(free, key=lambda d: (len(d.name), d.name))]
            if len(paths) == 1:
                device = paths[0]
            else:
                device = s.md_device
                yield Command(("mdadm", "--create", device, "--run", "--level=0", f"--raid-devices={len(paths)}",
                               f"--name={s.md_name}", *paths), f"RAID0 over {len(paths)} NVMe")
                yield Command(("sh", "-c", 'mdadm --detail --brief "$1" >> "$2"', "sh", device,
                               ctx.path("/etc/mdadm/mdadm.conf")), "record the array in mdadm.conf")
            yield Command((f"mkfs.{s.filesystem}", "-L", s.label, device), f"make {s.filesystem} on {device}")
        fstype = existing.fstype if existing is not None and existing.fstype else s.filesystem
        yield from _mount(facts, ctx, source, target, fstype, s.mount_options)


def _mount(facts: FactValues, ctx: StepContext, source: str, target: str, fstype: str,
           options: str) -> Iterator[Action]:
    fstab_path = ctx.path("/etc/fstab")
    fstab = facts[FileContent(fstab_path)]
    if fstab_has(fstab, target):
        yield NoOp(f"{target} in fstab")
    else:
        yield Command(("mkdir", "-p", target), f"mount point {target}")
        yield ensure_line(fstab_path, f"{source} {target} {fstype} {options} 0 0")
    if _mounted(facts[Mounts(ctx.path("/proc/mounts"))], target):
        yield NoOp(f"{target} mounted")
    else:
        yield Command(("mount", target), f"mount {target}")


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Client:
    fstype: str
    options: str
    packages: tuple[str, ...]


WARM_CLIENTS: dict[str, _Client] = {
    "lustre": _Client("lustre", "defaults,noatime,flock,_netdev,nofail", ("lustre-client-utils",)),
    "fsx-lustre": _Client("lustre", "defaults,noatime,flock,_netdev,nofail,x-systemd.automount,"
                                    "x-systemd.requires=network.service", ("lustre-client-utils",)),
    "cpfs": _Client("nfs", "vers=3,nolock,proto=tcp,noresvport,_netdev,nofail", ("nfs-common",)),
    "sfs-turbo": _Client("nfs", "vers=3,timeo=600,noresvport,nolock,_netdev,nofail", ("nfs-common",)),
    "gpfs": _Client("gpfs", "defaults,_netdev,nofail", ()),
    "nfs": _Client("nfs4", "defaults,_netdev,nofail,hard,timeo=600", ("nfs-common",)),
}


@dataclass(frozen=True)
class WarmSettings:
    kind: Literal["lustre", "fsx-lustre", "cpfs", "sfs-turbo", "gpfs", "nfs"] | None = None
    source: str | None = None
    mount: str = "/shared"
    options: str | None = None


class WarmTier(Step[WarmSettings]):
    """Parallel file system client: package, mount point, fstab entry, mounted."""

    name = "storage-warm"
    title = "warm tier: parallel FS mount"
    Settings = WarmSettings

    @property
    def wanted(self) -> bool:
        return self.settings.kind is not None and self.settings.source is not None

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        pk = WARM_CLIENTS[self.settings.kind].packages if self.settings.kind else ()
        return [os_fact(ctx), PackageVersions("apt", pk), PackageVersions("dnf", pk),
                Mounts(ctx.path("/proc/mounts")), FileContent(ctx.path("/etc/fstab"))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        if s.kind is None or s.source is None:
            raise StepError("storage-warm needs kind and source")
        client = WARM_CLIENTS[s.kind]
        if client.packages:
            yield from packages_plan(manager(ctx, facts), facts, dict.fromkeys(client.packages), hold=False,
                                     what=f"{s.kind} client")
        else:
            yield NoOp(f"{s.kind} client is installed by the file system's own tooling")
        yield from _mount(facts, ctx, s.source, ctx.path(s.mount), client.fstype, s.options or client.options)


# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ObjectTool:
    package: str
    #: fstab (source, fstype, options) for a mount; None: the tool is configured but not mounted.
    fstab: tuple[str, str, str] | None


def _object_tool(tool: str, bucket: str) -> _ObjectTool:
    table = {
        "mountpoint-s3": _ObjectTool("mount-s3", (f"s3://{bucket}/", "mount-s3", "_netdev,nosuid,nodev,nofail,rw")),
        "s3fs": _ObjectTool("s3fs", (bucket, "fuse.s3fs", "_netdev,allow_other,iam_role=auto,nofail")),
        "ossfs": _ObjectTool("ossfs", (f"ossfs#{bucket}", "fuse", "_netdev,allow_other,nofail")),
        "obsfs": _ObjectTool("obsfs", (f"obsfs#{bucket}", "fuse", "_netdev,allow_other,big_writes,nofail")),
        "rclone": _ObjectTool("rclone", None),
    }
    return table[tool]


DEFAULT_TOOL = {"s3": "mountpoint-s3", "oss": "ossfs", "obs": "obsfs"}
RCLONE_PROVIDER = {"s3": "AWS", "oss": "Alibaba", "obs": "HuaweiOBS"}


@dataclass(frozen=True)
class ColdSettings:
    kind: Literal["s3", "oss", "obs"] | None = None
    bucket: str | None = None
    mount: str | None = "/data"
    tool: Literal["mountpoint-s3", "s3fs", "ossfs", "obsfs", "rclone"] | None = None
    rclone_conf: str = "/etc/rclone/rclone.conf"


class ColdTier(Step[ColdSettings]):
    """Object storage: a FUSE mount in fstab (mountpoint-s3, s3fs, ossfs, obsfs) or an rclone remote.

    Credentials come from the node's role (instance profile / RAM role / agency), never from the spec.
    """

    name = "storage-cold"
    title = "cold tier: object storage"
    Settings = ColdSettings

    @property
    def wanted(self) -> bool:
        return self.settings.kind is not None and self.settings.bucket is not None

    def _tool(self) -> tuple[str, _ObjectTool]:
        s = self.settings
        assert s.kind is not None and s.bucket is not None
        name = s.tool or DEFAULT_TOOL[s.kind]
        return name, _object_tool(name, s.bucket)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        _, tool = self._tool()
        return [os_fact(ctx), PackageVersions("apt", (tool.package,)), PackageVersions("dnf", (tool.package,)),
                Mounts(ctx.path("/proc/mounts")), FileContent(ctx.path("/etc/fstab")),
                FileContent(ctx.path(self.settings.rclone_conf))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        name, tool = self._tool()
        assert s.kind is not None and s.bucket is not None
        yield from packages_plan(manager(ctx, facts), facts, {tool.package: None}, hold=False, what=name)
        if tool.fstab is None:
            conf = ctx.path(s.rclone_conf)
            section = f"[{s.kind}-{s.bucket}]"
            have = facts[FileContent(conf)] or ""
            if section in have.splitlines():
                yield NoOp(f"rclone remote {section} configured")
            else:
                yield Command(("mkdir", "-p", conf.rsplit("/", 1)[0]), "rclone config dir")
                yield Command(("sh", "-c", 'f=$1; shift; printf "%s\\n" "$@" >> "$f"', "sh", conf, section,
                               "type = s3", f"provider = {RCLONE_PROVIDER[s.kind]}", "env_auth = true"),
                              f"rclone remote {section}")
            return
        if s.mount is None:
            yield NoOp(f"{name} installed; no mount asked for")
            return
        source, fstype, options = tool.fstab
        yield from _mount(facts, ctx, source, ctx.path(s.mount), fstype, options)
