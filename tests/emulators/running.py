"""One emulator process for a fixture's scope, with its credentials in the environment only while it runs.

Every emulator's session (or module) fixture does the same: set the SDK's test credentials and drop the
variables that would send the SDK elsewhere, start the emulator with its log in a fresh temporary folder, and
at the end stop it and put the environment back as it was. The per-test fixtures, which reset different state
on each emulator, stay with each emulator's fixtures.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

__all__ = ["running_emulator"]


class _Stoppable(Protocol):
    def stop(self) -> None: ...


E = TypeVar("E", bound=_Stoppable)


@contextlib.contextmanager
def running_emulator(start: Callable[[Path], E], tmp_path_factory: pytest.TempPathFactory, folder: str,
                     env: Mapping[str, str], unset: Iterable[str] = ()) -> Iterator[E]:
    """``start(log_path)`` with ``env`` set and ``unset`` removed (in this process and its children), the log
    in a new temporary ``folder``; the emulator is stopped and the environment restored on the way out."""
    unset = tuple(unset)
    saved = {k: os.environ.get(k) for k in (*env, *unset)}
    os.environ.update(env)
    for k in unset:
        os.environ.pop(k, None)
    try:
        emulator = start(tmp_path_factory.mktemp(folder) / "server.log")
        try:
            yield emulator
        finally:
            emulator.stop()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
