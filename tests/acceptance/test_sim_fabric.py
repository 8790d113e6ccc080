"""The simulated fabric between hosts: a run across nodes answers from every member's simulated NICs.

Each test runs the acceptance gate's own multi-node probe (``multi_node_probe``: the framed ``mpirun`` script
with its hostfile) on two paths: real sshd hosts (tests/support/hosts/harness.py: the launcher's shim reads
each member's config.json and the fleet's world file) and replayed hosts (tests/acceptance/_replay.py: the
same model over an in-process :class:`ReplayFabric`). The planted faults are the ones the localisation of
issue 23 must find: one slow NIC, one slow node that is not the launcher, one switch that slows only groups of
at least ``min_nodes`` of its hosts, one flapping link.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol

import pytest

from metalfleet.bootstrap.acceptance.baselines import resolve_baseline
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions, multi_node_probe
from metalfleet.bootstrap.inventory import Host
from metalfleet.bootstrap.parsers import parse
from metalfleet.bootstrap.replay import ReplayFleet, ReplayHost
from metalfleet.bootstrap.ssh import SshConnection
from metalfleet.testing.hosts.harness import HostFleet, start_hosts

from ._replay import ReplayFabric, replayed_host
from ._sim import IB, make_ready, requires_sim

OFFERING = "fake.8xh100"
BASELINE = resolve_baseline(OFFERING)
OPTIONS = AcceptanceOptions()
#: The h100-ib profile's Active IB rails (its ibstat capture: mlx5_2/3 are absent, mlx5_bond_0 is Ethernet).
SLOW, GOOD, FLAPPY = "mlx5_4", "mlx5_5", "mlx5_1"


class Fabric(Protocol):
    def configure(self, i: int, **changes: Any) -> None: ...
    def set_switches(self, groups: dict[str, list[int]], faults: dict[str, dict[str, Any]]) -> None: ...
    def run(self, members: Sequence[int], hca: str | None = None) -> tuple[int, str]: ...
    def counters(self) -> dict[str, int]: ...


def _options(hca: str | None) -> AcceptanceOptions:
    return replace(OPTIONS, mpirun_args=(*OPTIONS.mpirun_args, *(("-x", f"NCCL_IB_HCA={hca}") if hca else ())))


class SshdFabric:
    """Four h100-ib hosts behind real sshd; the probe runs from the group's first host over SSH."""

    def __init__(self, fleet: HostFleet) -> None:
        self.fleet = fleet
        self.original = [h.config() for h in fleet.hosts]

    def reset(self) -> None:
        for h, cfg in zip(self.fleet.hosts, self.original, strict=True):
            h.config_path.write_text(json.dumps(cfg, indent=1))
        self.fleet.write_fabric()

    def configure(self, i: int, **changes: Any) -> None:
        self.fleet.hosts[i].update_config(**changes)

    def set_switches(self, groups: dict[str, list[int]], faults: dict[str, dict[str, Any]]) -> None:
        self.fleet.set_switches(groups, faults)

    def run(self, members: Sequence[int], hca: str | None = None) -> tuple[int, str]:
        chosen = [self.fleet.hosts[i] for i in members]
        hosts = [h.host() for h in chosen]
        probe, _hostfile = multi_node_probe(hosts, BASELINE, _options(hca))
        opts = self.fleet.ssh_options(pinned_keys={h.address: [h.host_key] for h in chosen}, connect_attempts=1)
        with SshConnection(hosts[0].endpoint(), opts) as conn:
            res = conn.run(list(probe.argv), sudo=False, timeout=60)
        return res.rc, res.text

    def counters(self) -> dict[str, int]:
        return dict(self.fleet.world().get("counters", {}))


class ReplayedFabric:
    """Four replayed h100-ib hosts sharing one :class:`ReplayFabric`."""

    def __init__(self, fabric: ReplayFabric | None = None) -> None:
        self.fabric = fabric
        self.hosts: list[Host] = []
        self.nodes: list[ReplayHost] = []
        for i in range(4):
            host, node = replayed_host(f"node{i}", f"10.1.0.{i + 1}", OFFERING, BASELINE, OPTIONS, IB,
                                       profile="h100-ib", fabric=fabric)
            self.hosts.append(host)
            self.nodes.append(node)

    def configure(self, i: int, **changes: Any) -> None:
        assert self.fabric is not None
        cfg = self.fabric.hosts[self.hosts[i].address].cfg
        for k, v in changes.items():
            cfg[k] = {**cfg[k], **v} if isinstance(v, dict) and isinstance(cfg.get(k), dict) else v

    def set_switches(self, groups: dict[str, list[int]], faults: dict[str, dict[str, Any]]) -> None:
        assert self.fabric is not None
        placed = {i: name for name, members in groups.items() for i in members}
        for i, h in enumerate(self.hosts):
            self.fabric.switch[h.address] = placed.get(i, "leaf0")
        self.fabric.switches = {k: dict(v) for k, v in faults.items()}

    def run(self, members: Sequence[int], hca: str | None = None) -> tuple[int, str]:
        probe, _hostfile = multi_node_probe([self.hosts[i] for i in members], BASELINE, _options(hca))
        conn = ReplayFleet(self.nodes)(self.hosts[members[0]].endpoint())
        conn.connect()
        try:
            res = conn.run(list(probe.argv), sudo=False, timeout=60)
        finally:
            conn.close()
        return res.rc, res.text

    def counters(self) -> dict[str, int]:
        assert self.fabric is not None
        return dict(self.fabric.counters)


@pytest.fixture(scope="module")
def sim_fleet() -> Iterator[HostFleet]:
    requires_sim()
    with start_hosts(4, "h100-ib", config=IB) as fleet:
        make_ready(fleet.hosts)
        yield fleet


@pytest.fixture(params=["sshd", "replay"])
def fab(request: pytest.FixtureRequest) -> Iterator[Fabric]:
    if request.param == "replay":
        yield ReplayedFabric(ReplayFabric())
        return
    sshd = SshdFabric(request.getfixturevalue("sim_fleet"))
    sshd.reset()
    try:
        yield sshd
    finally:
        sshd.reset()


def peak(fab: Fabric, members: Sequence[int], hca: str | None = None) -> float:
    rc, text = fab.run(members, hca)
    assert rc == 0, text[-3000:]
    rep = parse("nccl-tests", text)
    assert rep.nranks == 8 * len(members)
    value: float = rep.runs[0].peak_busbw_gbs
    return value


def test_a_slow_nic_slows_its_pairs_by_its_factor_and_only_on_its_rail(fab: Fabric) -> None:
    healthy = peak(fab, [0, 2])
    fab.configure(1, fabric={"nic_scale": {SLOW: 0.5}})
    # NCCL spreads channels evenly over the rails: the slowest rail of any member paces the whole pair
    assert peak(fab, [0, 1]) == pytest.approx(healthy * 0.5, rel=0.02)
    assert peak(fab, [1, 0]) == pytest.approx(healthy * 0.5, rel=0.02)  # launched from the other end too
    one_good, one_slow = peak(fab, [0, 1], hca=GOOD), peak(fab, [0, 1], hca=SLOW)
    assert one_slow == pytest.approx(one_good * 0.5, rel=0.02)
    assert one_good == pytest.approx(peak(fab, [0, 2], hca=GOOD), rel=0.02)  # the other rails are healthy
    assert one_good < healthy / 4  # one rail of eight


def test_a_slow_member_that_is_not_the_launcher_slows_the_job(fab: Fabric) -> None:
    healthy = peak(fab, [0, 1])
    fab.configure(1, nccl={"busbw_scale": 0.6})
    assert peak(fab, [0, 1]) == pytest.approx(healthy * 0.6, rel=0.02)
    assert peak(fab, [0, 2]) == pytest.approx(healthy, rel=0.02)


def test_a_bad_switch_leaves_pairs_alone_but_slows_a_group_with_enough_of_its_nodes(fab: Fabric) -> None:
    pair, group = peak(fab, [0, 1]), peak(fab, [0, 1, 2, 3])
    fab.set_switches({"leaf1": [0, 1, 2], "leaf2": [3]}, {"leaf1": {"scale": 0.5, "min_nodes": 3}})
    assert peak(fab, [0, 1]) == pytest.approx(pair, rel=0.02)
    assert peak(fab, [1, 3]) == pytest.approx(pair, rel=0.02)
    assert peak(fab, [0, 1, 2, 3]) == pytest.approx(group * 0.5, rel=0.02)  # 3 of its nodes in the job


def test_a_flapping_nic_fails_exactly_every_kth_job_it_takes_part_in(fab: Fabric) -> None:
    fab.configure(1, fabric={"flap": {"nic": FLAPPY, "every": 2}})
    results = [fab.run([0, 1]) for _ in range(4)]
    assert [rc == 0 for rc, _t in results] == [True, False, True, False]
    text = results[1][1]
    assert "NCCL WARN NET/IB : Got completion from peer" in text and "status=12" in text and f"hca {FLAPPY}" in text
    assert "Test NCCL failure" in text and "remote process exited or there was a network error" in text
    # a job that leaves that rail out does not count, nor fail
    assert all(fab.run([0, 1], hca=GOOD)[0] == 0 for _ in range(3))
    assert [key for key in fab.counters() if key.endswith(f"/{FLAPPY}")] and list(fab.counters().values()) == [4]


def test_a_healthy_world_answers_as_a_launcher_alone_did() -> None:
    """The default world (one switch, no faults) gives the same output as the model without members."""
    with_world, alone = ReplayedFabric(ReplayFabric()), ReplayedFabric(None)
    for members in ([0, 1], [0, 1, 2, 3]):
        rc, text = with_world.run(members)
        assert rc == 0 and "Avg bus bandwidth" in text
        assert (rc, text) == alone.run(members)


def test_parallel_launchers_count_a_flapping_link_once_per_job(sim_fleet: HostFleet) -> None:
    """Pair jobs run at once from different launchers: the world file's counter is locked, so every job
    counts and exactly every k-th fails."""
    from concurrent.futures import ThreadPoolExecutor

    sshd = SshdFabric(sim_fleet)
    sshd.reset()
    try:
        sshd.configure(1, fabric={"flap": {"nic": FLAPPY, "every": 3}})
        with ThreadPoolExecutor(6) as pool:
            rcs = list(pool.map(lambda m: sshd.run(m)[0], [[0, 1], [1, 2], [3, 1]] * 2))
        assert sorted(rc == 0 for rc in rcs) == [False, False, True, True, True, True]
        assert sshd.counters() == {f"{sim_fleet.hosts[1].address}/{FLAPPY}": 6}
    finally:
        sshd.reset()


def test_the_sim_hosts_carry_their_switch_label(sim_fleet: HostFleet) -> None:
    assert "switch" not in sim_fleet.inventory().hosts[0].labels  # before set_switches: labels as before
    sim_fleet.set_switches({"leaf1": [0, 1]}, {})
    try:
        assert [h.labels["switch"] for h in sim_fleet.inventory().hosts] == ["leaf1", "leaf1", "leaf0", "leaf0"]
    finally:
        sim_fleet.write_fabric()
