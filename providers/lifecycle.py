"""What happens to a node after it is ordered and judged: quarantine it (tag it) or replace it (release it and
order the next generation of its idempotency key), within the spec's ``acceptance.retry_budget``.

Pulumi-free and SSH-free: the judging is someone else's (the acceptance gate in ``metalfleet.bootstrap``
passes its verdicts in as a callable), so the CLI, the bootstrap layer and the stacks share this one copy.

Generations. Node ``index`` of a cluster is bought with the idempotency key of (cluster, index, generation)
(:func:`~metalfleet.providers.models.idempotency_key`); a replacement is the next generation. A node of
generation > 0 carries the tag ``metalfleet:generation``, so whoever declares the cluster next can read each
index's generation back from the provider. Two ways to replace:

- :func:`settle`, now, in one call: check, quarantine, release, order the next generation, make it ready
  (``prepare``), check again, until every node passed or the budget is spent (``metalfleet.bootstrap``'s
  ``accept_cluster``). The budget is for the whole call.
- :func:`plan_generations`, declared: a stack's program reads which nodes are quarantined and declares the
  next generation for their indexes, so the engine replaces the node resource it tracks. The budget is for
  the cluster's life: the generations above the declared base, summed over its indexes, never pass it.

Tags a node may carry: ``metalfleet:acceptance`` (``quarantined`` or ``passed``),
``metalfleet:acceptance-reason`` (why, cut to :data:`TAG_VALUE_MAX` characters), ``metalfleet:generation``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from .contract import ComputeDriver, TaggingDriver, capability
from .errors import MetalfleetError
from .fleet import order_node
from .models import Node, NodeSpec, NodeState, Offering
from .retry import DEFAULT_POLICY, RetryPolicy
from .spec import ClusterSpec
from .tags import TAG_ACCEPTANCE, TAG_ACCEPTANCE_REASON, TAG_GENERATION
from .tags import node_index as tags_node_index

__all__ = [
    "ACCEPTANCE_TAG",
    "GENERATION_TAG",
    "PASSED",
    "QUARANTINED",
    "REASON_TAG",
    "TAG_VALUE_MAX",
    "CheckFn",
    "GenerationPlan",
    "LifecycleOutcome",
    "PrepareFn",
    "QuarantinedNode",
    "Replacement",
    "is_quarantined",
    "mark_passed",
    "node_generation",
    "node_index",
    "node_spec",
    "plan_generations",
    "quarantine",
    "settle",
    "tag_node",
    "with_generation_tag",
]

ACCEPTANCE_TAG = TAG_ACCEPTANCE
REASON_TAG = TAG_ACCEPTANCE_REASON
GENERATION_TAG = TAG_GENERATION
QUARANTINED = "quarantined"
PASSED = "passed"
#: Provider tag values are short (EC2: 256 characters).
TAG_VALUE_MAX = 255


# --------------------------------------------------------------------------------------------
# One node: tags, index, generation


def tag_node(driver: Any, node_id: str, tags: Mapping[str, str], *, policy: RetryPolicy = DEFAULT_POLICY) -> bool:
    """Tag through the driver's optional ``set_tags`` (:class:`~.contract.TaggingDriver`); False when it has none."""
    tagging = capability(driver, TaggingDriver)
    if tagging is None:
        return False
    policy.call(tagging.set_tags, node_id, dict(tags))
    return True


def quarantine(driver: Any, node_id: str, reason: str, *, policy: RetryPolicy = DEFAULT_POLICY) -> bool:
    """Tag the node ``metalfleet:acceptance=quarantined`` with why; False when the driver cannot tag."""
    return tag_node(driver, node_id, {ACCEPTANCE_TAG: QUARANTINED, REASON_TAG: reason[:TAG_VALUE_MAX]},
                    policy=policy)


def mark_passed(driver: Any, node_id: str, *, policy: RetryPolicy = DEFAULT_POLICY) -> bool:
    """Tag the node ``metalfleet:acceptance=passed``; False when the driver cannot tag."""
    return tag_node(driver, node_id, {ACCEPTANCE_TAG: PASSED}, policy=policy)


def is_quarantined(node: Node) -> bool:
    return node.tags.get(ACCEPTANCE_TAG) == QUARANTINED


def node_index(node: Node, default: int) -> int:
    """The node's index in its cluster (its ``metalfleet:index`` tag), ``default`` when it has none."""
    return tags_node_index(node.tags, default)


def node_generation(node: Node) -> int:
    """The generation the node was ordered as (its ``metalfleet:generation`` tag; 0 when it has none)."""
    try:
        return max(0, int(node.tags.get(GENERATION_TAG, 0)))
    except ValueError:
        return 0


def with_generation_tag(ns: NodeSpec) -> NodeSpec:
    """``ns`` carrying its generation as a tag when it is not the first (a first generation is untagged, as
    every node was before replacements were declared, so existing nodes keep their tags)."""
    if ns.generation == 0:
        return ns
    return replace(ns, tags={**ns.tags, GENERATION_TAG: str(ns.generation)})


def node_spec(spec: ClusterSpec, index: int, offering: str, generation: int = 0) -> NodeSpec:
    """The NodeSpec of node ``index`` in generation ``generation``, tagged with it."""
    return with_generation_tag(spec.node_spec(index, offering, generation))


# --------------------------------------------------------------------------------------------
# Outcomes


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

    @classmethod
    def of(cls, node: Node, reason: str, index: int, tagged: bool) -> QuarantinedNode:
        return cls(node.name or node.id, node.private_ip or "", reason, node.offering, node.id, index, tagged)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "reason": self.reason, "offering": self.offering,
                "node_id": self.node_id, "index": self.index, "tagged": self.tagged}


@dataclass(frozen=True)
class Replacement:
    """Node ``old_node_id`` (index ``index``) failed, was released, and ``new_node_id`` was ordered (generation
    ``generation``). In a :class:`GenerationPlan`, the replacement a declaration asks for (no new node yet)."""

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
class LifecycleOutcome:
    """What :func:`settle` did. Every node it was given or created is in exactly one of ``accepted``,
    ``quarantined`` or ``released``."""

    accepted: list[Node] = field(default_factory=list)
    quarantined: list[QuarantinedNode] = field(default_factory=list)
    replaced: list[Replacement] = field(default_factory=list)
    #: Ids of the nodes released (failed nodes that were replaced).
    released: list[str] = field(default_factory=list)
    #: index -> generation of the node now holding it, for every index that was replaced (the next
    #: order of that index with this generation returns the same node).
    generations: dict[int, int] = field(default_factory=dict)
    #: Driver calls that failed (a tag, a release, an order) with what was left as it was.
    errors: list[str] = field(default_factory=list)
    budget_left: int = 0

    @property
    def ok(self) -> bool:
        return not self.quarantined and not self.errors


#: Judges nodes: node id -> why it failed (None: it passed). ``round`` counts from 1 (2+: replacements).
#: A node missing from the answer counts as failed.
CheckFn = Callable[[Sequence[Node], int], Mapping[str, str | None]]
#: Makes replacement nodes ready to be checked (e.g. bootstraps them): node id -> why it failed, for those that
#: did. What it raises fails every node it was given.
PrepareFn = Callable[[Sequence[Node]], Mapping[str, str]]
OutcomeT = TypeVar("OutcomeT", bound=LifecycleOutcome)


def settle(
    driver: ComputeDriver,
    spec: ClusterSpec,
    nodes: Sequence[Node],
    check: CheckFn,
    outcome: OutcomeT,
    *,
    offering: Offering,
    prepare: PrepareFn | None = None,
    replace_failed: bool | None = None,
    generations: Mapping[int, int] | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    wait_timeout: float = 1800.0,
) -> OutcomeT:
    """Check ``nodes`` and act on the verdicts, filling ``outcome``.

    A failing node is quarantined (tagged). While replacements remain in the budget (``retry_budget`` when
    ``replace_failed``, by default the spec's ``acceptance.replace_failed``; one budget for the whole call) it
    is then released and replaced by the next generation of its index, which is waited for, made ready
    (``prepare``) and checked in turn. A node still failing when the budget is spent stays quarantined (kept,
    tagged, reported). Nodes that passed are tagged ``passed``. ``generations``: index -> generation of the
    current node, when not 0. Never raises for a node's failure or a driver call that fails (see ``errors``).
    """
    acc = spec.acceptance
    on = acc.replace_failed if replace_failed is None else replace_failed
    budget = acc.retry_budget if on else 0
    gens = dict(generations or {})
    positions = {n.id: node_index(n, i) for i, n in enumerate(nodes)}
    pending: list[Node] = list(nodes)
    prefailed: list[tuple[Node, str]] = []
    rounds = 0
    while pending or prefailed:
        rounds += 1
        failures, prefailed = prefailed, []
        if pending:
            failures += _judge(check, pending, rounds, outcome)
        pending = []
        fresh: list[Node] = []
        for node, reason in failures:
            index = positions.get(node.id, 0)
            tagged = _quarantine(driver, node, reason, policy, outcome)
            if budget <= 0:
                outcome.quarantined.append(QuarantinedNode.of(node, reason, index, tagged))
                continue
            try:
                policy.call(driver.release, node.id, wait=True, timeout=wait_timeout,
                            unsubscribe=spec.capacity.release_subscriptions)
            except MetalfleetError as exc:
                outcome.errors.append(f"release of failed node {node.id} failed ({exc}); it stays quarantined")
                outcome.quarantined.append(QuarantinedNode.of(node, reason, index, tagged))
                continue
            outcome.released.append(node.id)
            budget -= 1
            gen = gens.get(index, 0) + 1
            try:
                new = order_node(driver, node_spec(spec, index, offering.name, gen), policy=policy)
            except MetalfleetError as exc:
                outcome.replaced.append(Replacement(index, node.id, reason, gen, error=f"order failed: {exc}"))
                outcome.errors.append(f"replacement for index {index} (was {node.id}) could not be ordered: {exc}")
                continue
            gens[index] = outcome.generations[index] = gen
            positions[new.id] = index
            outcome.replaced.append(Replacement(index, node.id, reason, gen, new.id))
            fresh.append(new)
        if fresh:
            pending, prefailed = _ready(driver, fresh, prepare, policy, wait_timeout)
    outcome.budget_left = budget
    for node in outcome.accepted:
        try:
            mark_passed(driver, node.id, policy=policy)
        except MetalfleetError as exc:
            outcome.errors.append(f"tagging accepted node {node.id} failed: {exc}")
    return outcome


def _judge(check: CheckFn, pending: list[Node], rounds: int, outcome: LifecycleOutcome) -> list[tuple[Node, str]]:
    """Run the check: passed nodes go to ``outcome.accepted``; returns [(node, why)] for the rest."""
    verdicts = check(pending, rounds)
    left = {n.id: n for n in pending}
    failures: list[tuple[Node, str]] = []
    for node_id, reason in verdicts.items():
        node = left.pop(node_id, None)
        if node is None:
            continue
        if reason is None:
            outcome.accepted.append(node)
        else:
            failures.append((node, reason))
    return failures + [(n, "not checked") for n in left.values()]


def _quarantine(driver: Any, node: Node, reason: str, policy: RetryPolicy, outcome: LifecycleOutcome) -> bool:
    try:
        return quarantine(driver, node.id, reason, policy=policy)
    except MetalfleetError as exc:
        outcome.errors.append(f"tagging failed node {node.id} as quarantined failed: {exc}")
        return False


def _ready(driver: ComputeDriver, fresh: list[Node], prepare: PrepareFn | None, policy: RetryPolicy,
           timeout: float) -> tuple[list[Node], list[tuple[Node, str]]]:
    """Wait for new nodes to run and prepare them: (ready to check, [(node, why it failed)])."""
    try:
        running = policy.call(driver.wait, [n.id for n in fresh], NodeState.RUNNING, timeout=timeout)
    except MetalfleetError as exc:
        return [], [(n, f"replacement did not reach running: {exc}") for n in fresh]
    if prepare is None:
        return list(running), []
    try:
        bad = prepare(running)
    except Exception as exc:  # the new nodes must stay accounted for whatever the callable raised
        return [], [(n, f"not made ready: {type(exc).__name__}: {exc}") for n in running]
    return [n for n in running if n.id not in bad], [(n, bad[n.id]) for n in running if n.id in bad]


# --------------------------------------------------------------------------------------------
# Declared replacement (a stack's program)


@dataclass(frozen=True)
class GenerationPlan:
    """The generations a declaration of the cluster should carry, read back from the provider."""

    #: index -> generation to declare (indexes at 0 left out).
    generations: dict[int, int]
    #: Quarantined nodes this declaration replaces (the next generation of their index).
    replacing: tuple[Replacement, ...] = ()
    #: Quarantined nodes it keeps: replacement is off, or the budget is spent.
    kept: tuple[QuarantinedNode, ...] = ()
    #: Replacements left in ``acceptance.retry_budget`` after this declaration (0 when replacement is off).
    budget_left: int = 0
    #: Whether quarantined nodes are replaced (``acceptance.enabled`` and ``acceptance.replace_failed``).
    replace_failed: bool = False


def plan_generations(driver: ComputeDriver, spec: ClusterSpec, generations: Mapping[int, int] | None = None, *,
                     policy: RetryPolicy = DEFAULT_POLICY) -> GenerationPlan:
    """Each index's generation: the highest of ``generations`` (the declared base) and the live node's own
    (its tag), plus one for a quarantined node while the budget lasts (lowest indexes first).

    Read at every declaration, so an index replaced once keeps its generation on the next one; the budget
    counts the generations above the base over all indexes, so it bounds the replacements over the cluster's
    life, not per run. One ``list_nodes`` call."""
    base = dict(generations or {})
    live: dict[int, Node] = {}
    for node in policy.call(driver.list_nodes, spec.name):
        i = node_index(node, -1)
        if 0 <= i < spec.count and (i not in live or node_generation(node) > node_generation(live[i])):
            live[i] = node
    gens = {i: max(base.get(i, 0), node_generation(live[i]) if i in live else 0) for i in range(spec.count)}
    acc = spec.acceptance
    on = acc.enabled and acc.replace_failed
    left = max(0, acc.retry_budget - sum(g - base.get(i, 0) for i, g in gens.items())) if on else 0
    replacing: list[Replacement] = []
    kept: list[QuarantinedNode] = []
    for i, node in sorted(live.items()):
        if not is_quarantined(node):
            continue
        reason = node.tags.get(REASON_TAG, "")
        if left > 0:
            left -= 1
            gens[i] += 1
            replacing.append(Replacement(i, node.id, reason, gens[i]))
        else:
            kept.append(QuarantinedNode.of(node, reason, i, tagged=True))
    return GenerationPlan({i: g for i, g in gens.items() if g}, tuple(replacing), tuple(kept), left, on)
