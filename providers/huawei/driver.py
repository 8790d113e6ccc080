"""The Huawei Cloud BMS driver class: the contract's methods, each a few lines over the package's modules.

huaweicloudsdkbms is imported only when a driver is built or used. The SDK's own retries are off
(``HttpConfig.retry_times = 0``): :mod:`metalfleet.providers.retry` alone decides, and every SDK exception
leaves through :func:`~metalfleet.providers.huawei.errors.boundary` as a :mod:`metalfleet.providers.errors` error.

Credentials: ``ak`` / ``sk`` or the SDK's variables ``HUAWEICLOUD_SDK_AK`` / ``HUAWEICLOUD_SDK_SK``; the project
id (``project_id`` or ``HUAWEICLOUD_SDK_PROJECT_ID``) is required: without it the SDK first asks IAM for it.
A pickled driver (a Pulumi dynamic provider's state) holds neither key: the unpickled one reads the variables.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..catalog import load_catalog
from ..contract import OrderProgress
from ..errors import AuthError, InvalidSpecError, NotFoundError, OperationTimeout, TransientError
from ..models import Node, NodeSpec, NodeState, Offering
from ..tags import TAG_ACCEPTANCE_REASON
from .errors import PROVIDER, boundary
from .jobs import follow_job
from .observe import Observer
from .offerings import Flavors
from .request import create_request, server_name
from .validation import check_tags, tag_text, validate_node_spec

__all__ = ["ENDPOINT_ENV", "HuaweiDriver"]

#: Points every driver built without ``endpoint`` at another BMS endpoint (as AWS_ENDPOINT_URL does for boto3).
ENDPOINT_ENV = "METALFLEET_HUAWEI_BMS_ENDPOINT"


class HuaweiDriver:
    """Order bare-metal GPU and Ascend servers on Huawei Cloud BMS.

    ``endpoint`` (or ``METALFLEET_HUAWEI_BMS_ENDPOINT``) points it at another BMS endpoint, such as the test
    emulator (default ``https://bms.<region>.myhuaweicloud.com``). ``lost_answer_grace``: after a create call
    whose answer was lost (a 5xx or a dropped connection), how long to look for the server it may have ordered
    before failing with the transient error (then retried: the retry looks first, too). ``job_timeout``: how long
    a create job may take to name its server.

    BMS has no client token. Ordering is idempotent through the node's identity: a deterministic name and the
    ``metalfleet:key`` tag (the idempotency key), looked up before every create. Beyond the contract: ``set_tags``
    (:class:`~metalfleet.providers.contract.TaggingDriver`) and ``host_keys`` (always (): BMS has no console log).
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
        poll: float = 5.0,
        lost_answer_grace: float = 60.0,
        job_timeout: float = 900.0,
        pool_size: int = 64,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        import huaweicloudsdkbms  # noqa: F401  (fail at construction when the huawei extra is missing)

        self.region = region
        self.project_id = project_id or os.environ.get("HUAWEICLOUD_SDK_PROJECT_ID")
        self.endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or f"https://bms.{region}.myhuaweicloud.com"
        self.poll = float(poll)
        self.lost_answer_grace = float(lost_answer_grace)
        self.job_timeout = float(job_timeout)
        self.pool_size = int(pool_size)
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self._ak, self._sk = ak, sk
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._client: Any = None
        self._lock = threading.Lock()
        self._flavors = Flavors(self._bms, self.region, load_catalog())
        self._observer = Observer(self._bms, self.region)

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("region", "project_id", "endpoint", "poll", "lost_answer_grace",
                                              "job_timeout", "pool_size", "connect_timeout", "read_timeout")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._ak = self._sk = None
        self._init_runtime()

    def __repr__(self) -> str:
        return f"HuaweiDriver(region={self.region!r}, endpoint={self.endpoint!r})"

    # -- plumbing --------------------------------------------------------------------------
    def _bms(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build_client()
        return self._client

    def _build_client(self) -> Any:
        from huaweicloudsdkbms.v1 import BmsClient
        from huaweicloudsdkcore.auth.credentials import BasicCredentials
        from huaweicloudsdkcore.http.http_config import HttpConfig

        ak = self._ak or os.environ.get("HUAWEICLOUD_SDK_AK")
        sk = self._sk or os.environ.get("HUAWEICLOUD_SDK_SK")
        if not ak or not sk:
            raise AuthError("no Huawei Cloud credentials: set HUAWEICLOUD_SDK_AK and HUAWEICLOUD_SDK_SK (or pass "
                            "ak/sk)", provider=PROVIDER, code="NoCredentials")
        if not self.project_id:
            raise AuthError(f"no Huawei Cloud project id for {self.region}: set HUAWEICLOUD_SDK_PROJECT_ID (or pass "
                            "project_id); without it the SDK would ask IAM first", provider=PROVIDER,
                            code="NoProjectId")
        config = HttpConfig(timeout=(self.connect_timeout, self.read_timeout), retry_times=0,
                            pool_connections=self.pool_size, pool_maxsize=self.pool_size,
                            user_agent="metalfleet")
        with boundary("CreateClient"):
            return (BmsClient.new_builder()
                    .with_credentials(BasicCredentials(ak, sk, self.project_id))
                    .with_endpoints([self.endpoint])
                    .with_http_config(config)
                    .build())

    # -- offerings and offline validation ----------------------------------------------------
    def offerings(self) -> list[Offering]:
        """The catalogue's orderable Huawei offerings this region lists (ListBaremetalFlavorDetailExtends)."""
        return self._flavors.offerings()

    def validate(self, spec: NodeSpec) -> None:
        """Check ``spec`` offline (:func:`~metalfleet.providers.huawei.validation.validate_node_spec`)."""
        validate_node_spec(spec, self.region, self._flavors.names, self._flavors.billing())

    # -- order -----------------------------------------------------------------------------
    def create_request(self, spec: NodeSpec) -> dict[str, Any]:
        """The CreateBareMetalServers body for ``spec`` (deterministic)."""
        return create_request(spec)

    def order(self, spec: NodeSpec) -> Node:
        """Order one server: validate, look the node's key up (a server found is the answer: nothing is
        bought twice), CreateBareMetalServers, then follow its job until it names the server.

        A create whose answer is lost may still have been taken: the key is looked up again for
        ``lost_answer_grace`` seconds before the transient error goes to the caller's retry (which looks first).
        """
        from huaweicloudsdkbms.v1 import CreateBareMetalServersRequest

        self.validate(spec)
        found = self._observer.by_key(spec.idempotency_key)
        if found is not None:
            return found
        try:
            with boundary("CreateBareMetalServers", zone=spec.zone, flavor=spec.offering):
                resp = self._bms().create_bare_metal_servers(CreateBareMetalServersRequest(body=create_request(spec)))
        except TransientError:
            found = self._await_key(spec, self.lost_answer_grace)
            if found is not None:
                return found
            raise
        job_id = getattr(resp, "job_id", None)
        if job_id:
            job = follow_job(self._bms, str(job_id), timeout=self.job_timeout, poll=self.poll, zone=spec.zone,
                             flavor=spec.offering, until=lambda j: bool(j.server_ids))
            if job.server_ids:
                return self._observer.get(job.server_ids[0])
        # a prePaid order answers an order id only: its server shows up under the node's key
        found = self._await_key(spec, self.job_timeout)
        if found is None:
            raise OperationTimeout(f"server {server_name(spec)} (order {getattr(resp, 'order_id', None)}) did not "
                                   f"appear within {self.job_timeout:.0f}s", provider=PROVIDER, code="NoServer")
        return found

    def _await_key(self, spec: NodeSpec, seconds: float) -> Node | None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                found = self._observer.by_key(spec.idempotency_key)
            except TransientError:
                found = None
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(min(self.poll, max(0.0, deadline - time.monotonic())))

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

    def wait(
        self,
        node_ids: Sequence[str],
        state: NodeState = NodeState.RUNNING,
        *,
        timeout: float = 1800.0,
        poll: float | None = None,
        progress: OrderProgress | None = None,
    ) -> list[Node]:
        """Poll until every server is in ``state`` (see :meth:`Observer.wait`)."""
        return self._observer.wait(node_ids, state, timeout=timeout, poll=self.poll if poll is None else float(poll),
                                   progress=progress)

    # -- tags ------------------------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite ``tags`` on the server (BatchCreateBaremetalServerTags; its other tags are kept);
        NotFoundError for an unknown server. The acceptance gate's reason (free text) is written in the characters
        Huawei allows in a tag value, cut to 255; every other tag is checked as at order time."""
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
        seen = self._observer.seen.get(node_id)
        if seen is not None:
            self._observer.remember(dataclasses.replace(seen, tags={**seen.tags, **pairs}))

    # -- release ---------------------------------------------------------------------------
    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0) -> None:
        """DeleteBaremetalServer (its volumes and any EIP with it), then follow the job; a gone server is a no-op.
        A prePaid server cannot be deleted through BMS (it is unsubscribed in the billing centre): that refusal
        is an InvalidSpecError naming ``capacity.billing``."""
        from huaweicloudsdkbms.v1 import DeleteBaremetalServerRequest

        try:
            node = self.get(node_id)
        except NotFoundError:
            return
        if node.state == NodeState.TERMINATED:
            return
        body = {"servers": [{"id": node_id}], "delete_publicip": True, "delete_volume": True}
        try:
            with boundary("DeleteBaremetalServer"):
                resp = self._bms().delete_baremetal_server(DeleteBaremetalServerRequest(body=body))
        except NotFoundError:
            return
        except InvalidSpecError as exc:
            if node.extra.get("charging_mode") in ("1", "prePaid"):
                raise InvalidSpecError(f"server {node_id} is prePaid: BMS deletes only pay-per-use servers; "
                                       f"unsubscribe it in the billing centre ({exc})", field="capacity.billing",
                                       value="prePaid", provider=PROVIDER, code=exc.code,
                                       request_id=exc.request_id) from exc
            raise
        if wait and getattr(resp, "job_id", None):
            follow_job(self._bms, str(resp.job_id), timeout=timeout, poll=self.poll)
        if wait:
            self.wait([node_id], NodeState.TERMINATED, timeout=timeout)
