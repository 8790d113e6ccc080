"""AWS offerings: the catalogue's orderable AWS entries, merged with the live DescribeInstanceTypes answer.

The live answer wins for what EC2 says (GPUs, vCPUs, memory, network cards, EFA, local NVMe), so a region
where a type is not sold does not list it; the catalogue adds what DescribeInstanceTypes does not say
(NVLink bandwidth, the EFA total where the cards do not report one) and the dated list prices.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..catalog import Catalog, CatalogOffering, offered_record, orderable_offerings
from ..models import Fabric, Offering
from .errors import PROVIDER, boundary

__all__ = ["InstanceTypes", "fabric_cards", "offering_from_type"]


def fabric_cards(info: Mapping[str, Any]) -> int:
    """Network cards that take an EFA interface (the fewer of cards and EFA interfaces; 0 without EFA)."""
    net = info.get("NetworkInfo", {})
    cards = int(net.get("MaximumNetworkCards") or 1)
    efa = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
    return min(cards, efa) if efa else 0


def offering_from_type(info: Mapping[str, Any], entry: CatalogOffering, catalog: Catalog, region: str) -> Offering:
    """The Offering for one DescribeInstanceTypes record, completed from its catalogue ``entry``."""
    name = str(info["InstanceType"])
    gpu = (info.get("GpuInfo") or {}).get("Gpus", [{}])[0]
    net = info.get("NetworkInfo") or {}
    cards = net.get("NetworkCards") or []
    fabric_gbps = sum(float(c.get("BaselineBandwidthInGbps") or 0) for c in cards) or (entry.fabric_gbps or 0.0)
    disks = (info.get("InstanceStorageInfo") or {}).get("Disks") or [{}]
    return Offering(
        provider=PROVIDER,
        name=name,
        gpu_model=str(gpu.get("Name", "")),
        gpu_count=int(gpu.get("Count", 0)),
        gpu_memory_gib=int(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)) // 1024,
        interconnect=entry.interconnect,
        interconnect_gbps=entry.interconnect_gbps or 0.0,
        fabric=Fabric.EFA if net.get("EfaSupported") else Fabric.NONE,
        fabric_cards=fabric_cards(info),
        fabric_gbps=fabric_gbps,
        vcpus=int((info.get("VCpuInfo") or {}).get("DefaultVCpus", 0)),
        memory_gib=int((info.get("MemoryInfo") or {}).get("SizeInMiB", 0)) // 1024,
        nvme_count=int(disks[0].get("Count", 0)),
        nvme_size_gib=int(disks[0].get("SizeInGB", 0)) * 10**9 // 2**30,
        bare_metal=bool(info.get("BareMetal", False)),
        prices=catalog.prices(PROVIDER, region, name),
        extra={"network_cards": int(net.get("MaximumNetworkCards") or 0),
               "efa_max_interfaces": int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0),
               "network_performance": net.get("NetworkPerformance"),
               "ena_srd": bool(net.get("EnaSrdSupported", False)),
               "cpu_cores": int((info.get("VCpuInfo") or {}).get("DefaultCores") or 0),
               "whole_host": True},
    )


class InstanceTypes:
    """The DescribeInstanceTypes records of the catalogue's orderable AWS offerings, read once per driver."""

    def __init__(self, ec2: Callable[[], Any], region: str, catalog: Catalog) -> None:
        self._ec2 = ec2
        self._region = region
        self._catalog = catalog
        self._lock = threading.Lock()
        self._types: dict[str, dict[str, Any]] | None = None

    @property
    def names(self) -> list[str]:
        """What this driver orders, in the catalogue's order."""
        return [e.name for e in self._catalog.of(PROVIDER, orderable=True)]

    def records(self) -> dict[str, dict[str, Any]]:
        with self._lock:  # held across the call: one DescribeInstanceTypes, even with 64 threads asking
            if self._types is None:
                types: dict[str, dict[str, Any]] = {}
                with boundary("DescribeInstanceTypes"):  # filtered answers may still come in pages
                    for page in self._ec2().get_paginator("describe_instance_types").paginate(
                            Filters=[{"Name": "instance-type", "Values": self.names}]):
                        types.update({t["InstanceType"]: t for t in page.get("InstanceTypes", [])})
                self._types = types
            return self._types

    def info(self, offering: str) -> dict[str, Any]:
        """The record of ``offering``; InvalidSpecError (``offering``) where the region does not sell it."""
        return offered_record(self.records(), offering, self._region, PROVIDER)

    def offerings(self) -> list[Offering]:
        return orderable_offerings(self._catalog, PROVIDER, self.records(), self._region, offering_from_type)
