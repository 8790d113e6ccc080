"""Which real parts a test used, so a run can say how many tests ran per area.

Areas, strongest first: ``engine e2e`` (the real Pulumi engine), ``sim host`` (real sshd hosts),
``emulator`` (a cloud API served over HTTP), ``unit`` (none of these). The harness and emulator
start-up code call :func:`note`; tests/conftest.py resets the set per test and reads it afterwards.
Recording what a test actually started (rather than guessing from its path) keeps the counts honest.
"""

from __future__ import annotations

AREAS = ("unit", "emulator", "sim host", "engine e2e")

_used: set[str] = set()


def note(area: str) -> None:
    if area not in AREAS:
        raise ValueError(f"unknown test area {area!r}; known: {AREAS}")
    _used.add(area)


def reset() -> None:
    _used.clear()


def strongest() -> str:
    """The area a test counts under: the strongest part it used, else ``unit``."""
    return max(_used, key=AREAS.index, default="unit")
