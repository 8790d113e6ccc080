"""The gate and Slurm agree: nodes the gate accepted form a partition real Slurm runs jobs on; a node the gate
blames is drained with its reason; its successor takes its place; released nodes leave no trace.

The nodes are replayed 8x H100 InfiniBand hosts judged by the production gate (tests/acceptance/_replay.py; one
has a slow NIC the localisation names); their Slurm definitions, gres.conf and topology.conf come from
bootstrap/slurm.py; the scontrol calls from its ``plan_sync``; Slurm is Debian's, run by metalfleet.testing.slurm.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap.acceptance.baselines import resolve_baseline
from metalfleet.bootstrap.acceptance.live import run_acceptance
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
from metalfleet.bootstrap.acceptance.results import AcceptanceReport
from metalfleet.bootstrap.inventory import Host, Inventory
from metalfleet.bootstrap.replay import ReplayFleet
from metalfleet.bootstrap.slurm import (
    NodeResources,
    SlurmNode,
    gres_conf,
    node_from_acceptance,
    node_lines,
    parse_nodes,
    partition_line,
    plan_sync,
    topology_conf,
)
from metalfleet.testing.slurm import SlurmCluster, fake_devices, local_nodes
from tests.acceptance._replay import ReplayFabric, replayed_host
from tests.acceptance._sim import IB

from .test_real_slurm import require_slurm

pytestmark = pytest.mark.requires_root("real Slurm daemons (munged, slurmctld and slurmd run as root)")

OFFERING = "fake.8xh100"
OPTIONS = AcceptanceOptions(nccl_args=("-b", "1G", "-e", "2G", "-f", "2"))
#: What the nodes' facts give (small, so this 2-core machine's slurmd can stand in for them).
SMALL = NodeResources(sockets=2, cores_per_socket=4, threads_per_core=1, memory_mib=16000)
SLOW_NIC = {**IB, "fabric": {**IB["fabric"], "nic_scale": {"mlx5_4": 0.4}}}  # type: ignore[dict-item]


def judged(names: list[str], faulty: set[str]) -> tuple[AcceptanceReport, list[Host]]:
    fab = ReplayFabric()
    hosts, nodes = [], []
    for i, name in enumerate(names):
        h, n = replayed_host(name, f"10.0.1.{i + 1}", OFFERING, resolve_baseline(OFFERING), OPTIONS,
                             SLOW_NIC if name in faulty else IB, profile="h100-ib", fabric=fab,
                             switch=f"leaf{i // 2}")
        hosts.append(h)
        nodes.append(n)
    return run_acceptance(Inventory(tuple(hosts)), options=OPTIONS, connect=ReplayFleet(nodes)), hosts


def definitions(report: AcceptanceReport, hosts: list[Host], devices: str) -> list[SlurmNode]:
    labels = {h.name: h.labels for h in hosts}
    return [node_from_acceptance(n, SMALL, labels=labels[n.host], device_dir=devices) for n in report.nodes
            if n.passed]


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    require_slurm()
    yield tmp_path


def _sync(cluster: SlurmCluster, **verdicts: Any) -> list[list[str]]:
    calls = plan_sync(parse_nodes(cluster.run(["scontrol", "show", "nodes", "--oneliner"]).stdout), **verdicts)
    for argv in calls:
        cluster.run(argv)
    return calls


def test_accepted_nodes_form_a_partition_and_slurm_follows_the_gate(base: Path) -> None:
    names = ["acc-0", "acc-1", "acc-2", "acc-3", "acc-4"]
    report, hosts = judged(names, faulty={"acc-3"})
    assert [n.host for n in report.failed] == ["acc-3"]  # blamed by the localisation, its NIC named
    devices = str(Path(fake_devices(base / "dev", "nvidia", 8)).parent)
    defs = definitions(report, hosts, devices)
    assert [d.name for d in defs] == ["acc-0", "acc-1", "acc-2", "acc-4"]  # only accepted nodes join
    addresses = dict(zip([d.name for d in defs], local_nodes(len(defs)), strict=True))
    slurm_nodes = [(name, addr, port) for name, (_n, addr, port) in addresses.items()]
    with SlurmCluster(base / "slurm", nodes=slurm_nodes, node_lines=node_lines(defs),
                      partition=partition_line("acc", defs), gres=gres_conf(defs),
                      topology=topology_conf(defs)).start() as cluster:
        state = cluster.nodes()
        assert {n: (i.state, i.gres) for n, i in state.items()} == {d.name: ("IDLE", "gpu:h100:8") for d in defs}
        assert "infiniband" in state["acc-0"].features and "fake.8xh100" in state["acc-0"].features
        job = cluster.run(["srun", "-p", "acc", "-N2", "--gres=gpu:8", "-C", "infiniband", "--switches=1",
                           "sh", "-c", "echo $SLURMD_NODENAME"])
        assert sorted(job.stdout.split()) in (["acc-0", "acc-1"], ["acc-2", "acc-4"])  # one leaf: placement
        # Later the gate quarantines acc-1 (its reason as the gate gave it) and accepts the rest.
        why = "fabric-localisation: slow fabric interface (mlx5_6): with acc-0 (round 2): 150.0/330.0 GB/s"
        calls = _sync(cluster, accepted=["acc-0", "acc-2", "acc-4"], quarantined={"acc-1": why})
        assert len(calls) == 1
        state, reasons = cluster.nodes(), cluster.reasons()
        assert "DRAIN" in state["acc-1"].state and reasons["acc-1"][1] == f"metalfleet: {why}"
        # A second run changes nothing.
        assert _sync(cluster, accepted=["acc-0", "acc-2", "acc-4"], quarantined={"acc-1": why}) == []
        # Its successor (the next generation, accepted) takes its place: the quarantined node is taken out of
        # service before its machine goes, then the config names the successor instead (a restart, as Slurm
        # 22.05 needs for a changed node set).
        assert _sync(cluster, accepted=[], quarantined={}, released=["acc-1"]) == [
            ["scontrol", "update", "nodename=acc-1", "state=drain", "reason=metalfleet: released"],
            ["scontrol", "update", "nodename=acc-1", "state=down", "reason=metalfleet: released"]]
        (succ,) = definitions(*judged(["acc-1-g1"], faulty=set()), devices)
        after = [d for d in defs if d.name != "acc-1"] + [succ]
        (_n, addr, port), = local_nodes(1)
        kept = [n for n in slurm_nodes if n[0] != "acc-1"]
        cluster.reconfigure(nodes=[*kept, ("acc-1-g1", addr, port)], node_lines=node_lines(after),
                            partition=partition_line("acc", after), gres=gres_conf(after),
                            topology=topology_conf(after))
        state = cluster.nodes()
        assert "acc-1" not in state and state["acc-1-g1"].state == "IDLE"
        assert _sync(cluster, accepted=[d.name for d in after], quarantined={}) == []
        four = cluster.run(["srun", "-p", "acc", "-N4", "--gres=gpu:8", "sh", "-c", "echo $SLURMD_NODENAME"])
        assert sorted(four.stdout.split()) == ["acc-0", "acc-1-g1", "acc-2", "acc-4"]
        # Destroy: every node out of service first, then gone from the config.
        _sync(cluster, accepted=[], quarantined={}, released=list(state))
        after_down = cluster.nodes()  # drained (a registration in between may have lifted DOWN, never DRAIN)
        assert all("DRAIN" in i.state and i.reason == "metalfleet: released" for i in after_down.values()), {
            n: (i.state, i.reason) for n, i in after_down.items()}
