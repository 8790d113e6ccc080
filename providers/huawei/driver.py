"""The Huawei Cloud BMS driver class: the contract's methods, each a few lines over the package's modules.

huaweicloudsdkbms and huaweicloudsdkbss are imported only when a driver is built or used. The SDKs' own retries
are off (``HttpConfig.retry_times = 0``, and :mod:`.transport` replaces the urllib3 Retry the SDK mounts for
429s anyway): :mod:`metalfleet.providers.retry` alone decides, and every SDK exception leaves through
:func:`~metalfleet.providers.huawei.errors.boundary` as a :mod:`metalfleet.providers.errors` error.

Credentials: ``ak`` / ``sk`` or the SDK's variables ``HUAWEICLOUD_SDK_AK`` / ``HUAWEICLOUD_SDK_SK``; the project
id (``project_id`` or ``HUAWEICLOUD_SDK_PROJECT_ID``) is required (without it the SDK first asks IAM for it), and
so are, for ordering and releasing, the account's domain id (``domain_id`` or ``HUAWEICLOUD_SDK_DOMAIN_ID``: BSS
is a global service, signed for the account) and the IAM user id (``user_id`` or ``METALFLEET_HUAWEI_USER_ID``:
CreateBareMetalServers requires ``metadata.op_svc_userid``). A pickled driver (a Pulumi dynamic provider's state)
holds neither key: the unpickled one reads the variables.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..base import Lazy, PlainConfig, PolledWait
from ..catalog import load_catalog
from ..contract import Subscription, refuse_release
from ..errors import (
    AuthError,
    ConflictError,
    MetalfleetError,
    NotFoundError,
    OperationTimeout,
    ProviderError,
    RateLimitedError,
    TransientError,
)
from ..models import Node, NodeSpec, NodeState, Offering
from ..tags import TAG_ACCEPTANCE_REASON
from . import transport
from .billing import BSS_ENDPOINT, BSS_ENDPOINT_ENV, CANCELLED, COMPLETED, Billing, bss_client, subscription_of
from .errors import PROVIDER, UNSUBSCRIBED, boundary, translate
from .jobs import show_job
from .observe import Observer, age, created_at, deleting
from .offerings import Flavors
from .request import create_request, server_name
from .validation import check_tags, tag_text, validate_node_spec

__all__ = ["ENDPOINT_ENV", "USER_ID_ENV", "HuaweiDriver"]

#: Points every driver built without ``endpoint`` at another BMS endpoint (as AWS_ENDPOINT_URL does for boto3).
ENDPOINT_ENV = "METALFLEET_HUAWEI_BMS_ENDPOINT"
#: The IAM user id CreateBareMetalServers requires (``metadata.op_svc_userid``), when ``user_id`` is not given.
USER_ID_ENV = "METALFLEET_HUAWEI_USER_ID"
#: ServerDetails ``OS-EXT-STS:task_state`` of a server being deleted (after its unsubscription).
DELETING = "deleting"
#: ``ServerDetails.created`` is to the second (the SDK model: ISO 8601, "YYYY-MM-DDTHH:MM:SSZ"), so
#: the read that decides which of a node's servers is the oldest comes this long after the server was first seen:
#: one made later can then only sort after it.
SETTLE = 1.25
#: How far this clock may be from the API gateway's: a request's X-Sdk-Date more than 15 minutes off is refused
#: (the gateway's signing rule). A server older than this (plus :data:`SETTLE`) by this clock is settled at once.
CLOCK_SKEW = 15 * 60.0


def _oldest_live(servers: Sequence[Node]) -> Node:
    """The oldest of a node's servers (sorted by :func:`~.observe.age`) that is not being deleted, else the
    oldest."""
    return next((n for n in servers if not deleting(n)), servers[0])


class HuaweiDriver(PlainConfig, PolledWait):
    """Order yearly/monthly bare-metal GPU and Ascend servers on Huawei Cloud BMS, and end them through BSS.

    ``endpoint`` (or ``METALFLEET_HUAWEI_BMS_ENDPOINT``) points it at another BMS endpoint, such as the test
    emulator (default ``https://bms.<region>.myhuaweicloud.com``); ``bss_endpoint`` (or
    ``METALFLEET_HUAWEI_BSS_ENDPOINT``) at another BSS endpoint (default the Chinese site's,
    ``https://bss.myhuaweicloud.com``; an international-site account uses ``https://bss-intl.myhuaweicloud.com``).
    ``lost_answer_grace``: after a create call whose answer was lost (a 5xx or a dropped connection), how long to
    look for the server it may have ordered before failing with the transient error (then retried: the retry
    looks first, too). ``job_timeout``: how long an order may take to be paid and its server to exist.

    BMS has no client token. Ordering is idempotent through the node's identity, found on documented ground: the
    ListBareMetalServers ``name`` filter with the deterministic server name, and the ``metalfleet:key`` tag
    compared client-side, looked up before every create. Runs that race (two machines ordering one cluster)
    converge: after a create, and whenever a lookup finds the node, the node is re-read by its key and the oldest
    live server (by ``created``, then by id: every run picks the same one) is the node; every younger one, a
    duplicate made seconds ago, is unsubscribed through BSS, never the oldest (:meth:`_converge`). Nothing is
    retried here: the SDK's HTTP layer retries nothing (:mod:`.transport`), wait loops treat a throttled read
    as no news until their own timeout, and everything else is :mod:`metalfleet.providers.retry`'s.

    Beyond the contract: ``subscriptions`` (:class:`~metalfleet.providers.contract.SubscriptionDriver`: every
    server is one), ``set_tags`` (:class:`~metalfleet.providers.contract.TaggingDriver`) and ``host_keys``
    (always (): no console log).
    """

    name = PROVIDER

    def __init__(
        self,
        region: str = "cn-southwest-2",
        project_id: str | None = None,
        endpoint: str | None = None,
        ak: str | None = None,
        sk: str | None = None,
        *,
        domain_id: str | None = None,
        user_id: str | None = None,
        bss_endpoint: str | None = None,
        poll: float = 5.0,
        lost_answer_grace: float = 60.0,
        job_timeout: float = 900.0,
        pool_size: int = 64,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        import huaweicloudsdkbms  # noqa: F401  (fail at construction when the huawei extra is missing)
        import huaweicloudsdkbss  # noqa: F401

        self.region = region
        self.project_id = project_id or os.environ.get("HUAWEICLOUD_SDK_PROJECT_ID")
        self.domain_id = domain_id or os.environ.get("HUAWEICLOUD_SDK_DOMAIN_ID")
        self.user_id = user_id or os.environ.get(USER_ID_ENV)
        self.endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or f"https://bms.{region}.myhuaweicloud.com"
        self.bss_endpoint = bss_endpoint or os.environ.get(BSS_ENDPOINT_ENV) or BSS_ENDPOINT
        self.poll = float(poll)
        self.lost_answer_grace = float(lost_answer_grace)
        self.job_timeout = float(job_timeout)
        self.pool_size = int(pool_size)
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self._ak, self._sk = ak, sk
        self._init_runtime()

    CONFIG = ("region", "project_id", "domain_id", "user_id", "endpoint", "bss_endpoint", "poll",
              "lost_answer_grace", "job_timeout", "pool_size", "connect_timeout", "read_timeout")

    def _init_runtime(self) -> None:
        self._bms = Lazy(self._build_client)
        self._bss = Lazy(self._build_bss_client)
        self._flavors = Flavors(self._bms, self.region, load_catalog())
        self._observer = Observer(self._bms, self.region)
        self._wait = self._observer.wait
        self._billing = Billing(self._bss)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Neither key travels: the unpickled driver reads the variables (as it does for what was not given)."""
        self._ak = self._sk = None
        super().__setstate__({
            **state,
            "domain_id": state.get("domain_id") or os.environ.get("HUAWEICLOUD_SDK_DOMAIN_ID"),
            "user_id": state.get("user_id") or os.environ.get(USER_ID_ENV),
            "bss_endpoint": state.get("bss_endpoint") or os.environ.get(BSS_ENDPOINT_ENV) or BSS_ENDPOINT,
        })

    def __repr__(self) -> str:
        return f"HuaweiDriver(region={self.region!r}, endpoint={self.endpoint!r})"

    # -- plumbing --------------------------------------------------------------------------
    def _keys(self) -> tuple[str, str]:
        ak = self._ak or os.environ.get("HUAWEICLOUD_SDK_AK")
        sk = self._sk or os.environ.get("HUAWEICLOUD_SDK_SK")
        if not ak or not sk:
            raise AuthError("no Huawei Cloud credentials: set HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (or pass "
                            "ak/sk)", provider=PROVIDER, code="NoCredentials")
        return ak, sk

    def _config(self) -> Any:
        from huaweicloudsdkcore.http.http_config import HttpConfig

        return HttpConfig(timeout=(self.connect_timeout, self.read_timeout), retry_times=0,
                          pool_connections=self.pool_size, pool_maxsize=self.pool_size, user_agent="metalfleet")

    def _build_client(self) -> Any:
        from huaweicloudsdkbms.v1 import BmsClient
        from huaweicloudsdkcore.auth.credentials import BasicCredentials

        ak, sk = self._keys()
        if not self.project_id:
            raise AuthError(f"no Huawei Cloud project id for {self.region}: set HUAWEICLOUD_SDK_PROJECT_ID (or pass "
                            "project_id); without it the SDK would ask IAM first", provider=PROVIDER,
                            code="NoProjectId")
        with boundary("CreateClient"):
            return transport.build(BmsClient.new_builder()
                                   .with_credentials(BasicCredentials(ak, sk, self.project_id))
                                   .with_endpoints([self.endpoint]), self._config())

    def _build_bss_client(self) -> Any:
        ak, sk = self._keys()
        return bss_client(ak, sk, self.domain_id, self.bss_endpoint, self._config(),
                          why="BSS, which bills and ends yearly/monthly servers,")

    def _user(self) -> str:
        if not self.user_id:
            raise AuthError(f"no Huawei Cloud IAM user id: set {USER_ID_ENV} (or pass user_id; the console's My "
                            "Credentials page shows it): CreateBareMetalServers requires it as metadata.op_svc_userid",
                            provider=PROVIDER, code="NoUserId")
        return self.user_id

    # -- offerings and offline validation ----------------------------------------------------
    def offerings(self) -> list[Offering]:
        """The catalogue's orderable Huawei offerings this region lists (ListBaremetalFlavorDetailExtends)."""
        return self._flavors.offerings()

    def validate(self, spec: NodeSpec) -> None:
        """Check ``spec`` offline (:func:`~metalfleet.providers.huawei.validation.validate_node_spec`): among the
        rest, ``capacity.billing`` must be one BMS sells (yearly/monthly only)."""
        validate_node_spec(spec, self.region, self._flavors.names)

    # -- order -----------------------------------------------------------------------------
    def create_request(self, spec: NodeSpec) -> dict[str, Any]:
        """The CreateBareMetalServers body for ``spec`` (deterministic)."""
        return create_request(spec, self._user())

    def order(self, spec: NodeSpec) -> Node:
        """Order one yearly/monthly server: validate, look the node up (a server found is the answer: nothing is
        bought twice), CreateBareMetalServers, then wait until its BSS order is completed (paid from the balance
        and its server opened) and the server exists, following the BMS job to its id; then converge
        (:meth:`_converge`): when two runs raced, the oldest server is the node and the other is unsubscribed.

        A throttled create (429) was refused before it was taken: its error goes straight to the caller's retry.
        A create whose answer is lost (a 5xx, a dropped connection, a read timeout) may still have been taken: the
        node is looked up again for ``lost_answer_grace`` seconds before the transient error goes to the caller's
        retry (which looks first).
        """
        from huaweicloudsdkbms.v1 import CreateBareMetalServersRequest

        self.validate(spec)
        found = self._observer.all_by_key(server_name(spec), spec.idempotency_key)
        if found:
            return self._converge(spec, _oldest_live(found), time.monotonic(), found)
        body = self.create_request(spec)
        try:
            with boundary("CreateBareMetalServers", zone=spec.zone, flavor=spec.offering):
                resp = self._bms().create_bare_metal_servers(CreateBareMetalServersRequest(body=body))
        except RateLimitedError:
            raise  # the gateway refused it: nothing was ordered, so there is nothing to look for
        except TransientError:
            lost = self._await_key(spec, self.lost_answer_grace)
            if not lost:
                raise
            return self._converge(spec, _oldest_live(lost), time.monotonic(), lost)
        answered = time.monotonic()
        mine = self._await_order(server_name(spec), getattr(resp, "order_id", None), getattr(resp, "job_id", None),
                                 zone=spec.zone, flavor=spec.offering)
        return self._converge(spec, mine, answered)

    def _converge(self, spec: NodeSpec, mine: Node, seen_at: float, listing: Sequence[Node] | None = None) -> Node:
        """The node's one server, when ``mine`` (the server this call made or found, ``seen_at`` the monotonic
        time it was first seen, ``listing`` the lookup that found it) may have a twin another run made at once.

        BMS takes no client token, so two runs ordering one node can each create a server. Every run re-reads the
        node by its key and keeps the oldest live server (by ``created``, then by id: every run sorts alike);
        each younger one, a duplicate made seconds ago, is unsubscribed through BSS (once its order is completed:
        BSS holds no term before), never the oldest. ``created`` is to the second, so a server made in the same
        second as ``mine`` but after the re-read could sort before it: the deciding read therefore comes at least
        :data:`SETTLE` seconds after ``mine`` was seen, unless ``mine`` is older than :data:`CLOCK_SKEW` by this
        clock (a server made from now on sorts after it). A re-read that is throttled raises: the caller's retry
        orders again, finds the servers and converges."""
        old = created_at(mine)
        decided = old is not None and old < datetime.now(UTC) - timedelta(seconds=CLOCK_SKEW + SETTLE)
        if not decided:
            time.sleep(max(0.0, seen_at + SETTLE - time.monotonic()))
        if not decided or listing is None:
            listing = self._observer.all_by_key(server_name(spec), spec.idempotency_key)
        servers = {n.id: n for n in listing}
        servers.setdefault(mine.id, mine)  # a listing that lags its create still counts this server
        live = sorted((n for n in servers.values() if not deleting(n)), key=age)
        if not live:  # every server of the node is being deleted (released): the oldest says so
            return min(servers.values(), key=age)
        keep, duplicates = live[0], live[1:]
        for twin in duplicates:
            self._release_duplicate(twin)
        return self._settled(keep)

    def _release_duplicate(self, twin: Node) -> None:
        """Unsubscribe a server that duplicates an older one of the same node (a racing run's create, seconds
        old): once its order is completed (BSS lists no term to unsubscribe before); one that turns out gone or
        being deleted already (the other run released it) is left alone. This needs no ``release_subscriptions``
        opt-in: the duplicate is this same order bought twice minutes ago (BSS refunds an unsubscription within 5
        days in full), and keeping it would bill the node twice for its whole term."""
        order_id = twin.extra.get("order_id")
        if twin.state == NodeState.PENDING and order_id:
            twin = self._await_order(twin.name or twin.id, str(order_id), None, server_id=twin.id)
        if not deleting(twin):
            self._unsubscribe(twin)

    def _settled(self, node: Node) -> Node:
        """A server found by its key, once its order is completed (a re-run can find it while it is paid for)."""
        order_id = node.extra.get("order_id")
        if node.state != NodeState.PENDING or not order_id:
            return node
        return self._await_order(node.name or node.id, str(order_id), None, server_id=node.id)

    def _await_order(self, name: str, order_id: str | None, job_id: str | None, *, server_id: str | None = None,
                     zone: str | None = None, flavor: str | None = None) -> Node:
        """Poll until the BSS order is completed and the server's id is known (from the job's sub-jobs, else from
        the order's resources): the server as read then. A cancelled order or a failed job that named no server is
        raised as its error. A poll that is throttled (or fails transiently) is no news: the next poll asks again,
        until ``job_timeout``, when OperationTimeout says what was known and the last such error (never the
        transient error itself, which would make the caller's retry wait a whole ``job_timeout`` again)."""
        deadline = time.monotonic() + self.job_timeout
        completed = order_id is None
        status: int | None = None
        last: MetalfleetError | None = None
        while True:
            try:
                if job_id and server_id is None:
                    job = show_job(self._bms(), job_id)
                    if job.server_ids:
                        server_id = job.server_ids[0]
                    elif job.status == "FAIL":
                        raise translate(job.error_code or "BMS.0006", job.fail_reason or f"job {job_id} failed", 400,
                                        f"job {job_id} ({job.job_type})", zone=zone, flavor=flavor)
                if order_id and not completed:
                    status = self._billing.order_status(order_id)
                    if status == CANCELLED:
                        raise ProviderError(f"the BSS order {order_id} of server {name} was cancelled",
                                            provider=PROVIDER, code="OrderCancelled")
                    completed = status == COMPLETED
                if completed and server_id is None and order_id:
                    opened = self._billing.order_resources(order_id)
                    server_id = opened[0].resource_id if opened else None
                if completed and server_id:
                    return self._observer.get(server_id)
                last = None
            except MetalfleetError as exc:
                if not exc.retryable:
                    raise
                last = exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                why = f"; its last poll failed: {last.message}" if last is not None else ""
                raise OperationTimeout(f"server {name}: its BSS order {order_id} is {status} (5 is completed) and "
                                       f"its server {'is ' + server_id if server_id else 'not known'} after "
                                       f"{self.job_timeout:.0f}s{why}", provider=PROVIDER, code="OrderNotCompleted")
            time.sleep(min(self.poll, remaining))

    def _await_key(self, spec: NodeSpec, seconds: float) -> list[Node]:
        """Look the node up for ``seconds`` (after a create whose answer was lost): its servers, oldest first, or
        [] (a throttled lookup is no news)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                found = self._observer.all_by_key(server_name(spec), spec.idempotency_key)
            except TransientError:
                found = []
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            time.sleep(min(self.poll, remaining))

    # -- observe ---------------------------------------------------------------------------
    def get(self, node_id: str) -> Node:
        """The server as BMS describes it now (DELETED for a while after release); NotFoundError if unknown."""
        return self._observer.get(node_id)

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        """Always (): BMS's API offers no console log to read the host keys from; bootstrap verifies hosts by
        known_hosts or pins them at first contact (``ssh.pin_on_first_contact``)."""
        return ()

    def list_nodes(self, cluster: str) -> list[Node]:
        return self._observer.list_nodes(cluster)

    # -- subscriptions -----------------------------------------------------------------------
    def subscriptions(self, node_ids: Sequence[str]) -> list[Subscription]:
        """The yearly/monthly terms BSS holds among ``node_ids`` (ListPayPerUseCustomerResources by resource id):
        each with its expiry and what unsubscribing refunds as far as the reference says before the fact."""
        held = self._billing.resources(list(node_ids))
        return [subscription_of(held[i]) for i in dict.fromkeys(node_ids) if i in held]

    # -- tags ------------------------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite ``tags`` on the server (BatchCreateBaremetalServerTags; its other tags are kept);
        NotFoundError for an unknown server. The acceptance gate's reason (free text) is written in the characters
        Huawei allows in a tag value, cut to 43; every tag is checked as at order time."""
        from huaweicloudsdkbms.v1 import BatchCreateBaremetalServerTagsRequest

        pairs = {str(k): str(v) for k, v in tags.items()}
        if TAG_ACCEPTANCE_REASON in pairs:  # the gate's free text, in the characters Huawei allows in a tag
            pairs[TAG_ACCEPTANCE_REASON] = tag_text(pairs[TAG_ACCEPTANCE_REASON])
        check_tags(pairs, count=False)
        if not pairs:
            self.get(node_id)
            return
        body = {"action": "create", "tags": [{"key": k, "value": v} for k, v in pairs.items()]}
        with boundary("BatchCreateBaremetalServerTags"):
            self._bms().batch_create_baremetal_server_tags(
                BatchCreateBaremetalServerTagsRequest(server_id=node_id, body=body))
        self._observer.retag(node_id, pairs)

    # -- release ---------------------------------------------------------------------------
    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        """End a server: it is a yearly/monthly term, so only with ``unsubscribe`` (otherwise SubscriptionError,
        naming its expiry and refund, and nothing changes), by unsubscribing it through BSS
        (CancelResourcesSubscription, its EVS disks with it); BMS then deletes it. With ``wait``, return once it is
        gone. Idempotent and safe to re-run after a kill at any point: a gone server is a no-op, one being deleted
        is waited for, and an unsubscription BSS already took (in progress, or the resource already ended) is not
        an error."""
        try:
            node = self.get(node_id)
        except NotFoundError:
            return
        if node.state == NodeState.TERMINATED:
            return
        if node.extra.get("task_state") != DELETING:
            if not unsubscribe:
                subs = self.subscriptions([node_id])
                if subs:
                    raise refuse_release(PROVIDER, subs)
                self._not_subscribed(node)
            elif not self._unsubscribe(node):
                return
        if wait:
            self.wait([node_id], NodeState.TERMINATED, timeout=timeout)

    def _unsubscribe(self, node: Node) -> bool:
        """CancelResourcesSubscription of ``node``; False when the server turned out to be gone already."""
        try:
            self._billing.unsubscribe(node.id)
            return True
        except (NotFoundError, ConflictError) as exc:
            if exc.code not in UNSUBSCRIBED:
                raise
            try:
                again = self.get(node.id)
            except NotFoundError:
                return False
            if again.state == NodeState.TERMINATED:
                return False
            if exc.code == "CBC.99003012" and again.extra.get("task_state") != DELETING:
                self._not_subscribed(again)  # BSS knows no such resource and BMS is not deleting the server
            return True

    def _not_subscribed(self, node: Node) -> None:
        """A live server BSS holds no term for and BMS is not deleting: raise why it cannot be released."""
        if node.state == NodeState.PENDING:
            raise TransientError(f"server {node.id} is still being opened: its order "
                                 f"{node.extra.get('order_id') or '(unknown)'} is not completed, so BSS lists no "
                                 "term to unsubscribe yet", provider=PROVIDER, code="OrderNotCompleted")
        raise ProviderError(f"server {node.id} ({node.name}) is not a yearly/monthly resource BSS lists: BMS deletes "
                            "no yearly/monthly server and the Huawei driver releases servers only by unsubscribing "
                            "them, so it cannot release this one", provider=PROVIDER, code="NotASubscription")
