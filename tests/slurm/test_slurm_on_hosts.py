"""Accepted nodes become a Slurm partition on simulated hosts, through the bootstrap steps, and a job runs on it.

VM-mode hosts (tests/support/hosts/vm.py: each its own "/", /run and hostname; real sshd): the acceptance gate
judges them over SSH; :func:`join_slurm` reads their CPU and memory facts, writes the configs with the munge,
slurmd and slurmctld steps, whose ``systemctl`` starts Debian's real munged, slurmctld and slurmd inside each
host (the shim's REAL_DAEMONS); then a job is submitted on the controller and the gate's verdicts reach Slurm.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from metalfleet.bootstrap.acceptance.live import run_acceptance
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.scheduler import SlurmSetup, join_slurm
from metalfleet.testing.hosts.harness import HostFleet, start_hosts
from metalfleet.testing.slurm import free_port_block

from ._fleet import inventory, ssh
from .test_real_slurm import require_slurm

#: One fleet for the module, its tests in order on one worker (each starts from what the one before left).
pytestmark = [pytest.mark.requires_root("VM-mode hosts running real Slurm daemons"),
              pytest.mark.xdist_group("slurm-vm")]

OFFERING = "fake.8xh100"
OPTIONS = AcceptanceOptions(nccl_args=("-b", "1G", "-e", "2G", "-f", "2"))
#: What the simulated hosts need: no writable cgroup filesystem there (processes tracked by /proc, tasks not
#: bound), and slurmd is Debian's real one, which counts this machine's CPUs and memory rather than the simulated
#: ones, so the definitions (from the simulated hosts' own facts) are taken as configured.
SIM_SETTINGS = {"ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none",
                "SlurmdParameters": "config_overrides"}
#: Ports of this worker's range (the hosts share this machine's network): the controller's, then one per node.
PORTS = free_port_block(4)
SETTINGS = {**SIM_SETTINGS, "SlurmctldPort": str(PORTS)}


@pytest.fixture(scope="module")
def fleet() -> Iterator[HostFleet]:
    require_slurm()
    f = start_hosts(3, "h100-ib", vm=True, config={"fabric": {"kind": "infiniband", "nics": 8, "nic_gbps": 400}})
    try:
        for h in f.hosts:
            with h.edit_state() as st:
                st["packages"]["nvidia-driver-550"] = "550.90.07-0ubuntu1"
        for i in range(len(f.hosts)):  # what the driver step leaves: the module loaded, its device files there
            assert _ssh(f, i, ["sudo", "-n", "modprobe", "nvidia"]).rc == 0
        yield f
    finally:
        f.stop()


def _inventory(f: HostFleet) -> Inventory:
    return inventory(f, OFFERING, "fake")


_ssh = ssh


def test_accepted_nodes_form_a_partition_and_run_a_job(fleet: HostFleet) -> None:
    inv = _inventory(fleet)
    report = run_acceptance(inv, options=OPTIONS)
    assert report.passed, [n.reason for n in report.failed]
    ports = {h.name: PORTS + 1 + h.index for h in fleet.hosts}
    setup = SlurmSetup(cluster="sim", partition="gpu", controller=inv.hosts[0], munge_key=os.urandom(1024),
                       settings=SETTINGS, ports=ports)
    outcome = join_slurm(inv, report, setup)
    assert outcome.ok, outcome.summary()
    assert {n: "+".join(sorted(s.flags)) for n, s in outcome.states.items()} == dict.fromkeys(ports, "IDLE")
    node0 = outcome.states["node0"]
    assert node0.gres == "gpu:h100:8" and {"fake.8xh100", "infiniband", "h100"} <= set(node0.features)
    # the node definitions come from the hosts' own facts: 2 x 56 cores x 2 threads of the DGX profile
    conf = _ssh(fleet, 1, ["cat", "/etc/slurm/slurm.conf"]).stdout.decode()
    assert "NodeName=node1 NodeAddr=" in conf and "CPUs=224 Boards=1 SocketsPerBoard=2 CoresPerSocket=56" in conf
    # a job through Slurm: the simulated hosts' all_reduce_perf, one per node, 8 GPUs each
    job = _ssh(fleet, 0, ["srun", "-p", "gpu", "-N2", "--ntasks-per-node=1", "--gres=gpu:8", "all_reduce_perf",
                          "-b", "1G", "-e", "1G", "-g", "8"])
    text = job.stdout.decode()
    assert job.rc == 0, text + job.stderr.decode()
    assert text.count("# Avg bus bandwidth") == 2 and "NVIDIA H100 80GB HBM3" in text
    # the same configs again: nothing uploaded, nothing restarted
    again = join_slurm(inv, report, setup)
    assert again.ok and again.calls == []
    changed = [(r.host, s.name, s.commands) for r in again.bootstrap.hosts  # type: ignore[union-attr]
               for s in r.steps if s.status == "changed"]
    assert changed == [], changed


def test_the_gate_drains_resumes_and_releases_nodes_in_slurm(fleet: HostFleet) -> None:
    from metalfleet.bootstrap.scheduler import leave_slurm

    inv = _inventory(fleet)
    ports = {h.name: PORTS + 1 + h.index for h in fleet.hosts}
    setup = SlurmSetup(cluster="sim", partition="gpu", controller=inv.hosts[0], munge_key=os.urandom(1024),
                       settings=SETTINGS, ports=ports)
    first = join_slurm(inv, run_acceptance(inv, options=OPTIONS), setup)
    assert first.ok, first.summary()
    bad = fleet.hosts[2]
    bad.update_config(gpu={"count": 7})  # a GPU fell off the bus: the gate quarantines node2
    report = run_acceptance(inv, options=OPTIONS)
    assert [n.host for n in report.failed] == ["node2"]
    drained = join_slurm(inv, report, setup)
    assert drained.ok, drained.summary()
    assert "DRAIN" in drained.states["node2"].flags
    assert drained.states["node2"].reason == f"metalfleet: {report.node('node2').reason}"
    restarted = [(r.host, s.name) for r in drained.bootstrap.hosts  # type: ignore[union-attr]
                 for s in r.steps if any("restart" in c for c in s.commands)]
    assert restarted == []  # drained in place: its definition and everyone's config unchanged
    sinfo = _ssh(fleet, 0, ["sinfo", "-R", "-h", "-o", "%N|%E"]).stdout.decode()
    assert "node2|metalfleet: gpu-count" in sinfo
    # fixed (or replaced by a healthy one at its address): accepted again, resumed
    bad.update_config(gpu={"count": 8})
    resumed = join_slurm(inv, run_acceptance(inv, options=OPTIONS), setup)
    assert resumed.ok and resumed.calls == [["scontrol", "update", "nodename=node2", "state=resume"]]
    assert "DRAIN" not in resumed.states["node2"].flags
    # release: every node out of service before the machines go
    calls = leave_slurm(inv.hosts[0], ["node1", "node2"], ssh=inv.ssh)
    assert [(c[2], c[3]) for c in calls] == [("nodename=node1", "state=drain"), ("nodename=node1", "state=down"),
                                             ("nodename=node2", "state=drain"), ("nodename=node2", "state=down")]
    nodes = _ssh(fleet, 0, ["scontrol", "show", "nodes", "--oneliner"]).stdout.decode()
    gone = [line for line in nodes.splitlines() if line.startswith(("NodeName=node1", "NodeName=node2"))]
    assert len(gone) == 2 and all("DRAIN" in line and "Reason=metalfleet: released" in line for line in gone), gone


def test_the_health_check_drains_a_node_that_lost_a_gpu(fleet: HostFleet) -> None:
    inv = _inventory(fleet)
    for i in range(3):
        fleet.hosts[i].update_config(gpu={"count": 8})
    ports = {h.name: PORTS + 1 + h.index for h in fleet.hosts}
    setup = SlurmSetup(cluster="sim", partition="gpu", controller=inv.hosts[0], munge_key=os.urandom(1024),
                       settings=SETTINGS, ports=ports, health_interval=60)
    outcome = join_slurm(inv, run_acceptance(inv, options=OPTIONS), setup)
    assert outcome.ok, outcome.summary()
    conf = _ssh(fleet, 0, ["cat", "/etc/slurm/slurm.conf"]).stdout.decode()
    assert "HealthCheckProgram=/etc/slurm/metalfleet-healthcheck.sh\nHealthCheckInterval=60" in conf
    check = ["env", "SLURMD_NODENAME=node1", "/etc/slurm/metalfleet-healthcheck.sh"]  # as slurmd runs it
    assert _ssh(fleet, 1, check).rc == 0  # all 8 answer: nothing happens
    fleet.hosts[1].update_config(gpu={"count": 7})
    assert _ssh(fleet, 1, check).rc == 1
    sinfo = _ssh(fleet, 0, ["sinfo", "-R", "-h", "-o", "%N|%E"]).stdout.decode()
    assert "node1|metalfleet: health check: 7 of 8 GPUs answer" in sinfo, sinfo
    fleet.hosts[1].update_config(gpu={"count": 8})

