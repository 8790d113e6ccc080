"""The one text-file reader and the limited YAML loader: every bad file is a BadFileError naming the path
and where (byte offset for bad bytes, line and column for YAML), never a UnicodeDecodeError or a
RecursionError, and the loaders of specs, inventories and quarantine files all go through them."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from metalfleet.bootstrap.acceptance.quarantine import load_quarantine
from metalfleet.bootstrap.inventory import load_inventory, load_target
from metalfleet.providers import InvalidSpecError, load_spec
from metalfleet.providers.spec import load_yaml
from metalfleet.providers.textfile import MAX_YAML_BYTES, BadFileError, read_text_file
from metalfleet.providers.yamlfile import MAX_ALIAS_NODES, MAX_YAML_DEPTH

SPEC = "name: demo\nprovider: fake\nregion: local-1\noffering: fake.8xh100\ncount: 2\nimage: i\n"


def _file(tmp_path: Path, data: bytes | str, name: str = "f.yaml") -> Path:
    p = tmp_path / name
    if isinstance(data, str):
        p.write_text(data, encoding="utf-8")
    else:
        p.write_bytes(data)
    return p


def _bad(fn: Callable[[], object]) -> BadFileError:
    with pytest.raises(BadFileError) as info:
        fn()
    err = info.value
    assert isinstance(err, InvalidSpecError) and err.field == "path"
    assert "\n" not in str(err), "one line"
    return err


# ------------------------------------------------------------------------------------- bytes


@pytest.mark.parametrize(("data", "offset", "reason"), [
    (b"name: x\n\xff\n", 8, "invalid start byte"),
    (b"\xc3(", 0, "invalid continuation byte"),
    (b"ab\xe2\x82", 2, "unexpected end of data"),       # a 3-byte character cut off at the end
    (b"a\xc0\xaf", 1, "invalid start byte"),            # overlong encoding of '/'
    (b"x\xed\xa0\x80y", 1, "invalid continuation byte"),  # an encoded surrogate
    (b"caf\xe9\n", 3, "invalid continuation byte"),      # Latin-1 text
])
def test_bytes_that_are_not_utf8_name_the_file_and_offset(tmp_path: Path, data: bytes, offset: int,
                                                          reason: str) -> None:
    p = _file(tmp_path, data)
    err = _bad(lambda: read_text_file(p, "cluster spec"))
    assert err.offset == offset and err.path == str(p)
    assert str(err) == f"cluster spec {p} is not UTF-8 text: byte 0x{data[offset]:02x} at byte offset {offset} " \
                       f"({reason})"


@pytest.mark.parametrize(("data", "offset", "binary"), [
    (b"abc\x00def", 3, True),
    (b"\x00\xff", 0, True),     # the first bad byte is the NUL
    (b"ok\xff\x00", 2, False),  # the first bad byte is the 0xff
    (b"\x89PNG\r\n\x1a\n\x00\x00", 0, False),
])
def test_binary_files_report_the_first_bad_byte(tmp_path: Path, data: bytes, offset: int, binary: bool) -> None:
    err = _bad(lambda: read_text_file(_file(tmp_path, data), "inventory"))
    assert err.offset == offset and f"at byte offset {offset}" in str(err)
    assert ("is binary, not text: NUL byte" in str(err)) is binary


def test_utf16_gets_a_hint_and_a_utf8_bom_is_fine(tmp_path: Path) -> None:
    err = _bad(lambda: load_spec(_file(tmp_path, SPEC.encode("utf-16"))))
    assert err.offset == 0 and "looks like UTF-16" in str(err)
    spec = load_spec(_file(tmp_path, b"\xef\xbb\xbf" + SPEC.encode()))
    assert spec.name == "demo"


@pytest.mark.parametrize("data", [b"", b"  \n\t\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf\n"])
def test_an_empty_file_is_an_error_unless_allowed(tmp_path: Path, data: bytes) -> None:
    p = _file(tmp_path, data)
    err = _bad(lambda: load_spec(p))
    assert str(err) == f"cluster spec {p} is empty"
    assert read_text_file(p, "x", allow_empty=True).strip("\ufeff \n\t") == ""


def test_a_file_with_only_comments_holds_no_document(tmp_path: Path) -> None:
    p = _file(tmp_path, "# nothing yet\n\n")
    assert "holds no YAML document" in str(_bad(lambda: load_spec(p)))
    assert load_yaml(p, "quarantine file", allow_empty=True) is None


def test_missing_directory_and_not_a_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert str(_bad(lambda: load_spec(missing))) == f"cannot read cluster spec {missing}: no such file"
    assert str(_bad(lambda: load_spec(tmp_path))) == f"cannot read cluster spec {tmp_path}: it is a directory, " \
                                                     "not a file"
    under_file = _file(tmp_path, SPEC) / "x.yaml"
    assert "no such file (a part of the path is not a directory)" in str(_bad(lambda: load_spec(under_file)))


def test_too_large_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:  # sparse: nothing is written, the size alone is too large
        fh.truncate(MAX_YAML_BYTES + 1)
    assert str(_bad(lambda: load_spec(big))) == f"cluster spec {big} is too large ({MAX_YAML_BYTES + 1} bytes; " \
                                                f"the limit is {MAX_YAML_BYTES})"
    # A device that never ends is read only up to the limit.
    assert "is too large (more than" in str(_bad(lambda: read_text_file("/dev/zero", "cluster spec", limit=4096)))


def test_a_pipe_is_read_like_a_file(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w", encoding="utf-8") as fh:
            fh.write(SPEC)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        assert load_spec(fifo).count == 2
    finally:
        writer.join(timeout=10)


@pytest.fixture()
def world_traversable_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="mf-perm-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)


def _run_as_nobody(fn: Callable[[], str]) -> str:
    """``fn()`` in a forked child running as uid/gid 65534 (root is never refused a read)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            msg = fn()
        except BaseException as exc:
            msg = f"unexpected {type(exc).__name__}: {exc}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def test_permission_denied_names_the_file(world_traversable_dir: Path) -> None:
    p = world_traversable_dir / "secret.yaml"
    p.write_text(SPEC)
    os.chmod(p, 0o600 if os.geteuid() == 0 else 0o000)

    def attempt() -> str:
        try:
            load_spec(p)
        except BadFileError as exc:
            return str(exc)
        return "read succeeded"

    msg = _run_as_nobody(attempt) if os.geteuid() == 0 else attempt()
    assert msg == f"cannot read cluster spec {p}: permission denied"


# -------------------------------------------------------------------------------------- YAML


def test_truncated_yaml_gives_line_and_column(tmp_path: Path) -> None:
    p = _file(tmp_path, "name: demo\ntags: {a: [1, 2\n")
    err = _bad(lambda: load_spec(p))
    assert (err.line, err.column) == (3, 1)
    assert str(err).startswith(f"cluster spec {p} is not valid YAML at line 3, column 1: expected ',' or ']'")
    quoted = _file(tmp_path, 'name: demo\nimage: "ami-01', "q.yaml")
    assert "found unexpected end of stream" in str(_bad(lambda: load_spec(quoted)))


@pytest.mark.parametrize("style", ["flow", "block"])
def test_nesting_is_limited_with_a_location(tmp_path: Path, style: str) -> None:
    def doc(depth: int) -> str:
        if style == "flow":
            return "a: " + "[" * depth + "]" * depth + "\n"
        return "".join("  " * i + f"k{i}:\n" for i in range(depth)) + "  " * depth + "v\n"

    ok = _file(tmp_path, doc(MAX_YAML_DEPTH - 2), "ok.yaml")
    assert isinstance(load_yaml(ok, "x"), dict)
    # 20,000 levels would blow Python's recursion limit without the check (block style: 500, as its text
    # grows with the square of the depth).
    for depth in (MAX_YAML_DEPTH + 1, 20_000 if style == "flow" else 500):
        err = _bad(lambda d=depth: load_yaml(_file(tmp_path, doc(d)), "cluster spec"))  # type: ignore[misc]
        assert f"nested deeper than {MAX_YAML_DEPTH} levels" in str(err)
        assert err.line is not None and err.column is not None


def _laughs(levels: int, width: int = 9) -> str:
    out = "a0: &a0 [" + ", ".join(['"lol"'] * width) + "]\n"
    for i in range(1, levels):
        out += f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]\n"
    return out


def test_an_alias_bomb_is_refused_where_it_explodes(tmp_path: Path) -> None:
    err = _bad(lambda: load_yaml(_file(tmp_path, _laughs(10)), "inventory"))  # 9**10 strings if expanded
    assert f"aliases expand to more than {MAX_ALIAS_NODES} nodes" in str(err)
    assert err.line == 6  # 9**5 * ... : the level whose expansion first passes the limit


def test_recursive_alias_is_refused(tmp_path: Path) -> None:
    err = _bad(lambda: load_yaml(_file(tmp_path, "a: &a [1, *a]\n"), "inventory"))
    assert "alias *a refers to a node that contains it" in str(err) and (err.line, err.column) == (1, 11)


def test_ordinary_anchors_and_merges_still_work(tmp_path: Path) -> None:
    text = ("defaults: &d {user: ubuntu, port: 22}\nhosts:\n"
            + "".join(f"  - {{<<: *d, name: n{i}, address: 10.0.0.{i}, port: 2222}}\n" for i in range(200)))
    doc = load_yaml(_file(tmp_path, text), "inventory")
    assert len(doc["hosts"]) == 200 and doc["hosts"][5] == {"user": "ubuntu", "port": 2222, "name": "n5",
                                                             "address": "10.0.0.5"}
    assert len(load_yaml(_file(tmp_path, _laughs(4), "small.yaml"), "x")["a3"]) == 9  # 9**4 = 6561 nodes: fine


def test_duplicate_keys_are_refused_naming_both_lines(tmp_path: Path) -> None:
    p = _file(tmp_path, SPEC + "count: 200\n")
    err = _bad(lambda: load_spec(p))
    assert str(err) == f"cluster spec {p}, line 7, column 1: duplicate key 'count' (first given at line 5)"
    hosts = _file(tmp_path, "hosts:\n  n0: {address: 10.0.0.1}\n  n0: {address: 10.0.0.2}\n", "inv.yaml")
    assert "duplicate key 'n0' (first given at line 2)" in str(_bad(lambda: load_inventory(hosts)))
    # 1 and "1" are different keys; a key brought in by a merge may be overridden.
    assert load_yaml(_file(tmp_path, "m: {1: a, '1': b}\n", "k.yaml"), "x") == {"m": {1: "a", "1": "b"}}


@pytest.mark.parametrize(("text", "where", "what"), [
    ("count: " + "9" * 5000 + "\n", (1, 8), "Exceeds the limit (4300 digits)"),
    ("name: x\ncreated: 2024-13-45\n", (2, 10), "month must be in 1..12"),
    ("name: a\x07b\n", (1, 8), "character U+0007 is not allowed (byte offset 7)"),
    ("x: !!python/object:os.system ls\n", (1, 4), "could not determine a constructor"),
    ("? [a, b]\n: c\n", (1, 3), "found unhashable key"),
])
def test_values_yaml_cannot_build_are_located_errors(tmp_path: Path, text: str, where: tuple[int, int],
                                                     what: str) -> None:
    err = _bad(lambda: load_yaml(_file(tmp_path, text), "cluster spec"))
    assert (err.line, err.column) == where and what in str(err), str(err)
    assert "set_int_max_str_digits" not in str(err)


def test_the_byte_offset_of_a_yaml_character_counts_bytes_and_the_bom(tmp_path: Path) -> None:
    err = _bad(lambda: load_yaml(_file(tmp_path, b"\xef\xbb\xbfname: \xc3\xa9\x07\n"), "x"))
    assert err.offset == 3 + 6 + 2  # BOM, "name: ", the two bytes of the e-acute


def test_non_mapping_top_levels_are_typed_errors(tmp_path: Path) -> None:
    for text in ("- a\n- b\n", "just a string\n", "42\n"):
        p = _file(tmp_path, text)
        with pytest.raises(InvalidSpecError) as spec_err:
            load_spec(p)
        assert spec_err.value.field == "(top level)" and "top level must be a mapping" in str(spec_err.value)
        with pytest.raises(InvalidSpecError) as target_err:
            load_target(p)
        assert target_err.value.field == "(top level)" and "not a mapping" in str(target_err.value)


def test_every_yaml_loader_goes_through_the_reader(tmp_path: Path) -> None:
    p = _file(tmp_path, b"hosts: []\n\xfe")
    for load in (load_spec, load_inventory, load_target, load_quarantine):
        err = _bad(lambda fn=load: fn(p))  # type: ignore[misc]
        assert err.offset == 10 and str(p) in str(err)
    assert load_quarantine(tmp_path / "not-there-yet.yaml") == {}
