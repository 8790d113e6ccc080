"""Per-host log files: every command and its output, streamed as it arrives (where they go: :mod:`.sessions`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

__all__ = ["HostLog"]


class HostLog:
    """Append-only log of one host. ``stream`` returns a callback for a batch's raw output that
    replaces the batch's marker lines with ``$ command`` and ``[exit N]`` lines."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fh: IO[str] | None = None
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in close()

    def write(self, text: str) -> None:
        if self._fh is None:
            return
        with self._lock:
            self._fh.write(text if text.endswith("\n") else text + "\n")
            self._fh.flush()

    def event(self, message: str) -> None:
        self.write(f"--- {time.strftime('%H:%M:%S')} {message}")

    def stream(self, token: str, labels: Sequence[str]) -> Callable[[bytes], None]:
        buf = bytearray()
        begin = f"{token} "
        end = f"{token}-rc "
        held_blank = [False]  # the newline the script adds before each end marker is not output

        def feed(chunk: bytes) -> None:
            if self._fh is None:
                return
            buf.extend(chunk)
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    if len(buf) > 65536:  # a long line without newline: flush it as is
                        self.write(buf.decode(errors="replace"))
                        buf.clear()
                    return
                line = buf[:nl].decode(errors="replace")
                del buf[:nl + 1]
                if not line:
                    if held_blank[0]:
                        self.write("")
                    held_blank[0] = True
                    continue
                if held_blank[0] and not line.startswith(end):
                    self.write("")
                held_blank[0] = False
                if line.startswith(begin) and line[len(begin):].isdigit():
                    i = int(line[len(begin):])
                    self.write(f"$ {labels[i] if i < len(labels) else '?'}")
                elif line.startswith(end):
                    fields = line[len(end):].split()
                    self.write(f"[exit {fields[1] if len(fields) > 1 else '?'}]")
                else:
                    self.write(line)

        return feed

    def raw(self) -> Callable[[bytes], None]:
        def feed(chunk: bytes) -> None:
            if self._fh is not None:
                with self._lock:
                    self._fh.write(chunk.decode(errors="replace"))
                    self._fh.flush()
        return feed

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
