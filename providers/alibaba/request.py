"""What RunInstances sends for a NodeSpec: plain data in the API's own parameter names.

The request is deterministic: the same spec gives the same parameters, so a replay with the node's
ClientToken (its idempotency key) matches the first request and ECS answers with the instance that one
bought. The driver turns it into the SDK's ``RunInstancesRequest`` with ``from_map``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ..models import BillingModel, NodeSpec, VolumeSpec
from ..tags import TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_NAME

__all__ = ["DEFAULT_DISK_CATEGORY", "DISK_CATEGORIES", "USER_DATA_MAX", "disk_category", "eri_interfaces",
           "node_tags", "run_instances_request"]

#: ECS's limit on user data, in bytes (before base64).
USER_DATA_MAX = 32 * 1024
#: The cloud disk categories the driver orders for an ECS Bare Metal GPU instance's system and data disks (the
#: RunInstances reference: cloud_essd_entry is for the u1 and e families only).
DISK_CATEGORIES = ("cloud_essd", "cloud_auto")
#: The spec's volume type default (``gp3``, an EBS name) means this on Alibaba Cloud.
DEFAULT_DISK_CATEGORY = "cloud_essd"
#: What a spot order asks for: pay the market price, capped at the on-demand price.
SPOT_STRATEGY = "SpotAsPriceGo"


def disk_category(v: VolumeSpec) -> str:
    """The disk category for a volume: its type, or cloud_essd for the spec's EBS default (gp3)."""
    return DEFAULT_DISK_CATEGORY if v.volume_type == "gp3" else v.volume_type


def node_tags(spec: NodeSpec) -> dict[str, str]:
    """The node's tags, sorted: the same spec gives the same request whatever order its tags came in."""
    tags = {TAG_NAME: spec.name, **spec.tags}
    tags.update({TAG_CLUSTER: spec.cluster, TAG_INDEX: str(spec.index), TAG_KEY: spec.idempotency_key})
    return dict(sorted(tags.items()))


def _groups(security_group_ids: Sequence[str], prefix: str = "") -> dict[str, Any]:
    """One group as ``SecurityGroupId``, several as ``SecurityGroupIds`` (the reference takes one or the other)."""
    if len(security_group_ids) == 1:
        return {f"{prefix}SecurityGroupId": security_group_ids[0]}
    return {f"{prefix}SecurityGroupIds": list(security_group_ids)}


def eri_interfaces(vswitch_id: str, security_group_ids: Sequence[str], eri: int, cards: int) -> list[dict[str, Any]]:
    """The instance's network interfaces with eRDMA (ERI): the primary one on network card 0 and a secondary
    one on each further card, every one in HighPerformance traffic mode (that makes it an ERI), up to the
    type's ERI count. [] for a type without ERI: the top-level VSwitchId/SecurityGroupId then make the
    primary interface.

    The primary interface carries the vSwitch and the security groups: with a Primary interface the reference
    forbids the top-level VSwitchId, SecurityGroupId and SecurityGroupIds.N. A secondary one takes the
    instance's vSwitch and groups by default, so it names neither; it goes with the instance (DeleteOnRelease,
    true by default, sent so the request says so)."""
    if eri <= 0:
        return []
    out: list[dict[str, Any]] = [{"InstanceType": "Primary", "NetworkCardIndex": 0,
                                  "NetworkInterfaceTrafficMode": "HighPerformance", "VSwitchId": vswitch_id,
                                  **_groups(security_group_ids)}]
    out += [{"InstanceType": "Secondary", "NetworkCardIndex": i, "NetworkInterfaceTrafficMode": "HighPerformance",
             "DeleteOnRelease": True} for i in range(1, min(eri, max(cards, 1)))]
    return out


def _disk(v: VolumeSpec) -> dict[str, Any]:
    disk: dict[str, Any] = {"Category": disk_category(v), "Size": v.size_gib, "Encrypted": str(v.encrypted).lower()}
    if v.kms_key_id:
        disk["KMSKeyId"] = v.kms_key_id
    return disk


def run_instances_request(spec: NodeSpec, *, region: str, zone: str, security_group_ids: Sequence[str],
                          deployment_set_id: str | None, eri: int, cards: int) -> dict[str, Any]:
    """The RunInstances parameters for ``spec``: one instance (Amount = MinAmount = 1) with ClientToken = the
    node's idempotency key, ERIs where the type has them (the vSwitch and groups then in the primary interface,
    never at the top level), encrypted disks, IMDS tokens required, tags, no public bandwidth unless
    ``public_ip``."""
    assert spec.subnet_id is not None
    req: dict[str, Any] = {
        "RegionId": region,
        "ZoneId": zone,
        "InstanceType": spec.offering,
        "ImageId": spec.image,
        "Amount": 1,
        "MinAmount": 1,
        "ClientToken": spec.idempotency_key,
        "InstanceName": spec.name,
        "HostName": spec.name,
        "HttpTokens": "required",
        "HttpEndpoint": "enabled",
        "SystemDisk": _disk(spec.root_volume),
        "Tag": [{"Key": k, "Value": v} for k, v in node_tags(spec).items()],
    }
    if spec.data_volumes:
        req["DataDisk"] = [{**_disk(v), "DeleteWithInstance": True} for v in spec.data_volumes]
    nics = eri_interfaces(spec.subnet_id, security_group_ids, eri, cards)
    if nics:
        req["NetworkInterface"] = nics
    else:
        req.update(VSwitchId=spec.subnet_id, **_groups(security_group_ids))
    if deployment_set_id:
        req["DeploymentSetId"] = deployment_set_id
    if spec.key_name:
        req["KeyPairName"] = spec.key_name
    if spec.public_ip:
        req["InternetChargeType"] = "PayByTraffic"
        req["InternetMaxBandwidthOut"] = 100
    else:
        req["InternetMaxBandwidthOut"] = 0
    if spec.billing == BillingModel.SPOT:
        req.update(InstanceChargeType="PostPaid", SpotStrategy=SPOT_STRATEGY)
    elif spec.billing in (BillingModel.MONTHLY, BillingModel.RESERVED_1Y, BillingModel.RESERVED_3Y):
        period = {BillingModel.MONTHLY: 1, BillingModel.RESERVED_1Y: 12, BillingModel.RESERVED_3Y: 36}[spec.billing]
        req.update(InstanceChargeType="PrePaid", Period=period, PeriodUnit="Month", AutoPay=True)
    else:
        req.update(InstanceChargeType="PostPaid", SpotStrategy="NoSpot")
    if spec.user_data:
        req["UserData"] = base64.b64encode(spec.user_data.encode()).decode()
    return req
