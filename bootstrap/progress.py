"""Live progress: events from the runner, and a simple terminal display of them."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TextIO

__all__ = ["ProgressCallback", "ProgressEvent", "TerminalProgress"]

EventKind = Literal["host-start", "facts", "step-start", "step-done", "reboot-wait", "reconnect", "host-done",
                    "run-stopped"]


@dataclass(frozen=True)
class ProgressEvent:
    kind: EventKind
    host: str
    step: str | None = None
    status: str | None = None
    detail: str = ""
    seconds: float | None = None
    #: Hosts finished so far and in total (for "[12/64]").
    done: int = 0
    total: int = 0


ProgressCallback = Callable[[ProgressEvent], None]


class TerminalProgress:
    """Prints one line per finished step and per host; safe to call from many threads.

    ``verbose`` also prints step starts, unchanged steps and fact reads.
    """

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.verbose = verbose
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def __call__(self, ev: ProgressEvent) -> None:
        line = self.format(ev)
        if line is None:
            return
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def format(self, ev: ProgressEvent) -> str | None:
        width = len(str(ev.total)) if ev.total else 1
        head = f"{time.monotonic() - self._t0:7.1f}s [{ev.done:>{width}}/{ev.total}] {ev.host:<16}"
        secs = f" ({ev.seconds:.1f}s)" if ev.seconds is not None else ""
        if ev.kind == "step-done":
            if ev.status == "unchanged" and not self.verbose:
                return None
            return f"{head} {ev.step:<22} {ev.status}{secs}{' - ' + ev.detail if ev.detail else ''}"
        if ev.kind == "host-done":
            return f"{head} == {ev.status}{secs}{' - ' + ev.detail if ev.detail else ''}"
        if ev.kind in ("reboot-wait", "reconnect", "run-stopped"):
            return f"{head} {ev.kind}: {ev.detail}"
        if self.verbose:
            return f"{head} {ev.kind} {ev.step or ''} {ev.detail}".rstrip()
        return None
