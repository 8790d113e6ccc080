"""The stack program: a cluster.yaml becomes a GpuCluster and its outputs.

Pipeline users edit YAML only; ``examples/*/__main__.py`` and ``metalfleet up`` both run this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi

from metalfleet.providers import ClusterSpec, MetalfleetError, load_spec

from .cluster import GpuCluster

__all__ = ["cluster_program", "run_from_yaml"]


def _declare(spec: ClusterSpec, driver_config: Mapping[str, Any] | None) -> GpuCluster:
    cfg = pulumi.Config("metalfleet")
    config = dict(driver_config or {})
    config.update(cfg.get_object("driverConfig") or {})
    cluster = GpuCluster(spec.name, spec, driver_config=config)
    pulumi.export("offering", cluster.offering.name)
    pulumi.export("node_ids", cluster.node_ids)
    pulumi.export("private_ips", cluster.private_ips)
    pulumi.export("hostfile", cluster.hostfile)
    gate = cluster.acceptance
    if gate is not None:
        pulumi.export("accepted_ids", gate.accepted_ids)
        pulumi.export("acceptance", gate.table)
    return cluster


def cluster_program(spec: ClusterSpec, driver_config: Mapping[str, Any] | None = None) -> Callable[[], None]:
    """An inline program for the Automation API."""

    def program() -> None:
        _declare(spec, driver_config)

    return program


def run_from_yaml(path: str | Path = "cluster.yaml") -> GpuCluster:
    """Entry point for a Pulumi project's ``__main__.py``: declare the cluster in ``path``.

    A bad spec or driver error becomes a RunError, which the engine prints as one clear message
    instead of a Python traceback.
    """
    try:
        return _declare(load_spec(path), None)
    except MetalfleetError as exc:
        raise pulumi.RunError(str(exc)) from None
