"""The gate's consequence: a node that fails acceptance does not join the cluster.

Provider nodes (:func:`accept_cluster`): a failing node is tagged ``metalfleet:acceptance=quarantined``
with the reason (through the driver's optional ``set_tags(node_id, tags)``; a driver without it is
reported as untagged and the quarantine file, when given, records the node instead). With
``AcceptanceSpec.replace_failed`` it is then released and replaced by a new order (the next
generation of its index, :func:`metalfleet.providers.fleet.order_node`), which is bootstrapped and
checked in turn, while ``AcceptanceSpec.retry_budget`` replacement orders remain (one budget for
the whole call). A node still failing when the budget is spent stays quarantined (kept, tagged,
reported) for someone to look at. Every node created is in exactly one of ``accepted``,
``quarantined`` or ``released``.

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

from metalfleet.providers.contract import ComputeDriver, TaggingDriver
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError
from metalfleet.providers.fleet import order_node, resolve_offering
from metalfleet.providers.models import Node, NodeState, Offering
from metalfleet.providers.retry import DEFAULT_POLICY, RetryPolicy
from metalfleet.providers.spec import ClusterSpec, load_yaml

from ..inventory import Host, Inventory, hosts_from_spec
from ..progress import ProgressCallback
from .baselines import set_dotted
from .live import AcceptanceReport, NodeAcceptance, run_acceptance
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
    "merge_overrides",
    "spec_overrides",
    "tag_node",
    "write_quarantine",
]

ACCEPTANCE_TAG = "metalfleet:acceptance"
REASON_TAG = "metalfleet:acceptance-reason"
#: Inventory label (``--limit acceptance=quarantined``).
QUARANTINE_LABEL = "acceptance"
#: Provider tag values are short (EC2: 256 characters).
_TAG_MAX = 255


def tag_node(driver: Any, node_id: str, tags: Mapping[str, str], *, policy: RetryPolicy = DEFAULT_POLICY) -> bool:
    """Tag through ``driver.set_tags`` when the driver has it; False when it does not."""
    fn = getattr(driver, "set_tags", None)
    if not callable(fn):
        return False
    policy.call(fn, node_id, dict(tags))
    return True


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
    return out


def merge_overrides(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, recursively: an override of one baseline value keeps its siblings."""
    out = dict(base)
    for k, v in top.items():
        out[k] = merge_overrides(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), dict) else v
    return out


# --------------------------------------------------------------------------------------------
# Outcome


@dataclass(frozen=True)
class QuarantinedNode:
    """A node kept out of the cluster: still there (tagged, when the driver can), for a human to look at."""

    name: str
    address: str
    reason: str
    offering: str | None = None
    node_id: str | None = None
    index: int | None = None
    #: Whether the provider tags say so (False: the driver cannot tag; see the quarantine file).
    tagged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "reason": self.reason, "offering": self.offering,
                "node_id": self.node_id, "index": self.index, "tagged": self.tagged}


@dataclass(frozen=True)
class Replacement:
    """Node ``old_node_id`` (index ``index``) failed, was released, and ``new_node_id`` was ordered."""

    index: int
    old_node_id: str
    reason: str
    generation: int
    new_node_id: str | None = None
    #: Why no replacement came (an order that failed: capacity, quota...).
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "old_node_id": self.old_node_id, "new_node_id": self.new_node_id,
                "generation": self.generation, "reason": self.reason, "error": self.error}


@dataclass
class AcceptanceOutcome:
    accepted: list[Node] = field(default_factory=list)
    quarantined: list[QuarantinedNode] = field(default_factory=list)
    replaced: list[Replacement] = field(default_factory=list)
    #: Ids of the nodes this call released (failed nodes that were replaced).
    released: list[str] = field(default_factory=list)
    #: One acceptance report per round (the first for ``nodes``, then one per batch of replacements).
    reports: list[AcceptanceReport] = field(default_factory=list)
    #: index -> generation of the node now holding it, for every index that was replaced (the next
    #: order of that index with this generation returns the same node).
    generations: dict[int, int] = field(default_factory=dict)
    #: Multi-node all_reduce runs that failed (no single node to blame: no node is quarantined for them).
    multi_node_failures: list[str] = field(default_factory=list)
    #: Driver calls that failed (a tag, a release, an order) with what was left as it was.
    errors: list[str] = field(default_factory=list)
    budget_left: int = 0

    @property
    def ok(self) -> bool:
        return not self.quarantined and not self.multi_node_failures and not self.errors

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


def _index(node: Node, default: int) -> int:
    try:
        return int(node.tags.get("metalfleet:index", default))
    except ValueError:
        return default


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
    policy: RetryPolicy = DEFAULT_POLICY,
    wait_timeout: float = 1800.0,
    max_workers: int = 32,
) -> AcceptanceOutcome:
    """Check ``nodes`` (already bootstrapped) and act on the verdicts; see the module docstring.

    ``bootstrap(new_nodes)`` makes replacements ready before they are checked (e.g.
    ``lambda ns: bootstrap_cluster(spec, ns)``); a returned bootstrap Report's failed hosts count
    as failed nodes. ``inventory_for(nodes)`` builds the hosts to connect to (default:
    :func:`hosts_from_spec`). ``generations``: index -> generation of the current node, when not 0.
    Never raises for a node's failure or a driver call that fails (see ``errors``); raises
    InvalidSpecError for a bad spec or override before any connection.
    """
    acc = spec.acceptance
    outcome = AcceptanceOutcome()
    if not acc.enabled:
        outcome.accepted = list(nodes)
        return outcome
    off = offering or resolve_offering(driver, spec)
    ov = merge_overrides(spec_overrides(spec), overrides or {})
    to_hosts: InventoryFn = inventory_for or (lambda ns: hosts_from_spec(spec, ns, off))
    budget = acc.retry_budget if acc.replace_failed else 0
    gens = dict(generations or {})
    positions = {n.id: _index(n, i) for i, n in enumerate(nodes)}
    pending: list[Node] = list(nodes)
    prefailed: list[tuple[Node, str]] = []
    rounds = 0
    while pending or prefailed:
        rounds += 1
        failures: list[tuple[Node, str, NodeAcceptance | None]] = [(n, r, None) for n, r in prefailed]
        prefailed = []
        if pending:
            inv = to_hosts(pending)
            folder = None if save_dir is None else Path(save_dir) / (f"round-{rounds}" if rounds > 1 else "")
            report = run_acceptance(inv, overrides=ov, options=options, progress=progress, save_dir=folder,
                                    max_workers=max_workers)
            outcome.reports.append(report)
            by_addr = {n.private_ip: n for n in pending}
            by_name = {n.name or n.id: n for n in pending}
            seen: set[str] = set()
            for h, na in zip(inv.hosts, report.nodes, strict=True):
                node = by_addr.get(h.address) or by_name.get(h.name)
                if node is None:
                    continue
                seen.add(node.id)
                na.node_id = node.id
                if na.passed:
                    outcome.accepted.append(node)
                else:
                    failures.append((node, na.reason, na))
            for node in pending:
                if node.id not in seen:
                    failures.append((node, "no host was built for this node (inventory_for left it out)", None))
            outcome.multi_node_failures += [f"all_reduce across {', '.join(m.hosts)}: {m.reason}"
                                            for m in report.multi_node if not m.passed]
        pending = []
        fresh: list[Node] = []
        for node, reason, _na in failures:
            tagged = _quarantine_tag(driver, node, reason, policy, outcome)
            index = positions.get(node.id, 0)
            if budget <= 0:
                outcome.quarantined.append(QuarantinedNode(node.name or node.id, node.private_ip or "", reason,
                                                           node.offering, node.id, index, tagged))
                continue
            try:
                policy.call(driver.release, node.id, wait=True, timeout=wait_timeout)
            except MetalfleetError as exc:
                outcome.errors.append(f"release of failed node {node.id} failed ({exc}); it stays quarantined")
                outcome.quarantined.append(QuarantinedNode(node.name or node.id, node.private_ip or "", reason,
                                                           node.offering, node.id, index, tagged))
                continue
            outcome.released.append(node.id)
            budget -= 1
            gen = gens.get(index, 0) + 1
            try:
                new = order_node(driver, spec.node_spec(index, off.name, gen), policy=policy)
            except MetalfleetError as exc:
                outcome.replaced.append(Replacement(index, node.id, reason, gen, error=f"order failed: {exc}"))
                outcome.errors.append(f"replacement for index {index} (was {node.id}) could not be ordered: {exc}")
                continue
            gens[index] = gen
            outcome.generations[index] = gen
            positions[new.id] = index
            outcome.replaced.append(Replacement(index, node.id, reason, gen, new.id))
            fresh.append(new)
        if fresh:
            pending, prefailed = _ready(driver, fresh, bootstrap, policy, wait_timeout)
    outcome.budget_left = budget
    for node in outcome.accepted:
        try:
            tag_node(driver, node.id, {ACCEPTANCE_TAG: "passed"}, policy=policy)
        except MetalfleetError as exc:
            outcome.errors.append(f"tagging accepted node {node.id} failed: {exc}")
    if quarantine_file is not None:
        _record_nodes(quarantine_file, outcome)
    return outcome


def _quarantine_tag(driver: Any, node: Node, reason: str, policy: RetryPolicy, outcome: AcceptanceOutcome) -> bool:
    tags = {ACCEPTANCE_TAG: "quarantined", REASON_TAG: reason[:_TAG_MAX]}
    try:
        return tag_node(driver, node.id, tags, policy=policy)
    except MetalfleetError as exc:
        outcome.errors.append(f"tagging failed node {node.id} as quarantined failed: {exc}")
        return False


def _ready(driver: ComputeDriver, fresh: list[Node], bootstrap: BootstrapFn | None, policy: RetryPolicy,
           timeout: float) -> tuple[list[Node], list[tuple[Node, str]]]:
    """Wait for new nodes to run and bootstrap them: (ready to check, [(node, why it failed)])."""
    try:
        running = policy.call(driver.wait, [n.id for n in fresh], NodeState.RUNNING, timeout=timeout)
    except MetalfleetError as exc:
        return [], [(n, f"replacement did not reach running: {exc}") for n in fresh]
    if bootstrap is None:
        return list(running), []
    try:
        result = bootstrap(running)
    except Exception as exc:  # the new nodes must stay accounted for whatever the callable raised
        return [], [(n, f"bootstrap failed: {type(exc).__name__}: {exc}") for n in running]
    bad = _bootstrap_failures(result, running)
    return [n for n in running if n.id not in bad], [(n, bad[n.id]) for n in running if n.id in bad]


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
