"""Yearly/monthly (prePaid) servers in BSS, Huawei Cloud's billing API: their orders, their terms, ending them.

BMS creates prePaid servers only, and never deletes one: a prePaid server is ended by unsubscribing it through
BSS, as the Huawei Terraform provider does (CancelResourcesSubscription with the server's id, then waiting for
BMS to delete it). The calls, each in the BSS reference (https://support.huaweicloud.com/api-oce/):

* ShowCustomerOrderDetails: an order's status (``5`` completed, ``4`` cancelled, ``6`` pending payment, ...);
* ListPayPerUseCustomerResources: the customer's yearly/monthly resources (by ``resource_ids``, at most 50, or
  by ``order_id``; ``only_main_resource`` 1 leaves out the EVS disks that are a server's sub-resources), each with
  its ``effective_time`` and ``expire_time``;
* CancelResourcesSubscription: unsubscribe (``unsubscribe_type`` 1: the resource and its renewed terms, its
  sub-resources with it); at most 10 resource ids a call.

BSS is a global service: ``GlobalCredentials`` (the account's domain id as ``X-Domain-Id``), one endpoint per
site (``https://bss.myhuaweicloud.com``; the international site's is ``https://bss-intl.myhuaweicloud.com``).
What unsubscribing refunds BSS says only afterwards (ShowRefundOrderDetails of the unsubscribe order); before,
the reference says this much: an unsubscription within 5 days of purchase is refunded in full
("该接口支持5天无理由全额退订").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ..contract import Subscription
from ..errors import AuthError
from . import transport
from .errors import PROVIDER, boundary

__all__ = ["BSS_ENDPOINT", "BSS_ENDPOINT_ENV", "CANCELLED", "COMPLETED", "FULL_REFUND_DAYS", "HOW", "IN_FORCE",
           "MAX_QUERY_IDS", "PENDING_PAYMENT", "Billing", "Resource", "subscription_of"]

BSS_ENDPOINT = "https://bss.myhuaweicloud.com"
#: Points a driver or price inquiry built without a BSS endpoint at another one (the test emulator).
BSS_ENDPOINT_ENV = "METALFLEET_HUAWEI_BSS_ENDPOINT"
#: ShowCustomerOrderDetails ``order_info.status``: 5 completed, 4 cancelled, 6 pending payment.
COMPLETED, CANCELLED, PENDING_PAYMENT = 5, 4, 6
#: Resource states that are still a term the customer holds: 2 in use, 4 frozen, 5 expired (in its grace period).
IN_FORCE = frozenset({2, 4, 5})
#: ListPayPerUseCustomerResources takes at most 50 resource ids; it answers 10 records a page by default.
MAX_QUERY_IDS, PAGE = 50, 10
#: An unsubscription this many days after purchase at most is refunded in full.
FULL_REFUND_DAYS = 5
HOW = ("Huawei BMS: each is unsubscribed through BSS (CancelResourcesSubscription, its EVS disks with it), then BMS "
       "deletes it")
_TIME = "%Y-%m-%dT%H:%M:%SZ"


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


@dataclass(frozen=True)
class Resource:
    """One ListPayPerUseCustomerResources record (an OrderInstanceV2), as plain data."""

    resource_id: str
    name: str | None
    status: int | None
    is_main: bool
    effective_time: str | None
    expire_time: str | None
    spec_code: str | None = None


def _resource(raw: Any) -> Resource:
    status = _get(raw, "status")
    return Resource(resource_id=str(_get(raw, "resource_id") or ""), name=_get(raw, "resource_name"),
                    status=int(status) if status is not None else None,
                    is_main=int(_get(raw, "is_main_resource") or 0) == 1,
                    effective_time=_get(raw, "effective_time"), expire_time=_get(raw, "expire_time"),
                    spec_code=_get(raw, "resource_spec_code"))


def _parse(stamp: str | None) -> datetime | None:
    try:
        return datetime.strptime(str(stamp), _TIME).replace(tzinfo=UTC) if stamp else None
    except ValueError:
        return None


def subscription_of(resource: Resource, now: datetime | None = None) -> Subscription:
    """The neutral :class:`Subscription` of a server's BSS record: its expiry, and what unsubscribing refunds as
    far as the reference says before the fact."""
    now = now or datetime.now(UTC)
    bought = _parse(resource.effective_time)
    if bought is not None and now - bought <= timedelta(days=FULL_REFUND_DAYS):
        refund = (f"unsubscribing now refunds it in full (bought {resource.effective_time}: within "
                  f"{FULL_REFUND_DAYS} days, BSS's full-refund unsubscription)")
    else:
        refund = ("unsubscribing refunds the unused term less fees, as BSS's unsubscription rules say; BSS states "
                  "the amount only afterwards (ShowRefundOrderDetails of the unsubscribe order)")
    return Subscription(node_id=resource.resource_id, charge_type="yearly/monthly (prePaid)",
                        expires_at=resource.expire_time, refund=refund, how=HOW, name=resource.name)


class Billing:
    """The BSS calls of one driver (``bss`` builds the BssClient on first use)."""

    def __init__(self, bss: Callable[[], Any]) -> None:
        self._bss = bss

    def order_status(self, order_id: str) -> int | None:
        """ShowCustomerOrderDetails: the order's status (:data:`COMPLETED`, :data:`CANCELLED`, ...)."""
        from huaweicloudsdkbss.v2 import ShowCustomerOrderDetailsRequest

        with boundary("BSS ShowCustomerOrderDetails"):
            resp = self._bss().show_customer_order_details(ShowCustomerOrderDetailsRequest(order_id=order_id))
        status = _get(_get(resp, "order_info"), "status") if _get(resp, "order_info") is not None else None
        return int(status) if status is not None else None

    def _query(self, **filters: Any) -> list[Resource]:
        from huaweicloudsdkbss.v2 import ListPayPerUseCustomerResourcesRequest, QueryResourcesReq

        out: list[Resource] = []
        while True:
            body = QueryResourcesReq(only_main_resource=1, offset=len(out), limit=PAGE, **filters)
            with boundary("BSS ListPayPerUseCustomerResources"):
                resp = self._bss().list_pay_per_use_customer_resources(
                    ListPayPerUseCustomerResourcesRequest(body=body))
            page = [_resource(r) for r in _get(resp, "data") or []]
            out += page
            total = int(_get(resp, "total_count") or 0)
            if not page or len(out) >= total:
                return out

    def order_resources(self, order_id: str) -> list[Resource]:
        """The main resources an order opened (none until it has opened them)."""
        return [r for r in self._query(order_id=order_id) if r.is_main]

    def resources(self, resource_ids: Sequence[str]) -> dict[str, Resource]:
        """The yearly/monthly terms still held among ``resource_ids`` (main resources in force), by id."""
        out: dict[str, Resource] = {}
        ids = list(dict.fromkeys(resource_ids))
        for start in range(0, len(ids), MAX_QUERY_IDS):
            chunk = ids[start:start + MAX_QUERY_IDS]
            for r in self._query(resource_ids=chunk):
                if r.is_main and r.resource_id in chunk and (r.status is None or r.status in IN_FORCE):
                    out[r.resource_id] = r
        return out

    def unsubscribe(self, resource_id: str) -> list[str]:
        """CancelResourcesSubscription of one main resource (type 1: the resource and its renewed terms): the
        unsubscribe orders BSS opened."""
        from huaweicloudsdkbss.v2 import CancelResourcesSubscriptionRequest, UnsubscribeResourcesReq

        body = UnsubscribeResourcesReq(resource_ids=[resource_id], unsubscribe_type=1)
        with boundary("BSS CancelResourcesSubscription"):
            resp = self._bss().cancel_resources_subscription(CancelResourcesSubscriptionRequest(body=body))
        return [str(o) for o in _get(resp, "order_ids") or []]


def bss_client(ak: str, sk: str, domain_id: str | None, endpoint: str, http_config: Any, *, why: str) -> Any:
    """A BssClient for the account ``domain_id`` (BSS is global: ``GlobalCredentials``, signed for the account);
    an AuthError naming HUAWEICLOUD_SDK_DOMAIN_ID without one (the SDK would ask IAM first). ``why``: what this
    caller needs BSS for, said in that error."""
    from huaweicloudsdkbss.v2 import BssClient
    from huaweicloudsdkcore.auth.credentials import GlobalCredentials

    if not domain_id:
        raise AuthError(f"no Huawei Cloud account (domain) id: set HUAWEICLOUD_SDK_DOMAIN_ID (or pass domain_id); "
                        f"{why} is a global service signed for the account (without it the SDK would ask IAM "
                        "first)", provider=PROVIDER, code="NoDomainId")
    with boundary("BSS CreateClient"):
        return transport.build(BssClient.new_builder()
                               .with_credentials(GlobalCredentials(ak, sk, domain_id))
                               .with_endpoints([endpoint]), http_config)
