"""``GpuCluster``: a ClusterSpec as a Pulumi component — N nodes plus hostfile outputs.

Bootstrap and acceptance attach to the component through ``after_nodes`` hooks, so ordering,
bootstrapping and gating share one dependency graph in one ``pulumi up``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pulumi

from metalfleet.providers import ClusterSpec, get_driver
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.fleet import plan, resolve_offering
from metalfleet.providers.models import node_spec_to_dict

from .network import cluster_network
from .node import GpuNode

if TYPE_CHECKING:
    from .acceptance import ClusterAcceptance

__all__ = ["GpuCluster", "NodesHook", "hostfile", "spec_fingerprint"]

_SECRET_WORDS = ("secret", "password", "token", "access_key", "credential", "private_key")

#: Called with the component and its nodes once they are declared; returns the resources it added.
NodesHook = Callable[["GpuCluster", Sequence[GpuNode]], Sequence[pulumi.Resource]]


def hostfile(addresses: Sequence[str], slots: int) -> str:
    """An MPI/NCCL hostfile: one line per node, ``slots`` = GPUs per node."""
    return "".join(f"{a} slots={slots}\n" for a in addresses)


def spec_fingerprint(spec: ClusterSpec, *sections: str) -> str:
    """A short digest of the named spec sections: what a resource acting on the nodes depends on."""
    dumped = spec.model_dump(mode="json")
    relevant = {k: dumped[k] for k in sections}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:16]


def _check_driver_config(config: Mapping[str, Any]) -> None:
    for key in config:
        if any(w in key.lower() for w in _SECRET_WORDS):
            raise InvalidSpecError(
                f"driver_config.{key}: credentials must not be resource inputs (they would be stored in "
                "state); set them in the environment or the provider's credential chain",
                field=f"driver_config.{key}", value="***")


class GpuCluster(pulumi.ComponentResource):
    """A GPU cluster built from a :class:`ClusterSpec`: nodes, then (as the spec says) a bootstrap per
    node and the acceptance gate.

    Outputs: ``node_ids``, ``private_ips``, ``hostfile`` (one ``ip slots=N`` line per node — accepted
    nodes only when the gate is on), ``offering``. ``after_nodes`` hooks add more resources after these.
    """

    @staticmethod
    def _default_hooks(spec: ClusterSpec) -> list[NodesHook]:
        hooks: list[NodesHook] = []
        if spec.bootstrap.enabled:
            from .bootstrap import bootstrap_hook

            hooks.append(bootstrap_hook)
        if spec.acceptance.enabled:
            from .acceptance import acceptance_hook

            hooks.append(acceptance_hook)
        return hooks

    node_ids: pulumi.Output[list[str]]
    private_ips: pulumi.Output[list[str]]
    hostfile: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        driver_config: Mapping[str, Any] | None = None,
        generations: Mapping[int, int] | None = None,
        after_nodes: Sequence[NodesHook] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("metalfleet:stacks:GpuCluster", name, None, opts)
        config = dict(driver_config or {})
        _check_driver_config(config)
        driver = get_driver(spec.provider, region=spec.region, **config)
        # Resolving the offering and validating every node spec happen here, at program time, so a
        # bad spec fails `pulumi preview` before any resource is created.
        offering = resolve_offering(driver, spec)
        node_specs = plan(driver, spec, dict(generations or {}), offering)
        node_config = {"region": spec.region, **config}
        self.spec = spec
        self.offering = offering
        self.driver_config = node_config
        # What the nodes share (AWS: security and placement group); the nodes depend on it, so a destroy
        # deletes it after them (stacks/network.py). None for drivers that make no such thing.
        self.network = cluster_network(name, spec.provider, driver, node_specs[0], node_config, parent=self)
        self.nodes: list[GpuNode] = [
            GpuNode(f"{name}-{ns.index}", spec.provider, node_spec_to_dict(ns), node_config,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[self.network] if self.network else None))
            for ns in node_specs
        ]
        self.node_ids = pulumi.Output.all(*[n.id for n in self.nodes])
        self.private_ips = pulumi.Output.all(*[n.private_ip for n in self.nodes])
        self.hostfile = self.private_ips.apply(lambda ips: hostfile(ips, offering.gpu_count))
        self.extras: list[pulumi.Resource] = []
        self.acceptance: ClusterAcceptance | None = None
        for hook in (*self._default_hooks(spec), *after_nodes):
            self.extras.extend(hook(self, self.nodes))
        if self.acceptance is not None:
            # With the gate on, the hostfile lists accepted nodes only.
            self.hostfile = self.acceptance.hostfile
        self.register_outputs({
            "node_ids": self.node_ids,
            "private_ips": self.private_ips,
            "hostfile": self.hostfile,
            "offering": offering.name,
        })
