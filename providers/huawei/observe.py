"""Reading servers back: BMS's answers -> neutral Nodes, the state table, lookups and waiting.

Every lookup stands on documented ground. The SDK model documents ListBareMetalServers' ``tags`` filter only as
"裸金属服务器标签: __type_baremetal" (how a tag of one's own is written there, and how it matches, is not said), so
the driver never filters by tag on the server: a node is found by the documented ``name`` filter with its
deterministic server name (exact, substring or pattern: any of these readings answers it; the deprecated
Nova-style listing says it matches fuzzily), its ``metalfleet:key`` tag compared here; a cluster's nodes are every
listed server (paged by ``limit``/``offset``) whose ``metalfleet:cluster`` tag is the cluster's. BMS lists a
server's tags as ``key=value`` strings (``ServerDetails.tags``). Deleted servers are not listed (only an
administrator may list ``DELETED``), but reading one by id answers it as DELETED for a while after, as Nova does.

BMS offers no console log through its API, so there are no host keys from the console: bootstrap pins a
node's key from known_hosts or at first contact (``ssh.pin_on_first_contact``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from ..base import CachedObserver, wait_for_state
from ..contract import OrderProgress
from ..errors import NotFoundError, ProviderError, TransientError
from ..models import Node, NodeState
from ..tags import TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_NAME
from .errors import PROVIDER, boundary
from .request import key_tag

__all__ = ["STATE_TABLE", "Observer", "age", "created_at", "deleting", "node_from_server", "parse_tags"]

#: BMS server status -> neutral state; anything else is UNKNOWN. (BMS API reference, server status values:
#: ACTIVE, BUILD, ERROR, HARD_REBOOT, REBOOT, REBUILD, SHUTOFF, DELETED.)
STATE_TABLE: Mapping[str, NodeState] = {
    "BUILD": NodeState.PENDING,
    "REBUILD": NodeState.PENDING,
    "REBOOT": NodeState.PENDING,
    "HARD_REBOOT": NodeState.PENDING,
    "ACTIVE": NodeState.RUNNING,
    "SHUTOFF": NodeState.STOPPED,
    "ERROR": NodeState.ERROR,
    "DELETED": NodeState.TERMINATED,
}
#: Servers per ListBareMetalServers page (the API's maximum).
PAGE = 1000


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def parse_tags(tags: Sequence[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` (ServerDetails.tags) -> ``{k: v}``; system tags without a value (``__type_baremetal``)
    are left out."""
    out: dict[str, str] = {}
    for item in tags or []:
        key, sep, value = str(item).partition("=")
        if sep:
            out[key] = value
    return out


def node_from_server(server: Any, region: str) -> Node:
    """The Node for one ServerDetails (ShowBaremetalServerDetails / ListBareMetalServers)."""
    tags = parse_tags(_get(server, "tags"))
    private_ip = public_ip = None
    vpc_id = None
    for vpc, entries in (_get(server, "addresses") or {}).items():
        for entry in entries or []:
            kind = _get(entry, "os_ext_ip_stype")
            if str(_get(entry, "version")) != "4":
                continue
            if kind == "floating" and public_ip is None:
                public_ip = _get(entry, "addr")
            elif kind != "floating" and private_ip is None:
                private_ip, vpc_id = _get(entry, "addr"), vpc
    flavor = _get(server, "flavor")
    metadata = _get(server, "metadata")
    status = _get(server, "status")
    extra: dict[str, Any] = {
        "idempotency_key": tags.get(TAG_KEY),
        "server_name": _get(server, "name"),
        "bms_status": status,
        "vpc_id": vpc_id or (_get(metadata, "vpc_id") if metadata is not None else None),
        "image": _get(_get(server, "image"), "id") if _get(server, "image") is not None else None,
        "charging_mode": _get(metadata, "charging_mode") if metadata is not None else None,
        "order_id": _get(metadata, "metering_order_id") if metadata is not None else None,
        "task_state": _get(server, "os_ext_st_stask_state") or _get(server, "OS-EXT-STS:task_state"),
        "key_name": _get(server, "key_name"),
        "created": _get(server, "created"),
    }
    fault = _get(server, "fault")
    if fault is not None and _get(fault, "message"):
        extra["state_reason"] = str(_get(fault, "message"))
    return Node(
        id=str(_get(server, "id")),
        provider=PROVIDER,
        region=region,
        state=NodeState.map(STATE_TABLE, status),
        offering=str(_get(flavor, "id") or _get(flavor, "name") or "") if flavor is not None else "",
        zone=_get(server, "os_ext_a_zavailability_zone"),
        private_ip=private_ip,
        public_ip=public_ip,
        name=tags.get(TAG_NAME) or _get(server, "name"),
        tags=tags,
        extra=extra,
    )


def created_at(node: Node) -> datetime | None:
    """When BMS made the server (``ServerDetails.created``, ISO 8601 to the second: "YYYY-MM-DDTHH:MM:SSZ")."""
    text = node.extra.get("created")
    if not text:
        return None
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def age(node: Node) -> tuple[datetime, str]:
    """The order every run sorts one node's servers in: by creation time, then by id (servers made in one second
    tie on ``created``); a server without a readable creation time sorts last."""
    return created_at(node) or datetime.max.replace(tzinfo=UTC), node.id


def deleting(node: Node) -> bool:
    """Whether the server is gone or on its way (unsubscribed: BMS is deleting it)."""
    return node.state.is_gone or node.extra.get("task_state") == "deleting"


class Observer(CachedObserver):
    """Reads servers for one driver over its cache (:class:`~metalfleet.providers.base.CachedObserver`; BMS has
    no console log, so no host keys)."""

    def __init__(self, bms: Callable[[], Any], region: str) -> None:
        super().__init__(PROVIDER, region)
        self._bms = bms

    def get(self, node_id: str) -> Node:
        """ShowBaremetalServerDetails (ListBareMetalServerDetails in the SDK); NotFoundError when BMS does not
        know the id."""
        from huaweicloudsdkbms.v1 import ListBareMetalServerDetailsRequest

        with boundary("ShowBaremetalServerDetails"):
            resp = self._bms().list_bare_metal_server_details(ListBareMetalServerDetailsRequest(server_id=node_id))
        server = _get(resp, "server")
        if server is None:
            raise NotFoundError(f"server {node_id} not found in {self.region}", provider=PROVIDER, code="NotFound")
        return self.remember(node_from_server(server, self.region))

    def servers(self, *, name: str | None = None) -> list[Node]:
        """Every listed (not deleted) server, or with ``name`` those ListBareMetalServers' ``name`` filter
        answers for it: page by page (``limit``, ``offset`` the page number from 1)."""
        from huaweicloudsdkbms.v1 import ListBareMetalServersRequest

        nodes: list[Node] = []
        page = 1
        while True:
            with boundary("ListBareMetalServers"):
                resp = self._bms().list_bare_metal_servers(ListBareMetalServersRequest(
                    name=name, limit=PAGE, offset=page))
            servers = _get(resp, "servers") or []
            for server in servers:
                node = node_from_server(server, self.region)
                if node.state != NodeState.TERMINATED:
                    nodes.append(self.remember(node))
            total = int(_get(resp, "count") or 0)
            if len(servers) < PAGE or page * PAGE >= total:
                return nodes
            page += 1

    def list_nodes(self, cluster: str) -> list[Node]:
        """The cluster's live servers: every listed server whose ``metalfleet:cluster`` tag is ``cluster``."""
        nodes = [n for n in self.servers() if n.tags.get(TAG_CLUSTER) == cluster]
        return sorted(nodes, key=lambda n: (n.tags.get(TAG_INDEX, "").zfill(8), n.id))

    def all_by_key(self, name: str, key: str) -> list[Node]:
        """Every listed server named ``name`` and ordered with idempotency key ``key`` (its ``metalfleet:key`` tag
        is :func:`~.request.key_tag` of it), oldest first (:func:`age`): more than one only when two runs raced."""
        tag = key_tag(key)
        return sorted((n for n in self.servers(name=name) if n.extra.get("server_name") == name
                       and n.tags.get(TAG_KEY) == tag), key=age)

    def by_key(self, name: str, key: str) -> Node | None:
        """The node's server: the oldest of :meth:`all_by_key` not being deleted (else the oldest), or None."""
        found = self.all_by_key(name, key)
        return next((n for n in found if not deleting(n)), found[0] if found else None)

    def states(self, ids: Sequence[str]) -> tuple[dict[str, Node], dict[str, TransientError]]:
        """Each server read now (ShowBaremetalServerDetails, a few at a time), and the ids whose read failed for
        a transient reason (throttled: BMS has no batch status call, so a poll is one call per server), with that
        error. A server BMS does not know is in neither."""
        unread: dict[str, TransientError] = {}

        def read(node_id: str) -> Node | None:
            try:
                return self.get(node_id)
            except NotFoundError:
                return None
            except TransientError as exc:
                with self._lock:
                    unread[node_id] = exc
                return None

        if len(ids) > 1:
            with ThreadPoolExecutor(max_workers=min(16, len(ids))) as pool:
                found = list(pool.map(read, ids))
        else:
            found = [read(i) for i in ids]
        return {n.id: n for n in found if n is not None}, unread

    def wait(self, node_ids: Sequence[str], state: NodeState, *, timeout: float, poll: float,
             progress: OrderProgress | None = None) -> list[Node]:
        """Poll every ``poll`` seconds until every server is in ``state``. Waiting for RUNNING fails at once
        when a server goes to ERROR or is deleted; waiting for TERMINATED counts an unknown server as gone.

        A read that is throttled (or fails for another transient reason) is no news: the server keeps its last
        known state for that round and the next poll reads it again. Nothing here retries or sleeps beyond
        ``timeout``: a storm that outlasts it ends in OperationTimeout saying how many reads failed and the last
        error (a round of reads in flight at the deadline is let finish: each is bounded by the client's timeouts).
        """
        ids = list(dict.fromkeys(node_ids))
        gone = NodeState.TERMINATED if state == NodeState.TERMINATED else NodeState.PENDING
        counts = {"reads": 0, "failed": 0}
        last: list[TransientError] = []

        def read() -> list[Node]:
            now, unread = self.states(ids)
            counts["reads"] += len(ids)
            counts["failed"] += len(unread)
            last[:] = list(unread.values())[:1] or last
            return [now[i] if i in now else
                    self.seen.get(i) or self.known(i, NodeState.UNKNOWN) if i in unread else
                    self.known(i, gone) for i in ids]

        def timed_out(nodes: Sequence[Node]) -> str:
            why = (f"; {counts['failed']} of its {counts['reads']} status reads were throttled or failed "
                   f"transiently (the last: {last[0].message}), so a server's last known state stood for those "
                   "rounds" if last else "")
            return f"servers {[n.id for n in nodes if n.state != state]} not {state.value} after {timeout:.0f}s{why}"

        return wait_for_state(ids, read, state, timeout=timeout, poll=poll, provider=PROVIDER,
                              what=f"whether servers {ids} are {state.value}", progress=progress, failed=_failed,
                              timed_out=timed_out)


def _failed(nodes: Sequence[Node]) -> None:
    """Waiting for RUNNING fails at once when a server went to ERROR or was deleted: it will never run."""
    dead = [n for n in nodes if n.state.is_gone or n.state == NodeState.ERROR]
    if dead:
        why = "; ".join(f"{n.id} is {n.extra.get('bms_status') or n.state.value}"
                        + (f" ({n.extra['state_reason']})" if n.extra.get("state_reason") else "") for n in dead)
        raise ProviderError(f"waiting for running: {why}", provider=PROVIDER, code="ServerFailed")
