"""metalfleet.providers: the kernel — neutral models, error tree, driver contract, lazy registry.

Importing this package imports no cloud SDK; a driver's SDK loads when the driver is asked for. Names
load on first use too (as in :mod:`metalfleet.bootstrap`), so a pure module such as
``metalfleet.providers.errors`` or ``.textfile`` imports neither pydantic nor PyYAML through this package
(``metalfleet policy check`` on a plan and the GPU-host acceptance tool rely on that).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contract import ClusterResourcesDriver, ComputeDriver, OrderProgress, PowerDriver, PowerState, TaggingDriver
    from .errors import (
        AuthError,
        CapacityError,
        ConflictError,
        InvalidSpecError,
        MetalfleetError,
        NotFoundError,
        OperationTimeout,
        ProviderError,
        QuotaError,
        RateLimitedError,
        TransientError,
    )
    from .fleet import OrderFailed, node_specs_for, order_cluster, release_cluster, resolve_offering
    from .models import (
        BillingModel,
        Fabric,
        Interconnect,
        Node,
        NodeSpec,
        NodeState,
        Offering,
        Price,
        VolumeSpec,
        idempotency_key,
    )
    from .registry import available_drivers, get_driver
    from .retry import RetryPolicy
    from .spec import ClusterSpec, load_spec, parse_spec

#: name -> the module (relative to this package) that defines it.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("ClusterResourcesDriver", "ComputeDriver", "OrderProgress", "PowerDriver", "PowerState",
                     "TaggingDriver"), ".contract"),
    **dict.fromkeys(("AuthError", "CapacityError", "ConflictError", "InvalidSpecError", "MetalfleetError",
                     "NotFoundError", "OperationTimeout", "ProviderError", "QuotaError", "RateLimitedError",
                     "TransientError"), ".errors"),
    **dict.fromkeys(("OrderFailed", "node_specs_for", "order_cluster", "release_cluster", "resolve_offering"),
                   ".fleet"),
    **dict.fromkeys(("BillingModel", "Fabric", "Interconnect", "Node", "NodeSpec", "NodeState", "Offering",
                     "Price", "VolumeSpec", "idempotency_key"), ".models"),
    **dict.fromkeys(("available_drivers", "get_driver"), ".registry"),
    "RetryPolicy": ".retry",
    **dict.fromkeys(("ClusterSpec", "load_spec", "parse_spec"), ".spec"),
}

__all__ = [
    "AuthError",
    "BillingModel",
    "CapacityError",
    "ClusterResourcesDriver",
    "ClusterSpec",
    "ComputeDriver",
    "ConflictError",
    "Fabric",
    "Interconnect",
    "InvalidSpecError",
    "MetalfleetError",
    "Node",
    "NodeSpec",
    "NodeState",
    "NotFoundError",
    "Offering",
    "OperationTimeout",
    "OrderFailed",
    "OrderProgress",
    "PowerDriver",
    "PowerState",
    "Price",
    "ProviderError",
    "QuotaError",
    "RateLimitedError",
    "RetryPolicy",
    "TaggingDriver",
    "TransientError",
    "VolumeSpec",
    "available_drivers",
    "get_driver",
    "idempotency_key",
    "load_spec",
    "node_specs_for",
    "order_cluster",
    "parse_spec",
    "release_cluster",
    "resolve_offering",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
