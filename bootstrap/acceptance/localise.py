"""Which nodes, links or switch groups hold a cluster's all_reduce back: rounds of group runs, then blame.

The cluster-wide all_reduce (round 1, the plain run) says whether the fabric is good, not where it is
bad. When it fails, :func:`localise` runs rounds of smaller all_reduce jobs, every job of a round on
disjoint nodes so they run side by side:

1. **pairs**: the nodes in pairs (ordered by their topology labels, so a pair shares a switch where it can;
   a last odd node makes a triple);
2. **re-pair**: each member of a failing pair with a different known-good node, the full run and then one
   run per fabric interface (``NCCL_IB_HCA``, where the fabric has named rails), each repeated. A node is
   blamed only when it failed with two different partners; the per-interface runs name the link when one
   rail is slow and the others are not. A failure that did not repeat with either new partner is reported,
   not blamed;
3. **confirm**: the cluster run again without the blamed nodes. When it passes, the blamed nodes explain the
   failure; when it fails (or no pair failed at all: every pair good, the whole not), a
4. **bisection** of what is left: both halves of each failing group run side by side, down to the
   smallest group that fails while both its halves pass (a switch, a rail, a placement problem). The report
   names that group and the topology labels its nodes share; no node in it is blamed.

Outliers (:func:`outliers`) need no round: a node whose own figure passes the absolute threshold but sits
far below its peers' (median and MAD) is flagged.

Pure logic: runs go through ``measure`` (the live gate's runs over SSH, or anything in a test), so the
rounds, the blame rules and the arithmetic are tested without a fabric.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .verdict import CheckResult, Verdict, fail, warn

__all__ = [
    "Blame",
    "GroupBlame",
    "Job",
    "Localisation",
    "Measure",
    "Outlier",
    "Round",
    "Run",
    "localise",
    "outliers",
]

#: The inventory labels that say where a node hangs in the fabric, most specific first.
TOPOLOGY_LABELS = ("switch", "leaf", "rail-group", "rack", "placement-group", "block")


@dataclass(frozen=True)
class Job:
    """One all_reduce job: across ``hosts`` (launched from the first), over every interface or only ``nic``."""

    hosts: tuple[str, ...]
    nic: str | None = None

    def label(self) -> str:
        nodes = "+".join(self.hosts) if len(self.hosts) <= 4 else f"{len(self.hosts)} nodes ({self.hosts[0]}...)"
        return nodes + (f" over {self.nic}" if self.nic else "")


@dataclass(frozen=True)
class Run:
    """What one job measured: its best bus bandwidth of the repeats, the figure expected, and each repeat's
    pass/fail (a mix is an intermittent fault)."""

    job: Job
    passed: bool
    busbw_gbs: float | None
    expected_gbs: float | None
    reason: str = ""
    repeats: tuple[bool, ...] = ()
    #: Wall time of the job (its repeats and per-interface runs, in one session).
    seconds: float = 0.0
    #: The time its collectives took by nccl-tests' own rows (repeats included): the fabric's share of it.
    collective_seconds: float = 0.0

    @property
    def intermittent(self) -> bool:
        return len(set(self.repeats)) > 1

    def figure(self) -> str:
        got = "no result" if self.busbw_gbs is None else f"{self.busbw_gbs:.1f}"
        want = "" if self.expected_gbs is None else f"/{self.expected_gbs:.1f}"
        flaky = f", failed {self.repeats.count(False)} of {len(self.repeats)} runs" if self.intermittent else ""
        return f"{got}{want} GB/s{flaky}"

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": list(self.job.hosts), "nic": self.job.nic, "passed": self.passed,
                "busbw_gbs": self.busbw_gbs, "expected_gbs": self.expected_gbs, "reason": self.reason,
                "repeats": list(self.repeats), "intermittent": self.intermittent, "seconds": round(self.seconds, 3),
                "collective_seconds": round(self.collective_seconds, 3)}


#: ``measure(kind, jobs, repeats, nics)`` runs ``jobs`` side by side (they share no node) and returns their
#: runs in order; each job ``repeats`` times, and after the full run one run per interface of
#: ``nics[job.hosts[0]]`` when ``nics`` names the job's first host (those come back after the full runs, in
#: job order then interface order).
Measure = Callable[[str, Sequence[Job], int, Mapping[str, Sequence[str]]], list[Run]]


@dataclass
class Round:
    number: int
    #: "cluster", "pairs", "re-pair", "confirm" or "bisect".
    kind: str
    what: str
    runs: list[Run] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def collective_seconds(self) -> float:
        """The round's collective time: its jobs run side by side, so the longest job's (a job's per-interface
        runs follow its full run, so they add up)."""
        per_job: dict[tuple[str, ...], float] = {}
        for r in self.runs:
            per_job[r.job.hosts] = per_job.get(r.job.hosts, 0.0) + r.collective_seconds
        return max(per_job.values(), default=0.0)

    @property
    def failed(self) -> list[Run]:
        return [r for r in self.runs if not r.passed]

    def summary(self) -> str:
        bad = self.failed
        busy = self.collective_seconds
        return (f"round {self.number} ({self.kind}): {self.what}; {len(self.runs)} run(s), "
                f"{len(self.runs) - len(bad)} passed" + (f", {len(bad)} failed" if bad else "")
                + (f"; {busy:.1f} s of collectives" if busy else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "kind": self.kind, "what": self.what, "seconds": round(self.seconds, 3),
                "collective_seconds": round(self.collective_seconds, 3), "runs": [r.to_dict() for r in self.runs]}


@dataclass(frozen=True)
class Blame:
    """A node held at fault, on evidence from two different partners; ``nics`` when only some rails are slow."""

    host: str
    #: "node" (its runs fail whatever the rail), "nic" (named rails slow), "intermittent" (fails on some runs).
    kind: str
    evidence: tuple[str, ...]
    nics: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        where = f" ({', '.join(self.nics)})" if self.nics else ""
        what = {"nic": "slow fabric interface", "intermittent": "intermittent fabric failures",
                "node": "slow in every run across nodes"}[self.kind]
        return f"{what}{where}: {'; '.join(self.evidence)}"

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "kind": self.kind, "nics": list(self.nics), "evidence": list(self.evidence),
                "reason": self.reason}


@dataclass(frozen=True)
class GroupBlame:
    """The smallest group that fails while both its halves pass: a switch, rail or placement problem."""

    hosts: tuple[str, ...]
    #: The topology labels every node of the group shares (``{"switch": "leaf3"}``); empty when none.
    shared: Mapping[str, str]
    evidence: tuple[str, ...]
    #: Some of its runs passed: a fault that comes and goes inside the group, not a steady slow link.
    intermittent: bool = False

    @property
    def reason(self) -> str:
        what = "fail together on some runs" if self.intermittent else "fail together"
        where = (" (they share " + ", ".join(f"{k}={v}" for k, v in self.shared.items()) + ")") if self.shared else ""
        return f"{len(self.hosts)} nodes {what} while each half passes{where}: {'; '.join(self.evidence)}"

    def to_dict(self) -> dict[str, Any]:
        return {"hosts": list(self.hosts), "shared": dict(self.shared), "evidence": list(self.evidence),
                "intermittent": self.intermittent, "reason": self.reason}


@dataclass(frozen=True)
class Outlier:
    host: str
    figure: str
    value: float
    median: float
    #: (value - median) / (1.4826 x MAD); None when the MAD is 0 (every peer alike).
    z: float | None
    mandatory: bool

    @property
    def reason(self) -> str:
        z = f", robust z {self.z:.1f}" if self.z is not None else ""
        return (f"{self.figure} {self.value:.1f} GB/s is {1 - self.value / self.median:.0%} below the fleet median "
                f"{self.median:.1f}{z} (passes the absolute threshold)")

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "figure": self.figure, "value": self.value, "median": self.median, "z": self.z,
                "mandatory": self.mandatory, "reason": self.reason}


@dataclass
class Localisation:
    """The rounds run, and what they blamed."""

    rounds: list[Round] = field(default_factory=list)
    blames: list[Blame] = field(default_factory=list)
    groups: list[GroupBlame] = field(default_factory=list)
    outliers: list[Outlier] = field(default_factory=list)
    #: Failures seen that no rule could pin (a pair whose failure did not repeat; too few good nodes).
    unresolved: list[str] = field(default_factory=list)

    @property
    def explained(self) -> bool:
        """The cluster run failed and a run without the blamed nodes passed (or the cluster run passed)."""
        if not self.rounds:
            return True
        last_whole = [r for r in self.rounds if r.kind in ("cluster", "confirm")][-1]
        return all(run.passed for run in last_whole.runs) and not self.groups

    @property
    def blamed(self) -> list[str]:
        return [b.host for b in self.blames]

    def summary_lines(self) -> list[str]:
        lines = [r.summary() for r in self.rounds]
        lines += [f"blame {b.host}: {b.reason}" for b in self.blames]
        lines += [f"group {', '.join(g.hosts)}: {g.reason}" for g in self.groups]
        lines += [f"outlier {o.host} ({'mandatory' if o.mandatory else 'advisory'}): {o.reason}"
                  for o in self.outliers]
        lines += [f"unresolved: {u}" for u in self.unresolved]
        return lines

    def verdict(self, offering: str, threshold: float) -> Verdict:
        """The rounds and findings as one verdict (``localisation <offering>``), for the JSON, JUnit and
        Markdown reports: a check per round (passed: it ran), a failed ``fabric-group`` per switch group, a
        warning per unresolved failure. Blames and outliers are on the nodes' own verdicts."""
        checks = [CheckResult(f"round-{r.number}-{r.kind}", True, r.summary(), len(r.runs), None)
                  for r in self.rounds]
        checks += [fail("fabric-group", g.reason, list(g.hosts), None) for g in self.groups]
        checks += [warn("localisation-unresolved", u) for u in self.unresolved]
        return Verdict(offering=offering, passed=not any(c.failed for c in checks), checks=tuple(checks),
                       threshold=threshold, node=f"localisation {offering}", evidence=("nccl-tests",))

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": [r.to_dict() for r in self.rounds], "explained": self.explained,
                "blames": [b.to_dict() for b in self.blames], "groups": [g.to_dict() for g in self.groups],
                "outliers": [o.to_dict() for o in self.outliers], "unresolved": list(self.unresolved)}


# --------------------------------------------------------------------------------------------


def topology_order(hosts: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> list[str]:
    """``hosts`` ordered by their topology labels, the most specific first (then as given), so neighbours share
    a switch where they can: pairs then stay under one switch, and bisection halves follow switch boundaries."""
    keys = [k for k in TOPOLOGY_LABELS if any(k in labels.get(h, {}) for h in hosts)]
    index = {h: i for i, h in enumerate(hosts)}
    return sorted(hosts, key=lambda h: (*(labels.get(h, {}).get(k, "") for k in keys), index[h]))


def _pairs(hosts: Sequence[str]) -> list[tuple[str, ...]]:
    groups = [tuple(hosts[i:i + 2]) for i in range(0, len(hosts) - len(hosts) % 2, 2)]
    if len(hosts) % 2:
        groups = [*groups[:-1], (*groups[-1], hosts[-1])] if groups else [tuple(hosts)]
    return groups


def _shared(hosts: Sequence[str], labels: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    out = {}
    for key in TOPOLOGY_LABELS:
        values = {labels.get(h, {}).get(key) for h in hosts}
        if len(values) == 1 and None not in values:
            out[key] = str(values.pop())
    return out


def _halves(group: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Two halves, cut at an even index so the leaves are the pairs round's pairs."""
    cut = max(2, (len(group) // 2) // 2 * 2) if len(group) > 3 else len(group) // 2
    return tuple(group[:cut]), tuple(group[cut:])


def _slow_rails(runs: Sequence[Run], threshold: float) -> tuple[list[Run], list[Run]]:
    """(slow, good) per-interface runs: slow when below ``threshold`` of its expected figure, or failed."""
    slow = [r for r in runs if not r.passed or (r.busbw_gbs is not None and r.expected_gbs
                                                and r.busbw_gbs < threshold * r.expected_gbs)]
    return slow, [r for r in runs if r not in slow]


def localise(
    hosts: Sequence[str],
    measure: Measure,
    cluster: Run,
    *,
    nics: Mapping[str, Sequence[str]] | None = None,
    labels: Mapping[str, Mapping[str, str]] | None = None,
    repeats: int = 2,
    threshold: float = 0.9,
    on_round: Callable[[Round], None] | None = None,
) -> Localisation:
    """Localise what fails ``cluster`` (the whole-cluster run across ``hosts``, already measured: round 1).

    ``nics``: host -> its fabric interfaces (for the per-interface runs); ``labels``: host -> inventory labels
    (topology order and the labels a failing group shares); ``repeats``: how often each localisation job runs
    (a fault that fails only some runs is seen as intermittent); ``on_round``: told after each round.
    """
    labels = labels or {}
    nics = nics or {}
    loc = Localisation()
    first = Round(1, "cluster", f"all_reduce across all {len(hosts)} nodes", [cluster], cluster.seconds)
    loc.rounds.append(first)
    if on_round:
        on_round(first)
    if cluster.passed or len(hosts) < 2:
        return loc

    def run_round(kind: str, what: str, jobs: Sequence[Job], with_nics: Mapping[str, Sequence[str]] | None = None,
                  times: int = repeats) -> Round:
        r = Round(len(loc.rounds) + 1, kind, what)
        r.runs = measure(kind, jobs, times, with_nics or {})
        r.seconds = max((run.seconds for run in r.runs), default=0.0)
        loc.rounds.append(r)
        if on_round:
            on_round(r)
        return r

    order = topology_order(hosts, labels)
    pairs = _pairs(order)
    if len(pairs) == 1 and len(pairs[0]) == len(order):
        # Two or three nodes: the cluster run was the pair run.
        pair_runs, pair_round = [cluster], 1
    else:
        paired = run_round("pairs", f"{len(pairs)} disjoint pairs side by side", [Job(p) for p in pairs])
        pair_runs, pair_round = paired.runs, paired.number
    failing = [r for r in pair_runs if not r.passed]
    good = [h for r in pair_runs if r.passed for h in r.job.hosts]
    suspects = [h for r in failing for h in r.job.hosts]
    blamed: list[str] = []
    if failing:
        if not good or (len(pair_runs) >= 4 and 2 * len(failing) > len(pair_runs)):
            loc.unresolved.append(f"{len(failing)} of {len(pair_runs)} pair runs failed, too few good nodes "
                                  f"({len(good)}) to re-pair {len(suspects)} suspects: a fabric-wide problem?")
            return loc
        # Each suspect with a known-good node; more suspects than good nodes (a small cluster) take more rounds.
        partner: dict[str, str] = {}
        full: dict[str, Run] = {}
        per_nic: dict[str, list[Run]] = {}
        at_round: dict[str, int] = {}
        for start in range(0, len(suspects), len(good)):
            batch = suspects[start:start + len(good)]
            partner.update(zip(batch, good, strict=False))
            rails = {s: nics[s] for s in batch if nics.get(s)}
            re = run_round("re-pair", f"{len(batch)} suspect(s) of {len(failing)} failing pair(s), each with a "
                           f"different known-good node" + (", then one run per fabric interface" if rails else ""),
                           [Job((s, partner[s])) for s in batch], rails)
            for r in re.runs:
                if r.job.nic is None:
                    full[r.job.hosts[0]] = r
                else:
                    per_nic.setdefault(r.job.hosts[0], []).append(r)
            at_round.update(dict.fromkeys(batch, re.number))
        for bad in failing:
            members = bad.job.hosts
            for s in members:
                again = full[s]
                rail_runs = per_nic.get(s, [])
                slow, fine = _slow_rails(rail_runs, threshold)
                if again.passed and not slow:
                    continue
                ev = [f"with {'+'.join(m for m in members if m != s)} (round {pair_round}): {bad.figure()}",
                      f"with {partner[s]} (round {at_round[s]}): {again.figure()}"]
                flaky = again.intermittent or any(r.intermittent for r in slow)
                if slow and fine:
                    ev.append("per interface with " + partner[s] + ": " + ", ".join(
                        f"{r.job.nic} {r.figure()}" for r in slow) + f"; the other {len(fine)} at "
                        f"{min(r.busbw_gbs or 0 for r in fine):.1f}-{max(r.busbw_gbs or 0 for r in fine):.1f} GB/s")
                    loc.blames.append(Blame(s, "intermittent" if flaky else "nic", tuple(ev),
                                            tuple(str(r.job.nic) for r in slow)))
                else:
                    if slow and not fine:
                        ev.append(f"every one of its {len(slow)} interfaces slow with {partner[s]}")
                    loc.blames.append(Blame(s, "intermittent" if flaky else "node", tuple(ev)))
                blamed.append(s)
            if not any(s in blamed for s in members):
                loc.unresolved.append(f"{bad.job.label()} failed ({bad.figure()}) but each member passed with a "
                                      f"known-good partner: the path between them, or an intermittent fault")
    rest = [h for h in order if h not in blamed]
    if failing and len(rest) >= 2:
        if not blamed:
            return loc  # unresolved pairs: a bisection of the whole would only find them again
        confirm = run_round("confirm", f"all_reduce across the {len(rest)} nodes left without "
                            f"{', '.join(blamed)}", [Job(tuple(rest))], times=1)
        whole = confirm.runs[0]
        if whole.passed:
            return loc
    elif failing:
        return loc
    else:
        whole = cluster  # every pair passed, the whole did not: bisect it
    _bisect(loc, rest, whole, run_round, labels, {tuple(r.job.hosts) for r in pair_runs if r.passed})
    loc.groups = _merge_groups(loc.groups)
    return loc


def _merge_groups(groups: Sequence[GroupBlame]) -> list[GroupBlame]:
    """Smallest failing groups under the same most specific shared label (two halves of one bad switch) as one,
    sharing what both share."""
    def key(g: GroupBlame) -> tuple[str, str] | None:
        return next(((k, g.shared[k]) for k in TOPOLOGY_LABELS if k in g.shared), None)

    out: list[GroupBlame] = []
    for g in groups:
        at = next((i for i, o in enumerate(out) if key(g) is not None and key(o) == key(g)), None)
        if at is None:
            out.append(g)
            continue
        same = out[at]
        shared = {k: v for k, v in same.shared.items() if g.shared.get(k) == v}
        out[at] = GroupBlame((*same.hosts, *g.hosts), shared, (*same.evidence, *g.evidence),
                             same.intermittent or g.intermittent)
    return out


def _bisect(loc: Localisation, hosts: Sequence[str], whole: Run, run_round: Callable[..., Round],
            labels: Mapping[str, Mapping[str, str]], passed: set[tuple[str, ...]]) -> None:
    """Split every failing group in halves and run all the halves side by side, until a failing group's halves
    both pass. Such a group is named when it failed every repeat of its own run; otherwise (a single run, or
    some repeats passed) it runs once more first, and is named as intermittent or left unresolved."""
    failing: list[tuple[tuple[str, ...], Run]] = [(tuple(hosts), whole)]
    smallest: list[tuple[tuple[str, ...], Run, list[Run]]] = []
    while failing:
        jobs: list[Job] = []
        parents: list[tuple[tuple[str, ...], Run, list[int]]] = []
        for group, run in failing:
            idx = []
            for half in _halves(group):
                if len(half) >= 2 and half not in passed:
                    idx.append(len(jobs))
                    jobs.append(Job(half))
            if idx:
                parents.append((group, run, idx))
            else:  # both halves passed before (pairs)
                smallest.append((group, run, []))
        if not jobs:
            break
        r = run_round("bisect", f"the halves of {len(parents)} failing group(s), side by side", jobs)
        failing = []
        for group, run, idx in parents:
            halves = [r.runs[i] for i in idx]
            bad = [h for h in halves if not h.passed]
            failing += [(h.job.hosts, h) for h in bad]
            if not bad:
                smallest.append((group, run, halves))
            passed.update(h.job.hosts for h in halves if h.passed)
    steady = [(g, run, halves) for g, run, halves in smallest if len(run.repeats) > 1 and not any(run.repeats)]
    for group, run, halves in steady:  # failed every repeat of its own run: no need to ask again
        loc.groups.append(GroupBlame(group, _shared(group, labels), (
            f"{len(group)} nodes together: {run.figure()} in each of {len(run.repeats)} runs",
            "halves: " + "; ".join(f"{len(h.job.hosts)} nodes {h.figure()}" for h in halves))))
    smallest = [t for t in smallest if t not in steady]
    if not smallest:
        return
    again = run_round("bisect", f"the {len(smallest)} smallest failing group(s) again",
                      [Job(g) for g, _, _ in smallest])
    for (group, run, halves), rerun in zip(smallest, again.runs, strict=True):
        flaky = run.intermittent or rerun.intermittent or rerun.passed or any(h.intermittent for h in halves)
        ev = (f"{len(group)} nodes together: {run.figure()}, again: {rerun.figure()}",
              "halves: " + ("; ".join(f"{len(h.job.hosts)} nodes {h.figure()}" for h in halves) if halves
                            else "passed as pairs"))
        if rerun.passed and not run.intermittent:
            loc.unresolved.append(f"{len(group)} nodes ({', '.join(group[:4])}{'...' if len(group) > 4 else ''}) "
                                  f"failed once ({run.figure()}) and passed again: an intermittent fault")
        else:
            loc.groups.append(GroupBlame(group, _shared(group, labels), ev, intermittent=flaky))




def outliers(figures: Mapping[str, float], *, figure: str, z_limit: float = 3.5, min_deficit: float = 0.05,
             mandatory: bool = False, min_peers: int = 4) -> list[Outlier]:
    """Nodes whose ``figures`` sit far below their peers': a robust z-score (median, MAD scaled by 1.4826)
    under ``-z_limit`` and more than ``min_deficit`` below the median (the fleet's own wobble is tiny, so z
    alone would flag a 1% dip). Nothing for fewer than ``min_peers`` figures."""
    values = [v for v in figures.values() if isinstance(v, int | float) and math.isfinite(v)]
    if len(values) < min_peers:
        return []
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values) * 1.4826
    out = []
    for host, v in figures.items():
        if not med or v >= med * (1 - min_deficit):
            continue
        z = (v - med) / mad if mad else None
        if z is None or z < -z_limit:
            out.append(Outlier(host, figure, float(v), float(med), z, mandatory))
    return out
