"""Official clients we did not write (other SDKs, other languages), run against the emulators in ``make test``.

Each Go client is a ``main`` package in its own folder here (``go.mod`` and ``go.sum`` committed, so the SDK
version is pinned), built by :func:`tests.clients.gobuild.build` into a per-user cache keyed by a hash of its
sources: the first run builds it (minutes, cold: the SDK comes from the Go module proxy), later runs reuse it.
"""
