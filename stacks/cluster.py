"""``GpuCluster``: a ClusterSpec as a Pulumi component — N nodes plus hostfile outputs.

Bootstrap and acceptance attach to the component through ``after_nodes`` hooks (:mod:`.hooks`), so
ordering, bootstrapping and gating share one dependency graph in one ``pulumi up``.

Each declaration reads the cluster's live nodes back from the provider (one ``list_nodes`` call,
:func:`~metalfleet.providers.lifecycle.plan_generations`): an index keeps the generation its node has, and a
node the acceptance gate quarantined is declared in the next generation while ``acceptance.replace_failed``
and ``acceptance.retry_budget`` allow, so the engine replaces that GpuNode (see :mod:`.acceptance`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pulumi

from metalfleet.providers import ClusterSpec, get_driver
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.fleet import node_specs_for, resolve_offering
from metalfleet.providers.lifecycle import GenerationPlan, plan_generations, with_generation_tag
from metalfleet.providers.models import node_spec_to_dict

from .acceptance import acceptance_hook
from .bootstrap import bootstrap_hook
from .hooks import ClusterContext, HookResult, NodesHook
from .inputs import hostfile, spec_fingerprint
from .network import cluster_network
from .node import GpuNode
from .scheduler import scheduler_hook
from .secrets import MARK, SECRET_SPEC_FIELDS, Entry, check_driver_config, marked_values, secret_input, split

__all__ = ["ClusterContext", "GpuCluster", "HookResult", "NodesHook", "hostfile", "spec_fingerprint"]


def _check_secret_spec(secret_spec: Mapping[str, Any]) -> None:
    for key in secret_spec:
        if key not in SECRET_SPEC_FIELDS:
            raise InvalidSpecError(
                f"secret_spec.{key}: only {', '.join(SECRET_SPEC_FIELDS)} may be given as secrets (other fields "
                "are needed while planning; set them with `pulumi config set --secret` instead)",
                field=f"secret_spec.{key}", value=None)


class GpuCluster(pulumi.ComponentResource):
    """A GPU cluster built from a :class:`ClusterSpec`: nodes, then (as the spec says) a bootstrap per
    node and the acceptance gate.

    Outputs: ``node_ids``, ``private_ips``, ``hostfile`` (one ``ip slots=N`` line per node — accepted
    nodes only when the gate is on), ``offering``. ``after_nodes`` hooks add more resources after these.
    ``generations`` (index -> generation) is the base each index is declared at; an index whose live node
    is of a later generation keeps that one, and a quarantined node is replaced by the next (see
    :mod:`metalfleet.stacks.cluster`); ``generation_plan`` says what this declaration replaces.

    Secrets (see :mod:`metalfleet.stacks.secrets`): ``secret_driver_config`` holds driver settings that
    are secret (plain values: the program needs them to plan; they are stored encrypted); ``secret_spec``
    maps fields of :data:`SECRET_SPEC_FIELDS` (e.g. ``ssh.private_key``, a path or key material) to
    values or Outputs such as ``cfg.require_secret(...)``, which override the spec's. Any value set with
    ``pulumi config set --secret`` that shows up in the spec or driver config is kept secret too.
    """

    @staticmethod
    def _default_hooks(spec: ClusterSpec) -> list[NodesHook]:
        hooks: list[NodesHook] = []
        if spec.bootstrap.enabled:
            hooks.append(bootstrap_hook)
        if spec.acceptance.enabled:
            hooks.append(acceptance_hook)
        if spec.scheduler is not None:
            hooks.append(scheduler_hook)
        return hooks

    node_ids: pulumi.Output[list[str]]
    private_ips: pulumi.Output[list[str]]
    hostfile: pulumi.Output[str]
    #: With the acceptance gate on: the accepted nodes' ids and the gate's report (else None).
    accepted_ids: pulumi.Output[list[str]] | None
    acceptance_report: pulumi.Output[str] | None
    #: With a scheduler section: the Slurm partition's summary (else None).
    scheduler_summary: pulumi.Output[str] | None

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        driver_config: Mapping[str, Any] | None = None,
        secret_driver_config: Mapping[str, Any] | None = None,
        secret_spec: Mapping[str, pulumi.Input[Any]] | None = None,
        generations: Mapping[int, int] | None = None,
        after_nodes: Sequence[NodesHook] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        config = dict(driver_config or {})
        secret_config = dict(secret_driver_config or {})
        # Refused before anything is registered: a refused cluster leaves nothing behind.
        check_driver_config(config, secret_config)
        _check_secret_spec(secret_spec or {})
        super().__init__("metalfleet:stacks:GpuCluster", name, None, opts)
        # Held in memory only: the program needs the values to plan; resources get them as secrets.
        self._marked = marked_values(secret_config.values())
        self._secret_spec = dict(secret_spec or {})
        driver = get_driver(spec.provider, region=spec.region, **{**config, **secret_config})
        # Resolving the offering and validating every node spec happen here, at program time, so a
        # bad spec fails `pulumi preview` before any resource is created.
        offering = resolve_offering(driver, spec)
        node_specs = node_specs_for(driver, spec, dict(generations or {}), offering)
        # Then each index's generation, read back from the provider (a quarantined node's next one).
        self.generation_plan = plan_generations(driver, spec, generations)
        self._announce(spec, self.generation_plan)
        node_specs = [with_generation_tag(replace(ns, generation=self.generation_plan.generations.get(ns.index, 0)))
                      for ns in node_specs]
        plain_config, config_secrets = split("driver_config", {"region": spec.region, **config}, self._marked)
        config_secrets += [("driver_config", (k,), v) for k, v in secret_config.items()]
        plain_config.update({k: MARK for k in secret_config})
        self.spec = spec
        self.offering = offering
        #: Driver config as resources store it: secret values replaced by ``[secret]``.
        self.driver_config = plain_config
        self._config_secrets = config_secrets
        # What the nodes share (AWS: security and placement group); the nodes depend on it, so a destroy
        # deletes it after them (stacks/network.py). None for drivers that make no such thing.
        network_spec, network_entries = split("spec", node_spec_to_dict(node_specs[0]), self._marked)
        self.network = cluster_network(name, spec.provider, driver, network_spec, plain_config, parent=self,
                                       secrets=secret_input([*network_entries, *config_secrets]))
        self.nodes: list[GpuNode] = []
        for ns in node_specs:
            node_spec, entries = split("spec", node_spec_to_dict(ns), self._marked)
            self.nodes.append(GpuNode(f"{name}-{ns.index}", spec.provider, node_spec, plain_config,
                                      secrets=secret_input([*entries, *config_secrets]),
                                      opts=pulumi.ResourceOptions(parent=self,
                                                                  depends_on=[self.network] if self.network else None)))
        self.node_ids = pulumi.Output.all(*[n.id for n in self.nodes])
        self.private_ips = pulumi.Output.all(*[n.private_ip for n in self.nodes])
        self.hostfile = self.private_ips.apply(lambda ips: hostfile(ips, offering.gpu_count))
        self.extras: list[pulumi.Resource] = []
        self.accepted_ids = None
        self.acceptance_report = None
        self.scheduler_summary = None
        for hook in (*self._default_hooks(spec), *after_nodes):
            self._add(hook(ClusterContext(name, spec, self, tuple(self.nodes), plain_config, self.spec_inputs,
                                          tuple(self.extras), self.generation_plan)))
        self.register_outputs({
            "node_ids": self.node_ids,
            "private_ips": self.private_ips,
            "hostfile": self.hostfile,
            "offering": offering.name,
        })

    def _add(self, result: HookResult) -> None:
        self.extras.extend(result.resources)
        if result.hostfile is not None:
            # A gate: the hostfile lists the nodes that passed it only.
            self.hostfile = result.hostfile
        if result.accepted_ids is not None:
            self.accepted_ids = result.accepted_ids
        if result.report is not None:
            self.acceptance_report = result.report
        if result.scheduler is not None:
            self.scheduler_summary = result.scheduler

    def _announce(self, spec: ClusterSpec, lifecycle: GenerationPlan) -> None:
        for r in lifecycle.replacing:
            pulumi.log.warn(f"node {spec.name}-{r.index} ({r.old_node_id}) is quarantined ({r.reason}): replacing it "
                            f"with generation {r.generation}", resource=self)
        why = "acceptance.retry_budget is spent" if lifecycle.replace_failed else "acceptance.replace_failed is off"
        for q in lifecycle.kept:
            pulumi.log.warn(f"node {q.name} ({q.node_id}) is quarantined ({q.reason}) and stays: {why}", resource=self)

    def spec_inputs(self, with_driver_config: bool = False) -> tuple[dict[str, Any], pulumi.Output[Any]]:
        """The cluster spec as a resource stores it: plain (secret values cut out), and the ``secrets``
        input holding those values, ``secret_spec`` and, if asked, the secret driver config."""
        plain, entries = split("spec", self.spec.model_dump(mode="json"), self._marked)
        extra: list[Entry] = list(self._config_secrets) if with_driver_config else []
        return plain, secret_input([*entries, *extra], self._secret_spec)
