"""Subscriptions (PrePaid instances): which nodes are bought for a term, and what ending one early means.

ECS releases (DeleteInstances) pay-as-you-go instances and expired subscriptions only (the latter with
``TerminateSubscription``). An unexpired subscription is ended early by converting it to pay-as-you-go
(ModifyInstanceChargeType, InstanceChargeType PostPaid: the instance Running or Stopped, not expired) and then
releasing it. The reference says what the conversion refunds: the price difference of the unused term goes back
to the payment account (redeemed vouchers are not refunded), the amount counting against the account's monthly
refund quota of vCPUs x remaining hours; ECS answers the amount itself only when it converts (``IsDetailFee``).
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime

from ..contract import Subscription
from ..models import Node

__all__ = ["HOW", "conversion_token", "expires_at", "is_subscription", "refund_text", "subscription_of"]

#: What ``release(..., unsubscribe=True)`` does on Alibaba Cloud.
HOW = "ModifyInstanceChargeType to pay-as-you-go (PostPaid), then DeleteInstances"
_FORMATS = ("%Y-%m-%dT%H:%MZ", "%Y-%m-%dT%H:%M:%SZ")


def expires_at(text: object) -> datetime | None:
    """An ECS time (``2017-12-10T04:04Z``, UTC) as a datetime; None when absent or unreadable."""
    for fmt in _FORMATS:
        try:
            return datetime.strptime(str(text), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def is_subscription(node: Node) -> bool:
    return node.extra.get("charge_type") == "PrePaid"


def refund_text(vcpus: int, ends: datetime, now: datetime) -> str:
    """What converting refunds, as the ModifyInstanceChargeType reference states it, with this node's figures."""
    hours = max(math.ceil((ends - now).total_seconds() / 3600), 0)
    units = f"{vcpus} vCPU x {hours} h = {vcpus * hours:,}" if vcpus else f"vCPUs x {hours} h"
    return (f"converting refunds the unused term's price difference to the payment account (redeemed vouchers "
            f"are not refunded) and uses {units} of the account's monthly refund quota; ECS states the amount "
            "when it converts")


def subscription_of(node: Node, now: datetime | None = None) -> Subscription | None:
    """The node's unexpired subscription, or None (pay-as-you-go, or a term that has run out: DeleteInstances
    releases those)."""
    if not is_subscription(node):
        return None
    now = now or datetime.now(UTC)
    ends = expires_at(node.extra.get("expired_time"))
    if ends is not None and ends <= now:
        return None
    return Subscription(node_id=node.id, charge_type="PrePaid (subscription)",
                        expires_at=ends.strftime("%Y-%m-%dT%H:%M:%SZ") if ends else None,
                        refund=refund_text(int(node.extra.get("vcpus") or 0), ends, now) if ends else None,
                        how=HOW, name=node.name)


def conversion_token(node_id: str) -> str:
    """The ClientToken of a node's conversion to pay-as-you-go: the same for every retry and re-run (ASCII, 64
    characters at most), so a repeated request converts once."""
    return "mf-postpaid-" + hashlib.sha256(node_id.encode()).hexdigest()[:40]
