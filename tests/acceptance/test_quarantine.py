"""The gate's consequence on the file-backed fake cloud, with nodes whose private IPs are sshd hosts.

The gate (metalfleet.bootstrap.acceptance.quarantine) judges; what is done to the nodes is
metalfleet.providers.lifecycle's (its own tests, without hosts: tests/providers/test_lifecycle.py).

A failing node is tagged quarantined (through FakeDriver.set_tags) and kept, or, with
replace_failed, released and replaced (next generation) within the retry budget; the replacement
is bootstrapped and checked in turn. Nothing created is lost: every node the fake cloud ever made is
accepted, quarantined or released.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.bootstrap import Profile, run_bootstrap
from metalfleet.bootstrap.acceptance.quarantine import (
    ACCEPTANCE_TAG,
    REASON_TAG,
    accept_cluster,
    accepted_hosts,
    apply_quarantine,
    load_quarantine,
    write_quarantine,
)
from metalfleet.bootstrap.inventory import Host, Inventory
from metalfleet.bootstrap.runner import select_hosts
from metalfleet.bootstrap.ssh import SshOptions
from metalfleet.bootstrap.steps import NcclConfig
from metalfleet.providers.errors import CapacityError
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.fleet import node_specs_for, order_cluster
from metalfleet.providers.models import Node, NodeSpec, NodeState
from metalfleet.providers.spec import ClusterSpec, parse_spec
from metalfleet.testing.hosts.harness import HostFleet
from tests.specs import cluster_spec

from ._sim import IB, IB_PORT_DOWN, fleet_starter

SEVEN = {**IB, "gpu": {"count": 7}}
PORT_DOWN = {**IB, **IB_PORT_DOWN}
#: The nccl-config step alone: uploads two files, so a bootstrap is real but quick.
FILES_ONLY = Profile("files", (NcclConfig,), {"nccl-config": {"enabled": True}})


@pytest.fixture
def start() -> Iterator[Callable[..., HostFleet]]:
    yield from fleet_starter()


def spec_for(fleet: HostFleet | None, count: int, *, replace_failed: bool = False, budget: int = 2) -> ClusterSpec:
    ssh = {"user": "mfnode"}
    if fleet is not None:
        ssh.update(private_key=str(fleet.client_key), known_hosts=str(fleet.known_hosts))
    return cluster_spec("fake", "acc", count, ssh=ssh,
                        acceptance={"replace_failed": replace_failed, "retry_budget": budget})


def sim_inventory(fleet: HostFleet) -> Callable[[Sequence[Node]], Inventory]:
    """Nodes -> the sim hosts at their private IPs (sandbox fs_root, so a bootstrap writes there)."""
    by_addr = {h.address: h for h in fleet.hosts}

    def build(nodes: Sequence[Node]) -> Inventory:
        hosts = tuple(by_addr[n.private_ip or ""].host(name=n.name or n.id, provider="fake", offering=n.offering)
                      for n in nodes)
        return Inventory(hosts, fleet.ssh_options(pinned_keys={h.address: [h.host_key] for h in fleet.hosts}))

    return build


def cloud(tmp_path: Path, fleet: HostFleet, spec: ClusterSpec) -> tuple[FakeDriver, list[Node]]:
    driver = FakeDriver(state_path=tmp_path / "cloud.json", addresses=[h.address for h in fleet.hosts])
    return driver, order_cluster(driver, node_specs_for(driver, spec))


def all_node_ids(tmp_path: Path) -> set[str]:
    return set(json.loads((tmp_path / "cloud.json").read_text())["nodes"])


class NoTags:
    """A driver with only the contract's methods (no set_tags)."""

    def __init__(self, inner: FakeDriver) -> None:
        self.inner = inner
        self.name = inner.name

    def offerings(self) -> Any:
        return self.inner.offerings()

    def validate(self, spec: NodeSpec) -> None:
        self.inner.validate(spec)

    def order(self, spec: NodeSpec) -> Node:
        return self.inner.order(spec)

    def get(self, node_id: str) -> Node:
        return self.inner.get(node_id)

    def list_nodes(self, cluster: str) -> list[Node]:
        return self.inner.list_nodes(cluster)

    def wait(self, node_ids: Sequence[str], state: NodeState = NodeState.RUNNING, **kw: Any) -> list[Node]:
        return self.inner.wait(node_ids, state, **kw)

    def release(self, node_id: str, **kw: Any) -> None:
        self.inner.release(node_id, **kw)


# ----------------------------------------------------------------------------------- quarantine


def test_a_failing_node_is_tagged_quarantined_kept_and_reported(start: Any, tmp_path: Path) -> None:
    fleet = start(2, lambda i: SEVEN if i == 1 else IB)
    spec = spec_for(fleet, 2)
    driver, (n0, n1) = cloud(tmp_path, fleet, spec)
    qfile = tmp_path / "quarantine.yaml"

    # The default host mapping (hosts_from_spec: private IPs, the spec's SSH settings), as stacks uses it.
    out = accept_cluster(driver, spec, [n0, n1], quarantine_file=qfile)
    assert [n.id for n in out.accepted] == [n0.id]
    (q,) = out.quarantined
    assert (q.node_id, q.name, q.index, q.tagged) == (n1.id, "acc-1", 1, True)
    assert q.reason == "gpu-count: expected 8 GPUs, found 7 (nvidia-smi -q)"
    assert out.released == [] and out.replaced == [] and not out.ok and out.errors == []

    # Another process sees the tags: the fake cloud is file-backed.
    other = FakeDriver(state_path=tmp_path / "cloud.json")
    bad = other.get(n1.id)
    assert bad.state == NodeState.RUNNING  # kept for someone to look at
    assert bad.tags[ACCEPTANCE_TAG] == "quarantined" and bad.tags[REASON_TAG] == q.reason
    assert bad.tags["metalfleet:cluster"] == "acc"  # the driver's own tags stay
    assert other.get(n0.id).tags[ACCEPTANCE_TAG] == "passed"
    assert {n.id for n in other.list_nodes("acc")} == {n0.id, n1.id}
    entry = load_quarantine(qfile)["acc-1"]
    assert entry["node_id"] == n1.id and entry["reason"] == q.reason and entry["address"] == fleet[1].address

    # A driver without set_tags: reported as untagged, the quarantine file still records it.
    qfile2 = tmp_path / "quarantine-2.yaml"
    out2 = accept_cluster(NoTags(driver), spec, [n0, n1], quarantine_file=qfile2)  # type: ignore[arg-type]
    assert [x.tagged for x in out2.quarantined] == [False]
    assert list(load_quarantine(qfile2)) == ["acc-1"]


# ---------------------------------------------------------------------------------- replacement


def test_a_failing_node_is_replaced_and_the_replacement_bootstrapped_and_checked(start: Any, tmp_path: Path) -> None:
    fleet = start(3, lambda i: SEVEN if i == 1 else IB)
    spec = spec_for(fleet, 2, replace_failed=True, budget=2)
    driver, (n0, n1) = cloud(tmp_path, fleet, spec)
    hosts = sim_inventory(fleet)
    bootstrapped: list[list[str]] = []

    def bootstrap(nodes: Sequence[Node]) -> Any:
        bootstrapped.append([n.id for n in nodes])
        return run_bootstrap(hosts(nodes), FILES_ONLY, log_dir=tmp_path / "logs")

    out = accept_cluster(driver, spec, [n0, n1], bootstrap=bootstrap, inventory_for=hosts)
    assert out.ok, out.summary()
    assert out.released == [n1.id]
    (r,) = out.replaced
    n2 = driver.get(r.new_node_id or "")
    assert (r.index, r.old_node_id, r.generation, r.error) == (1, n1.id, 1, None)
    assert r.reason == "gpu-count: expected 8 GPUs, found 7 (nvidia-smi -q)"
    assert [n.id for n in out.accepted] == [n0.id, n2.id]
    assert out.generations == {1: 1} and out.budget_left == 1
    assert n2.name == "acc-1" and n2.tags["metalfleet:index"] == "1" and n2.private_ip == fleet[2].address
    assert n2.tags["metalfleet:generation"] == "1"  # what a stack declaring this cluster reads back
    # The replacement was bootstrapped before it was checked, and checked on its own host.
    assert bootstrapped == [[n2.id]]
    assert fleet[2].file("/etc/nccl.conf").is_file() and not fleet[1].file("/etc/nccl.conf").exists()
    assert len(out.reports) == 2 and out.reports[1].nodes[0].node_id == n2.id and out.reports[1].passed
    # The failed node: tagged with why, then released.
    gone = driver.get(n1.id)
    assert gone.state == NodeState.TERMINATED and gone.tags[REASON_TAG] == r.reason
    assert {n.id for n in driver.list_nodes("acc")} == {n0.id, n2.id}
    assert all_node_ids(tmp_path) == {n0.id, n1.id, n2.id}


def test_a_replacement_that_fails_again_is_quarantined_when_the_budget_is_spent(start: Any, tmp_path: Path) -> None:
    fleet = start(4, lambda i: [IB, SEVEN, SEVEN, PORT_DOWN][i])
    spec = spec_for(fleet, 2, replace_failed=True, budget=2)
    driver, (n0, n1) = cloud(tmp_path, fleet, spec)
    out = accept_cluster(driver, spec, [n0, n1], inventory_for=sim_inventory(fleet))

    assert [n.id for n in out.accepted] == [n0.id]
    r1, r2 = out.replaced
    assert (r1.old_node_id, r1.generation) == (n1.id, 1) and (r2.old_node_id, r2.generation) == (r1.new_node_id, 2)
    assert out.released == [n1.id, r1.new_node_id]
    (q,) = out.quarantined
    assert q.node_id == r2.new_node_id and q.index == 1 and q.tagged
    assert q.reason == "fabric-ports: mlx5_0 port 1 is Down"
    assert out.budget_left == 0 and out.generations == {1: 2} and not out.ok
    # Nothing lost, nothing orphaned: every node ever made is accepted, quarantined or released.
    made = all_node_ids(tmp_path)
    assert len(made) == 4
    assert made == {n.id for n in out.accepted} | {x.node_id for x in out.quarantined} | set(out.released)
    assert {n.id for n in driver.list_nodes("acc")} == {n0.id, q.node_id}
    assert driver.get(q.node_id or "").tags[ACCEPTANCE_TAG] == "quarantined"
    assert "quarantined acc-1" in out.summary()


# ------------------------------------------------------------------- driver faults (no hosts needed)


def unreachable(nodes: Sequence[Node]) -> Inventory:
    """Every node at a port nothing listens on: refused at once."""
    return Inventory(tuple(Host(name=n.name or n.id, address="127.0.0.1", port=1, user="nobody", provider="fake",
                                offering=n.offering) for n in nodes),
                     SshOptions(connect_attempts=1, connect_deadline=2, use_agent=False))


def test_a_replacement_order_that_fails_is_reported_and_nothing_is_orphaned(tmp_path: Path) -> None:
    spec = spec_for(None, 1, replace_failed=True, budget=1)
    driver = FakeDriver(state_path=tmp_path / "cloud.json")
    (n0,) = order_cluster(driver, node_specs_for(driver, spec))

    class NoCapacity(FakeDriver):
        def order(self, ns: NodeSpec) -> Node:
            raise CapacityError("no capacity for fake.8xh100 in local-1a", provider="fake", code="InsufficientCapacity")

    out = accept_cluster(NoCapacity(state_path=tmp_path / "cloud.json"), spec, [n0], inventory_for=unreachable)
    assert out.accepted == [] and out.quarantined == [] and out.released == [n0.id]
    (r,) = out.replaced
    assert r.new_node_id is None and r.error is not None and r.error.startswith("order failed: no capacity")
    assert r.reason.startswith("unreachable: acc-0: cannot connect to 127.0.0.1:1")
    assert out.errors and "could not be ordered" in out.errors[0] and not out.ok
    assert all_node_ids(tmp_path) == {n0.id}


def test_a_replacement_whose_bootstrap_fails_is_quarantined_without_being_checked(tmp_path: Path) -> None:
    spec = spec_for(None, 1, replace_failed=True, budget=1)
    driver = FakeDriver(state_path=tmp_path / "cloud.json")
    (n0,) = order_cluster(driver, node_specs_for(driver, spec))

    def bootstrap(nodes: Sequence[Node]) -> None:
        raise RuntimeError("apt mirror down")

    out = accept_cluster(driver, spec, [n0], bootstrap=bootstrap, inventory_for=unreachable)
    (q,) = out.quarantined
    assert q.reason == "bootstrap failed: RuntimeError: apt mirror down" and q.tagged
    assert out.released == [n0.id] and len(out.reports) == 1
    assert all_node_ids(tmp_path) == {n0.id, q.node_id}


def test_acceptance_disabled_accepts_without_connecting(tmp_path: Path) -> None:
    spec = parse_spec({**spec_for(None, 1).model_dump(mode="json"), "acceptance": {"enabled": False}})
    driver = FakeDriver()
    nodes = order_cluster(driver, node_specs_for(driver, spec))
    out = accept_cluster(driver, spec, nodes, inventory_for=unreachable)
    assert out.accepted == nodes and out.reports == [] and out.ok


# ------------------------------------------------------------------------- inventory quarantine


def test_inventory_hosts_get_a_label_in_the_quarantine_file(start: Any, tmp_path: Path) -> None:
    from metalfleet.bootstrap.acceptance.live import run_acceptance

    fleet = start(2, lambda i: SEVEN if i == 1 else IB)
    inv = Inventory(tuple(h.host(offering="fake.8xh100", provider="fake") for h in fleet.hosts),
                    fleet.ssh_options(pinned_keys={h.address: [h.host_key] for h in fleet.hosts}))
    qfile = tmp_path / "q.yaml"
    report = run_acceptance(inv)
    entries = write_quarantine(report, qfile)
    assert list(entries) == ["node1"]
    doc = yaml.safe_load(qfile.read_text())
    assert doc["quarantined"]["node1"]["labels"] == {"acceptance": "quarantined"}
    assert doc["quarantined"]["node1"]["reason"] == "gpu-count: expected 8 GPUs, found 7 (nvidia-smi -q)"
    labelled = apply_quarantine(inv, qfile)
    assert [h.name for h in select_hosts(labelled.hosts, "acceptance=quarantined")] == ["node1"]
    assert [h.name for h in accepted_hosts(inv, qfile).hosts] == ["node0"]

    # Fixed (the GPU is back): the next run takes it off the list.
    fleet[1].update_config(gpu={"count": 8})
    assert write_quarantine(run_acceptance(inv, limit="node1"), qfile) == {}
