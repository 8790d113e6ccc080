"""Node lifecycle (quarantine, replace within the budget, declared generations) on the file-backed fake cloud.

The judge is a plain callable here (a verdict per node, as the acceptance gate returns): what is done to the
nodes needs neither SSH nor root. tests/acceptance/test_quarantine.py runs the same through the real gate on
simulated hosts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.fleet import node_specs_for, order_cluster, resolve_offering
from metalfleet.providers.lifecycle import (
    ACCEPTANCE_TAG,
    GENERATION_TAG,
    REASON_TAG,
    LifecycleOutcome,
    mark_passed,
    node_generation,
    node_spec,
    plan_generations,
    quarantine,
    settle,
)
from metalfleet.providers.merge import deep_merge
from metalfleet.providers.models import Node
from metalfleet.providers.spec import ClusterSpec
from tests.specs import cluster_spec


def spec_for(count: int, *, replace_failed: bool = True, budget: int = 2, name: str = "life") -> ClusterSpec:
    return cluster_spec("fake", name, count, acceptance={"replace_failed": replace_failed, "retry_budget": budget})


def cloud(tmp_path: Path, spec: ClusterSpec) -> tuple[FakeDriver, list[Node]]:
    driver = FakeDriver(state_path=tmp_path / "cloud.json")
    return driver, order_cluster(driver, node_specs_for(driver, spec))


def made(tmp_path: Path) -> set[str]:
    return set(json.loads((tmp_path / "cloud.json").read_text())["nodes"])


def judge(bad: Callable[[Node], str | None]) -> tuple[Callable[[Sequence[Node], int], Mapping[str, str | None]],
                                                       list[list[str]]]:
    """A check that fails the nodes ``bad`` names a reason for; records what each round was given."""
    rounds: list[list[str]] = []

    def check(nodes: Sequence[Node], round_no: int) -> dict[str, str | None]:
        assert round_no == len(rounds) + 1
        rounds.append([n.id for n in nodes])
        return {n.id: bad(n) for n in nodes}

    return check, rounds


def test_settle_replaces_a_failing_node_with_its_next_generation(tmp_path: Path) -> None:
    spec = spec_for(2, budget=2)
    driver, (n0, n1) = cloud(tmp_path, spec)
    check, rounds = judge(lambda n: "gpu-count: 7 of 8" if n.id == n1.id else None)
    prepared: list[list[str]] = []

    def prepare(nodes: Sequence[Node]) -> dict[str, str]:
        prepared.append([n.id for n in nodes])
        return {}

    out = settle(driver, spec, [n0, n1], check, LifecycleOutcome(), offering=resolve_offering(driver, spec),
                 prepare=prepare)
    assert out.ok and out.released == [n1.id] and out.generations == {1: 1} and out.budget_left == 1
    (r,) = out.replaced
    assert (r.index, r.old_node_id, r.generation, r.reason) == (1, n1.id, 1, "gpu-count: 7 of 8")
    assert rounds == [[n0.id, n1.id], [r.new_node_id]] and prepared == [[r.new_node_id]]
    new = driver.get(r.new_node_id or "")
    assert node_generation(new) == 1 and new.tags[GENERATION_TAG] == "1" and new.tags["metalfleet:index"] == "1"
    assert new.tags[ACCEPTANCE_TAG] == "passed" and driver.get(n0.id).tags[ACCEPTANCE_TAG] == "passed"
    old = driver.get(n1.id)
    assert old.state.is_gone and old.tags[ACCEPTANCE_TAG] == "quarantined" and old.tags[REASON_TAG] == r.reason
    assert made(tmp_path) == {n0.id, n1.id, new.id}


def test_settle_quarantines_when_the_budget_is_spent_and_accounts_for_every_node(tmp_path: Path) -> None:
    spec = spec_for(2, budget=1)
    driver, (n0, n1) = cloud(tmp_path, spec)
    check, _ = judge(lambda n: "fabric-ports: mlx5_0 port 1 is Down" if n.id != n0.id else None)
    out = settle(driver, spec, [n0, n1], check, LifecycleOutcome(), offering=resolve_offering(driver, spec))
    (q,) = out.quarantined
    assert q.index == 1 and q.tagged and q.node_id == out.replaced[0].new_node_id and not out.ok
    assert out.budget_left == 0 and out.released == [n1.id]
    assert made(tmp_path) == {n.id for n in out.accepted} | {q.node_id} | set(out.released)


def test_settle_without_replace_only_quarantines(tmp_path: Path) -> None:
    spec = spec_for(2, budget=2)
    driver, (n0, n1) = cloud(tmp_path, spec)
    check, _ = judge(lambda n: "bad" if n.id == n1.id else None)
    out = settle(driver, spec, [n0, n1], check, LifecycleOutcome(), offering=resolve_offering(driver, spec),
                 replace_failed=False)
    assert [q.node_id for q in out.quarantined] == [n1.id] and out.released == out.replaced == []
    assert driver.get(n1.id).tags[ACCEPTANCE_TAG] == "quarantined" and made(tmp_path) == {n0.id, n1.id}


def test_a_node_the_check_does_not_answer_for_fails_and_a_prepare_that_raises_fails_its_nodes(tmp_path: Path) -> None:
    spec = spec_for(1, budget=1)
    driver, (n0,) = cloud(tmp_path, spec)

    def prepare(nodes: Sequence[Node]) -> dict[str, str]:
        raise RuntimeError("apt mirror down")

    out = settle(driver, spec, [n0], lambda nodes, _round: {}, LifecycleOutcome(),
                 offering=resolve_offering(driver, spec), prepare=prepare)
    assert out.replaced[0].reason == "not checked"
    (q,) = out.quarantined
    assert q.reason == "not made ready: RuntimeError: apt mirror down" and q.node_id == out.replaced[0].new_node_id


def test_plan_generations_reads_quarantine_tags_and_keeps_replaced_generations(tmp_path: Path) -> None:
    spec = spec_for(3, budget=2)
    driver, nodes = cloud(tmp_path, spec)
    assert plan_generations(driver, spec).generations == {}
    assert quarantine(driver, nodes[2].id, "gpu-count: 7 of 8") and quarantine(driver, nodes[0].id, "x" * 300)
    first = plan_generations(driver, spec)
    assert first.generations == {0: 1, 2: 1} and first.budget_left == 0 and first.kept == ()
    assert [(r.index, r.old_node_id) for r in first.replacing] == [(0, nodes[0].id), (2, nodes[2].id)]
    assert first.replacing[0].reason == "x" * 255  # the tag is cut to the provider's length

    # The stack replaces them (release, then order the declared generation): those generations stay declared,
    # and nothing is left in the budget for another failure.
    for r in first.replacing:
        driver.release(r.old_node_id)
        new = driver.order(node_spec(spec, r.index, "fake.8xh100", r.generation))
        assert new.tags[GENERATION_TAG] == "1" and mark_passed(driver, new.id)
    again = plan_generations(driver, spec)
    assert again.generations == {0: 1, 2: 1} and again.replacing == () and again.budget_left == 0
    assert quarantine(driver, nodes[1].id, "fabric")
    spent = plan_generations(driver, spec)
    assert spent.generations == {0: 1, 2: 1} and [q.node_id for q in spent.kept] == [nodes[1].id]
    # A base given by the caller is not the budget's: generations above it are.
    based = plan_generations(driver, spec, {0: 1, 2: 1})
    assert based.generations == {0: 1, 1: 1, 2: 1} and based.budget_left == 1


def test_plan_generations_replaces_nothing_when_replace_failed_is_off(tmp_path: Path) -> None:
    spec = spec_for(2, replace_failed=False)
    driver, nodes = cloud(tmp_path, spec)
    quarantine(driver, nodes[1].id, "bad")
    p = plan_generations(driver, spec)
    assert p.generations == {} and p.replacing == () and not p.replace_failed
    assert [(q.index, q.node_id, q.reason) for q in p.kept] == [(1, nodes[1].id, "bad")]


def test_deep_merge_keeps_siblings_and_replaces_non_mappings() -> None:
    base = {"ssh": {"user": "a", "port": 22}, "tags": ["x"], "count": 1}
    top = {"ssh": {"port": 2222}, "tags": ["y"], "new": {"k": 1}}
    assert deep_merge(base, top) == {"ssh": {"user": "a", "port": 2222}, "tags": ["y"], "count": 1, "new": {"k": 1}}
    assert base["ssh"] == {"user": "a", "port": 22}, "the inputs are not changed"
    assert deep_merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
