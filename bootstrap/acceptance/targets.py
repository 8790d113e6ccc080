"""What ``metalfleet verify`` judges: an inventory's hosts or a cluster spec's live nodes, with the baseline
overrides, the saved-outputs folder and the cloud tagging of failed nodes. The command line is
:mod:`metalfleet.stacks.cli.verify`; this module knows nothing of it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metalfleet.providers.errors import InvalidSpecError

from .baselines import set_dotted

if TYPE_CHECKING:
    from metalfleet.providers.models import Node

    from ..inventory import Host, Inventory
    from .results import AcceptanceReport

__all__ = ["VerifyTarget", "check_save_dir", "load_verify_target", "parse_overrides", "record_nodes"]


def parse_overrides(items: Sequence[str], threshold: float | None = None) -> dict[str, Any]:
    """Baseline overrides from ``PATH=JSON`` items (a value that is not JSON is the string) and a threshold."""
    out: dict[str, Any] = {}
    for item in items:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            raise InvalidSpecError(f"--override wants PATH=JSON, got {item!r}", field="override", value=item)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        set_dotted(out, path, value)
    if threshold is not None:
        out["threshold"] = threshold
    return out


@dataclass(frozen=True)
class VerifyTarget:
    """The hosts to check and the overrides to judge them by; for a spec, also its driver and live nodes."""

    inventory: Inventory
    overrides: dict[str, Any]
    driver: Any = None
    nodes: Sequence[Node] = ()


def load_verify_target(path: str, driver_config: Sequence[str], overrides: dict[str, Any]) -> VerifyTarget:
    """An inventory file as it is; a cluster spec's live nodes through its driver (``driver_config`` as
    ``KEY=VALUE``), with the spec's acceptance overrides under the given ones."""
    from ..inventory import Inventory, load_target

    target = load_target(path)
    if isinstance(target, Inventory):
        return VerifyTarget(target, overrides)
    from metalfleet.providers.merge import deep_merge
    from metalfleet.providers.registry import get_driver, parse_driver_config

    from ..api import live_inventory
    from .quarantine import spec_overrides

    spec = target
    driver = get_driver(spec.provider, region=spec.region,
                        **parse_driver_config(list(driver_config), provider=spec.provider))
    inventory, nodes = live_inventory(spec, driver)
    return VerifyTarget(inventory, deep_merge(spec_overrides(spec), overrides), driver, nodes)


def check_save_dir(root: Path, hosts: Sequence[Host], offering: str | None) -> None:
    """Every host's folder (and each all-reduce group's) stays under ``root`` and is its own: refused before
    any connection otherwise (a host named ``..``, a link out of ``root``)."""
    from ..logs import check_host_paths
    from ..sessions import host_folder

    groups = sorted({f"multinode-{offering or h.offering}" for h in hosts if offering or h.offering})
    check_host_paths(root, [*(h.name for h in hosts), *groups], host_folder, "saved-outputs folder")


def record_nodes(report: AcceptanceReport, target: VerifyTarget, *, tag_failed: bool) -> list[str]:
    """Set each judged host's node id from the target's live nodes; with ``tag_failed``, tag the failed ones
    quarantined through the driver. Returns the lines to show about tagging (a driver that cannot tag, a tag
    call that failed); a failed tag does not stop the others."""
    from metalfleet.providers.errors import MetalfleetError
    from metalfleet.providers.lifecycle import quarantine

    lines: list[str] = []
    by_addr = {n.private_ip: n for n in target.nodes}
    for n in report.nodes:
        node = by_addr.get(n.address)
        n.node_id = node.id if node else None
        if tag_failed and node is not None and not n.passed:
            try:
                if not quarantine(target.driver, node.id, n.reason):
                    lines.append(f"note: driver {target.driver.name} cannot tag nodes; {node.id} not tagged")
            except MetalfleetError as exc:
                lines.append(f"error: tagging {node.id} failed: {exc}")
    return lines
