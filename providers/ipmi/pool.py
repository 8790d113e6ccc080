"""The claim store: which pool host each node holds, so ordering is claiming and releasing is returning.

Everything a claim changes happens in one :meth:`ClaimStore.transaction`: the state is read, changed and
written back while the store is held, so two orders (threads or processes) never claim one host, and a
re-run with the same idempotency key finds the claim the first run made. The default store is a JSON file
under an exclusive ``flock`` (:class:`FileClaimStore`); a team's store (the Pulumi state of a shared stack,
etcd, Consul) implements the same one method with its own compare-and-swap.

The state (plain JSON, no credentials)::

    {"version": 1,
     "hosts": {"gpu-01": "ipmi-gpu-01-3f2a9c1e"},          # host -> the node holding it
     "nodes": {"ipmi-gpu-01-3f2a9c1e": {"host": "gpu-01", "key": "mf-...", "state": "claimed", "tags": {...}}},
     "keys":  {"mf-...": "ipmi-gpu-01-3f2a9c1e"},           # idempotency key -> node, kept after release
     "quarantine": {"gpu-03": "SEL: power supply failure"}} # hosts never claimed again until cleared

A node id names the host and the claim (``ipmi-<host>-<hash of the key>``): a host claimed again later is
a new node, and the released one stays gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CLAIMED", "RELEASED", "ClaimStore", "FileClaimStore", "claim_host", "drop_claim", "empty_state",
           "live_nodes", "node_id_for", "release_claim"]

CLAIMED = "claimed"
RELEASED = "released"


def empty_state() -> dict[str, Any]:
    return {"version": 1, "hosts": {}, "nodes": {}, "keys": {}, "quarantine": {}}


class ClaimStore(Protocol):
    """Where claims live. ``transaction`` yields the whole state; what the block leaves in it is written
    back atomically when the block ends without an exception (and discarded when it raises)."""

    def transaction(self) -> contextlib.AbstractContextManager[dict[str, Any]]: ...


class FileClaimStore:
    """Claims in a JSON file, held under an exclusive ``flock`` for each transaction (processes on one
    machine, or on a file system with working POSIX locks). Written to a temporary file and renamed, so a
    killed process never leaves a half-written store."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"FileClaimStore({str(self.path)!r})"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with self._lock, open(lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                raw = self.path.read_text() if self.path.exists() else ""
                state = json.loads(raw) if raw.strip() else empty_state()
                for k, v in empty_state().items():
                    state.setdefault(k, v)
                yield state
                tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
                with open(tmp, "w") as fh:
                    json.dump(state, fh, indent=1, sort_keys=True)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def node_id_for(host: str, key: str) -> str:
    return f"ipmi-{host}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def claim_host(state: dict[str, Any], *, key: str, candidates: Sequence[str], record: Mapping[str, Any]
               ) -> dict[str, Any] | None:
    """The node ``key`` holds (or held), else a new claim of the first free candidate; None when every
    candidate is taken or quarantined. ``record``: what to keep on the node (cluster, name, tags...)."""
    known = state["keys"].get(key)
    if known is not None and known in state["nodes"]:
        return dict(state["nodes"][known])
    for host in candidates:
        if host in state["hosts"] or host in state["quarantine"]:
            continue
        node_id = node_id_for(host, key)
        node = {**record, "id": node_id, "host": host, "key": key, "state": CLAIMED, "claimed_at": time.time()}
        state["nodes"][node_id] = node
        state["hosts"][host] = node_id
        state["keys"][key] = node_id
        return dict(node)
    return None


def release_claim(state: dict[str, Any], node_id: str) -> dict[str, Any] | None:
    """Mark the node released and its host free again; the node record stays (as gone). None: unknown."""
    node = state["nodes"].get(node_id)
    if node is None:
        return None
    if node["state"] != RELEASED:
        node["state"] = RELEASED
        node["released_at"] = time.time()
        if state["hosts"].get(node["host"]) == node_id:
            del state["hosts"][node["host"]]
    return dict(node)


def drop_claim(state: dict[str, Any], node_id: str) -> None:
    """Forget a claim that never acted on its host (its power-on failed): the host is free and the key unused
    again, so a retry of the order claims afresh. A powered claim is released instead (:func:`release_claim`)."""
    node = state["nodes"].pop(node_id, None)
    if node is None:
        return
    if state["hosts"].get(node["host"]) == node_id:
        del state["hosts"][node["host"]]
    if state["keys"].get(node["key"]) == node_id:
        del state["keys"][node["key"]]


def live_nodes(state: Mapping[str, Any], cluster: str, tag: str) -> list[dict[str, Any]]:
    """The claimed (not released) nodes whose ``tag`` is ``cluster``, in claim order."""
    nodes = [n for n in state["nodes"].values() if n["state"] == CLAIMED and (n.get("tags") or {}).get(tag) == cluster]
    return sorted((dict(n) for n in nodes), key=lambda n: (n.get("claimed_at", 0.0), n["id"]))
