"""Accelerator steps: NVIDIA driver stack (driver, fabric manager, persistenced, peermem) and Ascend NPU."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from metalfleet.providers.models import Fabric

from ..facts import Fact, FactValues, FileContent, FileHashes, KernelModules, PackageVersions, SystemdUnits
from ..inventory import Host
from ..step import Action, Command, NoOp, Step, StepContext
from .common import file_state, installer_command, manager, os_fact, packages_plan

__all__ = ["AscendCann", "AscendDriver", "NvidiaDriver", "NvidiaFabricManager", "NvidiaPeermem", "NvidiaPersistenced"]


def _is_nvidia(host: Host) -> bool:
    return host.traits.vendor == "nvidia"


# --------------------------------------------------------------------------------------------
# NVIDIA


@dataclass(frozen=True)
class DriverSettings:
    #: Package and exact version (apt: NVIDIA CUDA repository naming; dnf: give the rpm names).
    package: str = "nvidia-driver-550"
    version: str = "550.90.07-0ubuntu1"
    dnf_package: str = "nvidia-driver"
    dnf_version: str = "3:550.90.07-1.el9"
    hold: bool = True


class NvidiaDriver(Step[DriverSettings]):
    """Install the NVIDIA driver at a pinned version; gated on the installed package's version."""

    name = "nvidia-driver"
    title = "NVIDIA driver (pinned)"
    Settings = DriverSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host)

    def _wanted(self, mgr: str) -> dict[str, str | None]:
        s = self.settings
        return {s.dnf_package: s.dnf_version} if mgr == "dnf" else {s.package: s.version}

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [os_fact(ctx), PackageVersions("apt", (s.package,)), PackageVersions("dnf", (s.dnf_package,))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        mgr = manager(ctx, facts)
        yield from packages_plan(mgr, facts, self._wanted(mgr), hold=self.settings.hold, what="NVIDIA driver")


@dataclass(frozen=True)
class FabricManagerSettings:
    package: str = "nvidia-fabricmanager-550"
    version: str = "550.90.07-1"
    dnf_package: str = "nvidia-fabric-manager"
    dnf_version: str = "550.90.07-1"
    service: str = "nvidia-fabricmanager"


class NvidiaFabricManager(Step[FabricManagerSettings]):
    """Fabric manager for NVSwitch systems (HGX/DGX): without it CUDA sees no NVLink peers.

    Runs after the reboot: the service starts only once the driver at the same version is loaded.
    """

    name = "nvidia-fabricmanager"
    title = "NVIDIA fabric manager (NVSwitch)"
    after = ("nvidia-driver", "reboot")
    Settings = FabricManagerSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host) and host.traits.nvswitch

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [os_fact(ctx), PackageVersions("apt", (s.package,)), PackageVersions("dnf", (s.dnf_package,)),
                SystemdUnits((s.service,))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        mgr = manager(ctx, facts)
        wanted: dict[str, str | None] = {s.dnf_package: s.dnf_version} if mgr == "dnf" else {s.package: s.version}
        yield from packages_plan(mgr, facts, wanted, what="fabric manager")
        yield from _enable_service(facts, s.service)


def _enable_service(facts: FactValues, service: str) -> Iterator[Action]:
    unit = facts[SystemdUnits((service,))][service]
    if unit.is_enabled and unit.is_active:
        yield NoOp(f"{service} enabled and running")
    else:
        yield Command(("systemctl", "enable", "--now", service), f"enable and start {service}")


@dataclass(frozen=True)
class PersistencedSettings:
    service: str = "nvidia-persistenced"


class NvidiaPersistenced(Step[PersistencedSettings]):
    """Keep the driver initialised between jobs (no multi-second init per process, stable clocks)."""

    name = "nvidia-persistenced"
    title = "nvidia-persistenced enabled"
    after = ("nvidia-driver", "reboot")
    Settings = PersistencedSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [SystemdUnits((self.settings.service,))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        yield from _enable_service(facts, self.settings.service)


@dataclass(frozen=True)
class PeermemSettings:
    module: str = "nvidia-peermem"
    conf: str = "/etc/modules-load.d/nvidia-peermem.conf"


class NvidiaPeermem(Step[PeermemSettings]):
    """Load nvidia-peermem (now and at boot) so InfiniBand/RoCE NICs DMA straight into GPU memory.

    EFA does GPUDirect RDMA through its own driver (dma-buf), so this is off on EFA nodes.
    """

    name = "nvidia-peermem"
    title = "nvidia-peermem for GPUDirect RDMA"
    after = ("nvidia-driver", "doca-ofed", "reboot")
    Settings = PeermemSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host) and host.traits.fabric in (Fabric.INFINIBAND, Fabric.ROCE)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [KernelModules(), FileHashes((ctx.path(self.settings.conf),))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        conf = ctx.path(s.conf)
        yield file_state(facts, FileHashes((conf,)), conf, f"{s.module}\n".encode(), description="load at boot")
        if s.module.replace("-", "_") in facts[KernelModules()]:
            yield NoOp(f"{s.module} loaded")
        else:
            yield Command(("modprobe", s.module), f"load {s.module}")


# --------------------------------------------------------------------------------------------
# Ascend


def _version_info(text: str | None, key: str = "Version") -> str | None:
    if not text:
        return None
    m = re.search(rf"^\s*{key}\s*=\s*(\S+)", text, re.M | re.I)
    return m.group(1) if m else None


@dataclass(frozen=True)
class AscendDriverSettings:
    version: str = "23.0.3"
    driver_url: str = ("https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/Ascend%20HDK/Ascend%20HDK%2023.0.3/"
                       "Ascend-hdk-910b-npu-driver_23.0.3_linux-aarch64.run")
    firmware_url: str = ("https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/Ascend%20HDK/Ascend%20HDK%2023.0.3/"
                         "Ascend-hdk-910b-npu-firmware_7.1.0.3.220.run")
    firmware_version: str = "7.1.0.3.220"
    driver_sha256: str | None = None
    firmware_sha256: str | None = None
    install_path: str = "/usr/local/Ascend"


class AscendDriver(Step[AscendDriverSettings]):
    """Ascend NPU driver then firmware (Huawei's order for a first install), from the .run packages."""

    name = "ascend-driver"
    title = "Ascend NPU driver + firmware"
    Settings = AscendDriverSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return host.traits.vendor == "ascend"

    def _files(self, ctx: StepContext) -> tuple[FileContent, FileContent]:
        base = self.settings.install_path.rstrip("/")
        return (FileContent(ctx.path(f"{base}/driver/version.info")),
                FileContent(ctx.path(f"{base}/firmware/version.info")))

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return list(self._files(ctx))

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        drv_fact, fw_fact = self._files(ctx)
        drv = _version_info(facts[drv_fact])
        fw = _version_info(facts[fw_fact])
        if drv == s.version:
            yield NoOp(f"NPU driver {drv} installed")
        else:
            yield installer_command(s.driver_url, ["--full", "--install-for-all", "--quiet"],
                                    sha256=s.driver_sha256, description=f"NPU driver {s.version} (was {drv})")
        if fw == s.firmware_version:
            yield NoOp(f"NPU firmware {fw} installed")
        else:
            yield installer_command(s.firmware_url, ["--full", "--quiet"], sha256=s.firmware_sha256,
                                    description=f"NPU firmware {s.firmware_version} (was {fw})")


@dataclass(frozen=True)
class CannSettings:
    version: str = "8.0.RC2"
    url: str = ("https://ascend-repo.obs.cn-east-2.myhuaweicloud.com/CANN/CANN%208.0.RC2/"
                "Ascend-cann-toolkit_8.0.RC2_linux-aarch64.run")
    sha256: str | None = None
    arch: str = "aarch64"
    install_path: str = "/usr/local/Ascend"


class AscendCann(Step[CannSettings]):
    """CANN toolkit (HCCL, runtime, compilers) at a pinned version."""

    name = "ascend-cann"
    title = "Ascend CANN toolkit"
    after = ("ascend-driver", "reboot")
    Settings = CannSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return host.traits.vendor == "ascend"

    def _info(self, ctx: StepContext) -> FileContent:
        s = self.settings
        return FileContent(ctx.path(f"{s.install_path.rstrip('/')}/ascend-toolkit/latest/{s.arch}-linux/"
                                    "ascend_toolkit_install.info"))

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [self._info(ctx)]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        have = _version_info(facts[self._info(ctx)], "version")
        if have == s.version:
            yield NoOp(f"CANN {have} installed")
        else:
            yield installer_command(s.url, ["--install", "--install-for-all", "--quiet"], sha256=s.sha256,
                                    description=f"CANN toolkit {s.version} (was {have})")
