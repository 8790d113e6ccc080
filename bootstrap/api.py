"""Entry points for the CLI and for programs: one call bootstraps an inventory or a spec's nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from metalfleet.providers.console import with_host_keys
from metalfleet.providers.contract import ComputeDriver, HostKeysDriver, capability
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError
from metalfleet.providers.fleet import resolve_offering
from metalfleet.providers.models import Node, NodeState, Offering
from metalfleet.providers.retry import DEFAULT_POLICY, RetryPolicy
from metalfleet.providers.spec import ClusterSpec

from .connector import SshOptions
from .inventory import Host, Inventory, hosts_from_spec
from .logs import check_host_paths
from .profiles import Profile, get_profile, profile_for_spec
from .progress import ProgressCallback
from .report import Report
from .runner import RunOptions, run
from .sessions import default_log_dir, host_log_file, select_hosts

__all__ = ["bootstrap_cluster", "live_inventory", "run_bootstrap"]


def live_inventory(spec: ClusterSpec, driver: ComputeDriver, *,
                   policy: RetryPolicy | None = None) -> tuple[Inventory, list[Node]]:
    """The hosts of ``spec``'s running nodes (those with a private IP) on ``driver``, and those nodes.

    What ``metalfleet bootstrap SPEC`` and ``metalfleet verify SPEC`` connect to. A cluster with no
    such node is an InvalidSpecError naming the cluster (before any connection).

    Host keys are pinned as ``metalfleet up`` pins them: each node's ``extra["host_keys"]``, read here from
    the driver's ``host_keys(node_id)`` (the console output) where the driver offers it, so a fresh
    known_hosts needs no first-contact trust. Reads run under ``policy`` (default: the one retry policy).
    A host left without a key (console empty or unreadable, a driver that reads none), that the
    known_hosts file does not record either, is an InvalidSpecError that says so and names
    ``ssh.known_hosts`` and ``ssh.pin_on_first_contact``, unless the spec turned the latter on.
    """
    retry = policy or DEFAULT_POLICY
    nodes = [n for n in retry.call(driver.list_nodes, spec.name) if n.state == NodeState.RUNNING and n.private_ip]
    if not nodes:
        raise InvalidSpecError(f"cluster {spec.name} has no running node on {spec.provider}: order it first "
                               "(metalfleet up or metalfleet order)", field="name", value=spec.name)
    nodes, missing = _console_host_keys(driver, nodes, retry)
    inventory = hosts_from_spec(spec, nodes, resolve_offering(driver, spec))
    if missing and not inventory.ssh.trust_on_first_use:
        _refuse_unpinned(spec, inventory, nodes, missing)
    return inventory, nodes


def _console_host_keys(driver: ComputeDriver, nodes: list[Node],
                       retry: RetryPolicy) -> tuple[list[Node], dict[str, str]]:
    """``nodes`` with ``extra["host_keys"]`` from ``driver.host_keys`` (the path ``metalfleet up`` takes, see
    :func:`metalfleet.providers.console.with_host_keys`), and node id -> why it has none. A driver without
    ``host_keys`` leaves every node as it is (its hosts are checked against known_hosts when they connect)."""
    keyed = capability(driver, HostKeysDriver)
    known: dict[str, tuple[str, ...]] = {n.id: tuple(n.extra["host_keys"]) for n in nodes if n.extra.get("host_keys")}
    if keyed is None:
        return nodes, {}
    read = keyed.host_keys
    why: dict[str, str] = {}

    def keys_of(node_id: str) -> tuple[str, ...]:
        try:
            keys = tuple(retry.call(read, node_id))
        except MetalfleetError as exc:
            why[node_id] = f"reading its console failed: {exc}"
            raise
        if keys:
            known[node_id] = keys
        else:
            why[node_id] = (f"driver {getattr(driver, 'name', type(driver).__name__)} found no SSH host keys for it "
                            "(its console output holds none yet, or the provider offers none)")
        return keys

    nodes = with_host_keys(nodes, known, keys_of)
    return nodes, {i: w for i, w in why.items() if i not in known}


def _refuse_unpinned(spec: ClusterSpec, inventory: Inventory, nodes: Sequence[Node],
                     missing: Mapping[str, str]) -> None:
    """Raise for the hosts in ``missing`` that the known_hosts file does not record either (before any connection:
    SSH would refuse them one by one, or tempt a user into first-contact trust)."""
    from .ssh import KnownHosts

    known_hosts = KnownHosts(inventory.ssh)
    by_address = {h.address: h for h in inventory.hosts}
    unrecorded = []
    for node in nodes:
        host = by_address.get(node.private_ip or "")
        if node.id in missing and host is not None and not known_hosts.known_types(host.endpoint()):
            unrecorded.append(f"{node.id} ({host.address}): {missing[node.id]}")
    if unrecorded:
        shown = "; ".join(unrecorded[:8]) + (f"; and {len(unrecorded) - 8} more" if len(unrecorded) > 8 else "")
        raise InvalidSpecError(
            f"cluster {spec.name}: no SSH host key to trust for {len(unrecorded)} node(s): {shown}"
            f". Run again once the console shows the keys, record each host's key in {known_hosts.path} "
            "(ssh.known_hosts) after checking its fingerprint, or set ssh.pin_on_first_contact: true to trust "
            "the key each host first presents", field="ssh.known_hosts", value=str(known_hosts.path))


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
    logs = Path(log_dir) if log_dir else (opts.log_dir or default_log_dir())
    # every host's log stays under the log folder, one file per host: checked before any connection
    check_host_paths(logs, [h.name for h in select_hosts(hosts, limit)], host_log_file, "log file")
    opts = replace(opts, dry_run=dry_run or opts.dry_run, max_workers=max_workers,
                   max_fail_percentage=max_fail_percentage if max_fail_percentage is not None
                   else opts.max_fail_percentage, log_dir=logs, ssh=ssh or opts.ssh)
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
