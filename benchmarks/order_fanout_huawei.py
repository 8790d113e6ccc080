"""Fan-out benchmark on Huawei BMS: ordering N servers vs one, and where the time goes (jobs make it slower).

Starts the BMS emulator (tests/support/huawei.py) with a fixed latency on every BMS call and a job duration,
then times 1 and N servers, each with a fresh driver and cluster, in three phases: plan (the flavor listing),
order (per server: the key look-up, CreateBareMetalServers, ShowJobInfos until the job names the server, one
detail read) and wait (detail reads until ACTIVE, i.e. until the jobs end). Prints the phases, the calls per
action and the ratio N / 1.

    .venv/bin/python benchmarks/order_fanout_huawei.py [--latency-ms 100] [--job-seconds 5] [--count 64]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from metalfleet.providers import NodeState, node_specs_for, order_cluster, parse_spec, release_cluster
from metalfleet.providers.huawei import HuaweiDriver
from metalfleet.testing.huawei import (
    DOMAIN_ID,
    FLAVORS,
    PROJECT_ID,
    REGION,
    TEST_AK,
    TEST_SK,
    USER_ID,
    WORLD,
    ZONES,
    HuaweiEmulator,
)


def timed(bms: HuaweiEmulator, name: str, count: int, latency_ms: float, poll: float) -> dict[str, float]:
    driver = HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=bms.url, bss_endpoint=bms.url, ak=TEST_AK,
                          sk=TEST_SK, domain_id=DOMAIN_ID, user_id=USER_ID, poll=poll)
    spec = parse_spec({"name": name, "provider": "huawei", "region": REGION, "zone": ZONES[0],
                       "offering": next(iter(FLAVORS)), "count": count, "image": WORLD["image_id"],
                       "network": {"vpc_id": WORLD["vpc_id"], "subnet_id": WORLD["subnet_id"],
                                   "security_group_ids": [WORLD["security_group_id"]]},
                       "storage": {"kms_key_id": WORLD["kms_key_id"]}, "ssh": {"key_pair": "metalfleet-test"},
                       "capacity": {"billing": "monthly"}})
    bms.reset_faults()
    bms.set_faults(latency_ms=latency_ms)
    t0 = time.perf_counter()
    specs = node_specs_for(driver, spec)
    t1 = time.perf_counter()
    nodes = order_cluster(driver, specs, max_workers=64, wait=False)
    t2 = time.perf_counter()
    running = driver.wait([n.id for n in nodes], NodeState.RUNNING, timeout=600, poll=poll)
    t3 = time.perf_counter()
    assert len(running) == count and all(n.state == NodeState.RUNNING for n in running)
    calls = bms.stats()["by_action"]
    bms.set_faults()
    release_cluster(driver, name, unsubscribe=True)
    return {"plan": t1 - t0, "order": t2 - t1, "wait": t3 - t2, "total": t3 - t0,
            **{f"calls:{k}": float(v) for k, v in sorted(calls.items())}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--job-seconds", type=float, default=5.0, help="how long a BMS job runs in the emulator")
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    with HuaweiEmulator.start() as bms:
        bms.set_timing(args.job_seconds)
        bms.set_stock(ZONES[0], next(iter(FLAVORS)), args.count + 1)
        one = timed(bms, "bench-one", 1, args.latency_ms, args.poll)
        many = timed(bms, "bench-many", args.count, args.latency_ms, args.poll)
    print(f"Huawei BMS emulator, {args.latency_ms:.0f} ms per call, jobs of {args.job_seconds:g} s, poll "
          f"{args.poll:g} s, {os.cpu_count()} cores")
    for label, r in (("1 server", one), (f"{args.count} servers", many)):
        calls = ", ".join(f"{k.split(':', 1)[1]} {int(v)}" for k, v in r.items() if k.startswith("calls:"))
        print(f"  {label:>12}: total {r['total']:6.2f} s = plan {r['plan']:.2f} + order {r['order']:.2f} "
              f"+ wait {r['wait']:.2f}  ({calls})")
    ratio = many["total"] / one["total"]
    print(f"  ratio: {ratio:.2f}x (the job's own {args.job_seconds:g} s is paid once, in parallel)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
