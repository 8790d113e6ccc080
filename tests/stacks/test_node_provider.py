"""The dynamic provider's methods called directly, against the file-backed fake cloud."""

from __future__ import annotations

from pathlib import Path

import pytest

from metalfleet.providers import parse_spec
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.models import node_spec_to_dict
from metalfleet.stacks.node import NodeProvider


@pytest.fixture
def props(tmp_path: Path) -> dict:
    spec = parse_spec({"name": "unit", "provider": "fake", "region": "local-1", "offering": "fake.8xh100",
                       "count": 2, "image": "img-1"})
    return {"provider": "fake", "driver_config": {"state_path": str(tmp_path / "fake.json")},
            "spec": node_spec_to_dict(spec.node_spec(0, "fake.8xh100"))}


def test_create_is_idempotent_and_read_reports_the_node(props: dict) -> None:
    p = NodeProvider()
    first = p.create(props)
    second = p.create(props)
    assert first.id == second.id, "same idempotency key must not buy a second node"
    assert first.outs["state"] == "running"
    assert first.outs["private_ip"]
    read = p.read(first.id, first.outs)
    assert read.id == first.id
    assert read.outs["node_id"] == first.id


def test_read_of_a_node_terminated_out_of_band_reports_it_gone(props: dict) -> None:
    p = NodeProvider()
    created = p.create(props)
    FakeDriver(state_path=props["driver_config"]["state_path"]).terminate_out_of_band(created.id)
    assert p.read(created.id, created.outs).id == ""


def test_create_after_out_of_band_termination_orders_a_new_generation(props: dict) -> None:
    p = NodeProvider()
    first = p.create(props)
    FakeDriver(state_path=props["driver_config"]["state_path"]).terminate_out_of_band(first.id)
    again = p.create(props)
    assert again.id != first.id
    assert again.outs["state"] == "running"
    assert p.create(props).id == again.id, "re-running the replacement must not buy a third node"


def test_diff_replaces_on_machine_fields_and_updates_on_tags(props: dict) -> None:
    p = NodeProvider()
    news = {**props, "spec": {**props["spec"], "image": "img-2"}}
    d = p.diff("x", props, news)
    assert d.changes and "spec.image" in d.replaces and d.delete_before_replace
    tags = {**props, "spec": {**props["spec"], "tags": {**props["spec"]["tags"], "team": "ml"}}}
    d = p.diff("x", props, tags)
    assert d.changes and not d.replaces
    assert not p.diff("x", props, props).changes


def test_delete_releases_and_tolerates_a_node_already_gone(props: dict) -> None:
    p = NodeProvider()
    created = p.create(props)
    p.delete(created.id, created.outs)
    fake = FakeDriver(state_path=props["driver_config"]["state_path"])
    assert fake.get(created.id).state.value == "terminated"
    assert fake.list_nodes("unit") == []
    p.delete(created.id, created.outs)  # second delete is a no-op, not an error


def test_read_keeps_host_keys_pinned_at_create_time(props: dict) -> None:
    p = NodeProvider()
    created = p.create(props)
    outs = {**created.outs, "host_keys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPinnedAtCreate"]}
    assert p.read(created.id, outs).outs["host_keys"] == outs["host_keys"]


def test_a_later_generation_replaces_the_node_an_earlier_one_changes_nothing(props: dict) -> None:
    """The stack replaces a quarantined node by declaring its next generation; generations only go forward."""
    p = NodeProvider()
    gen1 = {**props, "spec": {**props["spec"], "generation": 1,
                              "tags": {**props["spec"]["tags"], "metalfleet:generation": "1"}}}
    d = p.diff("x", props, gen1)
    assert d.changes and d.replaces == ["spec.generation"] and d.delete_before_replace
    back = p.diff("x", gen1, props)
    assert not back.changes and not back.replaces, "a lower generation must never buy another node"
    assert not p.diff("x", gen1, gen1).changes


def test_the_replacement_is_a_new_node_of_the_next_generation(props: dict) -> None:
    from metalfleet.providers.lifecycle import node_generation

    p = NodeProvider()
    first = p.create(props)
    p.delete(first.id, first.outs)  # delete-before-replace: the quarantined node goes first
    gen1 = {**props, "spec": {**props["spec"], "generation": 1,
                              "tags": {**props["spec"]["tags"], "metalfleet:generation": "1"}}}
    second = p.create(gen1)
    assert second.id != first.id and second.outs["generation"] == 1
    node = FakeDriver(state_path=props["driver_config"]["state_path"]).get(second.id)
    assert node_generation(node) == 1 and node.tags["metalfleet:index"] == "0"
    assert [n.id for n in FakeDriver(state_path=props["driver_config"]["state_path"]).list_nodes("unit")] == [second.id]


def test_what_acts_on_a_node_changes_when_a_preview_does_not_know_the_node_yet() -> None:
    """While a node is being replaced a preview hands its bootstrap and the gate an unknown node: a change."""
    from pulumi.output import Unknown

    from metalfleet.stacks.acceptance import ClusterAcceptanceProvider
    from metalfleet.stacks.bootstrap import NodeBootstrapProvider

    node = {"id": "n-1", "private_ip": "10.0.0.2"}
    boot = NodeBootstrapProvider()
    assert not boot.diff("b", {"fingerprint": "f", "node": node}, {"fingerprint": "f", "node": dict(node)}).changes
    assert boot.diff("b", {"fingerprint": "f", "node": node}, {"fingerprint": "f", "node": Unknown()}).changes
    gate = ClusterAcceptanceProvider()
    olds = {"fingerprint": "f", "nodes": [node]}
    assert not gate.diff("g", olds, {"fingerprint": "f", "nodes": [dict(node)]}).changes
    assert gate.diff("g", olds, {"fingerprint": "f", "nodes": [Unknown()]}).changes
    assert gate.diff("g", olds, {"fingerprint": "f", "nodes": Unknown()}).changes
