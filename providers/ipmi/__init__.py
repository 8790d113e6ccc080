"""Your own GPU servers as a provider: a pool of hosts behind IPMI or Redfish BMCs (issue 13).

``import metalfleet.providers.ipmi`` imports no SDK (names load on first use, as in
:mod:`metalfleet.providers`): pyghmi loads when an IPMI host's BMC is first used, requests for Redfish, so a
missing ``metalfleet[ipmi]`` extra surfaces as the registry's install hint. The package follows the anatomy in
``providers/README.md``, with the pool's own concerns in modules of their own:

=================  ===========================================================================================
``driver``         :class:`IpmiDriver`, the contract's methods and PowerDriver, each a few lines over the modules
``errors``         BMC faults -> the metalfleet error tree; :func:`boundary`, the one place they are translated
``inventory``      the pool inventory's shape (stdlib only; the policy adapter reads files through it too)
``model``          the inventory validated strictly, each host matched to a catalogue ``ipmi`` offering
``pool``           the claim store (a locked JSON file by default): ordering = claiming, release = returning
``bmc``            power status/on/off/cycle/reset and the boot device over IPMI (pyghmi) or Redfish (HTTP)
=================  ===========================================================================================
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..models import BillingModel
from ..record import DriverFacts, ProviderRecord

if TYPE_CHECKING:
    from .driver import IpmiDriver
    from .errors import boundary, translate
    from .inventory import host_entries, is_pool_inventory
    from .model import load_pool, parse_pool
    from .pool import ClaimStore, FileClaimStore

_LAZY: dict[str, str] = {
    "IpmiDriver": ".driver",
    **dict.fromkeys(("boundary", "translate"), ".errors"),
    **dict.fromkeys(("host_entries", "is_pool_inventory"), ".inventory"),
    **dict.fromkeys(("load_pool", "parse_pool"), ".model"),
    **dict.fromkeys(("ClaimStore", "FileClaimStore"), ".pool"),
}

__all__ = ["PROVIDER", "ClaimStore", "FileClaimStore", "IpmiDriver", "boundary", "host_entries", "is_pool_inventory",
           "load_pool", "parse_pool", "translate"]

#: The platform as the registry, the spec and the catalogue see it: a pool is claimed, never bought for a term.
PROVIDER = ProviderRecord(name="ipmi", driver="metalfleet.providers.ipmi.driver:IpmiDriver", extra="ipmi",
                          billing=(BillingModel.ON_DEMAND,), catalogue="metalfleet.providers:data/catalog.json",
                          # the pool's own hosts: no metadata service, no volumes of their own, the owner's network
                          policy_facts=DriverFacts(own_network=True))


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
