"""metalfleet.providers: the kernel — neutral models, error tree, driver contract, lazy registry.

Importing this package imports no cloud SDK; a driver's SDK loads when the driver is asked for.
"""

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
from .fleet import OrderFailed, order_cluster, plan, release_cluster, resolve_offering
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
    "order_cluster",
    "parse_spec",
    "plan",
    "release_cluster",
    "resolve_offering",
]
