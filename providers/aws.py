"""AWS EC2 driver for GPU nodes: P5, P5en, P4de and P4d with an EFA interface on every network card.

boto3 is imported here only, and only when a driver is built or used, so ``import metalfleet.providers``
stays SDK-free and a missing ``metalfleet[aws]`` extra surfaces as the registry's install hint.

What ``order`` sends, per node:

* one EFA interface per network card: card 0 carries the primary interface (DeviceIndex 0), every other
  card an interface at DeviceIndex 1 (the layout AWS documents for P5/P4d), all ``InterfaceType=efa``;
* a placement group with the spec's strategy (cluster, spread or partition; created if absent) and a
  per-cluster security group whose rules let members reach each other on all traffic, in and out, as EFA
  requires, plus SSH (``ssh.port``) from each of ``network.ssh_ingress_cidrs`` (unless the spec names its own
  groups, which are used as they are); both are made in the subnet's VPC, which must be ``network.vpc_id``
  when the spec names one, and both are tagged ``metalfleet:cluster`` so releasing the cluster removes them
  (``release_cluster_resources``; a group metalfleet did not make is never touched);
* IMDSv2 only, encrypted root and data volumes (with the spec's KMS key), tags on the instance, its
  volumes and its interfaces; no public IPv4 unless ``public_ip`` (then an Elastic IP, since AWS cannot
  auto-assign one to an instance launched with several interfaces);
* ``ClientToken`` = the node's idempotency key, so a re-run after a crash or a retry returns the instance
  the first attempt bought instead of buying another.

Before anything is made, the spec's KMS keys are looked up (KMS DescribeKey, once per key): a key that
does not exist or is not enabled is an InvalidSpecError naming the volume's ``kms_key_id``, where EC2
would accept the launch and then terminate the instance (``Client.InvalidKMSKey.InvalidState``).

Optional capabilities beyond the contract: ``set_tags`` (CreateTags; the acceptance gate tags quarantined
nodes with it), the cluster resources of :class:`~metalfleet.providers.contract.ClusterResourcesDriver`
(``prepare_cluster``, ``cluster_resources``, ``release_cluster_resources``) and ``host_keys`` (the SSH
host keys cloud-init printed to the instance's console, which ``wait`` puts in ``node.extra["host_keys"]``
for bootstrap to pin; empty while the console has none yet).

botocore's own retries are off: :mod:`metalfleet.providers.retry` alone decides what to retry, and every
botocore exception is translated at this module's boundary into :mod:`metalfleet.providers.errors`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import resources
from typing import Any

from .contract import ProgressCallback
from .errors import (
    AuthError,
    CapacityError,
    ConflictError,
    InvalidSpecError,
    MetalfleetError,
    NotFoundError,
    ProviderError,
    QuotaError,
    RateLimitedError,
    TimeoutError,
    TransientError,
)
from .models import BillingModel, Fabric, Interconnect, Node, NodeSpec, NodeState, Offering, Price, VolumeSpec

__all__ = ["STATE_TABLE", "AwsDriver", "check_tags", "host_keys_from_console", "tag_problems", "translate_client_error"]

PROVIDER = "aws"


@dataclass(frozen=True)
class _Hardware:
    """What DescribeInstanceTypes does not say: NVLink bandwidth per GPU and the EFA total AWS quotes."""

    interconnect_gbps: float
    fabric_gbps: float


#: The offerings this driver sells, in the order ``offerings()`` lists them.
HARDWARE: Mapping[str, _Hardware] = {
    "p5.48xlarge": _Hardware(interconnect_gbps=900.0, fabric_gbps=3200.0),
    "p5en.48xlarge": _Hardware(interconnect_gbps=900.0, fabric_gbps=3200.0),
    "p4de.24xlarge": _Hardware(interconnect_gbps=600.0, fabric_gbps=400.0),
    "p4d.24xlarge": _Hardware(interconnect_gbps=600.0, fabric_gbps=400.0),
}

#: EC2 instance state name -> neutral state; anything else is UNKNOWN.
STATE_TABLE: Mapping[str, NodeState] = {
    "pending": NodeState.PENDING,
    "running": NodeState.RUNNING,
    "stopping": NodeState.STOPPING,
    "stopped": NodeState.STOPPED,
    "shutting-down": NodeState.TERMINATING,
    "terminated": NodeState.TERMINATED,
}
_LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]

TAG_CLUSTER = "metalfleet:cluster"
TAG_INDEX = "metalfleet:index"
TAG_KEY = "metalfleet:key"
TAG_PUBLIC_IP = "metalfleet:public-ip"

_AMI = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$")
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
_SG = re.compile(r"^sg-[0-9a-f]{8}([0-9a-f]{9})?$")
_VPC = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?$")
_CR = re.compile(r"^cr-[0-9a-f]{17}$")
_KMS_ID = r"(mrk-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
_KMS = re.compile(rf"^({_KMS_ID}|alias/[A-Za-z0-9/_-]+|arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{{12}}:"
                  rf"(key/{_KMS_ID}|alias/[A-Za-z0-9/_-]+))$")
_VOLUME_TYPES = {"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}
_DATA_DEVICES = [f"/dev/sd{c}" for c in "fghijklmnopqrstuvwxyz"]
_USER_DATA_MAX = 16 * 1024
#: Spread placement: EC2 runs at most this many instances per Availability Zone per group.
SPREAD_MAX_PER_ZONE = 7
#: Partition placement: at most this many partitions per Availability Zone.
PARTITIONS_MAX = 7
_STRATEGIES = ("cluster", "spread", "partition")

# -- tags ---------------------------------------------------------------------------------------
#: At most this many tags per EC2 resource, metalfleet's own included.
MAX_TAGS = 50
#: The tags metalfleet puts on every instance (and its volumes and interfaces) ...
_OWN_TAGS = ("Name", TAG_CLUSTER, TAG_INDEX, TAG_KEY)
#: ... and the two the acceptance gate may add later (room is kept for them).
_GATE_TAGS = ("metalfleet:acceptance", "metalfleet:acceptance-reason")
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
        own = set(_OWN_TAGS) | set(_GATE_TAGS) | ({TAG_PUBLIC_IP} if public_ip else set())
        total = len(set(map(str, tags)) | own)
        if total > MAX_TAGS:
            out.append(("tags", str(len(tags)), f"{len(tags)} tags, {total} with metalfleet's own "
                                                f"({', '.join(sorted(own))}); AWS allows {MAX_TAGS} per resource"))
    return out


def check_tags(tags: Mapping[str, str], *, portable: bool = True, count: bool = True, public_ip: bool = False) -> None:
    """Raise an InvalidSpecError (``field="tags.<key>"``, the bad key or value) for the first of
    :func:`tag_problems`; the one tag check this driver makes, before any call."""
    problems = tag_problems(tags, portable=portable, count=count, public_ip=public_ip)
    if problems:
        field, value, why = problems[0]
        raise InvalidSpecError(why, field=field, value=value, provider=PROVIDER)


# -- error translation -------------------------------------------------------------------------
_CAPACITY = {"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
             "InsufficientReservedInstanceCapacity", "ReservationCapacityExceeded", "InsufficientCapacityOnHost",
             "InsufficientAddressCapacity"}
_THROTTLE = {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
             "RequestThrottledException", "TooManyRequestsException", "SlowDown", "PriorRequestNotComplete"}
_AUTH = {"AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch", "OptInRequired",
         "Blocked", "ExpiredToken", "RequestExpired", "AccessDenied", "AccessDeniedException",
         "IncompleteSignature", "MissingAuthenticationToken", "PendingVerification"}
_QUOTA = {"InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "ResourceLimitExceeded",
          "AddressLimitExceeded", "SecurityGroupLimitExceeded", "RulesPerSecurityGroupLimitExceeded",
          "PlacementGroupLimitExceeded", "VolumeLimitExceeded", "NetworkInterfaceLimitExceeded"}
_TRANSIENT = {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable", "ServerInternal",
              "EC2ThrottledException"}
_INVALID = {"InvalidParameter", "InvalidParameterValue", "InvalidParameterCombination", "MissingParameter",
            "UnknownParameter", "ValidationError", "InvalidInstanceType", "Unsupported", "UnsupportedOperation",
            "InvalidBlockDeviceMapping", "InvalidUserData.Malformed", "InvalidInput",
            "AttachmentLimitExceeded"}  # more interfaces than the instance type has: a fixed limit, not a quota
#: Error code prefix -> the cluster-spec field it is about (so the user is told what to fix).
_FIELD_OF_CODE: tuple[tuple[str, str], ...] = (
    ("InvalidSubnetID", "network.subnet_id"),
    ("InvalidSubnet", "network.subnet_id"),
    ("InvalidAMIID", "image"),
    ("InvalidGroup", "network.security_group_ids"),
    ("InvalidSecurityGroupID", "network.security_group_ids"),
    ("InvalidKeyPair", "key_name"),
    ("InvalidCapacityReservationId", "capacity.reservation_id"),
    ("InvalidPlacementGroup", "placement.group_name"),
    ("InvalidKMSKey", "storage.kms_key_id"),
    ("KMS.", "storage.kms_key_id"),
    ("InvalidBlockDeviceMapping", "storage"),
    ("InvalidInstanceType", "offering"),
)


def _field_of(code: str) -> str | None:
    return next((f for prefix, f in _FIELD_OF_CODE if code.startswith(prefix)), None)


def translate_client_error(exc: Any, action: str, *, zone: str | None = None,
                           instance_type: str | None = None) -> MetalfleetError:
    """The metalfleet error for a botocore ``ClientError`` raised by EC2 ``action``."""
    response: Mapping[str, Any] = getattr(exc, "response", None) or {}
    error = response.get("Error") or {}
    meta = response.get("ResponseMetadata") or {}
    code = str(error.get("Code") or "Unknown")
    message = str(error.get("Message") or exc)
    status = int(meta.get("HTTPStatusCode") or 0)
    kw: dict[str, Any] = {"provider": PROVIDER, "code": code, "request_id": meta.get("RequestId")}
    text = f"EC2 {action}: {message}"
    if code in _CAPACITY:
        what = instance_type or "instance"
        where = zone or "the requested zone"
        return CapacityError(f"EC2 has no {what} capacity in {where} ({code}): {message}", zone=zone, **kw)
    if code in _THROTTLE:
        return RateLimitedError(text, **kw)
    if code in _AUTH:
        return AuthError(f"{text} (check the AWS credentials and their IAM permissions)", **kw)
    if code in _QUOTA or (code.endswith("LimitExceeded") and code not in _INVALID):
        return QuotaError(f"{text} (request a quota increase; retrying will not help)", **kw)
    if code == "IdempotentParameterMismatch":
        return ConflictError(f"{text} (the node's idempotency key was used before with other settings; "
                             "bump its generation to order a replacement)", **kw)
    field = _field_of(code)
    if field and not code.endswith("LimitExceeded"):
        return InvalidSpecError(text, field=field, **kw)
    if code.endswith(".NotFound") or code.endswith(".Unknown"):
        return NotFoundError(text, **kw)
    if code in _INVALID or code.startswith("InvalidParameter") or code.endswith(".Malformed"):
        return InvalidSpecError(text, **kw)
    if code in _TRANSIENT or status >= 500:
        return TransientError(text, **kw)
    return ProviderError(text, **kw)


# -- host keys from the console ---------------------------------------------------------------------
HOST_KEYS_BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
HOST_KEYS_END = "-----END SSH HOST KEY KEYS-----"
_KEY_LINE = re.compile(r"(?:ssh-(?:ed25519|rsa|dss)|ecdsa-sha2-nistp(?:256|384|521)|sk-[A-Za-z0-9@.-]+)"
                       r"[ \t]+[A-Za-z0-9+/]+={0,3}(?:[ \t]+\S+)?")


def host_keys_from_console(text: str) -> tuple[str, ...]:
    """The key lines cloud-init printed between ``-----BEGIN/END SSH HOST KEY KEYS-----`` (the last
    complete block: a console holds every boot's output); () when there is none (yet)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.replace("\r", "\n").split("\n"):
        if HOST_KEYS_BEGIN in line:
            current = []
        elif HOST_KEYS_END in line:
            if current is not None:
                blocks.append(current)
            current = None
        elif current is not None:
            match = _KEY_LINE.search(line)
            if match:
                current.append(match.group(0).strip())
    keys = next((b for b in reversed(blocks) if b), [])
    return tuple(dict.fromkeys(keys))


# -- prices ------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _price_table() -> dict[str, Any]:
    raw = resources.files("metalfleet.providers").joinpath("data/aws_prices.json").read_text()
    table: dict[str, Any] = json.loads(raw)
    return table


def prices_for(region: str, instance_type: str) -> tuple[Price, ...]:
    """The shipped, dated list prices for ``instance_type`` in ``region`` (empty where unknown)."""
    table = _price_table()
    entry = table["regions"].get(region, {}).get(instance_type, {})
    as_of = date.fromisoformat(table["as_of"])
    source = f"{table['source']} (region {region})"
    out = []
    for billing in BillingModel:
        if billing.value in entry:
            out.append(Price(billing, float(entry[billing.value]), table["currency"], as_of, source))
    return tuple(out)


@dataclass
class _Net:
    """What a cluster's nodes share, looked up or created once per driver."""

    vpc_id: str
    zone: str
    security_group_ids: tuple[str, ...]


class AwsDriver:
    """Order GPU nodes on EC2. Credentials come from the standard AWS chain (env, config, profile, role).

    ``endpoint_url`` (or the standard ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_EC2``) points it at another
    EC2 API, such as the test emulator. The driver holds only plain configuration; its boto3 client is
    built on first use and is not pickled.
    """

    name = PROVIDER

    def __init__(
        self,
        region: str = "us-east-1",
        endpoint_url: str | None = None,
        profile: str | None = None,
        *,
        poll: float = 5.0,
        max_pool_connections: int = 64,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
    ) -> None:
        import boto3  # noqa: F401  (fail at construction when the aws extra is missing)

        self.region = region
        self.endpoint_url = endpoint_url
        self.profile = profile
        self.poll = float(poll)
        self.max_pool_connections = int(max_pool_connections)
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._client: Any = None
        self._kms_client: Any = None
        self._lock = threading.Lock()
        self._lookup_lock = threading.RLock()  # fills the caches below once, even with 64 threads asking
        self._types: dict[str, dict[str, Any]] | None = None
        self._subnets: dict[str, dict[str, Any]] = {}
        self._root_devices: dict[str, str] = {}
        self._seen: dict[str, Node] = {}  # last full view of each instance this driver ordered or read
        self._host_keys: dict[str, tuple[str, ...]] = {}  # instance -> keys read from its console (never empty)
        self._nets: dict[tuple[Any, ...], _Net] = {}
        self._net_locks: dict[tuple[Any, ...], threading.Lock] = {}
        self._kms_ok: set[str] = set()  # KMS keys DescribeKey found enabled

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("region", "endpoint_url", "profile", "poll", "max_pool_connections",
                                              "connect_timeout", "read_timeout")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        where = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"AwsDriver(region={self.region!r}{where})"

    # -- plumbing --------------------------------------------------------------------------
    def _ec2(self) -> Any:
        if self._client is None:
            with self._lock, self._api("CreateClient"):
                if self._client is None:
                    import boto3
                    from botocore.config import Config

                    session = boto3.session.Session(profile_name=self.profile, region_name=self.region)
                    config = Config(
                        region_name=self.region,
                        retries={"total_max_attempts": 1, "mode": "standard"},
                        max_pool_connections=self.max_pool_connections,
                        connect_timeout=self.connect_timeout,
                        read_timeout=self.read_timeout,
                        user_agent_extra="metalfleet",
                    )
                    self._client = session.client("ec2", endpoint_url=self.endpoint_url, config=config)
                    # KMS, for DescribeKey on the spec's volume keys; endpoint_url (a local emulator) serves both
                    self._kms_client = session.client("kms", endpoint_url=self.endpoint_url, config=config)
        return self._client

    def _kms(self) -> Any:
        self._ec2()
        return self._kms_client

    @contextlib.contextmanager
    def _api(self, action: str, *, zone: str | None = None, instance_type: str | None = None) -> Iterator[None]:
        """The one boundary: every botocore exception leaves as a metalfleet error, chained."""
        from botocore import exceptions as bx
        from botocore.parsers import ResponseParserError

        try:
            yield
        except bx.ClientError as exc:
            raise translate_client_error(exc, action, zone=zone, instance_type=instance_type) from exc
        except (bx.NoCredentialsError, bx.PartialCredentialsError, bx.CredentialRetrievalError,
                bx.ProfileNotFound, bx.TokenRetrievalError) as exc:
            raise AuthError(f"EC2 {action}: no usable AWS credentials ({type(exc).__name__})",
                            provider=PROVIDER, code=type(exc).__name__) from exc
        except (bx.ConnectionError, bx.HTTPClientError, ResponseParserError) as exc:
            raise TransientError(f"EC2 {action}: {exc}", provider=PROVIDER, code=type(exc).__name__) from exc
        except bx.BotoCoreError as exc:
            raise ProviderError(f"EC2 {action}: {exc}", provider=PROVIDER, code=type(exc).__name__) from exc

    def _instance_types(self) -> dict[str, dict[str, Any]]:
        with self._lookup_lock:
            if self._types is None:
                types: dict[str, dict[str, Any]] = {}
                with self._api("DescribeInstanceTypes"):  # filtered answers may still come in pages
                    for page in self._ec2().get_paginator("describe_instance_types").paginate(
                            Filters=[{"Name": "instance-type", "Values": list(HARDWARE)}]):
                        types.update({t["InstanceType"]: t for t in page.get("InstanceTypes", [])})
                self._types = types
            return self._types

    def _type_info(self, offering: str) -> dict[str, Any]:
        info = self._instance_types().get(offering)
        if info is None:
            raise InvalidSpecError(f"{offering} is not offered in {self.region}", field="offering", value=offering,
                                   provider=PROVIDER)
        return info

    @staticmethod
    def _fabric_cards(info: Mapping[str, Any]) -> int:
        net = info.get("NetworkInfo", {})
        cards = int(net.get("MaximumNetworkCards") or 1)
        efa = int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)
        return min(cards, efa) if efa else 0

    # -- offerings -------------------------------------------------------------------------
    def offerings(self) -> list[Offering]:
        types = self._instance_types()
        return [self._offering(types[name]) for name in HARDWARE if name in types]

    def _offering(self, info: Mapping[str, Any]) -> Offering:
        name = str(info["InstanceType"])
        hw = HARDWARE[name]
        gpu = (info.get("GpuInfo") or {}).get("Gpus", [{}])[0]
        net = info.get("NetworkInfo") or {}
        cards = net.get("NetworkCards") or []
        fabric_gbps = sum(float(c.get("BaselineBandwidthInGbps") or 0) for c in cards) or hw.fabric_gbps
        disks = (info.get("InstanceStorageInfo") or {}).get("Disks") or [{}]
        return Offering(
            provider=PROVIDER,
            name=name,
            gpu_model=str(gpu.get("Name", "")),
            gpu_count=int(gpu.get("Count", 0)),
            gpu_memory_gib=int(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)) // 1024,
            interconnect=Interconnect.NVSWITCH,
            interconnect_gbps=hw.interconnect_gbps,
            fabric=Fabric.EFA if net.get("EfaSupported") else Fabric.NONE,
            fabric_cards=self._fabric_cards(info),
            fabric_gbps=fabric_gbps,
            vcpus=int((info.get("VCpuInfo") or {}).get("DefaultVCpus", 0)),
            memory_gib=int((info.get("MemoryInfo") or {}).get("SizeInMiB", 0)) // 1024,
            nvme_count=int(disks[0].get("Count", 0)),
            nvme_size_gib=int(disks[0].get("SizeInGB", 0)) * 10**9 // 2**30,
            bare_metal=bool(info.get("BareMetal", False)),
            prices=prices_for(self.region, name),
            extra={"network_cards": int(net.get("MaximumNetworkCards") or 0),
                   "efa_max_interfaces": int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0),
                   "network_performance": net.get("NetworkPerformance"),
                   "ena_srd": bool(net.get("EnaSrdSupported", False)),
                   "whole_host": True},
        )

    # -- validate (offline) ----------------------------------------------------------------
    def validate(self, spec: NodeSpec) -> None:
        def bad(message: str, field: str, value: object) -> InvalidSpecError:
            return InvalidSpecError(message, field=field, value=value, provider=PROVIDER)

        if spec.offering not in HARDWARE:
            raise bad(f"unknown offering {spec.offering!r} for provider aws (supported: {', '.join(HARDWARE)})",
                      "offering", spec.offering)
        if not spec.image:
            raise bad("image is required: an AMI id such as ami-0123456789abcdef0", "image", spec.image)
        if not (_AMI.match(spec.image) or spec.image.startswith("resolve:ssm:")):
            raise bad(f"image {spec.image!r} is not an AMI id (ami-...) or resolve:ssm:<parameter>", "image",
                      spec.image)
        if spec.image.startswith("resolve:ssm:") and not spec.root_volume.device_name:
            raise bad("an image given as resolve:ssm: needs storage.root.device_name (the AMI's root device, "
                      "e.g. /dev/sda1), or the root volume cannot be encrypted as asked",
                      "storage.root.device_name", None)
        if spec.region != self.region:
            raise bad(f"region {spec.region!r} differs from the driver's region {self.region!r}", "region",
                      spec.region)
        if spec.zone and not re.fullmatch(rf"{re.escape(self.region)}(-[a-z0-9]+-\d+)?[a-z]", spec.zone):
            raise bad(f"zone {spec.zone!r} is not in region {self.region}", "zone", spec.zone)
        if not spec.subnet_id:
            raise bad(f"{spec.offering} is ordered with EFA, which needs network.subnet_id (a subnet in "
                      f"{spec.zone or self.region})", "network.subnet_id", None)
        if not _SUBNET.match(spec.subnet_id):
            raise bad(f"{spec.subnet_id!r} is not a subnet id (subnet-...)", "network.subnet_id", spec.subnet_id)
        for sg in spec.security_group_ids:
            if not _SG.match(sg):
                raise bad(f"{sg!r} is not a security group id (sg-...)", "network.security_group_ids", sg)
        if spec.billing not in (BillingModel.ON_DEMAND, BillingModel.RESERVED_1Y, BillingModel.RESERVED_3Y,
                                BillingModel.CAPACITY_BLOCK):
            raise bad(f"billing {spec.billing.value!r} is not supported by the AWS driver (on_demand, reserved_1y, "
                      "reserved_3y, capacity_block)", "capacity.billing", spec.billing.value)
        if spec.billing == BillingModel.CAPACITY_BLOCK and not spec.capacity_block:
            raise bad("billing capacity_block needs capacity.capacity_block: true and the block's reservation_id",
                      "capacity.capacity_block", spec.capacity_block)
        if spec.capacity_block and not spec.capacity_reservation_id:
            raise bad("capacity_block: true needs capacity.reservation_id (the Capacity Block's cr-... id)",
                      "capacity.reservation_id", None)
        if spec.capacity_reservation_id and not _CR.match(spec.capacity_reservation_id):
            raise bad(f"{spec.capacity_reservation_id!r} is not a capacity reservation id (cr- and 17 hex digits)",
                      "capacity.reservation_id", spec.capacity_reservation_id)
        volumes = [("storage.root", spec.root_volume)] + [(f"storage.data.{i}", v)
                                                          for i, v in enumerate(spec.data_volumes)]
        if len(spec.data_volumes) > len(_DATA_DEVICES):
            raise bad(f"at most {len(_DATA_DEVICES)} data volumes", "storage.data", len(spec.data_volumes))
        for path, v in volumes:
            if v.volume_type not in _VOLUME_TYPES:
                raise bad(f"volume type {v.volume_type!r} is not an EBS type ({', '.join(sorted(_VOLUME_TYPES))})",
                          f"{path}.type", v.volume_type)
            if not 1 <= v.size_gib <= 65536:
                raise bad(f"volume size {v.size_gib} GiB is outside 1..65536", f"{path}.size_gib", v.size_gib)
            if v.kms_key_id and not _KMS.match(v.kms_key_id):
                raise bad(f"{v.kms_key_id!r} is not a KMS key id, alias/... or key ARN", f"{path}.kms_key_id",
                          v.kms_key_id)
            if v.kms_key_id and not v.encrypted:
                raise bad("a KMS key is set on a volume with encrypted: false", f"{path}.encrypted", v.encrypted)
        check_tags(self._tags(spec), public_ip=spec.public_ip)
        self._validate_network(spec, bad)
        if spec.user_data and len(spec.user_data.encode()) > _USER_DATA_MAX:
            raise bad(f"user data is {len(spec.user_data.encode())} bytes; EC2 allows {_USER_DATA_MAX}",
                      "user_data", len(spec.user_data.encode()))

    @staticmethod
    def _validate_network(spec: NodeSpec, bad: Any) -> None:
        """The network and placement fields, checked as EC2 would check them (offline)."""
        if spec.vpc_id and not _VPC.match(spec.vpc_id):
            raise bad(f"{spec.vpc_id!r} is not a VPC id (vpc-...)", "network.vpc_id", spec.vpc_id)
        for i, cidr in enumerate(spec.ssh_ingress_cidrs):
            try:
                ipaddress.ip_network(cidr, strict=True)
            except ValueError:
                raise bad(f"{cidr!r} is not a CIDR (e.g. 203.0.113.0/24)", f"network.ssh_ingress_cidrs[{i}]",
                          cidr) from None
        if spec.ssh_ingress_cidrs and spec.security_group_ids:
            raise bad("ssh_ingress_cidrs are rules on the security group metalfleet makes, and with "
                      "security_group_ids it makes none and changes none of yours: put the SSH rule in one of "
                      "your groups", "network.ssh_ingress_cidrs", list(spec.ssh_ingress_cidrs))
        if not 1 <= spec.ssh_port <= 65535:
            raise bad(f"port {spec.ssh_port} is outside 1..65535", "ssh.port", spec.ssh_port)
        if not spec.placement_group:
            return
        if spec.placement_strategy not in _STRATEGIES:
            raise bad(f"placement strategy {spec.placement_strategy!r} is not one of {', '.join(_STRATEGIES)}",
                      "placement.strategy", spec.placement_strategy)
        if spec.placement_strategy == "spread" and spec.index >= SPREAD_MAX_PER_ZONE:
            raise bad(f"node {spec.name}: a spread placement group runs at most {SPREAD_MAX_PER_ZONE} instances per "
                      f"Availability Zone, and every node of the cluster is in the subnet's zone: use at most "
                      f"{SPREAD_MAX_PER_ZONE} nodes, or strategy partition", "placement.strategy", "spread")
        partitions = spec.placement_partitions
        if spec.placement_strategy == "partition" and (partitions is None or not 1 <= partitions <= PARTITIONS_MAX):
            raise bad(f"a partition placement group has 1-{PARTITIONS_MAX} partitions per Availability Zone, "
                      f"not {partitions}", "placement.partition_count", partitions)
        if spec.placement_strategy != "partition" and partitions is not None:
            raise bad(f"partition_count is for strategy partition, not {spec.placement_strategy}",
                      "placement.partition_count", partitions)

    # -- order -----------------------------------------------------------------------------
    @staticmethod
    def _tags(spec: NodeSpec) -> dict[str, str]:
        """The node's tags, sorted: the same spec must give byte-identical requests (ClientToken replays),
        whatever order its tags arrived in (a Pulumi round trip reorders them)."""
        tags = {"Name": spec.name, **spec.tags}
        tags.update({TAG_CLUSTER: spec.cluster, TAG_INDEX: str(spec.index), TAG_KEY: spec.idempotency_key})
        if spec.public_ip:
            tags[TAG_PUBLIC_IP] = "eip"
        return dict(sorted(tags.items()))

    def _subnet(self, subnet_id: str) -> dict[str, Any]:
        with self._lookup_lock:
            if subnet_id not in self._subnets:
                with self._api("DescribeSubnets"):
                    resp = self._ec2().describe_subnets(SubnetIds=[subnet_id])
                self._subnets[subnet_id] = resp["Subnets"][0]
            return self._subnets[subnet_id]

    def _root_device(self, spec: NodeSpec) -> str:
        if spec.root_volume.device_name:
            return spec.root_volume.device_name
        with self._lookup_lock:
            if spec.image not in self._root_devices:
                with self._api("DescribeImages"):
                    images = self._ec2().describe_images(ImageIds=[spec.image]).get("Images", [])
                if not images:
                    raise InvalidSpecError(f"image {spec.image} does not exist in {self.region}", field="image",
                                           value=spec.image, provider=PROVIDER, code="InvalidAMIID.NotFound")
                self._root_devices[spec.image] = str(images[0].get("RootDeviceName") or "/dev/sda1")
            return self._root_devices[spec.image]

    @staticmethod
    def _net_key(spec: NodeSpec) -> tuple[Any, ...]:
        return (spec.cluster, spec.subnet_id, spec.vpc_id, tuple(spec.security_group_ids), spec.placement_group,
                spec.placement_strategy, spec.placement_partitions, tuple(spec.ssh_ingress_cidrs), spec.ssh_port)

    def _network(self, spec: NodeSpec) -> _Net:
        """Subnet facts, placement group and security group for the spec's cluster: once per driver.

        Reads come first (the subnet, its zone and VPC), so a subnet outside ``network.vpc_id`` or the
        zone is refused before anything is made."""
        assert spec.subnet_id is not None
        key = self._net_key(spec)
        with self._lock:
            lock = self._net_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._nets:
                return self._nets[key]
            subnet = self._subnet(spec.subnet_id)
            zone, vpc_id = str(subnet["AvailabilityZone"]), str(subnet["VpcId"])
            if spec.zone and spec.zone != zone:
                raise InvalidSpecError(f"subnet {spec.subnet_id} is in {zone}, not in zone {spec.zone}",
                                       field="zone", value=spec.zone, provider=PROVIDER)
            if spec.vpc_id and spec.vpc_id != vpc_id:
                raise InvalidSpecError(f"subnet {spec.subnet_id} is in VPC {vpc_id}, not in network.vpc_id "
                                       f"{spec.vpc_id}", field="network.vpc_id", value=spec.vpc_id,
                                       provider=PROVIDER)
            if spec.placement_group:
                self._ensure_placement_group(spec.placement_group, spec.cluster, spec.placement_strategy,
                                             spec.placement_partitions)
            groups = tuple(spec.security_group_ids) or (self._ensure_security_group(
                spec.cluster, vpc_id, spec.ssh_ingress_cidrs, spec.ssh_port),)
            net = _Net(vpc_id=vpc_id, zone=zone, security_group_ids=groups)
            self._nets[key] = net
            return net

    def _ensure_placement_group(self, name: str, cluster: str, strategy: str = "cluster",
                                partitions: int | None = None) -> None:
        ec2 = self._ec2()
        with self._api("DescribePlacementGroups"):
            found = ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": [name]}])
        groups = found.get("PlacementGroups", [])
        if groups:
            group = groups[0]
            if group.get("Strategy") != strategy:
                raise InvalidSpecError(f"placement group {name} exists with strategy {group.get('Strategy')}, not "
                                       f"{strategy}: name another group_name, or delete that group",
                                       field="placement.group_name", value=name, provider=PROVIDER)
            if strategy == "partition" and partitions is not None and group.get("PartitionCount") != partitions:
                raise InvalidSpecError(f"placement group {name} exists with {group.get('PartitionCount')} "
                                       f"partitions, not {partitions}", field="placement.partition_count",
                                       value=partitions, provider=PROVIDER)
            return
        request: dict[str, Any] = {"GroupName": name, "Strategy": strategy, "TagSpecifications": [
            {"ResourceType": "placement-group", "Tags": [{"Key": TAG_CLUSTER, "Value": cluster}]}]}
        if strategy == "partition" and partitions is not None:
            request["PartitionCount"] = partitions
        try:
            with self._api("CreatePlacementGroup"):
                ec2.create_placement_group(**request)
        except InvalidSpecError as exc:  # another process created it between our look and our create
            if exc.code != "InvalidPlacementGroup.Duplicate":
                raise

    @staticmethod
    def _security_group_name(cluster: str) -> str:
        return f"metalfleet-{cluster}-efa"

    def _ensure_security_group(self, cluster: str, vpc_id: str, ssh_cidrs: Sequence[str] = (),
                               ssh_port: int = 22) -> str:
        """The cluster's own group in ``vpc_id``: all traffic between members (EFA) and SSH from
        ``ssh_cidrs``, no more: SSH rules of this group that the spec no longer lists are revoked."""
        ec2 = self._ec2()
        name = self._security_group_name(cluster)
        filters = [{"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc_id]}]
        with self._api("DescribeSecurityGroups"):
            groups = ec2.describe_security_groups(Filters=filters).get("SecurityGroups", [])
        if groups:
            group = groups[0]
        else:
            try:
                with self._api("CreateSecurityGroup"):
                    created = ec2.create_security_group(
                        GroupName=name, VpcId=vpc_id,
                        Description=f"metalfleet {cluster}: all traffic between the cluster's nodes (EFA), "
                                    "SSH from network.ssh_ingress_cidrs",
                        TagSpecifications=[{"ResourceType": "security-group",
                                            "Tags": [{"Key": TAG_CLUSTER, "Value": cluster},
                                                     {"Key": "Name", "Value": name}]}])
                group = {"GroupId": created["GroupId"]}  # new: no rules of ours yet
            except (InvalidSpecError, ProviderError) as exc:
                if exc.code != "InvalidGroup.Duplicate":
                    raise
                with self._api("DescribeSecurityGroups"):  # made by another process meanwhile
                    group = ec2.describe_security_groups(Filters=filters)["SecurityGroups"][0]
        group_id = str(group["GroupId"])
        rule = {"IpProtocol": "-1", "UserIdGroupPairs": [
            {"GroupId": group_id, "Description": "EFA: all traffic between members of this group"}]}

        def has_self_rule(perms: Sequence[Mapping[str, Any]]) -> bool:
            return any(p.get("IpProtocol") == "-1" and any(g.get("GroupId") == group_id
                                                           for g in p.get("UserIdGroupPairs", []))
                       for p in perms)

        def call(action: str, fn: str, perms: list[dict[str, Any]], tolerate: str) -> None:
            try:
                with self._api(action):
                    getattr(ec2, fn)(GroupId=group_id, IpPermissions=perms)
            except MetalfleetError as exc:
                if exc.code != tolerate:
                    raise

        for direction, perms in (("Ingress", group.get("IpPermissions", [])),
                                 ("Egress", group.get("IpPermissionsEgress", []))):
            if not has_self_rule(perms):
                call(f"AuthorizeSecurityGroup{direction}", f"authorize_security_group_{direction.lower()}",
                     [rule], "InvalidPermission.Duplicate")

        # SSH: exactly the spec's CIDRs on the spec's port (this group's tcp rules with addresses are all ours)
        want = {(ssh_port, ipaddress.ip_network(c).compressed) for c in ssh_cidrs}
        have: set[tuple[int, str]] = set()
        for p in group.get("IpPermissions", []):
            if p.get("IpProtocol") in ("tcp", "6") and p.get("FromPort") == p.get("ToPort"):
                have |= {(int(p["FromPort"]), r["CidrIp"]) for r in p.get("IpRanges", [])}
                have |= {(int(p["FromPort"]), r["CidrIpv6"]) for r in p.get("Ipv6Ranges", [])}

        def ssh_perms(rules: set[tuple[int, str]]) -> list[dict[str, Any]]:
            perms = []
            for port in sorted({p for p, _ in rules}):
                cidrs = sorted(c for p, c in rules if p == port)
                perm: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": port, "ToPort": port}
                v4 = [{"CidrIp": c, "Description": "SSH (network.ssh_ingress_cidrs)"} for c in cidrs if ":" not in c]
                v6 = [{"CidrIpv6": c, "Description": "SSH (network.ssh_ingress_cidrs)"} for c in cidrs if ":" in c]
                if v4:
                    perm["IpRanges"] = v4
                if v6:
                    perm["Ipv6Ranges"] = v6
                perms.append(perm)
            return perms

        if want - have:
            call("AuthorizeSecurityGroupIngress", "authorize_security_group_ingress", ssh_perms(want - have),
                 "InvalidPermission.Duplicate")
        if have - want:
            call("RevokeSecurityGroupIngress", "revoke_security_group_ingress", ssh_perms(have - want),
                 "InvalidPermission.NotFound")
        return group_id

    def _network_interfaces(self, spec: NodeSpec, net: _Net) -> list[dict[str, Any]]:
        cards = self._fabric_cards(self._type_info(spec.offering))
        return [{"NetworkCardIndex": card, "DeviceIndex": 0 if card == 0 else 1, "InterfaceType": "efa",
                 "SubnetId": spec.subnet_id, "Groups": list(net.security_group_ids), "DeleteOnTermination": True,
                 "Description": f"{spec.name} EFA card {card}"}
                for card in range(max(cards, 1))]

    @staticmethod
    def _ebs(v: VolumeSpec) -> dict[str, Any]:
        ebs: dict[str, Any] = {"VolumeSize": v.size_gib, "VolumeType": v.volume_type, "Encrypted": v.encrypted,
                               "DeleteOnTermination": True}
        if v.kms_key_id:
            ebs["KmsKeyId"] = v.kms_key_id
        return ebs

    def run_instances_request(self, spec: NodeSpec, net: _Net) -> dict[str, Any]:
        """The RunInstances arguments for ``spec``: deterministic, so a replay matches its ClientToken."""
        tags = [{"Key": k, "Value": v} for k, v in self._tags(spec).items()]
        bdm = [{"DeviceName": self._root_device(spec), "Ebs": self._ebs(spec.root_volume)}]
        bdm += [{"DeviceName": v.device_name or _DATA_DEVICES[i], "Ebs": self._ebs(v)}
                for i, v in enumerate(spec.data_volumes)]
        req: dict[str, Any] = {
            "ImageId": spec.image,
            "InstanceType": spec.offering,
            "MinCount": 1,
            "MaxCount": 1,
            "ClientToken": spec.idempotency_key,
            "NetworkInterfaces": self._network_interfaces(spec, net),
            "BlockDeviceMappings": bdm,
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled", "HttpPutResponseHopLimit": 2},
            "TagSpecifications": [{"ResourceType": kind, "Tags": tags}
                                  for kind in ("instance", "volume", "network-interface")],
        }
        if spec.placement_group:
            req["Placement"] = {"GroupName": spec.placement_group}
        if spec.capacity_reservation_id:
            req["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": spec.capacity_reservation_id}}
        if spec.capacity_block:
            req["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        if spec.key_name:
            req["KeyName"] = spec.key_name
        if spec.user_data:
            req["UserData"] = spec.user_data
        return req

    def _kms_problem(self, spec: NodeSpec, *, fresh: bool = False, strict: bool = False) -> InvalidSpecError | None:
        """The error for the first of the spec's volume KMS keys that does not exist or is not enabled
        (KMS DescribeKey; a key found enabled is not looked up again unless ``fresh``); None when all are
        usable, or when this principal may not describe a key (EC2 then decides at launch) unless ``strict``.
        With ``strict``, a launch EC2 already refused for its key is an error even when no key is named
        (the account's default EBS key)."""
        volumes = [("storage.root", spec.root_volume)] + [(f"storage.data.{i}", v)
                                                          for i, v in enumerate(spec.data_volumes)]
        named = [(path, v.kms_key_id) for path, v in volumes if v.kms_key_id and v.encrypted]
        if strict and not named:
            return InvalidSpecError("EC2 terminated the instance at launch for its EBS encryption key "
                                    "(Client.InvalidKMSKey.InvalidState): the account's default EBS key is not "
                                    "usable; name a key in storage.kms_key_id", field="storage.kms_key_id",
                                    value=None, provider=PROVIDER, code="Client.InvalidKMSKey.InvalidState")
        for path, key in named:
            if key in self._kms_ok and not fresh:
                continue
            try:
                with self._api("DescribeKey"):
                    meta = self._kms().describe_key(KeyId=key)["KeyMetadata"]
            except MetalfleetError as exc:
                if exc.code == "NotFoundException":
                    return InvalidSpecError(f"KMS key {key} does not exist in {self.region}: EC2 would launch the "
                                            "instance and terminate it at once (Client.InvalidKMSKey.InvalidState)",
                                            field=f"{path}.kms_key_id", value=key, provider=PROVIDER, code=exc.code)
                if not isinstance(exc, AuthError):
                    raise
                if strict:
                    return InvalidSpecError(f"EC2 terminated the instance at launch for KMS key {key} "
                                            "(Client.InvalidKMSKey.InvalidState), and this principal may not "
                                            "describe the key", field=f"{path}.kms_key_id", value=key,
                                            provider=PROVIDER, code=exc.code)
                continue  # may not describe it: EC2 decides at launch
            state = str(meta.get("KeyState") or ("Enabled" if meta.get("Enabled") else "Disabled"))
            if state != "Enabled":
                return InvalidSpecError(f"KMS key {key} is {state}, not Enabled: EC2 would terminate the instance "
                                        "at launch (Client.InvalidKMSKey.InvalidState)", field=f"{path}.kms_key_id",
                                        value=key, provider=PROVIDER, code=f"KMS.{state}")
            with self._lookup_lock:
                self._kms_ok.add(key)
        return None

    def order(self, spec: NodeSpec) -> Node:
        self.validate(spec)
        problem = self._kms_problem(spec)
        if problem:
            raise problem
        net = self._network(spec)
        request = self.run_instances_request(spec, net)
        try:
            with self._api("RunInstances", zone=net.zone, instance_type=spec.offering):
                resp = self._ec2().run_instances(**request)
        except CapacityError as exc:
            if exc.code == "ReservationCapacityExceeded" and spec.capacity_block and spec.capacity_reservation_id:
                self._explain_capacity_block(spec.capacity_reservation_id, exc)
            raise
        except ConflictError:
            # The key's first request differs from this one (e.g. the cluster's security group was released
            # and made again, so its id changed). If what that request bought is gone, say so, as a replay
            # would: the caller steps to the next generation. A live one is a real conflict.
            gone = self._gone_by_key(spec.idempotency_key)
            if gone is None:
                raise
            return gone
        instance = resp["Instances"][0]
        node = self._node(instance)
        # A repeated ClientToken is answered with the instance that token first bought, which may be
        # terminated by now, and a RunInstances answer need not say so (the emulator's always says
        # pending): read the state, with the small DescribeInstanceStatus, so callers see a gone node.
        state = self._states([node.id]).get(node.id)
        if state:
            node = dataclasses.replace(node, state=NodeState.map(STATE_TABLE, state))
            self._seen[node.id] = node
        if node.state.is_gone:
            reason = str(self.get(node.id).extra.get("state_reason") or "")
            if "InvalidKMSKey" in reason:
                # EC2 took the launch and terminated it at once. A key that is usable now means the gone
                # instance is an earlier launch's (this key's replay): the caller steps to a new generation.
                problem = self._kms_problem(spec, fresh=True, strict=True)
                if problem is not None:
                    raise problem
            return node
        if spec.public_ip:
            self._ensure_public_ip(spec, instance)
            return self.get(node.id)
        return node

    def _gone_by_key(self, key: str) -> Node | None:
        """The instance ``key`` bought (found by its metalfleet:key tag) when it is gone; None when it is
        live, or EC2 no longer lists it."""
        nodes = self._describe([{"Name": f"tag:{TAG_KEY}", "Values": [key]}])
        if not nodes or not all(n.state.is_gone for n in nodes):
            return None
        return nodes[0]

    def _explain_capacity_block(self, reservation_id: str, exc: CapacityError) -> None:
        """A Capacity Block shows no available capacity until it starts: say so, naming its start."""
        try:
            with self._api("DescribeCapacityReservations"):
                found = self._ec2().describe_capacity_reservations(CapacityReservationIds=[reservation_id])
        except MetalfleetError:
            return
        for cr in found.get("CapacityReservations", []):
            if cr.get("State") == "scheduled":
                raise InvalidSpecError(
                    f"Capacity Block {reservation_id} is scheduled: it starts at {cr.get('StartDate')} and ends at "
                    f"{cr.get('EndDate')}; instances can be launched into it from its start",
                    field="capacity.reservation_id", value=reservation_id, provider=PROVIDER, code=exc.code,
                    request_id=exc.request_id) from exc

    def _ensure_public_ip(self, spec: NodeSpec, instance: Mapping[str, Any]) -> None:
        """An Elastic IP on the primary interface, found again by the node's key on a re-run."""
        ec2 = self._ec2()
        primary = next(n for n in instance["NetworkInterfaces"] if n.get("Attachment", {}).get("DeviceIndex") == 0
                       and n.get("Attachment", {}).get("NetworkCardIndex", 0) == 0)
        key_filter = [{"Name": f"tag:{TAG_KEY}", "Values": [spec.idempotency_key]}]
        with self._api("DescribeAddresses"):
            addresses = ec2.describe_addresses(Filters=key_filter).get("Addresses", [])
        if addresses:
            address = addresses[0]
        else:
            tags = [{"Key": TAG_CLUSTER, "Value": spec.cluster}, {"Key": TAG_KEY, "Value": spec.idempotency_key},
                    {"Key": "Name", "Value": spec.name}]
            with self._api("AllocateAddress"):
                address = ec2.allocate_address(Domain="vpc", TagSpecifications=[
                    {"ResourceType": "elastic-ip", "Tags": tags}])
        if address.get("NetworkInterfaceId") != primary["NetworkInterfaceId"]:
            with self._api("AssociateAddress"):
                ec2.associate_address(AllocationId=address["AllocationId"],
                                      NetworkInterfaceId=primary["NetworkInterfaceId"], AllowReassociation=True)

    def _release_public_ip(self, node: Node) -> None:
        key = node.tags.get(TAG_KEY)
        if node.tags.get(TAG_PUBLIC_IP) != "eip" or not key:
            return
        ec2 = self._ec2()
        with self._api("DescribeAddresses"):
            addresses = ec2.describe_addresses(Filters=[{"Name": f"tag:{TAG_KEY}", "Values": [key]}])["Addresses"]
        for address in addresses:
            if address.get("AssociationId"):
                with contextlib.suppress(NotFoundError), self._api("DisassociateAddress"):
                    ec2.disassociate_address(AssociationId=address["AssociationId"])
            with contextlib.suppress(NotFoundError), self._api("ReleaseAddress"):
                ec2.release_address(AllocationId=address["AllocationId"])

    # -- observe ---------------------------------------------------------------------------
    def _node(self, inst: Mapping[str, Any]) -> Node:
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        nics = inst.get("NetworkInterfaces", [])
        placement = inst.get("Placement") or {}
        extra: dict[str, Any] = {
            "idempotency_key": inst.get("ClientToken") or tags.get(TAG_KEY),
            "efa_interfaces": sum(1 for n in nics if n.get("InterfaceType") in ("efa", "efa-only")),
            "placement_group": placement.get("GroupName") or None,
            "capacity_reservation_id": inst.get("CapacityReservationId"),
            "lifecycle": inst.get("InstanceLifecycle") or "on-demand",
            "subnet_id": inst.get("SubnetId"),
            "vpc_id": inst.get("VpcId"),
            "image": inst.get("ImageId"),
            "ec2_state": (inst.get("State") or {}).get("Name"),
        }
        reason = (inst.get("StateReason") or {}).get("Message")
        if reason:
            extra["state_reason"] = reason
        keys = self._host_keys.get(str(inst["InstanceId"]))
        if keys:
            extra["host_keys"] = list(keys)
        node = Node(
            id=str(inst["InstanceId"]),
            provider=PROVIDER,
            region=self.region,
            state=NodeState.map(STATE_TABLE, (inst.get("State") or {}).get("Name")),
            offering=str(inst.get("InstanceType", "")),
            zone=placement.get("AvailabilityZone"),
            private_ip=inst.get("PrivateIpAddress"),
            public_ip=inst.get("PublicIpAddress") or None,
            name=tags.get("Name"),
            tags=tags,
            extra=extra,
        )
        self._seen[node.id] = node
        return node

    def _describe(self, filters: list[dict[str, Any]]) -> list[Node]:
        nodes: list[Node] = []
        with self._api("DescribeInstances"):
            for page in self._ec2().get_paginator("describe_instances").paginate(Filters=filters):
                for reservation in page.get("Reservations", []):
                    nodes.extend(self._node(i) for i in reservation.get("Instances", []))
        return nodes

    def get(self, node_id: str, *, host_keys: bool = False) -> Node:
        """The instance as EC2 describes it now. ``host_keys``: also read its console for the SSH host keys
        when it runs and this driver has not read them yet (one GetConsoleOutput call)."""
        with self._api("DescribeInstances"):
            resp = self._ec2().describe_instances(InstanceIds=[node_id])
        for reservation in resp.get("Reservations", []):
            for inst in reservation.get("Instances", []):
                node = self._node(inst)
                if host_keys and node.state == NodeState.RUNNING and "host_keys" not in node.extra:
                    node = self._with_host_keys([node])[0]
                return node
        raise NotFoundError(f"instance {node_id} not found in {self.region}", provider=PROVIDER,
                            code="InvalidInstanceID.NotFound")

    def host_keys(self, node_id: str) -> tuple[str, ...]:
        """The SSH host keys the instance printed to its console at boot (cloud-init's
        ``-----BEGIN SSH HOST KEY KEYS-----`` block); () while the console has none: on AWS the console
        output lags the boot by minutes, and bootstrap then verifies hosts by known_hosts instead."""
        known = self._host_keys.get(node_id)
        if known:
            return known
        with self._api("GetConsoleOutput"):
            resp = self._ec2().get_console_output(InstanceId=node_id)
        keys = host_keys_from_console(str(resp.get("Output") or ""))  # botocore has decoded the base64
        if keys:
            self._host_keys[node_id] = keys
        return keys

    def _with_host_keys(self, nodes: Sequence[Node]) -> list[Node]:
        """``nodes`` with ``extra["host_keys"]`` where the console has them. Best effort: a node whose
        console is empty or cannot be read (throttled, no ec2:GetConsoleOutput permission) comes back as is."""
        def keys_of(node: Node) -> tuple[str, ...]:
            try:
                return self.host_keys(node.id)
            except MetalfleetError:
                return ()

        todo = [n for n in nodes if n.id not in self._host_keys]
        if len(todo) > 1:
            with ThreadPoolExecutor(max_workers=min(16, len(todo))) as pool:
                list(pool.map(keys_of, todo))
        elif todo:
            keys_of(todo[0])
        return [dataclasses.replace(n, extra={**n.extra, "host_keys": list(self._host_keys[n.id])})
                if n.id in self._host_keys else n for n in nodes]

    def list_nodes(self, cluster: str) -> list[Node]:
        nodes = self._describe([{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]},
                                {"Name": "instance-state-name", "Values": _LIVE_STATES}])
        return sorted(nodes, key=lambda n: (n.tags.get(TAG_INDEX, "").zfill(8), n.id))

    def _states(self, ids: Sequence[str]) -> dict[str, str]:
        """EC2 state name of each instance EC2 lists, from DescribeInstanceStatus (small answers).

        Right after RunInstances, EC2's eventually consistent reads may not know an id yet; that
        chunk is then read with DescribeInstances, whose filter form tolerates unknown ids.
        """
        states: dict[str, str] = {}
        for start in range(0, len(ids), 100):
            chunk = list(ids[start:start + 100])
            try:
                with self._api("DescribeInstanceStatus"):
                    pages = self._ec2().get_paginator("describe_instance_status").paginate(
                        InstanceIds=chunk, IncludeAllInstances=True)
                    for page in pages:
                        for st in page.get("InstanceStatuses", []):
                            states[st["InstanceId"]] = st["InstanceState"]["Name"]
            except NotFoundError:
                for n in self._describe([{"Name": "instance-id", "Values": chunk}]):
                    states[n.id] = (n.extra.get("ec2_state") or n.state.value)
        return states

    def wait(
        self,
        node_ids: Sequence[str],
        state: NodeState = NodeState.RUNNING,
        *,
        timeout: float = 1800.0,
        poll: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> list[Node]:
        """Poll until every node is in ``state``; the nodes come back as EC2 describes them then.

        Polls DescribeInstanceStatus, whose answers stay small for hundreds of EFA nodes, and reuses
        what RunInstances or an earlier read returned for the rest of each node. Instances EC2 does not
        list yet count as pending; when waiting for TERMINATED they count as gone. Waiting for RUNNING
        fails at once if a node terminates; once every node runs, each one's console is read once for its
        SSH host keys (``extra["host_keys"]``, see :meth:`host_keys`).
        """
        interval = self.poll if poll is None else float(poll)
        deadline = time.monotonic() + timeout
        ids = list(dict.fromkeys(node_ids))
        missing = NodeState.TERMINATED if state == NodeState.TERMINATED else NodeState.PENDING
        while True:
            states = self._states(ids)
            nodes = []
            for i in ids:
                now = NodeState.map(STATE_TABLE, states[i]) if i in states else missing
                known = self._seen.get(i) or Node(id=i, provider=PROVIDER, region=self.region, state=now,
                                                  offering="")
                nodes.append(dataclasses.replace(known, state=now))
            if progress:
                progress(nodes)
            if all(n.state == state for n in nodes):
                unknown = [n.id for n in nodes if not n.offering and n.id in states]
                if unknown:  # nodes this driver never read: one full read for their details
                    self._describe([{"Name": "instance-id", "Values": unknown}])
                    nodes = [dataclasses.replace(self._seen.get(n.id, n), state=n.state) for n in nodes]
                if state == NodeState.RUNNING:
                    nodes = self._with_host_keys(nodes)
                return nodes
            if state == NodeState.RUNNING:
                dead = [n.id for n in nodes if n.state.is_gone or n.state == NodeState.ERROR]
                if dead:
                    described = {n.id: n for n in self._describe([{"Name": "instance-id", "Values": dead}])}
                    why = "; ".join(f"{i} is {states.get(i, 'gone')}" + (
                        f" ({described[i].extra['state_reason']})"
                        if i in described and described[i].extra.get("state_reason") else "") for i in dead)
                    raise ProviderError(f"waiting for running: {why}. An order repeated with a node's idempotency "
                                        "key returns the instance that key bought, even terminated (EC2 keeps "
                                        "ClientTokens a day or more); bump the node's generation to buy a "
                                        "replacement", provider=PROVIDER, code="InstanceGone")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                waiting = [n.id for n in nodes if n.state != state]
                raise TimeoutError(f"instances {waiting} not {state.value} after {timeout:.0f}s", provider=PROVIDER)
            time.sleep(min(interval, remaining))

    # -- tags ------------------------------------------------------------------------------
    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None:
        """Add or overwrite ``tags`` on the instance (its other tags are kept); NotFoundError for an
        unknown instance. Only the instance is tagged, not its volumes or interfaces."""
        pairs = {str(k): str(v) for k, v in tags.items()}
        # EC2's own rules (CreateTags takes any character): the gate's reason tag is free text
        check_tags(pairs, portable=False, count=False)
        if not pairs:
            self.get(node_id)  # nothing to write, but an unknown instance is still an error
            return
        with self._api("CreateTags"):
            self._ec2().create_tags(Resources=[node_id], Tags=[{"Key": k, "Value": v} for k, v in pairs.items()])
        seen = self._seen.get(node_id)
        if seen is not None:
            self._seen[node_id] = dataclasses.replace(seen, tags={**seen.tags, **pairs})

    # -- release ---------------------------------------------------------------------------
    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0) -> None:
        try:
            node = self.get(node_id)
        except NotFoundError:
            return  # EC2 forgets terminated instances after a while: gone is gone
        if node.state != NodeState.TERMINATED:
            try:
                with self._api("TerminateInstances"):
                    self._ec2().terminate_instances(InstanceIds=[node_id])
            except NotFoundError:
                return
            if wait:
                self.wait([node_id], NodeState.TERMINATED, timeout=timeout)
        self._release_public_ip(node)

    # -- cluster resources (ClusterResourcesDriver) ----------------------------------------
    def prepare_cluster(self, spec: NodeSpec) -> list[str]:
        """Make (or find, and bring in line with the spec) what the cluster's nodes share: its placement
        group and, unless the spec names its own groups, its security group with the spec's SSH rules.
        Returns :meth:`cluster_resources`. Ordering a node does the same on its own; this lets a stack
        make them first, as a resource its nodes depend on (so they are deleted after the nodes)."""
        self.validate(spec)
        self._network(spec)
        return self.cluster_resources(spec.cluster)

    def cluster_resources(self, cluster: str) -> list[str]:
        """What metalfleet made for ``cluster`` and is still there, as ``security-group:<id>`` and
        ``placement-group:<name>``: the groups tagged ``metalfleet:cluster=<cluster>`` (only groups this
        driver created carry that tag; a group the spec names is never tagged, so never listed)."""
        ec2 = self._ec2()
        by_tag = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}]
        with self._api("DescribeSecurityGroups"):
            groups = ec2.describe_security_groups(Filters=by_tag).get("SecurityGroups", [])
        with self._api("DescribePlacementGroups"):
            placement = ec2.describe_placement_groups(Filters=by_tag).get("PlacementGroups", [])
        return ([f"security-group:{g['GroupId']}" for g in groups]
                + [f"placement-group:{g['GroupName']}" for g in placement if g.get("State") != "deleted"])

    def release_cluster_resources(self, cluster: str, *, timeout: float = 600.0) -> list[str]:
        """Delete what :meth:`cluster_resources` lists, once ``cluster`` has no live node (while it has one,
        they are in use: nothing is deleted and [] returned). Returns what was deleted.

        Right after its instances terminate, EC2 may still hold their interfaces for a while: a group still
        in use (DependencyViolation, InvalidPlacementGroup.InUse) is retried until ``timeout``."""
        if self.list_nodes(cluster):
            return []
        self._nets = {k: v for k, v in self._nets.items() if k[0] != cluster}  # made again if ordered again
        ec2 = self._ec2()
        deleted: list[str] = []
        for resource in self.cluster_resources(cluster):
            kind, _, ident = resource.partition(":")
            gone: tuple[str, ...]
            if kind == "security-group":
                action, call, kwargs = "DeleteSecurityGroup", ec2.delete_security_group, {"GroupId": ident}
                busy, gone = "DependencyViolation", ("InvalidGroup.NotFound", "InvalidSecurityGroupID.NotFound")
            else:
                action, call, kwargs = "DeletePlacementGroup", ec2.delete_placement_group, {"GroupName": ident}
                busy, gone = "InvalidPlacementGroup.InUse", ("InvalidPlacementGroup.Unknown",)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with self._api(action):
                        call(**kwargs)
                    deleted.append(resource)
                    break
                except MetalfleetError as exc:
                    if exc.code in gone:
                        break
                    if exc.code != busy or time.monotonic() >= deadline:
                        raise
                time.sleep(self.poll)
        return deleted
