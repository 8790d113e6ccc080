"""Steps as data: raw fact outputs in (step_cases.json), planned commands out. No SSH, no mocks.

Each case names a step, a host (provider/offering or traits), optional overrides, and the raw
stdout/rc of the fact commands it cares about, keyed by words that appear in the command (a fact
not listed reads as "tool absent": empty output, rc 127). Output may come from the shared real
captures (``fixture``) or from tests/bootstrap/data (``file``). ``expect`` lists the actions'
text in order (a trailing or leading ``*`` matches a prefix or suffix); ``error`` expects a StepError.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap.errors import StepError
from metalfleet.bootstrap.facts import Fact, FactValues, FileHashes
from metalfleet.bootstrap.inventory import Host, NodeTraits, traits_for
from metalfleet.bootstrap.step import NoOp, StepContext, Upload, resolve_settings
from metalfleet.bootstrap.steps import ALL_STEPS
from metalfleet.providers.models import Fabric, Interconnect
from metalfleet.testing.hosts.harness import FIXTURES

HERE = Path(__file__).resolve().parent
CASES = json.loads((HERE / "step_cases.json").read_text())
STEPS = {s.name: s for s in ALL_STEPS}
ROCKY = 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n'
UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n'


def _host(spec: dict[str, Any]) -> Host:
    if "offering" in spec:
        traits = traits_for(spec["provider"], spec["offering"])
        assert traits is not None
    else:
        t = spec.get("traits", {})
        traits = NodeTraits(vendor=t.get("vendor", "nvidia"), gpu_count=t.get("gpu_count", 8),
                            interconnect=Interconnect(t.get("interconnect", "nvswitch")),
                            fabric=Fabric(t.get("fabric", "none")))
    return Host("node-a", "10.0.0.5", provider=spec.get("provider"), offering=spec.get("offering"), traits=traits,
                index=spec.get("index", 0))


def _matches(key: str, argv: list[str]) -> bool:
    joined = shlex.join(argv)
    return all(word in joined for word in key.split())


def _raw(case: dict[str, Any], fact: Fact[Any]) -> tuple[str, int]:
    argv = fact.command()
    if isinstance(fact, FileHashes) and "sha256" in case:
        known = case["sha256"]
        return "".join(hashlib.sha256(known[p].encode()).hexdigest() + "\n" if p in known else "-\n"
                       for p in fact.paths), 0
    if argv[:2] == ["cat", "/etc/os-release"]:
        return (ROCKY if case.get("os") == "rocky" else UBUNTU), 0
    hits = [k for k in case.get("facts", {}) if _matches(k, argv)]
    assert len(hits) <= 1, f"fact key(s) {hits} match more than one command: {argv}"
    if not hits:
        return "", 127
    given = case["facts"][hits[0]]
    if "fixture" in given:
        return (FIXTURES / given["fixture"]).read_text(), given.get("rc", 0)
    if "file" in given:
        return (HERE / "data" / given["file"]).read_text(), given.get("rc", 0)
    return given.get("stdout", ""), given.get("rc", 0)


def _text(action: Any) -> str:
    return action.text


def _like(expected: str, actual: str) -> bool:
    if expected.startswith("*") and expected.endswith("*"):
        return expected[1:-1] in actual
    if expected.endswith("*"):
        return actual.startswith(expected[:-1])
    if expected.startswith("*"):
        return actual.endswith(expected[1:])
    return actual == expected


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_step_case(case: dict[str, Any]) -> None:
    cls = STEPS[case["step"]]
    host = _host(case["host"])
    if case.get("applies") is False:
        assert not cls.applies_to(host)
        return
    assert cls.applies_to(host)
    step = cls(resolve_settings(cls, host, case.get("overrides")))
    ctx = StepContext(host=host, changed=frozenset(case.get("changed", ())))
    facts = FactValues({f: f.parse(*_raw(case, f)) for f in step.facts(ctx)})
    if "error" in case:
        with pytest.raises(StepError, match=case["error"]):
            list(step.actions(ctx, facts))
        return
    actions = list(step.actions(ctx, facts))
    texts = [_text(a) for a in actions]
    assert len(texts) == len(case["expect"]), "\n".join(texts)
    for want, got in zip(case["expect"], texts, strict=True):
        assert _like(want, got), f"\nwant {want}\ngot  {got}"
    uploads = {a.path: a.content.decode() for a in actions if isinstance(a, Upload)}
    for path, needles in case.get("contents", {}).items():
        for needle in needles:
            assert needle in uploads[path].splitlines(), f"{needle!r} not a line of {path}:\n{uploads[path]}"
    for path, needles in case.get("absent", {}).items():
        assert not any(n in uploads[path] for n in needles)
    # A step plans, it never runs: planning twice from the same facts gives the same actions.
    assert [_text(a) for a in step.actions(ctx, facts)] == texts
    assert all(isinstance(a, NoOp) or a.text for a in actions)


def test_every_builtin_step_has_a_case() -> None:
    covered = {c["step"] for c in CASES}
    assert set(STEPS) - covered <= {"ascend-cann"}, set(STEPS) - covered
