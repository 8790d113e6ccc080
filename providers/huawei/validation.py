"""Offline checks of a NodeSpec against Huawei BMS's rules: a bad spec fails here, before any API call.

Every error is an InvalidSpecError naming the cluster-spec field and the value at fault. The rules are the BMS
reference's (tests/support/reference/huawei-bms.yaml cites each): only yearly/monthly (prePaid) servers are
created, a year at a time at most; a server is created with at most 9 tags of its own (10 with the system tag
``__type_baremetal``) and carries at most 20; tag keys have at most 36 and values at most 43 characters, neither
a control character nor any of ``=*<>\\,|/``. The tag rules (:func:`tag_problems`) are the one tag check:
``validate`` applies them to the tags a node is created with, ``set_tags`` to the tags it writes later, and the
cluster spec to the user's tags at parse time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import InvalidSpecError
from ..models import BillingModel, NodeSpec
from ..tags import TAG_CLUSTER, TAG_GENERATION, TAG_INDEX, TAG_KEY
from ..validation import check_ids, check_node_basics, raise_first_problem
from .errors import PROVIDER
from .request import USER_DATA_MAX, VOLUME_TYPES, create_tags, server_name

__all__ = ["MAX_CREATE_TAGS", "MAX_TAGS", "SOLD_BILLING", "TAG_KEY_MAX", "TAG_VALUE_MAX", "billing_problem",
           "check_tags", "spec_tag_problems", "tag_problems", "tag_text", "validate_node_spec"]

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_KEY_PAIR = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: CreateBareMetalServers ``name``: Chinese characters, letters, digits, ``_``, ``-`` and ``.``, 1-63 characters.
_SERVER_NAME = re.compile(r"^[\w.\-\u4e00-\u9fff]{1,63}$", re.ASCII)
#: What BMS sells (CreateBareMetalServers: "目前仅支持创建包周期裸金属服务器", yearly/monthly only; ``periodNum`` 1-9
#: months or 1 year).
SOLD_BILLING: frozenset[BillingModel] = frozenset({BillingModel.MONTHLY, BillingModel.RESERVED_1Y})
#: Tags a server may be created with (``server_tags``: 10, one of them the system's ``__type_baremetal``).
MAX_CREATE_TAGS = 9
#: Tags a server may carry (BatchCreateBaremetalServerTags: "每台裸金属服务器最多20个标签").
MAX_TAGS = 20
#: The longest tag key and value (both at creation and through the tag API).
TAG_KEY_MAX, TAG_VALUE_MAX = 36, 43
#: The tags metalfleet creates a server with besides the user's (the generation only on replacements).
OWN_CREATE_TAGS = (TAG_CLUSTER, TAG_INDEX, TAG_KEY, TAG_GENERATION)
#: Characters a tag key or value may not have besides control characters.
_FORBIDDEN = frozenset("=*<>\\,|/")


def billing_problem(billing: BillingModel) -> str | None:
    """Why ``billing`` cannot be ordered on Huawei BMS, or None when BMS sells it (:data:`SOLD_BILLING`)."""
    if billing in SOLD_BILLING:
        return None
    if billing == BillingModel.RESERVED_3Y:
        return ("Huawei BMS orders at most one year at a time (CreateBareMetalServers extendparam.periodNum is 1 "
                "when periodType is year): set capacity.billing to reserved_1y (renewed yearly) or monthly")
    return (f"Huawei BMS does not sell {billing.value} servers: CreateBareMetalServers creates yearly/monthly "
            "(prePaid) servers only; set capacity.billing to monthly or reserved_1y")


def _allowed(text: str) -> bool:
    return not any(ord(c) < 32 or c in _FORBIDDEN for c in text)


def tag_problems(tags: Mapping[str, str], *, count: bool = True) -> list[tuple[str, str, str]]:
    """``(field, value, why)`` for each way ``tags`` break BMS's tag rules, in order; [] when they keep them.

    Keys are 1-36 characters, values up to 43; neither has a control character or any of ``=*<>\\,|/``; a key
    may not start with ``_sys_`` (Huawei's own). ``count``: with metalfleet's own creation tags a server is
    created with at most :data:`MAX_CREATE_TAGS`.
    """
    out: list[tuple[str, str, str]] = []
    for key, value in tags.items():
        key, value = str(key), str(value)
        field = f"tags.{key}"
        if not 1 <= len(key) <= TAG_KEY_MAX:
            out.append((field, key, f"tag key {key!r} is {len(key)} characters; Huawei BMS allows 1-{TAG_KEY_MAX}"))
        elif key.startswith("_sys_"):
            out.append((field, key, f"tag key {key!r}: the _sys_ prefix is reserved for Huawei Cloud"))
        elif not _allowed(key):
            out.append((field, key, f"tag key {key!r} has a character Huawei BMS does not allow in tags (control "
                                    "characters and = * < > \\ , | /)"))
        if len(value) > TAG_VALUE_MAX:
            out.append((field, value, f"tag {key!r}: its value is {len(value)} characters; Huawei BMS allows "
                                      f"{TAG_VALUE_MAX}"))
        elif not _allowed(value):
            out.append((field, value, f"tag {key!r}: its value {value!r} has a character Huawei BMS does not allow "
                                      "in tags (control characters and = * < > \\ , | /)"))
    if count:
        own = set(OWN_CREATE_TAGS)
        total = len(set(map(str, tags)) | own)
        if total > MAX_CREATE_TAGS:
            out.append(("tags", str(len(tags)), f"{len(tags)} tags, {total} with metalfleet's own "
                                                f"({', '.join(sorted(own))}); Huawei BMS creates a server with at "
                                                f"most {MAX_CREATE_TAGS} (server_tags)"))
    return out


def spec_tag_problems(tags: Mapping[str, str], *, public_ip: bool) -> list[tuple[str, str, str]]:
    """The user's tags at parse time (:func:`tag_problems`); ``public_ip`` adds no tag: BMS orders no EIP."""
    return tag_problems(tags)


def tag_text(text: str) -> str:
    """Free text as a tag value Huawei takes: each character it does not allow becomes a space, then at most
    :data:`TAG_VALUE_MAX` characters."""
    return "".join(c if _allowed(c) else " " for c in text)[:TAG_VALUE_MAX]


def check_tags(tags: Mapping[str, str], *, count: bool = True) -> None:
    """Raise an InvalidSpecError (``field="tags.<key>"``) for the first of :func:`tag_problems`."""
    raise_first_problem(tag_problems(tags, count=count), PROVIDER)


def _bad(message: str, field: str, value: object) -> InvalidSpecError:
    return InvalidSpecError(message, field=field, value=value, provider=PROVIDER)


def validate_node_spec(spec: NodeSpec, region: str, offerings: Sequence[str]) -> None:
    """Check ``spec`` as BMS would, offline, for a driver in ``region`` that orders ``offerings``."""
    check_node_basics(spec, PROVIDER, region, offerings, "a BMS image id (a UUID from IMS)", "[a-z]")
    problem = billing_problem(spec.billing)
    if problem:
        raise _bad(problem, "capacity.billing", spec.billing.value)
    if not _UUID.match(spec.image):
        raise _bad(f"image {spec.image!r} is not an IMS image id (a UUID)", "image", spec.image)
    if not spec.zone:
        raise _bad(f"zone is required: BMS orders a flavor in one availability zone of {region} "
                   f"(e.g. {region}a)", "zone", None)
    for field, value in (("network.vpc_id", spec.vpc_id), ("network.subnet_id", spec.subnet_id)):
        if not value:
            raise _bad(f"{field} is required: a BMS is created in a VPC subnet (the subnet's network id)", field,
                       value)
    if not spec.security_group_ids:
        raise _bad("network.security_group_ids is required: the Huawei driver makes no security group, it uses "
                   "yours as they are", "network.security_group_ids", [])
    check_ids(PROVIDER, [("network.vpc_id", spec.vpc_id, _UUID, "a VPC resource id (a UUID)"),
                         ("network.subnet_id", spec.subnet_id, _UUID, "a VPC resource id (a UUID)"),
                         *(("network.security_group_ids", sg, _UUID, "a security group id (a UUID)")
                           for sg in spec.security_group_ids)])
    if spec.ssh_ingress_cidrs:
        raise _bad("the Huawei driver makes no security group, so it cannot add SSH rules: put the rule in one "
                   "of network.security_group_ids", "network.ssh_ingress_cidrs", list(spec.ssh_ingress_cidrs))
    if spec.public_ip:
        raise _bad("the Huawei driver orders no EIP: an EIP ordered with a yearly/monthly server is billed as a "
                   "resource of its own, and the references do not say that unsubscribing the server through BSS "
                   "releases it (it would be left behind); bind an EIP you manage instead", "network.public_ip",
                   True)
    if spec.placement_group and spec.placement_strategy not in ("cluster", "none"):
        raise _bad(f"BMS has no {spec.placement_strategy} placement groups", "placement.strategy",
                   spec.placement_strategy)
    if spec.capacity_reservation_id or spec.capacity_block:
        raise _bad("BMS has no capacity reservations or capacity blocks", "capacity.reservation_id",
                   spec.capacity_reservation_id)
    if spec.key_name is not None and not _KEY_PAIR.match(spec.key_name):
        raise _bad(f"key pair name {spec.key_name!r}: 1-64 letters, digits, _ and -", "ssh.key_pair",
                   spec.key_name)
    if not spec.key_name:
        raise _bad("ssh.key_pair is required: a BMS logs in with a key pair (BMS has no password login for "
                   "metalfleet to use)", "ssh.key_pair", None)
    name = server_name(spec)
    if not _SERVER_NAME.match(name):
        raise _bad(f"server name {name!r}: BMS takes 1-63 letters, digits, Chinese characters, _ - and .", "name",
                   spec.cluster)
    if len(spec.cluster) > TAG_VALUE_MAX:
        raise _bad(f"cluster name {spec.cluster!r} is {len(spec.cluster)} characters: it is the value of the "
                   f"{TAG_CLUSTER} tag, and BMS takes tag values of at most {TAG_VALUE_MAX}", "name", spec.cluster)
    _validate_volumes(spec)
    check_tags(create_tags(spec))
    if spec.user_data and len(spec.user_data.encode()) > USER_DATA_MAX:
        raise _bad(f"user data is {len(spec.user_data.encode())} bytes; BMS allows {USER_DATA_MAX}", "user_data",
                   len(spec.user_data.encode()))


def _validate_volumes(spec: NodeSpec) -> None:
    volumes = [("storage.root", spec.root_volume)] + [(f"storage.data.{i}", v)
                                                      for i, v in enumerate(spec.data_volumes)]
    if len(spec.data_volumes) > 59:
        raise _bad("at most 59 data volumes (BMS mounts at most 60 EVS disks, the system disk included)",
                   "storage.data", len(spec.data_volumes))
    for path, v in volumes:
        if v.volume_type not in VOLUME_TYPES and v.volume_type != "gp3":
            raise _bad(f"volume type {v.volume_type!r} is not one BMS creates ({', '.join(sorted(VOLUME_TYPES))})",
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
