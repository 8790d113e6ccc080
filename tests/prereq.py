"""Prerequisites of tests that need more than Python: a missing one fails the test with one line
that says what is missing and how to get it (never a skip: a green run must mean the tests ran)."""

from __future__ import annotations

import os
import shutil

import pytest

__all__ = ["require_go_client", "require_root", "require_tool"]


def require_root(what: str) -> None:
    """Fail unless running as root. ``what``: why root is needed, e.g. "simulated hosts (sshd...)"."""
    if os.geteuid() != 0:
        pytest.fail(f"missing prerequisite: root, for {what}. Run the tests as root "
                    "(`sudo make test`, or in a container/VM where you are root); CI runs as root.",
                    pytrace=False)


def require_tool(name: str, how: str) -> str:
    """The path of the program ``name``; fails with ``how`` (how to install it) when it is absent."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"missing prerequisite: {name} is not on PATH ({how})", pytrace=False)
    return path


def require_go_client(name: str) -> str:
    """The binary of the official-SDK Go client ``tests/clients/<name>``, built (once per source hash, cached per
    user) if needed; a missing Go or a failed build fails the test saying which."""
    from tests.clients.gobuild import BuildFailed, build

    try:
        return str(build(name))
    except BuildFailed as exc:
        pytest.fail(str(exc), pytrace=False)
