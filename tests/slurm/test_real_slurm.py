"""Real Slurm daemons (Debian's munged, slurmctld, one slurmd per node) run by metalfleet.testing.slurm.

What the scheduler work of issue 24 relies on, checked against Slurm itself rather than a model of it: nodes
register idle with the GPUs of their ``Gres=`` line, a two-node job runs one task on each node, a drain shows its
reason in ``sinfo -R`` and a resume clears it, a node removed from the config is gone from ``scontrol show nodes``,
and stopping the cluster leaves none of its processes running. The config texts are written by hand here (the
generator that will produce them is not built yet).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metalfleet.testing.slurm import SlurmCluster, fake_devices, local_nodes, missing_programs

pytestmark = pytest.mark.requires_root("real Slurm daemons (munged, slurmctld and slurmd run as root)")

GPUS = 8
PARTITION = "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"


def node_line(name: str) -> str:
    """A p5-like node as the generator would describe it (its address and port are the harness's)."""
    return (f"NodeName={name} CPUs=16 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=1 "
            f"RealMemory=64000 Gres=gpu:h100:{GPUS} Feature=p5.48xlarge,efa,aws")


def require_slurm() -> None:
    missing = missing_programs()
    if missing:
        pytest.fail(f"missing prerequisite: {', '.join(sorted(missing))} not on PATH (Debian packages "
                    f"{' '.join(sorted(set(missing.values())))}: run `make slurm`, i.e. "
                    "tests/support/ensure-slurm.sh, as root)", pytrace=False)


def make_cluster(base: Path, n: int) -> SlurmCluster:
    require_slurm()
    nodes = local_nodes(n)
    files = fake_devices(base / "dev", "nvidia", GPUS)
    gres = "\n".join(f"NodeName={name} Name=gpu Type=h100 File={files}" for name, _, _ in nodes)
    topology = "SwitchName=leaf0 Nodes=" + ",".join(name for name, _, _ in nodes)
    return SlurmCluster(base / "slurm", nodes=nodes, node_lines=[node_line(name) for name, _, _ in nodes],
                        partition=PARTITION, gres=gres, topology=topology)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SlurmCluster]:
    c = make_cluster(tmp_path, 3)
    with c:
        yield c
    assert c.alive() == [], f"processes left after stop: {c.alive()}"


def test_nodes_register_idle_with_their_gpus(cluster: SlurmCluster) -> None:
    nodes = cluster.nodes()
    assert sorted(nodes) == ["n0", "n1", "n2"]
    for info in nodes.values():
        assert info.state == "IDLE"
        assert info.gres == f"gpu:h100:{GPUS}"
        assert set(info.features.split(",")) == {"p5.48xlarge", "efa", "aws"}
        assert info.fields["CPUTot"] == "16"  # the configured CPUs (config_overrides), not this machine's
    assert "gpu" in cluster.run(["sinfo", "-h", "-o", "%P"]).stdout


def test_a_two_node_gpu_job_runs_one_task_per_node(cluster: SlurmCluster) -> None:
    proc = cluster.run(["srun", "-N2", f"--gres=gpu:{GPUS}", "sh", "-c", "echo $SLURMD_NODENAME $(hostname)"])
    lines = proc.stdout.splitlines()
    print(proc.stdout)
    assert len(lines) == 2
    ran_on = {line.split()[0] for line in lines}
    assert len(ran_on) == 2 and ran_on <= {"n0", "n1", "n2"}


def test_drain_shows_the_reason_and_resume_clears_it(cluster: SlurmCluster) -> None:
    reason = "metalfleet gate: nccl all_reduce busbw 301 GB/s < 360"
    cluster.run(["scontrol", "update", "nodename=n1", "state=drain", f"reason={reason}"])
    assert cluster.reasons() == {"n1": ("drained", reason)}
    n1 = cluster.nodes()["n1"]
    assert "DRAIN" in n1.state.split("+") and n1.reason == reason
    # a drained node takes no new job: three nodes asked for, two left
    refused = cluster.run(["srun", "-N3", "--immediate=1", "hostname"], check=False)
    assert refused.returncode != 0

    cluster.run(["scontrol", "update", "nodename=n1", "state=resume"])
    assert cluster.reasons() == {}
    # slurmctld marks a resumed node not responding until its next ping answers
    assert cluster.wait_registered(["n1"], timeout=10)["n1"].state == "IDLE"


def test_a_node_removed_from_the_config_is_gone(cluster: SlurmCluster) -> None:
    cluster.run(["scontrol", "update", "nodename=n0", "state=drain", "reason=kept across the restart"])
    how = cluster.remove_nodes(["n2"], topology="SwitchName=leaf0 Nodes=n0,n1")
    assert how == "restart"  # Slurm 22.05: adding or removing nodes needs slurmctld and the slurmds restarted
    shown = cluster.run(["scontrol", "show", "nodes", "--oneliner"]).stdout
    assert "NodeName=n2 " not in shown
    assert sorted(cluster.nodes()) == ["n0", "n1"]
    assert cluster.reasons() == {"n0": ("drained", "kept across the restart")}
    proc = cluster.run(["srun", "-N1", "-w", "n1", "printenv", "SLURMD_NODENAME"])
    assert proc.stdout.split() == ["n1"]


def test_a_node_added_to_the_config_joins_idle(cluster: SlurmCluster) -> None:
    (new,) = local_nodes(1, prefix="x")
    files = fake_devices(cluster.base / "dev", "nvidia", GPUS)
    gres = f"NodeName={new[0]} Name=gpu Type=h100 File={files}"
    assert cluster.add_nodes([new], [node_line(new[0])], gres=gres) == "restart"
    assert sorted(cluster.nodes()) == ["n0", "n1", "n2", new[0]]
    assert cluster.nodes()[new[0]].state == "IDLE"


def test_changing_a_node_reconfigures_in_place(cluster: SlurmCluster) -> None:
    lines = [node_line("n0"), node_line("n1"), node_line("n2").replace("efa,aws", "efa,aws,spare")]
    assert cluster.reconfigure(node_lines=lines) == "reconfigure"
    assert "spare" in cluster.nodes()["n2"].features.split(",")


def test_stop_ends_every_process_even_with_a_job_running(tmp_path: Path) -> None:
    c = make_cluster(tmp_path, 2).start()
    job = subprocess.Popen(["srun", "-N2", "sleep", "300"], env=c.env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while "RUNNING" not in c.run(["squeue", "-h", "-o", "%T"]).stdout and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "RUNNING" in c.run(["squeue", "-h", "-o", "%T"]).stdout
        steps = [p for p in c.alive() if p not in c.started]
        assert steps, "the job's slurmstepd and tasks run outside the daemons' sessions"
    finally:
        c.stop()
        job.wait(10)
    assert c.alive() == []
    assert not [p for p in steps if Path(f"/proc/{p}").exists() and _state(p) != "Z"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "X"
