"""The shipped examples pass the default policy: `metalfleet policy check` (and so `metalfleet validate`) on every
example spec and pool inventory finds no mandatory violation; every risk an example accepts is a suppression
with a reason that suppresses something (no stale suppressions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metalfleet.policies.check import check_paths

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INPUTS = sorted([*EXAMPLES.glob("*/cluster.yaml"), *EXAMPLES.glob("*/pool.yaml")])


def test_every_platform_has_an_example() -> None:
    assert {p.parent.name for p in INPUTS} >= {"aws-p5", "alibaba-ebm", "huawei-bms", "onprem-ipmi"}


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_passes_the_default_policy(path: Path) -> None:
    report = check_paths([path])
    assert report.blocking == [], [f"{f.rule.id} {f.message}" for f in report.blocking]
    assert report.resources > 0
    for status in report.suppressions:
        assert status.suppression.reason and status.status == "applied", status
