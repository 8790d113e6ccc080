"""Batch scripts: many commands (or fact reads, or uploads) in one exec channel.

A round trip costs far more than a small command, so the engine sends each host one script per
phase of fact reads and one per changed step. The script text is a constant; every value reaches
it as a positional parameter or as a :func:`shlex.join`-quoted argv, never through string
formatting. Each item is framed by a marker line carrying a per-batch random token, so output that
happens to look like a marker cannot be mistaken for one.

Uploads ride on the same channel: their bytes are sent on stdin in order and each ``mf_put``
reads exactly its size with ``head -c`` into a temporary file, checks its sha256, then moves it
into place. Commands read ``/dev/null``, never the upload stream.
"""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BatchItem",
    "ItemResult",
    "batch_script",
    "fact_script",
    "new_token",
    "parse_batch_output",
    "parse_fact_output",
    "upload_script",
]

#: Shell function that receives one upload from stdin: mf_put PATH SIZE SHA256 MODE
MF_PUT = r"""mf_put() {
  mf_t="$1.mf-tmp.$$"
  mkdir -p -- "$(dirname -- "$1")" || return 1
  (umask 077 && head -c "$2" > "$mf_t") || { rm -f -- "$mf_t"; return 1; }
  mf_s=$(sha256sum < "$mf_t" | cut -d" " -f1)
  if [ "$mf_s" != "$3" ]; then
    rm -f -- "$mf_t"; echo "mf_put: sha256 of $1 is $mf_s, expected $3 (upload torn)" >&2; return 86
  fi
  chmod "$4" "$mf_t" && mv -f -- "$mf_t" "$1"
}
"""


def new_token() -> str:
    return "MF" + secrets.token_hex(8)


def upload_script(files: Sequence[tuple[str, int, str, str]]) -> tuple[str, list[str]]:
    """Script and args that receive ``files`` (path, size, sha256, mode) from stdin, in order."""
    body = MF_PUT + 'set -e\nwhile [ "$#" -ge 4 ]; do mf_put "$1" "$2" "$3" "$4"; shift 4; done\n'
    args = [str(v) for f in files for v in f]
    return body, args


# --------------------------------------------------------------------------------------------
# Facts


def fact_script(commands: Sequence[Sequence[str]], token: str) -> str:
    """One script that runs every fact command, framing each one's stdout and exit status.

    Output per item: ``<token> <i>`` line, the command's stdout, then ``\\n<token>-rc <i> <rc>``.
    The newline before the rc marker is added by us and removed by the parser, so a command's
    output is returned byte for byte.
    """
    lines = [f"T={shlex.quote(token)}"]
    for i, argv in enumerate(commands):
        lines.append(f'printf "%s %s\\n" "$T" {i}; {shlex.join(argv)} </dev/null; '
                     f'printf "\\n%s-rc %s %s\\n" "$T" {i} "$?"')
    return "\n".join(lines) + "\n"


def parse_fact_output(output: str, token: str, count: int) -> list[tuple[str, int]]:
    """Split fact-script output into (stdout, rc) per command; missing items get rc -1."""
    results: list[tuple[str, int]] = [("", -1)] * count
    for item in parse_batch_output(output, token):
        if 0 <= item.index < count:
            results[item.index] = (item.output, item.rc)
    return results


# --------------------------------------------------------------------------------------------
# Step commands and uploads


@dataclass(frozen=True)
class BatchItem:
    """A command (``argv``) or an upload (``path``/``size``/``sha256``/``mode``) in a step batch."""

    argv: tuple[str, ...] = ()
    timeout: float | None = None
    ok_codes: tuple[int, ...] = (0,)
    upload: tuple[str, int, str, str] | None = None


@dataclass(frozen=True)
class ItemResult:
    index: int
    rc: int
    output: str
    seconds: float | None = None


def batch_script(items: Sequence[BatchItem], token: str) -> str:
    """Run ``items`` in order; stop at the first one whose status is not allowed.

    Per item: ``<token> <i>`` line, its output (stderr merged), ``\\n<token>-rc <i> <rc>``.
    A command with a timeout runs under coreutils ``timeout`` (rc 124 when it fires).
    """
    lines = [MF_PUT, f"T={shlex.quote(token)}", "exec 2>&1"]
    for i, it in enumerate(items):
        if it.upload is not None:
            call = "mf_put " + shlex.join(str(v) for v in it.upload)
        else:
            argv = list(it.argv)
            if it.timeout:
                argv = ["timeout", "-k", "10", f"{it.timeout:g}", *argv]
            call = shlex.join(argv) + " </dev/null"
        ok = " ".join(str(c) for c in it.ok_codes)
        lines.append(
            f'printf "%s %s\\n" "$T" {i}; {call}; mf_rc=$?; '
            f'printf "\\n%s-rc %s %s\\n" "$T" {i} "$mf_rc"; '
            f'case " {ok} " in *" $mf_rc "*) ;; *) exit 97;; esac'
        )
    return "\n".join(lines) + "\nexit 0\n"


def parse_batch_output(output: str, token: str) -> list[ItemResult]:
    """Items that started, in order, with their status and output (``rc`` -1: started, never finished)."""
    results: list[ItemResult] = []
    begin = f"{token} "
    end_marker = f"\n{token}-rc "
    pos = 0
    while True:
        start = output.find(begin, pos)
        if start < 0 or (start > 0 and output[start - 1] != "\n"):
            if start < 0:
                break
            pos = start + 1
            continue
        line_end = output.find("\n", start)
        if line_end < 0:
            break
        head = output[start + len(begin):line_end]
        if not head.isdigit():
            pos = line_end
            continue
        idx = int(head)
        stop = output.find(end_marker, line_end)
        if stop < 0:
            results.append(ItemResult(idx, -1, output[line_end + 1:]))
            break
        body = output[line_end + 1:stop] if stop > line_end else ""
        rc_end = output.find("\n", stop + len(end_marker))
        fields = output[stop + len(end_marker):rc_end if rc_end >= 0 else None].split()
        rc = int(fields[1]) if len(fields) >= 2 and fields[1].lstrip("-").isdigit() else -1
        ms = float(fields[2]) / 1000 if len(fields) >= 3 and fields[2].lstrip("-").isdigit() else None
        results.append(ItemResult(idx, rc, body, ms))
        pos = rc_end if rc_end >= 0 else len(output)
    return results
