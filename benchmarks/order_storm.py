"""Storm benchmark: order and release a cluster while about half the API calls are throttled.

For each driver (``--provider``, default all four) and cluster size (``--count``, default 16 and 64), on the local
emulator of that cloud (the EC2, ECS and BMS+BSS emulators; for ipmi a pool of simulated hosts behind sushy-tools'
Redfish emulator, whose 429s are the storm) with ``--latency-ms`` per call: switch on ``--throttle`` (default 0.5)
and ``--server-error`` (default 0.02), then time ``node_specs_for`` + ``order_cluster`` (waiting until every node
runs) under the production retry policy with shorter backoff (``--base``/``--cap``; deadline ``--deadline``), and
``release_cluster`` under the same storm. With the faults off, the cloud is read again: **duplicates** (live nodes
beyond the count, or two on one index) after the order, and **orphans** (live nodes, shared resources, AWS volumes
and network interfaces tagged with the cluster) after the release. Prints one markdown table row per run. The
retries counted are the policy's (on ipmi the BMC client also re-reads a throttled Redfish GET itself, uncounted).

    .venv/bin/python benchmarks/order_storm.py [--provider aws alibaba huawei ipmi] [--count 16 64]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from metalfleet.providers import ClusterSpec, ComputeDriver, NodeState, node_specs_for, order_cluster, parse_spec
from metalfleet.providers.fleet import release_cluster
from metalfleet.testing.retrycount import CountingPolicy

os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                   "AWS_DEFAULT_REGION": "us-east-1"})
for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
    os.environ.pop(var, None)
os.environ.setdefault("METALFLEET_STATE_DIR", tempfile.mkdtemp(prefix="mf-bench-state-"))


class Cloud:
    """One provider's emulator, a driver on it, a spec for it, and what the cloud itself lists for a cluster."""

    name = ""
    faults: Any = None

    def driver(self) -> ComputeDriver:
        raise NotImplementedError

    def spec(self, name: str, count: int) -> ClusterSpec:
        raise NotImplementedError

    def calls(self) -> int:
        return int(self.faults.calls())

    def made_for(self, cluster: str) -> list[str]:
        return []


@contextlib.contextmanager
def aws(max_count: int) -> Iterator[Cloud]:
    import boto3

    from metalfleet.providers.aws import AwsDriver
    from metalfleet.testing.ec2 import start_ec2_emulator

    with start_ec2_emulator() as emulator:
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=emulator.url)
        kms = boto3.client("kms", region_name="us-east-1", endpoint_url=emulator.url)
        kms.create_alias(AliasName="alias/bench", TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
        subnet = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]}])[
            "Subnets"][0]["SubnetId"]

        class C(Cloud):
            name = "aws"
            faults = emulator

            def driver(self) -> ComputeDriver:
                return AwsDriver(region="us-east-1", endpoint_url=emulator.url, poll=0.5)

            def spec(self, name: str, count: int) -> ClusterSpec:
                return parse_spec({"name": name, "provider": "aws", "region": "us-east-1", "zone": "us-east-1a",
                                   "offering": "p4d.24xlarge", "count": count, "image": "ami-1e749f67",
                                   "network": {"subnet_id": subnet}, "storage": {"kms_key_id": "alias/bench"}})

            def made_for(self, cluster: str) -> list[str]:
                mine = [{"Name": "tag:metalfleet:cluster", "Values": [cluster]}]
                return ([g["GroupId"] for g in ec2.describe_security_groups(Filters=mine)["SecurityGroups"]]
                        + [g["GroupName"] for g in ec2.describe_placement_groups(Filters=mine)["PlacementGroups"]]
                        + [v["VolumeId"] for v in ec2.describe_volumes(Filters=mine)["Volumes"]]
                        + [e["NetworkInterfaceId"]
                           for e in ec2.describe_network_interfaces(Filters=mine)["NetworkInterfaces"]])

        yield C()


@contextlib.contextmanager
def alibaba(max_count: int) -> Iterator[Cloud]:
    from metalfleet.providers.alibaba import AlibabaDriver
    from metalfleet.testing.alibaba import AlibabaEmulator
    from tests.emulators.alibaba_fixtures import ALIBABA_ENV, IMAGE, KMS_KEY, REGION, ZONE, ecs_call, vswitch

    os.environ.update(ALIBABA_ENV)
    os.environ.pop("ALIBABA_CLOUD_ECS_ENDPOINT", None)
    zone, offering = ZONE, "ecs.ebmgn8v.48xlarge"
    with AlibabaEmulator.start() as emulator:
        emulator.set_stock(zone, offering, max_count * 4)

        class C(Cloud):
            name = "alibaba"
            faults = emulator

            def driver(self) -> ComputeDriver:
                return AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.5)

            def spec(self, name: str, count: int) -> ClusterSpec:
                return parse_spec({"name": name, "provider": "alibaba", "region": REGION, "zone": zone,
                                   "offering": offering, "count": count, "image": IMAGE,
                                   "network": {"subnet_id": vswitch(zone)},
                                   "storage": {"kms_key_id": KMS_KEY}})

            def made_for(self, cluster: str) -> list[str]:
                groups = ecs_call(emulator, "DescribeSecurityGroups",
                                  {"Tag": [{"Key": "metalfleet:cluster", "Value": cluster}]})
                sets = ecs_call(emulator, "DescribeDeploymentSets", {"PageSize": 100})
                return ([g["SecurityGroupId"] for g in groups["SecurityGroups"]["SecurityGroup"]]
                        + [d["DeploymentSetId"] for d in sets["DeploymentSets"]["DeploymentSet"]
                           if d.get("DeploymentSetDescription") == f"metalfleet:cluster={cluster}"])

        yield C()


@contextlib.contextmanager
def huawei(max_count: int) -> Iterator[Cloud]:
    from metalfleet.providers.huawei import HuaweiDriver
    from metalfleet.testing.huawei import DOMAIN_ID, PROJECT_ID, REGION, TEST_AK, TEST_SK, USER_ID, HuaweiEmulator
    from tests.emulators.huawei_fixtures import FLAVOR, ZONE, huawei_spec_data

    with HuaweiEmulator.start() as bms:
        bms.set_timing(2.0)
        bms.set_stock(ZONE, FLAVOR, max_count * 4)

        class C(Cloud):
            name = "huawei"
            faults = bms

            def driver(self) -> ComputeDriver:
                return HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=bms.url, bss_endpoint=bms.url,
                                    ak=TEST_AK, sk=TEST_SK, domain_id=DOMAIN_ID, user_id=USER_ID, poll=0.5)

            def spec(self, name: str, count: int) -> ClusterSpec:
                return parse_spec(huawei_spec_data(name, count, ZONE))

        yield C()


@contextlib.contextmanager
def ipmi(max_count: int) -> Iterator[Cloud]:
    from metalfleet.providers.ipmi import IpmiDriver
    from metalfleet.testing.bmc import start_bmc_pool

    with tempfile.TemporaryDirectory() as tmp, start_bmc_pool(["redfish"] * max_count) as pool:
        inventory = pool.write_inventory(Path(tmp) / "pool.yaml", pool="bench-pool")

        class C(Cloud):
            name = "ipmi"
            faults = pool.redfish

            def driver(self) -> ComputeDriver:
                return IpmiDriver(inventory, Path(tmp) / "claims.json", poll=0.2)

            def spec(self, name: str, count: int) -> ClusterSpec:
                return parse_spec({"name": name, "provider": "ipmi", "region": "bench-pool", "zone": "bench-pool",
                                   "offering": "pool.8xh100-ib", "count": count, "image": "ubuntu-22.04"})

            def calls(self) -> int:
                return int(pool.requests())

        yield C()


CLOUDS = {"aws": aws, "alibaba": alibaba, "huawei": huawei, "ipmi": ipmi}


def run(cloud: Cloud, count: int, args: argparse.Namespace, run_no: int) -> str:
    name = f"storm-{cloud.name}-{count}-{run_no}"
    driver = cloud.driver()
    storm = {"throttle": args.throttle, "server_error": args.server_error, "latency_ms": args.latency_ms,
             "seed": 100 + run_no}
    policy = CountingPolicy(base=args.base, cap=args.cap, deadline=args.deadline)
    cloud.faults.set_faults(**storm)
    calls0 = cloud.calls()
    t0 = time.perf_counter()
    error = ""
    try:
        nodes = order_cluster(driver, node_specs_for(driver, cloud.spec(name, count), policy=policy), policy=policy,
                              timeout=args.deadline)
        assert all(n.state == NodeState.RUNNING for n in nodes)
    except Exception as exc:  # reported in the row: the benchmark measures what happens
        error = f"order failed: {type(exc).__name__}: {str(exc)[:200]}"
    t_order = time.perf_counter() - t0
    calls_order, retries_order = cloud.calls() - calls0, policy.retries
    cloud.faults.set_faults()
    live = cloud.driver().list_nodes(name)
    indexes = [n.tags.get("metalfleet:index") for n in live]
    duplicates = max(0, len(live) - count) + (len(indexes) - len(set(indexes)) if len(live) <= count else 0)
    cloud.faults.set_faults(**storm)
    t1 = time.perf_counter()
    try:
        release_cluster(driver, name, policy=policy, unsubscribe=True)
    except Exception as exc:
        error += f" release failed: {type(exc).__name__}: {str(exc)[:200]}"
    t_release = time.perf_counter() - t1
    cloud.faults.set_faults()
    clean = cloud.driver()
    orphans = len(clean.list_nodes(name)) + len(cloud.made_for(name))
    return (f"| {cloud.name} | {count} | {t_order:.1f} s | {calls_order} | {retries_order} | {t_release:.1f} s | "
            f"{cloud.calls() - calls0 - calls_order} | {policy.retries - retries_order} | {duplicates} | {orphans} | "
            f"{error or 'ok'} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", nargs="+", choices=sorted(CLOUDS), default=["aws", "alibaba", "huawei", "ipmi"])
    parser.add_argument("--count", nargs="+", type=int, default=[16, 64])
    parser.add_argument("--throttle", type=float, default=0.5)
    parser.add_argument("--server-error", type=float, default=0.02)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--base", type=float, default=0.05)
    parser.add_argument("--cap", type=float, default=2.0)
    parser.add_argument("--deadline", type=float, default=600.0)
    args = parser.parse_args()
    print(f"{args.throttle:.0%} throttled, {args.server_error:.0%} 5xx, {args.latency_ms:.0f} ms per call, backoff "
          f"base {args.base:g} s cap {args.cap:g} s, deadline {args.deadline:.0f} s, {os.cpu_count()} cores\n")
    print("| driver | nodes | order wall | order calls | order retries | release wall | release calls | "
          "release retries | duplicates | orphans | outcome |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for provider in args.provider:
        counts = args.count  # ipmi: a pool of that many simulated hosts behind one Redfish service
        with CLOUDS[provider](max(counts)) as cloud:
            for i, count in enumerate(counts):
                row = run(cloud, count, args, i)
                bad += not row.endswith("| 0 | 0 | ok |")
                print(row, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
