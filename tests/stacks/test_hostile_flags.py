"""Hostile files and loose values behind every file-reading flag of `metalfleet` (issue 19, item 8).

A deterministic fuzz (fixed seed, a few dozen cases per flag) through the real CLI entry point, in-process
(``main(argv)``): ``--catalog`` and ``$METALFLEET_CATALOG`` on offerings, plan and catalogue refresh; the plan's
requirements file; the spec's numbers; ``--driver-config`` on order, release and bootstrap; ``--out`` and
``--plot``; the numeric flags. Each answer must be exit 2, one line on stderr that names the flag (or file) and
what is wrong, no traceback, and nothing written anywhere but where the user said.

Bad files are answered by the one reader every user file goes through (providers/textfile.py); numeric flags
by argparse (exit 2, one ``error: argument --top: ... (see metalfleet plan --help)`` line).
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from metalfleet.providers.catalog import catalog_document
from tests.stacks.test_cli_bad_input import Outcome, run_main

SEED = 19
SPEC = ('name: demo\nprovider: fake\nregion: local-1\noffering: fake.8xh100\ncount: 2\n'
        'tags: {team: ml, cost-center: "42"}\nimage: img-fake\n')
REQUIREMENTS = "nodes: 1\ngpu: H100\nproviders: [aws]\nduration: {days: 2}\n"


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working directory with no catalogue variable; the test checks nothing appears in it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("METALFLEET_CATALOG", raising=False)
    yield work
    assert tree(work) == set(), f"written into the working directory: {tree(work)}"


def one_line_error(res: Outcome, argv: list[str], *names: str) -> str:
    """Exit 2, one ``error: ...`` line naming each of ``names``, no traceback; the line."""
    assert "Traceback" not in res.err + res.out, f"{argv}: {res.err}"
    assert res.rc == 2, f"{argv}: rc {res.rc}, stderr {res.err!r}"
    lines = res.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{argv}: not one error line: {res.err!r}"
    for name in names:
        assert name in lines[0], f"{argv}: the error does not name {name!r}: {lines[0]!r}"
    return lines[0]


def argparse_error(res: Outcome, argv: list[str], flag: str, value: str) -> None:
    """Exit 2, one argparse line naming the flag and the value; no traceback."""
    assert "Traceback" not in res.err, f"{argv}: {res.err}"
    assert res.rc == 2, f"{argv}: rc {res.rc}, stderr {res.err!r}"
    last = res.err.splitlines()[-1]
    assert "error: argument " + flag in last and value in last, f"{argv}: {last!r}"


# -- hostile catalogue files ------------------------------------------------------------------------

def _catalog_json(**change: object) -> str:
    doc = catalog_document()
    doc.update(change)
    return json.dumps(doc)


def _entry_change(key: str, value: object) -> str:
    doc = catalog_document()
    doc["offerings"][0][key] = value
    return json.dumps(doc)


def _price_change(value: object) -> str:
    doc = catalog_document()
    table = doc["price_lists"][0]["regions"]
    region = next(iter(table))
    name = next(iter(table[region]))
    table[region][name][next(iter(table[region][name]))] = value
    return json.dumps(doc)


def hostile_catalogs(folder: Path) -> list[tuple[str, Path, str]]:
    """(case, path, a word its error must contain): every kind of bad catalogue file, made in ``folder``."""
    rng = random.Random(SEED)
    good = json.dumps(catalog_document())
    cases: list[tuple[str, bytes | None, str]] = []
    for i in range(8):  # random bytes of growing length: binary, never UTF-8 text
        blob = bytes(rng.randrange(256) for _ in range(16 << i))
        cases.append((f"random-{i}", b"\x00" + blob if i % 2 else b"\xff" + blob, "byte offset"))
    cases += [
        ("utf16-bom", good.encode("utf-16"), "UTF-16"),
        ("utf16-be-bom", b"\xfe\xff" + good.encode("utf-16-be"), "UTF-16"),
        ("nul-inside", good[:100].encode() + b"\x00" + good[100:].encode(), "NUL byte at byte offset 100"),
        ("latin1", good.encode() + " caf\xe9".encode("latin-1"), "not UTF-8"),
        ("deep-arrays", b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
        ("deep-objects", b'{"a":' * 200_000 + b"1" + b"}" * 200_000, "nested too deeply"),
        ("empty", b"", "is empty"),
        ("blank", b"  \n\t\n", "is empty"),
        ("truncated", good[: len(good) // 2].encode(), "not valid JSON at line"),
        ("yaml-not-json", b"schema: 1\nofferings: []\n", "not valid JSON at line 1"),
        ("nan", _catalog_json(x=0).replace('"x": 0', '"x": NaN').encode(), "NaN"),
        ("infinity", _price_change(12345.678).replace("12345.678", "Infinity").encode(), "Infinity"),
        ("overflow", b'{"schema": 1, "offerings": [], "price_lists": [], "x": 1e400}', "out of range"),
        ("long-int", b'{"schema": ' + b"9" * 5000 + b"}", "digits"),
        ("duplicate-key", b'{"schema": 1, "offerings": [], "schema": 1}', "duplicate key 'schema'"),
        ("top-list", b"[1, 2, 3]", "(top level)"),
        ("schema-true", _catalog_json(schema=True).encode(), "schema"),
        ("offerings-number", _catalog_json(offerings=5).encode(), "offerings: must be a list"),
        ("price-lists-mapping", _catalog_json(price_lists={"a": 1}).encode(), "price_lists: must be a list"),
        ("regions-list", _catalog_json(price_lists=[{"provider": "aws", "currency": "USD", "as_of": "2025-01-01",
                                                     "source": "x", "regions": [1]}]).encode(), "regions"),
        ("gpu-count-true", _entry_change("gpu_count", True).encode(), "offerings.0.gpu_count"),
        ("gpu-count-string", _entry_change("gpu_count", "8").encode(), "offerings.0.gpu_count"),
        ("gpu-count-negative", _entry_change("gpu_count", -8).encode(), "offerings.0.gpu_count"),
        ("gbps-bool", _entry_change("fabric_gbps", True).encode(), "offerings.0.fabric_gbps"),
        ("price-string", _price_change("3.2").encode(), "expected a price"),
        ("price-negative", _price_change(-1).encode(), "expected a price"),
        ("price-bool", _price_change(True).encode(), "expected a price"),
        ("directory", None, "it is a directory"),
        ("missing", None, "no such file"),
        ("missing-folder", None, "no such file"),
        ("dev-zero", None, "too large"),
    ]
    out = []
    for name, data, word in cases:
        path = folder / f"{name}.json"
        if name == "directory":
            path.mkdir()
        elif name == "missing-folder":
            path = folder / "no-such-folder" / "catalog.json"
        elif name == "dev-zero":
            path.symlink_to("/dev/zero")
        elif data is not None:
            path.write_bytes(data)
        out.append((name, path, word))
    return out


CATALOG_COMMANDS = {
    "offerings": lambda flag: ["offerings", *flag],
    "plan": lambda flag: ["plan", "REQ", *flag],
    "catalogue refresh": lambda flag: ["catalogue", "refresh", *flag, "--out", "OUT"],
}


#: Cases whose file reads as JSON: the error names the field at fault (and the file), not where the file came from.
STRUCTURAL = ("top-list", "schema-true", "offerings-number", "price-lists-mapping", "regions-list", "gpu-count-true",
              "gpu-count-string", "gpu-count-negative", "gbps-bool", "price-string", "price-negative", "price-bool")


# catalogue refresh starts from --catalog or the shipped catalogue, never from $METALFLEET_CATALOG.
@pytest.mark.parametrize(("command", "source"), [("offerings", "--catalog"), ("offerings", "$METALFLEET_CATALOG"),
                                                 ("plan", "--catalog"), ("plan", "$METALFLEET_CATALOG"),
                                                 ("catalogue refresh", "--catalog")])
def test_every_bad_catalogue_file_is_one_line_naming_it(command: str, source: str, tmp_path: Path, place: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    files.mkdir()
    req = tmp_path / "req.yaml"
    req.write_text(REQUIREMENTS)
    out = tmp_path / "refreshed.json"
    cases = hostile_catalogs(files)
    assert len(cases) >= 30
    before = tree(tmp_path)
    for name, path, word in cases:
        flag = ["--catalog", str(path)] if source == "--catalog" else []
        argv = [str(req) if a == "REQ" else str(out) if a == "OUT" else a for a in CATALOG_COMMANDS[command](flag)]
        if source != "--catalog":
            monkeypatch.setenv("METALFLEET_CATALOG", str(path))
        line = one_line_error(run_main(argv), [name, *argv], str(path), word)
        if name not in STRUCTURAL:
            assert source in line, f"{name}: the error does not say it came from {source}: {line!r}"
    assert tree(tmp_path) == before, "a refused catalogue left a file behind"


def test_a_catalogue_through_a_fifo_is_read_with_the_same_limits(tmp_path: Path, place: Path) -> None:
    """A FIFO (``--catalog <(...)``) is read, bounded, like a file: random bytes through it are one line too."""
    fifo = tmp_path / "catalog.fifo"
    os.mkfifo(fifo)
    rng = random.Random(SEED)
    payload = b"\xff" + bytes(rng.randrange(256) for _ in range(4096))

    def feed() -> None:
        with open(fifo, "wb") as fh:
            fh.write(payload)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    one_line_error(run_main(["offerings", "--catalog", str(fifo)]), ["fifo"], str(fifo), "byte offset 0")
    writer.join(timeout=30)
    assert not writer.is_alive()


def test_good_catalogues_still_read(tmp_path: Path, place: Path) -> None:
    """The refusals above are not a reader that refuses everything: the shipped catalogue, saved by a user with a
    UTF-8 byte order mark, lists the same offerings."""
    path = tmp_path / "catalog.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(catalog_document()).encode())
    res = run_main(["offerings", "--catalog", str(path), "--json"])
    assert res.rc == 0, res.err
    assert len(json.loads(res.out)) == len(catalog_document()["offerings"])


# -- loose values in the files the spec reader reads -----------------------------------------------------

LOOSE_SPECS = [
    ("count: true", "count: true", "count", "not a boolean"),
    ("count: '16'", "count: '16'", "count", "not a string"),
    ("count: 2.5", "count: 2.5", "count", "integer"),
    ("count: .inf", "count: .inf", "count", "count"),
    ("count: -3", "count: -3", "count", "greater than or equal to 1"),
    ("count: 10**40", "count: " + "1" + "0" * 40, "count", "count"),
    ("count: 5000 digits", "count: " + "9" * 5000, "cannot read value", "digits"),
    ("threshold .nan", "acceptance: {threshold: .nan}", "acceptance.threshold", "finite"),
    ("threshold .inf", "acceptance: {threshold: .inf}", "acceptance.threshold", "finite"),
    ("threshold '0.9'", "acceptance: {threshold: '0.9'}", "acceptance.threshold", "not a string"),
    ("baseline .inf", "acceptance: {baselines: {nccl.busbw: .inf}}", "acceptance.baselines", "finite"),
    ("baseline true", "acceptance: {baselines: {nccl.busbw: true}}", "acceptance.baselines", "not a boolean"),
    ("port '22'", "ssh: {port: '22'}", "ssh.port", "not a string"),
    ("encrypted 'no'", "storage: {root: {size_gib: 200, encrypted: 'no'}}", "storage.root.encrypted", "true or false"),
    ("public_ip 1", "network: {public_ip: 1}", "network.public_ip", "true or false"),
    ("size_gib true", "storage: {root: {size_gib: true}}", "storage.root.size_gib", "not a boolean"),
    ("retry_budget 1e9", "acceptance: {retry_budget: 1000000000}", "acceptance.retry_budget", "less than"),
]


@pytest.mark.parametrize(("case", "line", "field", "word"), LOOSE_SPECS, ids=[c[0] for c in LOOSE_SPECS])
def test_loose_spec_values_are_refused_naming_the_field(case: str, line: str, field: str, word: str, tmp_path: Path,
                                                        place: Path) -> None:
    key = line.split(":")[0]
    text = "\n".join(x for x in SPEC.splitlines() if not x.startswith(key + ":")) + "\n" + line + "\n"
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    res = run_main(["validate", str(path), "--no-policy"])
    assert "Traceback" not in res.err and res.rc == 2, (case, res.rc, res.err)
    assert str(path) in res.err and field in res.err and word in res.err, (case, res.err)


LOOSE_REQUIREMENTS = [
    ("gpus: true", "gpus: true\nduration: {days: 2}", "gpus", "not a boolean"),
    ("gpus: '64'", "gpus: '64'\nduration: {days: 2}", "gpus", "not a string"),
    ("nodes: -1", "nodes: -1\nduration: {days: 2}", "nodes", "greater than or equal to 1"),
    ("hours .inf", "nodes: 1\nduration: {hours: .inf}", "duration.hours", "finite"),
    ("days .nan", "nodes: 1\nduration: {days: .nan}", "duration.days", "finite"),
    ("months 1e6", "nodes: 1\nduration: {months: 1000000}", "duration.months", "less than or equal"),
    ("hours '24'", "nodes: 1\nduration: {hours: '24'}", "duration.hours", "not a string"),
    ("rate .inf", "nodes: 1\nduration: {days: 2}\nexchange_rates: {CNY: .inf}", "exchange_rates.CNY", "finite"),
    ("rate true", "nodes: 1\nduration: {days: 2}\nexchange_rates: {CNY: true}", "exchange_rates.CNY",
     "not a boolean"),
    ("rate 0", "nodes: 1\nduration: {days: 2}\nexchange_rates: {CNY: 0}", "exchange_rates", "> 0"),
    ("budget .inf", "nodes: 1\nduration: {days: 2}\nbudget: .inf", "budget", "finite"),
    ("egress .nan", "nodes: 1\nduration: {days: 2}\negress_tib: .nan", "egress_tib", "finite"),
    ("orderable 'yes'", "nodes: 1\nduration: {days: 2}\norderable_only: 'yes'", "orderable_only", "true or false"),
    ("deep yaml", "a: " + "[" * 200_000 + "]" * 200_000, "plan requirements", "nested deeper"),
    ("utf-16", "\ufeffnodes: 1", "plan requirements", "UTF-16"),
]


@pytest.mark.parametrize(("case", "text", "field", "word"), LOOSE_REQUIREMENTS, ids=[c[0] for c in LOOSE_REQUIREMENTS])
def test_loose_requirements_are_refused_naming_the_field(case: str, text: str, field: str, word: str, tmp_path: Path,
                                                         place: Path) -> None:
    path = tmp_path / "req.yaml"
    if case == "utf-16":
        path.write_bytes(text.encode("utf-16"))
    else:
        path.write_text(text + "\n")
    out = tmp_path / "cluster.yaml"
    res = run_main(["plan", str(path), "--out", str(out)])
    assert "Traceback" not in res.err and res.rc == 2, (case, res.rc, res.err)
    assert str(path) in res.err and field in res.err and word in res.err, (case, res.err)
    assert not out.exists()


def test_finite_rates_that_overflow_a_cost_are_refused_per_option(tmp_path: Path, place: Path) -> None:
    path = tmp_path / "req.yaml"
    path.write_text(REQUIREMENTS + "egress_tib: 1.0e+308\n")  # finite, but x 1024 GiB x a price is not
    res = run_main(["plan", str(path)])
    assert "Traceback" not in res.err and res.rc == 1, res.err
    assert "overflows" in res.out and "inf USD" not in res.out, res.out


# -- --driver-config ------------------------------------------------------------------------------------

BAD_DRIVER_CONFIG = [
    ("endpoint_url=http://x", "setting 'endpoint_url'"),
    ("poll=1", "setting 'poll'"),  # the AWS driver's: this spec is the fake's, which takes none
    ("boot_seconds=1x", "boot_seconds takes a number"),
    ("boot_seconds=inf", "finite"),
    ("boot_seconds=nan", "finite"),
    ("boot_seconds=-1", ">= 0"),
    ("boot_seconds=", "boot_seconds takes a number"),
    ("boot_seconds=true", "boot_seconds takes a number"),
    ("capacity='16'", "capacity takes a whole number"),
    ("capacity=1.5", "capacity takes a whole number"),
    ("capacity=1e999", "capacity takes a whole number"),
    ("capacity=" + "9" * 5000, "capacity takes a whole number"),
    ("seed=true", "seed takes a whole number"),
    ("addresses=[1", "not valid JSON"),
    ("addresses={}", "JSON list"),
    ("addresses=" + "[" * 100_000, "nested too deeply"),
    ("nosuchkey=1", "setting 'nosuchkey'"),
    ("region=eu-west-1", "comes from the spec"),
    ("state_path=a", "given twice"),
    ("=1", "KEY=VALUE"),
    ("poll", "KEY=VALUE"),
]


@pytest.mark.parametrize("command", ["order", "release", "bootstrap"])
def test_bad_driver_config_is_refused_before_any_driver_is_built(command: str, tmp_path: Path, place: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    state = tmp_path / "fake-state.json"
    for item, word in BAD_DRIVER_CONFIG:
        extra = ["--driver-config", "state_path=a"] if word == "given twice" else []
        argv = [command, str(spec), *extra, "--driver-config", item, "--driver-config", f"state_path={state}"]
        line = one_line_error(run_main(argv), [command, item[:40]], "--driver-config", word)
        assert item[:20] in line, line
    assert not state.exists(), "a driver was built and wrote its state"


def test_good_driver_config_still_orders(tmp_path: Path, place: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    state = tmp_path / "fake-state.json"
    argv = ["order", str(spec), "--driver-config", f"state_path={state}", "--driver-config", "boot_seconds=0",
            "--driver-config", "seed=7", "--json"]
    res = run_main(argv)
    assert res.rc == 0, res.err
    assert len(json.loads(res.out)) == 2
    assert run_main(["release", str(spec), "--driver-config", f"state_path={state}"]).rc == 0


# -- output flags -----------------------------------------------------------------------------------------

def test_bad_output_paths_are_refused_before_any_work(tmp_path: Path, place: Path) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUIREMENTS)
    folder = tmp_path / "out"
    folder.mkdir()
    missing = tmp_path / "no-such-folder"
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    before = tree(tmp_path)
    cases = [
        (["plan", str(req), "--out", str(folder)], "--out", str(folder), "it is a directory"),
        (["plan", str(req), "--out", str(missing / "c.yaml")], "--out", str(missing), "does not exist"),
        (["plan", str(req), "--out", str(not_a_folder / "c.yaml")], "--out", str(not_a_folder), "not a directory"),
        (["plan", str(req), "--out", ""], "--out", "", "no file name"),
        (["plan", str(req), "--plot", str(folder)], "--plot", str(folder), "it is a directory"),
        (["plan", str(req), "--plot", str(missing / "cost.svg")], "--plot", str(missing), "does not exist"),
        (["plan", str(req), "--out", str(folder / "c.yaml"), "--plot", str(missing / "c.svg")], "--plot",
         str(missing), "does not exist"),
        (["plan", str(req), "--out", str(folder / "same"), "--plot", str(folder / "same")], "--plot",
         str(folder / "same"), "same file"),
        (["catalogue", "refresh", "--out", str(folder)], "--out", str(folder), "it is a directory"),
        (["catalogue", "refresh", "--out", str(missing / "c.json")], "--out", str(missing), "does not exist"),
        (["policy", "check", str(spec), "--output", str(folder)], "--output", str(folder), "it is a directory"),
        (["policy", "check", str(spec), "--output", str(missing / "r.txt")], "--output", str(missing),
         "does not exist"),
        (["policy", "check", str(spec), "--tf-dir", str(missing)], "--tf-dir", str(missing), "no such folder"),
        (["policy", "check", str(spec), "--tf-dir", str(not_a_folder)], "--tf-dir", str(not_a_folder), "not a folder"),
    ]
    for argv, flag, value, word in cases:
        one_line_error(run_main(argv), argv, flag, value, word)
    assert tree(tmp_path) == before, f"a refused write left something: {tree(tmp_path) - before}"


def test_writes_stay_in_the_folder_named(tmp_path: Path, place: Path) -> None:
    """A link at --out is replaced, not followed out of its folder; a write leaves no temporary file."""
    req = tmp_path / "req.yaml"
    req.write_text(REQUIREMENTS)
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "cluster.yaml").symlink_to(outside)
    res = run_main(["plan", str(req), "--out", str(folder / "cluster.yaml"), "--plot", str(folder / "cost.svg")])
    assert res.rc == 0, res.err
    assert outside.read_text() == "keep me\n"
    assert not (folder / "cluster.yaml").is_symlink() and "provider: aws" in (folder / "cluster.yaml").read_text()
    assert sorted(p.name for p in folder.iterdir()) == ["cluster.yaml", "cost.svg"]


# -- numeric flags ----------------------------------------------------------------------------------------

NUMERIC = [
    ("plan", "--top", ["-1", "0", "abc", "1e3", "99999999999", "true", "1.5"]),
    ("plan", "--plot-top", ["-3", "0", "x"]),
    ("plan", "--option", ["0", "-1", "1.0"]),
    ("offerings", "--min-gpus", ["-1", "1e9", "2048", "true", " 3x"]),
]


@pytest.mark.parametrize(("command", "flag", "values"), NUMERIC, ids=[f"{c[0]} {c[1]}" for c in NUMERIC])
def test_numeric_flags_refuse_negative_huge_and_non_numbers(command: str, flag: str, values: list[str],
                                                            tmp_path: Path, place: Path) -> None:
    req = tmp_path / "req.yaml"
    req.write_text(REQUIREMENTS)
    for value in values:
        argv = [command, *([str(req)] if command == "plan" else []), f"{flag}={value}"]
        argparse_error(run_main(argv), argv, flag, value.strip())
