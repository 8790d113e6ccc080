"""What CreateBareMetalServers sends for a NodeSpec.

BMS takes no client token, so the request carries the node's identity instead: a deterministic server name
(:func:`server_name`), which ListBareMetalServers' documented ``name`` filter finds again, and the
``metalfleet:key`` tag, compared on the client (a 40-hex digest of the idempotency key: ``server_tags`` values
are at most 43 characters). The request is deterministic: the same spec gives the same body.

Only yearly/monthly (prePaid) servers can be created ("目前仅支持创建包周期裸金属服务器"), paid at once from the
account's balance (``isAutoPay``) so the order proceeds without a human, and not renewed: ending one early is an
unsubscription through BSS (:mod:`.billing`).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from ..errors import InvalidSpecError
from ..models import BillingModel, NodeSpec, VolumeSpec
from ..tags import TAG_CLUSTER, TAG_GENERATION, TAG_INDEX, TAG_KEY, TAG_NAME
from .errors import PROVIDER
from .network import network_request

__all__ = ["DEFAULT_TYPE", "PERIODS", "USER_DATA_MAX", "VOLUME_TYPES", "charging", "create_request", "create_tags",
           "key_tag", "server_name"]

#: BMS's limit on user data, in bytes (before base64).
USER_DATA_MAX = 32 * 1024
#: EVS disk types a BMS volume may use (the official SDKs' RootVolume/DataVolumes ``volumetype`` enum).
VOLUME_TYPES = frozenset({"GPSSD", "SATA", "SAS", "SSD"})
#: The cluster spec's default volume type is EC2's gp3; on Huawei it means the general-purpose SSD.
DEFAULT_TYPE = "GPSSD"
#: The billing models BMS sells -> (periodType, periodNum): a month, or one year (periodNum is 1 for years).
PERIODS: dict[BillingModel, tuple[str, int]] = {BillingModel.MONTHLY: ("month", 1),
                                                  BillingModel.RESERVED_1Y: ("year", 1)}


def server_name(spec: NodeSpec) -> str:
    """The server's name: ``<cluster>-<index>``, plus ``-g<generation>`` for a replacement. Deterministic, so
    a re-run finds what an earlier run ordered (with the ``metalfleet:key`` tag deciding)."""
    return spec.name if not spec.generation else f"{spec.name}-g{spec.generation}"


def key_tag(idempotency_key: str) -> str:
    """The ``metalfleet:key`` tag value for an idempotency key: ``mf-`` and 40 hex digits of its SHA-256 (43
    characters, the most a ``server_tags`` value may have; the key itself can be longer)."""
    return "mf-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:40]


def create_tags(spec: NodeSpec) -> dict[str, str]:
    """The tags a server is created with, sorted (a Pulumi round trip reorders a spec's tags; the request must
    not change): the user's, the cluster, the index, the key digest and, for a replacement, the generation.
    (No ``Name`` tag: the server has its name, and the tag's value could pass the 43 characters allowed.)"""
    tags = {k: v for k, v in spec.tags.items() if k != TAG_NAME}
    tags.update({TAG_CLUSTER: spec.cluster, TAG_INDEX: str(spec.index), TAG_KEY: key_tag(spec.idempotency_key)})
    if spec.generation:
        tags[TAG_GENERATION] = str(spec.generation)
    return dict(sorted(tags.items()))


def charging(spec: NodeSpec) -> dict[str, Any]:
    """``extendparam``: prePaid for a month or a year, paid from the account's balance at once (``isAutoPay``),
    not renewed. InvalidSpecError (``capacity.billing``) for a billing model BMS does not sell."""
    if spec.billing not in PERIODS:
        from .validation import billing_problem

        raise InvalidSpecError(billing_problem(spec.billing) or f"billing {spec.billing.value} is not sold",
                               field="capacity.billing", value=spec.billing.value, provider=PROVIDER)
    period, num = PERIODS[spec.billing]
    return {"chargingMode": "prePaid", "periodType": period, "periodNum": num, "isAutoRenew": "false",
            "isAutoPay": "true"}


def _volume(v: VolumeSpec) -> dict[str, Any]:
    vol: dict[str, Any] = {"volumetype": DEFAULT_TYPE if v.volume_type == "gp3" else v.volume_type,
                           "size": v.size_gib}
    if v.encrypted:
        vol["metadata"] = {"__system__encrypted": "1", "__system__cmkid": v.kms_key_id}
    return vol


def create_request(spec: NodeSpec, user_id: str) -> dict[str, Any]:
    """The CreateBareMetalServers body for ``spec``: one prePaid server, the spec's VPC, subnet and security
    groups, encrypted volumes, server tags, IMDS with tokens required; ``metadata.op_svc_userid`` is the IAM user
    id the API requires (``user_id``)."""
    server: dict[str, Any] = {
        "imageRef": spec.image,
        "flavorRef": spec.offering,
        "name": server_name(spec),
        "metadata": {"op_svc_userid": user_id},
        "key_name": spec.key_name,
        "availability_zone": spec.zone,
        **network_request(spec),
        "count": 1,
        "root_volume": _volume(spec.root_volume),
        "extendparam": charging(spec),
        "server_tags": [{"key": k, "value": v} for k, v in create_tags(spec).items()],
        "metadata_options": {"http_tokens": "required"},
    }
    if spec.data_volumes:
        server["data_volumes"] = [_volume(v) for v in spec.data_volumes]
    if spec.user_data:
        server["user_data"] = base64.b64encode(spec.user_data.encode()).decode()
    return {"server": server}
