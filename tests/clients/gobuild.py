"""Build a Go client of ``tests/clients/<name>`` once per source hash, into a per-user cache (as the Pulumi engine).

``python -m tests.clients.gobuild NAME...`` builds them (``make clients``, before the tests start); a test calls
:func:`build` (or the ``go_client`` fixture) and gets the binary, built now if the cache has none. Concurrent
builds of one client (pytest-xdist workers) wait on a file lock, so it is built once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["CLIENTS", "HERE", "BuildFailed", "build", "cache_root"]

HERE = Path(__file__).resolve().parent
#: The Go clients (folder names under tests/clients).
CLIENTS = tuple(sorted(p.name for p in HERE.iterdir() if (p / "go.mod").is_file()))


class BuildFailed(RuntimeError):
    """Go is missing or the client did not build; the message says which and how to get it."""


def cache_root() -> Path:
    base = os.environ.get("METALFLEET_CLIENT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "metalfleet", "clients")
    return Path(base)


def _go() -> str:
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        raise BuildFailed("missing prerequisite: Go, to build the official Go SDK clients the tests run against the "
                          "emulators (https://go.dev/dl/; the SDKs come from the Go module proxy)")
    return go


def source_hash(name: str) -> str:
    """A hash of the client's go.mod, go.sum and Go sources: a change builds it anew."""
    folder = HERE / name
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.suffix == ".go" or p.name in ("go.mod", "go.sum")):
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build(name: str, *, timeout: float = 1500.0) -> Path:
    """The path of client ``name``'s binary, built first if this source hash has none yet."""
    folder = HERE / name
    if not (folder / "go.mod").is_file():
        raise BuildFailed(f"no Go client {name!r} in {HERE} (known: {', '.join(CLIENTS)})")
    out = cache_root() / f"{name}-{source_hash(name)}" / name
    if os.access(out, os.X_OK):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.access(out, os.X_OK):  # another worker built it while this one waited
            return out
        go = _go()
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}
        started = time.monotonic()
        print(f"building Go client {name} (cold builds take minutes)", file=sys.stderr, flush=True)
        tmp = out.with_suffix(".tmp")
        proc = subprocess.run([go, "build", "-trimpath", "-o", str(tmp), "."], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise BuildFailed(f"the Go client {name} did not build (go build in {folder}, exit {proc.returncode}):\n"
                              f"{proc.stderr[-4000:]}")
        tmp.replace(out)
        print(f"built {out} in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    return out


def main(argv: list[str]) -> int:
    names = argv or list(CLIENTS)
    try:
        for name in names:
            print(build(name))
    except BuildFailed as exc:
        print(f"clients: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
