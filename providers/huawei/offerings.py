"""Huawei offerings: the catalogue's orderable Huawei entries, joined with ListBaremetalFlavorDetailExtends.

BMS flavors carry no GPU or NPU fields in the API (a flavor record has vCPUs, RAM, disk and ``os_extra_specs``
such as the CPU architecture and, per AZ, whether it is on sale), so the catalogue's facts are the offering:
accelerator model, count and memory, HCCS/NVLink, the RoCE/IB fabric, local NVMe. The flavor list adds what it
says (vCPUs, memory) and drops a flavor this region does not list; each offering's ``extra`` holds the AZ
status (``cond:operation:az``) and the billing BMS sells it under: yearly/monthly only (CreateBareMetalServers
creates prePaid servers only; the billing models are :data:`~.validation.SOLD_BILLING`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from ..catalog import Catalog
from ..errors import InvalidSpecError
from ..models import Offering
from .errors import PROVIDER, boundary

__all__ = ["CHARGING_MODES", "Flavors", "az_status"]

#: The charging modes BMS creates servers under (CreateBareMetalServers: prePaid only).
CHARGING_MODES: tuple[str, ...] = ("prePaid",)


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def az_status(specs: Any) -> dict[str, str]:
    """``cond:operation:az`` (``"cn-southwest-2a(normal),cn-southwest-2b(sellout)"``) -> ``{az: status}``."""
    raw = str(_get(specs, "condoperationaz") or "") if specs is not None else ""
    out: dict[str, str] = {}
    for part in raw.split(","):
        az, _, status = part.strip().partition("(")
        if az:
            out[az] = status.rstrip(")") or "normal"
    return out


class Flavors:
    """The flavor records of the catalogue's orderable Huawei offerings, read once per driver."""

    def __init__(self, bms: Callable[[], Any], region: str, catalog: Catalog) -> None:
        self._bms = bms
        self._region = region
        self._catalog = catalog
        self._lock = threading.Lock()
        self._flavors: dict[str, Any] | None = None

    @property
    def names(self) -> list[str]:
        """What this driver orders, in the catalogue's order."""
        return [e.name for e in self._catalog.of(PROVIDER, orderable=True)]

    def records(self) -> dict[str, Any]:
        from huaweicloudsdkbms.v1 import ListBaremetalFlavorDetailExtendsRequest

        with self._lock:  # held across the call: one flavor listing, however many threads ask
            if self._flavors is None:
                with boundary("ListBaremetalFlavorDetailExtends"):
                    resp = self._bms().list_baremetal_flavor_detail_extends(ListBaremetalFlavorDetailExtendsRequest())
                self._flavors = {str(_get(f, "id")): f for f in _get(resp, "flavors") or []}
            return self._flavors

    def info(self, offering: str) -> Any:
        """The flavor record of ``offering``; InvalidSpecError (``offering``) where the region does not list it."""
        flavor = self.records().get(offering)
        if flavor is None:
            raise InvalidSpecError(f"{offering} is not offered in {self._region}", field="offering", value=offering,
                                   provider=PROVIDER)
        return flavor

    def offerings(self) -> list[Offering]:
        flavors = self.records()
        out = []
        for entry in self._catalog.of(PROVIDER, orderable=True):
            flavor = flavors.get(entry.name)
            if flavor is None:
                continue
            base = entry.offering(self._catalog.prices(PROVIDER, self._region, entry.name))
            specs = _get(flavor, "os_extra_specs")
            vcpus = int(_get(flavor, "vcpus") or 0)
            out.append(dataclasses.replace(
                base, vcpus=vcpus or base.vcpus, memory_gib=int(_get(flavor, "ram") or 0) // 1024 or base.memory_gib,
                extra={"billing": list(CHARGING_MODES),
                       "az_status": az_status(specs),
                       "cpu_arch": _get(specs, "capabilitiescpu_arch") if specs is not None else None,
                       "whole_host": True}))
        return out
