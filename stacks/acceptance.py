"""A Pulumi dynamic resource that gates the cluster: nodes join only after they pass acceptance.

It runs after every node's bootstrap and judges every node. A failing node is tagged
``metalfleet:acceptance=quarantined`` with the reason and kept, and ``pulumi up`` fails naming it; the
outputs (accepted ids, hostfile) list accepted nodes only.

It orders nothing. Replacing a quarantined node is a change of the GpuNode resources the stack tracks: with
``acceptance.replace_failed``, the next ``pulumi up`` reads the quarantine tags back from the provider
(:func:`metalfleet.providers.lifecycle.plan_generations`) and declares the next generation for those
indexes, so the engine replaces each such GpuNode (the quarantined node is released first), bootstraps the
new node and runs this gate again, while ``acceptance.retry_budget`` lasts. A user sees:

1. ``pulumi up`` fails: ``cluster <name> did not pass acceptance``, the quarantined nodes with why, and
   whether the next ``up`` replaces them;
2. the next ``pulumi up`` (its preview shows ``replace`` for those nodes) replaces them and passes.

Stacks made before replacements were tracked may hold nodes this gate ordered itself
(``owned_replacements``); it still releases those on delete, unless a GpuNode has taken one over.

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
from metalfleet.providers.lifecycle import node_index
from metalfleet.providers.retry import DEFAULT_POLICY

from .dynamic import MODULE, resource_options, unsubscribe
from .hooks import ClusterContext, HookResult
from .inputs import hostfile, node_from_input, node_input, node_key, spec_fingerprint
from .secrets import SECRETS, guarded, private_key_file, reveal, scrub_outputs

__all__ = ["ClusterAcceptance", "ClusterAcceptanceProvider", "acceptance_hook"]


def _next_step(spec: ClusterSpec, left: int) -> str:
    """What happens to the quarantined nodes next (the last line of a failed gate's message)."""
    if not spec.acceptance.replace_failed:
        return ("acceptance.replace_failed is off: the quarantined node(s) stay for someone to look at; turn it on "
                "to have the next `pulumi up` replace them with a new generation")
    if left > 0:
        return (f"the next `pulumi up` replaces the quarantined node(s) with a new generation ({left} "
                "replacement(s) left in acceptance.retry_budget)")
    return ("acceptance.retry_budget is spent: the quarantined node(s) stay for someone to look at; raise the "
            "budget to have the next `pulumi up` replace them")


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
        from metalfleet.bootstrap.acceptance import accept_cluster, format_table
        from metalfleet.providers.fleet import resolve_offering

        spec = parse_spec(full["spec"], "acceptance resource input")
        driver = self._driver(full)
        offering = resolve_offering(driver, spec)
        # Judge and quarantine only: a replacement is the stack's to declare (a GpuNode it tracks).
        outcome = accept_cluster(driver, spec, [node_from_input(n) for n in props["nodes"]], offering=offering,
                                 replace_failed=False)
        table = "\n\n".join(format_table(r) for r in outcome.reports)
        if not outcome.ok:
            after = f"\n{_next_step(spec, int(props.get('replacements_left') or 0))}" if outcome.quarantined else ""
            raise MetalfleetError(f"cluster {spec.name} did not pass acceptance:\n{outcome.summary()}{after}"
                                  f"\n\n{table}")
        accepted = sorted(outcome.accepted, key=lambda n: node_index(n, 0))
        from metalfleet.bootstrap.slurm import GateNode

        verdicts = {n.host: GateNode.from_acceptance(n).to_dict() for r in outcome.reports for n in r.nodes}
        return {
            **props,
            "gate_nodes": list(verdicts.values()),
            "accepted_ids": [n.id for n in accepted],
            "accepted_ips": [n.private_ip or "" for n in accepted],
            "hostfile": hostfile([n.private_ip or "" for n in accepted], offering.gpu_count),
            "summary": outcome.summary(),
            "table": table,
        }

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"acceptance-{props['spec']['name']}", outs=self._run(props))

    def diff(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        def key(p: dict[str, Any]) -> Any:
            nodes = p.get("nodes")  # unknown in a preview while a node is being made or replaced
            return p.get("fingerprint"), [node_key(n) for n in nodes] if isinstance(nodes, list) else None

        return DiffResult(changes=key(olds) != key(news), replaces=[], delete_before_replace=False)

    def update(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        # Nodes an older gate ordered itself stay its own to release, but those a GpuNode now tracks.
        tracked = {key[0] for key in map(node_key, news.get("nodes") or []) if key}
        owned = [i for i in olds.get("owned_replacements") or [] if i not in tracked]
        return UpdateResult(outs=self._run({**news, "owned_replacements": owned}))

    def delete(self, id: str, props: dict[str, Any]) -> None:
        owned = props.get("owned_replacements") or []
        if not owned:
            return
        with guarded(props):
            full = reveal(props)
            driver = self._driver(full)
            opt_in = unsubscribe(((full.get("spec") or {}).get("capacity") or {}).get("release_subscriptions"))
            for node_id in owned:
                with contextlib.suppress(NotFoundError):
                    DEFAULT_POLICY.call(driver.release, node_id, wait=True, unsubscribe=opt_in)


class ClusterAcceptance(Resource, module=MODULE, name="ClusterAcceptance"):
    """The acceptance gate. Outputs: accepted_ids, accepted_ips, hostfile, summary, table, gate_nodes.

    ``spec`` and ``driver_config`` are stored in plain state (secret values cut out, see
    :meth:`GpuCluster.spec_inputs`); ``secrets`` holds what was cut out, stored encrypted.
    ``replacements_left``: what the failure message says the next ``up`` may still replace."""

    accepted_ids: pulumi.Output[list[str]]
    accepted_ips: pulumi.Output[list[str]]
    hostfile: pulumi.Output[str]
    summary: pulumi.Output[str]
    table: pulumi.Output[str]
    #: The gate's verdict per node as plain data (:class:`metalfleet.bootstrap.slurm.GateNode`): what a
    #: scheduler's node definitions are made from.
    gate_nodes: pulumi.Output[list[dict[str, Any]]]

    def __init__(self, name: str, spec: ClusterSpec | dict[str, Any], nodes: Sequence[dict[str, Any]],
                 driver_config: dict[str, Any] | None = None, opts: pulumi.ResourceOptions | None = None, *,
                 secrets: pulumi.Input[Any] | None = None, replacements_left: int = 0) -> None:
        plain = spec.model_dump(mode="json") if isinstance(spec, ClusterSpec) else spec
        props = {"spec": plain, "nodes": list(nodes), "driver_config": driver_config or {},
                 SECRETS: pulumi.Output.secret(secrets if secrets is not None else []),
                 "fingerprint": spec_fingerprint(plain, "acceptance"), "replacements_left": replacements_left,
                 "accepted_ids": None, "accepted_ips": None, "hostfile": None, "owned_replacements": None,
                 "summary": None, "table": None, "gate_nodes": None}
        super().__init__(ClusterAcceptanceProvider(), name, props, resource_options(opts))


def acceptance_hook(ctx: ClusterContext) -> HookResult:
    """``GpuCluster`` seam: one gate after every node (and its bootstrap, when there is one)."""
    spec = ctx.spec
    plain, secrets = ctx.spec_inputs(True)
    gate = ClusterAcceptance(f"{ctx.name}-acceptance", plain,
                             [node_input(n, spec.provider, spec.region) for n in ctx.nodes], dict(ctx.driver_config),
                             opts=pulumi.ResourceOptions(parent=ctx.parent, depends_on=[*ctx.nodes, *ctx.added]),
                             secrets=secrets, replacements_left=ctx.generations.budget_left)
    return HookResult(resources=(gate,), hostfile=gate.hostfile, accepted_ids=gate.accepted_ids, report=gate.table)
