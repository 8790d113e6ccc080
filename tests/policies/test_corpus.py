"""The policy check over a corpus of Terraform written by others (tests/policies/corpus, sources in its
SOURCES.md): plans and ``.tf`` files from provider examples and other policy tools' fixtures, AWS, Alibaba and
Huawei. ``expected.yaml`` holds what a reviewer expects per resource and why; each input must give exactly those
findings, as (rule, address), except the listed defects: a defect still present is a known failure, one no longer
present fails here so that the list stays true.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.policies.check import check_paths
from metalfleet.policies.rules import RULES

CORPUS = Path(__file__).parent / "corpus"
#: A fixed day: no rule here depends on it, but the report must not change with the calendar.
TODAY = date(2026, 1, 1)
CLOUDS = {"aws": "aws_", "alicloud": "alicloud_", "huaweicloud": "huaweicloud_"}

Pair = tuple[str, str]


@dataclass(frozen=True)
class Fixture:
    key: str
    inputs: tuple[str, ...]
    #: address -> the rules a reviewer expects there
    expect: dict[str, frozenset[str]]
    #: (rule, address) -> the defect's reason, for findings reported that a reviewer calls false
    extra: dict[Pair, str]
    #: (rule, address) -> the defect's reason, for expected findings not reported
    missing: dict[Pair, str]

    @property
    def expected_now(self) -> set[Pair]:
        """What metalfleet reports today if the listed defects, and only they, are still there."""
        wanted = {(rule, addr) for addr, rules in self.expect.items() for rule in rules}
        return (wanted - set(self.missing)) | set(self.extra)


@cache
def fixtures() -> tuple[Fixture, ...]:
    doc: dict[str, Any] = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))
    out = []
    for key, spec in doc["fixtures"].items():
        expect: dict[str, frozenset[str]] = {}
        extra: dict[Pair, str] = {}
        missing: dict[Pair, str] = {}
        for addr, res in spec["resources"].items():
            expect[addr] = frozenset(res["expect"])
            for d in res.get("defects", []):
                assert d["got"] in ("extra", "missing"), (key, addr, d)
                (extra if d["got"] == "extra" else missing)[(d["rule"], addr)] = d["defect"]
        out.append(Fixture(key, (key, *spec.get("also", [])), expect, extra, missing))
    return tuple(out)


def _findings(path: str) -> set[Pair]:
    report = check_paths([CORPUS / path], today=TODAY)
    return {(f.rule.id, f.location.address or f.resource_name) for f in report.findings}


def _show(pairs: set[Pair], why: dict[Pair, str] | None = None) -> str:
    return "".join(f"\n  {r} {a}" + (f"  [{why[(r, a)]}]" if why and (r, a) in why else "")
                   for r, a in sorted(pairs, key=lambda p: (p[1], p[0])))


@pytest.mark.parametrize("path", [p for fx in fixtures() for p in fx.inputs])
def test_corpus_findings_are_what_a_reviewer_expects(path: str) -> None:
    fx = next(f for f in fixtures() if path in f.inputs)
    got = _findings(path)
    want = fx.expected_now
    fixed = (set(fx.extra) - got) | (set(fx.missing) & got)
    assert not fixed, f"{path}: listed defects no longer present, drop them from expected.yaml:" \
                      f"{_show(fixed, fx.extra | fx.missing)}"
    assert got == want, f"{path}: unexpected findings:{_show(got - want)}\nexpected findings missing:" \
                        f"{_show(want - got)}"


def _sources(key: str) -> str:
    """The text of a fixture's files: a plan JSON, or the .tf files of its folder."""
    path = CORPUS / key
    files = [path] if path.is_file() else sorted(path.glob("*.tf"))
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


@cache
def _plan_addresses(key: str) -> frozenset[str]:
    plan = json.loads((CORPUS / key).read_text(encoding="utf-8"))
    found: set[str] = set()

    def walk(module: dict[str, Any]) -> None:
        found.update(r["address"] for r in module.get("resources", []))
        for child in module.get("child_modules", []):
            walk(child)

    walk(plan["planned_values"]["root_module"])
    return frozenset(found)


@pytest.mark.parametrize("fx", fixtures(), ids=lambda fx: fx.key)
def test_expectations_name_real_resources_and_rules(fx: Fixture) -> None:
    text = _sources(fx.key)
    for addr, rules in fx.expect.items():
        assert rules <= RULES.keys(), (fx.key, addr, rules - RULES.keys())
        if fx.key.endswith(".json"):
            assert addr in _plan_addresses(fx.key), (fx.key, addr)
        else:
            kind, name = re.sub(r"\[\*\]$", "", addr).split(".")
            assert re.search(rf'^resource "{kind}" "{re.escape(name)}"', text, re.M), (fx.key, addr)
    for rule, addr in fx.missing:
        assert rule in fx.expect[addr], f"{fx.key}: a missing {rule} on {addr} must be expected there"
    for rule, addr in fx.extra:
        assert addr in fx.expect and rule not in fx.expect[addr], f"{fx.key}: an extra {rule} on {addr} is expected"


def test_corpus_covers_three_clouds_with_positive_and_negative_cases() -> None:
    counts = {cloud: {"positive": 0, "negative": 0} for cloud in CLOUDS}
    for fx in fixtures():
        for addr, rules in fx.expect.items():
            cloud = next(c for c, prefix in CLOUDS.items() if addr.split(".")[-2].startswith(prefix))
            counts[cloud]["positive" if rules else "negative"] += 1
    assert sum(sum(c.values()) for c in counts.values()) >= 40, counts
    assert all(c["positive"] and c["negative"] for c in counts.values()), counts


def test_every_corpus_file_has_its_source_recorded() -> None:
    sources = (CORPUS / "SOURCES.md").read_text(encoding="utf-8")
    keys = {fx.key.split("/")[1] for fx in fixtures()}
    for path in sorted(CORPUS.glob("*/*/*")):
        rel = path.relative_to(CORPUS)
        if rel.parts[0] == "LICENSES":
            continue
        assert rel.parts[1] in keys, f"{rel} is in no fixture of expected.yaml"
        made_here = path.name.endswith(".plan.json")
        listed = str(rel) in sources or f"{rel.parent}/{{main,variables}}.tf" in sources
        assert made_here or listed, f"{rel} is not listed in SOURCES.md"
