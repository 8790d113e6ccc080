"""Neutral value types shared by every driver.

Provider-specific data goes in ``extra`` rather than in subclasses, so code above the drivers never
branches on the provider to read a node.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from types import MappingProxyType
from typing import Any

__all__ = [
    "PERIOD_HOURS",
    "BillingModel",
    "Fabric",
    "Interconnect",
    "Node",
    "NodeSpec",
    "NodeState",
    "Offering",
    "Price",
    "VolumeSpec",
    "idempotency_key",
    "node_spec_from_dict",
    "node_spec_to_dict",
]


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


class Fabric(StrEnum):
    """Scale-out network between nodes; which of them carry RDMA is :data:`metalfleet.providers.checks.RDMA_FABRICS`
    (``hccs`` here is the Ascend NPUs' own RoCE ports, not the on-package link: that is :class:`Interconnect`)."""

    EFA = "efa"
    INFINIBAND = "infiniband"
    ROCE = "roce"
    ERDMA = "erdma"
    HCCS = "hccs"
    NONE = "none"


class Interconnect(StrEnum):
    """Intra-node GPU-to-GPU link."""

    NVSWITCH = "nvswitch"
    NVLINK = "nvlink"
    HCCS = "hccs"
    PCIE = "pcie"


class BillingModel(StrEnum):
    ON_DEMAND = "on_demand"
    SPOT = "spot"
    RESERVED_1Y = "reserved_1y"
    RESERVED_3Y = "reserved_3y"
    CAPACITY_BLOCK = "capacity_block"
    MONTHLY = "monthly"


class NodeState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    TERMINATING = "terminating"
    TERMINATED = "terminated"
    ERROR = "error"
    UNKNOWN = "unknown"

    @classmethod
    def map(cls, table: Mapping[str, NodeState], provider_state: str | None) -> NodeState:
        """Map a provider's state string through ``table``; anything unlisted is UNKNOWN."""
        if provider_state is None:
            return cls.UNKNOWN
        return table.get(provider_state, cls.UNKNOWN)

    @property
    def is_gone(self) -> bool:
        return self in (NodeState.TERMINATING, NodeState.TERMINATED)


@dataclass(frozen=True)
class Price:
    """One price point; dated and sourced because GPU prices move monthly.

    ``hourly`` is what every cost is computed from; ``per`` says how the provider lists it (``hour``, or a
    subscription's ``month`` / ``year``, then ``hourly`` is that price over 730 / 8760 h) so a plan can show the
    figure the price page shows."""

    billing: BillingModel
    hourly: float
    currency: str
    as_of: date
    source: str
    per: str = "hour"

    @property
    def listed(self) -> float:
        """The price as the provider lists it: per hour, or per month / year of subscription."""
        return self.hourly * PERIOD_HOURS[self.per]


#: Hours in each period a price is listed per (a month is 8760 / 12 h, as AWS's and Alibaba's price pages bill).
PERIOD_HOURS = {"hour": 1.0, "month": 730.0, "year": 8760.0}


@dataclass(frozen=True)
class Offering:
    """A node type a provider sells, normalised across providers."""

    provider: str
    name: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: int
    interconnect: Interconnect
    interconnect_gbps: float  # per-GPU intra-node bandwidth, GB/s
    fabric: Fabric
    fabric_cards: int
    fabric_gbps: float  # total scale-out bandwidth, Gbit/s
    vcpus: int
    memory_gib: int
    nvme_count: int = 0
    nvme_size_gib: int = 0
    bare_metal: bool = True
    prices: tuple[Price, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", _frozen(self.extra))
        object.__setattr__(self, "prices", tuple(self.prices))

    def price(self, billing: BillingModel = BillingModel.ON_DEMAND) -> Price | None:
        return next((p for p in self.prices if p.billing == billing), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "name": self.name,
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "gpu_memory_gib": self.gpu_memory_gib,
            "interconnect": self.interconnect.value,
            "interconnect_gbps": self.interconnect_gbps,
            "fabric": self.fabric.value,
            "fabric_cards": self.fabric_cards,
            "fabric_gbps": self.fabric_gbps,
            "vcpus": self.vcpus,
            "memory_gib": self.memory_gib,
            "nvme_count": self.nvme_count,
            "nvme_size_gib": self.nvme_size_gib,
            "bare_metal": self.bare_metal,
            "prices": [
                {"billing": p.billing.value, "hourly": p.hourly, "currency": p.currency,
                 "as_of": p.as_of.isoformat(), "source": p.source}
                for p in self.prices
            ],
            "extra": dict(self.extra),
        }


def idempotency_key(cluster: str, index: int, generation: int = 0) -> str:
    """Deterministic key for node ``index`` of ``cluster``.

    Derived, never random: a re-run of the same order (after a crash, a retry, a second
    ``pulumi up``) presents the same key, so the provider returns the node it already made instead
    of buying another. ``generation`` changes only when a node is deliberately replaced.
    At most 65 characters (a 30-character prefix, index >= 100, generation >= 10); the AWS driver cuts a longer
    key to EC2's 64-character ClientToken (``providers/aws/request.py``: ``client_token``).
    """
    digest = hashlib.sha256(f"{cluster}\x00{index}\x00{generation}".encode()).hexdigest()[:24]
    prefix = "".join(c for c in cluster if c.isalnum() or c == "-")[:30]
    return f"mf-{prefix}-{index}-{generation}-{digest}"


@dataclass(frozen=True)
class VolumeSpec:
    size_gib: int
    encrypted: bool = True
    kms_key_id: str | None = None
    volume_type: str = "gp3"
    device_name: str | None = None


@dataclass(frozen=True)
class NodeSpec:
    """Everything a driver needs to order one node. Built from a ClusterSpec by the planner."""

    cluster: str
    index: int
    offering: str
    region: str
    image: str
    zone: str | None = None
    subnet_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    placement_group: str | None = None
    #: The placement group's strategy (cluster, spread, partition) and, for partition, its partition count.
    placement_strategy: str = "cluster"
    placement_partitions: int | None = None
    #: The VPC the subnet must be in (checked before anything is made), when the spec names one.
    vpc_id: str | None = None
    #: CIDRs the cluster's own security group lets reach ``ssh_port``.
    ssh_ingress_cidrs: tuple[str, ...] = ()
    ssh_port: int = 22
    capacity_reservation_id: str | None = None
    capacity_block: bool = False
    billing: BillingModel = BillingModel.ON_DEMAND
    #: Whether releasing the node may end its subscription early (``capacity.release_subscriptions``).
    release_subscriptions: bool = False
    key_name: str | None = None
    public_ip: bool = False
    root_volume: VolumeSpec = VolumeSpec(size_gib=200)
    data_volumes: tuple[VolumeSpec, ...] = ()
    user_data: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    generation: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", _frozen(self.tags))
        object.__setattr__(self, "extra", _frozen(self.extra))
        object.__setattr__(self, "security_group_ids", tuple(self.security_group_ids))
        object.__setattr__(self, "ssh_ingress_cidrs", tuple(self.ssh_ingress_cidrs))
        object.__setattr__(self, "data_volumes", tuple(self.data_volumes))

    @property
    def name(self) -> str:
        return f"{self.cluster}-{self.index}"

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.cluster, self.index, self.generation)


@dataclass(frozen=True)
class Node:
    """A node as the provider sees it now."""

    id: str
    provider: str
    region: str
    state: NodeState
    offering: str
    zone: str | None = None
    private_ip: str | None = None
    public_ip: str | None = None
    name: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tags", _frozen(self.tags))
        object.__setattr__(self, "extra", _frozen(self.extra))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "region": self.region,
            "zone": self.zone,
            "state": self.state.value,
            "offering": self.offering,
            "private_ip": self.private_ip,
            "public_ip": self.public_ip,
            "name": self.name,
            "tags": dict(self.tags),
            "extra": dict(self.extra),
        }


def node_spec_to_dict(spec: NodeSpec) -> dict[str, Any]:
    """Plain data for a NodeSpec: what a Pulumi dynamic provider may keep in state."""
    return {
        "cluster": spec.cluster,
        "index": spec.index,
        "offering": spec.offering,
        "region": spec.region,
        "image": spec.image,
        "zone": spec.zone,
        "subnet_id": spec.subnet_id,
        "security_group_ids": list(spec.security_group_ids),
        "placement_group": spec.placement_group,
        "placement_strategy": spec.placement_strategy,
        "placement_partitions": spec.placement_partitions,
        "vpc_id": spec.vpc_id,
        "ssh_ingress_cidrs": list(spec.ssh_ingress_cidrs),
        "ssh_port": spec.ssh_port,
        "capacity_reservation_id": spec.capacity_reservation_id,
        "capacity_block": spec.capacity_block,
        "billing": spec.billing.value,
        "release_subscriptions": spec.release_subscriptions,
        "key_name": spec.key_name,
        "public_ip": spec.public_ip,
        "root_volume": _vol_dict(spec.root_volume),
        "data_volumes": [_vol_dict(v) for v in spec.data_volumes],
        "user_data": spec.user_data,
        "tags": dict(spec.tags),
        "generation": spec.generation,
        "extra": dict(spec.extra),
    }


def _vol_dict(v: VolumeSpec) -> dict[str, Any]:
    return {"size_gib": v.size_gib, "encrypted": v.encrypted, "kms_key_id": v.kms_key_id,
            "volume_type": v.volume_type, "device_name": v.device_name}


def node_spec_from_dict(data: Mapping[str, Any]) -> NodeSpec:
    """Inverse of :func:`node_spec_to_dict`; tolerates JSON/protobuf numbers arriving as floats."""
    d = dict(data)
    d["index"] = int(d["index"])
    d["generation"] = int(d.get("generation") or 0)
    d["billing"] = BillingModel(d.get("billing", BillingModel.ON_DEMAND.value))
    d["release_subscriptions"] = bool(d.get("release_subscriptions", False))
    d["root_volume"] = _vol(d["root_volume"]) if d.get("root_volume") else VolumeSpec(size_gib=200)
    d["data_volumes"] = tuple(_vol(v) for v in d.get("data_volumes") or ())
    d["security_group_ids"] = tuple(d.get("security_group_ids") or ())
    d["ssh_ingress_cidrs"] = tuple(d.get("ssh_ingress_cidrs") or ())
    if d.get("ssh_port") is not None:
        d["ssh_port"] = int(d["ssh_port"])
    if d.get("placement_partitions") is not None:
        d["placement_partitions"] = int(d["placement_partitions"])
    d["tags"] = dict(d.get("tags") or {})
    d["extra"] = dict(d.get("extra") or {})
    return NodeSpec(**d)


def _vol(v: Mapping[str, Any]) -> VolumeSpec:
    return VolumeSpec(**{**v, "size_gib": int(v["size_gib"])})
