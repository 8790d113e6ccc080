"""Localisation at 256 and 1,024 nodes: rounds to find a planted fault, healthy nodes quarantined, time spent.

::

    .venv/bin/python benchmarks/localise_scale.py [--nodes 256 1024] [--scenario all]

Each node is a replayed 8x H100 InfiniBand host (tests/acceptance/_replay.py): the acceptance probes and the
localisation's runs across nodes go through the production gate (``run_acceptance``: probes, framing, judging,
rounds), and only the transport is replayed; runs across nodes answer from every member's simulated NICs and the
fabric's switches (tests/support/hosts/shims/mfshim.py, the same model the sshd hosts use). Faults are planted in
that simulated hardware. Per scenario it prints: whether the culprit was found (and named), the healthy nodes that
failed, the rounds against the target 1 + ceil(log2 N), the collective time the rounds would take on the fabric
(nccl-tests' own per-row times: the longest job of each round, summed over the rounds) against the plain cluster
run's, and the wall time here.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from metalfleet.bootstrap.acceptance.baselines import resolve_baseline  # noqa: E402
from metalfleet.bootstrap.acceptance.live import run_acceptance  # noqa: E402
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions  # noqa: E402
from metalfleet.bootstrap.inventory import Inventory  # noqa: E402
from metalfleet.bootstrap.replay import ReplayFleet  # noqa: E402
from tests.acceptance._replay import ReplayFabric, replayed_host  # noqa: E402
from tests.acceptance._sim import IB  # noqa: E402

OFFERING = "fake.8xh100"
OPTIONS = AcceptanceOptions(nccl_args=("-b", "1G", "-e", "8G", "-f", "2"))
ALL_RAILS = ("mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9")
PER_SWITCH = 32


@dataclass
class Scenario:
    name: str
    #: host index -> its shim config changes
    faults: dict[int, dict[str, Any]]
    switch_faults: dict[str, dict[str, Any]]
    #: what must be found: ("node", i), ("nic", i, rail), ("group", switch), ("outlier", i) (advisory: passes)
    want: list[tuple[Any, ...]]


def scenarios(n: int) -> list[Scenario]:
    slow, nic = n // 3, (2 * n) // 3 + 1
    bad_switch = f"leaf{(n // PER_SWITCH) // 2}"
    return [
        Scenario("clean", {}, {}, []),
        Scenario("slow node", {slow: {"fabric": {"nic_scale": dict.fromkeys(ALL_RAILS, 0.6)}}}, {},
                 [("node", slow)]),
        Scenario("slow NIC", {nic: {"fabric": {"nic_scale": {"mlx5_6": 0.4}}}}, {}, [("nic", nic, "mlx5_6")]),
        Scenario("bad switch", {}, {bad_switch: {"scale": 0.5, "min_nodes": 3}}, [("group", bad_switch)]),
        Scenario("hot GPU", {slow: {"nccl": {"busbw_scale": 0.93}}}, {}, [("outlier", slow)]),
        Scenario("two faults", {slow: {"fabric": {"nic_scale": dict.fromkeys(ALL_RAILS, 0.5)}},
                                nic: {"fabric": {"nic_scale": {"mlx5_6": 0.4}}}}, {},
                 [("node", slow), ("nic", nic, "mlx5_6")]),
    ]


def run(n: int, sc: Scenario) -> dict[str, Any]:
    baseline = resolve_baseline(OFFERING)
    fabric = ReplayFabric(sc.switch_faults)
    hosts, nodes = [], []
    for i in range(n):
        extra = {**IB, **sc.faults.get(i, {})}
        if "fabric" in sc.faults.get(i, {}):
            extra["fabric"] = {**IB.get("fabric", {}), **sc.faults[i]["fabric"]}
        host, node = replayed_host(f"n{i:04d}", f"10.{i // 65536}.{(i // 256) % 256}.{i % 256 + 1}", OFFERING,
                                   baseline, OPTIONS, extra, profile="h100-ib", fabric=fabric,
                                   switch=f"leaf{i // PER_SWITCH}")
        hosts.append(host)
        nodes.append(node)
    t0 = time.monotonic()
    report = run_acceptance(Inventory(tuple(hosts)), options=OPTIONS, max_workers=64, connect=ReplayFleet(nodes))
    wall = time.monotonic() - t0
    loc = report.localisation.get(OFFERING)
    rounds = loc.rounds if loc else []
    blamed = {(b.kind, b.host, b.nics) for b in (loc.blames if loc else [])}
    found = []
    for want in sc.want:
        if want[0] == "node":
            found.append(any(k == "node" and h == f"n{want[1]:04d}" for k, h, _ in blamed))
        elif want[0] == "nic":
            found.append(any(k == "nic" and h == f"n{want[1]:04d}" and want[2] in nics for k, h, nics in blamed))
        elif want[0] == "outlier":
            found.append(any(o.host == f"n{want[1]:04d}" for o in (loc.outliers if loc else [])))
        else:
            found.append(any(g.shared.get("switch") == want[1] for g in (loc.groups if loc else [])))
    culprits = {f"n{w[1]:04d}" for w in sc.want if w[0] in ("node", "nic")}
    healthy_failed = [x.host for x in report.failed if x.host not in culprits]
    plain = report.multi_node[0].probe.stdout if report.multi_node and report.multi_node[0].probe else ""
    from metalfleet.bootstrap.acceptance.live import _collective_seconds

    plain_s = _collective_seconds(plain)
    busy = sum(r.collective_seconds for r in rounds) if rounds else plain_s
    return {"scenario": sc.name, "n": n, "found": all(found) if sc.want else not blamed and not
            (loc and loc.groups), "healthy_failed": len(healthy_failed), "rounds": max(len(rounds), 1),
            "limit": 1 + math.ceil(math.log2(n)), "collective_s": busy, "plain_s": plain_s, "wall_s": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--scenario", nargs="+", default=["all"])
    args = ap.parse_args()
    rows = []
    for n in args.nodes:
        for sc in scenarios(n):
            if "all" not in args.scenario and sc.name not in args.scenario:
                continue
            r = run(n, sc)
            rows.append(r)
            print(f"{r['n']:5d} nodes  {r['scenario']:<11s}  found={'yes' if r['found'] else 'NO'}  "
                  f"healthy failed={r['healthy_failed']}  rounds={r['rounds']} (target <= {r['limit']})  "
                  f"collectives {r['collective_s']:.1f} s vs plain run {r['plain_s']:.1f} s  "
                  f"wall {r['wall_s']:.1f} s", flush=True)
    bad = [r for r in rows if not r["found"] or r["healthy_failed"] or r["rounds"] > r["limit"]]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} scenarios met the targets")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
