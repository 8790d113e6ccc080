"""Entry points for the CLI and for programs: one call bootstraps an inventory or a spec's nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from metalfleet.providers.contract import ComputeDriver
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.fleet import resolve_offering
from metalfleet.providers.models import Node, NodeState, Offering
from metalfleet.providers.spec import ClusterSpec

from .connector import SshOptions
from .inventory import Host, Inventory, hosts_from_spec
from .profiles import Profile, get_profile, profile_for_spec
from .progress import ProgressCallback
from .report import Report
from .runner import RunOptions, run

__all__ = ["bootstrap_cluster", "live_inventory", "run_bootstrap"]


def live_inventory(spec: ClusterSpec, driver: ComputeDriver) -> tuple[Inventory, list[Node]]:
    """The hosts of ``spec``'s running nodes (those with a private IP) on ``driver``, and those nodes.

    What ``metalfleet bootstrap SPEC`` and ``metalfleet verify SPEC`` connect to. A cluster with no
    such node is an InvalidSpecError naming the cluster (before any connection).
    """
    nodes = [n for n in driver.list_nodes(spec.name) if n.state == NodeState.RUNNING and n.private_ip]
    if not nodes:
        raise InvalidSpecError(f"cluster {spec.name} has no running node on {spec.provider}: order it first "
                               "(metalfleet up or metalfleet order)", field="name", value=spec.name)
    return hosts_from_spec(spec, nodes, resolve_offering(driver, spec)), nodes


def run_bootstrap(
    inventory_or_spec_hosts: Inventory | Sequence[Host],
    profile: Profile | str | None = None,
    dry_run: bool = False,
    limit: str | Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
    *,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    ssh: SshOptions | None = None,
    max_workers: int = 64,
    max_fail_percentage: float | None = None,
    log_dir: str | Path | None = None,
    options: RunOptions | None = None,
) -> Report:
    """Bootstrap hosts with a profile and return the per-host report.

    ``inventory_or_spec_hosts``: an :class:`Inventory` (from :func:`load_inventory` or
    :func:`hosts_from_spec`, its SSH options are used unless ``ssh`` is given) or a list of hosts.
    ``profile``: a :class:`Profile`, a profile name, or None for ``gpu-node``. ``limit``: host name
    or address globs, or ``label=value``. ``progress``: called with a :class:`ProgressEvent` from
    worker threads (see :class:`TerminalProgress`). A host's failure never raises: read
    ``report.failed``; a bad spec or override raises :class:`InvalidSpecError` before any connection.
    """
    if isinstance(inventory_or_spec_hosts, Inventory):
        hosts: Sequence[Host] = inventory_or_spec_hosts.hosts
        ssh = ssh or inventory_or_spec_hosts.ssh
    else:
        hosts = list(inventory_or_spec_hosts)
    prof = profile if isinstance(profile, Profile) else get_profile(profile)
    if overrides:
        prof = prof.with_overrides(overrides)
    opts = options or RunOptions()
    opts = replace(opts, dry_run=dry_run or opts.dry_run, max_workers=max_workers,
                   max_fail_percentage=max_fail_percentage if max_fail_percentage is not None
                   else opts.max_fail_percentage,
                   log_dir=Path(log_dir) if log_dir else opts.log_dir, ssh=ssh or opts.ssh)
    return run(hosts, prof, opts, limit=limit, progress=progress)


def bootstrap_cluster(
    spec: ClusterSpec,
    nodes: Sequence[Node],
    *,
    offering: Offering | None = None,
    dry_run: bool = False,
    limit: str | Sequence[str] | None = None,
    progress: ProgressCallback | None = None,
    **kw: Any,
) -> Report:
    """Bootstrap a spec's provider nodes: hosts from private IPs, the spec's profile, storage and overrides."""
    inventory = hosts_from_spec(spec, nodes, offering)
    return run_bootstrap(inventory, profile_for_spec(spec), dry_run=dry_run, limit=limit, progress=progress, **kw)
