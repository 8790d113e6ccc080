"""Accepted nodes join a Slurm controller that is not metalfleet's (``scheduler.join``), on simulated hosts.

The site: one VM-mode host runs Debian's real munged and slurmctld with the site's own slurm.conf
(:func:`site_controller_conf`: configless, MaxNodeCount, a NodeSet by feature), written here as a site admin would,
not by metalfleet. The cluster's nodes are other VM-mode hosts: :func:`join_slurm` with ``SlurmSetup.join`` gives
them the site's munge key, creates each node's record (``scontrol create ... State=FUTURE``) with the address and
resources the gate measured and starts Debian's slurmd configless as a dynamic node (``-Z``; the shim starts it as
the unit file and metalfleet's drop-in say, with the host's real procfs, which configless slurmd reads its fetched
config through). Jobs are submitted on the site's host, as its users would.

The simulated hosts share this machine's network, so every connection between them comes from 127.0.0.1: the
site's ``CommunicationParameters=NoInAddrAny`` makes each daemon listen on its own host's address, and the submit
host's name resolves to 127.0.0.1, where srun listens for the connections its tasks make back to it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import pytest

from metalfleet.bootstrap.acceptance.live import run_acceptance
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.scheduler import SlurmSetup, join_slurm, leave_joined
from metalfleet.testing.hosts.harness import HostFleet, start_hosts
from metalfleet.testing.slurm import free_port_block, parse_nodes, site_controller_conf, site_controller_script

from ._fleet import inventory, ssh
from .test_real_slurm import require_slurm

#: One fleet for the module, its tests in order on one worker (each starts from what the one before left).
pytestmark = [pytest.mark.requires_root("VM-mode hosts running real Slurm daemons"),
              pytest.mark.xdist_group("slurm-join")]

OFFERING = "fake.8xh100"
OPTIONS = AcceptanceOptions(nccl_args=("-b", "1G", "-e", "2G", "-f", "2"))
PORT = free_port_block(2)
KEY = os.urandom(1024)
FEATURE = "metalfleet-sim"  # SlurmSetup(cluster="sim").owner_feature: the site's NodeSet selects by it


@pytest.fixture(scope="module")
def fleet() -> Iterator[HostFleet]:
    require_slurm()
    f = start_hosts(4, "h100-ib", vm=True, config={"fabric": {"kind": "infiniband", "nics": 8, "nic_gbps": 400}})
    try:
        for h in f.hosts:
            with h.edit_state() as st:
                st["packages"]["nvidia-driver-550"] = "550.90.07-0ubuntu1"
        for i in range(1, len(f.hosts)):  # what the driver step leaves: the module loaded, its device files there
            assert _ssh(f, i, ["sudo", "-n", "modprobe", "nvidia"]).rc == 0
        _start_site(f)
        yield f
    finally:
        f.stop()


def _start_site(f: HostFleet) -> None:
    """The site's controller on host 0, set up the way its admins would (not by metalfleet)."""
    site = f.hosts[0]
    conf = site_controller_conf(hostname="node0", address=site.address, port=PORT, partition="gpu", feature=FEATURE)
    # the site's gres.conf: configless nodes read it; one line for every H100 node's device files
    script = site_controller_script(conf=conf, munge_key=KEY, gres="Name=gpu Type=h100 File=/dev/nvidia[0-7]",
                                    submit_host="node0")
    res = _ssh(f, 0, ["sh", "-c", script])
    assert res.rc == 0, res.stdout.decode() + res.stderr.decode()


def _inventory(f: HostFleet, *idx: int) -> Inventory:
    return inventory(f, OFFERING, "fake", idx)


_ssh = ssh


def _site_nodes(f: HostFleet) -> dict[str, Any]:
    text: str = _ssh(f, 0, ["scontrol", "show", "nodes", "--oneliner"]).stdout.decode()
    return dict(parse_nodes(text))


def _setup(f: HostFleet, partition: str = "gpu") -> SlurmSetup:
    return SlurmSetup(cluster="sim", partition=partition, controller=None, munge_key=KEY,
                      join=f"{f.hosts[0].address}:{PORT}")


def test_accepted_nodes_join_the_sites_controller_and_run_a_job(fleet: HostFleet) -> None:
    inv = _inventory(fleet, 1, 2)
    report = run_acceptance(inv, options=OPTIONS)
    assert report.passed, [n.reason for n in report.failed]
    outcome = join_slurm(inv, report, _setup(fleet))
    assert outcome.ok, outcome.summary()
    site = _site_nodes(fleet)
    assert sorted(site) == ["node1", "node2"]
    for i, name in ((1, "node1"), (2, "node2")):
        node = site[name]
        assert node.state == "IDLE+DYNAMIC_NORM", node.fields
        # the record metalfleet created: the address it knows and what the gate measured, not the connection's
        assert node.fields["NodeAddr"] == fleet.hosts[i].address
        assert node.gres == "gpu:h100:8" and node.fields["CPUTot"] == "224"
        assert {FEATURE, "fake.8xh100", "infiniband", "h100"} <= set(node.features.split(","))
        assert node.fields["Partitions"] == "gpu"
    # configless: no slurm.conf of the node's own; the drop-in points slurmd at the site
    dropin = _ssh(fleet, 1, ["cat", "/etc/systemd/system/slurmd.service.d/metalfleet.conf"]).stdout.decode()
    assert f"--conf-server {fleet.hosts[0].address}:{PORT} -Z -N node1 --conf \"CPUs=224 " in dropin
    assert _ssh(fleet, 1, ["test", "-e", "/etc/slurm/slurm.conf"]).rc == 1
    # a job through the site's controller: the simulated hosts' all_reduce_perf, one per node, 8 GPUs each
    job = _ssh(fleet, 0, ["srun", "-p", "gpu", "-N2", "--ntasks-per-node=1", "--gres=gpu:8", "all_reduce_perf",
                          "-b", "1G", "-e", "1G", "-g", "8"])
    text = job.stdout.decode()
    assert job.rc == 0, text + job.stderr.decode()
    assert text.count("# Avg bus bandwidth") == 2 and "NVIDIA H100 80GB HBM3" in text
    # the same again: nothing uploaded, created or restarted, no scontrol call
    again = join_slurm(inv, report, _setup(fleet))
    assert again.ok and again.calls == [], again.summary()
    changed = [(r.host, s.name, s.commands) for r in again.bootstrap.hosts  # type: ignore[union-attr]
               for s in r.steps if s.status == "changed"]
    assert changed == [], changed
    # a partition the site's slurm.conf does not put them in: said, with the lines that would
    wrong = join_slurm(inv, report, _setup(fleet, partition="other"))
    assert not wrong.ok
    assert "in no partition other" in wrong.errors[0] and f"Feature={FEATURE}" in wrong.errors[0]


def test_quarantine_drains_a_successor_joins_and_the_released_node_is_deleted(fleet: HostFleet) -> None:
    inv = _inventory(fleet, 1, 2)
    fleet.hosts[2].update_config(gpu={"count": 7})  # a GPU fell off the bus: the gate quarantines node2
    report = run_acceptance(inv, options=OPTIONS)
    assert [n.host for n in report.failed] == ["node2"]
    drained = join_slurm(inv, report, _setup(fleet))
    assert drained.ok, drained.summary()
    sinfo = _ssh(fleet, 0, ["sinfo", "-R", "-h", "-o", "%N|%E"]).stdout.decode()
    assert f"node2|metalfleet: {report.node('node2').reason}" in sinfo, sinfo
    # replaced: node3 joins in node2's place, node2 is taken off the controller before its machine goes
    calls = leave_joined({"node2": inv.hosts[1]}, ssh=inv.ssh)
    assert [c[1:4] for c in calls] == [["update", "nodename=node2", "state=drain"],
                                       ["update", "nodename=node2", "state=down"], ["delete", "nodename=node2"]]
    successor = _inventory(fleet, 1, 3)
    joined = join_slurm(successor, run_acceptance(successor, options=OPTIONS), _setup(fleet))
    assert joined.ok, joined.summary()
    site = _site_nodes(fleet)
    assert sorted(site) == ["node1", "node3"] and site["node3"].state == "IDLE+DYNAMIC_NORM"
    assert _ssh(fleet, 2, ["systemctl", "is-active", "slurmd"]).stdout.decode().strip() == "inactive"
    job = _ssh(fleet, 0, ["srun", "-p", "gpu", "-N2", "hostname"])
    assert job.rc == 0 and sorted(job.stdout.decode().split()) == ["node1", "node3"], job.stderr.decode()
    fleet.hosts[2].update_config(gpu={"count": 8})


def test_destroy_leaves_no_node_on_the_sites_controller(fleet: HostFleet) -> None:
    inv = _inventory(fleet, 1, 3)
    # node3's machine is gone already (nothing answers at its address): its record goes all the same
    gone = dataclasses.replace(inv.hosts[1], address="127.0.0.254")
    calls = leave_joined({"node3": gone, "node1": inv.hosts[0]}, ssh=inv.ssh)
    assert sorted(c[2] for c in calls if c[1] == "delete") == ["nodename=node1", "nodename=node3"]
    out = _ssh(fleet, 0, ["scontrol", "show", "nodes", "--oneliner"])
    assert "No nodes in the system" in out.stdout.decode() + out.stderr.decode()
    assert _ssh(fleet, 0, ["scontrol", "ping"]).rc == 0  # the site's controller itself is untouched
