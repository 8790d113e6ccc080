"""The gate's consequence: a node that fails acceptance does not join the cluster.

This module judges (:func:`run_acceptance` over the nodes' hosts) and keeps the quarantine file; what is
done to a provider node — tag it, release it, order the next generation — is
:mod:`metalfleet.providers.lifecycle`'s.

Provider nodes (:func:`accept_cluster`): a failing node is tagged ``metalfleet:acceptance=quarantined``
with the reason (through the driver's optional ``set_tags(node_id, tags)``; a driver without it is
reported as untagged and the quarantine file, when given, records the node instead). With
``AcceptanceSpec.replace_failed`` it is then released and replaced by a new order (the next
generation of its index), which is bootstrapped and checked in turn, while ``AcceptanceSpec.retry_budget``
replacement orders remain (one budget for the whole call; :func:`metalfleet.providers.lifecycle.settle`).
A node still failing when the budget is spent stays quarantined (kept, tagged, reported) for someone to
look at. Every node created is in exactly one of ``accepted``, ``quarantined`` or ``released``.

Inventory hosts (:func:`write_quarantine`): failing hosts are written to a quarantine file with the
label ``acceptance=quarantined`` and the reason; hosts that pass later are taken off it.
:func:`apply_quarantine` puts the label on an inventory's hosts (so ``--limit acceptance=quarantined``
selects them) and :func:`accepted_hosts` leaves them out.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from metalfleet.providers.contract import ComputeDriver, HealthDriver, TaggingDriver, capability
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError
from metalfleet.providers.fleet import resolve_offering
from metalfleet.providers.lifecycle import (
    ACCEPTANCE_TAG,
    REASON_TAG,
    LifecycleOutcome,
    QuarantinedNode,
    Replacement,
    settle,
    tag_node,
)
from metalfleet.providers.merge import deep_merge
from metalfleet.providers.models import Node, Offering
from metalfleet.providers.retry import DEFAULT_POLICY, RetryPolicy
from metalfleet.providers.spec import ClusterSpec, load_yaml

from ..inventory import Host, Inventory, hosts_from_spec
from ..progress import ProgressCallback
from .baselines import set_dotted
from .live import AcceptanceReport, run_acceptance
from .probes import AcceptanceOptions

__all__ = [
    "ACCEPTANCE_TAG",
    "QUARANTINE_LABEL",
    "REASON_TAG",
    "AcceptanceOutcome",
    "QuarantinedNode",
    "Replacement",
    "TaggingDriver",
    "accept_cluster",
    "accepted_hosts",
    "apply_quarantine",
    "load_quarantine",
    "spec_overrides",
    "tag_node",
    "write_quarantine",
]

#: Inventory label (``--limit acceptance=quarantined``).
QUARANTINE_LABEL = "acceptance"


def spec_overrides(spec: ClusterSpec) -> dict[str, Any]:
    """Baseline overrides from ``spec.acceptance``: threshold, ``baselines`` (dotted baseline paths,
    e.g. ``nccl.all_reduce.intra_node_ring_busbw_gbs: 300``) and ``mandatory`` (the checks a node must
    pass, the baseline's ``required`` when unset)."""
    acc = spec.acceptance
    out: dict[str, Any] = {"threshold": acc.threshold}
    for path, value in acc.baselines.items():
        set_dotted(out, path, value)
    if acc.mandatory is not None:
        out["required"] = list(acc.mandatory)
    if acc.outliers != "advisory":
        out["fleet"] = {"outliers": acc.outliers}
    return out


# --------------------------------------------------------------------------------------------
# Outcome


@dataclass
class AcceptanceOutcome(LifecycleOutcome):  # type: ignore[misc]  # (mypy on the source folders sees metalfleet.* as Any)
    """What :func:`accept_cluster` did to the nodes (:class:`LifecycleOutcome`), and the judging behind it."""

    #: One acceptance report per round (the first for ``nodes``, then one per batch of replacements).
    reports: list[AcceptanceReport] = field(default_factory=list)
    #: Multi-node all_reduce runs that failed with no culprit to explain them (a switch group, an unresolved
    #: failure): no node is quarantined for them. A run whose blamed nodes explain it is not listed.
    multi_node_failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return super().ok and not self.multi_node_failures

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "accepted": [n.id for n in self.accepted],
                "quarantined": [q.to_dict() for q in self.quarantined],
                "replaced": [r.to_dict() for r in self.replaced], "released": list(self.released),
                "generations": {str(k): v for k, v in self.generations.items()},
                "multi_node_failures": list(self.multi_node_failures), "errors": list(self.errors),
                "budget_left": self.budget_left, "reports": [r.to_dict() for r in self.reports]}

    def summary(self) -> str:
        lines = [f"acceptance: {len(self.accepted)} accepted, {len(self.quarantined)} quarantined, "
                 f"{len(self.replaced)} replaced, {len(self.released)} released"
                 + (f", {self.budget_left} replacement(s) left in the budget" if self.replaced else "")]
        lines += [f"  quarantined {q.name} ({q.node_id or q.address}): {q.reason}" for q in self.quarantined]
        lines += [f"  replaced index {r.index}: {r.old_node_id} -> {r.new_node_id or 'nothing'} "
                  f"(generation {r.generation}; {r.error or r.reason})" for r in self.replaced]
        lines += [f"  multi-node: {m}" for m in self.multi_node_failures]
        lines += [f"  error: {e}" for e in self.errors]
        return "\n".join(lines)


BootstrapFn = Callable[[Sequence[Node]], Any]
InventoryFn = Callable[[Sequence[Node]], Inventory]


def _bootstrap_failures(result: Any, nodes: Sequence[Node]) -> dict[str, str]:
    """node id -> reason, from what a bootstrap callable returned (a bootstrap Report, or None)."""
    failed = getattr(result, "failed", None)
    if not failed:
        return {}
    out: dict[str, str] = {}
    for hr in failed:
        for n in nodes:
            if getattr(hr, "host", None) in (n.name, n.id) or getattr(hr, "address", None) == n.private_ip:
                out[n.id] = f"bootstrap failed: {getattr(hr, 'error', None) or getattr(hr, 'status', 'failed')}"
    return out


def _preparer(bootstrap: BootstrapFn) -> Callable[[Sequence[Node]], dict[str, str]]:
    def prepare(nodes: Sequence[Node]) -> dict[str, str]:
        try:
            result = bootstrap(nodes)
        except Exception as exc:  # the new nodes must stay accounted for whatever the callable raised
            return {n.id: f"bootstrap failed: {type(exc).__name__}: {exc}" for n in nodes}
        return _bootstrap_failures(result, nodes)

    return prepare


def accept_cluster(
    driver: ComputeDriver,
    spec: ClusterSpec,
    nodes: Sequence[Node],
    *,
    bootstrap: BootstrapFn | None = None,
    inventory_for: InventoryFn | None = None,
    offering: Offering | None = None,
    overrides: Mapping[str, Any] | None = None,
    options: AcceptanceOptions | None = None,
    generations: Mapping[int, int] | None = None,
    progress: ProgressCallback | None = None,
    save_dir: str | Path | None = None,
    quarantine_file: str | Path | None = None,
    replace_failed: bool | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    wait_timeout: float = 1800.0,
    max_workers: int = 32,
) -> AcceptanceOutcome:
    """Check ``nodes`` (already bootstrapped) and act on the verdicts; see the module docstring.

    ``bootstrap(new_nodes)`` makes replacements ready before they are checked (e.g.
    ``lambda ns: bootstrap_cluster(spec, ns)``); a returned bootstrap Report's failed hosts count
    as failed nodes. ``inventory_for(nodes)`` builds the hosts to connect to (default:
    :func:`hosts_from_spec`). ``generations``: index -> generation of the current node, when not 0.
    ``replace_failed``: False only quarantines (a stack declares replacements instead); None: the spec's.
    Never raises for a node's failure or a driver call that fails (see ``errors``); raises
    InvalidSpecError for a bad spec or override before any connection.
    """
    outcome = AcceptanceOutcome()
    if not spec.acceptance.enabled:
        outcome.accepted = list(nodes)
        return outcome
    off = offering or resolve_offering(driver, spec)
    ov = deep_merge(spec_overrides(spec), overrides or {})
    if not spec.acceptance.localise:
        options = replace(options or AcceptanceOptions(), localise=False)
    to_hosts: InventoryFn = inventory_for or (lambda ns: hosts_from_spec(spec, ns, off))

    def check(pending: Sequence[Node], rounds: int) -> dict[str, str | None]:
        inv = to_hosts(pending)
        folder = None if save_dir is None else Path(save_dir) / (f"round-{rounds}" if rounds > 1 else "")
        report = run_acceptance(inv, overrides=ov, options=options, progress=progress, save_dir=folder,
                                max_workers=max_workers)
        outcome.reports.append(report)
        by_addr = {n.private_ip: n for n in pending}
        by_name = {n.name or n.id: n for n in pending}
        verdicts: dict[str, str | None] = {}
        for h, na in zip(inv.hosts, report.nodes, strict=True):
            node = by_addr.get(h.address) or by_name.get(h.name)
            if node is None:
                continue
            na.node_id = node.id
            verdicts[node.id] = None if na.passed else na.reason
        for node in pending:
            verdicts.setdefault(node.id, "no host was built for this node (inventory_for left it out)")
        if (health := capability(driver, HealthDriver)) is not None:  # what the BMC says, which SSH cannot see
            for node in pending:
                try:
                    faults = health.critical_events(node.id)
                except MetalfleetError as exc:
                    faults = [f"its BMC could not be read: {exc}"]
                if faults:
                    why = f"BMC reports a critical fault: {'; '.join(faults)}"
                    verdicts[node.id] = why if verdicts[node.id] is None else f"{why}; {verdicts[node.id]}"
        for m in report.multi_node:
            loc = report.localisation.get(m.offering)
            if m.passed or (loc is not None and loc.blames and loc.explained):
                continue  # the blamed nodes fail on their own verdicts; the run without them passed
            outcome.multi_node_failures.append(f"all_reduce across {', '.join(m.hosts)}: {m.reason}")
            if loc is not None:
                outcome.multi_node_failures += [f"group {', '.join(g.hosts)}: {g.reason}" for g in loc.groups]
                outcome.multi_node_failures += [f"unresolved: {u}" for u in loc.unresolved]
        return verdicts

    settle(driver, spec, nodes, check, outcome, offering=off,
           prepare=None if bootstrap is None else _preparer(bootstrap), replace_failed=replace_failed,
           generations=generations, policy=policy, wait_timeout=wait_timeout)
    if quarantine_file is not None:
        _record_nodes(quarantine_file, outcome)
    return outcome


# --------------------------------------------------------------------------------------------
# The quarantine file (inventory hosts, and provider nodes whose driver cannot tag)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_quarantine(path: str | Path) -> dict[str, dict[str, Any]]:
    """host name -> entry (address, offering, reason, labels, at); {} when the file does not exist."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return {}
    doc = load_yaml(p, "quarantine file", allow_empty=True) or {}  # bad bytes or YAML: BadFileError
    entries = doc.get("quarantined") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        raise InvalidSpecError(f"quarantine file {p}: expected a 'quarantined' mapping", field="quarantine",
                               value=str(p))
    return {str(k): dict(v or {}) for k, v in entries.items()}


def _store(path: str | Path, entries: Mapping[str, Mapping[str, Any]]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    head = ("# Written by metalfleet acceptance: hosts kept out of the cluster, with why. A host leaves this\n"
            "# list when it passes again. Select them with --limit acceptance=quarantined.\n")
    text = head + yaml.safe_dump({"quarantined": {k: dict(v) for k, v in sorted(entries.items())}},
                                 sort_keys=False, width=1000)
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, p)


def _entry(address: str, offering: str | None, reason: str, node_id: str | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"address": address, "offering": offering, "reason": reason,
                         "labels": {QUARANTINE_LABEL: "quarantined"}, "at": _now()}
    if node_id:
        e["node_id"] = node_id
    return e


def write_quarantine(report: AcceptanceReport, path: str | Path) -> dict[str, dict[str, Any]]:
    """Add the report's failed hosts to the quarantine file and take its passed hosts off; returns the file's
    entries. Hosts the report did not check are left as they were."""
    entries = load_quarantine(path)
    for n in report.nodes:
        if n.passed:
            entries.pop(n.host, None)
        else:
            entries[n.host] = _entry(n.address, n.offering, n.reason, n.node_id)
    _store(path, entries)
    return entries


def _record_nodes(path: str | Path, outcome: AcceptanceOutcome) -> None:
    entries = load_quarantine(path)
    for node in outcome.accepted:
        entries.pop(node.name or node.id, None)
    for q in outcome.quarantined:
        entries[q.name] = _entry(q.address, q.offering, q.reason, q.node_id)
    _store(path, entries)


def apply_quarantine(inventory: Inventory, path: str | Path) -> Inventory:
    """The inventory with ``acceptance=quarantined`` (and the reason) on every host the file lists."""
    entries = load_quarantine(path)
    hosts: list[Host] = []
    for h in inventory.hosts:
        e = entries.get(h.name)
        if e is None:
            hosts.append(h)
            continue
        labels = {**h.labels, **{str(k): str(v) for k, v in (e.get("labels") or {}).items()},
                  QUARANTINE_LABEL: "quarantined", "acceptance-reason": str(e.get("reason", ""))}
        hosts.append(replace(h, labels=labels))
    return replace(inventory, hosts=tuple(hosts))


def accepted_hosts(inventory: Inventory, path: str | Path) -> Inventory:
    """The inventory without the hosts the quarantine file lists."""
    entries = load_quarantine(path)
    return replace(inventory, hosts=tuple(h for h in inventory.hosts if h.name not in entries))
