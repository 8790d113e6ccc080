"""`pulumi up` orders, bootstraps and gates, on the fake cloud whose nodes are VM-mode sim hosts.

The fake driver hands its nodes the simulated hosts' addresses; from there the product path is
the real one: the engine runs GpuCluster, NodeBootstrap SSHes into each node with fs_root "/", and
ClusterAcceptance probes and judges it. A host made to report 7 GPUs is refused and quarantined.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import parse_spec
from metalfleet.providers.errors import MetalfleetError
from metalfleet.providers.fake import FakeDriver
from metalfleet.stacks import automation

from ..acceptance._sim import table_statuses
from .conftest import stack_options

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-ready"),
              pytest.mark.requires_root("VM-mode sim hosts")]


@pytest.fixture
def key(tmp_path: Path) -> Path:
    """The operator's SSH key, as a cloud key pair would install it on every node."""
    path = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.fixture
def hosts(key: Path) -> Iterator[list[Any]]:
    from metalfleet.testing.hosts.vm import boot_vm_host

    public = Path(f"{key}.pub").read_text()
    booted = [boot_vm_host(f"ready{i}", profile="h100-ib", index=i, authorized_keys=public) for i in range(2)]
    yield booted
    for h in booted:
        h.stop()


def _spec(tmp_path: Path, key: Path, hosts: list[Any], name: str) -> Any:
    return parse_spec({
        "name": name, "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": len(hosts),
        "image": "img-1",
        "ssh": {"user": "ubuntu", "private_key": str(key),
                "known_hosts": str(tmp_path / "known_hosts"), "pin_on_first_contact": True},
        "acceptance": {"enabled": True},
    })


def test_up_bootstraps_and_accepts_then_noop(tmp_path: Path, pulumi_home: Path, passphrase: str, key: Path,
                                            hosts: list[Any]) -> None:
    spec = _spec(tmp_path, key, hosts, "ready-ok")
    fake_state = tmp_path / "fake.json"
    opts = stack_options(tmp_path, pulumi_home, driver_config={
        "state_path": str(fake_state), "addresses": [h.address for h in hosts]})

    first = automation.up(spec, opts)
    assert first.summary.get("create") == 2 + 2 + 2 + 1  # stack+component, 2 nodes, 2 bootstraps, 1 gate
    assert sorted(first.outputs["accepted_ids"]) == sorted(first.outputs["node_ids"])
    assert first.outputs["hostfile"].count("slots=8") == 2
    # Each check's outcome per node: all judged and passed but the two nothing gives evidence for (no
    # `nvlink -s` capture of an H100 SXM, no storage probe); the run across both nodes passed its checks.
    outcomes = table_statuses(first.outputs["acceptance"])
    nodes = [n for n in outcomes if n != "2 nodes (fake.8xh100)"]
    assert len(nodes) == 2, outcomes
    for node in nodes:
        assert {c for c, s in outcomes[node].items() if s != "pass"} == {"nvlink-links", "storage-nvme"}, node
        assert outcomes[node]["nvlink-links"] == outcomes[node]["storage-nvme"] == "skip"
        assert {"gpu-count", "fabric-ports", "nccl-transport", "allreduce-busbw"} <= set(outcomes[node])
    assert outcomes["2 nodes (fake.8xh100)"] == dict.fromkeys(
        ("nccl-correctness", "nccl-launch", "nccl-transport", "allreduce-busbw"), "pass")
    for h in hosts:
        assert h.upper("/etc/nccl.conf").exists(), "bootstrap must have written the node's nccl.conf"

    again = automation.up(spec, opts)
    assert set(again.summary) == {"same"}, again.summary

    # A changed profile re-applies only what changed: one NCCL setting, no installer runs again.
    for h in hosts:
        h.clear_invocations()
    tuned = spec.model_copy(update={"bootstrap": spec.bootstrap.model_copy(
        update={"overrides": {"nccl-config": {"env": {"NCCL_MIN_NCHANNELS": "32"}}}})})
    third = automation.up(tuned, opts)
    assert third.summary.get("update") == 2 and "create" not in third.summary, third.summary
    for h in hosts:
        written = h.upper("/etc/nccl.conf").read_text() + h.upper("/etc/profile.d/metalfleet-nccl.sh").read_text()
        assert "NCCL_MIN_NCHANNELS=32" in written
        tools = {argv[0].rsplit("/", 1)[-1] for argv in h.invocations()}
        assert not tools & {"apt-get", "dpkg", "mdadm", "mkfs.xfs", "reboot"}, tools
    automation.destroy(spec, opts)
    assert FakeDriver(state_path=fake_state).list_nodes("ready-ok") == []


def test_a_node_that_fails_acceptance_fails_the_up_and_is_quarantined(
        tmp_path: Path, pulumi_home: Path, passphrase: str, key: Path, hosts: list[Any]) -> None:
    hosts[1].update_config(gpu={"count": 7})
    spec = _spec(tmp_path, key, hosts, "ready-bad")
    fake_state = tmp_path / "fake.json"
    opts = stack_options(tmp_path, pulumi_home, driver_config={
        "state_path": str(fake_state), "addresses": [h.address for h in hosts]})
    with pytest.raises(MetalfleetError) as exc:
        automation.up(spec, opts)
    assert "expected 8 GPUs, found 7" in str(exc.value)
    # Without acceptance.replace_failed the node stays: the message says so, and how to have it replaced.
    assert ("acceptance.replace_failed is off: the quarantined node(s) stay for someone to look at; turn it on "
            "to have the next `pulumi up` replace them") in str(exc.value)
    nodes = {n.private_ip: n for n in FakeDriver(state_path=fake_state).list_nodes("ready-bad")}
    assert nodes[hosts[1].address].tags.get("metalfleet:acceptance") == "quarantined"
    assert nodes[hosts[0].address].tags.get("metalfleet:acceptance") != "quarantined"
    automation.destroy(spec, opts)
    assert FakeDriver(state_path=fake_state).list_nodes("ready-bad") == []
