"""A Pulumi dynamic resource that gates the cluster: nodes join only after they pass acceptance.

It runs after every node's bootstrap. Failing nodes are tagged (quarantined) and, when the spec
says ``acceptance.replace_failed``, released and replaced by the next generation of their index,
within ``acceptance.retry_budget``. If any node is still failing, ``pulumi up`` fails with the
reasons. The outputs (accepted ids, hostfile) list accepted nodes only.

Replacements carry their index's next idempotency key, so the GpuNode resource of that index
adopts the replacement on the next ``pulumi up --refresh`` instead of buying another node; until
then this resource owns them and releases them on destroy, so none is orphaned.

The spec and driver config are stored with secret values cut out; they travel in ``secrets``.
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
from .secrets import SECRETS, guarded, private_key_file, reveal, scrub_outputs

__all__ = ["ClusterAcceptance", "ClusterAcceptanceProvider", "acceptance_hook"]


class ClusterAcceptanceProvider(ResourceProvider):
    def _driver(self, full: dict[str, Any]) -> Any:
        spec = full["spec"]
        return get_driver(spec["provider"], **{"region": spec["region"], **(full.get("driver_config") or {})})

    def _run(self, props: dict[str, Any]) -> dict[str, Any]:
        with guarded(props):
            full = reveal(props)
            with private_key_file(full["spec"]) as spec_dict:
                return scrub_outputs(self._accept(props, {**full, "spec": spec_dict}), props)

    def _accept(self, props: dict[str, Any], full: dict[str, Any]) -> dict[str, Any]:
        from metalfleet.bootstrap import bootstrap_cluster
        from metalfleet.bootstrap.acceptance import accept_cluster, format_table
        from metalfleet.providers.fleet import resolve_offering

        spec = parse_spec(full["spec"], "acceptance resource input")
        driver = self._driver(full)
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
        with guarded(props):
            driver = self._driver(reveal(props))
            for node_id in props.get("owned_replacements") or []:
                with contextlib.suppress(NotFoundError):
                    DEFAULT_POLICY.call(driver.release, node_id, wait=True)


class ClusterAcceptance(Resource):
    """The acceptance gate. Outputs: accepted_ids, accepted_ips, hostfile, summary, table.

    ``spec`` and ``driver_config`` are stored in plain state (secret values cut out, see
    :meth:`GpuCluster.spec_inputs`); ``secrets`` holds what was cut out, stored encrypted."""

    accepted_ids: pulumi.Output[list[str]]
    accepted_ips: pulumi.Output[list[str]]
    hostfile: pulumi.Output[str]
    summary: pulumi.Output[str]
    table: pulumi.Output[str]

    def __init__(self, name: str, spec: ClusterSpec | dict[str, Any], nodes: Sequence[dict[str, Any]],
                 driver_config: dict[str, Any] | None = None, opts: pulumi.ResourceOptions | None = None, *,
                 secrets: pulumi.Input[Any] | None = None) -> None:
        plain = spec.model_dump(mode="json") if isinstance(spec, ClusterSpec) else spec
        props = {"spec": plain, "nodes": list(nodes), "driver_config": driver_config or {},
                 SECRETS: pulumi.Output.secret(secrets if secrets is not None else []),
                 "fingerprint": spec_fingerprint(plain, "acceptance"), "accepted_ids": None, "accepted_ips": None,
                 "hostfile": None, "replaced": None, "owned_replacements": None, "summary": None, "table": None}
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=[SECRETS]))
        super().__init__(ClusterAcceptanceProvider(), name, props, opts)


def acceptance_hook(cluster: Any, nodes: Sequence[Any]) -> list[pulumi.Resource]:
    """``GpuCluster`` seam: one gate after every node (and its bootstrap, when there is one)."""
    spec: ClusterSpec = cluster.spec
    plain, secrets = cluster.spec_inputs(with_driver_config=True)
    node_inputs = [node_input(n, spec.provider, spec.region) for n in nodes]
    gate = ClusterAcceptance(f"{cluster._name}-acceptance", plain, node_inputs, cluster.driver_config,
                             opts=pulumi.ResourceOptions(parent=cluster, depends_on=[*nodes, *cluster.extras]),
                             secrets=secrets)
    cluster.acceptance = gate
    return [gate]
