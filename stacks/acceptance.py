"""A Pulumi dynamic resource that gates the cluster: nodes join only after they pass acceptance.

It runs after every node's bootstrap. Failing nodes are tagged (quarantined) and, when the spec
says ``acceptance.replace_failed``, released and replaced by the next generation of their index,
within ``acceptance.retry_budget``. If any node is still failing, ``pulumi up`` fails with the
reasons. The outputs (accepted ids, hostfile) list accepted nodes only.

Replacements carry their index's next idempotency key, so the GpuNode resource of that index
adopts the replacement on the next ``pulumi up --refresh`` instead of buying another node; until
then this resource owns them and releases them on destroy, so none is orphaned.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from metalfleet.providers import ClusterSpec, get_driver, parse_spec
from metalfleet.providers.errors import MetalfleetError, NotFoundError
from metalfleet.providers.retry import DEFAULT_POLICY

from .cluster import hostfile, spec_fingerprint
from .node import node_from_input, node_input

__all__ = ["ClusterAcceptance", "ClusterAcceptanceProvider", "acceptance_hook"]


class ClusterAcceptanceProvider(ResourceProvider):
    def _driver(self, props: dict[str, Any]) -> Any:
        spec = props["spec"]
        return get_driver(spec["provider"], **{"region": spec["region"], **(props.get("driver_config") or {})})

    def _run(self, props: dict[str, Any]) -> dict[str, Any]:
        from metalfleet.bootstrap import bootstrap_cluster
        from metalfleet.bootstrap.acceptance import accept_cluster, format_table
        from metalfleet.providers.fleet import resolve_offering

        spec = parse_spec(props["spec"], "acceptance resource input")
        driver = self._driver(props)
        offering = resolve_offering(driver, spec)
        outcome = accept_cluster(driver, spec, [node_from_input(n) for n in props["nodes"]], offering=offering,
                                 bootstrap=lambda ns: bootstrap_cluster(spec, ns, offering=offering))
        table = "\n\n".join(format_table(r) for r in outcome.reports)
        if not outcome.ok:
            raise MetalfleetError(f"cluster {spec.name} did not pass acceptance:\n{outcome.summary()}\n\n{table}")
        accepted = sorted(outcome.accepted, key=lambda n: int(n.tags.get("metalfleet:index", 0)))
        owned = sorted({r.new_node_id for r in outcome.replaced if r.new_node_id}
                       | set(props.get("owned_replacements") or []))
        return {
            **props,
            "accepted_ids": [n.id for n in accepted],
            "accepted_ips": [n.private_ip or "" for n in accepted],
            "hostfile": hostfile([n.private_ip or "" for n in accepted], offering.gpu_count),
            "replaced": [r.to_dict() for r in outcome.replaced],
            "owned_replacements": owned,
            "summary": outcome.summary(),
            "table": table,
        }

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"acceptance-{props['spec']['name']}", outs=self._run(props))

    def diff(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        def key(p: dict[str, Any]) -> Any:
            return (p.get("fingerprint"), [(n.get("id"), n.get("private_ip")) for n in p.get("nodes") or []])

        return DiffResult(changes=key(olds) != key(news), replaces=[], delete_before_replace=False)

    def update(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._run({**news, "owned_replacements": olds.get("owned_replacements") or []}))

    def delete(self, id: str, props: dict[str, Any]) -> None:
        # Replacements this resource ordered are released with it; GpuNode owns the rest.
        driver = self._driver(props)
        for node_id in props.get("owned_replacements") or []:
            with contextlib.suppress(NotFoundError):
                DEFAULT_POLICY.call(driver.release, node_id, wait=True)


class ClusterAcceptance(Resource):
    """The acceptance gate. Outputs: accepted_ids, accepted_ips, hostfile, summary, table."""

    accepted_ids: pulumi.Output[list[str]]
    accepted_ips: pulumi.Output[list[str]]
    hostfile: pulumi.Output[str]
    summary: pulumi.Output[str]
    table: pulumi.Output[str]

    def __init__(self, name: str, spec: ClusterSpec, nodes: Sequence[dict[str, Any]],
                 driver_config: dict[str, Any] | None = None, opts: pulumi.ResourceOptions | None = None) -> None:
        props = {"spec": spec.model_dump(mode="json"), "nodes": list(nodes), "driver_config": driver_config or {},
                 "fingerprint": spec_fingerprint(spec, "acceptance"), "accepted_ids": None, "accepted_ips": None,
                 "hostfile": None, "replaced": None, "owned_replacements": None, "summary": None, "table": None}
        super().__init__(ClusterAcceptanceProvider(), name, props, opts)


def acceptance_hook(cluster: Any, nodes: Sequence[Any]) -> list[pulumi.Resource]:
    """``GpuCluster`` seam: one gate after every node (and its bootstrap, when there is one)."""
    spec: ClusterSpec = cluster.spec
    node_inputs = [node_input(n, spec.provider, spec.region) for n in nodes]
    gate = ClusterAcceptance(f"{cluster._name}-acceptance", spec, node_inputs, cluster.driver_config,
                             opts=pulumi.ResourceOptions(parent=cluster, depends_on=[*nodes, *cluster.extras]))
    cluster.acceptance = gate
    return [gate]
