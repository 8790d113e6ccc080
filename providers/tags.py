"""The tags metalfleet puts on provider resources (standard library only).

Every driver writes them and every layer reads them, so they are named once here: a cloud's tag
filters (``tag:metalfleet:cluster``), the acceptance gate's quarantine marks and the inventory's node
order all depend on the exact keys. User tags may not use the ``metalfleet:`` prefix.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["ACCEPTANCE_TAGS", "NODE_TAGS", "TAG_ACCEPTANCE", "TAG_ACCEPTANCE_REASON", "TAG_CLUSTER",
           "TAG_GENERATION", "TAG_INDEX", "TAG_KEY", "TAG_NAME", "TAG_PREFIX", "TAG_PUBLIC_IP", "node_index"]

#: Keys starting with this are metalfleet's own.
TAG_PREFIX = "metalfleet:"
#: The cluster a resource belongs to: how a driver lists a cluster's nodes and shared resources.
TAG_CLUSTER = "metalfleet:cluster"
#: The node's position in its cluster (0-based, as a decimal string).
TAG_INDEX = "metalfleet:index"
#: The generation a replacement node was ordered as (set from generation 1 on; see providers/lifecycle.py).
TAG_GENERATION = "metalfleet:generation"
#: The node's idempotency key, for providers whose client token cannot be searched (and for Elastic IPs).
TAG_KEY = "metalfleet:key"
#: Set (to ``eip``) when the driver gave the node a public address it must release with it.
TAG_PUBLIC_IP = "metalfleet:public-ip"
#: The acceptance gate's verdict on a node (``passed`` or ``quarantined``) and, when quarantined, why.
TAG_ACCEPTANCE = "metalfleet:acceptance"
TAG_ACCEPTANCE_REASON = "metalfleet:acceptance-reason"
#: The provider's display-name tag (AWS ``Name``).
TAG_NAME = "Name"

#: What a driver puts on a node (and its volumes and interfaces; the generation only on replacements) ...
NODE_TAGS: tuple[str, ...] = (TAG_NAME, TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_GENERATION)
#: ... and what the acceptance gate may add later (drivers keep room for them under a tag-count limit).
ACCEPTANCE_TAGS: tuple[str, ...] = (TAG_ACCEPTANCE, TAG_ACCEPTANCE_REASON)


def node_index(tags: Mapping[str, str], default: int) -> int:
    """The node's ``metalfleet:index`` tag as an int; ``default`` when it is absent or not a number."""
    try:
        return int(tags.get(TAG_INDEX, default))
    except (TypeError, ValueError):
        return default
