"""Child process for the crash tests: order a cluster one node at a time, printing each node id; or (``"mode":
"release"``) release its nodes one at a time.

    python tests/contract/order_proc.py '{"driver": {...}, "spec": {...}, "pause": 0.5}'
    python tests/contract/order_proc.py '{"driver": {...}, "spec": {...}, "mode": "release", "wait": false}'

It pauses ``pause`` seconds after each node so the parent can SIGKILL it between purchases (or releases); the
line ``DONE <ids>`` means the whole cluster was ordered and is running (or released). A release with ``"wait":
false`` asks the provider to release the node and pauses before it is gone, so a kill lands mid-release; the
release unsubscribes (it is the opt-in of the spec that the parent tests, not this child's).

For the fault suite: ``workers`` (the order's fan-out, default 1), ``lock`` (hold the cluster lock, default true),
``start_at`` (a time.time() to start at, so two children race), ``wait_pause`` (print ``WAITING`` at the wait's
first poll and pause there, so a kill lands in the wait) and ``rollback_pause`` (print ``ROLLING <id>`` once a
rolled-back node's release was asked for and pause before waiting for it, so a kill lands mid-rollback). A
failed order prints ``FAILED <message>`` and exits 3.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from metalfleet.providers import (
    ComputeDriver,
    Node,
    OrderFailed,
    RetryPolicy,
    node_specs_for,
    order_cluster,
    parse_spec,
    release_cluster,
)

_PRINT = threading.Lock()


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
    if kind != "aws":  # a provider another package registers
        from metalfleet.providers.registry import get_driver

        return get_driver(kind, **cfg)
    from metalfleet.providers.aws import AwsDriver

    return AwsDriver(**cfg)


def main() -> int:
    job = json.loads(sys.argv[1])
    driver = build_driver(job["driver"])
    pause = float(job.get("pause", 0.0))

    def on_ordered(node: Node) -> None:  # called from the order's threads: one whole line at a time
        with _PRINT:
            sys.stdout.write(f"ORDERED {node.id}\n")
            sys.stdout.flush()
        time.sleep(pause)

    policy = RetryPolicy(base=0.005, cap=0.05, deadline=float(job.get("deadline", 60)))
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
    start_at = float(job.get("start_at", 0.0))
    if start_at:
        time.sleep(max(0.0, start_at - time.time()))
    wait_pause = float(job.get("wait_pause", 0.0))
    waited: list[int] = []

    def progress(_nodes: object) -> None:
        if wait_pause and not waited:
            waited.append(1)
            print("WAITING", flush=True)
            time.sleep(wait_pause)

    if job.get("rollback_pause"):
        driver = _PausingRelease(driver, float(job["rollback_pause"]))
    try:
        nodes = order_cluster(driver, node_specs_for(driver, spec, policy=policy),
                              max_workers=int(job.get("workers", 1)),
                              on_ordered=on_ordered, policy=policy, timeout=60, lock=bool(job.get("lock", True)),
                              progress=progress)
    except OrderFailed as exc:
        print(f"FAILED {exc}", flush=True)
        return 3
    print("DONE " + " ".join(n.id for n in nodes), flush=True)
    return 0


class _PausingRelease:
    """The driver, except that ``release`` asks for the release, says so and pauses before waiting for it."""

    def __init__(self, driver: ComputeDriver, pause: float) -> None:
        self._driver = driver
        self._pause = pause
        self.name = driver.name
        self.region = getattr(driver, "region", "")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        self._driver.release(node_id, wait=False, timeout=timeout, unsubscribe=unsubscribe)
        print(f"ROLLING {node_id}", flush=True)
        time.sleep(self._pause)
        self._driver.release(node_id, wait=wait, timeout=timeout, unsubscribe=unsubscribe)


if __name__ == "__main__":
    sys.exit(main())
