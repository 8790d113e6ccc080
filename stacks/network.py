"""A Pulumi dynamic resource for what a cluster's nodes share, on providers whose driver makes such things
(:class:`~metalfleet.providers.contract.ClusterResourcesDriver`; AWS: the cluster's security group, with
its SSH rules, and its placement group).

Why a resource of its own: every :class:`~metalfleet.stacks.node.GpuNode` of the cluster depends on it, so
``pulumi up`` makes the groups before the first node and ``pulumi destroy`` deletes this resource after the
last node is gone; its delete then removes what the driver made for the cluster (never a group the spec
names). Ordering a node makes the same groups on its own (``metalfleet order`` needs no stack); this
resource records them and owns their end. A change of ``network.ssh_ingress_cidrs`` or ``ssh.port`` is an
in-place update (the group's SSH rules follow the spec); the nodes stay.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from metalfleet.providers import get_driver
from metalfleet.providers.contract import ClusterResourcesDriver, ComputeDriver, capability
from metalfleet.providers.models import node_spec_from_dict
from metalfleet.providers.retry import DEFAULT_POLICY

from .dynamic import MODULE, resource_options
from .secrets import SECRETS, guarded, reveal, scrub_outputs

__all__ = ["NETWORK_FIELDS", "ClusterNetwork", "ClusterNetworkProvider", "cluster_network"]

#: The node-spec fields the shared resources follow: a change updates them in place.
NETWORK_FIELDS = ("zone", "subnet_id", "vpc_id", "security_group_ids", "placement_group", "placement_strategy",
                  "placement_partitions", "ssh_ingress_cidrs", "ssh_port")
#: A change of these is another cluster (or another cloud account/region): replace.
REPLACE_ON = ("provider", "driver_config", "cluster", "region")


def _driver(props: dict[str, Any]) -> Any:
    return get_driver(props["provider"], **(props.get("driver_config") or {}))


class ClusterNetworkProvider(ResourceProvider):
    """Create and update make (or bring in line) the shared resources; delete removes them. Secret
    settings are put back in memory only (as for nodes: :mod:`metalfleet.stacks.secrets`)."""

    def _prepare(self, props: dict[str, Any]) -> dict[str, Any]:
        with guarded(props):
            full = reveal(props)
            spec = node_spec_from_dict(full["spec"])
            resources: list[str] = DEFAULT_POLICY.call(_driver(full).prepare_cluster, spec)
            return scrub_outputs({**props, "cluster": spec.cluster, "resources": resources}, props)

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = self._prepare(props)
        return CreateResult(id_=f"{outs['cluster']}-network", outs=outs)

    def diff(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        olds, news = reveal(olds), reveal(news)
        old_spec, new_spec = olds.get("spec") or {}, news.get("spec") or {}
        replaces = [k for k in REPLACE_ON if k in ("provider", "driver_config") and olds.get(k) != news.get(k)]
        replaces += [f"spec.{k}" for k in ("cluster", "region") if old_spec.get(k) != new_spec.get(k)]
        changed = [f"spec.{k}" for k in NETWORK_FIELDS if old_spec.get(k) != new_spec.get(k)]
        return DiffResult(changes=bool(replaces or changed), replaces=replaces, delete_before_replace=False)

    def update(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._prepare(news))

    def read(self, id: str, props: dict[str, Any]) -> ReadResult:
        with guarded(props):
            resources: list[str] = DEFAULT_POLICY.call(_driver(reveal(props)).cluster_resources, props["cluster"])
            return ReadResult(id_=id, outs=scrub_outputs({**props, "resources": resources}, props))

    def delete(self, id: str, props: dict[str, Any]) -> None:
        cluster = props.get("cluster") or props["spec"]["cluster"]
        with guarded(props):
            deleted: list[str] = DEFAULT_POLICY.call(_driver(reveal(props)).release_cluster_resources, cluster)
        if not deleted and props.get("resources"):
            pulumi.log.info(f"cluster {cluster}: shared resources kept (gone already, or nodes still use them)")


class ClusterNetwork(Resource, module=MODULE, name="ClusterNetwork"):
    """The shared resources of one cluster. Output ``resources``: ``["security-group:sg-…", "placement-group:…"]``."""

    resources: pulumi.Output[list[str]]

    def __init__(self, name: str, provider: str, spec: dict[str, Any], driver_config: dict[str, Any] | None = None,
                 opts: pulumi.ResourceOptions | None = None, *, secrets: pulumi.Input[Any] | None = None) -> None:
        props = {"provider": provider, "spec": spec, "driver_config": driver_config or {},
                 SECRETS: pulumi.Output.secret(secrets if secrets is not None else []), "cluster": None,
                 "resources": None}
        super().__init__(ClusterNetworkProvider(), name, props, resource_options(opts))


def cluster_network(name: str, provider: str, driver: ComputeDriver, spec: dict[str, Any],
                    driver_config: dict[str, Any], parent: pulumi.Resource, *,
                    secrets: pulumi.Input[Any] | None = None) -> ClusterNetwork | None:
    """The cluster's :class:`ClusterNetwork` (``spec``: any of its node specs as stored, secret values cut
    out), or None when its driver makes no shared resources."""
    if capability(driver, ClusterResourcesDriver) is None:
        return None
    return ClusterNetwork(f"{name}-network", provider, spec, driver_config,
                          opts=pulumi.ResourceOptions(parent=parent), secrets=secrets)
