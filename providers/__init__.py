"""metalfleet.providers: the kernel — neutral models, error tree, driver contract, lazy registry.

Importing this package imports no cloud SDK; a driver's SDK loads when the driver is asked for.
"""

from .contract import ComputeDriver, PowerDriver, PowerState, ProgressCallback, TaggingDriver
from .errors import (
    AuthError,
    CapacityError,
    ConflictError,
    InvalidSpecError,
    MetalfleetError,
    NotFoundError,
    ProviderError,
    QuotaError,
    RateLimitedError,
    TimeoutError,
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
    "OrderFailed",
    "PowerDriver",
    "PowerState",
    "Price",
    "ProgressCallback",
    "ProviderError",
    "QuotaError",
    "RateLimitedError",
    "RetryPolicy",
    "TaggingDriver",
    "TimeoutError",
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
