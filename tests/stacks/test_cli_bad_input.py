"""Every `metalfleet` command that reads a file, fed random bytes, text with bad bytes in it, truncated
YAML and deeply nested YAML: exit 2 and a typed error that names the file and says where (the byte
offset, the line and column, or the field), never a traceback.

The property tests call the CLI's ``main(argv)`` in-process (fast): each example goes to one of the spec
commands (validate, order, release, up, preview, refresh, destroy: drawn per example, since they share one
loader), bootstrap, verify, verify --from-dir and parse (a drawn kind). ``test_every_spec_command_*``
runs all of them on one input of each class, and ``test_the_console_script_*`` runs the installed
``metalfleet`` entry point once per command and checks it prints exactly what ``main(argv)`` prints.

None of the inputs can be a valid spec or inventory (see the strategies), so no command ever reaches a
cloud driver, the Pulumi engine or SSH.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metalfleet.bootstrap.acceptance.offline import parse_file
from metalfleet.bootstrap.inventory import load_target
from metalfleet.bootstrap.parsers import PARSERS, ParseError
from metalfleet.providers import InvalidSpecError, load_spec
from metalfleet.providers.textfile import BadFileError
from metalfleet.providers.yamlfile import MAX_YAML_DEPTH
from metalfleet.stacks.cli import main

SPEC_COMMANDS = ("validate", "order", "release", "up", "preview", "refresh", "destroy")
TARGET_COMMANDS = ("bootstrap", "verify")
KINDS = ("auto", *sorted(PARSERS))

#: A valid spec whose last value is quoted: every strict prefix that drops the closing quote is invalid
#: (no image, or an unterminated string), so a truncation can never order anything.
SPEC_TEXT = ('name: demo\nprovider: fake\nregion: local-1\noffering: fake.8xh100\ncount: 2\n'
             'tags: {team: ml, cost-center: "42"}\nimage: "ami-0123456789abcdef0"\n')
#: A valid inventory whose hosts are one flow sequence closing at the very end: a prefix is never valid.
INVENTORY_TEXT = ("defaults: {user: ubuntu, provider: aws, offering: p5.48xlarge}\nknown_hosts: /tmp/kh\n"
                  "hosts: [{name: n0, address: 10.0.0.1, port: 22}, {name: n1, address: 10.0.0.2}]\n")
#: What a message may cite as the place of the fault.
LOCATION = re.compile(r"byte offset \d+|line \d+|column \d+|top level|^  \S+: |is empty$|holds no YAML document",
                      re.M)


@dataclass(frozen=True)
class Outcome:
    rc: int
    out: str
    err: str


def run_main(argv: list[str]) -> Outcome:
    """``main(argv)`` in-process: its exit code (argparse's too: it refuses a flag's value by SystemExit), stdout
    and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = int(exc.code or 0)
    return Outcome(rc, out.getvalue(), err.getvalue())


def _typed(fn: Callable[[], object]) -> Exception:
    """The error ``fn`` raises: it must be one of ours and carry a location."""
    try:
        fn()
    except BadFileError as exc:
        whole_file = re.search(r"is empty$|holds no YAML document|is too large", str(exc))
        assert exc.offset is not None or exc.line is not None or whole_file, f"no location: {exc}"
        return exc
    except InvalidSpecError as exc:
        assert exc.field, f"no field: {exc}"
        return exc
    except ParseError as exc:
        assert exc.tool and not exc.internal, str(exc)
        return exc
    raise AssertionError("expected a typed error")


def _first_bad_byte(data: bytes) -> int | None:
    """Where Python's own UTF-8 decoder (or a NUL) first objects; None for clean text."""
    nul = data.find(b"\x00")
    try:
        data.decode("utf-8")
        bad = None
    except UnicodeDecodeError as exc:
        bad = exc.start
    found = [i for i in (nul if nul >= 0 else None, bad) if i is not None]
    return min(found) if found else None


def _check_error(res: Outcome, path: Path, argv: list[str]) -> None:
    assert "Traceback" not in res.err and "Traceback" not in res.out, f"{argv}: {res.err}"
    assert res.rc == 2, f"{argv}: rc {res.rc}, stderr {res.err!r}"
    assert str(path) in res.err, f"{argv}: the error does not name {path}: {res.err!r}"
    assert 1 <= len(res.err.splitlines()) <= 12, f"{argv}: not one line or a short block: {res.err!r}"
    # A parse error names the tool, and the line when one line is at fault; anything else says where.
    assert res.err.startswith("parse error: ") or LOCATION.search(res.err), f"{argv}: no location in {res.err!r}"


def check_every_command(folder: Path, data: bytes, kind: str, saved_name: str,
                        spec_commands: tuple[str, ...] = SPEC_COMMANDS) -> None:
    """Run the file-reading commands on ``data`` and check each answer against the typed error."""
    path = folder / "input.yaml"
    path.write_bytes(data)
    saved_dir = folder / "saved"
    saved_dir.mkdir(exist_ok=True)
    for old in saved_dir.iterdir():
        old.unlink()
    (saved_dir / saved_name).write_bytes(data)
    bad = _first_bad_byte(data)

    spec_err = _typed(lambda: load_spec(path))
    target_err = _typed(lambda: load_target(path))
    for exc in (spec_err, target_err):
        if bad is not None:
            assert isinstance(exc, BadFileError) and exc.offset == bad, str(exc)
    for command in spec_commands:
        res = run_main([command, str(path)])
        _check_error(res, path, [command])
        assert res.err == f"error: {spec_err}\n"
    for command in TARGET_COMMANDS:
        res = run_main([command, str(path)])
        _check_error(res, path, [command])
        assert res.err == f"error: {target_err}\n"

    res = run_main(["verify", "--from-dir", str(saved_dir), "--offering", "p5.48xlarge"])
    if bad is None and saved_name == UNNAMED:  # clean text no rule recognises is not evidence: ignored
        assert res.rc in (1, 2) and "Traceback" not in res.err, res.err
    else:
        _check_error(res, saved_dir / saved_name, ["verify", "--from-dir"])
    if bad is not None:
        assert f"byte offset {bad}" in res.err

    try:
        parse_file(kind, path)
        parsed = True
    except (BadFileError, ParseError):
        parsed = False
    res = run_main(["parse", kind, str(path)])
    assert "Traceback" not in res.err
    if parsed:  # some outputs are legitimately empty (nvidia-smi nvlink on a GPU without NVLink)
        assert res.rc == 0 and bad is None, res.err
    else:
        parse_err = _typed(lambda: parse_file(kind, path))
        _check_error(res, path, ["parse", kind])
        if bad is not None:
            assert isinstance(parse_err, BadFileError) and parse_err.offset == bad


_SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
UNNAMED = "capture.log"  # no name rule: the content decides (sniffed)
_SAVED_NAMES = st.sampled_from(["nvidia-smi.txt", "all_reduce_perf.txt", "ibstat.txt", UNNAMED])
_SPEC_COMMAND = st.sampled_from(SPEC_COMMANDS).map(lambda c: (c,))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-input")


@_SETTINGS
@given(data=st.binary(max_size=600), kind=st.sampled_from(KINDS), saved_name=_SAVED_NAMES,
       spec_command=_SPEC_COMMAND)
def test_random_bytes(folder: Path, data: bytes, kind: str, saved_name: str,
                 spec_command: tuple[str]) -> None:
    check_every_command(folder, data, kind, saved_name, spec_command)


@st.composite
def spliced(draw: st.DrawFn) -> bytes:
    """A spec or inventory with bytes that are not UTF-8 text (or a NUL) put in somewhere."""
    text = draw(st.sampled_from([SPEC_TEXT, INVENTORY_TEXT])).encode()
    at = draw(st.integers(0, len(text)))
    bad = draw(st.sampled_from([b"\x00", b"\xff", b"\xfe", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\x80",
                                b"\xf8\x88\x80\x80\x80"]))
    junk = draw(st.binary(max_size=8))
    return text[:at] + junk + bad + text[at:]


@_SETTINGS
@given(data=spliced(), kind=st.sampled_from(KINDS), saved_name=_SAVED_NAMES,
       spec_command=_SPEC_COMMAND)
def test_bad_bytes_inside_a_real_spec_or_inventory(folder: Path, data: bytes, kind: str, saved_name: str,
                                                   spec_command: tuple[str]) -> None:
    assert _first_bad_byte(data) is not None
    check_every_command(folder, data, kind, saved_name, spec_command)


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from([SPEC_TEXT, INVENTORY_TEXT]))
    return text[: draw(st.integers(0, len(text) - 2))].encode()  # always drops the final quote/bracket


@settings(max_examples=40, deadline=None, derandomize=True)
@given(data=truncated(), kind=st.sampled_from(KINDS), saved_name=_SAVED_NAMES,
       spec_command=_SPEC_COMMAND)
def test_truncated_yaml(folder: Path, data: bytes, kind: str, saved_name: str,
                 spec_command: tuple[str]) -> None:
    check_every_command(folder, data, kind, saved_name, spec_command)


@st.composite
def nested(draw: st.DrawFn) -> tuple[bytes, int]:
    """A spec or inventory with a nested value under an unknown key (so it is never valid), or a bare one."""
    depth = draw(st.one_of(st.integers(1, MAX_YAML_DEPTH + 8), st.integers(MAX_YAML_DEPTH, 3000)))
    style = draw(st.sampled_from(["flow-list", "flow-map", "block"]))
    if style == "flow-list":
        value = "[" * depth + "1" + "]" * depth
    elif style == "flow-map":
        value = "{k: " * depth + "1" + "}" * depth
    else:
        depth = min(depth, 300)  # block text grows with the square of the depth
        value = "\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(depth)) + "  " * (depth + 1) + "v"
    where = draw(st.sampled_from(["spec", "inventory", "top"]))
    if where == "top":
        return (value.lstrip("\n") + "\n").encode(), depth
    base = SPEC_TEXT if where == "spec" else INVENTORY_TEXT
    return (base + f"nested: {value}\n").encode(), depth + 1


@_SETTINGS
@given(doc=nested(), kind=st.sampled_from(KINDS), saved_name=_SAVED_NAMES,
       spec_command=_SPEC_COMMAND)
def test_deeply_nested_yaml(folder: Path, doc: tuple[bytes, int], kind: str, saved_name: str,
                            spec_command: tuple[str]) -> None:
    data, depth = doc
    check_every_command(folder, data, kind, saved_name, spec_command)
    err = _typed(lambda: load_spec(folder / "input.yaml"))
    if depth > MAX_YAML_DEPTH + 1:
        assert isinstance(err, BadFileError) and f"nested deeper than {MAX_YAML_DEPTH} levels" in str(err)
        assert err.line is not None and err.column is not None
    elif depth <= MAX_YAML_DEPTH - 1:
        assert not isinstance(err, BadFileError), str(err)  # loaded fine, refused by the spec's schema


def test_every_spec_command_on_one_input_of_each_class(folder: Path) -> None:
    inputs = [b"\x89PNG\r\n\x1a\n\x00", SPEC_TEXT.encode()[:30] + b"\xc0" + SPEC_TEXT.encode()[30:],
              SPEC_TEXT.encode()[:-5], (SPEC_TEXT + "nested: " + "{k: " * 200 + "1" + "}" * 200 + "\n").encode(),
              (SPEC_TEXT + "nested: [[[1]]]\n").encode(), b"", b"- a list\n"]
    for i, data in enumerate(inputs):
        check_every_command(folder, data, KINDS[i % len(KINDS)], "nvidia-smi.txt")


# ------------------------------------------------------------------------- the real entry point


def _console_script() -> Path:
    script = Path(sys.executable).with_name("metalfleet")
    if not script.is_file():
        pytest.fail(f"missing prerequisite: the metalfleet console script is not at {script} "
                    "(install the project: `make venv`, or `pip install -e .`)", pytrace=False)
    return script


def test_the_console_script_answers_every_command_like_main(tmp_path: Path) -> None:
    bad_bytes = tmp_path / "bad.yaml"
    bad_bytes.write_bytes(SPEC_TEXT.encode()[:20] + b"\xff\xfe" + SPEC_TEXT.encode()[20:])
    nul = tmp_path / "nul.yaml"
    nul.write_bytes(SPEC_TEXT.encode()[:33] + b"\x00" + SPEC_TEXT.encode()[33:])
    deep = tmp_path / "deep.yaml"
    deep.write_text(SPEC_TEXT + "nested: " + "[" * 500 + "]" * 500 + "\n")
    truncated_spec = tmp_path / "cut.yaml"
    truncated_spec.write_text(SPEC_TEXT[:-4])
    truncated_inv = tmp_path / "inv.yaml"
    truncated_inv.write_text(INVENTORY_TEXT[:-3])
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "nvidia-smi.txt").write_bytes(b"+---+\n| NVIDIA-SMI 550 \x00\n")
    garbage = tmp_path / "nccl.txt"
    garbage.write_text("# nThread 1\n# not a result\n")
    cases = {  # one process per command, each with another kind of bad input
        ("validate", str(bad_bytes)): "is not UTF-8 text: byte 0xff at byte offset 20",
        ("order", str(truncated_spec)): "is not valid YAML at line 7, column 28: found unexpected end of stream",
        # "nested: " is 8 columns; the top mapping is level 1, so the 64th "[" opens level 65.
        ("release", str(deep)): f"line 8, column {8 + MAX_YAML_DEPTH}: nested deeper than {MAX_YAML_DEPTH}",
        ("up", str(nul)): "is binary, not text: NUL byte at byte offset 33",
        ("preview", str(bad_bytes)): "byte offset 20",
        ("refresh", str(truncated_spec)): "found unexpected end of stream",
        ("destroy", str(deep)): "nested deeper than",
        ("bootstrap", str(deep)): "nested deeper than",
        ("verify", str(truncated_inv)): "is not valid YAML at line 3",
        ("verify", "--from-dir", str(saved), "--offering", "p5.48xlarge"): "NUL byte at byte offset 23",
        ("parse", "nccl-tests", str(garbage)): "parse error: nccl-tests: no result rows",
    }
    script = _console_script()
    procs = {argv: subprocess.Popen([str(script), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv in cases}
    for argv, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        expected = run_main(list(argv))
        assert "Traceback" not in err, f"{argv}: {err}"
        assert (proc.returncode, out, err) == (2, "", expected.err), argv
        assert expected.rc == 2 and cases[argv] in err and len(err.splitlines()) == 1, (argv, err)


def test_a_known_hosts_file_that_is_not_text_stops_the_run_before_any_host(tmp_path: Path) -> None:
    """The inventory is fine; the known_hosts file it names is not text. Both live commands refuse before
    the first connection (the host, port 9 on loopback, would otherwise fail as unreachable: exit 1)."""
    known = tmp_path / "known_hosts"
    known.write_bytes(b"10.0.0.1 ssh-ed25519 AAAAC3Nz\n\xff\xfe garbage\n")
    inv = tmp_path / "hosts.yaml"
    inv.write_text(f"known_hosts: {known}\nhosts: [{{name: n0, address: 127.0.0.1, port: 9, provider: aws, "
                   "offering: p5.48xlarge}]\n")
    expected = f"error: known_hosts file {known} is not UTF-8 text: byte 0xff at byte offset 30 (invalid start byte)\n"
    for argv in (["bootstrap", str(inv), "--log-dir", str(tmp_path / "logs")], ["verify", str(inv)]):
        res = run_main(argv)
        assert (res.rc, res.err) == (2, expected), argv


def test_a_quarantine_file_that_is_not_text_stops_verify_before_any_host(tmp_path: Path) -> None:
    quarantine = tmp_path / "quarantine.yaml"
    quarantine.write_bytes(b"quarantined:\n  n0: {reason: \x00}\n")
    inv = tmp_path / "hosts.yaml"
    inv.write_text("hosts: [{name: n0, address: 127.0.0.1, port: 9, provider: aws, offering: p5.48xlarge}]\n")
    res = run_main(["verify", str(inv), "--quarantine-file", str(quarantine)])
    assert (res.rc, res.out) == (2, "")
    assert res.err == f"error: quarantine file {quarantine} is binary, not text: NUL byte at byte offset 28\n"
    quarantine.write_text("quarantined:\n  n0: {reason: a}\n  n0: {reason: b}\n")
    res = run_main(["verify", str(inv), "--quarantine-file", str(quarantine)])
    assert (res.rc, res.err) == (2, f"error: quarantine file {quarantine}, line 3, column 3: duplicate key 'n0' "
                                    "(first given at line 2)\n")
