"""The localisation rounds and blame rules (bootstrap/acceptance/localise.py) on a small in-process fabric.

The fabric here is a model of the faults only (a rail's rate, a switch that fails under fan-in, a link that
fails every k-th run); the simulated hosts' own model (tests/support/hosts/shims/mfshim.py) answers the
same rounds over SSH in test_localise_sim.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from metalfleet.bootstrap.acceptance.localise import Job, Run, localise, outliers, topology_order

RAILS = tuple(f"mlx5_{i}" for i in range(8))
PEAK = 360.0


@dataclass
class Fabric:
    n: int
    rail: dict[tuple[str, str], float] = field(default_factory=dict)
    switch_of: dict[str, str] = field(default_factory=dict)
    bad_switch: dict[str, tuple[float, int]] = field(default_factory=dict)
    flap: dict[tuple[str, str], int] = field(default_factory=dict)
    count: dict[tuple[str, str], int] = field(default_factory=dict)
    jobs: list[tuple[str, ...]] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return [f"n{i:04d}" for i in range(self.n)]

    def slow_node(self, h: str, scale: float) -> None:
        for r in RAILS:
            self.rail[(h, r)] = scale

    def busbw(self, job: Job) -> float | None:
        rails = [job.nic] if job.nic else list(RAILS)
        for h in job.hosts:
            for r in rails:
                if (h, r) in self.flap:
                    c = self.count[(h, r)] = self.count.get((h, r), 0) + 1
                    if (c - 1) % self.flap[(h, r)] == 0:
                        return None
        rate = min(self.rail.get((h, r), 1.0) for h in job.hosts for r in rails)
        for sw, (scale, min_nodes) in self.bad_switch.items():
            if sum(1 for h in job.hosts if self.switch_of.get(h) == sw) >= min_nodes:
                rate *= scale
        return PEAK * rate / (len(RAILS) if job.nic else 1)

    def run(self, job: Job, times: int) -> Run:
        self.jobs.append(job.hosts)
        expected = PEAK / (len(RAILS) if job.nic else 1)
        got = [self.busbw(job) for _ in range(times)]
        ok = [g is not None and g >= 0.9 * expected for g in got]
        best = max((g for g in got if g is not None), default=None)
        return Run(job, all(ok), best, expected, "", tuple(ok))

    def measure(self, kind: str, jobs: Sequence[Job], times: int, nics: Mapping[str, Sequence[str]]) -> list[Run]:
        used = [h for j in jobs for h in j.hosts]
        assert len(used) == len(set(used)), f"{kind}: jobs of one round share a node"
        runs = [self.run(j, times) for j in jobs]
        runs += [self.run(Job(j.hosts, nic), times) for j in jobs for nic in nics.get(j.hosts[0], ())]
        return runs

    def localise(self, labels: Mapping[str, Mapping[str, str]] | None = None):  # type: ignore[no-untyped-def]
        hosts = self.hosts
        return localise(hosts, self.measure, self.run(Job(tuple(hosts)), 1), nics={h: RAILS for h in hosts},
                        labels=labels)


def _limit(n: int) -> int:
    return 1 + math.ceil(math.log2(n))


@pytest.mark.parametrize("n", [16, 64, 1024])
def test_a_clean_cluster_costs_no_extra_round(n: int) -> None:
    loc = Fabric(n).localise()
    assert [r.kind for r in loc.rounds] == ["cluster"]
    assert not loc.blames and not loc.groups and loc.explained


@pytest.mark.parametrize("n", [16, 64, 1024, 7])
def test_one_slow_node_is_blamed_on_two_partners(n: int) -> None:
    f = Fabric(n)
    culprit = f.hosts[n // 3]
    f.slow_node(culprit, 0.6)
    loc = f.localise()
    assert loc.blamed == [culprit]
    (b,) = loc.blames
    assert b.kind == "node" and len(b.evidence) >= 2
    partners = {e.split(" (round")[0] for e in b.evidence[:2]}
    assert len(partners) == 2, b.evidence  # two different partners
    assert len(loc.rounds) <= _limit(n)
    assert [r.kind for r in loc.rounds] == ["cluster", "pairs", "re-pair", "confirm"]
    assert loc.explained


def test_a_slow_nic_is_named() -> None:
    f = Fabric(64)
    culprit = f.hosts[41]
    f.rail[(culprit, "mlx5_3")] = 0.5
    loc = f.localise()
    (b,) = loc.blames
    assert (b.host, b.kind, b.nics) == (culprit, "nic", ("mlx5_3",))
    assert "mlx5_3" in b.reason and "other 7" in b.reason
    assert len(loc.rounds) <= _limit(64)


def test_a_bad_switch_names_its_group_and_blames_no_node() -> None:
    f = Fabric(64)
    labels = {h: {"switch": f"leaf{i // 8}"} for i, h in enumerate(f.hosts)}
    f.switch_of = {h: v["switch"] for h, v in labels.items()}
    f.bad_switch = {"leaf5": (0.5, 3)}
    loc = f.localise(labels)
    assert not loc.blames
    (g,) = loc.groups
    assert set(g.hosts) <= {h for h, s in f.switch_of.items() if s == "leaf5"}
    assert len(g.hosts) >= 3 and dict(g.shared) == {"switch": "leaf5"}
    assert len(loc.rounds) <= _limit(64)
    assert not loc.explained


def test_bad_switch_at_1024_within_the_round_target() -> None:
    f = Fabric(1024)
    labels = {h: {"switch": f"leaf{i // 16}"} for i, h in enumerate(reversed(f.hosts))}  # labels decide order
    f.switch_of = {h: v["switch"] for h, v in labels.items()}
    f.bad_switch = {"leaf9": (0.5, 3)}
    loc = f.localise(labels)
    (g,) = loc.groups
    assert g.shared == {"switch": "leaf9"} and not loc.blames
    assert len(loc.rounds) <= _limit(1024)


def test_two_independent_faults() -> None:
    f = Fabric(1024)
    a, b = f.hosts[10], f.hosts[900]
    f.slow_node(a, 0.5)
    f.rail[(b, "mlx5_6")] = 0.4
    loc = f.localise()
    assert {(x.host, x.kind) for x in loc.blames} == {(a, "node"), (b, "nic")}
    assert len(loc.rounds) <= _limit(1024) and loc.explained


def test_a_flapping_link_is_intermittent() -> None:
    f = Fabric(16)
    culprit = f.hosts[5]
    f.flap[(culprit, "mlx5_1")] = 2
    loc = f.localise()
    (b,) = loc.blames
    assert b.host == culprit and b.kind == "intermittent"
    assert "mlx5_1" in b.nics
    assert "failed 1 of 2 runs" in b.reason


def test_a_fault_that_hides_from_the_pairs_is_reported_intermittent_in_its_group() -> None:
    f = Fabric(8)
    culprit = f.hosts[2]
    f.flap[(culprit, "mlx5_0")] = 3  # fails its 1st, 4th, 7th... run: the cluster run, not the pair runs
    loc = f.localise()
    assert not loc.blames  # no node failed with two partners
    (g,) = loc.groups
    assert culprit in g.hosts and len(g.hosts) == 4 and g.intermittent
    assert "on some runs" in g.reason and "failed 1 of 2 runs" in g.reason
    assert [r.kind for r in loc.rounds] == ["cluster", "pairs", "bisect", "bisect"]


def test_a_small_cluster_re_pairs_its_suspects_over_more_rounds() -> None:
    f = Fabric(5)  # pairs (0,1) and the triple (2,3,4): three suspects, two good nodes
    culprit = f.hosts[3]
    f.slow_node(culprit, 0.5)
    loc = f.localise()
    assert loc.blamed == [culprit] and loc.explained
    assert [r.kind for r in loc.rounds] == ["cluster", "pairs", "re-pair", "re-pair", "confirm"]


def test_too_many_failures_is_fabric_wide_not_a_blame() -> None:
    f = Fabric(16)
    for h in f.hosts[:10]:
        f.slow_node(h, 0.5)
    loc = f.localise()
    assert not loc.blames and loc.unresolved and "fabric-wide" in loc.unresolved[0]


def test_topology_order_groups_switch_mates() -> None:
    labels = {"a": {"switch": "s2"}, "b": {"switch": "s1"}, "c": {"switch": "s2"}, "d": {"switch": "s1"}}
    assert topology_order(["a", "b", "c", "d"], labels) == ["b", "d", "a", "c"]


def test_outliers_by_median_and_mad() -> None:
    figures = {f"n{i}": 480.0 * (1 + ((i * 37) % 11 - 5) / 1000) for i in range(32)}
    assert outliers(figures, figure="busbw") == []
    figures["n7"] = 480.0 * 0.93  # passes a 90% threshold, 7% below its peers
    (o,) = outliers(figures, figure="busbw")
    assert o.host == "n7" and o.z is not None and o.z < -3.5 and not o.mandatory
    assert "7% below the fleet median" in o.reason
    assert outliers({"a": 100.0, "b": 100.0, "c": 100.0, "d": 90.0}, figure="x")[0].z is None
    assert outliers({"a": 100.0, "b": 50.0}, figure="x") == []  # too few peers to say


# ----------------------------------------------------------------------------------- baselines by node count


def test_the_multi_node_baseline_follows_the_node_count() -> None:
    from metalfleet.bootstrap.acceptance.baselines import load_baselines, resolve_baseline

    ar = resolve_baseline("p5.48xlarge").nccl.all_reduce
    assert ar.multi_node(2) == (487.0, "the 2-node figure")
    assert ar.multi_node(3) == (411.0, "between the 2-node (487) and 4-node (357) figures, in log2(nodes)")
    assert ar.multi_node(16)[0] == 356.0
    value, how = ar.multi_node(1024)
    assert value == 321.0 and "held at 1024 nodes (approximate)" in how
    p4 = resolve_baseline("p4de.24xlarge").nccl.all_reduce
    assert p4.multi_node(8) == (48.0, "the 4-node figure (approximate), the largest size known, held at 8 nodes "
                                      "(approximate)")
    # a caller's flat figure replaces the curve; no figure at all says so
    flat = resolve_baseline("p5.48xlarge", {"nccl": {"all_reduce": {"multi_node_busbw_gbs": 400.0}}})
    assert flat.nccl.all_reduce.multi_node(64) == (400.0, "one multi-node figure for every node count")
    assert resolve_baseline("fake.8xa100").nccl.all_reduce.multi_node(4) == (None, "no multi-node figure")
    # every point of every curve cites where it comes from
    for name, entry in load_baselines()["offerings"].items():
        for p in (entry.get("nccl") or {}).get("all_reduce", {}).get("multi_node_scaling", []):
            assert "https://" in p["source"] and (not p.get("approximate") or "approximate" in p["source"]), name


def test_a_bad_scaling_override_names_the_field() -> None:
    from metalfleet.bootstrap.acceptance.baselines import resolve_baseline
    from metalfleet.providers.errors import InvalidSpecError

    with pytest.raises(InvalidSpecError,
                       match=re.escape("nccl.all_reduce.multi_node_scaling' must be a list of mappings")):
        resolve_baseline("p5.48xlarge", {"nccl": {"all_reduce": {"multi_node_scaling": [16, 300]}}})
    with pytest.raises(InvalidSpecError, match=r"multi_node_scaling\[0\].busbw_gbs' must be a float"):
        resolve_baseline("p5.48xlarge", {"nccl": {"all_reduce": {"multi_node_scaling": [
            {"nodes": 16, "busbw_gbs": "fast"}]}}})


def test_the_spec_says_advisory_or_mandatory_outliers() -> None:
    from metalfleet.bootstrap.acceptance.quarantine import spec_overrides
    from metalfleet.providers.errors import InvalidSpecError
    from metalfleet.providers.spec import parse_spec
    from tests.specs import cluster_spec

    spec = cluster_spec("fake", "acc", 4, acceptance={"outliers": "mandatory"})
    assert spec_overrides(spec)["fleet"] == {"outliers": "mandatory"}
    assert "fleet" not in spec_overrides(cluster_spec("fake", "acc", 4))
    doc = cluster_spec("fake", "acc", 4).model_dump(mode="json", exclude_none=True)
    doc["acceptance"]["outliers"] = "sometimes"
    with pytest.raises(InvalidSpecError, match=re.escape("acceptance.outliers")):
        parse_spec(doc)


def test_the_interfaces_a_run_can_be_held_to_follow_the_fabric() -> None:
    from metalfleet.bootstrap.acceptance.baselines import resolve_baseline
    from metalfleet.bootstrap.acceptance.live import _rails
    from metalfleet.bootstrap.acceptance.results import NodeAcceptance, NodeStatus, ProbeResult
    from metalfleet.bootstrap.acceptance.verdict import Verdict, ok

    from ._fixtures import read_fixture
    from ._sim import IB_STAT

    def node(offering: str, checks: tuple = (), probes: tuple = ()) -> NodeAcceptance:  # type: ignore[type-arg]
        v = Verdict(offering=offering, passed=True, checks=checks, threshold=0.9, node="n")
        return NodeAcceptance("n", "10.0.0.1", offering, NodeStatus.PASS, v, probes=list(probes))

    ib = ProbeResult("ibstat", "ibstat", 0, kind="ibstat", stdout=read_fixture(IB_STAT))
    # the capture's 8 Active 400G IB ports; its BF3 Ethernet port is not a rail
    assert _rails(node("fake.8xh100", probes=(ib,)), resolve_baseline("fake.8xh100")) == [
        "mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    erdma = ok("fabric-ports", "2 eRDMA devices, ports PORT_ACTIVE", ["erdma_0", "erdma_1"], 2)
    assert _rails(node("ecs.ebmgn8v.48xlarge", (erdma,)), resolve_baseline("ecs.ebmgn8v.48xlarge")) == [
        "erdma_0", "erdma_1"]
    assert _rails(node("p5.48xlarge", probes=(ib,)), resolve_baseline("p5.48xlarge")) == []  # EFA: none
