"""Ascend nodes in a Slurm partition: their NPUs as ``Gres=npu:<model>:<n>`` on the device files the Ascend driver
gives, and CANN's hccl_test started by srun (PMI-2), one rank per NPU, on VM-mode simulated Ascend 910B hosts.

The gate's verdicts come in as :class:`GateNode` values (what ``GpuCluster`` passes the partition); the partition,
the daemons and the job are real: Debian's munged, slurmctld and slurmd inside the simulated hosts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.scheduler import SlurmSetup, join_slurm
from metalfleet.bootstrap.slurm import GateNode
from metalfleet.testing.hosts.harness import HostFleet, start_hosts
from metalfleet.testing.slurm import free_port_block

from ._fleet import inventory, ssh
from .test_real_slurm import require_slurm
from .test_slurm_on_hosts import SIM_SETTINGS

pytestmark = [pytest.mark.requires_root("VM-mode hosts running real Slurm daemons"),
              pytest.mark.xdist_group("slurm-ascend")]

OFFERING = "physical.kat2e.48xlarge.8.313t"
HCCL_TEST = "/usr/local/Ascend/ascend-toolkit/latest/tools/hccl_test/bin/all_reduce_test"
PORTS = free_port_block(3)


@pytest.fixture(scope="module")
def fleet() -> Iterator[HostFleet]:
    require_slurm()
    f = start_hosts(2, "ascend-910b", vm=True)
    try:
        for i in range(len(f.hosts)):  # what the Ascend steps leave: the driver (its device files) and CANN
            for kind, version in (("ascend-driver", "24.1.rc2"), ("ascend-cann", "8.0.RC2")):
                res = _ssh(f, i, ["mf-install", kind, version])
                assert res.rc == 0, res.stderr.decode()
        yield f
    finally:
        f.stop()


def _inventory(f: HostFleet) -> Inventory:
    return inventory(f, OFFERING, "huawei")


_ssh = ssh


def test_ascend_nodes_offer_their_npus_and_srun_starts_hccl_test_on_them(fleet: HostFleet) -> None:
    inv = _inventory(fleet)
    gates = [GateNode(h.name, h.address, OFFERING, True, provider="huawei", gpu_count=8, gpu_model="Ascend910B3",
                      fabric="roce", ascend=True, baseline_gpu_count=8, baseline_gpu_model="Ascend910B3")
             for h in inv.hosts]
    setup = SlurmSetup(cluster="ascend", partition="npu", controller=inv.hosts[0], munge_key=os.urandom(1024),
                       settings={**SIM_SETTINGS, "SlurmctldPort": str(PORTS), "MpiDefault": "pmi2"},
                       ports={h.name: PORTS + 1 + i for i, h in enumerate(inv.hosts)})
    outcome = join_slurm(inv, gates, setup)
    assert outcome.ok, outcome.summary()
    assert {n: s.gres for n, s in outcome.states.items()} == {"node0": "npu:910b3:8", "node1": "npu:910b3:8"}
    assert {"huawei", "roce", "910b3"} <= set(outcome.states["node1"].features)
    gres = _ssh(fleet, 1, ["cat", "/etc/slurm/gres.conf"]).stdout.decode()
    assert "NodeName=node1 Name=npu Type=910b3 File=/dev/davinci[0-7]" in gres
    assert _ssh(fleet, 1, ["ls", "/dev/davinci7"]).rc == 0  # the device file Slurm binds the job's 8th NPU to
    # one rank per NPU on both nodes, started by srun through PMI-2, as a user submits it
    job = _ssh(fleet, 0, ["srun", "-p", "npu", "-N2", "--ntasks-per-node=8", "--gres=npu:8", "--mpi=pmi2",
                          HCCL_TEST, "-p", "8", "-b", "8K", "-e", "64M", "-f", "2", "-d", "fp32", "-o", "sum"])
    text = job.stdout.decode()
    assert job.rc == 0, text + job.stderr.decode()
    rows = [ln for ln in text.splitlines() if ln[:1].isdigit()]
    # CANN's table, once (rank 0 of the 16 prints it): 8K to 64M, doubling, every size checked
    assert len(rows) == 14 and rows[0].startswith("8192 ") and rows[-1].startswith("67108864 "), text
    assert all(ln.rstrip().endswith("success") for ln in rows), text
    # a job asking for NPUs a node does not have is refused by the controller, not started short
    over = _ssh(fleet, 0, ["srun", "-p", "npu", "-N1", "--gres=npu:9", "true"])
    assert over.rc != 0 and "Requested node configuration is not available" in over.stderr.decode()
