"""The reference tables hold themselves and the emulators to their citations (no server needed).

* every table loads and breaks none of its own rules (a fact without the sentence it rests on, a refusal without
  its code, a code neither cited nor explained, a rule without a probe);
* its page is the one the table renders (``python -m metalfleet.testing.reference`` writes it);
* the emulator names every rule it applies by id, and every rule in the table is named somewhere in the emulator:
  a rule cannot exist in the emulator without its citation, nor a citation without its rule;
* a probe that names a test names one that exists.

Each platform's ``tests/<platform>/test_reference.py`` then runs the probes against the running emulator and
holds the driver's requests to ``sends``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from metalfleet.testing import reference

ROOT = Path(__file__).resolve().parents[1]
#: Which emulator module stands in for each table's service.
EMULATOR = {"alibaba-ecs": ROOT / "tests/support/alibaba.py", "huawei-bms": ROOT / "tests/support/huawei.py",
            "ec2": ROOT / "tests/support/ec2.py"}
#: The calls through which an emulator names a rule: refuse("id", ...), RULES.refusal("id", ...), RULES.applies("id").
ANCHORS = frozenset({"refuse", "refusal", "applies"})


def anchored_ids(path: Path) -> dict[str, int]:
    """Rule ids named by the emulator's code (id -> first line)."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        first = node.args[0]
        if name in ANCHORS and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.setdefault(first.value, node.lineno)
    return found


@pytest.mark.parametrize("name", reference.NAMES)
def test_table_cites_every_fact(name: str) -> None:
    assert reference.problems(reference.load(name)) == []


@pytest.mark.parametrize("name", reference.NAMES)
def test_page_is_the_rendered_table(name: str) -> None:
    page = reference.page_path(name)
    assert page.exists(), f"{page} is missing: run python -m metalfleet.testing.reference"
    assert page.read_text(encoding="utf-8") == reference.render(reference.load(name)), (
        f"{page} is stale: run python -m metalfleet.testing.reference")


@pytest.mark.parametrize("name", reference.NAMES)
def test_emulator_rules_and_table_rules_are_the_same_set(name: str) -> None:
    table = set(reference.load(name).rules)
    code = anchored_ids(EMULATOR[name])
    uncited = sorted(f"{rid} (line {line})" for rid, line in code.items() if rid not in table)
    assert not uncited, f"{EMULATOR[name].name} applies rules the table does not cite: {uncited}"
    unenforced = sorted(table - set(code))
    assert not unenforced, f"{name}.yaml cites rules {EMULATOR[name].name} never applies: {unenforced}"


@pytest.mark.parametrize("name", reference.NAMES)
def test_probes_that_name_a_test_name_one_that_exists(name: str) -> None:
    for rule in reference.load(name).rules.values():
        target = (rule.probe or {}).get("test")
        if not target:
            continue
        path, _, func = str(target).partition("::")
        source = ROOT / path
        assert source.exists(), f"rule {rule.id}: probe test file {path} does not exist"
        names = {n.name for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.FunctionDef)}
        assert func in names, f"rule {rule.id}: {path} has no test {func}"


def test_problems_finds_what_a_table_must_not_lack() -> None:
    bad = reference.Reference(
        name="t", title="t", sources={"page": {"url": "http://not-https", "title": "p"}},
        operations={"Op": reference.Operation(name="Op", source="page", answers={"X": "str"})},
        rules={"r": reference.Rule(id="r", op="Op", kind="refuse", cite=reference.Citation("page", "", "short"))})
    found = "\n".join(reference.problems(bad))
    for expected in ("no https URL", "no date it was read", "type 'str'", "answers_model", "no sentence quoted",
                     "needs its error code", "neither cited", "no probe"):
        assert expected in found, expected


def test_flat_name_puts_n_for_list_indexes() -> None:
    assert reference.flat_name("Tag.3.Key") == "Tag.N.Key"
    assert reference.flat_name("NetworkInterface.12.SecurityGroupIds.2") == "NetworkInterface.N.SecurityGroupIds.N"
    assert reference.flat_name("SystemDisk.Size") == "SystemDisk.Size"


def test_an_emulator_rule_must_be_in_the_table() -> None:
    enforcer = reference.Enforcer("alibaba-ecs", lambda _rule: None)
    with pytest.raises(KeyError, match="no rule 'no-such-rule'"):
        enforcer.refusal("no-such-rule")
