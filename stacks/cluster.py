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
from .secrets import MARK, SECRET_SPEC_FIELDS, Entry, check_driver_config, marked_values, secret_input, split

if TYPE_CHECKING:
    from .acceptance import ClusterAcceptance

__all__ = ["GpuCluster", "NodesHook", "hostfile", "spec_fingerprint"]

#: Called with the component and its nodes once they are declared; returns the resources it added.
NodesHook = Callable[["GpuCluster", Sequence[GpuNode]], Sequence[pulumi.Resource]]


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
        node_specs = plan(driver, spec, dict(generations or {}), offering)
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

    def spec_inputs(self, with_driver_config: bool = False) -> tuple[dict[str, Any], pulumi.Output[Any]]:
        """The cluster spec as a resource stores it: plain (secret values cut out), and the ``secrets``
        input holding those values, ``secret_spec`` and, if asked, the secret driver config."""
        plain, entries = split("spec", self.spec.model_dump(mode="json"), self._marked)
        extra: list[Entry] = list(self._config_secrets) if with_driver_config else []
        return plain, secret_input([*entries, *extra], self._secret_spec)
