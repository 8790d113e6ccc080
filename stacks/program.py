"""The stack program: a cluster.yaml becomes a GpuCluster and its outputs.

Pipeline users edit YAML only; ``examples/*/__main__.py`` and ``metalfleet up`` both run this.
Two stack config keys add what does not belong in a committed file:

- ``metalfleet:driverConfig``: driver settings (e.g. ``profile``). Set with ``--secret`` the whole
  object is kept secret (``GpuCluster(secret_driver_config=...)``), never merged into plain inputs.
- ``metalfleet:spec``: spec fields merged over the file's, e.g.
  ``pulumi config set --secret --path metalfleet:spec.ssh.private_key ~/.ssh/train``. A secret value
  stays secret wherever it lands (see :mod:`metalfleet.stacks.secrets`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import is_config_secret

from metalfleet.providers import ClusterSpec, MetalfleetError, load_spec, parse_spec
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.merge import deep_merge

from .cluster import GpuCluster
from .secrets import marked_values, scrub

__all__ = ["cluster_program", "run_from_yaml"]

NAMESPACE = "metalfleet"


def _config_object(cfg: pulumi.Config, key: str) -> tuple[dict[str, Any], bool]:
    """A config object and whether it was set with ``--secret``; anything but an object is an error."""
    value = cfg.get_object(key) or {}
    if not isinstance(value, dict):
        raise InvalidSpecError(f"config {NAMESPACE}:{key} must be an object (set it with --path)",
                               field=f"{NAMESPACE}:{key}", value=None)
    return value, is_config_secret(f"{NAMESPACE}:{key}")


def _with_config(spec: ClusterSpec) -> ClusterSpec:
    """``spec`` with ``metalfleet:spec`` merged over it; a validation error never shows a secret value."""
    overrides, _ = _config_object(pulumi.Config(NAMESPACE), "spec")
    if not overrides:
        return spec
    try:
        return parse_spec(deep_merge(spec.model_dump(mode="json", exclude_unset=True), overrides),
                          f"(with config {NAMESPACE}:spec)")
    except InvalidSpecError as exc:
        hidden = sorted(marked_values(), key=len, reverse=True)
        raise InvalidSpecError(scrub(exc.message, hidden), field=exc.field, value="***") from None


def _declare(spec: ClusterSpec, driver_config: Mapping[str, Any] | None) -> GpuCluster:
    from_config, secret = _config_object(pulumi.Config(NAMESPACE), "driverConfig")
    config = dict(driver_config or {})
    if not secret:
        config.update(from_config)
    cluster = GpuCluster(spec.name, _with_config(spec), driver_config=config,
                         secret_driver_config=from_config if secret else None)
    pulumi.export("offering", cluster.offering.name)
    pulumi.export("node_ids", cluster.node_ids)
    pulumi.export("private_ips", cluster.private_ips)
    pulumi.export("hostfile", cluster.hostfile)
    if cluster.accepted_ids is not None:
        pulumi.export("accepted_ids", cluster.accepted_ids)
    if cluster.acceptance_report is not None:
        pulumi.export("acceptance", cluster.acceptance_report)
    if cluster.scheduler_summary is not None:
        pulumi.export("slurm", cluster.scheduler_summary)
    return cluster


def cluster_program(spec: ClusterSpec, driver_config: Mapping[str, Any] | None = None) -> Callable[[], None]:
    """An inline program for the Automation API."""

    def program() -> None:
        _declare(spec, driver_config)

    return program


def run_from_yaml(path: str | Path = "cluster.yaml", driver_config: Mapping[str, Any] | None = None) -> GpuCluster:
    """Entry point for a Pulumi project's ``__main__.py``: declare the cluster in ``path``.

    ``driver_config``: driver settings the project fixes (e.g. the pool inventory of examples/onprem-ipmi);
    ``metalfleet:driverConfig`` from the stack's config is merged over them.
    A bad spec or driver error becomes a RunError, which the engine prints as one clear message
    instead of a Python traceback (with any secret value scrubbed from it).
    """
    try:
        return _declare(load_spec(path), driver_config)
    except MetalfleetError as exc:
        hidden = sorted(marked_values(), key=len, reverse=True)
        raise pulumi.RunError(scrub(str(exc), hidden)) from None

