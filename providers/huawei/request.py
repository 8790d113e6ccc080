"""What CreateBareMetalServers sends for a NodeSpec.

BMS takes no client token, so the request carries the node's identity instead: a deterministic server name
(:func:`server_name`) and the ``metalfleet:key`` tag (the idempotency key). The driver looks a key up before
it orders (see :mod:`.driver`). The request is deterministic: the same spec gives the same body.
"""

from __future__ import annotations

import base64
from typing import Any

from ..models import BillingModel, NodeSpec, VolumeSpec
from ..tags import TAG_CLUSTER, TAG_GENERATION, TAG_INDEX, TAG_KEY, TAG_NAME
from .network import network_request

__all__ = ["USER_DATA_MAX", "VOLUME_TYPES", "charging", "create_request", "node_tags", "server_name"]

#: BMS's limit on user data, in bytes (before base64).
USER_DATA_MAX = 32 * 1024
#: EVS disk types a BMS volume may use.
VOLUME_TYPES = frozenset({"SATA", "SAS", "SSD", "GPSSD", "ESSD", "GPSSD2", "ESSD2"})
#: The cluster spec's default volume type is EC2's gp3; on Huawei it means the general-purpose SSD.
DEFAULT_TYPE = "GPSSD"
_PERIODS = {BillingModel.MONTHLY: ("month", 1), BillingModel.RESERVED_1Y: ("year", 1),
            BillingModel.RESERVED_3Y: ("year", 3)}


def server_name(spec: NodeSpec) -> str:
    """The server's name: ``<cluster>-<index>``, plus ``-g<generation>`` for a replacement. Deterministic, so
    a re-run finds what an earlier run ordered (with the ``metalfleet:key`` tag deciding)."""
    return spec.name if not spec.generation else f"{spec.name}-g{spec.generation}"


def node_tags(spec: NodeSpec) -> dict[str, str]:
    """The server's tags, sorted (a Pulumi round trip reorders a spec's tags; the request must not change)."""
    tags = {TAG_NAME: server_name(spec), **spec.tags}
    tags.update({TAG_CLUSTER: spec.cluster, TAG_INDEX: str(spec.index), TAG_KEY: spec.idempotency_key})
    if spec.generation:
        tags[TAG_GENERATION] = str(spec.generation)
    return dict(sorted(tags.items()))


def charging(spec: NodeSpec) -> dict[str, Any]:
    """``extendparam``'s billing part: postPaid on demand; prePaid for a month or one or three years, paid
    from the account's balance at once (``isAutoPay``) so the order proceeds without a human, not renewed."""
    if spec.billing in _PERIODS:
        period, num = _PERIODS[spec.billing]
        return {"chargingMode": "prePaid", "periodType": period, "periodNum": num, "isAutoRenew": "false",
                "isAutoPay": "true"}
    return {"chargingMode": "postPaid"}


def _volume(v: VolumeSpec) -> dict[str, Any]:
    vol: dict[str, Any] = {"volumetype": DEFAULT_TYPE if v.volume_type == "gp3" else v.volume_type,
                           "size": v.size_gib}
    if v.encrypted:
        vol["metadata"] = {"__system__encrypted": "1", "__system__cmkid": v.kms_key_id}
    return vol


def create_request(spec: NodeSpec) -> dict[str, Any]:
    """The CreateBareMetalServers body for ``spec``: one server, the spec's VPC, subnet and security groups,
    encrypted volumes, server tags, IMDS with tokens required, no EIP unless ``public_ip``."""
    server: dict[str, Any] = {
        "imageRef": spec.image,
        "flavorRef": spec.offering,
        "name": server_name(spec),
        "key_name": spec.key_name,
        "availability_zone": spec.zone,
        **network_request(spec),
        "count": 1,
        "root_volume": _volume(spec.root_volume),
        "extendparam": charging(spec),
        "server_tags": [{"key": k, "value": v} for k, v in node_tags(spec).items()],
        "metadata_options": {"http_tokens": "required"},
    }
    if spec.data_volumes:
        server["data_volumes"] = [_volume(v) for v in spec.data_volumes]
    if spec.user_data:
        server["user_data"] = base64.b64encode(spec.user_data.encode()).decode()
    return {"server": server}
