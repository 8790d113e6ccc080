"""The Alibaba Cloud driver class: the contract's methods, each a few lines over the package's modules.

The SDK (``alibabacloud-ecs20140526``, signing requests with ACS3-HMAC-SHA256) is imported only when a driver
is built or used. Its own retries are off: :mod:`metalfleet.providers.retry` alone decides what to retry, and
every SDK exception leaves through :func:`~metalfleet.providers.alibaba.errors.boundary`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..base import PerThread, PlainConfig, PolledWait
from ..catalog import load_catalog
from ..contract import Subscription, refuse_release
from ..errors import ConflictError, InvalidSpecError, MetalfleetError, NotFoundError
from ..models import Node, NodeSpec, NodeState, Offering
from ..retry import step
from ..tags import TAG_ACCEPTANCE_REASON
from .errors import PROVIDER, boundary
from .network import ClusterNetwork, Net, cluster_resources, delete_cluster_resources
from .observe import Observer
from .offerings import InstanceTypes, eri_count
from .request import run_instances_request
from .subscription import conversion_token, is_subscription, subscription_of
from .validation import check_tags, validate_node_spec

__all__ = ["ENDPOINT_ENV", "AlibabaDriver"]

#: Where the driver looks for an ECS endpoint when none is given (e.g. ``http://127.0.0.1:5061``, a local
#: emulator); unset: the SDK's regional endpoint (``ecs.<region>.aliyuncs.com`` over HTTPS).
ENDPOINT_ENV = "ALIBABA_CLOUD_ECS_ENDPOINT"
#: ECS tag values hold at most this many characters.
REASON_MAX = 128
#: ModifyInstanceChargeType answers these when the conversion to pay-as-you-go was already done (a re-run after a
#: kill): the instance is read again and the release goes on if it is pay-as-you-go now.
_CONVERTED = frozenset({"InvalidInstanceChargeType.ValueNotSupported", "InvalidParameter.NotMatch"})
log = logging.getLogger(__name__)


def _snake(action: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", action.replace("VSwitch", "Vswitch")).lower()


def _no_sdk_retries() -> Any:
    """The SDK's retry options with retrying off (darabonba's ``RetryOptions(retryable=False)``: its request loop
    then makes one attempt and raises), or None for an SDK without them. ``providers/retry.py`` alone retries."""
    try:
        from darabonba.policy.retry import RetryOptions
    except ImportError:  # tea-openapi < 0.4: RuntimeOptions(autoretry=False) is its switch
        return None
    return RetryOptions({"retryable": False})


class AlibabaDriver(PlainConfig, PolledWait):
    """Order GPU bare-metal nodes (ECS Bare Metal, EBM) on Alibaba Cloud.

    Credentials come from the SDK's standard chain (``ALIBABA_CLOUD_ACCESS_KEY_ID`` /
    ``ALIBABA_CLOUD_ACCESS_KEY_SECRET``, a profile, an instance RAM role); they are never held in the driver's
    plain configuration. ``endpoint`` (or ``ALIBABA_CLOUD_ECS_ENDPOINT``) points it at another ECS API, such as
    the test emulator: ``http://127.0.0.1:PORT`` (scheme: the protocol) or ``host:port`` (HTTPS).

    Beyond the contract: ``set_tags`` (TagResources), the cluster resources (a security group and a deployment
    set per cluster), ``host_keys`` (GetInstanceConsoleOutput) and ``subscriptions`` (which nodes are PrePaid,
    until when, and what ending them early refunds).
    """

    name = PROVIDER

    def __init__(self, region: str = "cn-wulanchabu", endpoint: str | None = None, *, poll: float = 5.0,
                 connect_timeout: float = 10.0, read_timeout: float = 60.0) -> None:
        import alibabacloud_ecs20140526  # noqa: F401  (fail at construction when the alibaba extra is missing)

        self.region = region
        self.endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
        self.poll = float(poll)
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self._init_runtime()

    CONFIG = ("region", "endpoint", "poll", "connect_timeout", "read_timeout")

    def _init_runtime(self) -> None:
        self._client = PerThread(self._build_client)
        self._types = InstanceTypes(self._call, self.region, load_catalog())
        self._nets = ClusterNetwork(self._call, self.region)
        self._observer = Observer(self._call, self.region)
        self._wait = self._observer.wait

    def __repr__(self) -> str:
        where = f", endpoint={self.endpoint!r}" if self.endpoint else ""
        return f"AlibabaDriver(region={self.region!r}{where})"

    # -- plumbing --------------------------------------------------------------------------
    def _build_client(self) -> Any:
        """An SDK client (one per thread: :class:`~metalfleet.providers.base.PerThread`)."""
        with boundary("CreateClient"):
            from alibabacloud_ecs20140526.client import Client
            from alibabacloud_tea_openapi.models import Config

            config = Config(region_id=self.region, connect_timeout=int(self.connect_timeout * 1000),
                            read_timeout=int(self.read_timeout * 1000), user_agent="metalfleet")
            no_retries = _no_sdk_retries()
            if no_retries is not None:
                config.retry_options = no_retries
            ak, secret = (os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_ID"),
                          os.environ.get("ALIBABA_CLOUD_ACCESS_KEY_SECRET"))
            if ak and secret:
                config.access_key_id, config.access_key_secret = ak, secret
                token = os.environ.get("ALIBABA_CLOUD_SECURITY_TOKEN")
                if token:
                    config.security_token = token
            if self.endpoint:
                scheme, sep, host = self.endpoint.partition("://")
                config.protocol, config.endpoint = (scheme, host.rstrip("/")) if sep else ("https", scheme)
            else:
                config.endpoint = f"ecs.{self.region}.aliyuncs.com"
            return Client(config)

    def _runtime(self) -> Any:
        """Per-call options: the timeouts, and no retries (tea-openapi < 0.4 reads autoretry/max_attempts here;
        0.4 and later read the client's ``retry_options``, set in :meth:`_client`)."""
        try:
            from darabonba.runtime import RuntimeOptions
        except ImportError:  # tea-openapi < 0.4
            from alibabacloud_tea_util.models import RuntimeOptions  # type: ignore[no-redef]
        return RuntimeOptions(autoretry=False, max_attempts=1, connect_timeout=int(self.connect_timeout * 1000),
                              read_timeout=int(self.read_timeout * 1000))

    def _call(self, action: str, params: dict[str, Any], **context: Any) -> dict[str, Any]:
        """Call ECS ``action`` with ``params`` (the API's parameter names) through the SDK: the request model's
        ``from_map``, the client's ``<action>_with_options``, the response model's ``to_map``."""
        from alibabacloud_ecs20140526 import models

        request = getattr(models, f"{action}Request")().from_map(params)
        with boundary(action, **context):
            response = getattr(self._client(), f"{_snake(action)}_with_options")(request, self._runtime())
        body = getattr(response, "body", None)
        return dict(body.to_map()) if body is not None else {}

    # -- offerings and offline validation ----------------------------------------------------
    def offerings(self) -> list[Offering]:
        """The catalogue's orderable Alibaba offerings this region sells, merged with DescribeInstanceTypes."""
        return self._types.offerings()

    def validate(self, spec: NodeSpec) -> None:
        """Check ``spec`` offline (:func:`~metalfleet.providers.alibaba.validation.validate_node_spec`)."""
        validate_node_spec(spec, self.region, self._types.names, self._types.billing())

    # -- order -----------------------------------------------------------------------------
    def run_instances_request(self, spec: NodeSpec, net: Net) -> dict[str, Any]:
        """The RunInstances parameters for ``spec``: deterministic, so a replay matches its ClientToken."""
        info = self._types.info(spec.offering)
        return run_instances_request(spec, region=self.region, zone=net.zone, security_group_ids=net.security_group_ids,
                                     deployment_set_id=net.deployment_set_id, eri=eri_count(info),
                                     cards=int(info.get("NetworkCardQuantity") or 1))

    def order(self, spec: NodeSpec) -> Node:
        """Order one node: validate, make the cluster's network, RunInstances with the node's idempotency key as
        ClientToken (a repeat answers the same instance), then read it back."""
        self.validate(spec)
        net = self._nets.network(spec)
        request = self.run_instances_request(spec, net)
        try:
            resp = self._call("RunInstances", request, zone=net.zone, instance_type=spec.offering,
                              client_token=spec.idempotency_key)
        except ConflictError as exc:
            if exc.code not in ("IdempotentParameterMismatch", "IdempotenceParamNotMatch"):
                raise
            # The key's first request differs from this one (e.g. the cluster's security group was released and
            # made again). If what that request bought is gone, say so, as a replay would: the caller steps to the
            # next generation. A live one is a real conflict.
            if self._observer.find_by_key(spec.idempotency_key):
                raise
            return Node(id=spec.idempotency_key, provider=PROVIDER, region=self.region, state=NodeState.TERMINATED,
                        offering=spec.offering, zone=net.zone, name=spec.name,
                        extra={"idempotency_key": spec.idempotency_key})
        ids = list((resp.get("InstanceIdSets") or {}).get("InstanceIdSet") or [])
        if not ids:
            raise InvalidSpecError(f"RunInstances for {spec.name} answered no instance id", provider=PROVIDER,
                                   field="offering", value=spec.offering)
        node_id = str(ids[0])
        found = step(self._observer.by_ids, [node_id]).get(node_id)
        if found is None:  # a repeated ClientToken answers the instance that token bought, even released
            return dataclasses.replace(self._observer.gone(node_id), offering=spec.offering, name=spec.name,
                                       zone=net.zone)
        return found

    # -- observe ---------------------------------------------------------------------------
    def get(self, node_id: str, *, host_keys: bool = False) -> Node:
        """The instance as ECS describes it now (TERMINATED once released: ECS no longer lists it).
        ``host_keys``: also read its console for the SSH host keys when it runs and they are not known yet."""
        return self._observer.get(node_id, host_keys=host_keys)

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        """The SSH host keys the instance printed to its console at boot (cloud-init's
        ``-----BEGIN SSH HOST KEY KEYS-----`` block, from GetInstanceConsoleOutput); () while it has none."""
        return self._observer.host_keys(node_id)

    def list_nodes(self, cluster: str) -> list[Node]:
        return self._observer.list_nodes(cluster)

    # -- tags ------------------------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite ``tags`` on the instance (TagResources; its other tags are kept); NotFoundError for
        an unknown instance. The acceptance gate's free-text reason is cut to ECS's 128 characters."""
        pairs = {str(k): str(v) for k, v in tags.items()}
        reason = pairs.get(TAG_ACCEPTANCE_REASON)
        if reason is not None and len(reason) > REASON_MAX:  # the gate's free-text reason: ECS values hold 128
            pairs[TAG_ACCEPTANCE_REASON] = reason[:REASON_MAX - 3] + "..."
        check_tags(pairs, count=False)
        if not pairs:
            self.get(node_id)
            return
        self._call("TagResources", {"RegionId": self.region, "ResourceType": "instance", "ResourceId": [node_id],
                                    "Tag": [{"Key": k, "Value": v} for k, v in pairs.items()]})
        self._observer.retag(node_id, pairs)

    # -- subscriptions (SubscriptionDriver) ---------------------------------------------------
    def subscriptions(self, node_ids: Sequence[str]) -> list[Subscription]:
        """The unexpired subscriptions (PrePaid instances) among ``node_ids``, each with its ExpiredTime and what
        converting it refunds; pay-as-you-go, expired and released nodes are left out (DescribeInstances)."""
        found = self._observer.by_ids(list(dict.fromkeys(node_ids)))
        return [s for s in (subscription_of(found[i]) for i in node_ids if i in found) if s is not None]

    # -- release ---------------------------------------------------------------------------
    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        """DeleteInstances (Force: a running instance is stopped first) and, with ``wait``, until ECS no longer
        lists it. Releasing a released or unknown node is a no-op.

        ECS releases pay-as-you-go instances and expired subscriptions (with TerminateSubscription). An unexpired
        subscription (PrePaid) is a SubscriptionError naming it, its ExpiredTime and what converting refunds,
        and nothing changes, unless ``unsubscribe``: then it is converted to pay-as-you-go first
        (ModifyInstanceChargeType, with a ClientToken of its own: once, however often this is re-run) and
        released. Every step reads the instance first, so a re-run after a kill finds it converted, releasing or
        gone and finishes the job."""
        try:
            node = step(self.get, node_id)
        except NotFoundError:
            return
        if node.state == NodeState.TERMINATED:
            return
        terminate = False
        if is_subscription(node):
            sub = subscription_of(node)
            if sub is None:
                terminate = True  # its term ran out: ECS releases it as it is (so may an earlier run have)
            elif not unsubscribe:
                raise refuse_release(PROVIDER, [sub])
            else:
                terminate = self._to_pay_as_you_go(node, timeout)
        params: dict[str, Any] = {"RegionId": self.region, "InstanceId": [node_id], "Force": True, "ForceStop": True}
        if terminate:
            params["TerminateSubscription"] = True
        try:
            self._call("DeleteInstances", params)
        except NotFoundError:
            self._observer.gone(node_id)
            return
        if wait:
            self.wait([node_id], NodeState.TERMINATED, timeout=timeout)

    def _to_pay_as_you_go(self, node: Node, timeout: float) -> bool:
        """Convert subscription ``node`` to pay-as-you-go, as ModifyInstanceChargeType requires: the instance
        Running or Stopped (waited for when it is starting or stopping), AutoPay (the default, said), the fee
        details asked for (logged). True when ECS says its term has run out meanwhile (then it is released as
        an expired subscription)."""
        if node.state in (NodeState.PENDING, NodeState.STOPPING):
            target = NodeState.RUNNING if node.state == NodeState.PENDING else NodeState.STOPPED
            node = self.wait([node.id], target, timeout=timeout)[0]
        try:
            resp = self._call("ModifyInstanceChargeType", {
                "RegionId": self.region, "InstanceIds": json.dumps([node.id]), "InstanceChargeType": "PostPaid",
                "AutoPay": True, "IsDetailFee": True, "ClientToken": conversion_token(node.id)})
        except MetalfleetError as exc:
            if exc.code == "ExpiredInstance":
                return True
            if exc.code not in _CONVERTED or self.get(node.id).extra.get("charge_type") != "PostPaid":
                raise
            return False
        for fee in (resp.get("FeeOfInstances") or {}).get("FeeOfInstance") or []:
            log.info("ECS converted %s to pay-as-you-go: fee %s %s", fee.get("InstanceId"), fee.get("Fee"),
                     fee.get("Currency"))
        self._observer.remember(dataclasses.replace(node, extra={**node.extra, "charge_type": "PostPaid",
                                                                 "expired_time": None}))
        return False

    # -- cluster resources (ClusterResourcesDriver) ----------------------------------------
    def prepare_cluster(self, spec: NodeSpec) -> list[str]:
        """Make (or find, and bring in line with the spec) the cluster's deployment set and, unless the spec names
        its own groups, its security group with the spec's SSH rules. Returns :meth:`cluster_resources`."""
        self.validate(spec)
        self._nets.network(spec)
        return self.cluster_resources(spec.cluster)

    def cluster_resources(self, cluster: str) -> list[str]:
        """What metalfleet made for ``cluster`` and is still there: ``security-group:<id>`` (tagged
        ``metalfleet:cluster``) and ``deployment-set:<id>`` (described ``metalfleet:cluster=<cluster>``)."""
        return cluster_resources(self._call, self.region, cluster)

    def release_cluster_resources(self, cluster: str, *, timeout: float = 600.0) -> list[str]:
        """Delete what :meth:`cluster_resources` lists once ``cluster`` has no live node (while it has one:
        nothing, []). Returns what was deleted."""
        if step(self.list_nodes, cluster):
            return []
        self._nets.forget(cluster)
        return delete_cluster_resources(self._call, self.region, cluster, timeout=timeout, poll=self.poll)
