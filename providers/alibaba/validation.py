"""Offline checks of a NodeSpec against ECS's rules: a bad spec fails here, before any API call.

Every error is an InvalidSpecError naming the cluster-spec field and the value at fault. :func:`tag_problems`
is the one tag check (order time, ``set_tags`` and the cluster spec).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import InvalidSpecError
from ..models import BillingModel, NodeSpec
from ..tags import ACCEPTANCE_TAGS, NODE_TAGS
from ..validation import check_ids, check_node_basics, check_placement, check_ssh_access, raise_first_problem
from .errors import PROVIDER
from .request import DISK_CATEGORIES, USER_DATA_MAX, disk_category, node_tags

__all__ = ["BILLING", "MAX_DATA_DISKS", "MAX_TAGS", "check_tags", "tag_problems", "validate_node_spec"]

_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,127}$")
_VSW = re.compile(r"^vsw-[0-9a-z]{8,32}$")
_SG = re.compile(r"^sg-[0-9a-z]{8,32}$")
_VPC = re.compile(r"^vpc-[0-9a-z]{8,32}$")
_KMS = re.compile(r"^(key-[0-9a-zA-Z-]{6,64}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"
                  r"alias/[A-Za-z0-9/_-]+|acs:kms:[a-z0-9-]+:\d+:key/[0-9a-zA-Z-]+)$")
_KEY_PAIR = re.compile(r"^[A-Za-z][A-Za-z0-9._:-]{1,127}$")
_STRATEGIES = ("cluster", "spread", "partition")
#: The billing models the driver orders: pay-as-you-go (PostPaid), spot, and subscription (PrePaid).
BILLING = (BillingModel.ON_DEMAND, BillingModel.SPOT, BillingModel.MONTHLY, BillingModel.RESERVED_1Y,
           BillingModel.RESERVED_3Y)
#: Data disks per RunInstances.
MAX_DATA_DISKS = 16
#: Deployment set ``AvailabilityGroup`` strategy: 1-7 groups.
PARTITIONS_MAX = 7
#: Disk sizes (GiB) per category: an ESSD at its default performance level PL1, an ESSD AutoPL disk.
SYSTEM_DISK_SIZE = {"cloud_essd": (20, 2048), "cloud_auto": (1, 2048)}
DATA_DISK_SIZE = {"cloud_essd": (20, 65536), "cloud_auto": (1, 65536)}
#: A Linux host name (RunInstances HostName): 2-64 characters, segments of letters, digits and hyphens between
#: periods, not starting or ending with a period or hyphen, no two of them in a row.
_HOST_NAME = re.compile(r"^(?=.{2,64}$)(?![.-])(?!.*[.-]$)(?!.*[.-]{2})[A-Za-z0-9.-]+$")

# -- tags ---------------------------------------------------------------------------------------
#: At most this many tags per ECS resource, metalfleet's own included.
MAX_TAGS = 20
_RESERVED_PREFIXES = ("aliyun", "acs:")


def tag_problems(tags: Mapping[str, str], *, count: bool = True) -> list[tuple[str, str, str]]:
    """``(field, value, why)`` for each way ``tags`` break ECS's tag rules, in order; [] when they keep them.

    Keys are 1-128 characters and may not start with ``aliyun`` or ``acs:`` or contain ``http://`` /
    ``https://``; values up to 128 characters (empty allowed) that may not contain ``http://`` / ``https://``
    (the reference reserves the prefixes for keys only); ``count``: with metalfleet's own tags (and room for the
    gate's two) a resource carries at most 20."""
    out: list[tuple[str, str, str]] = []
    for key, value in tags.items():
        key, value = str(key), str(value)
        field = f"tags.{key}"
        if not 1 <= len(key) <= 128:
            out.append((field, key, f"tag key {key!r} is {len(key)} characters; Alibaba Cloud allows 1-128"))
        elif key.lower().startswith(_RESERVED_PREFIXES):
            out.append((field, key, f"tag key {key!r}: the aliyun and acs: prefixes are reserved for Alibaba Cloud"))
        elif "http://" in key or "https://" in key:
            out.append((field, key, f"tag key {key!r} may not contain http:// or https://"))
        if len(value) > 128:
            out.append((field, value, f"tag {key!r}: its value is {len(value)} characters; Alibaba Cloud allows 128"))
        elif "http://" in value or "https://" in value:
            out.append((field, value, f"tag {key!r}: its value may not contain http:// or https://"))
    if count:
        own = set(NODE_TAGS) | set(ACCEPTANCE_TAGS)
        total = len(set(map(str, tags)) | own)
        if total > MAX_TAGS:
            out.append(("tags", str(len(tags)), f"{len(tags)} tags, {total} with metalfleet's own "
                                                f"({', '.join(sorted(own))}); Alibaba Cloud allows {MAX_TAGS} "
                                                "per resource"))
    return out


def check_tags(tags: Mapping[str, str], *, count: bool = True) -> None:
    """Raise an InvalidSpecError (``field="tags.<key>"``) for the first of :func:`tag_problems`."""
    raise_first_problem(tag_problems(tags, count=count), PROVIDER)


# -- the node spec ------------------------------------------------------------------------------
def _bad(message: str, field: str, value: object) -> InvalidSpecError:
    return InvalidSpecError(message, field=field, value=value, provider=PROVIDER)


def validate_node_spec(spec: NodeSpec, region: str, offerings: Sequence[str],
                       billing: Mapping[str, Sequence[BillingModel]] | None = None) -> None:
    """Check ``spec`` as ECS would, offline, for a driver in ``region`` that orders ``offerings``
    (``billing``: the billing models each offering is sold under)."""
    check_node_basics(spec, PROVIDER, region, offerings,
                      "an ECS image id such as ubuntu_22_04_x64_20G_alibase_20240101.vhd or m-...",
                      "-[a-z0-9]+")
    if not _IMAGE.match(spec.image):
        raise _bad(f"image {spec.image!r} is not an ECS image id", "image", spec.image)
    if not _HOST_NAME.match(spec.name) or len(spec.name) > 128:
        raise _bad(f"node name {spec.name!r} is not an ECS host name (2-64 letters, digits, hyphens and periods, "
                   "not starting or ending with a period or hyphen, none doubled)", "name", spec.name)
    if not spec.subnet_id:
        raise _bad(f"{spec.offering} is ordered into a VPC: network.subnet_id must name a vSwitch (vsw-...) in "
                   f"{spec.zone or region}", "network.subnet_id", None)
    check_ids(PROVIDER, [("network.subnet_id", spec.subnet_id, _VSW, "a vSwitch id (vsw-...)"),
                         *(("network.security_group_ids", sg, _SG, "a security group id (sg-...)")
                           for sg in spec.security_group_ids),
                         ("network.vpc_id", spec.vpc_id, _VPC, "a VPC id (vpc-...)"),
                         ("ssh.key_pair", spec.key_name or None, _KEY_PAIR,
                          "an ECS key pair name (2-128 characters, starting with a letter)")])
    if spec.capacity_reservation_id or spec.capacity_block:
        raise _bad("capacity reservations and Capacity Blocks are AWS features; the Alibaba driver orders "
                   "pay-as-you-go, spot or subscription", "capacity.reservation_id", spec.capacity_reservation_id)
    allowed = tuple((billing or {}).get(spec.offering, BILLING))
    if spec.billing not in allowed:
        raise _bad(f"billing {spec.billing.value!r} is not sold for {spec.offering} (sold: "
                   f"{', '.join(b.value for b in allowed)})", "capacity.billing", spec.billing.value)
    _validate_disks(spec)
    check_tags(node_tags(spec))
    _validate_network(spec)
    if spec.user_data and len(spec.user_data.encode()) > USER_DATA_MAX:
        raise _bad(f"user data is {len(spec.user_data.encode())} bytes; ECS allows {USER_DATA_MAX}",
                   "user_data", len(spec.user_data.encode()))


def _validate_disks(spec: NodeSpec) -> None:
    if len(spec.data_volumes) > MAX_DATA_DISKS:
        raise _bad(f"at most {MAX_DATA_DISKS} data disks", "storage.data", len(spec.data_volumes))
    volumes = [("storage.root", spec.root_volume, SYSTEM_DISK_SIZE)] + [
        (f"storage.data.{i}", v, DATA_DISK_SIZE) for i, v in enumerate(spec.data_volumes)]
    for path, v, sizes in volumes:
        category = disk_category(v)
        if category not in DISK_CATEGORIES:
            raise _bad(f"disk type {v.volume_type!r} is not a cloud disk category the driver orders for an ECS "
                       f"Bare Metal GPU instance ({', '.join(DISK_CATEGORIES)}; gp3, the spec's default, means "
                       "cloud_essd; cloud_essd_entry is for the u1 and e families only)", f"{path}.type",
                       v.volume_type)
        low, high = sizes[category]
        if not low <= v.size_gib <= high:
            raise _bad(f"disk size {v.size_gib} GiB is outside {low}..{high}", f"{path}.size_gib", v.size_gib)
        if v.kms_key_id and not _KMS.match(v.kms_key_id):
            raise _bad(f"{v.kms_key_id!r} is not a KMS key id (key-..., a key UUID, alias/... or acs:kms ARN)",
                       f"{path}.kms_key_id", v.kms_key_id)
        if v.kms_key_id and not v.encrypted:
            raise _bad("a KMS key is set on a disk with encrypted: false", f"{path}.encrypted", v.encrypted)


def _validate_network(spec: NodeSpec) -> None:
    check_ssh_access(spec, PROVIDER)
    check_placement(spec, PROVIDER, _STRATEGIES, partitions_max=PARTITIONS_MAX,
                    limit=f"a deployment set with strategy AvailabilityGroup has at most {PARTITIONS_MAX} groups")
    if not spec.placement_group:
        return
    if not re.fullmatch(r"[A-Za-z\u4e00-\u9fa5][A-Za-z0-9\u4e00-\u9fa5:_-]{1,127}", spec.placement_group):
        raise _bad(f"{spec.placement_group!r} is not a deployment set name (2-128 letters, digits, colons, "
                   "underscores and hyphens, starting with a letter)", "placement.group_name", spec.placement_group)
