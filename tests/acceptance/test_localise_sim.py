"""Localisation on real sshd hosts: the gate finds a planted slow NIC, slow node, bad switch or flapping link.

16 and 64 simulated 8x H100 InfiniBand hosts (tests/support/hosts/harness.py, one real sshd each); every run
across nodes is the gate's own mpirun probe, answered by the launcher's shim from each member's simulated NICs
and the fleet's world file (switches, link counters): see tests/support/hosts/shims/mfshim.py. The faults are
planted in the simulated hardware, never in the answers. One fleet per size, shared by its tests; each test
puts the fabric back as it found it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.bootstrap.acceptance.live import format_table, run_acceptance
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
from metalfleet.bootstrap.acceptance.results import AcceptanceReport
from metalfleet.testing.hosts.harness import HostFleet

from ._sim import IB, fleet_starter, inventory

OFFERING = "fake.8xh100"
#: Small sizes: the localisation's arithmetic does not depend on them, and 64 hosts run every round.
OPTIONS = AcceptanceOptions(nccl_args=("-b", "1G", "-e", "2G", "-f", "2"), probe_timeout=30, nccl_timeout=60,
                            multi_node_timeout=60)


class SimFleet:
    def __init__(self, fleet: HostFleet) -> None:
        self.fleet = fleet
        self.original = [h.config() for h in fleet.hosts]

    def names(self) -> list[str]:
        return [h.name for h in self.fleet.hosts]

    def reset(self) -> None:
        for h, cfg in zip(self.fleet.hosts, self.original, strict=True):
            h.config_path.write_text(json.dumps(cfg, indent=1))
        self.fleet.write_fabric()

    def accept(self, options: AcceptanceOptions = OPTIONS, **kw: Any) -> AcceptanceReport:
        inv = inventory(self.fleet, offering=OFFERING, provider="fake")
        events: list[Any] = []
        report = run_acceptance(inv, options=options, max_workers=len(self.fleet.hosts), progress=events.append,
                                **kw)
        self.events = events
        return report


def _fleet(n: int) -> Iterator[SimFleet]:
    starter = fleet_starter()
    start = next(starter)  # a generator: closed in the finally
    try:
        f = SimFleet(start(n, IB, profile="h100-ib"))
        yield f
    finally:
        starter.close()


@pytest.fixture(scope="module")
def sixteen() -> Iterator[SimFleet]:
    yield from _fleet(16)


@pytest.fixture(scope="module")
def sixty_four() -> Iterator[SimFleet]:
    yield from _fleet(64)


@pytest.fixture
def fleet16(sixteen: SimFleet) -> Iterator[SimFleet]:
    sixteen.reset()
    yield sixteen
    sixteen.reset()


def _rounds(report: AcceptanceReport) -> list[str]:
    loc = report.localisation.get(OFFERING)
    return [r.kind for r in loc.rounds] if loc else []


def test_a_clean_cluster_passes_in_the_plain_run(fleet16: SimFleet) -> None:
    report = fleet16.accept()
    assert report.passed, format_table(report)
    assert not report.localisation and [m.passed for m in report.multi_node] == [True]


def test_a_slow_node_is_found_and_only_it_fails(fleet16: SimFleet) -> None:
    culprit = fleet16.fleet.hosts[6]
    culprit.update_config(fabric={"nic_scale": {f"mlx5_{i}": 0.6 for i in (0, 1, 4, 5, 6, 7, 8, 9)}})
    report = fleet16.accept()
    assert [n.host for n in report.failed] == [culprit.name], format_table(report)
    check = report.node(culprit.name).verdict.check("fabric-localisation")
    assert check is not None and check.failed and "slow in every run across nodes" in check.reason
    assert _rounds(report) == ["cluster", "pairs", "re-pair", "confirm"]
    loc = report.localisation[OFFERING]
    assert loc.explained and len(loc.rounds) <= 5  # 1 + ceil(log2 16)
    # its own checks passed: only the runs across nodes show it
    assert report.node(culprit.name).verdict.check("allreduce-busbw").passed  # type: ignore[union-attr]
    table = format_table(report)
    assert f"blame {culprit.name}: slow in every run across nodes" in table
    assert "round 2 (pairs): 8 disjoint pairs side by side; 8 run(s), 7 passed, 1 failed" in table
    # a progress line per round
    assert [e.detail.split(":")[0] for e in fleet16.events if e.host.startswith("localisation")] == [
        "round 1 (cluster)", "round 2 (pairs)", "round 3 (re-pair)", "round 4 (confirm)"]


def test_a_slow_nic_is_named(fleet16: SimFleet) -> None:
    culprit = fleet16.fleet.hosts[11]
    culprit.update_config(fabric={"nic_scale": {"mlx5_5": 0.4}})
    report = fleet16.accept()
    assert [n.host for n in report.failed] == [culprit.name], format_table(report)
    (blame,) = report.localisation[OFFERING].blames
    assert (blame.host, blame.kind, blame.nics) == (culprit.name, "nic", ("mlx5_5",))
    assert "the other 7" in blame.reason


def test_a_bad_switch_is_named_and_no_node_is_quarantined(fleet16: SimFleet) -> None:
    fleet16.fleet.set_switches({"leaf1": list(range(8)), "leaf2": list(range(8, 16))},
                               {"leaf2": {"scale": 0.5, "min_nodes": 3}})
    report = fleet16.accept()
    loc = report.localisation[OFFERING]
    assert not report.failed and not loc.blames, format_table(report)
    assert len(loc.groups) == 1, format_table(report)
    (group,) = loc.groups
    assert dict(group.shared) == {"switch": "leaf2"}
    assert set(group.hosts) <= set(fleet16.names()[8:]) and len(group.hosts) >= 3
    assert len(loc.rounds) <= 5 and not report.passed
    doc = json.loads(report.to_json())
    assert doc["localisation"][OFFERING]["groups"][0]["shared"] == {"switch": "leaf2"}
    assert any(n["node"] == f"localisation {OFFERING}" and "fabric-group" in n["failures"] for n in doc["nodes"])


def test_a_flapping_link_is_blamed_as_intermittent(fleet16: SimFleet) -> None:
    culprit = fleet16.fleet.hosts[3]
    culprit.update_config(fabric={"flap": {"nic": "mlx5_1", "every": 2}})
    report = fleet16.accept()
    loc = report.localisation.get(OFFERING)
    # the link fails its 2nd, 4th... job: the plain cluster run (its 1st) passes, and nothing is blamed on a
    # fault that did not show; run again, the cluster run is its 2nd and fails
    assert loc is None or not loc.blames
    again = fleet16.accept()
    loc = again.localisation[OFFERING]
    (blame,) = loc.blames
    assert blame.host == culprit.name and blame.kind == "intermittent" and "mlx5_1" in blame.nics, format_table(again)
    assert [n.host for n in again.failed] == [culprit.name]


def test_an_outlier_is_flagged_advisory_then_mandatory(fleet16: SimFleet) -> None:
    hot = fleet16.fleet.hosts[9]
    hot.update_config(nccl={"busbw_scale": 0.93})  # passes the 90% threshold, 7% under its peers
    report = fleet16.accept()
    node = report.node(hot.name)
    c = node.verdict.check("fleet-outlier")
    assert node.passed and c is not None and c.status == "warn" and "below the fleet median" in c.reason
    assert [o.host for o in report.localisation[OFFERING].outliers] == [hot.name]
    strict = fleet16.accept(overrides={"fleet": {"outliers": "mandatory"}})
    assert [n.host for n in strict.failed] == [hot.name]


#: 64 hosts' probes at once on a small machine: timeouts with room (a probe cut short would fail a healthy node).
PATIENT = replace(OPTIONS, probe_timeout=180, nccl_timeout=300, multi_node_timeout=300)


# The heaviest sim-host test: on the worker of the engine-fake group, so it never runs beside the engine tests
# whose timing it would starve (tests/stacks/test_e2e_workspace_tmp.py waits on a Ctrl-C).
@pytest.mark.xdist_group("engine-fake")
def test_sixty_four_nodes_two_independent_faults(sixty_four: SimFleet) -> None:
    sixty_four.reset()
    slow, nic = sixty_four.fleet.hosts[13], sixty_four.fleet.hosts[50]
    slow.update_config(fabric={"nic_scale": {f"mlx5_{i}": 0.5 for i in (0, 1, 4, 5, 6, 7, 8, 9)}})
    nic.update_config(fabric={"nic_scale": {"mlx5_8": 0.3}})
    try:
        report = sixty_four.accept(options=PATIENT)
    finally:
        sixty_four.reset()
    loc = report.localisation[OFFERING]
    assert {(b.host, b.kind) for b in loc.blames} == {(slow.name, "node"), (nic.name, "nic")}, format_table(report)
    assert sorted(n.host for n in report.failed) == sorted([slow.name, nic.name]), [
        (n.host, n.reason) for n in report.failed]
    assert loc.explained and len(loc.rounds) <= 7  # 1 + ceil(log2 64)


def test_verify_cli_reports_the_rounds_in_every_format(fleet16: SimFleet, tmp_path: Path) -> None:
    from .test_live_cli import cli

    culprit = fleet16.fleet.hosts[4]
    culprit.update_config(fabric={"nic_scale": {"mlx5_7": 0.4}})
    f = fleet16.fleet
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({
        "defaults": {"user": "mfnode", "key": str(f.client_key), "provider": "fake", "offering": OFFERING},
        "known_hosts": str(f.known_hosts),
        "hosts": [{"name": h.name, "address": h.address, "fs_root": str(h.root)} for h in f.hosts]}))
    junit, md = tmp_path / "r.xml", tmp_path / "r.md"
    res = cli(str(inv), "--junit", str(junit), "--markdown", str(md))
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"localisation ({OFFERING}):" in res.stdout
    assert f"blame {culprit.name}: slow fabric interface (mlx5_7)" in res.stdout
    progress = [ln for ln in res.stderr.splitlines() if f"localisation {OFFERING}" in ln]
    assert [ln.split(" - ")[1].split(":")[0] for ln in progress] == [
        "round 1 (cluster)", "round 2 (pairs)", "round 3 (re-pair)", "round 4 (confirm)"], res.stderr
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().iter("testsuite")}
    bad = suites[f"{culprit.name} ({OFFERING})"]
    assert [c.get("name") for c in bad.iter("testcase") if c.find("failure") is not None] == ["fabric-localisation"]
    rounds = suites[f"localisation {OFFERING} ({OFFERING})"]
    assert [c.get("name") for c in rounds.iter("testcase")] == [
        "round-1-cluster", "round-2-pairs", "round-3-re-pair", "round-4-confirm"]
    assert "fabric-localisation" in md.read_text() and "mlx5_7" in md.read_text()
    doc = json.loads(cli(str(inv), "--json").stdout)
    (blame,) = doc["localisation"][OFFERING]["blames"]
    assert blame["host"] == culprit.name and blame["nics"] == ["mlx5_7"] and len(blame["evidence"]) == 3
    plain = cli(str(inv), "--no-localise")
    assert "localisation (" not in plain.stdout and plain.returncode == 1


def test_accept_cluster_quarantines_only_the_blamed_node(tmp_path: Path) -> None:
    from metalfleet.bootstrap.acceptance.quarantine import REASON_TAG, accept_cluster
    from metalfleet.providers.fake import FakeDriver
    from metalfleet.providers.fleet import node_specs_for, order_cluster

    from .test_quarantine import spec_for

    slow_nic = {**IB, "fabric": {**IB["fabric"], "nic_scale": {"mlx5_4": 0.4}}}  # type: ignore[dict-item]
    starter = fleet_starter()
    start = next(starter)  # a generator: closed in the finally
    try:
        fleet = start(4, lambda i: slow_nic if i == 3 else IB, profile="h100-ib")
        spec = spec_for(fleet, 4)
        driver = FakeDriver(state_path=tmp_path / "cloud.json", addresses=[h.address for h in fleet.hosts])
        nodes = order_cluster(driver, node_specs_for(driver, spec))
        out = accept_cluster(driver, spec, nodes, options=OPTIONS)
    finally:
        starter.close()
    culprit = next(n for n in nodes if n.private_ip == fleet.hosts[3].address)
    assert sorted(n.id for n in out.accepted) == sorted(n.id for n in nodes if n.id != culprit.id), out.summary()
    (q,) = out.quarantined
    assert q.node_id == culprit.id and q.reason.startswith("fabric-localisation: slow fabric interface (mlx5_4)")
    assert out.multi_node_failures == []  # the run without it passed: nothing left unexplained
    assert driver.get(culprit.id).tags[REASON_TAG].startswith("fabric-localisation")
