"""Fan-out benchmark: ordering 64 nodes should take about as long as ordering one.

Starts the EC2 emulator (tests/support/ec2.py) with a fixed latency on every EC2 call, then
times plan + order_cluster + wait-for-running for 1 node and for 64 nodes, each with a fresh driver
and a fresh cluster (so both pay the same one-off setup: catalogue, subnet, placement group, security
group, image). Prints both wall times and their ratio; the target is a ratio under 2. ``--provider alibaba``
does the same with the Alibaba driver against the ECS emulator (tests/support/alibaba.py, signatures checked).

    .venv/bin/python benchmarks/order_fanout.py [--latency-ms 100] [--count 64] [--offering p5.48xlarge]
    .venv/bin/python benchmarks/order_fanout.py --provider alibaba [--offering ecs.ebmgn8v.48xlarge]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from metalfleet.providers import NodeState, node_specs_for, order_cluster, parse_spec, release_cluster
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing.ec2 import Ec2Emulator, start_ec2_emulator
from metalfleet.testing.kit import EmulatorClient

ROOT = Path(__file__).resolve().parents[1]

os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1"})
for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
    os.environ.pop(var, None)


def server_cpu(emulator: EmulatorClient) -> float:
    """CPU seconds the emulator process has used (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{emulator.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_order(emulator: Ec2Emulator, subnet: str, name: str, count: int,
                offering: str) -> tuple[float, int, float]:
    """Seconds from plan to every node running, the EC2 calls it took, the emulator CPU it cost."""
    driver = AwsDriver(region="us-east-1", endpoint_url=emulator.url, poll=0.1)
    spec = parse_spec({"name": name, "provider": "aws", "region": "us-east-1", "zone": "us-east-1a",
                       "offering": offering, "count": count, "image": "ami-1e749f67",
                       "network": {"subnet_id": subnet}, "storage": {"kms_key_id": "alias/bench"}})
    before, cpu_before = emulator.calls(), server_cpu(emulator)
    start = time.perf_counter()
    nodes = order_cluster(driver, node_specs_for(driver, spec), max_workers=64)
    elapsed = time.perf_counter() - start
    calls, cpu = emulator.calls() - before, server_cpu(emulator) - cpu_before
    assert len(nodes) == count and all(n.state == NodeState.RUNNING for n in nodes)
    emulator.set_faults()
    release_cluster(driver, name)
    return elapsed, calls, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--provider", choices=["aws", "alibaba"], default="aws")
    parser.add_argument("--offering", help="default: p5.48xlarge (aws), ecs.ebmgn8v.48xlarge (alibaba)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each size; the median is reported")
    args = parser.parse_args()
    if args.provider == "alibaba":
        return alibaba(args)
    args.offering = args.offering or "p5.48xlarge"

    with start_ec2_emulator() as emulator:
        import boto3

        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=emulator.url)
        kms = boto3.client("kms", region_name="us-east-1", endpoint_url=emulator.url)  # the spec's volume key
        kms.create_alias(AliasName="alias/bench", TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
        subnet = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]}])[
            "Subnets"][0]["SubnetId"]
        one: list[float] = []
        many: list[float] = []
        calls_one = calls_many = 0
        cpu_one = cpu_many = 0.0
        for run in range(args.repeat):
            emulator.set_faults(latency_ms=args.latency_ms)
            t, calls_one, cpu_one = timed_order(emulator, subnet, f"bench-one-{run}", 1, args.offering)
            one.append(t)
            emulator.set_faults(latency_ms=args.latency_ms)
            t, calls_many, cpu_many = timed_order(emulator, subnet, f"bench-many-{run}", args.count, args.offering)
            many.append(t)
            print(f"run {run + 1}: 1 node {one[-1]:.2f}s, {args.count} nodes {many[-1]:.2f}s", flush=True)

    return report(args, one, many, (calls_one, cpu_one), (calls_many, cpu_many), "EC2")


def report(args: argparse.Namespace, one: list[float], many: list[float], first: tuple[int, float],
           last: tuple[int, float], api: str) -> int:
    t1, tn = statistics.median(one), statistics.median(many)
    print(f"\n{args.offering}, {args.latency_ms:.0f} ms per {api} call, median of {args.repeat}, "
          f"{os.cpu_count()} cores")
    print(f"  1 node  : {t1:6.2f} s  ({first[0]} {api} calls, emulator CPU {first[1]:.2f} s)")
    print(f"  {args.count} nodes: {tn:6.2f} s  ({last[0]} {api} calls, emulator CPU {last[1]:.2f} s)")
    ratio = tn / t1
    print(f"  ratio   : {ratio:6.2f}x  (target < 2x: {'met' if ratio < 2 else 'NOT met'})")
    return 0 if ratio < 2 else 1


def alibaba(args: argparse.Namespace) -> int:
    """The same measurement with the Alibaba driver on the ECS emulator (ACS3 signatures checked)."""
    from metalfleet.providers.alibaba import AlibabaDriver
    from metalfleet.testing.alibaba import (
        ACCESS_KEY_ID,
        ACCESS_KEY_SECRET,
        IMAGES,
        KMS_KEY,
        REGION,
        ZONES,
        AlibabaEmulator,
        default_vswitch_id,
    )

    os.environ.update({"ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID,
                       "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET})
    os.environ.pop("ALIBABA_CLOUD_ECS_ENDPOINT", None)
    args.offering = args.offering or "ecs.ebmgn8v.48xlarge"
    zone = ZONES[2]

    def timed(emulator: AlibabaEmulator, name: str, count: int) -> tuple[float, int, float]:
        driver = AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.1)
        spec = parse_spec({"name": name, "provider": "alibaba", "region": REGION, "zone": zone,
                           "offering": args.offering, "count": count, "image": IMAGES[0],
                           "network": {"subnet_id": default_vswitch_id(zone)}, "storage": {"kms_key_id": KMS_KEY}})
        before, cpu_before = emulator.calls(), server_cpu(emulator)
        start = time.perf_counter()
        nodes = order_cluster(driver, node_specs_for(driver, spec), max_workers=64)
        elapsed = time.perf_counter() - start
        calls, cpu = emulator.calls() - before, server_cpu(emulator) - cpu_before
        assert len(nodes) == count and all(n.state == NodeState.RUNNING for n in nodes)
        emulator.set_faults()
        release_cluster(driver, name)
        return elapsed, calls, cpu

    one: list[float] = []
    many: list[float] = []
    first = last = (0, 0.0)
    with AlibabaEmulator.start() as emulator:
        emulator.set_stock(zone, args.offering, args.count * 2)
        AlibabaDriver(region=REGION, endpoint=emulator.url).offerings()  # the SDK's imports, not timed (as boto3's)
        for run in range(args.repeat):
            emulator.set_faults(latency_ms=args.latency_ms)
            t, *rest = timed(emulator, f"bench-one-{run}", 1)
            one.append(t)
            first = (int(rest[0]), float(rest[1]))
            emulator.set_faults(latency_ms=args.latency_ms)
            t, *rest = timed(emulator, f"bench-many-{run}", args.count)
            many.append(t)
            last = (int(rest[0]), float(rest[1]))
            print(f"run {run + 1}: 1 node {one[-1]:.2f}s, {args.count} nodes {many[-1]:.2f}s", flush=True)
    return report(args, one, many, first, last, "ECS")


if __name__ == "__main__":
    sys.exit(main())
