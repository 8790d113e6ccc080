"""What one machine remembers about a cluster between runs: a per-cluster lock, and what a failed order left.

Both live in the state folder (``METALFLEET_STATE_DIR``; else ``$XDG_STATE_HOME/metalfleet``; else
``~/.local/state/metalfleet``), one pair of files per provider, region and cluster:

- ``<cluster>.lock``: held (``flock``) by whoever orders or releases the cluster, so two ``metalfleet order`` of one
  spec on this machine run one after the other: the second finds the first's nodes by their keys and buys
  nothing. Another machine is not stopped by it; there the providers' idempotency (AWS and Alibaba client tokens,
  the Huawei driver's convergence on the oldest server of a key) keeps the count.
- ``<cluster>.leftovers.json``: the nodes an order made and could not roll back (and why), so ``metalfleet release
  SPEC`` releases them even if their tags never reached the provider; cleared by a release that ends them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .errors import ConflictError

__all__ = ["STATE_DIR_ENV", "cluster_lock", "forget_leftovers", "leftovers", "record_leftovers", "state_dir"]

STATE_DIR_ENV = "METALFLEET_STATE_DIR"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_HELD = threading.local()
_GUARD = threading.Lock()


def state_dir() -> Path:
    """The state folder (created on first use, mode 0700: it names the clusters and nodes of this account)."""
    raw = os.environ.get(STATE_DIR_ENV) or ""
    if raw:
        root = Path(raw)
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or ""
        root = (Path(xdg) if xdg else Path.home() / ".local" / "state") / "metalfleet"
    return root


def _stem(provider: str, region: str, cluster: str) -> Path:
    def safe(s: str) -> str:
        out = _SAFE.sub("_", s) or "_"
        return "_" + out if out in (".", "..") else out

    root = state_dir()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)  # its own mode too, not only the innermost folder's
    folder = root / safe(provider) / safe(region or "-")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder / safe(cluster)


def _region(driver: Any) -> str:
    return str(getattr(driver, "region", "") or "")


@contextlib.contextmanager
def cluster_lock(driver: Any, cluster: str, *, timeout: float = 600.0, poll: float = 0.2) -> Iterator[None]:
    """Hold the cluster's lock for the block: other processes (and threads) on this machine ordering or releasing
    it wait up to ``timeout`` seconds, then get a ConflictError naming the holder. Re-entrant in one thread."""
    path = _stem(driver.name, _region(driver), cluster).with_suffix(".lock")
    key = str(path)
    held: dict[str, int] = _HELD.__dict__.setdefault("held", {})
    if held.get(key):
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    with _GUARD:
        local = _THREAD_LOCKS.setdefault(key, threading.Lock())
    deadline = time.monotonic() + timeout
    if not local.acquire(timeout=timeout):
        raise ConflictError(f"another thread of this process has held cluster {cluster}'s lock ({path}) for more "
                            f"than {timeout:.0f}s", provider=driver.name, code="ClusterLocked")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
                        raise ConflictError(
                            f"another metalfleet run ({holder}) has been ordering or releasing cluster {cluster} on "
                            f"this machine for more than {timeout:.0f}s (lock {path}); wait for it, or stop it",
                            provider=driver.name, code="ClusterLocked") from None
                    time.sleep(poll)
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}"
                          .encode(), 0)
                held[key] = 1
                yield
            finally:
                held.pop(key, None)
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        local.release()


def _leftovers_path(driver: Any, cluster: str) -> Path:
    return _stem(driver.name, _region(driver), cluster).with_suffix(".leftovers.json")


def leftovers(driver: Any, cluster: str) -> dict[str, str]:
    """node id -> why it was left, for the nodes an order of ``cluster`` could not roll back ({} when none). A
    file that cannot be read is named in the error rather than ignored: it lists nodes that may still bill."""
    path = _leftovers_path(driver, cluster)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw)
        nodes = data["nodes"]
        if not isinstance(nodes, dict):
            raise TypeError("nodes is not a mapping")
        return {str(k): str(v) for k, v in nodes.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise ConflictError(f"the leftovers file {path} is not readable ({exc}); it lists nodes a failed order of "
                            f"cluster {cluster} left: check them in the provider's console, then delete the file",
                            provider=driver.name, code="LeftoversUnreadable") from exc


def _write(driver: Any, cluster: str, nodes: dict[str, str]) -> Path:
    path = _leftovers_path(driver, cluster)
    if not nodes:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return path
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"provider": driver.name, "region": _region(driver), "cluster": cluster,
                               "nodes": dict(sorted(nodes.items()))}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def record_leftovers(driver: Any, cluster: str, nodes: dict[str, str]) -> Path:
    """Add ``nodes`` (id -> why) to the cluster's leftovers; the file's path."""
    return _write(driver, cluster, {**leftovers(driver, cluster), **nodes})


def forget_leftovers(driver: Any, cluster: str, node_ids: Sequence[str]) -> None:
    """Drop ``node_ids`` (released, or found gone) from the cluster's leftovers."""
    left = leftovers(driver, cluster)
    if any(i in left for i in node_ids):
        _write(driver, cluster, {k: v for k, v in left.items() if k not in set(node_ids)})
