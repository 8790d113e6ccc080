"""Order examples/aws-p5/cluster.yaml through the AWS driver on the local EC2 emulator, then release it.

    .venv/bin/python tools/demo_aws.py [--spec examples/aws-p5/cluster.yaml] [--latency-ms 150]
    .venv/bin/python tools/demo_aws.py --endpoint http://127.0.0.1:5055   # an emulator already running

Starts the emulator as a subprocess (unless --endpoint), makes the spec's EBS key and key pair there (if missing),
orders the cluster with a live progress line, prints the nodes, releases them, checks that no node and
neither of the groups metalfleet made for the cluster (security group, placement group) is left, and
stops the emulator. The throwaway credentials below are set in this process only, for the emulator.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from metalfleet.providers import (
    MetalfleetError,
    Node,
    NodeState,
    get_driver,
    load_spec,
    node_specs_for,
    order_cluster,
    release_cluster,
)
from metalfleet.testing.ec2 import start_ec2_emulator

ROOT = Path(__file__).resolve().parents[1]


class Progress:
    """One status line, rewritten in place: ordered n/N, then the nodes' states."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.ordered = 0
        self.states: Counter[str] = Counter()
        self.start = time.monotonic()
        self.lock = threading.Lock()

    def show(self, phase: str) -> None:
        states = ", ".join(f"{v} {k}" for k, v in sorted(self.states.items())) or "-"
        line = f"\r  [{time.monotonic() - self.start:5.1f}s] {phase}: ordered {self.ordered}/{self.total}; {states}"
        print(line.ljust(100), end="", flush=True)

    def on_ordered(self, node: Node) -> None:
        with self.lock:
            self.ordered += 1
            self.states[node.state.value] += 1
            self.show("ordering")

    def on_poll(self, nodes: Sequence[Node]) -> None:
        with self.lock:
            self.states = Counter(n.state.value for n in nodes)
            self.show("waiting ")


def table(nodes: Sequence[Node]) -> str:
    rows = [("NAME", "ID", "STATE", "ZONE", "PRIVATE IP", "EFA", "PLACEMENT GROUP", "KEY")]
    rows += [(n.name or "-", n.id, n.state.value, n.zone or "-", n.private_ip or "-",
              str(n.extra.get("efa_interfaces", "-")), str(n.extra.get("placement_group") or "-"),
              str(n.extra.get("idempotency_key", "-"))[:28]) for n in nodes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip() for r in rows)


def ensure_account(url: str, region: str, kms_alias: str | None, key_pair: str | None) -> None:
    """What the spec expects the account to have, made in the emulator if missing: its EBS key (as ``aws kms
    create-key`` + ``create-alias``) and its key pair (``aws ec2 create-key-pair``; this demo never logs in)."""
    import boto3

    if kms_alias:
        kms = boto3.client("kms", endpoint_url=url, region_name=region)
        if not any(a["AliasName"] == kms_alias for a in kms.list_aliases()["Aliases"]):
            key_id = kms.create_key(Description="metalfleet demo: EBS volumes")["KeyMetadata"]["KeyId"]
            kms.create_alias(AliasName=kms_alias, TargetKeyId=key_id)
            print(f"KMS key {kms_alias} created in the emulator")
    if key_pair:
        ec2 = boto3.client("ec2", endpoint_url=url, region_name=region)
        if not ec2.describe_key_pairs(Filters=[{"Name": "key-name", "Values": [key_pair]}])["KeyPairs"]:
            ec2.create_key_pair(KeyName=key_pair)
            print(f"key pair {key_pair} created in the emulator")


@contextlib.contextmanager
def ec2_endpoint(endpoint: str | None, latency_ms: float) -> Iterator[str]:
    if endpoint:
        yield endpoint
        return
    with start_ec2_emulator() as emulator:
        print(f"local EC2 emulator started at {emulator.url} (pid {emulator.process.pid}), "
              f"{latency_ms:.0f} ms per call")
        emulator.set_faults(latency_ms=latency_ms)
        yield emulator.url
    print("emulator stopped")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default=str(ROOT / "examples" / "aws-p5" / "cluster.yaml"))
    parser.add_argument("--endpoint", help="use an emulator already running here instead of starting one")
    parser.add_argument("--latency-ms", type=float, default=150.0, help="latency the emulator adds per call")
    args = parser.parse_args()

    os.environ.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_SESSION_TOKEN": "testing"})
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        os.environ.pop(var, None)

    spec = load_spec(args.spec)
    print(f"{args.spec}: {spec.count} x {spec.offering} in {spec.zone or spec.region}, "
          f"placement group {spec.placement_group_name}")
    with ec2_endpoint(args.endpoint, args.latency_ms) as url:
        ensure_account(url, spec.region, spec.storage.kms_key_id, spec.ssh.key_pair)
        driver = get_driver("aws", region=spec.region, endpoint_url=url, poll=0.2)
        try:
            specs = node_specs_for(driver, spec)  # a re-run on a long-lived emulator steps past released nodes
            offering = next(o for o in driver.offerings() if o.name == spec.offering)
            price = offering.price()
            print(f"{offering.name}: {offering.gpu_count}x {offering.gpu_model} {offering.gpu_memory_gib} GiB, "
                  f"{offering.fabric_cards} EFA cards, {offering.fabric_gbps:.0f} Gbit/s"
                  + (f", list price ${price.hourly:.2f}/h as of {price.as_of}" if price else ""))
            progress = Progress(len(specs))
            nodes = order_cluster(driver, specs, on_ordered=progress.on_ordered, progress=progress.on_poll,
                                  timeout=600)
            progress.show("running ")
            print()
            print(table(nodes))

            print(f"releasing {spec.name} ...")
            shared = driver.cluster_resources(spec.name)
            print(f"  shared by the nodes: {', '.join(shared)}")
            released = release_cluster(driver, spec.name)
            left = driver.list_nodes(spec.name)
            left_shared = driver.cluster_resources(spec.name)
            states = {driver.get(i).state for i in released}
            print(f"  released {len(released)} node(s); now {', '.join(sorted(s.value for s in states))}; "
                  f"{len(left)} node(s) and {len(left_shared)} of the cluster's groups left")
            if left or left_shared or states != {NodeState.TERMINATED}:
                print(f"  NOT CLEAN: {[n.id for n in left] + left_shared} remain", file=sys.stderr)
                return 1
        except MetalfleetError as exc:
            print(f"\nerror: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
