"""Scale-out fabric steps: EFA + aws-ofi-nccl (AWS), DOCA-OFED + RDMA settings (InfiniBand/RoCE),
eRDMA (Alibaba), HCCN addresses (Ascend)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from metalfleet.providers.models import Fabric

from ..errors import StepError
from ..facts import (
    Fact,
    FactValues,
    FileContent,
    FileHashes,
    HccnAddress,
    KernelModules,
    PackageVersions,
    PathsExist,
)
from ..inventory import Host
from ..step import Action, Command, NoOp, Step, StepContext
from .common import file_state, installer_command, manager, os_fact, packages_plan

__all__ = ["AwsOfiNccl", "DocaOfed", "Efa", "Erdma", "Hccn", "RdmaSettings"]


# --------------------------------------------------------------------------------------------
# AWS EFA


@dataclass(frozen=True)
class EfaSettings:
    version: str = "1.33.0"
    url: str = "https://efa-installer.amazonaws.com/aws-efa-installer-{version}.tar.gz"
    sha256: str | None = None
    args: tuple[str, ...] = ("-y",)


def efa_installed_version(text: str | None) -> str | None:
    """Version from /opt/amazon/efa_installed_packages (written by the EFA installer)."""
    if not text:
        return None
    m = re.search(r"EFA installer version:\s*(\S+)", text)
    return m.group(1) if m else None


class Efa(Step[EfaSettings]):
    """EFA kernel driver, libfabric and (since installer 1.29) the aws-ofi-nccl plugin, via AWS's installer."""

    name = "efa"
    title = "AWS EFA installer"
    Settings = EfaSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return bool(host.traits.fabric == Fabric.EFA)

    def _marker(self, ctx: StepContext) -> FileContent:
        return FileContent(ctx.path("/opt/amazon/efa_installed_packages"))

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [self._marker(ctx)]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        have = efa_installed_version(facts[self._marker(ctx)])
        if have == s.version:
            yield NoOp(f"EFA installer {have} installed")
            return
        yield installer_command(s.url.format(version=s.version), ["./efa_installer.sh", *s.args], sha256=s.sha256,
                                subdir="aws-efa-installer",
                                description=f"EFA installer {s.version} (installed: {have or 'none'})")


@dataclass(frozen=True)
class OfiNcclSettings:
    lib_dir: str = "/opt/amazon/ofi-nccl/lib"
    ld_conf: str = "/etc/ld.so.conf.d/aws-ofi-nccl.conf"


class AwsOfiNccl(Step[OfiNcclSettings]):
    """Make NCCL find the aws-ofi-nccl net plugin (libnccl-net.so) that the EFA installer ships."""

    name = "aws-ofi-nccl"
    title = "aws-ofi-nccl plugin on the loader path"
    after = ("efa",)
    Settings = OfiNcclSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return bool(host.traits.fabric == Fabric.EFA)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [PathsExist((ctx.path(f"{s.lib_dir}/libnccl-net.so"),)), FileHashes((ctx.path(s.ld_conf),))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        lib = ctx.path(f"{s.lib_dir}/libnccl-net.so")
        if lib not in facts[PathsExist((lib,))] and "efa" not in ctx.changed:
            raise StepError(f"{lib} is missing and the efa step did not just install it; EFA installer 1.29 "
                            "or later bundles aws-ofi-nccl (set overrides.efa.version)")
        conf = ctx.path(s.ld_conf)
        action = file_state(facts, FileHashes((conf,)), conf, f"{s.lib_dir}\n".encode(), description="loader path")
        yield action
        if isinstance(action, NoOp):
            return
        yield Command(("ldconfig",), "refresh the loader cache")


# --------------------------------------------------------------------------------------------
# InfiniBand / RoCE


@dataclass(frozen=True)
class DocaSettings:
    package: str = "doca-ofed"
    version: str = "2.9.1-1"
    service: str = "openibd"


class DocaOfed(Step[DocaSettings]):
    """NVIDIA DOCA-OFED (the successor of MLNX_OFED) for ConnectX HCAs, IB or RoCE; reboot follows."""

    name = "doca-ofed"
    title = "DOCA-OFED (MOFED) for InfiniBand/RoCE"
    Settings = DocaSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _host_rdma(host)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [os_fact(ctx), PackageVersions("apt", (s.package,)), PackageVersions("dnf", (s.package,))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        yield from packages_plan(manager(ctx, facts), facts, {s.package: s.version}, what="DOCA-OFED")


def _host_rdma(host: Host) -> bool:
    """An IB or RoCE fabric on host HCAs (ConnectX): not an Ascend server's RoCE, which is the NPUs' own ports,
    driven by the NPU driver and addressed by the ``hccn`` step."""
    return host.traits.fabric in (Fabric.INFINIBAND, Fabric.ROCE) and host.traits.vendor != "ascend"


@dataclass(frozen=True)
class RdmaModulesSettings:
    modules: tuple[str, ...] = ("ib_umad", "rdma_ucm")
    conf: str = "/etc/modules-load.d/metalfleet-rdma.conf"


class RdmaSettings(Step[RdmaModulesSettings]):
    """Kernel modules the fabric needs at every boot: IB adds IPoIB (for the subnet manager's tools and
    NCCL bootstrap over ib0); RoCE needs rdma_cm for RoCE v2 connection setup."""

    name = "rdma-settings"
    title = "RDMA modules for IB / RoCE"
    after = ("doca-ofed", "reboot")
    Settings = RdmaModulesSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _host_rdma(host)

    @classmethod
    def host_defaults(cls, host: Host) -> dict[str, Any]:
        if host.traits.fabric == Fabric.INFINIBAND:
            return {"modules": ("ib_umad", "rdma_ucm", "ib_ipoib")}
        return {"modules": ("ib_umad", "rdma_ucm", "rdma_cm")}

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [KernelModules(), FileHashes((ctx.path(self.settings.conf),))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        conf = ctx.path(s.conf)
        yield file_state(facts, FileHashes((conf,)), conf, ("\n".join(s.modules) + "\n").encode(),
                         description="load at boot")
        loaded = facts[KernelModules()]
        missing = [m for m in s.modules if m.replace("-", "_") not in loaded]
        if missing:
            yield Command(("modprobe", "-a", *missing), f"load {', '.join(missing)}")
        else:
            yield NoOp(f"modules {', '.join(s.modules)} loaded")


# --------------------------------------------------------------------------------------------
# Alibaba eRDMA


@dataclass(frozen=True)
class ErdmaSettings:
    version: str = "1.4.3"
    url: str = "http://mirrors.cloud.aliyuncs.com/erdma/erdma_installer-{version}.tar.gz"
    sha256: str | None = None
    package: str = "erdma"


class Erdma(Step[ErdmaSettings]):
    """Alibaba Cloud eRDMA driver and its rdma-core provider, via Alibaba's installer."""

    name = "erdma"
    title = "Alibaba eRDMA driver"
    Settings = ErdmaSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return bool(host.traits.fabric == Fabric.ERDMA)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [os_fact(ctx), PackageVersions("apt", (s.package,)), PackageVersions("dnf", (s.package,)),
                KernelModules()]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        have = facts[PackageVersions(manager(ctx, facts), (s.package,))].get(s.package)
        if have is not None and have.split("-")[0] == s.version and "erdma" in facts[KernelModules()]:
            yield NoOp(f"eRDMA {have} installed and loaded")
            return
        yield installer_command(s.url.format(version=s.version), ["sh", "install.sh", "--batch"], sha256=s.sha256,
                                subdir="erdma_installer", description=f"eRDMA {s.version} (installed: {have})")


# --------------------------------------------------------------------------------------------
# Ascend HCCN


@dataclass(frozen=True)
class HccnSettings:
    #: Address of NPU NIC ``nic`` on node ``node`` (the host's index): ``base`` + 256*nic + node + 1.
    base: str = "10.20.0.0"
    netmask: str = "255.255.255.0"
    nics: int = 8
    #: Explicit addresses per host name (overrides the pattern), one per NIC.
    addresses: dict[str, list[str]] = field(default_factory=dict)


def hccn_address(base: str, nic: int, node: int) -> str:
    return str(ipaddress.IPv4Address(base) + 256 * nic + node + 1)


class Hccn(Step[HccnSettings]):
    """Give every NPU NIC its RoCE address (HCCL's inter-node transport) with hccn_tool."""

    name = "hccn"
    title = "Ascend HCCN NIC addresses"
    after = ("ascend-driver", "reboot")
    Settings = HccnSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return host.traits.vendor == "ascend"

    @classmethod
    def host_defaults(cls, host: Host) -> dict[str, Any]:
        return {"nics": host.traits.gpu_count or 8}

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [HccnAddress(i) for i in range(self.settings.nics)]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        host = ctx.host
        if host.name in s.addresses:
            wanted = s.addresses[host.name]
        elif host.index is None:
            raise StepError(f"{host.name}: no index to derive HCCN addresses from; set overrides.hccn.addresses")
        else:
            wanted = [hccn_address(s.base, nic, host.index) for nic in range(s.nics)]
        for nic, addr in enumerate(wanted[: s.nics]):
            have = facts[HccnAddress(nic)]
            have_ip, have_mask = (have.ipaddr, have.netmask) if have is not None else (None, None)
            if (have_ip, have_mask) == (addr, s.netmask):
                yield NoOp(f"NPU NIC {nic} has {addr}/{s.netmask}")
            else:
                yield Command(("hccn_tool", "-i", str(nic), "-ip", "-s", "address", addr, "netmask", s.netmask),
                              f"NPU NIC {nic}: {have_ip} -> {addr}")
