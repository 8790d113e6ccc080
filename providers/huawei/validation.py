"""Offline checks of a NodeSpec against Huawei BMS's rules: a bad spec fails here, before any API call.

Every error is an InvalidSpecError naming the cluster-spec field and the value at fault. The tag rules
(:func:`tag_problems`) are the one tag check: ``validate`` applies them to the tags a node would carry,
``set_tags`` to the tags it writes, and the cluster spec to the user's tags at parse time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import InvalidSpecError
from ..models import BillingModel, NodeSpec
from ..tags import ACCEPTANCE_TAGS, NODE_TAGS
from ..validation import raise_first_problem
from .errors import PROVIDER
from .request import USER_DATA_MAX, VOLUME_TYPES, charging, node_tags, server_name

__all__ = ["MAX_TAGS", "check_billing", "check_tags", "tag_problems", "tag_text", "validate_node_spec"]

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_KEY_PAIR = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: At most this many tags per server (TMS's limit for a resource), metalfleet's own included.
MAX_TAGS = 20
_TAG_CHARS = frozenset(" _.:/=+-@")


def _allowed(text: str) -> bool:
    return all(c.isalnum() or c in _TAG_CHARS for c in text)


def tag_problems(tags: Mapping[str, str], *, count: bool = True) -> list[tuple[str, str, str]]:
    """``(field, value, why)`` for each way ``tags`` break Huawei's tag rules, in order; [] when they keep them.

    Keys are 1-128 characters, values up to 255; both use letters, digits, spaces and ``_ . : / = + - @``; a
    key may not start with ``_sys_`` (Huawei's own). ``count``: with metalfleet's own tags (and room for the
    gate's two) a server carries at most :data:`MAX_TAGS`.
    """
    out: list[tuple[str, str, str]] = []
    for key, value in tags.items():
        key, value = str(key), str(value)
        field = f"tags.{key}"
        if not 1 <= len(key) <= 128:
            out.append((field, key, f"tag key {key!r} is {len(key)} characters; Huawei allows 1-128"))
        elif key.startswith("_sys_"):
            out.append((field, key, f"tag key {key!r}: the _sys_ prefix is reserved for Huawei Cloud"))
        elif not _allowed(key):
            out.append((field, key, f"tag key {key!r} has characters Huawei does not allow in tags (letters, "
                                    "digits, spaces and _ . : / = + - @ only)"))
        if len(value) > 255:
            out.append((field, value, f"tag {key!r}: its value is {len(value)} characters; Huawei allows 255"))
        elif not _allowed(value):
            out.append((field, value, f"tag {key!r}: its value {value!r} has characters Huawei does not allow in "
                                      "tags (letters, digits, spaces and _ . : / = + - @ only)"))
    if count:
        own = set(NODE_TAGS) | set(ACCEPTANCE_TAGS)
        total = len(set(map(str, tags)) | own)
        if total > MAX_TAGS:
            out.append(("tags", str(len(tags)), f"{len(tags)} tags, {total} with metalfleet's own "
                                                f"({', '.join(sorted(own))}); Huawei allows {MAX_TAGS} per server"))
    return out


def tag_text(text: str) -> str:
    """Free text as a tag value Huawei takes: each character it does not allow becomes a space, then at most
    255 characters."""
    return "".join(c if c.isalnum() or c in _TAG_CHARS else " " for c in text)[:255]


def check_tags(tags: Mapping[str, str], *, count: bool = True) -> None:
    """Raise an InvalidSpecError (``field="tags.<key>"``) for the first of :func:`tag_problems`."""
    raise_first_problem(tag_problems(tags, count=count), PROVIDER)


def _bad(message: str, field: str, value: object) -> InvalidSpecError:
    return InvalidSpecError(message, field=field, value=value, provider=PROVIDER)


def check_billing(spec: NodeSpec, modes: Sequence[str]) -> None:
    """Refuse a billing model the flavor is not sold under (``modes``: its charging modes, postPaid and/or
    prePaid), before any call: a prePaid-only flavor cannot be ordered on demand."""
    mode = charging(spec)["chargingMode"]
    if modes and mode not in modes:
        sold = " and ".join(modes)
        hint = " (set capacity.billing: monthly, reserved_1y or reserved_3y)" if "prePaid" in modes else ""
        raise _bad(f"{spec.offering} is sold {sold} only, not {mode} (billing {spec.billing.value}){hint}",
                   "capacity.billing", spec.billing.value)


def validate_node_spec(spec: NodeSpec, region: str, offerings: Sequence[str],
                       billing: Mapping[str, Sequence[str]] | None = None) -> None:
    """Check ``spec`` as BMS would, offline, for a driver in ``region`` that orders ``offerings``."""
    if spec.offering not in offerings:
        raise _bad(f"unknown offering {spec.offering!r} for provider huawei (supported: {', '.join(offerings)})",
                   "offering", spec.offering)
    if not spec.image:
        raise _bad("image is required: a BMS image id (a UUID from IMS)", "image", spec.image)
    if not _UUID.match(spec.image):
        raise _bad(f"image {spec.image!r} is not an IMS image id (a UUID)", "image", spec.image)
    if spec.region != region:
        raise _bad(f"region {spec.region!r} differs from the driver's region {region!r}", "region", spec.region)
    if not spec.zone:
        raise _bad(f"zone is required: BMS orders a flavor in one availability zone of {region} "
                   f"(e.g. {region}a)", "zone", None)
    if not re.fullmatch(rf"{re.escape(region)}[a-z]", spec.zone):
        raise _bad(f"zone {spec.zone!r} is not an availability zone of {region}", "zone", spec.zone)
    for field, value in (("network.vpc_id", spec.vpc_id), ("network.subnet_id", spec.subnet_id)):
        if not value:
            raise _bad(f"{field} is required: a BMS is created in a VPC subnet (the subnet's network id)", field,
                       value)
        if not _UUID.match(value):
            raise _bad(f"{value!r} is not a VPC resource id (a UUID)", field, value)
    if not spec.security_group_ids:
        raise _bad("network.security_group_ids is required: the Huawei driver makes no security group, it uses "
                   "yours as they are", "network.security_group_ids", [])
    for sg in spec.security_group_ids:
        if not _UUID.match(sg):
            raise _bad(f"{sg!r} is not a security group id (a UUID)", "network.security_group_ids", sg)
    if spec.ssh_ingress_cidrs:
        raise _bad("the Huawei driver makes no security group, so it cannot add SSH rules: put the rule in one "
                   "of network.security_group_ids", "network.ssh_ingress_cidrs", list(spec.ssh_ingress_cidrs))
    if spec.placement_group and spec.placement_strategy not in ("cluster", "none"):
        raise _bad(f"BMS has no {spec.placement_strategy} placement groups", "placement.strategy",
                   spec.placement_strategy)
    if spec.capacity_reservation_id or spec.capacity_block:
        raise _bad("BMS has no capacity reservations or capacity blocks", "capacity.reservation_id",
                   spec.capacity_reservation_id)
    if spec.billing not in (BillingModel.ON_DEMAND, BillingModel.MONTHLY, BillingModel.RESERVED_1Y,
                            BillingModel.RESERVED_3Y):
        raise _bad(f"billing {spec.billing.value!r} is not sold on BMS (on_demand = postPaid; monthly, reserved_1y, "
                   "reserved_3y = prePaid)", "capacity.billing", spec.billing.value)
    check_billing(spec, (billing or {}).get(spec.offering, ()))
    if spec.key_name is not None and not _KEY_PAIR.match(spec.key_name):
        raise _bad(f"key pair name {spec.key_name!r}: 1-64 letters, digits, _ and -", "ssh.key_pair",
                   spec.key_name)
    if not spec.key_name:
        raise _bad("ssh.key_pair is required: a BMS logs in with a key pair (BMS has no password login for "
                   "metalfleet to use)", "ssh.key_pair", None)
    if not 1 <= len(server_name(spec)) <= 63:
        raise _bad(f"server name {server_name(spec)!r} is longer than BMS's 63 characters", "name", spec.cluster)
    _validate_volumes(spec)
    check_tags(node_tags(spec))
    if spec.user_data and len(spec.user_data.encode()) > USER_DATA_MAX:
        raise _bad(f"user data is {len(spec.user_data.encode())} bytes; BMS allows {USER_DATA_MAX}", "user_data",
                   len(spec.user_data.encode()))


def _validate_volumes(spec: NodeSpec) -> None:
    volumes = [("storage.root", spec.root_volume)] + [(f"storage.data.{i}", v)
                                                      for i, v in enumerate(spec.data_volumes)]
    if len(spec.data_volumes) > 59:
        raise _bad("at most 59 data volumes", "storage.data", len(spec.data_volumes))
    for path, v in volumes:
        if v.volume_type not in VOLUME_TYPES and v.volume_type != "gp3":
            raise _bad(f"volume type {v.volume_type!r} is not an EVS type ({', '.join(sorted(VOLUME_TYPES))})",
                       f"{path}.type", v.volume_type)
        low, high = (40, 1024) if path == "storage.root" else (10, 32768)
        if not low <= v.size_gib <= high:
            raise _bad(f"volume size {v.size_gib} GiB is outside {low}..{high}", f"{path}.size_gib", v.size_gib)
        if v.kms_key_id and not _UUID.match(v.kms_key_id):
            raise _bad(f"{v.kms_key_id!r} is not a KMS key id (a UUID)", f"{path}.kms_key_id", v.kms_key_id)
        if v.kms_key_id and not v.encrypted:
            raise _bad("a KMS key is set on a volume with encrypted: false", f"{path}.encrypted", v.encrypted)
        if v.encrypted and not v.kms_key_id:
            raise _bad("an encrypted EVS volume needs its KMS key (__system__cmkid): set storage.kms_key_id",
                       f"{path}.kms_key_id", None)
