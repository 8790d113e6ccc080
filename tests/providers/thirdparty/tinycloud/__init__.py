"""tinycloud: a made-up GPU cloud whose nodes live in one JSON file, written against metalfleet's public contract.

It is the proof that a platform is its own package plus one entry point: the driver below implements
:class:`metalfleet.providers.ComputeDriver`, and :data:`PROVIDER` tells metalfleet the rest (its billing, its
spec and tag rules, its catalogue, how the contract suite sets it up).
"""

from __future__ import annotations

import fcntl
import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from metalfleet.providers import (
    BillingModel,
    CapacityError,
    InvalidSpecError,
    Node,
    NodeSpec,
    NodeState,
    NotFoundError,
    Offering,
    OperationTimeout,
    RateLimitedError,
)
from metalfleet.providers.catalog import load_catalog
from metalfleet.providers.contract import OrderProgress
from metalfleet.providers.record import ContractSetup, DriverFacts, Guarantee, Problem, ProviderRecord

__all__ = ["PROVIDER", "TinyDriver"]

NAME = "tinycloud"
#: tinycloud puts at most this many nodes in one cluster, and takes tag keys of at most this many characters.
MAX_NODES, TAG_KEY_MAX = 16, 32


class TinyDriver:
    """Nodes in a JSON file (``state_path``; in memory, this driver's own, without it), RUNNING at the second
    look of a wait. ``throttle``: the fraction of calls refused as rate-limited; ``capacity``: live nodes."""

    name = NAME

    def __init__(self, region: str = "tiny-1", state_path: str | None = None, throttle: float = 0.0,
                 capacity: int | None = None, seed: int = 7) -> None:
        self.region = region
        self._path = Path(state_path) if state_path else None
        self._memory: dict[str, Any] = {"seq": 0, "nodes": {}}
        self._throttle = throttle
        self._capacity = capacity
        self._random = random.Random(seed)
        self._calls = 0

    def api_calls(self) -> int:
        return self._calls

    @contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        if self._path is None:
            yield self._memory
            return
        self._path.touch()
        with self._path.open("r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            text = f.read()
            state = json.loads(text) if text else {"seq": 0, "nodes": {}}
            yield state
            f.seek(0)
            f.truncate()
            f.write(json.dumps(state))

    def _call(self) -> None:
        self._calls += 1
        if self._throttle and self._random.random() < self._throttle:
            raise RateLimitedError("tinycloud is busy", provider=NAME, code="Busy")

    def _node(self, raw: Mapping[str, Any]) -> Node:
        return Node(id=raw["id"], provider=NAME, region=self.region, state=NodeState(raw["state"]),
                    offering=raw["offering"], zone=raw["zone"], private_ip=raw["ip"], name=raw["name"],
                    tags=raw["tags"])

    def offerings(self) -> list[Offering]:
        sold: list[Offering] = load_catalog().offerings(NAME, self.region)
        return sold

    def validate(self, spec: NodeSpec) -> None:
        names = [o.name for o in self.offerings()]
        if spec.offering not in names:
            raise InvalidSpecError(f"unknown offering {spec.offering!r} for tinycloud (sold: {', '.join(names)})",
                                   field="offering", value=spec.offering, provider=NAME)
        if not spec.image:
            raise InvalidSpecError("image is required", field="image", value=spec.image, provider=NAME)
        if spec.region != self.region:
            raise InvalidSpecError(f"region {spec.region!r} is not the driver's {self.region!r}", field="region",
                                   value=spec.region, provider=NAME)

    def order(self, spec: NodeSpec) -> Node:
        self.validate(spec)
        self._call()
        with self._state() as st:
            live = [r for r in st["nodes"].values() if r["state"] != "terminated"]
            mine = next((r for r in live if r["key"] == spec.idempotency_key), None)
            if mine is not None:
                return self._node(mine)
            if self._capacity is not None and len(live) >= self._capacity:
                raise CapacityError(f"tinycloud has no {spec.offering} left in {spec.zone}", zone=spec.zone,
                                    provider=NAME, code="NoCapacity")
            st["seq"] += 1
            raw = {"id": f"tc-{st['seq']}", "key": spec.idempotency_key, "state": "pending",
                   "offering": spec.offering, "zone": spec.zone or f"{self.region}a", "ip": f"10.9.0.{st['seq']}",
                   "name": spec.name, "tags": dict(spec.tags)}
            st["nodes"][raw["id"]] = raw
            return self._node(raw)

    def _read(self, node_id: str, st: Mapping[str, Any]) -> dict[str, Any]:
        raw = st["nodes"].get(node_id)
        if raw is None:
            raise NotFoundError(f"tinycloud has no node {node_id}", provider=NAME, code="NoSuchNode")
        return dict(raw)

    def get(self, node_id: str) -> Node:
        self._call()
        with self._state() as st:
            return self._node(self._read(node_id, st))

    def list_nodes(self, cluster: str) -> list[Node]:
        self._call()
        with self._state() as st:
            return [self._node(r) for r in st["nodes"].values()
                    if r["state"] != "terminated" and r["tags"].get("metalfleet:cluster") == cluster]

    def wait(self, node_ids: Sequence[str], state: NodeState = NodeState.RUNNING, *, timeout: float = 1800.0,
             poll: float = 0.05, progress: OrderProgress | None = None) -> list[Node]:
        deadline = time.monotonic() + timeout
        while True:
            self._call()
            with self._state() as st:  # a node boots by the second look
                for i in node_ids:
                    raw = st["nodes"].get(i)
                    if raw is not None and raw["state"] == "pending":
                        raw["looks"] = raw.get("looks", 0) + 1
                        raw["state"] = "running" if raw["looks"] >= 2 else "pending"
                nodes = [self._node(self._read(i, st)) for i in node_ids]
            if progress:
                progress(nodes)
            if all(n.state == state for n in nodes):
                return nodes
            if time.monotonic() > deadline:
                raise OperationTimeout(f"tinycloud nodes not {state.value} after {timeout:.0f}s", provider=NAME)
            time.sleep(poll)

    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        self._call()
        with self._state() as st:
            self._read(node_id, st)
            st["nodes"][node_id]["state"] = "terminated"


def spec_problems(spec: Any) -> list[Problem]:
    """A cluster spec's problems as tinycloud sees them: at most :data:`MAX_NODES` nodes."""
    if spec.count > MAX_NODES:
        return [("count", spec.count, f"tinycloud puts at most {MAX_NODES} nodes in a cluster")]
    return []


def tag_problems(tags: Mapping[str, str], *, public_ip: bool) -> list[Problem]:
    return [(f"tags.{k}", k, f"tag key {k!r} is longer than tinycloud's {TAG_KEY_MAX} characters")
            for k in tags if len(k) > TAG_KEY_MAX]


def contract_setup(tmp: Path, *, throttle: float, capacity: int | None, seed: int) -> ContractSetup:
    """The contract suite's tinycloud: its nodes in the test's folder."""
    return ContractSetup(
        settings={"region": "tiny-1", "state_path": str(tmp / "tinycloud.json"), "throttle": throttle,
                  "capacity": capacity, "seed": seed},
        spec={"region": "tiny-1", "zone": "tiny-1a", "offering": "tiny.8xh100", "image": "tiny-os-1"})


#: tinycloud as metalfleet sees it (registered in this package's pyproject.toml, group ``metalfleet.providers``).
PROVIDER = ProviderRecord(name=NAME, driver=TinyDriver, billing=(BillingModel.ON_DEMAND,), spec_rules=spec_problems,
                          tag_rules=tag_problems, catalogue="tinycloud:catalog.json", contract=contract_setup,
                          policy_facts=DriverFacts(metadata_tokens=Guarantee(
                              True, "tinycloud nodes answer metadata only with a session token",
                              "tinycloud TinyDriver.order")))
