"""Child process for the crash tests: order a cluster one node at a time, printing each node id; or (``"mode":
"release"``) release its nodes one at a time.

    python tests/contract/order_proc.py '{"driver": {...}, "spec": {...}, "pause": 0.5}'
    python tests/contract/order_proc.py '{"driver": {...}, "spec": {...}, "mode": "release", "wait": false}'

It pauses ``pause`` seconds after each node so the parent can SIGKILL it between purchases (or releases); the
line ``DONE <ids>`` means the whole cluster was ordered and is running (or released). A release with ``"wait":
false`` asks the provider to release the node and pauses before it is gone, so a kill lands mid-release; the
release unsubscribes (it is the opt-in of the spec that the parent tests, not this child's).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from metalfleet.providers import ComputeDriver, Node, RetryPolicy, order_cluster, parse_spec, plan, release_cluster


def build_driver(cfg: dict[str, Any]) -> ComputeDriver:
    cfg = dict(cfg)
    kind = cfg.pop("kind")
    if kind == "fake":
        from metalfleet.providers.fake import FakeDriver

        return FakeDriver(**cfg)
    if kind == "huawei":
        from metalfleet.providers.huawei import HuaweiDriver

        return HuaweiDriver(**cfg)
    if kind == "alibaba":
        from metalfleet.providers.alibaba import AlibabaDriver

        return AlibabaDriver(**cfg)
    if kind == "ipmi":
        from metalfleet.providers.ipmi import IpmiDriver

        return IpmiDriver(**cfg)
    from metalfleet.providers.aws import AwsDriver

    return AwsDriver(**cfg)


def main() -> int:
    job = json.loads(sys.argv[1])
    driver = build_driver(job["driver"])
    pause = float(job.get("pause", 0.0))

    def on_ordered(node: Node) -> None:
        print(f"ORDERED {node.id}", flush=True)
        time.sleep(pause)

    policy = RetryPolicy(attempts=12, base=0.005, cap=0.05)
    spec = parse_spec(job["spec"])
    if job.get("mode") == "release":
        nodes = policy.call(driver.list_nodes, spec.name)
        for node in sorted(nodes, key=lambda n: n.id):
            policy.call(driver.release, node.id, wait=bool(job.get("wait", True)), timeout=120, unsubscribe=True)
            print(f"RELEASED {node.id}", flush=True)
            time.sleep(pause)
        release_cluster(driver, spec.name, policy=policy, unsubscribe=True)
        print("DONE " + " ".join(n.id for n in nodes), flush=True)
        return 0
    nodes = order_cluster(driver, plan(driver, spec), max_workers=1, on_ordered=on_ordered,
                          policy=policy, timeout=60)
    print("DONE " + " ".join(n.id for n in nodes), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
