"""Per-host files on the controller: what each one is called, and the log of every command and its output.

Host names come from inventories and providers and are not file names: ``..``, ``gpu/1`` or ``GPU1`` next to
``gpu1`` on a case-insensitive disk would write outside the folder the user named, or two hosts into one.
:func:`host_component` turns a name into one path component that is safe and injective; :func:`host_path`
puts it under a root and checks, after resolving links, that the result stays there. Every writer of
per-host files (bootstrap logs, ``verify --save-dir``) names its files through these two.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO

from metalfleet.providers.errors import InvalidSpecError

__all__ = ["HostLog", "check_host_paths", "host_component", "host_path", "within"]

#: A name kept as it is: lower-case letters, digits, ``_ . -``, not starting with a dot or dash. Upper case is not
#: kept (``GPU1`` and ``gpu1`` are one file on macOS and Windows disks), and ``+`` never is: it marks the
#: hashed form, so a kept name can never equal another name's hashed form.
_KEPT = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,99}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def host_component(name: str) -> str:
    """``name`` as one path component: itself when it is a plain lower-case name, else a readable sanitised
    form plus ``+`` and 12 hex digits of the SHA-256 of the real name (``gpu/1`` -> ``gpu_1+3f0c...``).

    Never empty, ``.`` or ``..``, never holds ``/`` or ``\\``, at most 100 characters; distinct names give
    distinct components (also on case-insensitive disks), and one name always gives the same one.
    """
    if _KEPT.fullmatch(name):
        return name
    readable = _UNSAFE.sub("_", name)[:80].lstrip(".-") or "host"
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{readable}+{digest}"


def within(root: Path, path: Path, what: str = "file") -> Path:
    """``path``, when it stays under ``root`` once both are resolved (a link inside ``root`` pointing out
    counts as out); else an InvalidSpecError naming both, before anything is written."""
    base = root.resolve()
    target = path.resolve()
    if target != base and base not in target.parents:
        raise InvalidSpecError(f"refusing to write {what} {path}: it resolves to {target}, outside {base}",
                               field="path", value=str(path))
    return path


def host_path(root: Path, name: str, suffix: str = "") -> Path:
    """Where host ``name``'s file (``suffix`` ".log") or folder (no suffix) goes under ``root``, checked to stay
    there (:func:`within`)."""
    return within(root, root / f"{host_component(name)}{suffix}", f"the file of host {name!r}")


def check_host_paths(root: Path, names: Iterable[str], place: Callable[[Path, str], Path],
                     what: str = "files") -> dict[str, Path]:
    """``place(root, name)`` of every name, checked before a run writes any: each stays under ``root``
    (:func:`within`) and no two hosts share one. An InvalidSpecError names the hosts at fault."""
    out: dict[str, Path] = {}
    owner: dict[Path, str] = {}
    for name in names:
        path = within(root, place(root, name), f"the {what} of host {name!r}")
        key = Path(str(path.resolve()).casefold())
        if key in owner:
            raise InvalidSpecError(f"hosts {owner[key]!r} and {name!r} would share the {what} {path}: rename one "
                                   "of them", field="hosts", value=[owner[key], name])
        owner[key] = name
        out[name] = path
    return out


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
