"""The plumbing every driver shares, written once: small pieces a driver composes, not a base class to fill in.

* :class:`PlainConfig`: a driver pickles as its plain configuration (a Pulumi dynamic provider's state); its
  runtime (SDK clients, caches, locks) is built again on unpickling.
* :class:`Lazy` / :class:`PerThread`: an SDK client built on first use (once, or once per thread), never pickled.
* :func:`wait_for_state` and :class:`PolledWait`: the contract's ``wait`` as one polling loop under a deadline;
  a driver gives only its read of a round and what a failed node means.
* :class:`CachedObserver`: an observer's last full view of each node and the host keys read from each console,
  so a poll can stay small.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from .console import host_keys_from_console, with_host_keys
from .contract import OrderProgress
from .errors import OperationTimeout
from .models import Node, NodeState
from .retry import read_or_none

__all__ = ["CachedObserver", "Lazy", "PerThread", "PlainConfig", "PolledWait", "Waiter", "wait_for_state"]

T = TypeVar("T")


class PlainConfig:
    """Pickled as the attributes ``CONFIG`` names; unpickling sets them and calls ``_init_runtime`` to build the
    rest again. A driver's clients, locks and credentials therefore never travel with it."""

    CONFIG: ClassVar[tuple[str, ...]] = ()

    def _init_runtime(self) -> None:
        """Build what is not configuration (clients, caches, locks)."""

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.CONFIG}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()


class Lazy(Generic[T]):
    """A client ``build()`` makes on the first call, once for all threads (the build runs under a lock)."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._value: T | None = None

    def __call__(self) -> T:
        if self._value is None:
            with self._lock:
                if self._value is None:
                    self._value = self._build()
        return self._value


class PerThread(Generic[T]):
    """A client ``build()`` makes on each thread's first call: for an SDK whose client is not thread-safe."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._local = threading.local()

    def __call__(self) -> T:
        value: T | None = getattr(self._local, "value", None)
        if value is None:
            value = self._local.value = self._build()
        return value


def wait_for_state(
    node_ids: Sequence[str],
    read: Callable[[], Sequence[Node]],
    state: NodeState,
    *,
    timeout: float,
    poll: float,
    provider: str,
    what: str,
    timed_out: Callable[[Sequence[Node]], str],
    failed: Callable[[Sequence[Node]], None] | None = None,
    progress: OrderProgress | None = None,
) -> list[Node]:
    """Poll ``read()`` (the nodes as seen this round) every ``poll`` seconds until it gives every one of
    ``node_ids`` in ``state``; those nodes are the answer.

    A read that fails transiently is no news (:func:`~.retry.read_or_none`, which names ``what`` should the reads
    keep failing past the deadline). Each round goes to ``progress``; waiting for RUNNING, ``failed(nodes)`` may
    raise when a node will never run. Past ``timeout``: OperationTimeout with ``timed_out(nodes)``."""
    deadline = time.monotonic() + timeout
    while True:
        nodes = read_or_none(read, deadline=deadline, poll=poll, timeout=timeout, what=what, provider=provider)
        if nodes is None:  # a throttled or failed read, already slept off: poll again, until the timeout
            continue
        if progress and nodes:
            progress(nodes)
        if len(nodes) == len(node_ids) and all(n.state == state for n in nodes):
            return list(nodes)
        if state == NodeState.RUNNING and failed is not None:
            failed(nodes)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise OperationTimeout(timed_out(nodes), provider=provider)
        time.sleep(min(poll, remaining))


class Waiter(Protocol):
    """What polls a driver's nodes until a state (an observer's ``wait``)."""

    def __call__(self, node_ids: Sequence[str], state: NodeState, *, timeout: float, poll: float,
                 progress: OrderProgress | None = None) -> list[Node]: ...


class PolledWait:
    """The contract's ``wait`` for a driver whose ``_wait`` polls (its observer's ``wait``), at the driver's
    ``poll`` unless the call gives one."""

    poll: float
    _wait: Waiter

    def wait(
        self,
        node_ids: Sequence[str],
        state: NodeState = NodeState.RUNNING,
        *,
        timeout: float = 1800.0,
        poll: float | None = None,
        progress: OrderProgress | None = None,
    ) -> list[Node]:
        """Poll until every node is in ``state``; OperationTimeout past ``timeout`` (how a driver reads a round:
        its ``_wait``, usually its observer's ``wait``)."""
        return self._wait(node_ids, state, timeout=timeout, poll=self.poll if poll is None else float(poll),
                          progress=progress)


class CachedObserver:
    """Keeps one driver's last full view of each node (``seen``) and the host keys read from each console
    (``keys``, never empty), so its polls can read only states and a console is read once."""

    def __init__(self, provider: str, region: str) -> None:
        self.provider = provider
        self.region = region
        self._lock = threading.Lock()
        self.seen: dict[str, Node] = {}
        self.keys: dict[str, tuple[str, ...]] = {}

    def remember(self, node: Node) -> Node:
        with self._lock:
            self.seen[node.id] = node
        return node

    def known(self, node_id: str, state: NodeState) -> Node:
        """The last full view of ``node_id`` (a bare node when never read) in ``state``."""
        seen = self.seen.get(node_id) or Node(id=node_id, provider=self.provider, region=self.region, state=state,
                                              offering="")
        return dataclasses.replace(seen, state=state)

    def retag(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Tags a driver has just written, on the node's last view."""
        seen = self.seen.get(node_id)
        if seen is not None:
            self.remember(dataclasses.replace(seen, tags={**seen.tags, **tags}))

    def console_keys(self, node_id: str, console: Callable[[], str]) -> tuple[str, ...]:
        """The node's SSH host keys: those read before, else parsed from ``console()`` (its console text) and
        kept when there are any, so a console without them yet is read again next time."""
        known = self.keys.get(node_id)
        if known:
            return known
        keys = host_keys_from_console(console())
        if keys:
            with self._lock:
                self.keys[node_id] = keys
        return keys

    def keyed(self, nodes: Sequence[Node], read: Callable[[str], tuple[str, ...]]) -> list[Node]:
        """``nodes`` with ``extra["host_keys"]`` where ``read`` finds them (best effort, see
        :func:`~.console.with_host_keys`)."""
        return with_host_keys(nodes, self.keys, read)
