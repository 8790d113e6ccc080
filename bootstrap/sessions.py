"""Host sessions for a run over many hosts: which hosts, their connectors, and the fan-out.

One place for what the bootstrap runner (:mod:`.runner`) and the acceptance probes
(:mod:`.acceptance.live`) both need, after pyinfra's api layer over its connectors:

- :func:`select_hosts`: ``--limit`` globs on name or address, or ``label=value``;
- :class:`SessionPool`: one connector per host from a :class:`~.connector.Connect` (SSH unless told
  otherwise), one shared connector per jump host, all closed at the end;
- :class:`FanOut`: hosts on at most ``max_workers`` threads; past ``max_fail_percentage`` failed
  hosts the run stops (hosts not yet started are not started; those running see :attr:`FanOut.stop`);
- where each host's log goes (:func:`host_log_file`, :func:`host_folder`, one :func:`safe_filename`).

Nothing here imports paramiko: the SSH connector loads when a pool is made without a ``connect``.
"""

from __future__ import annotations

import fnmatch
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from .connector import Connect, Connector, SshOptions, parse_bastion
from .logs import host_component, host_path

if TYPE_CHECKING:
    from .inventory import Host

__all__ = ["FanOut", "SessionPool", "default_log_dir", "host_folder", "host_log_file", "safe_filename",
           "select_hosts"]

T = TypeVar("T")
R = TypeVar("R")


def select_hosts(hosts: Sequence[Host], limit: str | Sequence[str] | None) -> list[Host]:
    """Hosts matching any of ``limit``: a glob on name or address, or ``label=value``."""
    if not limit:
        return list(hosts)
    patterns = [p for item in ([limit] if isinstance(limit, str) else limit) for p in re.split(r"[,\s]+", item) if p]
    chosen = []
    for h in hosts:
        for p in patterns:
            if "=" in p:
                k, _, v = p.partition("=")
                if fnmatch.fnmatchcase(h.labels.get(k, ""), v):
                    chosen.append(h)
                    break
            elif fnmatch.fnmatchcase(h.name, p) or fnmatch.fnmatchcase(h.address, p):
                chosen.append(h)
                break
    return chosen


def safe_filename(name: str, default: str = "host") -> str:
    """``name`` as one path component, safe and injective (:func:`.logs.host_component`; ``default`` is unused:
    an empty name has its own component too)."""
    return host_component(name)


def host_log_file(root: Path, name: str) -> Path:
    """A bootstrap run's log of host ``name``: ``root/<name>.log``, checked to stay under ``root``."""
    return host_path(root, name, ".log")


def host_folder(root: Path, name: str) -> Path:
    """The folder an acceptance run saves host ``name``'s outputs (and session log) in: ``root/<name>/``, checked
    to stay under ``root``."""
    return host_path(root, name)


def default_log_dir() -> Path:
    """Where a run logs when it is not told: ``~/.local/state/metalfleet/logs/<time>``."""
    return Path.home() / ".local" / "state" / "metalfleet" / "logs" / time.strftime("%Y%m%d-%H%M%S")


class SessionPool:
    """The connectors of one run: one per host, one per jump host (shared by the hosts behind it).

    ``connect``: how to reach a host (default: SSH with ``ssh``, whose known_hosts file is read now,
    so a bad file fails the run before any host is tried).
    """

    def __init__(self, ssh: SshOptions | None = None, connect: Connect | None = None) -> None:
        if connect is None:
            from .ssh import SshConnect

            connect = SshConnect(ssh or SshOptions())
        self._connect = connect
        self._bastions: dict[str, Connector] = {}
        self._lock = threading.Lock()

    def connector(self, host: Host) -> Connector:
        """A new (not yet connected) connector to ``host``, through its jump host when it has one."""
        via = None
        if host.bastion:
            with self._lock:
                via = self._bastions.get(host.bastion)
                if via is None:
                    via = self._connect(parse_bastion(host.bastion, default_user=host.user, key_path=host.key))
                    self._bastions[host.bastion] = via
        return self._connect(host.endpoint(), via=via)

    def close(self) -> None:
        with self._lock:
            for b in self._bastions.values():
                b.close()

    def __enter__(self) -> SessionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FanOut(Generic[T, R]):
    """``work`` over ``items`` on at most ``max_workers`` threads, results in item order.

    ``failed(result)`` says whether an item failed; once more than ``max_fail_percentage`` of all items
    failed, :attr:`stop` is set (work that has not started should check it and not start) and
    :attr:`stop_reason` says why. ``done`` and ``total`` count finished and all items (for progress).
    """

    def __init__(self, items: Sequence[T], *, max_workers: int, max_fail_percentage: float | None = None,
                 failed: Callable[[R], bool] | None = None, thread_name_prefix: str = "mf-host") -> None:
        self.items = list(items)
        self.max_workers = max(1, min(max_workers, len(self.items) or 1))
        self.max_fail_percentage = max_fail_percentage
        self._failed = failed
        self.thread_name_prefix = thread_name_prefix
        self.total = len(self.items)
        self.done = 0
        self.failures = 0
        self.stop = threading.Event()
        self.stop_reason: str | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[T], R], *, on_done: Callable[[T, R], None] | None = None,
            on_stop: Callable[[T, str], None] | None = None) -> list[R]:
        """Run every item; ``on_done(item, result)`` and, when the threshold trips, ``on_stop(item, reason)``
        run in the worker (under a lock) before it picks up another item, so a stop takes effect at once."""
        results: dict[int, R] = {}

        def one(i: int) -> None:
            item = self.items[i]
            result = work(item)
            with self._lock:
                results[i] = result
                self.done += 1
                if self._failed is not None and self._failed(result):
                    self.failures += 1
                if on_done is not None:
                    on_done(item, result)
                pct = self.max_fail_percentage
                if pct is not None and not self.stop.is_set() and self.failures * 100.0 / self.total > pct:
                    self.stop_reason = f"{self.failures} of {self.total} host(s) failed, over the {pct:g}% threshold"
                    self.stop.set()
                    if on_stop is not None:
                        on_stop(item, self.stop_reason)

        if self.items:
            with ThreadPoolExecutor(max_workers=self.max_workers, thread_name_prefix=self.thread_name_prefix) as pool:
                for fut in as_completed([pool.submit(one, i) for i in range(len(self.items))]):
                    fut.result()
        return [results[i] for i in range(len(self.items))]
