"""Batch scripts: many commands (or fact reads, or uploads) in one exec channel.

A round trip costs far more than a small command, so the engine sends each host one script per
phase of fact reads and one per changed step. The script text is a constant; every value reaches
it as a positional parameter or as a :func:`shlex.join`-quoted argv, never through string
formatting. Each item is framed by a marker line carrying a per-batch random token, so output that
happens to look like a marker cannot be mistaken for one.

Uploads ride on the same channel: their bytes are sent on stdin in order and each ``mf_put``
reads exactly its size with ``head -c`` into a temporary file, checks its sha256, then moves it
into place. Commands read ``/dev/null``, never the upload stream.

A :class:`Script` keeps what a script is made of next to its text: a connector that runs a shell
sends the text; one that answers from data (:mod:`.replay`) calls :meth:`Script.replay`, which
produces the bytes the shell would print (a test runs both on the same items and compares them).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

__all__ = [
    "BatchItem",
    "ItemResult",
    "Script",
    "batch_script",
    "fact_script",
    "new_token",
    "parse_batch_output",
    "parse_fact_output",
    "parse_probe_stderr",
    "probe_script",
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


# --------------------------------------------------------------------------------------------
# Probes (acceptance): stdout, status and the tail of stderr per command

#: Bytes of each probe's stderr the probe script sends back.
PROBE_STDERR_TAIL = 4000


def probe_script(commands: Sequence[Sequence[str]], token: str) -> str:
    """One script that runs every command and frames its stdout, exit status and stderr.

    Per command: ``<token> <i>``, its stdout, ``\\n<token>-rc <i> <rc>``, then ``<token>-err <i>``, the
    tail of its stderr and ``\\n<token>-end <i>``. A command's failure never stops the script: each
    one's failure is evidence.
    """
    lines = [f"T={shlex.quote(token)}",
             'E=$(mktemp 2>/dev/null) || E="/tmp/.mf-accept.$$"',
             "trap 'rm -f \"$E\"' EXIT"]
    for i, argv in enumerate(commands):
        lines.append(f'printf "%s %s\\n" "$T" {i}; {shlex.join(argv)} </dev/null 2>"$E"; mf_rc=$?; '
                     f'printf "\\n%s-rc %s %s\\n" "$T" {i} "$mf_rc"; printf "%s-err %s\\n" "$T" {i}; '
                     f'tail -c {PROBE_STDERR_TAIL} "$E"; printf "\\n%s-end %s\\n" "$T" {i}')
    return "\n".join(lines) + "\nexit 0\n"


def parse_probe_stderr(output: str, token: str) -> dict[int, str]:
    """index -> the stderr tail of each probe, from probe-script output."""
    pattern = re.compile(rf"^{re.escape(token)}-err (\d+)\n(.*?)\n{re.escape(token)}-end \1$", re.M | re.S)
    return {int(m.group(1)): m.group(2) for m in pattern.finditer(output)}


# --------------------------------------------------------------------------------------------
# A script as data

ScriptKind = Literal["facts", "batch", "probes"]
#: (stdout, stderr, exit status) of one argv, as the script's shell would have run it.
Answer = Callable[[tuple[str, ...]], tuple[bytes, bytes, int]]
#: Store an upload that arrived whole: (path, content, mode).
Store = Callable[[str, bytes, str], None]


@dataclass(frozen=True)
class Script:
    """A framed script: its kind, its per-run token, its items, and the text ``sh -c`` runs."""

    kind: ScriptKind
    token: str
    items: tuple[BatchItem, ...]

    @classmethod
    def facts(cls, commands: Sequence[Sequence[str]], token: str | None = None) -> Script:
        return cls("facts", token or new_token(), tuple(BatchItem(argv=tuple(c)) for c in commands))

    @classmethod
    def batch(cls, items: Sequence[BatchItem], token: str | None = None) -> Script:
        return cls("batch", token or new_token(), tuple(items))

    @classmethod
    def probes(cls, commands: Sequence[Sequence[str]], token: str | None = None) -> Script:
        return cls("probes", token or new_token(), tuple(BatchItem(argv=tuple(c)) for c in commands))

    @cached_property
    def text(self) -> str:
        if self.kind == "facts":
            return fact_script([i.argv for i in self.items], self.token)
        if self.kind == "probes":
            return probe_script([i.argv for i in self.items], self.token)
        return batch_script(self.items, self.token)

    @property
    def combine_stderr(self) -> bool:
        """A batch merges stderr into its output (``exec 2>&1``)."""
        return self.kind == "batch"

    def argv(self) -> list[str]:
        return ["sh", "-c", self.text]

    def replay(self, answer: Answer, store: Store, stdin: bytes = b"",
               emit: Callable[[bytes], None] | None = None) -> tuple[bytes, bytes, int]:
        """(stdout, stderr, exit status) the shell would give for this script, each command answered by
        ``answer`` (with the argv the shell would exec) and each whole upload handed to ``store``.

        ``emit`` receives the output as it is produced, one framed item at a time.
        """
        out: list[bytes] = []
        err: list[bytes] = []

        def say(data: bytes) -> None:
            out.append(data)
            if emit is not None and data:
                emit(data)

        pos = 0
        for i, item in enumerate(self.items):
            say(f"{self.token} {i}\n".encode())  # before the command runs, as printf does
            if item.upload is not None:
                path, size, sha, mode = item.upload
                content = stdin[pos:pos + size]
                pos += len(content)
                actual = hashlib.sha256(content).hexdigest()
                if actual != sha:
                    body, rc = f"mf_put: sha256 of {path} is {actual}, expected {sha} (upload torn)\n".encode(), 86
                else:
                    store(path, content, mode)
                    body, rc = b"", 0
                say(body + f"\n{self.token}-rc {i} {rc}\n".encode())
            else:
                argv = item.argv
                if self.kind == "batch" and item.timeout:
                    argv = ("timeout", "-k", "10", f"{item.timeout:g}", *argv)
                stdout, stderr, rc = answer(tuple(argv))
                end = f"\n{self.token}-rc {i} {rc}\n".encode()
                if self.kind == "facts":
                    err.append(stderr)
                    say(stdout + end)
                elif self.kind == "batch":
                    say(stdout + stderr + end)
                else:
                    tail = stderr[-PROBE_STDERR_TAIL:]
                    say(stdout + end + f"{self.token}-err {i}\n".encode() + tail
                        + f"\n{self.token}-end {i}\n".encode())
            if self.kind == "batch" and rc not in item.ok_codes:
                return b"".join(out), b"".join(err), 97
        return b"".join(out), b"".join(err), 0
