"""A simulated fleet as the Slurm tests reach it: an inventory of some of its hosts (their keys pinned), and one
command over SSH on one host, as a user types it there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.ssh import SshConnection
from metalfleet.testing.hosts.harness import HostFleet


def inventory(f: HostFleet, offering: str, provider: str, idx: Sequence[int] | None = None) -> Inventory:
    """The hosts ``idx`` (default: all) as the nodes of ``offering``, their host keys pinned."""
    chosen = [f.hosts[i] for i in idx] if idx is not None else list(f.hosts)
    inv = f.inventory(offering=offering, provider=provider, hosts=chosen)
    return Inventory(inv.hosts, f.ssh_options(pinned_keys={h.address: [h.host_key] for h in f.hosts}))


def ssh(f: HostFleet, i: int, argv: list[str], timeout: float = 90) -> Any:
    """``argv`` on host ``i``; the result (rc, stdout, stderr as bytes)."""
    h = f.hosts[i]
    inv = f.inventory(hosts=[h])
    with SshConnection(inv.hosts[0].endpoint(), f.ssh_options(pinned_keys={h.address: [h.host_key]})) as conn:
        return conn.run(argv, timeout=timeout)
