"""Reading instances back: ECS's answers -> neutral Nodes, states, host keys, and waiting for a state.

ECS forgets a released instance: DescribeInstances stops listing it. A node this driver has seen and ECS no
longer lists is therefore TERMINATED; one it never saw is NotFound. Polls use DescribeInstanceStatus (small
answers, PageNumber/PageSize pages); host keys come from GetInstanceConsoleOutput, read once per instance.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..base import CachedObserver, wait_for_state
from ..contract import OrderProgress
from ..errors import NotFoundError, ProviderError, TransientError
from ..models import Node, NodeState
from ..tags import TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_NAME
from .errors import PROVIDER

__all__ = ["STATE_TABLE", "Observer", "node_from_instance"]

Call = Callable[[str, dict[str, Any]], dict[str, Any]]

#: ECS instance Status -> neutral state; anything else is UNKNOWN. (A released instance is not listed at all.)
STATE_TABLE: Mapping[str, NodeState] = {
    "Pending": NodeState.PENDING,
    "Starting": NodeState.PENDING,
    "Running": NodeState.RUNNING,
    "Stopping": NodeState.STOPPING,
    "Stopped": NodeState.STOPPED,
}


def _first(block: Any, key: str = "IpAddress") -> str | None:
    values = (block or {}).get(key) or []
    return str(values[0]) if values else None


def node_from_instance(inst: Mapping[str, Any], region: str, host_keys: Sequence[str] = ()) -> Node:
    """The Node for one instance record of DescribeInstances."""
    tags = {t["TagKey"]: t.get("TagValue", "") for t in (inst.get("Tags") or {}).get("Tag") or []}
    vpc = inst.get("VpcAttributes") or {}
    nics = (inst.get("NetworkInterfaces") or {}).get("NetworkInterface") or []
    extra: dict[str, Any] = {
        "idempotency_key": tags.get(TAG_KEY),
        "network_interfaces": len(nics),
        "deployment_set_id": inst.get("DeploymentSetId") or None,
        "vswitch_id": vpc.get("VSwitchId"),
        "subnet_id": vpc.get("VSwitchId"),
        "vpc_id": vpc.get("VpcId"),
        "image": inst.get("ImageId"),
        "key_pair": inst.get("KeyPairName") or None,
        "charge_type": inst.get("InstanceChargeType"),
        "expired_time": inst.get("ExpiredTime") or None,
        "vcpus": inst.get("Cpu"),
        "spot_strategy": inst.get("SpotStrategy"),
        "security_group_ids": list((inst.get("SecurityGroupIds") or {}).get("SecurityGroupId") or []),
        "ecs_status": inst.get("Status"),
    }
    if host_keys:
        extra["host_keys"] = list(host_keys)
    return Node(
        id=str(inst["InstanceId"]),
        provider=PROVIDER,
        region=region,
        state=NodeState.map(STATE_TABLE, inst.get("Status")),
        offering=str(inst.get("InstanceType", "")),
        zone=inst.get("ZoneId"),
        private_ip=_first(vpc.get("PrivateIpAddress")) or (nics[0].get("PrimaryIpAddress") if nics else None),
        public_ip=_first(inst.get("PublicIpAddress")) or (inst.get("EipAddress") or {}).get("IpAddress") or None,
        name=tags.get(TAG_NAME) or inst.get("InstanceName"),
        tags=tags,
        extra=extra,
    )


class Observer(CachedObserver):
    """Reads instances for one driver over its cache (:class:`~metalfleet.providers.base.CachedObserver`), so
    polls stay small and a released node reads as TERMINATED."""

    def __init__(self, call: Call, region: str) -> None:
        super().__init__(PROVIDER, region)
        self._call = call

    def node(self, inst: Mapping[str, Any]) -> Node:
        return self.remember(node_from_instance(inst, self.region, self.keys.get(str(inst["InstanceId"]), ())))

    def gone(self, node_id: str) -> Node:
        """The last view of a node ECS no longer lists, as TERMINATED."""
        known = self.known(node_id, NodeState.TERMINATED)
        return self.remember(dataclasses.replace(known, extra={**known.extra, "ecs_status": None}))

    def describe(self, params: dict[str, Any]) -> list[Node]:
        """Every instance DescribeInstances lists for ``params`` (NextToken/MaxResults pages)."""
        nodes: list[Node] = []
        token: str | None = None
        seen: set[str] = set()
        while True:
            page_params = {"RegionId": self.region, "MaxResults": 100, **params}
            if token:
                page_params["NextToken"] = token
            resp = self._call("DescribeInstances", page_params)  # a throttled page fails the read: retried whole
            nodes.extend(self.node(i) for i in (resp.get("Instances") or {}).get("Instance") or [])
            token = resp.get("NextToken") or None
            if not token:
                return nodes
            if token in seen:  # an answer that pages in a circle would read for ever
                raise TransientError(f"DescribeInstances answered NextToken {token} twice", provider=PROVIDER,
                                     code="NextTokenRepeated")
            seen.add(token)

    def by_ids(self, ids: Sequence[str]) -> dict[str, Node]:
        found: dict[str, Node] = {}
        for start in range(0, len(ids), 100):
            chunk = list(ids[start:start + 100])
            found.update((n.id, n) for n in self.describe({"InstanceIds": json.dumps(chunk)}))
        return found

    def get(self, node_id: str, *, host_keys: bool = False) -> Node:
        node = self.by_ids([node_id]).get(node_id)
        if node is None:
            if node_id in self.seen:
                return self.gone(node_id)
            raise NotFoundError(f"instance {node_id} not found in {self.region}", provider=PROVIDER,
                                code="InvalidInstanceId.NotFound")
        if host_keys and node.state == NodeState.RUNNING and "host_keys" not in node.extra:
            node = self.with_host_keys([node], strict=True)[0]
        return node

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        return self.console_keys(node_id, lambda: self._console(node_id))

    def _console(self, node_id: str) -> str:
        resp = self._call("GetInstanceConsoleOutput", {"RegionId": self.region, "InstanceId": node_id})
        raw = str(resp.get("ConsoleOutput") or "")
        try:
            return base64.b64decode(raw, validate=False).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            return raw

    def with_host_keys(self, nodes: Sequence[Node], *, strict: bool = False) -> list[Node]:
        """``nodes`` with ``extra["host_keys"]`` where the console has them; a console that is empty or cannot be
        read leaves its node as is (only keys found are kept, so a later read tries again). ``strict`` (the
        caller asked for the keys): a throttled or failed (5xx) read is not "no keys": its TransientError is
        raised once every console was tried, for the caller's retry policy (those read are kept)."""
        if not strict:
            return self.keyed(nodes, self.host_keys)
        transient: list[TransientError] = []

        def read(node_id: str) -> tuple[str, ...]:
            try:
                return self.host_keys(node_id)
            except TransientError as exc:
                transient.append(exc)
                raise

        out = self.keyed(nodes, read)
        if transient:
            raise transient[0]
        return out

    def list_nodes(self, cluster: str) -> list[Node]:
        nodes = self.describe({"Tag": [{"Key": TAG_CLUSTER, "Value": cluster}]})
        return sorted(nodes, key=lambda n: (n.tags.get(TAG_INDEX, "").zfill(8), n.id))

    def find_by_key(self, key: str) -> list[Node]:
        return self.describe({"Tag": [{"Key": TAG_KEY, "Value": key}]})

    def states(self, ids: Sequence[str]) -> dict[str, str]:
        """ECS Status of each instance ECS lists, from DescribeInstanceStatus (PageNumber/PageSize pages)."""
        states: dict[str, str] = {}
        for start in range(0, len(ids), 100):
            chunk = list(ids[start:start + 100])
            page = 1
            while True:
                resp = self._call("DescribeInstanceStatus", {"RegionId": self.region, "InstanceId": chunk,
                                                             "PageNumber": page, "PageSize": 50})
                for st in (resp.get("InstanceStatuses") or {}).get("InstanceStatus") or []:
                    states[str(st["InstanceId"])] = str(st["Status"])
                if page * 50 >= int(resp.get("TotalCount") or 0):
                    break
                page += 1
        return states

    def wait(self, node_ids: Sequence[str], state: NodeState, *, timeout: float, poll: float,
             progress: OrderProgress | None = None) -> list[Node]:
        """Poll DescribeInstanceStatus every ``poll`` seconds until every node is in ``state``; the nodes come back
        as last read. Waiting for RUNNING fails at once when a node is released; once every node runs, each one's
        console is read once for its SSH host keys (``extra["host_keys"]``)."""
        ids = list(dict.fromkeys(node_ids))

        def read() -> list[Node]:
            states = self.states(ids)
            # not listed: released (a node never seen yet counts as pending, unless waiting for gone)
            return [self.known(i, NodeState.map(STATE_TABLE, states[i]) if i in states else
                               NodeState.TERMINATED if state == NodeState.TERMINATED or i in self.seen
                               else NodeState.PENDING) for i in ids]

        nodes = wait_for_state(ids, read, state, timeout=timeout, poll=poll, provider=PROVIDER,
                               what=f"whether instances {ids} are {state.value}", progress=progress,
                               failed=_fail_if_released,
                               timed_out=lambda nodes: f"instances {[n.id for n in nodes if n.state != state]} "
                                                       f"not {state.value} after {timeout:.0f}s")
        if state == NodeState.TERMINATED:
            return [self.gone(i) for i in ids]
        unknown = [n.id for n in nodes if not n.offering]
        if unknown:  # nodes this driver never read: one full read for their details
            self.by_ids(unknown)
            nodes = [dataclasses.replace(self.seen.get(n.id, n), state=n.state) for n in nodes]
        if state == NodeState.RUNNING:
            nodes = self.with_host_keys(nodes)
        return nodes


def _fail_if_released(nodes: Sequence[Node]) -> None:
    """Waiting for RUNNING fails at once when a node was released: it will never run."""
    dead = [n.id for n in nodes if n.state.is_gone or n.state == NodeState.ERROR]
    if dead:
        raise ProviderError(f"waiting for running: {', '.join(dead)} released (ECS no longer lists them). An order "
                            "repeated with a node's idempotency key (ClientToken) answers the instance that key "
                            "bought; bump the node's generation to buy a replacement", provider=PROVIDER,
                            code="InstanceGone")
