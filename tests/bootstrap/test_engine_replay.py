"""The engine above the connector, without root or sshd: the production runner against replayed hosts.

The no-root twin of test_e2e.py's engine logic (fact gating, step order, the no-op second run, the dry
run, reboot waits, drops, unreachable hosts, host keys, the fail threshold, jump hosts, the per-host
report and logs). Each host is data (``metalfleet.bootstrap.replay``): a small Ubuntu GPU node whose
package query, installer, systemd and reboot answer as a real node's do, so the real steps
(NvidiaDriver, RebootIfNeeded, NvidiaPersistenced, NcclConfig) run unchanged. test_e2e.py keeps
testing the same flows through the real SSH connector.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap import (
    Command,
    HostStatus,
    NoOp,
    Profile,
    ReplayFleet,
    ReplayHost,
    Reply,
    RunOptions,
    Step,
    StepContext,
    StepStatus,
    run_bootstrap,
)
from metalfleet.bootstrap.facts import Fact, FactValues, FileContent
from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.progress import ProgressEvent
from metalfleet.bootstrap.sessions import host_log_file
from metalfleet.bootstrap.steps import NcclConfig, NvidiaDriver, NvidiaPersistenced, RebootIfNeeded

DRIVER = "550.90.07-0ubuntu1"
UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n'
DPKG = "dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' nvidia-driver-550"
INSTALL = ("env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends --allow-downgrades "
           f"--allow-change-held-packages nvidia-driver-550={DRIVER}")
UNITS = "systemctl show --property=Id,LoadState,UnitFileState,ActiveState -- nvidia-persistenced"
ENABLE = "systemctl enable --now nvidia-persistenced"


def _unit(load: str, enabled: str, active: str) -> str:
    return f"Id=nvidia-persistenced.service\nLoadState={load}\nUnitFileState={enabled}\nActiveState={active}\n"


def gpu_node(name: str, address: str, **kw: Any) -> ReplayHost:
    """A fresh Ubuntu GPU node: no driver yet. Installing it leaves the reboot-required marker and the
    persistenced unit, which starts only once a boot has loaded the driver; ``fail_install`` makes apt fail."""
    fail = kw.pop("fail_install", None)
    install = Reply(f"E: {fail}\n", rc=100) if fail else Reply(
        "Setting up nvidia-driver-550 ...\n", writes={"/var/run/reboot-required": "*** System restart required ***\n"},
        sets={DPKG: f"nvidia-driver-550\t{DRIVER}\tii \n", UNITS: _unit("loaded", "enabled", "inactive")})
    return ReplayHost(name, address, files={"/etc/os-release": UBUNTU}, replies={
        DPKG: Reply("", rc=1, stderr="dpkg-query: no packages found matching nvidia-driver-550\n"),
        "env DEBIAN_FRONTEND=noninteractive apt-get update -q": "Reading package lists...\n",
        INSTALL: install,
        "apt-mark hold nvidia-driver-550": "nvidia-driver-550 set on hold.\n",
        "reboot": Reply(reboot=True),
        UNITS: _unit("not-found", "", "inactive"),
        ENABLE: Reply(rc=1, stderr="Job for nvidia-persistenced.service failed (driver not loaded)\n"),
    }, on_boot={ENABLE: Reply(sets={UNITS: _unit("loaded", "enabled", "active")})}, **kw)


PROFILE = Profile("t", (NvidiaPersistenced, NcclConfig, RebootIfNeeded, NvidiaDriver), {"reboot": {"timeout": 60}})
#: What a run may call on a node without changing it (fact reads).
READS = ("cat", "dpkg-query", "rpm", "systemctl show", "sh -c")


def _mutating(host: ReplayHost) -> list[str]:
    return [shlex.join(c) for c in host.commands() if not shlex.join(c).startswith(READS)]


def _fleet(n: int, **kw: Any) -> ReplayFleet:
    return ReplayFleet([gpu_node(f"node{i}", f"10.0.0.{i + 10}", **(kw.get("per_host", {}).get(i, {})))
                        for i in range(n)])


@pytest.fixture
def options(tmp_path: Path) -> RunOptions:
    return RunOptions(log_dir=tmp_path / "logs", reboot_poll=0.01)


def _run(fleet: ReplayFleet, options: RunOptions, profile: Profile = PROFILE, inv: Inventory | None = None,
         **kw: Any) -> Any:
    return run_bootstrap(inv or fleet.inventory(), profile, options=replace(options, connect=fleet), **kw)


# ---------------------------------------------------------------------------------- fact gating


def test_first_run_changes_in_step_order_and_the_second_is_all_noops_in_one_round_trip(options: RunOptions) -> None:
    fleet = _fleet(2)
    first = _run(fleet, options)
    assert first.ok, first.format_text()
    for h in first.hosts:
        assert h.status == HostStatus.CHANGED
        # listed backwards in the profile, run in dependency order
        assert [s.name for s in h.steps] == ["nccl-config", "nvidia-driver", "reboot", "nvidia-persistenced"]
        assert {s.status for s in h.steps} == {StepStatus.CHANGED}
        # the reboot was planned from facts re-read after the driver step: its marker, and the trigger
        assert h.step("reboot").notes[0] == ("reboot because: nvidia-driver changed; /var/run/reboot-required "
                                             "present")
    for node in fleet:
        assert _mutating(node) == ["env DEBIAN_FRONTEND=noninteractive apt-get update -q", INSTALL,
                                   "apt-mark hold nvidia-driver-550", "reboot", ENABLE]
        assert node.boots == 1 and "/var/run/reboot-required" not in node.files
        conf = node.text("/etc/nccl.conf") or ""
        assert conf.startswith("# Written by metalfleet (nccl-config) for fabric none.")
        assert node.modes["/etc/profile.d/metalfleet-nccl.sh"] == "0644"
        node.clear_calls()

    second = _run(fleet, options)
    assert second.ok and second.changed_steps == 0, second.format_text()
    assert {h.status for h in second.hosts} == {HostStatus.UNCHANGED}
    for h in second.hosts:
        assert h.round_trips == 1  # every fact of every step in one exec channel, nothing else
        assert all(not s.commands for s in h.steps)
        assert h.step("reboot").noops == ["no reboot needed"]
        assert h.step("nvidia-driver").noops == [f"NVIDIA driver: nvidia-driver-550 {DRIVER} installed"]
    for node in fleet:
        assert _mutating(node) == [] and node.boots == 1


def test_a_dry_run_reads_facts_and_shows_the_commands_the_real_run_then_runs(options: RunOptions) -> None:
    fleet = _fleet(2)
    dry = _run(fleet, options, dry_run=True)
    assert dry.dry_run and {h.status for h in dry.hosts} == {HostStatus.WOULD_CHANGE}
    text = dry.format_text()
    assert "facts read:" in text and "PackageVersions(apt,('nvidia-driver-550',)) = {}" in text
    assert f"$ {INSTALL}" in text
    assert any("planned from facts read before the reboot" in n for n in dry.host("node0").step("reboot").notes)
    for node in fleet:
        assert _mutating(node) == [], "a dry run changed a host"
        assert node.boots == 0 and "/etc/nccl.conf" not in node.files

    real = _run(fleet, options)
    assert real.ok, real.format_text()
    for host in ("node0", "node1"):
        assert {s.name: s.commands for s in real.host(host).steps} == {s.name: s.commands
                                                                       for s in dry.host(host).steps}
        assert [s.status for s in real.host(host).steps] == [StepStatus.CHANGED] * 4
    # ...and the node saw exactly those commands, in that order
    planned = [c for s in dry.host("node0").steps for c in s.commands if not c.startswith("upload ")]
    assert _mutating(fleet["node0"]) == [c.split("  #")[0] for c in planned]


# ------------------------------------------------------------------------------ faults, per host


def test_a_session_dropped_mid_step_is_reconnected_re_read_and_re_planned(options: RunOptions) -> None:
    fleet = ReplayFleet([gpu_node("node0", "10.0.0.10", drops={INSTALL: 1})])
    report = _run(fleet, options, Profile("t", (NvidiaDriver,)))
    h = report.host("node0")
    assert h.status == HostStatus.CHANGED, report.format_text()
    step = h.step("nvidia-driver")
    assert step.status == StepStatus.CHANGED and any("connection lost" in n for n in step.notes)
    assert h.reconnects == 1
    assert [c for c in fleet["node0"].commands() if shlex.join(c) == INSTALL] == [shlex.split(INSTALL)] * 2
    assert fleet["node0"].commands().count(shlex.split(DPKG)) == 2  # facts re-read before re-planning


def test_unreachable_and_changed_key_hosts_fail_alone(options: RunOptions) -> None:
    fleet = ReplayFleet([gpu_node("node0", "10.0.0.10"), gpu_node("node1", "10.0.0.11", host_key="changed")])
    inv = fleet.inventory()
    ghost = replace(inv.hosts[0], name="ghost", address="10.0.0.250")
    report = _run(fleet, options, Profile("files", (NcclConfig,)), inv=Inventory((*inv.hosts, ghost)))
    assert report.host("ghost").status == HostStatus.UNREACHABLE
    assert "cannot connect to 10.0.0.250:22" in (report.host("ghost").error or "")
    assert report.host("node1").status == HostStatus.FAILED and "HOST KEY CHANGED" in (report.host("node1").error or "")
    assert [s.status for s in report.host("node1").steps] == [StepStatus.SKIPPED]
    assert report.host("node0").status == HostStatus.CHANGED
    assert not report.ok and [h.host for h in report.failed] == ["node1", "ghost"]
    assert fleet["node1"].commands() == []


def test_the_reboot_waits_for_a_new_boot_id_then_later_steps_see_the_rebooted_node(options: RunOptions) -> None:
    fleet = ReplayFleet([gpu_node("node0", "10.0.0.10", reboot_seconds=42.0)])
    before = fleet["node0"].boot_id
    report = _run(fleet, options, Profile("t", (NvidiaDriver, RebootIfNeeded, NvidiaPersistenced),
                                          {"reboot": {"timeout": 30}}))
    h = report.host("node0")
    assert h.status == HostStatus.CHANGED, report.format_text()
    assert h.step("reboot").notes[-1] == "rebooted; SSH back with a new boot id after 42.0s; facts re-read"
    assert fleet["node0"].boot_id != before and fleet["node0"].boots == 1
    # persistenced starts only on a booted driver: it changed, so it was planned and run after the reboot
    assert h.step("nvidia-persistenced").status == StepStatus.CHANGED
    again = _run(fleet, options, Profile("t", (NvidiaDriver, RebootIfNeeded, NvidiaPersistenced)))
    assert again.host("node0").step("reboot").noops == ["no reboot needed"] and fleet["node0"].boots == 1


def test_a_node_that_does_not_come_back_fails_its_reboot_step(options: RunOptions) -> None:
    fleet = ReplayFleet([gpu_node("node0", "10.0.0.10", reboot_hangs=True)])
    report = _run(fleet, options, Profile("t", (NvidiaDriver, RebootIfNeeded, NvidiaPersistenced),
                                          {"reboot": {"timeout": 7}}))
    h = report.host("node0")
    assert h.status == HostStatus.FAILED
    assert h.step("reboot").status == StepStatus.FAILED and "SSH not back 7s after the reboot" in (
        h.step("reboot").error or "")
    assert h.step("nvidia-persistenced").status == StepStatus.SKIPPED


@dataclass(frozen=True)
class _NoSettings:
    pass


class _SlowStep(Step[_NoSettings]):
    """Runs one command that outlives its timeout (the batch wraps it in coreutils ``timeout``)."""

    name = "slow"
    Settings = _NoSettings

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [FileContent("/etc/slow-done")]

    def actions(self, ctx: StepContext, facts: FactValues) -> Any:
        if facts[FileContent("/etc/slow-done")] is not None:
            yield NoOp("done")
        else:
            yield Command(("make-slowly",), "slow", timeout=0.1)


def test_a_command_past_its_timeout_fails_the_step_with_its_name(options: RunOptions) -> None:
    fleet = ReplayFleet([ReplayHost("node0", "10.0.0.10", replies={"make-slowly": Reply("x", delay=3)})])
    report = _run(fleet, options, Profile("t", (_SlowStep,)))
    step = report.host("node0").step("slow")
    assert step.status == StepStatus.FAILED and step.error == "make-slowly timed out after 0.1s [code=command-timeout]"
    assert fleet["node0"].commands()[-2:] == [["timeout", "-k", "10", "0.1", "make-slowly"], ["make-slowly"]]


# ------------------------------------------------------------------------------------ the run


def test_the_fail_threshold_stops_the_run_and_hosts_not_started_are_never_contacted(options: RunOptions) -> None:
    fleet = _fleet(6, per_host={i: {"fail_install": "Unable to locate package nvidia-driver-550"} for i in range(3)})
    events: list[ProgressEvent] = []
    report = _run(fleet, options, Profile("t", (NvidiaDriver,)), max_workers=2, max_fail_percentage=25,
                  progress=events.append)
    assert report.stopped and report.stop_reason is not None and "over the 25% threshold" in report.stop_reason
    statuses = [h.status for h in report.hosts]
    assert statuses.count(HostStatus.FAILED) >= 2 and HostStatus.STOPPED in statuses
    failed = report.host("node0")
    assert failed.steps[0].error == f"`{INSTALL}` exited 100"
    assert "E: Unable to locate package nvidia-driver-550" in failed.steps[0].output_tail
    not_started = [node for node, h in zip(fleet, report.hosts, strict=True) if "not started" in (h.error or "")]
    assert fleet["node5"] in not_started  # 2 workers: by the time one is free, the run is stopped
    assert all(node.connects == 0 and not node.calls for node in not_started)
    stops = [e for e in events if e.kind == "run-stopped"]
    assert len(stops) == 1 and stops[0].detail == report.stop_reason
    assert [e.done for e in events if e.kind == "host-done"] == list(range(1, 7))


def test_hosts_behind_a_jump_host_share_one_session_to_it(options: RunOptions) -> None:
    jump = ReplayHost("jump", "192.0.2.1")
    fleet = ReplayFleet([jump, gpu_node("node0", "10.0.0.10"), gpu_node("node1", "10.0.0.11")])
    nodes = [fleet["node0"], fleet["node1"]]
    report = _run(fleet, options, Profile("files", (NcclConfig,)),
                  inv=fleet.inventory(nodes, bastion="ec2-user@192.0.2.1"))
    assert report.ok, report.format_text()
    assert jump.connects == 1 and sorted(jump.tunnels) == ["10.0.0.10", "10.0.0.11"]
    assert jump.calls == []  # it only forwarded
    assert all(n.text("/etc/nccl.conf") for n in nodes)


def test_the_report_and_each_hosts_log(options: RunOptions) -> None:
    fleet = ReplayFleet([gpu_node("gpu/0 a", "10.0.0.10")])
    report = _run(fleet, options, Profile("t", (NvidiaDriver,)))
    doc = report.to_dict()
    (h,) = doc["hosts"]
    assert (h["host"], h["address"], h["status"]) == ("gpu/0 a", "10.0.0.10", "changed")
    assert [s["commands"] for s in h["steps"]] == [["env DEBIAN_FRONTEND=noninteractive apt-get update -q", INSTALL,
                                                    "apt-mark hold nvidia-driver-550"]]
    log = host_log_file(Path(report.log_dir), "gpu/0 a")
    assert report.hosts[0].log_path == str(log)
    text = log.read_text()
    assert f"$ {INSTALL}\nSetting up nvidia-driver-550 ...\n[exit 0]" in text
    assert "--- " in text and "done: changed" in text


def test_a_specs_hosts_are_its_running_nodes_only(tmp_path: Path, options: RunOptions) -> None:
    """``metalfleet bootstrap SPEC`` and ``metalfleet verify SPEC`` connect to the spec's running nodes:
    a node still booting (or gone) is no host."""
    from metalfleet.bootstrap import live_inventory
    from metalfleet.providers.errors import InvalidSpecError
    from metalfleet.providers.fake import FakeDriver
    from metalfleet.providers.fleet import node_specs_for, order_cluster
    from metalfleet.providers.spec import parse_spec

    state, addresses = tmp_path / "fake.json", ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
    doc = {"name": "train", "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 3,
           "image": "img-1", "ssh": {"user": "ubuntu"}}
    spec = parse_spec(doc)
    driver = FakeDriver(state_path=state, addresses=addresses)
    specs = node_specs_for(driver, spec)
    running = order_cluster(driver, specs[:2])
    FakeDriver(state_path=state, boot_seconds=3600, addresses=addresses).order(specs[2])  # still booting
    inv, nodes = live_inventory(spec, driver)
    assert [n.id for n in nodes] == [n.id for n in running]
    assert [(h.address, h.user, h.offering) for h in inv.hosts] == [("10.0.0.10", "ubuntu", "fake.8xh100"),
                                                                    ("10.0.0.11", "ubuntu", "fake.8xh100")]
    fleet = ReplayFleet([gpu_node(h.name, h.address, user="ubuntu") for h in inv.hosts])
    report = _run(fleet, options, Profile("files", (NcclConfig,)), inv=inv)
    assert report.ok and [h.status for h in report.hosts] == [HostStatus.CHANGED] * 2, report.format_text()
    assert all(c.sudo for n in fleet for c in n.calls)  # ubuntu is not root
    with pytest.raises(InvalidSpecError, match="cluster other has no running node on fake: order it first"):
        live_inventory(parse_spec({**doc, "name": "other"}), driver)
