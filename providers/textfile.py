"""The one way metalfleet reads a user's file as text.

Every command that reads a file (specs, inventories, quarantine files, captured command outputs) goes
through :func:`read_text_file`, so bad input always ends in the same kind of error: a
:class:`BadFileError` (an :class:`InvalidSpecError`, so the CLI exits 2) whose one-line message names
the file and what is wrong with it (for bytes that are not UTF-8 text, or a NUL byte, the byte offset
of the first one) instead of a ``UnicodeDecodeError`` traceback. YAML files go on to
:func:`metalfleet.providers.yamlfile.parse_yaml`.

Standard library only, Python 3.10 syntax: ``tools/gpu_acceptance_check.py`` links this module (with
errors.py) into its import shim on GPU hosts that have no third-party packages.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from .errors import InvalidSpecError

__all__ = ["MAX_OUTPUT_BYTES", "MAX_YAML_BYTES", "BadFileError", "check_output_path", "parse_json", "read_json_file",
           "read_text_file", "shorten", "write_text_file"]

#: Specs, inventories and quarantine files are kilobytes; 4 MiB leaves room for a 10,000-host inventory
#: while keeping the (pure-Python, bounded) YAML parser's time in seconds.
MAX_YAML_BYTES = 4 * 1024 * 1024
#: Captured command outputs: NCCL_DEBUG=TRACE logs of a large run reach tens of MiB.
MAX_OUTPUT_BYTES = 128 * 1024 * 1024

_UTF8_BOM = b"\xef\xbb\xbf"


class BadFileError(InvalidSpecError):
    """A file that cannot be read as the text (or YAML) it should be.

    ``path`` names the file; ``offset`` is the 0-based byte offset of the first bad byte, ``line`` and
    ``column`` (1-based) the place of a fault in the text (YAML), each None when it does not apply. ``field`` is
    "path" and ``value`` the path, as for any InvalidSpecError about a file.
    """

    def __init__(self, message: str, *, path: str, offset: int | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message, field="path", value=path)
        self.path = path
        self.offset = offset
        self.line = line
        self.column = column


# ------------------------------------------------------------------------------------------ bytes


def _describe_os_error(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "it is a directory, not a file"
    if isinstance(exc, NotADirectoryError):
        return "no such file (a part of the path is not a directory)"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or (errno.errorcode.get(exc.errno, "") if exc.errno else "") or type(exc).__name__


def _read_bytes(p: Path, what: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``p`` (a FIFO or /dev/stdin works too); longer is an error."""
    try:
        with open(p, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:  # a regular file says its size: refuse before reading it
                raise BadFileError(f"{what} {p} is too large ({size} bytes; the limit is {limit})", path=str(p))
            data = fh.read(limit + 1)
    except OSError as exc:
        raise BadFileError(f"cannot read {what} {p}: {_describe_os_error(exc)}", path=str(p)) from exc
    if len(data) > limit:
        raise BadFileError(f"{what} {p} is too large (more than {limit} bytes)", path=str(p))
    return data


def _decode(data: bytes, p: Path, what: str) -> str:
    nul = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
        bad: int | None = None
        reason = ""
    except UnicodeDecodeError as exc:
        bad, reason = exc.start, exc.reason
    if nul >= 0 and (bad is None or nul <= bad):
        raise BadFileError(f"{what} {p} is binary, not text: NUL byte at byte offset {nul}", path=str(p), offset=nul)
    if bad is not None:
        hint = ""
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            hint = "; it looks like UTF-16 (save it as UTF-8)"
        raise BadFileError(f"{what} {p} is not UTF-8 text: byte 0x{data[bad]:02x} at byte offset {bad} "
                           f"({reason}){hint}", path=str(p), offset=bad)
    return text


def read_text_file(path: str | Path, what: str, *, limit: int = MAX_YAML_BYTES, allow_empty: bool = False) -> str:
    """The UTF-8 text of ``path``; anything else is a one-line :class:`BadFileError` naming the file.

    ``what`` says what the file should be ("cluster spec", "nvidia-smi output") and starts every
    message. A leading UTF-8 byte order mark is kept (YAML skips it; so offsets in the text stay those of
    the file). An empty (or whitespace-only) file is an error unless ``allow_empty``.
    """
    p = Path(path)
    data = _read_bytes(p, what, limit)
    if not allow_empty and not data.removeprefix(_UTF8_BOM).strip():
        raise BadFileError(f"{what} {p} is empty", path=str(p))
    return _decode(data, p, what)


# ------------------------------------------------------------------------------------------- JSON


def _line_col(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):  # 1e400 overflows to inf
        raise ValueError(f"number {shorten(literal, 40)} is out of range")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:  # json keeps the last value silently, as YAML loaders do: refused for the same reason
            raise ValueError(f"duplicate key {shorten(key, 40)}")
        out[key] = value
    return out


def parse_json(text: str, source: str, what: str) -> Any:
    """``text`` (the content of ``source``) as JSON data; faults are a BadFileError with line and column.

    Stricter than ``json.loads``: NaN, Infinity and numbers that overflow to infinity are refused (a price
    or a count must be a number), and so are duplicate keys; nesting too deep for the decoder is an error,
    not a RecursionError.
    """
    skip = 1 if text.startswith("\ufeff") else 0  # a UTF-8 byte order mark (Windows editors write one)
    try:
        return json.loads(text[skip:], parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        pos = exc.pos + skip
        line, col = _line_col(text, pos)
        raise BadFileError(f"{what} {source} is not valid JSON at line {line}, column {col}: {exc.msg}",
                           path=source, offset=len(text[:pos].encode("utf-8")), line=line, column=col) from None
    except RecursionError:
        raise BadFileError(f"{what} {source} is nested too deeply to be read as JSON", path=source) from None
    except ValueError as exc:  # an over-long integer, a non-finite number, a duplicate key
        reason = str(exc).split(";")[0]  # drop CPython's advice (sys.set_int_max_str_digits)
        raise BadFileError(f"{what} {source} is not valid JSON: {reason}", path=source) from None


def read_json_file(path: str | Path, what: str, *, limit: int = MAX_YAML_BYTES) -> Any:
    """The JSON document in ``path``, read as :func:`read_text_file` reads text; a BadFileError otherwise."""
    return parse_json(read_text_file(path, what, limit=limit), str(path), what)


# ----------------------------------------------------------------------------------------- writing


def check_output_path(path: str | Path, what: str) -> Path:
    """``path`` as a file metalfleet may write: its folder exists, and it is not itself a folder.

    Checked before any work is done, so a bad ``--out`` costs nothing and leaves nothing half written.
    """
    p = Path(path)
    if not str(path):
        raise BadFileError(f"{what}: no file name given", path=str(path))
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise BadFileError(f"cannot write {what} {p}: {_describe_os_error(exc)}", path=str(p)) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise BadFileError(f"cannot write {what} {p}: it is a directory, not a file", path=str(p))
    parent = p.parent
    if not parent.is_dir():
        why = "does not exist" if not parent.exists() else "is not a directory"
        raise BadFileError(f"cannot write {what} {p}: the folder {parent} {why}", path=str(p))
    return p


def write_text_file(path: str | Path, text: str, what: str) -> None:
    """Write ``text`` (UTF-8) to ``path``; a fault is a one-line BadFileError naming the file.

    A regular file (or a new one) is replaced atomically: written to a temporary file in the same folder,
    then renamed, so an interrupted write leaves the old file or none, and a symbolic link at ``path`` is
    replaced rather than followed out of the folder. A device or FIFO (``/dev/stdout``) is written to directly.
    """
    p = check_output_path(path, what)
    data = text.encode("utf-8")
    try:
        st = os.stat(p) if p.exists() else None
        if st is not None and not stat.S_ISREG(st.st_mode):
            with open(p, "wb") as fh:
                fh.write(data)
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if st is not None:
                os.chmod(tmp, stat.S_IMODE(st.st_mode))
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise BadFileError(f"cannot write {what} {p}: {_describe_os_error(exc)}", path=str(p)) from None


def shorten(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters, so an error about a huge value stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...(" + str(len(text)) + " chars)"
