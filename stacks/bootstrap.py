"""A Pulumi dynamic resource per node that bootstraps it over SSH after it runs.

Attached to :class:`GpuCluster` through its ``after_nodes`` seam, so one ``pulumi up`` orders the
nodes and makes them training-ready. Steps are fact-gated, so re-applying a changed profile only
does what changed; an unchanged profile is not re-applied at all. The spec is stored with secret
values (an ssh key path or key material, a bastion) cut out; they travel in the ``secrets`` input.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from metalfleet.providers import ClusterSpec, parse_spec
from metalfleet.providers.errors import MetalfleetError

from .dynamic import MODULE, resource_options
from .hooks import ClusterContext, HookResult
from .inputs import node_from_input, node_input, node_key, spec_fingerprint
from .secrets import SECRETS, guarded, private_key_file, reveal, scrub_outputs

__all__ = ["NodeBootstrap", "NodeBootstrapProvider", "bootstrap_hook", "profile_fingerprint"]


def profile_fingerprint(spec: ClusterSpec | dict[str, Any]) -> str:
    """What a bootstrap depends on: the bootstrap, storage and ssh sections and the offering (of the plain
    spec: a change of a secret value shows in ``secrets``)."""
    return spec_fingerprint(spec, "bootstrap", "storage", "ssh", "offering", "provider")


class NodeBootstrapProvider(ResourceProvider):
    """Create and update run the node's bootstrap profile; delete leaves the node to its own resource."""

    def _apply(self, props: dict[str, Any]) -> dict[str, Any]:
        from metalfleet.bootstrap import bootstrap_cluster

        with guarded(props), private_key_file(reveal(props)["spec"]) as spec_dict:
            spec = parse_spec(spec_dict, "bootstrap resource input")
            node = node_from_input(props["node"])
            if spec.offering is None:
                # A spec by requirements: the node's resolved offering decides the hardware steps (EFA...).
                spec = spec.model_copy(update={"offering": node.offering})
            report = bootstrap_cluster(spec, [node])
            host = report.hosts[0] if report.hosts else None
            if not report.ok or host is None:
                reason = host.error if host else report.stop_reason
                raise MetalfleetError(f"bootstrap of {node.name or node.id} ({node.private_ip}) failed: {reason}")
            steps = host.to_dict().get("steps", [])
            changed = [s["name"] for s in steps if s.get("status") == "changed"]
            return scrub_outputs({**props, "status": host.status.value, "changed_steps": changed,
                                  "seconds": round(host.seconds, 2)}, props)

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"bootstrap-{props['node']['id']}", outs=self._apply(props))

    def diff(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = ["fingerprint"] if olds.get("fingerprint") != news.get("fingerprint") else []
        changed += [SECRETS] if (olds.get(SECRETS) or []) != (news.get(SECRETS) or []) else []
        changed += ["node"] if node_key(olds.get("node")) != node_key(news.get("node")) else []
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._apply(news))

    def delete(self, id: str, props: dict[str, Any]) -> None:
        return None


class NodeBootstrap(Resource, module=MODULE, name="NodeBootstrap"):
    """Bootstrap of one node. Outputs: status, changed_steps, seconds.

    ``spec`` is a ClusterSpec or its plain dict (secret values cut out, see
    :meth:`GpuCluster.spec_inputs`); ``secrets`` holds what was cut out, stored encrypted."""

    status: pulumi.Output[str]
    changed_steps: pulumi.Output[list[str]]

    def __init__(self, name: str, spec: ClusterSpec | dict[str, Any], node: dict[str, Any],
                 opts: pulumi.ResourceOptions | None = None, *, secrets: pulumi.Input[Any] | None = None) -> None:
        plain = spec.model_dump(mode="json") if isinstance(spec, ClusterSpec) else spec
        props = {"spec": plain, "node": node, "fingerprint": profile_fingerprint(plain),
                 SECRETS: pulumi.Output.secret(secrets if secrets is not None else []),
                 "status": None, "changed_steps": None, "seconds": None}
        super().__init__(NodeBootstrapProvider(), name, props, resource_options(opts))


def bootstrap_hook(ctx: ClusterContext) -> HookResult:
    """``GpuCluster`` seam: one NodeBootstrap per node, each after its node."""
    spec = ctx.spec
    plain, secrets = ctx.spec_inputs(False)
    return HookResult(resources=tuple(
        NodeBootstrap(f"{node.pulumi_resource_name}-bootstrap", plain, node_input(node, spec.provider, spec.region),
                      opts=pulumi.ResourceOptions(parent=ctx.parent, depends_on=[node]), secrets=secrets)
        for node in ctx.nodes))
