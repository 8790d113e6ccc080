"""VM-mode simulated hosts (metalfleet.testing.hosts.vm): product code at fs_root "/", every write in the host's
overlay."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap import (
    ConnectionLost,
    HostStatus,
    RunOptions,
    SshConnection,
    StepStatus,
    get_profile,
    run_bootstrap,
)
from metalfleet.bootstrap.inventory import Host, Inventory, traits_for
from metalfleet.bootstrap.ssh import SshOptions
from metalfleet.testing.hosts.harness import HostFleet, start_hosts
from metalfleet.testing.hosts.vm import VmHost, boot_vm_host, profile_for_offering

pytestmark = pytest.mark.requires_root("VM-mode hosts (namespaces, mounts, sshd)")

STORAGE = {
    "storage-hot": {"mount": "/scratch"},
    "storage-warm": {"kind": "fsx-lustre", "source": "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdef",
                     "mount": "/fsx"},
    "storage-cold": {"kind": "s3", "bucket": "training-data", "mount": "/data"},
    "reboot": {"timeout": 60},
}
MUTATING = {"apt-get", "apt-mark", "modprobe", "mdadm", "mkfs.xfs", "mkfs.ext4", "mount", "curl", "git", "make",
            "reboot", "mf-install"}
#: What the steps write on a node; none of it may appear on this machine.
NODE_PATHS = ("/etc/nccl.conf", "/etc/profile.d/metalfleet-nccl.sh", "/scratch", "/fsx", "/data",
              "/opt/nccl-tests", "/opt/amazon")


def _vm_pids(hosts: list[VmHost]) -> set[int]:
    from metalfleet.testing.hosts.harness import _descendants

    return {p for h in hosts if h.vm is not None for p in (h.vm.pid, *_descendants(h.vm.pid))}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _assert_gone(hosts: list[VmHost], pids: set[int], mountinfo: str, base: Path) -> None:
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "processes of a stopped host are left"
    assert Path("/proc/self/mountinfo").read_text() == mountinfo
    assert str(base) not in Path("/proc/1/mountinfo").read_text()
    for h in hosts:
        with pytest.raises(OSError), socket.create_connection((h.address, h.port), timeout=1):
            pass


@pytest.fixture
def fleet() -> Iterator[HostFleet]:
    mountinfo = Path("/proc/self/mountinfo").read_text()
    before = {p: Path(p).exists() for p in NODE_PATHS}
    fl = start_hosts(2, "p5", vm=True, config={"reboot_down_seconds": 1.0})
    hosts: list[VmHost] = list(fl.hosts)  # type: ignore[arg-type]
    pids = _vm_pids(hosts)
    try:
        yield fl
    finally:
        pids |= _vm_pids(hosts)
        fl.stop()
    _assert_gone(hosts, pids, mountinfo, fl.base)
    assert not fl.base.exists()
    assert {p: Path(p).exists() for p in NODE_PATHS} == before


def _inventory(fleet: HostFleet, known_hosts: Path) -> Inventory:
    """Hosts as a provider's nodes give them: fs_root "/", the spec's user, the pinned host keys."""
    hosts = tuple(Host(name=h.name, address=h.address, user="ubuntu", key=str(fleet.client_key), provider="aws",
                       offering="p5.48xlarge", traits=traits_for("aws", "p5.48xlarge"), index=h.index,
                       host_keys=(h.host_key,)) for h in fleet)
    assert all(h.fs_root == "/" for h in hosts)
    pinned = {h.address: [h.host_key] for h in fleet}
    return Inventory(hosts, SshOptions(known_hosts=str(known_hosts), pinned_keys=pinned, use_agent=False,
                                       connect_timeout=5, connect_attempts=3, connect_deadline=20))


def test_bootstrap_at_fs_root_slash_writes_only_into_each_hosts_overlay(fleet: HostFleet, tmp_path: Any) -> None:
    inv = _inventory(fleet, tmp_path / "known_hosts")
    options = RunOptions(log_dir=tmp_path / "logs", reboot_poll=0.2, fact_timeout=60, step_timeout=120)
    profile = get_profile("gpu-node").with_overrides(STORAGE)

    first = run_bootstrap(inv, profile, options=options)
    assert first.ok, first.format_text()
    for h in first.hosts:
        assert h.status == HostStatus.CHANGED
        assert h.step("reboot").status == StepStatus.CHANGED
        assert h.step("nvidia-persistenced").status == StepStatus.CHANGED  # needs the driver loaded: after the reboot
    for sim in fleet:
        assert isinstance(sim, VmHost)
        st = sim.state()
        assert st["boots"] == 1 and st["packages"]["nvidia-driver-550"] == "550.90.07-0ubuntu1"
        assert st["units"]["nvidia-fabricmanager"] == {"enabled": True, "active": True}
        assert {m[1]: m[2] for m in st["mounts"]} == {"/": "ext4", "/scratch": "xfs", "/fsx": "lustre",
                                                      "/data": "mount-s3"}
        # the node's files are in its own upper layer (what it wrote), seen at "/" from inside
        conf = sim.upper("/etc/nccl.conf").read_text()
        assert "NCCL_SOCKET_IFNAME=" in conf and sim.file("/etc/nccl.conf").read_text() == conf
        assert "export FI_PROVIDER=efa" in sim.upper("/etc/profile.d/metalfleet-nccl.sh").read_text()
        assert "LABEL=mf-scratch" in sim.upper("/etc/fstab").read_text()
        assert sim.upper("/opt/nccl-tests/build/all_reduce_perf").exists()
        assert sim.upper("/opt/amazon/efa_installed_packages").exists()  # written by the EFA installer shim
        assert sim.upper("/scratch").is_dir() and sim.upper("/data").is_dir()
        sim.clear_invocations()
    # each host has its own: node0's files are not node1's
    assert fleet[0].upper("/etc/hostname").read_text() == "node0\n"
    assert fleet[1].file("/etc/hostname").read_text() == "node1\n"

    second = run_bootstrap(inv, profile, options=options)
    assert second.ok and second.changed_steps == 0, second.format_text()
    assert {h.status for h in second.hosts} == {HostStatus.UNCHANGED}
    for sim in fleet:
        assert [c for c in sim.invocations() if c[0] in MUTATING and "update" not in c] == []
        assert sim.state()["boots"] == 1


def test_reboot_keeps_the_disk_and_empties_run(fleet: HostFleet) -> None:
    sim = fleet[0]
    assert isinstance(sim, VmHost)
    host = sim.host()
    assert (host.fs_root, host.user) == ("/", "ubuntu")
    opts = fleet.ssh_options(pinned_keys={sim.address: [sim.host_key]})
    with SshConnection(host.endpoint(), opts) as conn:
        res = conn.run(["sh", "-c", "echo disk > /etc/mf-disk; echo gone > /run/mf-run; echo tmp > /tmp/mf-tmp; "
                                    "cat /proc/sys/kernel/random/boot_id; hostname"])
        assert res.rc == 0, res.stderr
        boot_id, hostname = res.text.split()
        assert hostname == "node0" and boot_id == sim.state()["boot_id"]
        with contextlib.suppress(ConnectionLost):  # the host may go down before the exit status is sent
            assert conn.run(["reboot"]).rc == 0
    deadline = time.monotonic() + 15
    while sim.state()["boots"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    sim.wait_listening()
    with SshConnection(host.endpoint(), opts) as conn:
        res = conn.run(["sh", "-c", "cat /etc/mf-disk /proc/sys/kernel/random/boot_id; ls /run; cat /tmp/mf-tmp"])
    out = res.text.split()
    assert out[0] == "disk" and out[1] == sim.state()["boot_id"] != boot_id
    assert "mf-run" not in out and out[-1] == "tmp"
    assert not Path("/etc/mf-disk").exists()


def test_one_host_on_demand_with_the_clouds_key(tmp_path: Any) -> None:
    assert profile_for_offering("p5.48xlarge") == "p5"
    assert profile_for_offering("p4de.24xlarge") == profile_for_offering("p4d.24xlarge") == "p4d"
    assert profile_for_offering("ecs.ebmgn8v.48xlarge", "alibaba") == "alibaba-h20"
    assert profile_for_offering("t3.micro", "aws") == profile_for_offering(None) == "plain"

    for name in ("cloud", "stranger"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True)
    mountinfo = Path("/proc/self/mountinfo").read_text()
    t0 = time.monotonic()
    host = boot_vm_host("i-0123456789abcdef0", authorized_keys=(tmp_path / "cloud.pub").read_text(),
                        offering="p4de.24xlarge", provider="aws")
    booted = time.monotonic() - t0
    pids = _vm_pids([host])
    try:
        assert booted < 5 and host.address.startswith("127.") and host.host_key.startswith("ssh-ed25519 ")
        assert host.config()["profile"] == "p4d" and host.offering == "p4de.24xlarge"
        h = host.host(key=str(tmp_path / "cloud"))
        assert h.fs_root == "/" and h.user == "ubuntu"
        opts = SshOptions(known_hosts=str(tmp_path / "kh"), pinned_keys={host.address: [host.host_key]},
                          use_agent=False, connect_timeout=5, connect_attempts=2, connect_deadline=10)
        with SshConnection(h.endpoint(), opts) as conn:
            res = conn.run(["sh", "-c", "hostname; nvidia-smi --query-gpu=name --format=csv,noheader || true; "
                                        "sudo -n sh -c 'echo x > /etc/mf-on-demand'"])
            assert res.rc == 0 and res.text.split("\n")[0] == "i-0123456789abcdef0"
        assert host.upper("/etc/mf-on-demand").read_text() == "x\n"
        # the harness's login name works too; a stranger's key does not
        from dataclasses import replace

        from metalfleet.bootstrap import SshAuthError

        with SshConnection(replace(h, user="mfnode").endpoint(), opts) as conn:
            assert conn.run(["true"]).rc == 0
        with pytest.raises(SshAuthError), SshConnection(replace(h, key=str(tmp_path / "stranger")).endpoint(), opts):
            pass
    finally:
        pids |= _vm_pids([host])
        host.stop()
        host.stop()  # idempotent
    _assert_gone([host], pids, mountinfo, host.fleet.base)
    assert not host.fleet.base.exists() and not Path("/etc/mf-on-demand").exists()
