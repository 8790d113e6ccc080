"""End to end against real sshd hosts (tests/hosts): install, no-op re-run, dry run, faults."""

from __future__ import annotations

import shlex
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from metalfleet.bootstrap import (
    HostKeyChanged,
    HostKeyUnknown,
    HostStatus,
    Profile,
    RunOptions,
    SshConnection,
    StepStatus,
    get_profile,
    run_bootstrap,
)
from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.steps import HotTier, NcclConfig, NvidiaDriver, NvidiaPersistenced, RebootIfNeeded

STORAGE = {
    "storage-hot": {"mount": "/scratch"},
    "storage-warm": {"kind": "fsx-lustre", "source": "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcdef",
                     "mount": "/fsx"},
    "storage-cold": {"kind": "s3", "bucket": "training-data", "mount": "/data"},
    "reboot": {"timeout": 60},
}

#: Writes two files (uploads only): works on any host, GPU or not.
FILES_ONLY = Profile("files", (NcclConfig,), {"nccl-config": {"enabled": True}})

#: Tools whose calls change a host (what a dry run must never call).
MUTATING = {"apt-get", "apt-mark", "modprobe", "mdadm", "mkfs.xfs", "mkfs.ext4", "mount", "curl", "git", "make",
            "reboot", "mf-install", "hccn_tool -s"}


def _mutating_calls(calls: list[list[str]]) -> list[list[str]]:
    def mutating(c: list[str]) -> bool:
        if c[0] == "systemctl":
            return len(c) > 1 and c[1] != "show"
        return c[0] in MUTATING and not (c[0] == "apt-get" and "update" in c)

    return [c for c in calls if mutating(c)]


def _by_step(report: Any, host: str) -> dict[str, list[str]]:
    return {s.name: s.commands for s in report.host(host).steps}


def test_first_run_installs_second_run_is_all_noops(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(2, "p5")
    inv = fleet.inventory()
    profile = get_profile("gpu-node").with_overrides(STORAGE)

    first = run_bootstrap(inv, profile, options=run_options)
    assert first.ok, first.format_text()
    for h in first.hosts:
        assert h.status == HostStatus.CHANGED
        assert {s.name for s in h.steps if s.status == StepStatus.CHANGED} == {
            "nvidia-driver", "efa", "reboot", "nvidia-fabricmanager", "nvidia-persistenced", "aws-ofi-nccl", "nccl",
            "nccl-tests", "nccl-config", "storage-hot", "storage-warm", "storage-cold"}
    for sim in fleet:
        st = sim.state()
        assert st["packages"]["nvidia-driver-550"] == "550.90.07-0ubuntu1"
        assert "nvidia-driver-550" in st["held"]
        assert st["boots"] == 1  # rebooted once, after the driver
        assert st["units"]["nvidia-persistenced"] == {"enabled": True, "active": True}
        assert st["units"]["nvidia-fabricmanager"] == {"enabled": True, "active": True}
        assert st["installed"]["efa"] == "1.33.0"
        assert st["md"]["/dev/md0"]["members"] == [f"/dev/nvme{i}n1" for i in range(1, 9)]
        assert st["fs"]["/dev/md0"] == {**st["fs"]["/dev/md0"], "type": "xfs", "label": "mf-scratch"}
        targets = {m[1]: m[2] for m in st["mounts"]}
        assert targets[str(sim.file("/scratch"))] == "xfs"
        assert targets[str(sim.file("/fsx"))] == "lustre"
        assert targets[str(sim.file("/data"))] == "mount-s3"
        conf = sim.file("/etc/nccl.conf").read_text()
        assert "NCCL_SOCKET_IFNAME=" in conf and "FI_PROVIDER" not in conf  # FI_* only in the env file
        env = sim.file("/etc/profile.d/metalfleet-nccl.sh").read_text()
        assert "export FI_PROVIDER=efa" in env and "export FI_EFA_USE_DEVICE_RDMA=1" in env
        assert (sim.file("/opt/nccl-tests/build/all_reduce_perf")).exists()
        sim.clear_invocations()

    second = run_bootstrap(inv, profile, options=run_options)
    assert second.ok
    assert second.changed_steps == 0, second.format_text()
    assert {h.status for h in second.hosts} == {HostStatus.UNCHANGED}
    for h in second.hosts:
        assert h.round_trips == 1  # every fact in one exec channel, nothing else
        assert all(not s.commands for s in h.steps)
    for sim in fleet:
        assert _mutating_calls(sim.invocations()) == []
        assert sim.state()["boots"] == 1


def test_dry_run_shows_facts_and_the_commands_the_real_run_then_runs(fleet_factory: Any,
                                                                       run_options: RunOptions) -> None:
    fleet = fleet_factory(2, "h100-ib")
    inv = fleet.inventory()
    profile = get_profile("gpu-node").with_overrides({"storage-hot": {"mount": "/scratch"}, "reboot": {"timeout": 60}})

    dry = run_bootstrap(inv, profile, dry_run=True, options=run_options)
    assert dry.dry_run and {h.status for h in dry.hosts} == {HostStatus.WOULD_CHANGE}
    text = dry.format_text()
    assert "facts read:" in text and "PackageVersions(apt,('nvidia-driver-550',)) = {}" in text
    assert "apt-get install -y -q --no-install-recommends --allow-downgrades --allow-change-held-packages " \
           "doca-ofed=2.9.1-1" in text
    assert "mdadm --create /dev/md0" in text
    for sim in fleet:
        assert _mutating_calls(sim.invocations()) == [], "a dry run changed a host"
        assert sim.state()["packages"] == {}

    real = run_bootstrap(inv, profile, options=run_options)
    assert real.ok, real.format_text()
    for host in ("node0", "node1"):
        assert _by_step(real, host) == _by_step(dry, host)
        assert [s.status for s in real.host(host).steps] == [
            StepStatus.CHANGED if s.status == StepStatus.WOULD_CHANGE else s.status for s in dry.host(host).steps]
    # ...and what the shims saw is exactly those commands, in that order.
    sim = fleet[0]
    seen = [shlex.join(c) for c in sim.invocations()]
    planned = [c.removeprefix("env DEBIAN_FRONTEND=noninteractive ") for cmds in _by_step(dry, "node0").values()
               for c in cmds]
    shim_planned = [c for c in planned if c.split()[0] in {"apt-get", "apt-mark", "systemctl", "modprobe", "mdadm",
                                                          "mkfs.xfs", "mount"}]
    it = iter(seen)
    assert all(any(s == p for s in it) for p in shim_planned), (shim_planned, seen)
    # IB tuning filled from the fixture's ibstat (8 CX-7 IB HCAs; the BlueField Ethernet port left out)
    conf = sim.file("/etc/nccl.conf").read_text()
    assert "\nNCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_9\n" in conf
    assert "nvidia_peermem" in sim.state()["modules"]


def test_changed_host_key_is_refused_and_other_hosts_finish(fleet_factory: Any, run_options: RunOptions,
                                                             tmp_path: Any) -> None:
    fleet = fleet_factory(2, "plain")
    # known_hosts says node0 has a different key (as after a reinstall, or a man in the middle)
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().split()
    lines = fleet.known_hosts.read_text().splitlines()
    lines[0] = f"{fleet[0].address} {other[0]} {other[1]}"
    fleet.known_hosts.write_text("\n".join(lines) + "\n")
    inv = fleet.inventory(pinned=False)
    report = run_bootstrap(inv, FILES_ONLY, options=run_options)
    bad, good = report.host("node0"), report.host("node1")
    assert bad.status == HostStatus.FAILED and "HOST KEY CHANGED" in (bad.error or "")
    assert good.status == HostStatus.CHANGED
    assert fleet.known_hosts.read_text().splitlines()[0].endswith(other[1])  # nothing was "fixed" for us

    with pytest.raises(HostKeyChanged) as exc:
        SshConnection(inv.hosts[0].endpoint(), inv.ssh).connect()
    assert exc.value.fingerprint != exc.value.expected


def test_host_key_policies_unknown_tofu_and_pinned(fleet_factory: Any, tmp_path: Any) -> None:
    fleet = fleet_factory(1, "plain")
    ep = fleet[0].host().endpoint()
    empty = tmp_path / "kh"
    with pytest.raises(HostKeyUnknown):
        SshConnection(ep, fleet.ssh_options(known_hosts=str(empty))).connect()
    assert not empty.exists()
    # trust on first use, when asked for, records the key
    with SshConnection(ep, fleet.ssh_options(known_hosts=str(empty), trust_on_first_use=True)) as c:
        assert c.run(["true"]).rc == 0
    assert empty.read_text().split() == [fleet[0].address, *fleet[0].host_key.split()[:2]]
    # a pinned key (from the provider) is trusted and recorded; a wrong pin is refused
    pinned = tmp_path / "kh2"
    with SshConnection(ep, fleet.ssh_options(known_hosts=str(pinned),
                                             pinned_keys={fleet[0].address: [fleet[0].host_key]})) as c:
        assert c.run(["true"]).rc == 0
    assert fleet[0].host_key.split()[1] in pinned.read_text()
    wrong = fleet.ssh_options(known_hosts=str(tmp_path / "kh3"),
                              pinned_keys={fleet[0].address: ["ssh-ed25519 " + "A" * 68]})
    with pytest.raises(HostKeyChanged):
        SshConnection(ep, wrong).connect()


def test_connection_dropped_mid_step_is_recovered(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(1, "p5", config={"delays": {"apt-get": 1.5}})
    sim = fleet[0]
    profile = Profile("t", (NvidiaDriver,))
    killed = threading.Event()

    def killer() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if any(c[:2] == ["apt-get", "install"] for c in sim.invocations()):
                time.sleep(0.3)  # apt-get is running now
                if sim.drop_connections():
                    killed.set()
                return
            time.sleep(0.02)

    t = threading.Thread(target=killer)
    t.start()
    report = run_bootstrap(fleet.inventory(), profile, options=run_options)
    t.join()
    assert killed.is_set()
    h = report.host("node0")
    assert h.status == HostStatus.CHANGED, report.format_text()
    step = h.step("nvidia-driver")
    assert step.status == StepStatus.CHANGED
    assert any("connection lost" in n for n in step.notes)
    assert h.reconnects >= 1
    assert sim.state()["packages"]["nvidia-driver-550"] == "550.90.07-0ubuntu1"
    installs = [c for c in sim.invocations() if c[:2] == ["apt-get", "install"]]
    assert len(installs) == 2  # the killed one, then the re-planned one


def test_unreachable_host_is_reported_while_the_others_finish(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(2, "plain")
    inv = fleet.inventory()
    ghost = replace(inv.hosts[0], name="ghost", address=fleet[0].address.rsplit(".", 1)[0] + ".250")
    inv = Inventory((*inv.hosts, ghost), replace(inv.ssh, connect_attempts=2, connect_deadline=3))
    report = run_bootstrap(inv, FILES_ONLY, options=run_options)
    assert report.host("ghost").status == HostStatus.UNREACHABLE
    assert "cannot connect" in (report.host("ghost").error or "")
    assert report.host("node0").status == report.host("node1").status == HostStatus.CHANGED
    assert not report.ok and [h.host for h in report.failed] == ["ghost"]


def test_reboot_step_waits_for_ssh_and_resumes_with_fresh_facts(fleet_factory: Any,
                                                                run_options: RunOptions) -> None:
    fleet = fleet_factory(1, "p5", config={"reboot_down_seconds": 1.0})
    sim = fleet[0]
    boot_before = sim.state()["boot_id"]
    profile = Profile("t", (NvidiaDriver, RebootIfNeeded, NvidiaPersistenced), {"reboot": {"timeout": 30}})
    report = run_bootstrap(fleet.inventory(), profile, options=run_options)
    h = report.host("node0")
    assert h.status == HostStatus.CHANGED, report.format_text()
    reboot = h.step("reboot")
    assert reboot.status == StepStatus.CHANGED and reboot.seconds >= 1.0
    assert any("new boot id" in n for n in reboot.notes)
    st = sim.state()
    assert st["boots"] == 1 and st["boot_id"] != boot_before
    # persistenced could only start once the driver was loaded, i.e. after the reboot
    assert st["units"]["nvidia-persistenced"]["active"]
    assert h.step("nvidia-persistenced").status == StepStatus.CHANGED
    # no reboot on a second run: nothing changed and no reboot-required marker
    again = run_bootstrap(fleet.inventory(), profile, options=run_options)
    assert again.host("node0").step("reboot").noops == ["no reboot needed"]
    assert sim.state()["boots"] == 1


def test_nvme_raid_is_not_rebuilt_on_a_host_that_has_it(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(2, "p5", config=lambda i: {"preexisting_raid": True} if i == 0 else {})
    profile = Profile("t", (HotTier,), {"storage-hot": {"mount": "/scratch"}})
    report = run_bootstrap(fleet.inventory(), profile, options=run_options)
    assert report.ok, report.format_text()
    has, fresh = fleet[0], fleet[1]
    calls = [c[0] for c in has.invocations()]
    assert "mdadm" not in calls and "mkfs.xfs" not in calls
    assert any("already holds xfs" in r for r in report.host("node0").step("storage-hot").noops)
    assert any(m[1] == str(has.file("/scratch")) for m in has.state()["mounts"])
    assert "LABEL=mf-scratch" in has.file("/etc/fstab").read_text()
    fresh_calls = [c for c in fresh.invocations() if c[0] in ("mdadm", "mkfs.xfs")]
    assert fresh_calls[0][:3] == ["mdadm", "--create", "/dev/md0"] and len(fresh_calls[0]) == 3 + 4 + 8
    assert fresh_calls[-1] == ["mkfs.xfs", "-L", "mf-scratch", "/dev/md0"]
    # after a reboot the array comes back mounted from fstab, and a re-run touches nothing
    again = run_bootstrap(fleet.inventory(), profile, options=run_options)
    assert again.changed_steps == 0


def test_fail_percentage_threshold_stops_the_run(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(6, "p5", config=lambda i: {"fail": {"apt-get": "E: Unable to locate package"}}
                          if i < 3 else {})
    profile = Profile("t", (NvidiaDriver,))
    report = run_bootstrap(fleet.inventory(), profile, options=replace(run_options, max_workers=2),
                           max_workers=2, max_fail_percentage=25)
    assert report.stopped and "over the 25% threshold" in (report.stop_reason or "")
    statuses = [h.status for h in report.hosts]
    assert statuses.count(HostStatus.FAILED) >= 2
    assert HostStatus.STOPPED in statuses
    failed = report.host("node0")
    assert "E: Unable to locate package" in failed.steps[0].output_tail
    not_started = [sim for sim, h in zip(fleet, report.hosts, strict=True) if "not started" in (h.error or "")]
    assert fleet[5] in not_started  # 2 workers: by the time a worker is free, the run is stopped
    assert all(not sim.invocations() for sim in not_started)


def test_jump_host_reaches_a_node_through_a_bastion(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(2, "plain")
    bastion = f"mfnode@{fleet[0].address}"
    inv = fleet.inventory(hosts=[fleet[1]], bastion=bastion)
    inv = replace(inv, ssh=replace(inv.ssh, pinned_keys={**inv.ssh.pinned_keys,
                                                         fleet[0].address: [fleet[0].host_key]}))
    before = (fleet[0].sshd_dir / "sshd.log").read_text().count("Accepted publickey")
    report = run_bootstrap(inv, FILES_ONLY, options=run_options)
    assert report.host("node1").status == HostStatus.CHANGED, report.format_text()
    assert (fleet[0].sshd_dir / "sshd.log").read_text().count("Accepted publickey") == before + 1
    assert fleet[0].invocations() == []  # the bastion only forwarded


def test_upload_skips_when_checksum_matches_and_logs_stream(fleet_factory: Any, run_options: RunOptions) -> None:
    fleet = fleet_factory(1, "plain")
    h = fleet[0].host()
    with SshConnection(h.endpoint(), fleet.ssh_options(pinned_keys={h.address: [fleet[0].host_key]})) as conn:
        assert conn.wrap(["true"]) == ["sudo", "-n", "true"]  # mfnode is not root
        data = bytes(range(256)) * 4096
        path = str(fleet[0].file("/opt/blob"))
        assert conn.put(data, path, mode="0600") is True
        assert fleet[0].file("/opt/blob").read_bytes() == data
        assert oct(fleet[0].file("/opt/blob").stat().st_mode & 0o777) == "0o600"
        channels = conn.channels
        assert conn.put(data, path) is False
        assert conn.channels == channels + 1  # only the checksum read
        chunks: list[bytes] = []
        res = conn.run(["sh", "-c", "echo out; echo err >&2; exit 3"], on_output=chunks.append)
        assert (res.rc, res.stdout, res.stderr) == (3, b"out\n", b"err\n")
        assert b"".join(chunks).count(b"\n") == 2


def test_refused_key_and_command_timeout_are_metalfleet_errors(fleet_factory: Any, tmp_path: Any) -> None:
    import subprocess

    from metalfleet.bootstrap import CommandTimeout, SshAuthError
    from metalfleet.providers.errors import AuthError, MetalfleetError

    fleet = fleet_factory(1, "plain")
    opts = fleet.ssh_options()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "stranger")], check=True)
    stranger = replace(fleet[0].host().endpoint(), key_path=str(tmp_path / "stranger"))
    with pytest.raises(SshAuthError) as exc:
        SshConnection(stranger, opts).connect()
    assert isinstance(exc.value, AuthError) and not exc.value.retryable
    with SshConnection(fleet[0].host().endpoint(), opts) as conn:
        t0 = time.monotonic()
        with pytest.raises(CommandTimeout) as texc:
            conn.run(["sleep", "5"], timeout=0.5)
        assert time.monotonic() - t0 < 3 and isinstance(texc.value, MetalfleetError)
        assert conn.run(["true"]).rc == 0  # the connection is still usable
