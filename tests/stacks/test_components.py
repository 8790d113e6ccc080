"""GpuCluster under Pulumi's unit-test mocks: structure, outputs and refusal of bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest

from metalfleet.providers import InvalidSpecError
from tests.specs import cluster_spec

_SIG_KEY = pulumi.runtime.rpc._special_sig_key
_SECRET_SIG = pulumi.runtime.rpc._special_secret_sig
NODE_TYPE = "pulumi-python:dynamic/metalfleet:GpuNode"


class _Mocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.created: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        self.created.append(args)
        outs = dict(args.inputs)
        if args.name.endswith("-acceptance"):
            # A stand-in gate with a rule of its own (it refuses node n-0), answering from its inputs as
            # the real one does: the accepted nodes' ids, addresses and hostfile.
            from metalfleet.stacks.inputs import hostfile as make_hostfile

            accepted = [n for n in args.inputs["nodes"] if n["id"] != "n-0"]
            ips = [n["private_ip"] for n in accepted]
            return args.name, {**outs, "accepted_ids": [n["id"] for n in accepted], "accepted_ips": ips,
                               "hostfile": make_hostfile(ips, 8), "table": "t"}
        if args.name.endswith("-bootstrap"):
            return args.name, {**outs, "status": "changed"}
        if args.typ == NODE_TYPE:
            idx = int(args.inputs["spec"]["index"])
            outs.update(private_ip=f"10.1.0.{idx + 10}", node_id=f"n-{idx}", state="running")
            return f"n-{idx}", outs
        return f"{args.name}-id", outs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


MOCKS = _Mocks()
pulumi.runtime.set_mocks(MOCKS, preview=False)

from metalfleet.stacks.cluster import GpuCluster, hostfile  # noqa: E402  (mocks must be set first)


def _spec(**over: Any) -> Any:
    return cluster_spec("fake", **{"name": "mock", "count": 3, "bootstrap": {"enabled": False},
                                   "acceptance": {"enabled": False}, **over})


@pulumi.runtime.test
def test_cluster_declares_one_child_node_per_count_and_a_hostfile(tmp_path: Path) -> Any:
    MOCKS.created.clear()
    cluster = GpuCluster("c1", _spec(), driver_config={"state_path": str(tmp_path / "f.json")})

    def check(args: list[Any]) -> None:
        ids, hf = args
        assert ids == ["n-0", "n-1", "n-2"]
        assert hf == "10.1.0.10 slots=8\n10.1.0.11 slots=8\n10.1.0.12 slots=8\n"
        # By the time the outputs resolve, every resource has been registered with the mocks.
        nodes = [r for r in MOCKS.created if r.typ == NODE_TYPE]
        assert sorted(r.name for r in nodes) == ["c1-0", "c1-1", "c1-2"]
        assert [r.typ for r in MOCKS.created].count("metalfleet:stacks:GpuCluster") == 1
        assert {r.inputs["spec"]["tags"]["metalfleet:cluster"] for r in nodes} == {"mock"}
        # no credential in the plain inputs; `secrets` is the one secret input (empty here)
        plain = [{k: v for k, v in r.inputs.items() if k != "secrets"} for r in nodes]
        assert all(not any(w in str(p).lower() for w in ("secret", "password")) for p in plain)
        # ... and it reaches the engine marked secret (the mocks see the wire form of a secret)
        assert all(r.inputs["secrets"] == {_SIG_KEY: _SECRET_SIG, "value": []} for r in nodes)

    return pulumi.Output.all(cluster.node_ids, cluster.hostfile).apply(check)


def test_credentials_in_driver_config_are_refused() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        GpuCluster("c2", _spec(), driver_config={"secret_key": "AKIA..."})
    assert exc.value.field == "driver_config.secret_key"
    assert "AKIA" not in str(exc.value)


def test_unknown_offering_fails_at_program_time_naming_the_field() -> None:
    with pytest.raises(InvalidSpecError) as exc:
        GpuCluster("c3", _spec(offering="fake.nope"))
    assert exc.value.field == "offering"
    assert "fake.nope" in str(exc.value)


def test_hostfile_has_one_line_per_node_with_gpu_slots() -> None:
    assert hostfile(["10.0.0.1", "10.0.0.2"], 8) == "10.0.0.1 slots=8\n10.0.0.2 slots=8\n"


@pulumi.runtime.test
def test_bootstrap_and_gate_follow_the_nodes_and_the_hostfile_lists_accepted_nodes(tmp_path: Path) -> Any:
    MOCKS.created.clear()
    spec = _spec(name="gated", count=2, bootstrap={"enabled": True}, acceptance={"enabled": True})
    cluster = GpuCluster("g1", spec, driver_config={"state_path": str(tmp_path / "f.json")})
    assert cluster.accepted_ids is not None and cluster.acceptance_report is not None

    def check(args: list[Any]) -> None:
        hf, ips = args
        # Each dynamic resource has a type of its own (pulumi-python:dynamic/metalfleet:<class>).
        types = {r.name: r.typ for r in MOCKS.created if r.typ.startswith("pulumi-python:dynamic")}
        assert types == {"g1-0": NODE_TYPE, "g1-1": NODE_TYPE,
                         "g1-0-bootstrap": "pulumi-python:dynamic/metalfleet:NodeBootstrap",
                         "g1-1-bootstrap": "pulumi-python:dynamic/metalfleet:NodeBootstrap",
                         "g1-acceptance": "pulumi-python:dynamic/metalfleet:ClusterAcceptance"}
        gate = next(r for r in MOCKS.created if r.name == "g1-acceptance")
        # The gate is handed every node as the node resources report it (id and address) ...
        assert [(n["id"], n["private_ip"]) for n in gate.inputs["nodes"]] == [("n-0", ips[0]), ("n-1", ips[1])]
        # ... and the cluster's hostfile is the gate's verdict, not the list of nodes it ordered.
        assert ips == ["10.1.0.10", "10.1.0.11"]
        assert hf == f"{ips[1]} slots=8\n" and hf != hostfile(ips, 8)

    return pulumi.Output.all(cluster.hostfile, cluster.private_ips).apply(check)


def _quarantine(state: Path, spec: Any, indexes: tuple[int, ...]) -> list[str]:
    """Order ``spec``'s nodes on the file-backed fake cloud and quarantine ``indexes`` as the gate does."""
    from metalfleet.providers.fake import FakeDriver
    from metalfleet.providers.fleet import node_specs_for, order_cluster
    from metalfleet.providers.lifecycle import quarantine

    fake = FakeDriver(state_path=state)
    nodes = order_cluster(fake, node_specs_for(fake, spec))
    for i in indexes:
        assert quarantine(fake, nodes[i].id, f"gpu-count: expected 8 GPUs, found 7 (node {i})")
    return [n.id for n in nodes]


@pulumi.runtime.test
def test_a_quarantined_node_is_declared_in_its_next_generation_within_the_budget(tmp_path: Path) -> Any:
    """The program reads the quarantine tags back from the provider: with replace_failed, the quarantined
    node's index is declared one generation on (tagged with it), while the budget lasts; the rest stay."""
    MOCKS.created.clear()
    spec = _spec(name="gens", count=3, acceptance={"enabled": True, "replace_failed": True, "retry_budget": 1})
    state = tmp_path / "f.json"
    ids = _quarantine(state, spec, (1, 2))
    cluster = GpuCluster("q1", spec, driver_config={"state_path": str(state)})
    lifecycle = cluster.generation_plan
    assert lifecycle.generations == {1: 1} and lifecycle.budget_left == 0 and lifecycle.replace_failed
    assert [(r.index, r.old_node_id, r.generation) for r in lifecycle.replacing] == [(1, ids[1], 1)]
    assert "expected 8 GPUs, found 7 (node 1)" in lifecycle.replacing[0].reason
    assert [(q.index, q.node_id) for q in lifecycle.kept] == [(2, ids[2])]

    def check(_: Any) -> None:
        specs = {r.name: r.inputs["spec"] for r in MOCKS.created if r.typ == NODE_TYPE}
        assert {n: s["generation"] for n, s in specs.items()} == {"q1-0": 0, "q1-1": 1, "q1-2": 0}
        assert specs["q1-1"]["tags"]["metalfleet:generation"] == "1"
        assert "metalfleet:generation" not in specs["q1-0"]["tags"]
        gate = next(r for r in MOCKS.created if r.name == "q1-acceptance")
        assert gate.inputs["replacements_left"] == 0

    return cluster.hostfile.apply(check)  # the gate's output: every resource is registered by then


@pulumi.runtime.test
def test_without_replace_failed_a_quarantined_node_keeps_its_generation(tmp_path: Path) -> Any:
    MOCKS.created.clear()
    spec = _spec(name="keep", count=2, acceptance={"enabled": True})
    state = tmp_path / "f.json"
    ids = _quarantine(state, spec, (0,))
    cluster = GpuCluster("k1", spec, driver_config={"state_path": str(state)})
    assert cluster.generation_plan.generations == {} and not cluster.generation_plan.replace_failed
    assert [q.node_id for q in cluster.generation_plan.kept] == [ids[0]]

    def check(_: Any) -> None:
        assert {r.inputs["spec"]["generation"] for r in MOCKS.created if r.typ == NODE_TYPE} == {0}

    return cluster.node_ids.apply(check)
