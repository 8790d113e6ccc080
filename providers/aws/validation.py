"""Offline checks of a NodeSpec against EC2's rules: a bad spec fails here, before any API call.

Every error is an InvalidSpecError naming the cluster-spec field and the value at fault. The tag rules
(:func:`tag_problems`) are the one tag check: ``validate`` applies them to the tags a node would carry,
``set_tags`` to the tags it writes, and the cluster spec to the user's tags at parse time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import InvalidSpecError
from ..models import BillingModel, NodeSpec
from ..tags import ACCEPTANCE_TAGS, NODE_TAGS, TAG_PUBLIC_IP
from ..validation import (
    check_ids,
    check_node_basics,
    check_placement,
    check_ssh_access,
    raise_first_problem,
    spread_problem,
)
from .errors import PROVIDER
from .request import DATA_DEVICES, USER_DATA_MAX, node_tags

if TYPE_CHECKING:
    from ..record import Problem
    from ..spec import ClusterSpec

__all__ = ["MAX_TAGS", "PARTITIONS_MAX", "SOLD_BILLING", "SPREAD_MAX_PER_ZONE", "check_tags", "spec_problems",
           "tag_problems", "validate_node_spec"]

_AMI = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
_SG = re.compile(r"^sg-[0-9a-f]{8}([0-9a-f]{9})?$")
_VPC = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
_CR = re.compile(r"^cr-[0-9a-f]{17}$")
_KMS_ID = r"(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
_KMS = re.compile(rf"^({_KMS_ID}|alias/[A-Za-z0-9/_-]+|arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{{12}}:"
                  rf"(key/{_KMS_ID}|alias/[A-Za-z0-9/_-]+))$")
_VOLUME_TYPES = {"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}
#: Spread placement: EC2 runs at most this many instances per Availability Zone per group.
SPREAD_MAX_PER_ZONE = 7
#: Partition placement: at most this many partitions per Availability Zone.
PARTITIONS_MAX = 7
_STRATEGIES = ("cluster", "spread", "partition")
#: The billing models the AWS driver orders (spot is not ordered; monthly terms are not sold).
SOLD_BILLING = (BillingModel.ON_DEMAND, BillingModel.RESERVED_1Y, BillingModel.RESERVED_3Y,
                BillingModel.CAPACITY_BLOCK)

# -- tags ---------------------------------------------------------------------------------------
#: At most this many tags per EC2 resource, metalfleet's own included.
MAX_TAGS = 50
_TAG_PUNCTUATION = frozenset(" +-=._:/@")


def _portable(text: str) -> bool:
    return all(c.isalnum() or c in _TAG_PUNCTUATION for c in text)


def tag_problems(tags: Mapping[str, str], *, portable: bool = True, count: bool = True,
                 public_ip: bool = False) -> list[tuple[str, str, str]]:
    """``(field, value, why)`` for each way ``tags`` break AWS's tag rules, in order; [] when they keep them.

    Keys are 1-128 characters, values up to 256, and a key may not start with ``aws:``. ``portable``: keys
    and values use only letters, digits, spaces and ``+ - = . _ : / @`` (the set every AWS service accepts;
    EC2 alone is laxer, so the acceptance gate's free-text reason tag is checked without it). ``count``: with
    metalfleet's own tags (and room for the gate's two) a resource carries at most 50.
    """
    out: list[tuple[str, str, str]] = []
    for key, value in tags.items():
        key, value = str(key), str(value)
        field = f"tags.{key}"
        if not 1 <= len(key) <= 128:
            out.append((field, key, f"tag key {key!r} is {len(key)} characters; AWS allows 1-128"))
        elif key.lower().startswith("aws:"):
            out.append((field, key, f"tag key {key!r}: the aws: prefix is reserved for AWS"))
        elif portable and not _portable(key):
            out.append((field, key, f"tag key {key!r} has characters AWS does not allow in tags (letters, digits, "
                                    "spaces and + - = . _ : / @ only)"))
        if len(value) > 256:
            out.append((field, value, f"tag {key!r}: its value is {len(value)} characters; AWS allows 256"))
        elif portable and not _portable(value):
            out.append((field, value, f"tag {key!r}: its value {value!r} has characters AWS does not allow in tags "
                                      "(letters, digits, spaces and + - = . _ : / @ only)"))
    if count:
        own = set(NODE_TAGS) | set(ACCEPTANCE_TAGS) | ({TAG_PUBLIC_IP} if public_ip else set())
        total = len(set(map(str, tags)) | own)
        if total > MAX_TAGS:
            out.append(("tags", str(len(tags)), f"{len(tags)} tags, {total} with metalfleet's own "
                                                f"({', '.join(sorted(own))}); AWS allows {MAX_TAGS} per resource"))
    return out


def check_tags(tags: Mapping[str, str], *, portable: bool = True, count: bool = True, public_ip: bool = False) -> None:
    """Raise an InvalidSpecError (``field="tags.<key>"``, the bad key or value) for the first of
    :func:`tag_problems`; the one tag check this driver makes, before any call."""
    raise_first_problem(tag_problems(tags, portable=portable, count=count, public_ip=public_ip), PROVIDER)


# -- the cluster spec and the node spec ---------------------------------------------------------
def spec_problems(spec: ClusterSpec) -> list[Problem]:
    """What EC2 would refuse about the whole cluster, before any call: a spread group holds 7 nodes per zone."""
    why = spread_problem(spec.count, SPREAD_MAX_PER_ZONE) if spec.placement.strategy == "spread" else None
    return [("placement.strategy", "spread", why)] if why else []


def _bad(message: str, field: str, value: object) -> InvalidSpecError:
    return InvalidSpecError(message, field=field, value=value, provider=PROVIDER)


def validate_node_spec(spec: NodeSpec, region: str, offerings: Sequence[str]) -> None:
    """Check ``spec`` as EC2 would, offline, for a driver in ``region`` that orders ``offerings``."""
    check_node_basics(spec, PROVIDER, region, offerings, "an AMI id such as ami-0123456789abcdef0",
                      r"(-[a-z0-9]+-\d+)?[a-z]")
    if not (_AMI.match(spec.image) or spec.image.startswith("resolve:ssm:")):
        raise _bad(f"image {spec.image!r} is not an AMI id (ami-...) or resolve:ssm:<parameter>", "image",
                   spec.image)
    if spec.image.startswith("resolve:ssm:") and not spec.root_volume.device_name:
        raise _bad("an image given as resolve:ssm: needs storage.root.device_name (the AMI's root device, "
                   "e.g. /dev/sda1), or the root volume cannot be encrypted as asked",
                   "storage.root.device_name", None)
    if not spec.subnet_id:
        raise _bad(f"{spec.offering} is ordered with EFA, which needs network.subnet_id (a subnet in "
                   f"{spec.zone or region})", "network.subnet_id", None)
    check_ids(PROVIDER, [("network.subnet_id", spec.subnet_id, _SUBNET, "a subnet id (subnet-...)"),
                         *(("network.security_group_ids", sg, _SG, "a security group id (sg-...)")
                           for sg in spec.security_group_ids),
                         ("network.vpc_id", spec.vpc_id, _VPC, "a VPC id (vpc-...)")])
    _validate_capacity(spec)
    _validate_volumes(spec)
    check_tags(node_tags(spec), public_ip=spec.public_ip)
    _validate_network(spec)
    if spec.user_data and len(spec.user_data.encode()) > USER_DATA_MAX:
        raise _bad(f"user data is {len(spec.user_data.encode())} bytes; EC2 allows {USER_DATA_MAX}",
                   "user_data", len(spec.user_data.encode()))


def _validate_capacity(spec: NodeSpec) -> None:
    if spec.billing not in SOLD_BILLING:
        raise _bad(f"billing {spec.billing.value!r} is not supported by the AWS driver (on_demand, reserved_1y, "
                   "reserved_3y, capacity_block)", "capacity.billing", spec.billing.value)
    if spec.billing == BillingModel.CAPACITY_BLOCK and not spec.capacity_block:
        raise _bad("billing capacity_block needs capacity.capacity_block: true and the block's reservation_id",
                   "capacity.capacity_block", spec.capacity_block)
    if spec.capacity_block and not spec.capacity_reservation_id:
        raise _bad("capacity_block: true needs capacity.reservation_id (the Capacity Block's cr-... id)",
                   "capacity.reservation_id", None)
    if spec.capacity_reservation_id and not _CR.match(spec.capacity_reservation_id):
        raise _bad(f"{spec.capacity_reservation_id!r} is not a capacity reservation id (cr- and 17 hex digits)",
                   "capacity.reservation_id", spec.capacity_reservation_id)


def _validate_volumes(spec: NodeSpec) -> None:
    volumes = [("storage.root", spec.root_volume)] + [(f"storage.data.{i}", v)
                                                      for i, v in enumerate(spec.data_volumes)]
    if len(spec.data_volumes) > len(DATA_DEVICES):
        raise _bad(f"at most {len(DATA_DEVICES)} data volumes", "storage.data", len(spec.data_volumes))
    for path, v in volumes:
        if v.volume_type not in _VOLUME_TYPES:
            raise _bad(f"volume type {v.volume_type!r} is not an EBS type ({', '.join(sorted(_VOLUME_TYPES))})",
                       f"{path}.type", v.volume_type)
        if not 1 <= v.size_gib <= 65536:
            raise _bad(f"volume size {v.size_gib} GiB is outside 1..65536", f"{path}.size_gib", v.size_gib)
        if v.kms_key_id and not _KMS.match(v.kms_key_id):
            raise _bad(f"{v.kms_key_id!r} is not a KMS key id, alias/... or key ARN", f"{path}.kms_key_id",
                       v.kms_key_id)
        if v.kms_key_id and not v.encrypted:
            raise _bad("a KMS key is set on a volume with encrypted: false", f"{path}.encrypted", v.encrypted)


def _validate_network(spec: NodeSpec) -> None:
    """The network and placement fields, checked as EC2 would check them (offline)."""
    check_ssh_access(spec, PROVIDER)
    check_placement(spec, PROVIDER, _STRATEGIES, partitions_max=PARTITIONS_MAX,
                    limit="the most partitions EC2 allows per Availability Zone")
    if spec.placement_group and spec.placement_strategy == "spread":
        why = spread_problem(spec.index + 1, SPREAD_MAX_PER_ZONE)
        if why:
            raise _bad(f"node {spec.name}: {why}", "placement.strategy", "spread")
