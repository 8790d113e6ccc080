"""Reading instances back: EC2's answers -> neutral Nodes, states, host keys, and waiting for a state.

Polls use DescribeInstanceStatus, whose answers stay small for hundreds of EFA nodes; the rest of each
node is what RunInstances or an earlier DescribeInstances returned (kept per driver). Host keys come from
the console output (:mod:`metalfleet.providers.console`), read once per instance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..base import CachedObserver, wait_for_state
from ..contract import OrderProgress
from ..errors import NotFoundError, ProviderError
from ..models import Node, NodeState
from ..tags import TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_NAME
from .errors import PROVIDER, boundary

__all__ = ["LIVE_STATES", "STATE_TABLE", "Observer", "node_from_instance"]

#: EC2 instance state name -> neutral state; anything else is UNKNOWN.
STATE_TABLE: Mapping[str, NodeState] = {
    "pending": NodeState.PENDING,
    "running": NodeState.RUNNING,
    "stopping": NodeState.STOPPING,
    "stopped": NodeState.STOPPED,
    "shutting-down": NodeState.TERMINATING,
    "terminated": NodeState.TERMINATED,
}
#: The states ``list_nodes`` asks for: every one but terminated.
LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]


def node_from_instance(inst: Mapping[str, Any], region: str, host_keys: Sequence[str] = ()) -> Node:
    """The Node for one instance record of RunInstances or DescribeInstances."""
    tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
    nics = inst.get("NetworkInterfaces", [])
    placement = inst.get("Placement") or {}
    extra: dict[str, Any] = {
        # the tag holds the whole key; the ClientToken is cut to 64 characters for a long one
        "idempotency_key": tags.get(TAG_KEY) or inst.get("ClientToken"),
        "efa_interfaces": sum(1 for n in nics if n.get("InterfaceType") in ("efa", "efa-only")),
        "placement_group": placement.get("GroupName") or None,
        "capacity_reservation_id": inst.get("CapacityReservationId"),
        "lifecycle": inst.get("InstanceLifecycle") or "on-demand",
        "subnet_id": inst.get("SubnetId"),
        "vpc_id": inst.get("VpcId"),
        "image": inst.get("ImageId"),
        "ec2_state": (inst.get("State") or {}).get("Name"),
    }
    reason = (inst.get("StateReason") or {}).get("Message")
    if reason:
        extra["state_reason"] = reason
    if host_keys:
        extra["host_keys"] = list(host_keys)
    return Node(
        id=str(inst["InstanceId"]),
        provider=PROVIDER,
        region=region,
        state=NodeState.map(STATE_TABLE, (inst.get("State") or {}).get("Name")),
        offering=str(inst.get("InstanceType", "")),
        zone=placement.get("AvailabilityZone"),
        private_ip=inst.get("PrivateIpAddress"),
        public_ip=inst.get("PublicIpAddress") or None,
        name=tags.get(TAG_NAME),
        tags=tags,
        extra=extra,
    )


class Observer(CachedObserver):
    """Reads instances for one driver over its cache (:class:`~metalfleet.providers.base.CachedObserver`), so
    polls stay small."""

    def __init__(self, ec2: Callable[[], Any], region: str) -> None:
        super().__init__(PROVIDER, region)
        self._ec2 = ec2

    def node(self, inst: Mapping[str, Any]) -> Node:
        """The Node for ``inst``, remembered as the last full view of it."""
        return self.remember(node_from_instance(inst, self.region, self.keys.get(str(inst["InstanceId"]), ())))

    def describe(self, filters: list[dict[str, Any]]) -> list[Node]:
        nodes: list[Node] = []
        with boundary("DescribeInstances"):
            for page in self._ec2().get_paginator("describe_instances").paginate(Filters=filters):
                for reservation in page.get("Reservations", []):
                    nodes.extend(self.node(i) for i in reservation.get("Instances", []))
        return nodes

    def get(self, node_id: str, *, host_keys: bool = False) -> Node:
        with boundary("DescribeInstances"):
            resp = self._ec2().describe_instances(InstanceIds=[node_id])
        for reservation in resp.get("Reservations", []):
            for inst in reservation.get("Instances", []):
                node = self.node(inst)
                if host_keys and node.state == NodeState.RUNNING and "host_keys" not in node.extra:
                    node = self.with_host_keys([node])[0]
                return node
        raise NotFoundError(f"instance {node_id} not found in {self.region}", provider=PROVIDER,
                            code="InvalidInstanceID.NotFound")

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        return self.console_keys(node_id, lambda: self._console(node_id))

    def _console(self, node_id: str) -> str:
        with boundary("GetConsoleOutput"):
            resp = self._ec2().get_console_output(InstanceId=node_id)
        return str(resp.get("Output") or "")  # botocore has decoded the base64

    def with_host_keys(self, nodes: Sequence[Node]) -> list[Node]:
        """``nodes`` with ``extra["host_keys"]`` where the console has them. Best effort: a node whose
        console is empty or cannot be read (throttled, no ec2:GetConsoleOutput permission) comes back as is."""
        return self.keyed(nodes, self.host_keys)

    def list_nodes(self, cluster: str) -> list[Node]:
        nodes = self.describe([{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
                               {"Name": "instance-state-name", "Values": LIVE_STATES}])
        return sorted(nodes, key=lambda n: (n.tags.get(TAG_INDEX, "").zfill(8), n.id))

    def states(self, ids: Sequence[str]) -> dict[str, str]:
        """EC2 state name of each instance EC2 lists, from DescribeInstanceStatus (small answers).

        Right after RunInstances, EC2's eventually consistent reads may not know an id yet; that
        chunk is then read with DescribeInstances, whose filter form tolerates unknown ids.
        """
        states: dict[str, str] = {}
        for start in range(0, len(ids), 100):
            chunk = list(ids[start:start + 100])
            try:
                with boundary("DescribeInstanceStatus"):
                    pages = self._ec2().get_paginator("describe_instance_status").paginate(
                        InstanceIds=chunk, IncludeAllInstances=True)
                    for page in pages:
                        for st in page.get("InstanceStatuses", []):
                            states[st["InstanceId"]] = st["InstanceState"]["Name"]
            except NotFoundError:
                for n in self.describe([{"Name": "instance-id", "Values": chunk}]):
                    states[n.id] = (n.extra.get("ec2_state") or n.state.value)
        return states

    def wait(self, node_ids: Sequence[str], state: NodeState, *, timeout: float, poll: float,
             progress: OrderProgress | None = None) -> list[Node]:
        """Poll DescribeInstanceStatus every ``poll`` seconds until every node is in ``state``; the nodes come back
        as EC2 describes them then.

        What RunInstances or an earlier read returned stands for the rest of each node. Instances EC2 does not
        list yet count as pending; when waiting for TERMINATED they count as gone. Waiting for RUNNING fails at
        once if a node terminates; once every node runs, each one's console is read once for its SSH host keys
        (``extra["host_keys"]``)."""
        ids = list(dict.fromkeys(node_ids))
        missing = NodeState.TERMINATED if state == NodeState.TERMINATED else NodeState.PENDING
        states: dict[str, str] = {}

        def read() -> list[Node]:
            now = self.states(ids)
            states.clear()
            states.update(now)
            return [self.known(i, NodeState.map(STATE_TABLE, states[i]) if i in states else missing) for i in ids]

        nodes = wait_for_state(ids, read, state, timeout=timeout, poll=poll, provider=PROVIDER,
                               what=f"whether instances {ids} are {state.value}", progress=progress,
                               failed=lambda nodes: self._fail_if_gone(nodes, states),
                               timed_out=lambda nodes: f"instances {[n.id for n in nodes if n.state != state]} "
                                                       f"not {state.value} after {timeout:.0f}s")
        unknown = [n.id for n in nodes if not n.offering and n.id in states]
        if unknown:  # nodes this driver never read: one full read for their details
            self.describe([{"Name": "instance-id", "Values": unknown}])
            nodes = [dataclasses.replace(self.seen.get(n.id, n), state=n.state) for n in nodes]
        if state == NodeState.RUNNING:
            nodes = self.with_host_keys(nodes)
        return nodes

    def _fail_if_gone(self, nodes: Sequence[Node], states: Mapping[str, str]) -> None:
        """Waiting for RUNNING fails at once when a node terminated: it will never run."""
        dead = [n.id for n in nodes if n.state.is_gone or n.state == NodeState.ERROR]
        if not dead:
            return
        described = {n.id: n for n in self.describe([{"Name": "instance-id", "Values": dead}])}
        why = "; ".join(f"{i} is {states.get(i, 'gone')}" + (
            f" ({described[i].extra['state_reason']})"
            if i in described and described[i].extra.get("state_reason") else "") for i in dead)
        raise ProviderError(f"waiting for running: {why}. An order repeated with a node's idempotency "
                            "key returns the instance that key bought, even terminated (EC2 keeps "
                            "ClientTokens a day or more); bump the node's generation to buy a "
                            "replacement", provider=PROVIDER, code="InstanceGone")

    def gone_by_key(self, key: str) -> Node | None:
        """The instance ``key`` bought (found by its metalfleet:key tag) when it is gone; None when it is
        live, or EC2 no longer lists it."""
        nodes = self.describe([{"Name": f"tag:{TAG_KEY}", "Values": [key]}])
        if not nodes or not all(n.state.is_gone for n in nodes):
            return None
        return nodes[0]
