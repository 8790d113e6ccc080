"""One factory for the cluster specs the tests build: the smallest spec each provider takes (in its emulator's
world where it has one), named and sized by the test, with the top-level fields the test sets replacing the base's.

A helper that builds something else (a spec file on disk, a spec planned from requirements without an offering)
keeps its own; the shared parts it would repeat (the tags and data disk the driver tests send) are named here.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metalfleet.providers import ClusterSpec, ComputeDriver, NodeSpec, node_specs_for, parse_spec
from metalfleet.testing.ec2 import default_subnet_id
from tests.emulators import alibaba_fixtures as ali
from tests.emulators import fixtures as ec2
from tests.emulators.huawei_fixtures import huawei_spec_base

__all__ = ["DATA_DISK", "TEAM_TAGS", "Specs", "cluster_name", "cluster_spec", "cluster_spec_data"]

#: The cost tags and the data disk the driver tests put on their clusters (and check in what the driver sends).
TEAM_TAGS = {"team": "ml-infra", "cost-center": "4711"}
DATA_DISK = {"size_gib": 500}


def _fake(zone: str | None) -> dict[str, Any]:
    return {"region": "local-1", "offering": "fake.8xh100", "image": "img-1", **({"zone": zone} if zone else {})}


def _aws(zone: str | None) -> dict[str, Any]:
    zone = zone or ec2.ZONE
    return {"region": ec2.REGION, "zone": zone, "offering": "p4de.24xlarge", "image": ec2.IMAGE,
            "network": {"subnet_id": default_subnet_id(zone)}}


def _alibaba(zone: str | None) -> dict[str, Any]:
    zone = zone or ali.ZONE
    return {"region": ali.REGION, "zone": zone, "offering": "ecs.ebmgn8v.48xlarge", "image": ali.IMAGE,
            "network": {"subnet_id": ali.vswitch(zone)}}


def _ipmi(zone: str | None) -> dict[str, Any]:
    """A pool's spec: the region is the pool's name (the inventory's), the image one the pool's hosts run."""
    return {"region": "pool-a", "offering": "pool.8xh100-ib", "image": "ubuntu-22.04",
            **({"zone": zone} if zone else {})}


_BASES: dict[str, Callable[[str | None], dict[str, Any]]] = {
    "fake": _fake, "aws": _aws, "alibaba": _alibaba, "huawei": huawei_spec_base, "ipmi": _ipmi}


def cluster_spec_data(provider: str, name: str, count: int = 1, *, zone: str | None = None,
                      **overrides: Any) -> dict[str, Any]:
    """The spec of ``count`` nodes named ``name`` on ``provider`` (in ``zone``, else the emulator's default) as
    data; each override replaces that top-level field whole. The data is the caller's own (a deep copy), so a
    test may change it without changing the next test's."""
    return copy.deepcopy({"name": name, "provider": provider, "count": count, **_BASES[provider](zone), **overrides})


def cluster_spec(provider: str, name: str, count: int = 1, *, zone: str | None = None,
                 **overrides: Any) -> ClusterSpec:
    """:func:`cluster_spec_data`, parsed (and so validated) as the CLI parses a cluster.yaml."""
    return parse_spec(cluster_spec_data(provider, name, count, zone=zone, **overrides))


def cluster_name(prefix: str, nodeid: str) -> str:
    """A cluster name of the test's own (``prefix`` and a hash of its node id): no two tests share a cluster on a
    session's emulator."""
    return prefix + hashlib.sha256(nodeid.encode()).hexdigest()[:10]


#: The default of :class:`Specs`' ``offering``: its own (None is a spec without one, planned from requirements).
_OWN: Any = object()


@dataclass(frozen=True)
class Specs:
    """A driver test's cluster on one provider's emulator: its ``offering`` unless the test names another, in
    ``subnet``, with the data disk and cost tags the driver tests check in what the driver sends."""

    provider: str
    cluster: str
    offering: str
    subnet: str
    kms_key: str

    def cluster_spec(self, offering: str | None = _OWN, count: int = 1, **overrides: Any) -> ClusterSpec:
        return cluster_spec(self.provider, self.cluster, count, **{
            "offering": self.offering if offering is _OWN else offering, "network": {"subnet_id": self.subnet},
            "storage": {"kms_key_id": self.kms_key, "data": [DATA_DISK]}, "tags": TEAM_TAGS, **overrides})

    def node_specs(self, driver: ComputeDriver, offering: str | None = _OWN, count: int = 1,
                   **overrides: Any) -> list[NodeSpec]:
        specs: list[NodeSpec] = node_specs_for(driver, self.cluster_spec(offering, count, **overrides))
        return specs
