"""Plain data passed between a cluster's resources: a node as the resources acting on it after it runs see
it, the digest of the spec sections a resource depends on, and the hostfile of a set of nodes.

Its own module so that the component (:mod:`.cluster`) and the resources it adds after its nodes
(:mod:`.bootstrap`, :mod:`.acceptance`) share it without importing each other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from metalfleet.providers import ClusterSpec
from metalfleet.providers.models import Node, NodeState

from .node import GpuNode

__all__ = ["hostfile", "node_from_input", "node_input", "node_key", "spec_fingerprint"]


def hostfile(addresses: Sequence[str], slots: int) -> str:
    """An MPI/NCCL hostfile: one line per node, ``slots`` = GPUs per node."""
    return "".join(f"{a} slots={slots}\n" for a in addresses)


def spec_fingerprint(spec: ClusterSpec | Mapping[str, Any], *sections: str) -> str:
    """A short digest of the named spec sections: what a resource acting on the nodes depends on.

    Resources pass their plain spec (secret values cut out), so the digest in state never depends on a
    secret; a change of a secret value shows in the resource's ``secrets`` input instead."""
    dumped = spec.model_dump(mode="json") if isinstance(spec, ClusterSpec) else dict(spec)
    relevant = {k: dumped.get(k) for k in sections}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def node_input(node: GpuNode, provider: str, region: str) -> dict[str, Any]:
    """A GpuNode's outputs as plain input data for the resources that act on the node after it runs."""
    return {"id": node.id, "name": node.node_name, "private_ip": node.private_ip, "offering": node.offering,
            "provider": provider, "region": region, "tags": node.tags, "host_keys": node.host_keys}


def node_from_input(data: Mapping[str, Any]) -> Node:
    """Inverse of :func:`node_input` once resolved: the running node it describes."""
    return Node(id=data["id"], provider=data["provider"], region=data.get("region") or "", state=NodeState.RUNNING,
                offering=data["offering"], private_ip=data["private_ip"], name=data.get("name"),
                tags=data.get("tags") or {}, extra={"host_keys": list(data.get("host_keys") or [])})


def node_key(data: Any) -> tuple[Any, Any] | None:
    """What a resource acting on a node follows: the node input's (id, private ip). None while a preview does
    not know them yet (the node is being made or replaced), which differs from any known node."""
    if not isinstance(data, Mapping):
        return None
    return data.get("id"), data.get("private_ip")
