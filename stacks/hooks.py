"""The seam between :class:`~metalfleet.stacks.cluster.GpuCluster` and what is added after its nodes (a
bootstrap per node, the acceptance gate, a user's own resources).

A hook is handed a :class:`ClusterContext` (the declared nodes and what a resource acting on them needs) and
returns a :class:`HookResult` of what it added; the component reads the result. Hooks never reach into the
component, so this module, not the component's, is what they import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from metalfleet.providers import ClusterSpec
from metalfleet.providers.lifecycle import GenerationPlan

from .node import GpuNode

__all__ = ["ClusterContext", "HookResult", "NodesHook", "SpecInputs"]

#: ``spec_inputs(with_driver_config)``: the cluster spec as a resource stores it (secret values cut out) and
#: the ``secrets`` input holding them (and, if asked, the secret driver config).
SpecInputs = Callable[[bool], tuple[dict[str, Any], pulumi.Output[Any]]]


@dataclass(frozen=True)
class ClusterContext:
    """What a hook gets: the cluster as declared so far."""

    #: The component's resource name (children are named after it).
    name: str
    spec: ClusterSpec
    #: The component: the parent of whatever a hook adds.
    parent: pulumi.Resource
    nodes: tuple[GpuNode, ...]
    #: Driver config as resources store it (secret values replaced by ``[secret]``).
    driver_config: Mapping[str, Any]
    spec_inputs: SpecInputs
    #: What earlier hooks added (a later hook's resources may depend on it).
    added: tuple[pulumi.Resource, ...]
    #: The node generations this declaration carries, and the quarantined nodes it replaces or keeps.
    generations: GenerationPlan


@dataclass(frozen=True)
class HookResult:
    """What a hook added."""

    resources: tuple[pulumi.Resource, ...] = ()
    #: The hostfile of the nodes that passed a gate: the cluster's ``hostfile`` becomes this.
    hostfile: pulumi.Output[str] | None = None
    #: Ids of the nodes that passed a gate (exported as ``accepted_ids``).
    accepted_ids: pulumi.Output[list[str]] | None = None
    #: The gate's report (exported as ``acceptance``).
    report: pulumi.Output[str] | None = None
    #: The scheduler's partition, as ``sinfo`` would sum it up (exported as ``slurm``).
    scheduler: pulumi.Output[str] | None = None


#: Called once the nodes are declared, in order; returns what it added.
NodesHook = Callable[[ClusterContext], HookResult]
