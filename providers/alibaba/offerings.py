"""Alibaba Cloud offerings: the catalogue's orderable Alibaba entries, merged with DescribeInstanceTypes.

The live answer wins for what ECS says (GPUAmount, GPUSpec, GPU memory, EriQuantity, NetworkCardQuantity,
vCPUs, memory, local NVMe), so a region that does not sell a type does not list it; the catalogue adds what
DescribeInstanceTypes does not say (NVLink bandwidth, the eRDMA bandwidth) and the dated list prices.
Billing constraints (which charge types and whether spot is sold) go on the offering's ``extra``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..catalog import Catalog, CatalogOffering, offered_record, orderable_offerings
from ..models import BillingModel, Fabric, Offering
from .errors import PROVIDER

__all__ = ["BILLING_OF", "InstanceTypes", "eri_count", "offering_from_type"]

_SUBSCRIPTION = (BillingModel.MONTHLY, BillingModel.RESERVED_1Y, BillingModel.RESERVED_3Y)
#: Billing models each family is sold under (ECS instance-family pages: the EBM GPU families are sold
#: pay-as-you-go and by subscription; preemptible (spot) instances only for the older A100 families).
BILLING_OF: Mapping[str, tuple[BillingModel, ...]] = {
    "ecs.ebmgn8v": (BillingModel.ON_DEMAND, *_SUBSCRIPTION),
    "ecs.ebmgn8is": (BillingModel.ON_DEMAND, *_SUBSCRIPTION),
    "ecs.ebmgn7ex": (BillingModel.ON_DEMAND, *_SUBSCRIPTION),
    "ecs.ebmgn7e": (BillingModel.ON_DEMAND, BillingModel.SPOT, *_SUBSCRIPTION),
    "ecs.ebmgn7": (BillingModel.ON_DEMAND, BillingModel.SPOT, *_SUBSCRIPTION),
}
_DEFAULT_BILLING = (BillingModel.ON_DEMAND, *_SUBSCRIPTION)


def family(name: str) -> str:
    """``ecs.ebmgn8v.48xlarge`` -> ``ecs.ebmgn8v``."""
    return ".".join(name.split(".")[:2])


def billing_of(name: str) -> tuple[BillingModel, ...]:
    return BILLING_OF.get(family(name), _DEFAULT_BILLING)


def eri_count(info: Mapping[str, Any]) -> int:
    """ERIs (eRDMA interfaces) the type takes: its EriQuantity, at most one per network card."""
    eri = int(info.get("EriQuantity") or 0)
    cards = int(info.get("NetworkCardQuantity") or 1)
    return min(eri, max(cards, 1)) if eri else 0


def offering_from_type(info: Mapping[str, Any], entry: CatalogOffering, catalog: Catalog, region: str) -> Offering:
    """The Offering for one DescribeInstanceTypes record, completed from its catalogue ``entry``."""
    name = str(info["InstanceTypeId"])
    eri = eri_count(info)
    gpu_spec = str(info.get("GPUSpec") or "")
    gpu_model = entry.gpu_model if entry.gpu_model and entry.gpu_model.upper() in gpu_spec.upper() else (
        gpu_spec.removeprefix("NVIDIA ").strip() or entry.gpu_model)
    billing = billing_of(name)
    return Offering(
        provider=PROVIDER,
        name=name,
        gpu_model=gpu_model,
        gpu_count=int(info.get("GPUAmount") or 0),
        gpu_memory_gib=round(float(info.get("GPUMemorySize") or 0)) or (entry.gpu_memory_gib or 0),
        interconnect=entry.interconnect,
        interconnect_gbps=entry.interconnect_gbps or 0.0,
        fabric=Fabric.ERDMA if eri else Fabric.NONE,
        fabric_cards=eri,
        # the family page's eRDMA figure (ebmgn8v: up to 160 Gbit/s, below its 170 Gbit/s VPC bandwidth, which is
        # InstanceBandwidthRx); the instance's bandwidth, which its ERIs share, only where the catalogue has none
        fabric_gbps=(entry.fabric_gbps or float(info.get("InstanceBandwidthRx") or 0) / 1e6) if eri else 0.0,
        vcpus=int(info.get("CpuCoreCount") or 0),
        memory_gib=round(float(info.get("MemorySize") or 0)),
        nvme_count=int(info.get("LocalStorageAmount") or 0),
        nvme_size_gib=int(info.get("LocalStorageCapacity") or 0),
        bare_metal=True,
        prices=catalog.prices(PROVIDER, region, name),
        extra={"network_cards": int(info.get("NetworkCardQuantity") or 0),
               "eni_quantity": int(info.get("EniQuantity") or 0),
               "eri_quantity": int(info.get("EriQuantity") or 0),
               "instance_bandwidth_gbps": float(info.get("InstanceBandwidthRx") or 0) / 1e6,
               "gpu_spec": gpu_spec,
               "charge_types": sorted({"PostPaid" if b in (BillingModel.ON_DEMAND, BillingModel.SPOT) else "PrePaid"
                                       for b in billing}),
               "spot": BillingModel.SPOT in billing,
               "billing": [b.value for b in billing],
               "whole_host": True},
    )


class InstanceTypes:
    """The DescribeInstanceTypes records of the catalogue's orderable Alibaba offerings, read once per driver.

    ``call(action, params)``: the driver's SDK call (answers the response body as a dict)."""

    def __init__(self, call: Callable[[str, dict[str, Any]], dict[str, Any]], region: str, catalog: Catalog) -> None:
        self._call = call
        self._region = region
        self._catalog = catalog
        self._lock = threading.Lock()
        self._types: dict[str, dict[str, Any]] | None = None

    @property
    def names(self) -> list[str]:
        """What this driver orders, in the catalogue's order."""
        return [e.name for e in self._catalog.of(PROVIDER, orderable=True)]

    def billing(self) -> dict[str, Sequence[BillingModel]]:
        return {n: billing_of(n) for n in self.names}

    def records(self) -> dict[str, dict[str, Any]]:
        with self._lock:  # held across the calls: one listing, even with 64 threads asking
            if self._types is None:
                types: dict[str, dict[str, Any]] = {}
                token: str | None = None
                while True:
                    params: dict[str, Any] = {"InstanceTypes": self.names, "MaxResults": 100}
                    if token:
                        params["NextToken"] = token
                    page = self._call("DescribeInstanceTypes", params)
                    for t in (page.get("InstanceTypes") or {}).get("InstanceType") or []:
                        types[str(t["InstanceTypeId"])] = t
                    token = page.get("NextToken") or None
                    if not token:
                        break
                self._types = types
            return self._types

    def info(self, offering: str) -> dict[str, Any]:
        """The record of ``offering``; InvalidSpecError (``offering``) where the region does not sell it."""
        return offered_record(self.records(), offering, self._region, PROVIDER)

    def offerings(self) -> list[Offering]:
        return orderable_offerings(self._catalog, PROVIDER, self.records(), self._region, offering_from_type)
