"""Cluster-level operations over one driver: resolve the offering, validate, fan out, wait, release.

The fan-out is why ordering 64 nodes takes about as long as ordering one: every node's order is
an independent, idempotent call, so they run side by side instead of queueing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from .contract import ClusterResourcesDriver, ComputeDriver, OrderProgress, SubscriptionDriver, refuse_release
from .errors import ConflictError, InvalidSpecError, MetalfleetError, SubscriptionError
from .models import Node, NodeSpec, NodeState, Offering
from .retry import DEFAULT_POLICY, RetryPolicy
from .spec import ClusterSpec

__all__ = ["OrderFailed", "check_release", "order_cluster", "order_node", "plan", "release_cluster",
           "release_cluster_resources", "release_nodes", "resolve_offering"]

#: How many replacement generations one node index may go through before we stop and ask a human.
MAX_GENERATIONS = 32


class OrderFailed(MetalfleetError):
    """A cluster order failed; ``cause`` is the first node's error, ``released`` what was rolled back."""

    def __init__(self, message: str, *, cause: MetalfleetError, released: Sequence[str], kept: Sequence[str]):
        super().__init__(message, provider=cause.provider, code=cause.code, request_id=cause.request_id)
        self.cause = cause
        self.released = list(released)
        self.kept = list(kept)


def resolve_offering(driver: ComputeDriver, spec: ClusterSpec) -> Offering:
    """The offering named in the spec, or the cheapest one meeting its requirements."""
    offerings = driver.offerings()
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


def plan(driver: ComputeDriver, spec: ClusterSpec, generations: dict[int, int] | None = None,
         offering: Offering | None = None) -> list[NodeSpec]:
    """Node specs for the whole cluster, each validated offline: a bad spec fails before any order call."""
    offering = offering or resolve_offering(driver, spec)
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
) -> list[Node]:
    """Order every node in parallel (idempotently), then wait for them all to run.

    All or nothing by default: a partial GPU cluster in a placement group bills for nothing useful,
    so when any node fails for a non-transient reason (capacity, quota) the nodes of this order are
    released and :class:`OrderFailed` says which. ``rollback=False`` keeps them, listed in ``kept``.
    """
    if not specs:
        return []

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
    made = [o.node for o in outcomes if o.node]
    if failed:
        first = failed[0]
        assert first.error is not None
        released: list[str] = []
        left = ""
        if rollback and made:
            try:  # subscriptions are ended only where the spec opted in; otherwise kept, and the error says so
                release_nodes(driver, [n.id for n in made], policy=policy, max_workers=max_workers,
                              unsubscribe=specs[0].release_subscriptions)
                released = [n.id for n in made]
            except SubscriptionError as exc:
                left = f"; the subscription node(s) are kept: {exc.message}"
        if rollback:  # what the order made for the cluster goes too, unless other nodes of it still use it
            try:
                release_cluster_resources(driver, specs[0].cluster, policy=policy)
            except MetalfleetError as exc:
                left = f"; the cluster's shared resources are left (metalfleet release removes them): {exc}"
        summary = "; ".join(f"{o.spec.name}: {o.error}" for o in failed[:5])
        more = f" (+{len(failed) - 5} more)" if len(failed) > 5 else ""
        action = f"released {len(released)} node(s) of this order" if released else (
            f"kept {len(made)} node(s)" if made else "no node was created")
        raise OrderFailed(f"{len(failed)} of {len(specs)} node(s) failed: {summary}{more}; {action}{left}",
                          cause=first.error, released=released, kept=[] if released else [n.id for n in made])
    nodes = [n for n in made if n is not None]
    if not wait:
        return nodes
    return policy.call(driver.wait, [n.id for n in nodes], NodeState.RUNNING, timeout=timeout, progress=progress)


def check_release(driver: ComputeDriver, node_ids: Sequence[str], *, unsubscribe: bool = False,
                  policy: RetryPolicy = DEFAULT_POLICY) -> None:
    """Refuse, before anything is released, to release subscription nodes nobody opted in to end early: one
    :class:`SubscriptionError` naming every such node, its expiry and what ending it refunds or costs."""
    if unsubscribe or not node_ids or not isinstance(driver, SubscriptionDriver):
        return
    subs = policy.call(driver.subscriptions, list(node_ids))
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
    if not isinstance(driver, ClusterResourcesDriver):
        return []
    deleted: list[str] = policy.call(driver.release_cluster_resources, cluster)
    return deleted


def release_cluster(driver: ComputeDriver, cluster: str, *, policy: RetryPolicy = DEFAULT_POLICY,
                    max_workers: int = 64, unsubscribe: bool = False) -> list[str]:
    """Release every live node tagged with ``cluster``, then what the driver made for the cluster as a
    whole (:func:`release_cluster_resources`): nothing metalfleet created for it is left. Returns the
    released nodes' ids. Subscription nodes are ended early only with ``unsubscribe``; without it a cluster
    that has any is refused whole (:class:`SubscriptionError`), before anything is released."""
    nodes = policy.call(driver.list_nodes, cluster)
    ids = [n.id for n in nodes]
    release_nodes(driver, ids, policy=policy, max_workers=max_workers, unsubscribe=unsubscribe)
    release_cluster_resources(driver, cluster, policy=policy)
    return ids
