"""Cluster-level operations over one driver: resolve the offering, validate, fan out, wait, release.

The fan-out is why ordering 64 nodes takes about as long as ordering one: every node's order is
an independent, idempotent call, so they run side by side instead of queueing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from .contract import (
    ClusterResourcesDriver,
    ComputeDriver,
    OrderProgress,
    SubscriptionDriver,
    capability,
    refuse_release,
)
from .errors import ConflictError, InvalidSpecError, MetalfleetError, NotFoundError, SubscriptionError
from .models import Node, NodeSpec, NodeState, Offering
from .retry import DEFAULT_POLICY, RetryPolicy
from .runstate import cluster_lock, forget_leftovers, leftovers, record_leftovers
from .spec import ClusterSpec

__all__ = [
    "OrderFailed",
    "check_release",
    "node_specs_for",
    "order_cluster",
    "order_node",
    "release_cluster",
    "release_cluster_resources",
    "release_nodes",
    "resolve_offering",
]

#: How many replacement generations one node index may go through before we stop and ask a human.
MAX_GENERATIONS = 32


class OrderFailed(MetalfleetError):
    """A cluster order failed; ``cause`` is the first error (a node's order, or the wait), ``released`` what this
    order made and rolled back, ``kept`` what it made and left live (rollback off, subscriptions not opted in to
    end, or releases that failed: ``leftovers``, id -> why, also written to the leftovers file ``metalfleet release``
    reads), ``existing`` the cluster's nodes from before this order, which a failure never touches."""

    def __init__(self, message: str, *, cause: MetalfleetError, released: Sequence[str], kept: Sequence[str],
                 existing: Sequence[str] = (), leftovers: dict[str, str] | None = None):
        super().__init__(message, provider=cause.provider, code=cause.code, request_id=cause.request_id)
        self.cause = cause
        self.released = list(released)
        self.kept = list(kept)
        self.existing = list(existing)
        self.leftovers = dict(leftovers or {})


def resolve_offering(driver: ComputeDriver, spec: ClusterSpec, *, policy: RetryPolicy = DEFAULT_POLICY) -> Offering:
    """The offering named in the spec, or the cheapest one meeting its requirements (the offerings read is retried
    under ``policy``: a throttle on the first call of a run must not end it)."""
    offerings = policy.call(driver.offerings)
    if spec.offering:
        for o in offerings:
            if o.name == spec.offering:
                return o
        names = ", ".join(sorted(o.name for o in offerings))
        raise InvalidSpecError(f"offering {spec.offering!r} is not sold by {spec.provider} (known: {names})",
                               field="offering", value=spec.offering, provider=spec.provider)
    req = spec.requirements
    assert req is not None
    fits = [
        o for o in offerings
        if (req.gpu is None or o.gpu_model.lower() == req.gpu.lower())
        and o.gpu_count >= req.min_gpus
        and o.gpu_memory_gib >= req.min_gpu_memory_gib
        and (req.fabric is None or o.fabric == req.fabric)
        and (req.bare_metal is None or o.bare_metal == req.bare_metal)
    ]
    if not fits:
        raise InvalidSpecError(f"no {spec.provider} offering meets requirements {req.model_dump(exclude_none=True)}",
                               field="requirements", value=req.model_dump(exclude_none=True),
                               provider=spec.provider)

    def cost(o: Offering) -> float:
        p = o.price(spec.capacity.billing) or o.price()
        return p.hourly if p else float("inf")

    return min(fits, key=lambda o: (cost(o), o.name))


def node_specs_for(driver: ComputeDriver, spec: ClusterSpec, generations: dict[int, int] | None = None,
         offering: Offering | None = None, *, policy: RetryPolicy = DEFAULT_POLICY) -> list[NodeSpec]:
    """Node specs for the whole cluster, each validated offline: a bad spec fails before any order call."""
    offering = offering or resolve_offering(driver, spec, policy=policy)
    specs = [spec.node_spec(i, offering.name, (generations or {}).get(i, 0)) for i in range(spec.count)]
    for ns in specs:
        driver.validate(ns)
    return specs


def order_node(driver: ComputeDriver, spec: NodeSpec, *, policy: RetryPolicy = DEFAULT_POLICY) -> Node:
    """Order one node idempotently, stepping past generations whose node is already gone.

    The idempotency key for (cluster, index, generation) keeps naming the node it first bought,
    even after that node was terminated out of band. Replacing such a node must not resurrect the
    dead one, so we walk generations until the key names a live node or nothing yet. The walk is
    deterministic, so a re-run after a crash lands on the same generation and buys nothing twice.
    """
    for generation in range(spec.generation, spec.generation + MAX_GENERATIONS):
        ns = replace(spec, generation=generation)
        node = policy.call(driver.order, ns)
        if not node.state.is_gone:
            return node
    raise ConflictError(f"node {spec.name}: {MAX_GENERATIONS} generations are all terminated; "
                        "check what keeps terminating it", provider=driver.name)


@dataclass
class _Outcome:
    spec: NodeSpec
    node: Node | None = None
    error: MetalfleetError | None = None


def order_cluster(
    driver: ComputeDriver,
    specs: Sequence[NodeSpec],
    *,
    max_workers: int = 64,
    wait: bool = True,
    timeout: float = 1800.0,
    progress: OrderProgress | None = None,
    on_ordered: Callable[[Node], None] | None = None,
    policy: RetryPolicy = DEFAULT_POLICY,
    rollback: bool = True,
    lock: bool = True,
) -> list[Node]:
    """Order every node in parallel (idempotently), then wait for them all to run.

    All or nothing by default: a partial GPU cluster in a placement group bills for nothing useful, so when any
    node fails for a non-transient reason (capacity, quota), or the wait for them fails, the nodes *this order
    made* are released (each under ``policy``) and :class:`OrderFailed` says which. Nodes the cluster had before
    the order (an earlier run's, a scale-up's first half) are never released by a failure. A node whose release
    fails is listed by id in the error and in the leftovers file that :func:`release_cluster` reads.
    ``rollback=False`` keeps this order's nodes, listed in ``kept``.

    ``lock``: hold the cluster's lock on this machine (:func:`~.runstate.cluster_lock`) for the whole order, so a
    second run of the same spec waits for the first, then finds its nodes and buys nothing.
    """
    if not specs:
        return []
    cluster = specs[0].cluster
    guard = cluster_lock(driver, cluster, timeout=policy.deadline) if lock else contextlib.nullcontext()
    with guard:
        return _order(driver, specs, max_workers=max_workers, wait=wait, timeout=timeout, progress=progress,
                      on_ordered=on_ordered, policy=policy, rollback=rollback)


def _order(driver: ComputeDriver, specs: Sequence[NodeSpec], *, max_workers: int, wait: bool, timeout: float,
           progress: OrderProgress | None, on_ordered: Callable[[Node], None] | None, policy: RetryPolicy,
           rollback: bool) -> list[Node]:
    cluster = specs[0].cluster
    before = [n.id for n in policy.call(driver.list_nodes, cluster)]

    def one(ns: NodeSpec) -> _Outcome:
        try:
            node = order_node(driver, ns, policy=policy)
        except MetalfleetError as exc:
            return _Outcome(ns, error=exc)
        if on_ordered:
            on_ordered(node)
        return _Outcome(ns, node=node)

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(specs)))) as pool:
        outcomes = list(pool.map(one, specs))
    failed = [o for o in outcomes if o.error]
    made = [o.node for o in outcomes if o.node is not None]
    if failed:
        first = failed[0].error
        assert first is not None
        summary = "; ".join(f"{o.spec.name}: {o.error}" for o in failed[:5])
        more = f" (+{len(failed) - 5} more)" if len(failed) > 5 else ""
        raise _roll_back(driver, specs, before, made, f"{len(failed)} of {len(specs)} node(s) failed: {summary}{more}",
                         first, policy=policy, rollback=rollback, max_workers=max_workers, timeout=timeout)
    if not wait:
        return made
    try:
        return policy.call(driver.wait, [n.id for n in made], NodeState.RUNNING, timeout=timeout, progress=progress)
    except MetalfleetError as exc:
        raise _roll_back(driver, specs, before, made, f"the wait for {len(made)} node(s) to run failed: {exc}", exc,
                         policy=policy, rollback=rollback, max_workers=max_workers, timeout=timeout) from exc


def _roll_back(driver: ComputeDriver, specs: Sequence[NodeSpec], before: Sequence[str], made: Sequence[Node],
               summary: str, cause: MetalfleetError, *, policy: RetryPolicy, rollback: bool, max_workers: int,
               timeout: float) -> OrderFailed:
    """Release what this order made (never what existed before it) and build the error that says what happened."""
    cluster = specs[0].cluster
    existing = set(before)
    ours = list(dict.fromkeys(n.id for n in made if n.id not in existing))
    notes: list[str] = []
    try:  # a node whose create answer was lost is not in `made`, but the provider lists it under the cluster
        ours += [n.id for n in policy.call(driver.list_nodes, cluster) if n.id not in existing and n.id not in ours]
    except MetalfleetError as exc:
        notes.append(f"listing the cluster's nodes to find any whose create answer was lost failed ({exc})")
    released: list[str] = []
    left: dict[str, str] = {}
    kept: list[str] = []
    if not rollback:
        kept = ours
    elif ours:
        unsubscribe = specs[0].release_subscriptions
        try:
            check_release(driver, ours, unsubscribe=unsubscribe, policy=policy)
        except SubscriptionError as exc:  # subscriptions end only where the spec opted in; the error says so
            kept = ours
            notes.append(f"the subscription node(s) are kept: {exc.message}")
        except MetalfleetError as exc:
            kept = ours
            left = {i: f"could not read whether it is a subscription: {exc}" for i in ours}
        else:
            def one(node_id: str) -> str | None:
                try:
                    policy.call(driver.release, node_id, wait=True, timeout=timeout, unsubscribe=unsubscribe)
                    return None
                except MetalfleetError as exc:
                    return str(exc)

            with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(ours)))) as pool:
                for node_id, why in zip(ours, pool.map(one, ours), strict=True):
                    if why is None:
                        released.append(node_id)
                    else:
                        left[node_id] = f"release failed: {why}"
                        kept.append(node_id)
    if rollback and not existing and not kept:  # what the order made for the cluster goes with its last node
        try:
            release_cluster_resources(driver, cluster, policy=policy)
        except MetalfleetError as exc:
            notes.append(f"the cluster's shared resources are left (metalfleet release removes them): {exc}")
    path = record_leftovers(driver, cluster, left) if left else None
    parts = [summary]
    if released:
        parts.append(f"released {len(released)} node(s) this order made")
    elif not ours:
        parts.append("this order made no node")
    if left:
        parts.append(f"could not release {len(left)} node(s) this order made: {', '.join(sorted(left))} (listed in "
                     f"{path}; `metalfleet release` on the spec releases them)")
    elif kept:
        parts.append(f"kept the {len(kept)} node(s) this order made: {', '.join(kept)}")
    if existing:
        parts.append(f"the {len(existing)} node(s) the cluster had before this order are untouched")
    return OrderFailed("; ".join(parts + notes), cause=cause, released=released, kept=kept, existing=before,
                       leftovers=left)


def check_release(driver: ComputeDriver, node_ids: Sequence[str], *, unsubscribe: bool = False,
                  policy: RetryPolicy = DEFAULT_POLICY) -> None:
    """Refuse, before anything is released, to release subscription nodes nobody opted in to end early: one
    :class:`SubscriptionError` naming every such node, its expiry and what ending it refunds or costs."""
    selling = capability(driver, SubscriptionDriver)
    if unsubscribe or not node_ids or selling is None:
        return
    subs = policy.call(selling.subscriptions, list(node_ids))
    if subs:
        raise refuse_release(driver.name, subs)


def release_nodes(driver: ComputeDriver, node_ids: Sequence[str], *, policy: RetryPolicy = DEFAULT_POLICY,
                  max_workers: int = 64, wait: bool = True, unsubscribe: bool = False) -> None:
    """Release ``node_ids`` side by side (each retried under ``policy``). Subscription nodes only with
    ``unsubscribe``: without it, nothing is released when any of them is one (:func:`check_release`)."""
    if not node_ids:
        return
    check_release(driver, node_ids, unsubscribe=unsubscribe, policy=policy)

    def one(node_id: str) -> None:
        policy.call(driver.release, node_id, wait=wait, unsubscribe=unsubscribe)

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(node_ids)))) as pool:
        list(pool.map(one, node_ids))


def release_cluster_resources(driver: ComputeDriver, cluster: str, *,
                              policy: RetryPolicy = DEFAULT_POLICY) -> list[str]:
    """Delete what the driver made for the whole cluster (a :class:`ClusterResourcesDriver`: e.g. AWS's
    security group and placement group) once no node of it is left; [] for drivers that make none."""
    shared = capability(driver, ClusterResourcesDriver)
    if shared is None:
        return []
    deleted: list[str] = policy.call(shared.release_cluster_resources, cluster)
    return deleted


def release_cluster(driver: ComputeDriver, cluster: str, *, policy: RetryPolicy = DEFAULT_POLICY,
                    max_workers: int = 64, unsubscribe: bool = False, lock: bool = True) -> list[str]:
    """Release every live node tagged with ``cluster`` and every node a failed order of it left (the leftovers
    file), then what the driver made for the cluster as a whole (:func:`release_cluster_resources`): nothing
    metalfleet created for it is left. Returns the released nodes' ids. Subscription nodes are ended early only
    with ``unsubscribe``; without it a cluster that has any is refused whole (:class:`SubscriptionError`), before
    anything is released. ``lock``: hold the cluster's lock on this machine (an order of it waits)."""
    guard = cluster_lock(driver, cluster, timeout=policy.deadline) if lock else contextlib.nullcontext()
    with guard:
        ids = [n.id for n in policy.call(driver.list_nodes, cluster)]
        recorded = [i for i in leftovers(driver, cluster) if i not in ids]
        gone: list[str] = []
        for node_id in recorded:
            try:
                node = policy.call(driver.get, node_id)
            except NotFoundError:
                gone.append(node_id)
                continue
            if node.state.is_gone:
                gone.append(node_id)
            else:
                ids.append(node_id)
        forget_leftovers(driver, cluster, gone)
        release_nodes(driver, ids, policy=policy, max_workers=max_workers, unsubscribe=unsubscribe)
        forget_leftovers(driver, cluster, ids)
        release_cluster_resources(driver, cluster, policy=policy)
        return ids
