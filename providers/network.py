"""What the cloud drivers share about a cluster's network: its key, the once-per-cluster memo, the zone/VPC check.

A driver's ``network.py`` makes the cluster's shared resources (security group, placement or deployment group)
through its own API; which spec fields make one network, how it is made only once when many threads order nodes
of one cluster at the same time, and how a subnet (a vSwitch on Alibaba) in the wrong zone or VPC is refused
before anything is made are the same on every cloud, and live here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .errors import InvalidSpecError
from .models import NodeSpec

__all__ = ["NetworkMemo", "check_subnet_place", "network_key"]

N = TypeVar("N")


def network_key(spec: NodeSpec) -> tuple[Any, ...]:
    """The spec fields that make one cluster network; the cluster comes first (:meth:`NetworkMemo.forget`)."""
    return (spec.cluster, spec.subnet_id, spec.vpc_id, tuple(spec.security_group_ids), spec.placement_group,
            spec.placement_strategy, spec.placement_partitions, tuple(spec.ssh_ingress_cidrs), spec.ssh_port)


class NetworkMemo(Generic[N]):
    """Each cluster network made once (and once only, even with many threads asking for the same key at the
    same time): a lock per key, held while it is made, so nodes of other clusters are not held up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nets: dict[tuple[Any, ...], N] = {}
        self._net_locks: dict[tuple[Any, ...], threading.Lock] = {}

    def get(self, spec: NodeSpec, make: Callable[[], N]) -> N:
        """The network of ``spec``'s key, made by ``make`` the first time it is asked for."""
        key = network_key(spec)
        with self._lock:
            lock = self._net_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._nets:
                return self._nets[key]
            net = make()
            self._nets[key] = net
            return net

    def forget(self, cluster: str) -> None:
        """Drop what is known of ``cluster`` (its resources were deleted: made again if ordered again)."""
        with self._lock:
            self._nets = {k: v for k, v in self._nets.items() if k[0] != cluster}


def check_subnet_place(spec: NodeSpec, what: str, zone: str, vpc_id: str, provider: str) -> None:
    """Refuse ``spec`` when its subnet (``what``: "subnet", "vSwitch") is not in ``zone`` / ``network.vpc_id``."""
    if spec.zone and spec.zone != zone:
        raise InvalidSpecError(f"{what} {spec.subnet_id} is in {zone}, not in zone {spec.zone}",
                               field="zone", value=spec.zone, provider=provider)
    if spec.vpc_id and spec.vpc_id != vpc_id:
        raise InvalidSpecError(f"{what} {spec.subnet_id} is in VPC {vpc_id}, not in network.vpc_id {spec.vpc_id}",
                               field="network.vpc_id", value=spec.vpc_id, provider=provider)
