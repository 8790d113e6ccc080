"""Slurm node definitions from the gate's evidence (bootstrap/slurm.py), on nodes the real gate judged.

The nodes are replayed 8x H100 InfiniBand hosts (tests/acceptance/_replay.py): their probes go through the
production gate, so each node's Gres comes from the GPUs nvidia-smi showed and the gate passed.
"""

from __future__ import annotations

import shlex

import pytest

from metalfleet.bootstrap.acceptance.baselines import resolve_baseline
from metalfleet.bootstrap.acceptance.live import run_acceptance
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
from metalfleet.bootstrap.acceptance.results import AcceptanceReport
from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.replay import ReplayFleet
from metalfleet.bootstrap.slurm import (
    NodeResources,
    drain_argv,
    gres_conf,
    gres_type,
    node_from_acceptance,
    node_lines,
    partition_line,
    topology_conf,
)
from metalfleet.providers.errors import InvalidSpecError
from tests.acceptance._replay import ReplayFabric, replayed_host
from tests.acceptance._sim import IB

OFFERING = "fake.8xh100"
OPTIONS = AcceptanceOptions(nccl_args=("-b", "1G", "-e", "1G"), multi_node=False)
DGX = NodeResources(sockets=2, cores_per_socket=56, threads_per_core=2, memory_mib=2 * 1024 * 1024)


def _judged(configs: list[dict]) -> AcceptanceReport:  # type: ignore[type-arg]
    fab = ReplayFabric()
    hosts, nodes = [], []
    for i, extra in enumerate(configs):
        h, n = replayed_host(f"gpu-{i}", f"10.0.0.{i + 1}", OFFERING, resolve_baseline(OFFERING), OPTIONS,
                             extra, profile="h100-ib", fabric=fab, switch=f"leaf{i // 2}")
        hosts.append(h)
        nodes.append(n)
    report = run_acceptance(Inventory(tuple(hosts)), options=OPTIONS, connect=ReplayFleet(nodes))
    report.hosts = hosts  # type: ignore[attr-defined]
    return report


def test_an_accepted_node_offers_the_gpus_the_gate_counted() -> None:
    report = _judged([IB, IB, IB])
    hosts = {h.name: h for h in report.hosts}  # type: ignore[attr-defined]
    nodes = [node_from_acceptance(n, DGX, labels=hosts[n.host].labels) for n in report.nodes]
    first = node_lines(nodes).splitlines()[0]
    assert first == ("NodeName=gpu-0 NodeAddr=10.0.0.1 CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56 "
                     "ThreadsPerCore=2 RealMemory=2097152 Gres=gpu:h100:8 "
                     "Feature=fake.8xh100,infiniband,fake,h100 State=UNKNOWN")
    assert gres_conf(nodes).splitlines()[0] == "NodeName=gpu-0 Name=gpu Type=h100 File=/dev/nvidia[0-7]"
    assert topology_conf(nodes) == ("SwitchName=leaf0 Nodes=gpu-0,gpu-1\nSwitchName=leaf1 Nodes=gpu-2\n"
                                    "SwitchName=spine Switches=leaf0,leaf1\n")
    assert partition_line("gpu", nodes) == "PartitionName=gpu Nodes=gpu-0,gpu-1,gpu-2 Default=YES MaxTime=INFINITE " \
                                           "State=UP\n"


def test_a_node_the_gate_refused_does_not_join() -> None:
    report = _judged([IB, {**IB, "gpu": {"count": 7}}])
    bad = report.node("gpu-1")
    assert not bad.passed
    with pytest.raises(InvalidSpecError, match="did not pass acceptance"):
        node_from_acceptance(bad, DGX)


def test_names_and_reasons_reach_slurm_intact() -> None:
    assert [gres_type(p) for p in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H20", "NVIDIA L20",
                                   "Ascend910B3", "NVIDIA GB200")] == ["h100", "a100", "h20", "l20", "910b3", "gb200"]
    argv = drain_argv("gpu-3", "fabric-localisation: slow fabric interface (mlx5_4): with gpu-2 (round 2)")
    assert shlex.split(shlex.join(argv)) == argv and argv[-1].startswith("reason=metalfleet: fabric-localisation")
    report = _judged([IB])
    with pytest.raises(InvalidSpecError, match=r"scheduler\.features"):
        node_from_acceptance(report.nodes[0], DGX, extra_features=["a,b"])


def test_the_sync_makes_slurm_agree_with_the_gate_and_a_second_run_does_nothing() -> None:
    from metalfleet.bootstrap.slurm import NodeState, plan_sync, remove_argv, resume_argv

    idle = frozenset({"IDLE"})
    why = "fabric-localisation: slow fabric interface (mlx5_4)"
    now = {"a": NodeState("a", idle), "b": NodeState("b", idle),
           "c": NodeState("c", frozenset({"IDLE", "DRAIN"}), "metalfleet: gpu-count: expected 8 GPUs, found 7"),
           "d": NodeState("d", frozenset({"IDLE", "DRAIN"}), "operator: firmware update"), "e": NodeState("e", idle)}
    calls = plan_sync(now, accepted=["a", "c", "d"], quarantined={"b": why}, released=["e"])
    # d: an operator's drain stays; e: drained before it is downed, so a registration cannot put it back
    assert calls == [drain_argv("b", why), resume_argv("c"), drain_argv("e", "released"), remove_argv("e")]
    after = {**now, "b": NodeState("b", frozenset({"IDLE", "DRAIN"}), f"metalfleet: {why}"),
             "c": NodeState("c", idle), "e": NodeState("e", frozenset({"DOWN", "DRAIN"}), "metalfleet: released")}
    assert plan_sync(after, accepted=["a", "c", "d"], quarantined={"b": why}, released=["e"]) == []
    # e registered again before its machine went: DOWN is gone, the drain is not; nothing more to do
    back = {**after, "e": NodeState("e", frozenset({"IDLE", "DRAIN"}), "metalfleet: released")}
    assert plan_sync(back, accepted=["a", "c", "d"], quarantined={"b": why}, released=["e"]) == []


def test_the_task_prolog_hands_jobs_the_gates_nccl_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from metalfleet.bootstrap.slurm import task_prolog

    env = tmp_path / "metalfleet-nccl.sh"
    env.write_text("# NCCL over the 8 IB rails\nexport NCCL_IB_HCA='=mlx5_0,mlx5_1'\nexport FI_PROVIDER=efa\n"
                   "export NCCL_SOCKET_IFNAME='^lo,docker'\nexport UNRELATED=1\n")
    prolog = tmp_path / "prolog.sh"
    prolog.write_text(task_prolog(str(env)))
    out = subprocess.run(["sh", str(prolog)], capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    assert sorted(out.stdout.splitlines()) == sorted(  # env's order is the shell's
        ["export NCCL_IB_HCA==mlx5_0,mlx5_1", "export NCCL_SOCKET_IFNAME=^lo,docker", "export FI_PROVIDER=efa"])
    env.unlink()
    assert subprocess.run(["sh", str(prolog)], capture_output=True, text=True).stdout == ""  # no file: nothing


def test_resources_come_from_the_nodes_cpu_and_memory_facts() -> None:
    from metalfleet.bootstrap.facts import CpuLayout

    dgx = CpuLayout(sockets=2, cores_per_socket=56, threads_per_core=2, cpus=224, model="Xeon 8480C", numa_nodes=2)
    assert NodeResources.from_facts(dgx, 2 * 1024 * 1024) == DGX
    with pytest.raises(InvalidSpecError, match=r"node gpu-3: its lscpu could not be read"):
        NodeResources.from_facts(None, 1024, "gpu-3")


def test_a_gate_verdict_survives_a_round_trip_through_plain_data() -> None:
    import json

    from metalfleet.bootstrap.slurm import GateNode

    report = _judged([IB])
    gate = GateNode.from_acceptance(report.nodes[0])
    # a Pulumi resource's state keeps numbers as floats
    back = GateNode.from_dict(json.loads(json.dumps(gate.to_dict()).replace('"gpu_count": 8', '"gpu_count": 8.0')))
    assert back == gate and isinstance(back.gpu_count, int)
    assert node_from_acceptance(back, DGX) == node_from_acceptance(report.nodes[0], DGX)
