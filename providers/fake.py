"""An in-memory (optionally file-backed) driver that passes the same contract suite as real ones.

File-backed state lets several processes share one fake cloud: a Pulumi dynamic provider runs in
its own process, and the contract suite kills an ordering process mid-order and runs it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import random
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .catalog import load_catalog
from .contract import OrderProgress, Subscription, refuse_release
from .errors import (
    CapacityError,
    InvalidSpecError,
    NotFoundError,
    OperationTimeout,
    RateLimitedError,
)
from .models import BillingModel, Node, NodeSpec, NodeState, Offering
from .record import DriverFacts, ProviderRecord
from .tags import TAG_CLUSTER

__all__ = ["PROVIDER", "FakeDriver"]

#: Billing models the fake sells for a term, and the term's length in days.
TERMS = {BillingModel.MONTHLY: 30, BillingModel.RESERVED_1Y: 365, BillingModel.RESERVED_3Y: 3 * 365}


class FakeDriver:
    """A fake cloud: nodes become RUNNING after ``boot_seconds``.

    ``capacity`` bounds live nodes (a CapacityError past it); ``throttle`` is the fraction of calls
    answered with a RateLimitedError, to exercise the retry policy. ``addresses``: private IPs handed
    to nodes in order of creation (the Nth node ever ordered in this state gets the Nth address;
    past the list, the default 10.0.x.y), so tests can point nodes at simulated hosts; a spec's
    ``extra["address"]`` wins over both. Implements the optional ``set_tags`` capability, and sells subscriptions
    (``monthly``, ``reserved_1y``, ``reserved_3y``: a node with an expiry date, released only with
    ``unsubscribe``, :class:`~metalfleet.providers.contract.SubscriptionDriver`).
    """

    name = "fake"

    def __init__(
        self,
        region: str = "local-1",
        state_path: str | os.PathLike[str] | None = None,
        boot_seconds: float = 0.0,
        capacity: int | None = None,
        throttle: float = 0.0,
        seed: int | None = None,
        addresses: Sequence[str] | None = None,
    ) -> None:
        self.region = region
        self._addresses = [str(a) for a in addresses or ()]
        self._path = Path(state_path) if state_path else None
        self._boot = float(boot_seconds)
        self._capacity = capacity
        self._throttle = float(throttle)
        self._rng = random.Random(seed)
        self._lock = threading.RLock()
        self._mem: dict[str, Any] = {"nodes": {}, "keys": {}, "seq": 0}
        self.calls = itertools.count()

    # -- state ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            if self._path is None:
                yield self._mem
                return
            self._path.parent.mkdir(parents=True, exist_ok=True)
            with open(self._path, "a+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                fh.seek(0)
                raw = fh.read()
                state = json.loads(raw) if raw else {"nodes": {}, "keys": {}, "seq": 0}
                yield state
                fh.seek(0)
                fh.truncate()
                json.dump(state, fh)
                fh.flush()
                os.fsync(fh.fileno())

    def _maybe_throttle(self) -> None:
        next(self.calls)
        if self._throttle and self._rng.random() < self._throttle:
            raise RateLimitedError("fake throttling", provider=self.name, code="Throttling")

    def _node(self, raw: dict[str, Any]) -> Node:
        state = NodeState(raw["state"])
        if state == NodeState.PENDING and time.time() >= raw["ready_at"]:
            state = NodeState.RUNNING
        return Node(id=raw["id"], provider=self.name, region=self.region, zone=raw["zone"], state=state,
                    offering=raw["offering"], private_ip=raw["private_ip"], name=raw["name"],
                    tags=raw["tags"], extra={"idempotency_key": raw["key"],
                                             **({"subscription": raw["subscription"]} if raw.get("subscription")
                                                else {})})

    def _subscription(self, raw: dict[str, Any]) -> Subscription | None:
        sub = raw.get("subscription")
        if not sub or raw["state"] == "terminated":
            return None
        return Subscription(node_id=raw["id"], charge_type=sub["billing"], expires_at=sub["expires_at"],
                            refund=f"refund {sub['refund']:.2f} USD (the fake's unused days)", name=raw["name"],
                            how="the fake cloud ends them at once")

    # -- contract ------------------------------------------------------------------------------
    def offerings(self) -> list[Offering]:
        """Exactly the catalogue's fake offerings (facts and prices from providers/data/catalog.json)."""
        return load_catalog().offerings(self.name, self.region)

    def validate(self, spec: NodeSpec) -> None:
        if spec.offering not in {e.name for e in load_catalog().of(self.name, orderable=True)}:
            raise InvalidSpecError(f"unknown offering {spec.offering!r} for provider fake",
                                   field="offering", value=spec.offering, provider=self.name)
        if not spec.image:
            raise InvalidSpecError("image is required", field="image", value=spec.image, provider=self.name)

    def order(self, spec: NodeSpec) -> Node:
        self.validate(spec)
        self._maybe_throttle()
        key = spec.idempotency_key
        with self._state() as st:
            if key in st["keys"]:
                return self._node(st["nodes"][st["keys"][key]])
            live = sum(1 for n in st["nodes"].values() if n["state"] not in ("terminated",))
            if self._capacity is not None and live >= self._capacity:
                raise CapacityError(f"no capacity for {spec.offering} in {spec.zone or self.region}",
                                    zone=spec.zone, provider=self.name, code="InsufficientCapacity")
            st["seq"] += 1
            seq = st["seq"]
            node_id = f"fake-{seq:06d}"
            address = spec.extra.get("address") or (
                self._addresses[seq - 1] if seq <= len(self._addresses) else f"10.0.{seq // 250}.{seq % 250 + 1}")
            raw = {"id": node_id, "key": key, "state": "pending", "ready_at": time.time() + self._boot,
                   "zone": spec.zone or f"{self.region}a", "offering": spec.offering,
                   "private_ip": str(address), "name": spec.name,
                   "tags": dict(spec.tags)}
            if spec.billing in TERMS:
                days = TERMS[spec.billing]
                ends = datetime.now(UTC) + timedelta(days=days)
                raw["subscription"] = {"billing": spec.billing.value, "expires_at": ends.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                       "refund": round(days * 24 * 0.5, 2)}
            st["nodes"][node_id] = raw
            st["keys"][key] = node_id
            return self._node(raw)

    def get(self, node_id: str) -> Node:
        self._maybe_throttle()
        with self._state() as st:
            raw = st["nodes"].get(node_id)
            if raw is None:
                raise NotFoundError(f"node {node_id} not found", provider=self.name, code="NotFound")
            return self._node(raw)

    def list_nodes(self, cluster: str) -> list[Node]:
        self._maybe_throttle()
        with self._state() as st:
            return [self._node(r) for r in st["nodes"].values()
                    if r["tags"].get(TAG_CLUSTER) == cluster and r["state"] != "terminated"]

    def wait(self, node_ids: Sequence[str], state: NodeState = NodeState.RUNNING, *, timeout: float = 1800.0,
             poll: float = 0.05, progress: OrderProgress | None = None) -> list[Node]:
        deadline = time.monotonic() + timeout
        while True:
            nodes = [self.get(i) for i in node_ids]
            if progress:
                progress(nodes)
            if all(n.state == state for n in nodes):
                return nodes
            if time.monotonic() > deadline:
                waiting = [n.id for n in nodes if n.state != state]
                raise OperationTimeout(f"nodes {waiting} not {state.value} after {timeout:.0f}s", provider=self.name)
            time.sleep(poll)

    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        self._maybe_throttle()
        with self._state() as st:
            raw = st["nodes"].get(node_id)
            if raw is None:
                raise NotFoundError(f"node {node_id} not found", provider=self.name, code="NotFound")
            sub = self._subscription(raw)
            if sub is not None and not unsubscribe:
                raise refuse_release(self.name, [sub])
            raw["state"] = "terminated"

    def subscriptions(self, node_ids: Sequence[str]) -> list[Subscription]:
        """The live subscription nodes among ``node_ids``."""
        self._maybe_throttle()
        with self._state() as st:
            subs = [self._subscription(st["nodes"][i]) for i in node_ids if i in st["nodes"]]
        return [s for s in subs if s is not None]

    # -- optional capabilities -----------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite ``tags`` on a node (others are kept); NotFoundError for an unknown node."""
        self._maybe_throttle()
        with self._state() as st:
            raw = st["nodes"].get(node_id)
            if raw is None:
                raise NotFoundError(f"node {node_id} not found", provider=self.name, code="NotFound")
            raw["tags"].update({str(k): str(v) for k, v in tags.items()})

    # -- test affordances (what a console does out of band) ------------------------------------
    def terminate_out_of_band(self, node_id: str) -> None:
        with self._state() as st:
            st["nodes"][node_id]["state"] = "terminated"


#: The fake platform as the registry, the spec and the catalogue see it: it sells every billing model.
PROVIDER = ProviderRecord(name="fake", driver=FakeDriver, catalogue="metalfleet.providers:data/catalog.json",
                          default_image="img-fake", policy_facts=DriverFacts())
