"""A local Alibaba Cloud ECS API for tests: a real HTTP server that checks ACS3-HMAC-SHA256 signatures.

The driver reaches this server exactly as production reaches ECS: the official SDK
(``alibabacloud-ecs20140526``) with its normal endpoint setting (``endpoint="127.0.0.1:PORT"``,
``protocol="http"``), the RPC style (``POST /``, parameters in the query string, lists flattened as
``Tag.1.Key``), JSON answers. Nothing in-process is patched on the client side.

Run it in the foreground (for a demo)::

    python -m metalfleet.testing.alibaba --port 5061

or from Python, as a subprocess the caller owns::

    with AlibabaEmulator.start() as ecs:   # AlibabaEmulator.start(sim_hosts=True): a simulated host per instance
        driver = AlibabaDriver(region=REGION, endpoint=ecs.url)   # with ACCESS_KEY_ID / ACCESS_KEY_SECRET in env
        ecs.set_faults(throttle=0.3, seed=1)

What it checks and does, as ECS does (the parts the driver uses):

(a) Signatures (ACS3-HMAC-SHA256, Alibaba's V3 signature): the ``Authorization`` header's credential must be a
    configured AccessKey (``InvalidAccessKeyId.NotFound``, 404); the canonical request (method, ``/``, the sorted
    and percent-encoded query, the signed headers' lowercase names and trimmed values, the signed-header list and
    the ``x-acs-content-sha256`` payload hash) is rebuilt and HMAC-SHA256-signed with the key's secret, and a
    different signature answers ``SignatureDoesNotMatch`` (400) with the string to sign in the message, as ECS
    does; ``host`` and every ``x-acs-*`` header must be signed (``IncompleteSignature``); the body must hash to
    ``x-acs-content-sha256``; ``x-acs-date`` more than 15 minutes off the server's clock answers
    ``InvalidTimeStamp.Expired``; a ``x-acs-signature-nonce`` seen in the last 15 minutes answers
    ``SignatureNonceUsed``; ``x-acs-version`` must be 2014-05-26. Errors are ECS's JSON body: ``RequestId``,
    ``HostId``, ``Code``, ``Message``, ``Recommend``.
(b) Instances go Pending -> Starting -> Running (``boot_seconds``, default 0.3 s, of the emulator's clock);
    StopInstances: Stopping -> Stopped (``release_seconds``), StartInstances: Starting -> Running;
    DeleteInstances (Force, or a stopped instance) puts them in Stopping, and ``release_seconds`` later ECS no
    longer lists them (DescribeInstances/DescribeInstanceStatus forget them; the ids answer NotFound). A running
    instance without Force answers ``IncorrectInstanceStatus``.
(c) RunInstances ``ClientToken``: the same token with the same parameters answers the same InstanceIdSets (even
    once released) and buys nothing; other parameters answer ``IdempotentParameterMismatch``.
(d) Stock per zone and type (``POST /_metalfleet/stock``; default 64 of each orderable type in each zone) and the
    fault switch's capacity: ``OperationDenied.NoStock`` (403) naming the zone and type; a quota of live
    pay-as-you-go instances (``POST /_metalfleet/quota``, default 500): ``QuotaExceed.AfterpayInstance``.
(e) Refusals as ECS refuses (codes from ECS's error reference where it names one; the rest marked *): an unknown
    type (``InvalidInstanceType.ValueNotSupported``), vSwitch (``InvalidVSwitchId.NotFound``), vSwitch in another
    zone (``InvalidVSwitchId.ZoneMismatch``*), security group (``InvalidSecurityGroupId.NotFound``) or one in
    another VPC (``InvalidSecurityGroupId.VPCMismatch``*), image (``InvalidImageId.NotFound``), key pair
    (``InvalidKeyPairName.NotFound``), KMS key (``InvalidKMSKeyId.NotFound``; known keys: ``POST
    /_metalfleet/kms-keys``), deployment set (``InvalidDeploymentSetId.NotFound``) or a LowLatency set whose
    instances are in another zone (``InvalidDeploymentSet.ZoneMismatch``*); a HighPerformance (ERI) interface on a
    type whose EriQuantity is 0, or more ERIs than it has (``InvalidNetworkInterfaceTrafficMode.Unsupported``*),
    more interfaces than EniQuantity (``InvalidParam.NetworkInterface.ExceedLimit``*), a NetworkCardIndex past
    NetworkCardQuantity (``InvalidParameter.NetworkCardIndex``*); HttpTokens other than optional/required.
(f) Tags (Tag.N on RunInstances and CreateSecurityGroup; TagResources) and tag filters on DescribeInstances and
    DescribeSecurityGroups; pagination as the API pages: NextToken/MaxResults (DescribeInstances,
    DescribeInstanceTypes, DescribeSecurityGroups) and PageNumber/PageSize (DescribeInstanceStatus,
    DescribeDeploymentSets, DescribeVSwitches, DescribeKeyPairs).
(g) Simulated GPU hosts (``--sim-hosts``; needs root): each instance RunInstances makes (not a ClientToken replay)
    gets a VM-mode simulated host for its type whose ``ubuntu`` login accepts the key pair's public key
    (ImportKeyPair); the instance's private IP is the host's 127.x.y.z address; GetInstanceConsoleOutput answers
    cloud-init output (base64) with the host's key. The host's eRDMA devices come from the emulator's own
    records: one per HighPerformance interface it attached on a network card of a type whose EriQuantity allows
    it (``erdma_fabric``), so ``ibv_devinfo`` on the host lists them; a type without ERI, or an order without ERIs,
    has none. DeleteInstances stops the host. The security groups decide who reaches a host's SSH port (rules with
    IpProtocol ALL or TCP covering 22: SourceCidrIp, and SourceGroupId's members), applied after every call that
    changes rules or members.

(h) DescribePrice (``ResourceType=instance``): ``PriceUnit`` Hour (pay-as-you-go), Month (``Period`` 1-9) or Year
    (``Period`` 1-5) (subscription), answered in ECS's shape: ``PriceInfo.Price`` with ``OriginalPrice``,
    ``DiscountPrice``, ``TradePrice``, ``Currency`` (CNY) and ``DetailInfos.DetailInfo`` (the ``instanceType`` and
    ``systemDisk`` lines), and ``PriceInfo.Rules.Rule`` (the discounts applied). The figures are the emulator's own
    made-up price table (:data:`PRICES`, per type: an hour and a month, list price, plus a system disk rate per
    GiB), never the catalogue's, so a price a refresh writes can only have come through the API; subscriptions get
    a 15 % discount (rule 1001), as a pricing rule would give. A type the table does not price (not an ECS type, or
    one ``POST /_metalfleet/prices`` withdrew) answers ``InvalidInstanceType.ValueNotSupported``; another unit or a
    period out of range ``InvalidPriceUnit.ValueNotSupported``* / ``InvalidPeriod.ExceededDuration``*.

Control endpoints (not ECS; never counted or faulted; the kit's, plus): ``POST /_metalfleet/stock {"zone", "type",
"count"}``, ``POST /_metalfleet/quota {"instances": n}``, ``POST /_metalfleet/kms-keys {"keys": [...]}`` (added),
``POST /_metalfleet/timing {"boot_seconds", "release_seconds"}``, ``POST /_metalfleet/prices {"type", "hour",
"month"}`` (set a type's list prices; ``null`` for both withdraws it), ``GET /_metalfleet/instances`` (every instance
record, released ones included). Faults answer ECS's errors: ``Throttling.User`` (400), ``ServiceUnavailable``
(503), and RunInstances' ``OperationDenied.NoStock`` (403).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
import urllib.parse
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from metalfleet.testing.kit import (
    Clock,
    EmulatorClient,
    ErrorBody,
    Fault,
    FaultCodes,
    FaultMiddleware,
    FaultSwitch,
    SimHosts,
    StartResponse,
    console_text,
    run_server,
    server_parser,
)

__all__ = ["ACCESS_KEY_ID", "ACCESS_KEY_SECRET", "API_VERSION", "IMAGES", "INSTANCE_TYPES", "KMS_KEY", "PRICES",
           "REGION", "VPC_ID", "ZONES", "AlibabaEmulator", "acs3_signature", "canonical_request", "default_vswitch_id",
           "erdma_fabric"]

#: The test AccessKey pair the emulator accepts (a server started with --access-key ID:SECRET accepts others).
ACCESS_KEY_ID = "LTAI5tMetalfleetEmulat0r"
ACCESS_KEY_SECRET = "mf-emulator-secret-0123456789abcdef"
API_VERSION = "2014-05-26"
REGION = "cn-wulanchabu"
ZONES = ("cn-wulanchabu-a", "cn-wulanchabu-b", "cn-wulanchabu-c")
VPC_ID = "vpc-mf0emulator0000000001"
#: System images the emulator knows (ECS public image ids).
IMAGES = ("ubuntu_22_04_x64_20G_alibase_20240101.vhd", "ubuntu_24_04_x64_20G_alibase_20240812.vhd")
#: A KMS key every emulator knows (tests' default disk key).
KMS_KEY = "key-mfemulator0000000001"
SIGN_ALGORITHM = "ACS3-HMAC-SHA256"
#: How far x-acs-date may be from the server's clock, and how long a nonce is remembered.
SKEW = timedelta(minutes=15)

#: DescribeInstanceTypes records (the API's field names). Figures as the ECS instance-family pages give them
#: (https://www.alibabacloud.com/help/en/ecs/user-guide/gpu-accelerated-compute-optimized-and-vgpu-accelerated-
#: instance-families-1), as known to the author; GPU memory per GPU in GiB, memory in GiB, bandwidth in kbit/s.
INSTANCE_TYPES: dict[str, dict[str, Any]] = {
    "ecs.ebmgn8v.48xlarge": {
        "InstanceTypeId": "ecs.ebmgn8v.48xlarge", "InstanceTypeFamily": "ecs.ebmgn8v", "CpuCoreCount": 192,
        "MemorySize": 1024.0, "GPUAmount": 8, "GPUSpec": "NVIDIA H20", "GPUMemorySize": 96.0, "EriQuantity": 2,
        "NetworkCardQuantity": 2, "EniQuantity": 32, "InstanceBandwidthRx": 170000000, "InstanceBandwidthTx": 170000000,
        "LocalStorageAmount": 0, "InstanceCategory": "ECS Bare Metal", "CpuArchitecture": "X86",
        "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": 0}, {"NetworkCardIndex": 1}]},
        "NvmeSupport": "required"},
    "ecs.ebmgn7ex.32xlarge": {
        "InstanceTypeId": "ecs.ebmgn7ex.32xlarge", "InstanceTypeFamily": "ecs.ebmgn7ex", "CpuCoreCount": 128,
        "MemorySize": 1024.0, "GPUAmount": 8, "GPUSpec": "NVIDIA A100", "GPUMemorySize": 80.0, "EriQuantity": 4,
        "NetworkCardQuantity": 4, "EniQuantity": 32, "InstanceBandwidthRx": 100000000,
        "InstanceBandwidthTx": 100000000, "LocalStorageAmount": 0, "InstanceCategory": "ECS Bare Metal",
        "CpuArchitecture": "X86",
        "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": i} for i in range(4)]}, "NvmeSupport": "required"},
    "ecs.ebmgn7e.32xlarge": {
        "InstanceTypeId": "ecs.ebmgn7e.32xlarge", "InstanceTypeFamily": "ecs.ebmgn7e", "CpuCoreCount": 128,
        "MemorySize": 1024.0, "GPUAmount": 8, "GPUSpec": "NVIDIA A100", "GPUMemorySize": 80.0, "EriQuantity": 0,
        "NetworkCardQuantity": 1, "EniQuantity": 32, "InstanceBandwidthRx": 64000000, "InstanceBandwidthTx": 64000000,
        "LocalStorageAmount": 0, "InstanceCategory": "ECS Bare Metal", "CpuArchitecture": "X86",
        "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": 0}]}, "NvmeSupport": "required"},
    "ecs.ebmgn7.26xlarge": {
        "InstanceTypeId": "ecs.ebmgn7.26xlarge", "InstanceTypeFamily": "ecs.ebmgn7", "CpuCoreCount": 104,
        "MemorySize": 768.0, "GPUAmount": 8, "GPUSpec": "NVIDIA A100", "GPUMemorySize": 40.0, "EriQuantity": 0,
        "NetworkCardQuantity": 1, "EniQuantity": 15, "InstanceBandwidthRx": 30000000, "InstanceBandwidthTx": 30000000,
        "LocalStorageAmount": 0, "InstanceCategory": "ECS Bare Metal", "CpuArchitecture": "X86",
        "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": 0}]}, "NvmeSupport": "unsupported"},
    "ecs.g7.large": {
        "InstanceTypeId": "ecs.g7.large", "InstanceTypeFamily": "ecs.g7", "CpuCoreCount": 2, "MemorySize": 8.0,
        "GPUAmount": 0, "GPUSpec": "", "GPUMemorySize": 0.0, "EriQuantity": 0, "NetworkCardQuantity": 1,
        "EniQuantity": 3, "InstanceBandwidthRx": 2000000, "InstanceBandwidthTx": 2000000, "LocalStorageAmount": 0,
        "InstanceCategory": "General-purpose", "CpuArchitecture": "X86",
        "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": 0}]}, "NvmeSupport": "supported"},
}
#: Per-ERI bandwidth (Gbit/s) of the types with ERI: the type's bandwidth over its ERIs.
ERI_GBPS = {"ecs.ebmgn8v.48xlarge": 85.0, "ecs.ebmgn7ex.32xlarge": 25.0}
DEFAULT_STOCK = 64
#: (h) The emulator's own DescribePrice table: type -> list price in CNY per hour (pay-as-you-go) and per month
#: (subscription). Made-up figures, deliberately unlike the catalogue's; the general-purpose type is priced too.
PRICES: dict[str, dict[str, float]] = {
    "ecs.ebmgn8v.48xlarge": {"hour": 160.0, "month": 73000.0},
    "ecs.ebmgn7ex.32xlarge": {"hour": 120.5, "month": 58400.0},
    "ecs.ebmgn7e.32xlarge": {"hour": 110.0, "month": 51100.0},
    "ecs.ebmgn7.26xlarge": {"hour": 80.25, "month": 36500.0},
    "ecs.g7.large": {"hour": 0.5, "month": 200.0},
}
#: (h) System disk (the default 40 GiB cloud_essd) per GiB-hour and GiB-month, and the subscription discount.
DISK_GIB = {"Hour": 0.001, "Month": 0.5}
SUBSCRIPTION_DISCOUNT = 0.15
SUBSCRIPTION_RULE = {"RuleId": 1001, "Description": "Subscription discount: 15% off the list price"}
DEFAULT_QUOTA = 500


def default_vswitch_id(zone: str) -> str:
    """The id of the emulator's vSwitch in ``zone`` (stable, so an example cluster.yaml can name it)."""
    return "vsw-mf" + hashlib.sha256(f"metalfleet-emulator:{zone}".encode()).hexdigest()[:18]


def erdma_fabric(instance_type: str, interfaces: Iterable[tuple[str, int]]) -> dict[str, Any]:
    """(g) The eRDMA devices an instance really has: one per HighPerformance interface the emulator attached on a
    network card the type has, at most its EriQuantity; ``interfaces``: (traffic mode, network card index)."""
    info = INSTANCE_TYPES.get(instance_type) or {}
    limit = int(info.get("EriQuantity") or 0)
    cards = int(info.get("NetworkCardQuantity") or 1)
    eri = sorted({card for mode, card in interfaces if mode == "HighPerformance" and 0 <= card < cards})[:limit]
    return {"kind": "erdma", "nics": len(eri), "nic_gbps": ERI_GBPS.get(instance_type, 0.0)}


# ---------------------------------------------------------------------------------------------
# Client side.
# ---------------------------------------------------------------------------------------------
class AlibabaEmulator(EmulatorClient):
    """A running ECS emulator subprocess (:mod:`metalfleet.testing.kit`'s client, plus ECS's controls)."""

    module = "metalfleet.testing.alibaba"
    title = "Alibaba Cloud ECS emulator"

    @property
    def endpoint(self) -> str:
        """The SDK's endpoint setting for this server (with ``protocol="http"``)."""
        return f"{self.host}:{self.port}"

    def set_stock(self, zone: str, instance_type: str, count: int) -> None:
        self.control("POST", "stock", {"zone": zone, "type": instance_type, "count": count})

    def set_quota(self, instances: int) -> None:
        self.control("POST", "quota", {"instances": instances})

    def add_kms_keys(self, *keys: str) -> None:
        self.control("POST", "kms-keys", {"keys": list(keys)})

    def set_timing(self, boot_seconds: float | None = None, release_seconds: float | None = None) -> None:
        body = {k: v for k, v in (("boot_seconds", boot_seconds), ("release_seconds", release_seconds))
                if v is not None}
        self.control("POST", "timing", body)

    def set_price(self, instance_type: str, hour: float | None, month: float | None) -> None:
        """(h) Set a type's DescribePrice list prices (CNY per hour, per month); both None withdraws it."""
        self.control("POST", "prices", {"type": instance_type, "hour": hour, "month": month})

    def instances(self) -> list[dict[str, Any]]:
        """Every instance record, released ones included (``released``: true)."""
        result: list[dict[str, Any]] = self.control("GET", "instances")
        return result


# ---------------------------------------------------------------------------------------------
# Signatures (a).
# ---------------------------------------------------------------------------------------------
def _quote(value: str) -> str:
    return urllib.parse.quote(value, safe="~")


def canonical_request(method: str, path: str, query: dict[str, str], headers: dict[str, str],
                      signed: list[str], payload_hash: str) -> str:
    """The ACS3 canonical request: method, URI, sorted encoded query, the signed headers (lowercase name, trimmed
    value), the signed-header list, the payload hash."""
    canon_query = "&".join(f"{_quote(k)}={_quote(query[k])}" for k in sorted(query))
    canon_headers = "".join(f"{h}:{headers.get(h, '').strip()}\n" for h in signed)
    return f"{method}\n{path or '/'}\n{canon_query}\n{canon_headers}\n{';'.join(signed)}\n{payload_hash}"


def acs3_signature(secret: str, canonical: str) -> tuple[str, str]:
    """(string to sign, hex signature) of ``canonical`` with ``secret``."""
    to_sign = f"{SIGN_ALGORITHM}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    return to_sign, hmac.new(secret.encode(), to_sign.encode(), hashlib.sha256).hexdigest()


class ApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


# ---------------------------------------------------------------------------------------------
# Server side.
# ---------------------------------------------------------------------------------------------
ECS_FAULTS = FaultCodes(
    throttle=Fault("Throttling.User", 400, "Request was denied due to user flow control."),
    server_error=Fault("ServiceUnavailable", 503, "The request has failed due to a temporary failure of the server."),
    capacity=Fault("OperationDenied.NoStock", 403, "The requested resource is sold out in the specified zone."))
SWITCH = FaultSwitch(ECS_FAULTS, capacity_actions={"RunInstances"})
CLOCK = Clock()


def _sim_console(address: str, host_key: str, booted: datetime) -> str:
    return console_text(address, host_key, booted, kernel="5.15.0-119-generic", datasource="DataSourceAliYun",
                        interface="eth0", hostname="iZ" + hashlib.sha256(address.encode()).hexdigest()[:20] + "Z")


SIM = SimHosts(provider="alibaba", console=_sim_console)


def error_body(code: str, message: str, status: int, request_id: str | None = None) -> ErrorBody:
    """ECS's error reply (JSON)."""
    rid = request_id or str(uuid.uuid4()).upper()
    doc = {"RequestId": rid, "HostId": f"ecs.{REGION}.aliyuncs.com", "Code": code, "Message": message,
           "Recommend": f"https://api.aliyun.com/troubleshoot?q={code}&product=Ecs&requestId={rid}"}
    return ErrorBody("application/json;charset=utf-8", json.dumps(doc).encode(),
                     headers=(("x-acs-request-id", rid),))


def _identify(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    action = environ.get("HTTP_X_ACS_ACTION")
    if not action:
        return None
    params = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
    return action, params


@dataclass
class State:
    """Everything the emulated ECS holds (one region)."""

    access_keys: dict[str, str] = field(default_factory=lambda: {ACCESS_KEY_ID: ACCESS_KEY_SECRET})
    nonces: dict[str, datetime] = field(default_factory=dict)
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    security_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    deployment_sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    key_pairs: dict[str, dict[str, Any]] = field(default_factory=dict)
    kms_keys: set[str] = field(default_factory=lambda: {KMS_KEY})
    stock: dict[tuple[str, str], int] = field(default_factory=dict)
    quota: int = DEFAULT_QUOTA
    boot_seconds: float = 0.3
    release_seconds: float = 0.2
    ip_next: int = 10
    prices: dict[str, dict[str, float]] = field(default_factory=lambda: {k: dict(v) for k, v in PRICES.items()})


STATE = State()
VSWITCHES = {default_vswitch_id(z): {"VSwitchId": default_vswitch_id(z), "VpcId": VPC_ID, "ZoneId": z,
                                     "CidrBlock": f"172.16.{i * 16}.0/20", "VSwitchName": f"mf-emulator-{z}",
                                     "Status": "Available", "IsDefault": True, "AvailableIpAddressCount": 4000}
             for i, z in enumerate(ZONES)}


def _rid() -> str:
    return str(uuid.uuid4()).upper()


def _new_id(prefix: str) -> str:
    return prefix + "".join(secrets.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(20))


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%MZ")


# -- parameters -------------------------------------------------------------------------------
def _indexed(params: dict[str, str], name: str) -> list[tuple[int, str]]:
    """(N, rest) for every key ``name.N`` or ``name.N.rest``."""
    out = []
    for key in params:
        if key.startswith(name + "."):
            n, _, rest = key[len(name) + 1:].partition(".")
            if n.isdigit():
                out.append((int(n), rest))
    return out


def plist(params: dict[str, str], name: str) -> list[str]:
    """A flattened list parameter (``InstanceId.1``, ``InstanceId.2``) in order."""
    return [params[f"{name}.{n}"] for n, rest in sorted(_indexed(params, name)) if not rest]


def objs(params: dict[str, str], name: str) -> list[dict[str, str]]:
    """A flattened list of objects (``Tag.1.Key``) as dicts of their flat sub-keys, in order."""
    by_n: dict[int, dict[str, str]] = {}
    for n, rest in _indexed(params, name):
        if rest:
            by_n.setdefault(n, {})[rest] = params[f"{name}.{n}.{rest}"]
    return [by_n[n] for n in sorted(by_n)]


def _json_list(params: dict[str, str], name: str) -> list[str] | None:
    raw = params.get(name)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise ApiError(f"InvalidParameter.{name}", f"The specified parameter {name} is not a JSON array.") from None
    if not isinstance(value, list):
        raise ApiError(f"InvalidParameter.{name}", f"The specified parameter {name} is not a JSON array.")
    return [str(v) for v in value]


def _int(params: dict[str, str], name: str, default: int) -> int:
    try:
        return int(params.get(name, default))
    except ValueError:
        raise ApiError("InvalidParameter", f"The specified parameter {name} is not valid.") from None


def _tags_of(params: dict[str, str]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in objs(params, "Tag") if t.get("Key")}


def _tag_block(tags: dict[str, str]) -> dict[str, Any]:
    return {"Tag": [{"TagKey": k, "TagValue": v} for k, v in tags.items()]}


def _token_page(items: list[Any], params: dict[str, str], default: int = 10) -> tuple[list[Any], str]:
    """NextToken/MaxResults paging: the page and the next token ("" at the end)."""
    size = max(1, min(_int(params, "MaxResults", default), 100))
    token = params.get("NextToken") or ""
    start = 0
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except ValueError:
            raise ApiError("InvalidParameter.NextToken", "The specified NextToken is not valid.") from None
    page = items[start:start + size]
    more = start + size < len(items)
    return page, base64.urlsafe_b64encode(str(start + size).encode()).decode() if more else ""


def _number_page(items: list[Any], params: dict[str, str], default: int = 10) -> tuple[list[Any], int, int]:
    """PageNumber/PageSize paging: the page, its number and size."""
    number = max(1, _int(params, "PageNumber", 1))
    size = max(1, min(_int(params, "PageSize", default), 100))
    return items[(number - 1) * size:number * size], number, size


# -- instances ------------------------------------------------------------------------------------
def _refresh(inst: dict[str, Any]) -> None:
    """(b) An instance's status now, by the emulator's clock."""
    now = CLOCK.time()
    if inst.get("released"):
        return
    if inst.get("delete_at") is not None:
        if now >= inst["delete_at"] + STATE.release_seconds:
            inst["released"] = True
            inst["Status"] = "Deleted"
            SIM.stop(inst["InstanceId"])
            where = (inst["ZoneId"], inst["InstanceType"])  # the released server is stock again
            STATE.stock[where] = STATE.stock.get(where, DEFAULT_STOCK) + 1
        else:
            inst["Status"] = "Stopping"
        return
    if inst.get("stop_at") is not None:
        if now >= inst["stop_at"] + STATE.release_seconds:
            inst["Status"], inst["stop_at"] = "Stopped", None
        return
    if inst["Status"] in ("Pending", "Starting"):
        age = now - inst["created"]
        inst["Status"] = ("Pending" if age < STATE.boot_seconds / 3 else
                          "Starting" if age < STATE.boot_seconds else "Running")


def _live() -> list[dict[str, Any]]:
    for inst in STATE.instances.values():
        _refresh(inst)
    return [i for i in STATE.instances.values() if not i.get("released")]


def _public(inst: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in inst.items() if k[:1].isupper()}


def _check_run(params: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, str]], list[str]]:
    """(e) The checks RunInstances makes before it buys: (type, vSwitch, interfaces, security groups)."""
    itype = params.get("InstanceType", "")
    info = INSTANCE_TYPES.get(itype)
    if info is None:
        raise ApiError("InvalidInstanceType.ValueNotSupported", f"The specified InstanceType {itype!r} does not exist "
                       "or is not supported.")
    image = params.get("ImageId", "")
    if image not in IMAGES:
        raise ApiError("InvalidImageId.NotFound", f"The specified ImageId {image!r} does not exist.", 404)
    zone = params.get("ZoneId") or ""
    vsw = VSWITCHES.get(params.get("VSwitchId", ""))
    if vsw is None:
        raise ApiError("InvalidVSwitchId.NotFound", f"The specified VSwitchId {params.get('VSwitchId')!r} does not "
                       "exist.", 404)
    if zone and vsw["ZoneId"] != zone:
        raise ApiError("InvalidVSwitchId.ZoneMismatch", f"The specified VSwitch {vsw['VSwitchId']} is in zone "
                       f"{vsw['ZoneId']}, not in ZoneId {zone}.")
    groups = [params["SecurityGroupId"]] if params.get("SecurityGroupId") else plist(params, "SecurityGroupIds")
    if not groups:
        raise ApiError("MissingParameter.SecurityGroupId", "The input parameter SecurityGroupId is mandatory.")
    for g in groups:
        sg = STATE.security_groups.get(g)
        if sg is None:
            raise ApiError("InvalidSecurityGroupId.NotFound", f"The specified SecurityGroupId {g!r} does not exist.",
                           404)
        if sg["VpcId"] != vsw["VpcId"]:
            raise ApiError("InvalidSecurityGroupId.VPCMismatch", f"The security group {g} and the VSwitch are not in "
                           "the same VPC.")
    key = params.get("KeyPairName")
    if key and key not in STATE.key_pairs:
        raise ApiError("InvalidKeyPairName.NotFound", f"The specified KeyPairName {key!r} does not exist.", 404)
    disks = [{k.removeprefix("SystemDisk."): v for k, v in params.items() if k.startswith("SystemDisk.")},
             *objs(params, "DataDisk")]
    for d in disks:
        kms = d.get("KMSKeyId")
        if kms and kms not in STATE.kms_keys:
            raise ApiError("InvalidKMSKeyId.NotFound", f"The specified KMSKeyId {kms!r} does not exist.", 404)
    if params.get("HttpTokens", "optional") not in ("optional", "required"):
        raise ApiError("InvalidParameter.HttpTokens", "The specified HttpTokens is not valid.")
    nics = objs(params, "NetworkInterface")
    cards = int(info["NetworkCardQuantity"])
    if len(nics) > int(info["EniQuantity"]):
        raise ApiError("InvalidParam.NetworkInterface.ExceedLimit", f"{len(nics)} network interfaces exceed the "
                       f"{info['EniQuantity']} that {itype} takes.")
    eri = [n for n in nics if n.get("NetworkInterfaceTrafficMode") == "HighPerformance"]
    if len(eri) > int(info["EriQuantity"]):
        raise ApiError("InvalidNetworkInterfaceTrafficMode.Unsupported",
                       f"{itype} takes {info['EriQuantity']} elastic RDMA interface(s) (HighPerformance traffic "
                       f"mode); {len(eri)} were asked for.")
    for n in nics:
        card = int(n.get("NetworkCardIndex") or 0)
        if not 0 <= card < cards:
            raise ApiError("InvalidParameter.NetworkCardIndex", f"NetworkCardIndex {card} is invalid for {itype}, "
                           f"which has {cards} network card(s).")
    ds_id = params.get("DeploymentSetId")
    if ds_id:
        ds = STATE.deployment_sets.get(ds_id)
        if ds is None:
            raise ApiError("InvalidDeploymentSetId.NotFound", f"The specified DeploymentSetId {ds_id!r} does not "
                           "exist.", 404)
        if ds["DeploymentStrategy"] == "LowLatency":
            other = sorted({i["ZoneId"] for i in _live() if i.get("DeploymentSetId") == ds_id} - {vsw["ZoneId"]})
            if other:
                raise ApiError("InvalidDeploymentSet.ZoneMismatch", f"The deployment set {ds_id} (LowLatency) holds "
                               f"instances in zone {other[0]}; it cannot take instances in {vsw['ZoneId']}.")
    return info, vsw, nics, groups


def run_instances(params: dict[str, str]) -> dict[str, Any]:
    token = params.get("ClientToken")
    digest = hashlib.sha256(json.dumps(sorted((k, v) for k, v in params.items() if k != "ClientToken")).encode()
                            ).hexdigest()
    if token and token in STATE.tokens:
        first, ids = STATE.tokens[token]
        if first != digest:
            raise ApiError("IdempotentParameterMismatch", "The specified parameters are different from before "
                           f"with the same ClientToken {token!r}.")
        return {"RequestId": _rid(), "InstanceIdSets": {"InstanceIdSet": ids}}
    info, vsw, nics, groups = _check_run(params)
    itype, zone = info["InstanceTypeId"], vsw["ZoneId"]
    amount = _int(params, "Amount", 1)
    if not 1 <= amount <= 100:
        raise ApiError("InvalidParameter.Amount", "The specified Amount is not valid (1-100).")
    if len(_live()) + amount > STATE.quota and params.get("InstanceChargeType", "PostPaid") == "PostPaid":
        raise ApiError("QuotaExceed.AfterpayInstance", f"Living pay-as-you-go instances quota exceeded "
                       f"({STATE.quota}).", 403)
    stock = STATE.stock.get((zone, itype), DEFAULT_STOCK)
    if not SWITCH.take_capacity(amount) or stock < amount:
        raise ApiError("OperationDenied.NoStock", f"The requested resource ({itype}) is sold out in the specified "
                       f"zone ({zone}); try other types of resources or other regions and zones.", 403)
    STATE.stock[(zone, itype)] = stock - amount
    tags = _tags_of(params)
    ids = []
    for _ in range(amount):
        iid = _new_id("i-")
        STATE.ip_next += 1
        n = STATE.ip_next
        ip = f"172.16.{vsw['CidrBlock'].split('.')[2]}.{n % 250 + 2}"
        eni = [{"NetworkInterfaceId": _new_id("eni-"), "Type": "Primary", "PrimaryIpAddress": ip,
                "MacAddress": "00:16:3e:" + ":".join(f"{b:02x}" for b in os.urandom(3))}]
        eni += [{"NetworkInterfaceId": _new_id("eni-"), "Type": "Secondary",
                 "PrimaryIpAddress": f"172.16.{vsw['CidrBlock'].split('.')[2]}.{(n + k) % 250 + 2}",
                 "MacAddress": "00:16:3e:" + ":".join(f"{b:02x}" for b in os.urandom(3))}
                for k in range(1, len(nics))]
        inst = {
            "InstanceId": iid, "InstanceName": params.get("InstanceName") or iid, "HostName": params.get("HostName"),
            "InstanceType": itype, "InstanceTypeFamily": info["InstanceTypeFamily"], "RegionId": REGION,
            "ZoneId": zone, "Status": "Pending", "ImageId": params["ImageId"], "OSType": "linux",
            "OSName": "Ubuntu 22.04 64 bit", "Cpu": info["CpuCoreCount"], "Memory": int(info["MemorySize"] * 1024),
            "GPUAmount": info["GPUAmount"], "GPUSpec": info["GPUSpec"], "InstanceNetworkType": "vpc",
            "InstanceChargeType": params.get("InstanceChargeType", "PostPaid"),
            "SpotStrategy": params.get("SpotStrategy", "NoSpot"), "InternetChargeType": params.get(
                "InternetChargeType", "PayByTraffic"),
            "InternetMaxBandwidthOut": _int(params, "InternetMaxBandwidthOut", 0),
            "KeyPairName": params.get("KeyPairName", ""), "DeploymentSetId": params.get("DeploymentSetId", ""),
            "CreationTime": _iso(CLOCK.now()), "StartTime": _iso(CLOCK.now()),
            "VpcAttributes": {"VpcId": vsw["VpcId"], "VSwitchId": vsw["VSwitchId"],
                              "PrivateIpAddress": {"IpAddress": [ip]}},
            "PublicIpAddress": {"IpAddress": [f"47.92.{n // 250 % 250}.{n % 250 + 1}"]
                                if _int(params, "InternetMaxBandwidthOut", 0) > 0 else []},
            "SecurityGroupIds": {"SecurityGroupId": groups},
            "NetworkInterfaces": {"NetworkInterface": eni},
            "MetadataOptions": {"HttpTokens": params.get("HttpTokens", "optional"),
                                "HttpEndpoint": params.get("HttpEndpoint", "enabled")},
            "Tags": _tag_block(tags),
            "created": CLOCK.time(), "delete_at": None, "released": False,
            "eri": [(n.get("NetworkInterfaceTrafficMode", "Standard"), int(n.get("NetworkCardIndex") or 0))
                    for n in nics],
        }
        STATE.instances[iid] = inst
        ids.append(iid)
        if SIM.enabled:
            _sim_boot(inst)
    if token:
        STATE.tokens[token] = (digest, ids)
    return {"RequestId": _rid(), "InstanceIdSets": {"InstanceIdSet": ids}, "OrderId": str(secrets.randbelow(10**15)),
            "TradePrice": 0.0}


def _sim_boot(inst: dict[str, Any]) -> None:
    pair = STATE.key_pairs.get(inst["KeyPairName"] or "")
    keys = [pair["PublicKeyBody"]] if pair else []
    tags = {t["TagKey"]: t["TagValue"] for t in inst["Tags"]["Tag"]}
    try:
        host = SIM.boot(inst["InstanceId"], inst["InstanceType"], keys, tags,
                        fabric=erdma_fabric(inst["InstanceType"], inst["eri"]))
    except Exception as exc:
        inst["released"] = True
        raise ApiError("InternalError", f"simulated host for {inst['InstanceId']} did not boot: "
                       f"{type(exc).__name__}: {exc}", 500) from exc
    inst["VpcAttributes"]["PrivateIpAddress"]["IpAddress"] = [host.address]
    inst["NetworkInterfaces"]["NetworkInterface"][0]["PrimaryIpAddress"] = host.address


def _sim_ssh_rules() -> None:
    """(g) Apply to every simulated host the SSH sources its instance's security groups allow now."""
    live = {i["InstanceId"]: i for i in _live()}

    def sources_for(instance_id: str, host: Any) -> list[str] | None:
        inst = live.get(instance_id)
        if inst is None or inst.get("delete_at") is not None:
            return None
        port = int(host.port)
        sources: set[str] = set()
        for gid in inst["SecurityGroupIds"]["SecurityGroupId"]:
            for rule in (STATE.security_groups.get(gid) or {}).get("rules", []):
                proto = rule["IpProtocol"].upper()
                low, _, high = rule["PortRange"].partition("/")
                if proto != "ALL" and not (proto == "TCP" and int(low) <= port <= int(high)):
                    continue
                if rule.get("SourceCidrIp"):
                    sources.add(rule["SourceCidrIp"])
                if rule.get("SourceGroupId"):
                    sources.update(f"{m['VpcAttributes']['PrivateIpAddress']['IpAddress'][0]}/32"
                                   for m in live.values()
                                   if rule["SourceGroupId"] in m["SecurityGroupIds"]["SecurityGroupId"])
        return sorted(sources)

    SIM.apply_ssh_rules(sources_for)


def describe_instances(params: dict[str, str]) -> dict[str, Any]:
    ids = _json_list(params, "InstanceIds")
    want_tags = _tags_of(params)
    items = []
    for inst in _live():
        tags = {t["TagKey"]: t["TagValue"] for t in inst["Tags"]["Tag"]}
        if ids is not None and inst["InstanceId"] not in ids:
            continue
        if any(tags.get(k) != v for k, v in want_tags.items()):
            continue
        if params.get("Status") and inst["Status"] != params["Status"]:
            continue
        if params.get("ZoneId") and inst["ZoneId"] != params["ZoneId"]:
            continue
        if params.get("VSwitchId") and inst["VpcAttributes"]["VSwitchId"] != params["VSwitchId"]:
            continue
        items.append(_public(inst))
    if "PageNumber" in params and "NextToken" not in params and "MaxResults" not in params:
        page, number, size = _number_page(items, params)
        return {"RequestId": _rid(), "Instances": {"Instance": page}, "TotalCount": len(items), "PageNumber": number,
                "PageSize": size}
    page, token = _token_page(items, params)
    return {"RequestId": _rid(), "Instances": {"Instance": page}, "TotalCount": len(items), "NextToken": token}


def describe_instance_status(params: dict[str, str]) -> dict[str, Any]:
    ids = plist(params, "InstanceId")
    items = [{"InstanceId": i["InstanceId"], "Status": i["Status"]} for i in _live()
             if (not ids or i["InstanceId"] in ids) and (not params.get("ZoneId") or i["ZoneId"] == params["ZoneId"])]
    page, number, size = _number_page(items, params)
    return {"RequestId": _rid(), "InstanceStatuses": {"InstanceStatus": page}, "TotalCount": len(items),
            "PageNumber": number, "PageSize": size}


def delete_instances(params: dict[str, str]) -> dict[str, Any]:
    ids = plist(params, "InstanceId")
    if not ids:
        raise ApiError("MissingParameter.InstanceId", "The input parameter InstanceId is mandatory.")
    live = {i["InstanceId"]: i for i in _live()}
    force = params.get("Force", "false").lower() == "true"
    for iid in ids:
        inst = live.get(iid)
        if inst is None:
            raise ApiError("InvalidInstanceId.NotFound", f"The specified InstanceId {iid} does not exist.", 404)
        if inst["Status"] not in ("Stopped",) and not force and inst.get("delete_at") is None:
            raise ApiError("IncorrectInstanceStatus", f"The current status of the resource {iid} does not support "
                           "this operation (Force=false and the instance is not Stopped).", 403)
    for iid in ids:
        inst = live[iid]
        if inst.get("delete_at") is None:
            inst["delete_at"] = CLOCK.time()
            inst["Status"] = "Stopping"
            SIM.power_off(iid)
    return {"RequestId": _rid()}


def stop_instances(params: dict[str, str]) -> dict[str, Any]:
    """(b) Running -> Stopping -> Stopped (``release_seconds``); the simulated host powers off, its disk stays."""
    ids = plist(params, "InstanceId")
    live = {i["InstanceId"]: i for i in _live()}
    for iid in ids:
        inst = live.get(iid)
        if inst is None:
            raise ApiError("InvalidInstanceId.NotFound", f"The specified InstanceId {iid} does not exist.", 404)
        if inst["Status"] != "Running" or inst.get("delete_at") is not None:
            raise ApiError("IncorrectInstanceStatus", f"The current status of the resource {iid} "
                           f"({inst['Status']}) does not support this operation.", 403)
    for iid in ids:
        live[iid]["Status"], live[iid]["stop_at"] = "Stopping", CLOCK.time()
        live[iid]["StoppedMode"] = params.get("StoppedMode", "KeepCharging")
        SIM.power_off(iid)
    return {"RequestId": _rid(), "InstanceResponses": {"InstanceResponse": [
        {"InstanceId": i, "PreviousStatus": "Running", "CurrentStatus": "Stopping", "Code": "200",
         "Message": "success"} for i in ids]}}


def start_instances(params: dict[str, str]) -> dict[str, Any]:
    """(b) Stopped -> Starting -> Running (``boot_seconds``); the simulated host boots again."""
    ids = plist(params, "InstanceId")
    live = {i["InstanceId"]: i for i in _live()}
    for iid in ids:
        inst = live.get(iid)
        if inst is None:
            raise ApiError("InvalidInstanceId.NotFound", f"The specified InstanceId {iid} does not exist.", 404)
        if inst["Status"] != "Stopped":
            raise ApiError("IncorrectInstanceStatus", f"The current status of the resource {iid} "
                           f"({inst['Status']}) does not support this operation.", 403)
    for iid in ids:
        live[iid]["Status"], live[iid]["created"] = "Starting", CLOCK.time() - STATE.boot_seconds / 3
        SIM.power_on(iid)
    return {"RequestId": _rid(), "InstanceResponses": {"InstanceResponse": [
        {"InstanceId": i, "PreviousStatus": "Stopped", "CurrentStatus": "Starting", "Code": "200",
         "Message": "success"} for i in ids]}}


def get_console_output(params: dict[str, str]) -> dict[str, Any]:
    iid = params.get("InstanceId", "")
    inst = STATE.instances.get(iid)
    if inst is None or inst.get("released"):
        raise ApiError("InvalidInstanceId.NotFound", f"The specified InstanceId {iid} does not exist.", 404)
    text = SIM.console(iid) or (f"[    0.000000] Linux version 5.15.0-119-generic (buildd@lcy02-amd64-020)\r\n"
                                f"Ubuntu 22.04.4 LTS {inst['InstanceName']} ttyS0\r\n")
    return {"RequestId": _rid(), "InstanceId": iid, "ConsoleOutput": base64.b64encode(text.encode()).decode(),
            "LastUpdateTime": _iso(CLOCK.now())}


def tag_resources(params: dict[str, str]) -> dict[str, Any]:
    if params.get("ResourceType") != "instance":
        raise ApiError("InvalidResourceType.NotSupported", "The emulator tags instances only.")
    tags = _tags_of(params)
    live = {i["InstanceId"]: i for i in _live()}
    for rid in plist(params, "ResourceId"):
        if rid not in live:
            raise ApiError("InvalidResourceId.NotFound", f"The specified ResourceId {rid} does not exist.", 404)
    for rid in plist(params, "ResourceId"):
        inst = live[rid]
        current = {t["TagKey"]: t["TagValue"] for t in inst["Tags"]["Tag"]}
        current.update(tags)
        if len(current) > 20:
            raise ApiError("InvalidTagCount", "A resource carries at most 20 tags.")
        inst["Tags"] = _tag_block(current)
    return {"RequestId": _rid()}


def describe_instance_types(params: dict[str, str]) -> dict[str, Any]:
    names = plist(params, "InstanceTypes")
    items = [t for n, t in INSTANCE_TYPES.items() if not names or n in names]
    page, token = _token_page(items, params, default=100)
    return {"RequestId": _rid(), "InstanceTypes": {"InstanceType": page}, "NextToken": token}


def _money(value: float) -> float:
    return round(value, 4)


def describe_price(params: dict[str, str]) -> dict[str, Any]:
    """(h) ECS's price of an instance order: list price, discount and trade price, itemised, with the rules."""
    if params.get("ResourceType", "instance") != "instance":
        raise ApiError("InvalidResourceType.NotSupported", f"The specified ResourceType "
                       f"{params.get('ResourceType')!r} is not supported by this emulator.")
    itype = params.get("InstanceType", "")
    if not itype:
        raise ApiError("MissingParameter.InstanceType", "The input parameter InstanceType that is mandatory for "
                       "processing this request is not supplied.")
    table = STATE.prices.get(itype)
    if table is None:
        raise ApiError("InvalidInstanceType.ValueNotSupported", f"The specified InstanceType {itype!r} does not "
                       "exist or is not supported.")
    unit = params.get("PriceUnit", "Hour")
    period = _int(params, "Period", 1)
    limits = {"Hour": 1, "Month": 9, "Year": 5}
    if unit not in limits:
        raise ApiError("InvalidPriceUnit.ValueNotSupported", f"The specified PriceUnit {unit!r} is not supported.")
    if unit != "Hour" and not 1 <= period <= limits[unit]:
        raise ApiError("InvalidPeriod.ExceededDuration", f"The specified Period {period} is out of range for "
                       f"PriceUnit {unit}.")
    months = 0 if unit == "Hour" else period * (12 if unit == "Year" else 1)
    disk_size = _int(params, "SystemDisk.Size", 40)
    lines = [("instanceType", table["hour"] if unit == "Hour" else table["month"] * months),
             ("systemDisk", disk_size * (DISK_GIB["Hour"] if unit == "Hour" else DISK_GIB["Month"] * months))]
    rate = SUBSCRIPTION_DISCOUNT if months else 0.0
    details = [{"Resource": r, "OriginalPrice": _money(v), "DiscountPrice": _money(v * rate),
                "TradePrice": _money(v - v * rate),
                "SubRules": {"Rule": [dict(SUBSCRIPTION_RULE)] if rate else []}} for r, v in lines]
    original = sum(v for _, v in lines)
    return {"RequestId": _rid(), "PriceInfo": {
        "Price": {"OriginalPrice": _money(original), "DiscountPrice": _money(original * rate),
                  "TradePrice": _money(original - original * rate), "Currency": "CNY",
                  "DetailInfos": {"DetailInfo": details}},
        "Rules": {"Rule": [dict(SUBSCRIPTION_RULE)] if rate else []}}}


def describe_vswitches(params: dict[str, str]) -> dict[str, Any]:
    items = [v for v in VSWITCHES.values() if (not params.get("VSwitchId") or v["VSwitchId"] == params["VSwitchId"])
             and (not params.get("VpcId") or v["VpcId"] == params["VpcId"])
             and (not params.get("ZoneId") or v["ZoneId"] == params["ZoneId"])]
    page, number, size = _number_page(items, params)
    return {"RequestId": _rid(), "VSwitches": {"VSwitch": page}, "TotalCount": len(items), "PageNumber": number,
            "PageSize": size}


# -- security groups, deployment sets, key pairs -----------------------------------------------
def _group(params: dict[str, str]) -> dict[str, Any]:
    gid = params.get("SecurityGroupId", "")
    sg = STATE.security_groups.get(gid)
    if sg is None:
        raise ApiError("InvalidSecurityGroupId.NotFound", f"The specified SecurityGroupId {gid!r} does not exist.",
                       404)
    return sg


def create_security_group(params: dict[str, str]) -> dict[str, Any]:
    vpc = params.get("VpcId", "")
    if vpc != VPC_ID:
        raise ApiError("InvalidVpcId.NotFound", f"The specified VpcId {vpc!r} does not exist.", 404)
    token = params.get("ClientToken")
    if token:
        for sg in STATE.security_groups.values():
            if sg.get("token") == token:
                return {"RequestId": _rid(), "SecurityGroupId": sg["SecurityGroupId"]}
    gid = _new_id("sg-")
    STATE.security_groups[gid] = {"SecurityGroupId": gid, "SecurityGroupName": params.get("SecurityGroupName", ""),
                                  "Description": params.get("Description", ""), "VpcId": vpc,
                                  "SecurityGroupType": params.get("SecurityGroupType", "normal"),
                                  "CreationTime": _iso(CLOCK.now()), "tags": _tags_of(params), "rules": [],
                                  "token": token}
    return {"RequestId": _rid(), "SecurityGroupId": gid}


def describe_security_groups(params: dict[str, str]) -> dict[str, Any]:
    ids = _json_list(params, "SecurityGroupIds")
    want = _tags_of(params)
    items = []
    for sg in STATE.security_groups.values():
        if params.get("SecurityGroupId") and sg["SecurityGroupId"] != params["SecurityGroupId"]:
            continue
        if ids is not None and sg["SecurityGroupId"] not in ids:
            continue
        if params.get("VpcId") and sg["VpcId"] != params["VpcId"]:
            continue
        if params.get("SecurityGroupName") and sg["SecurityGroupName"] != params["SecurityGroupName"]:
            continue
        if any(sg["tags"].get(k) != v for k, v in want.items()):
            continue
        items.append({k: v for k, v in sg.items() if k[:1].isupper()} | {"Tags": _tag_block(sg["tags"]),
                                                                        "RuleCount": len(sg["rules"])})
    page, token = _token_page(items, params)
    return {"RequestId": _rid(), "SecurityGroups": {"SecurityGroup": page}, "TotalCount": len(items),
            "NextToken": token, "RegionId": REGION}


def _rule(params: dict[str, str]) -> dict[str, str]:
    proto = params.get("IpProtocol", "").upper()
    if proto not in ("ALL", "TCP", "UDP", "ICMP", "GRE"):
        raise ApiError("InvalidIpProtocol.Malformed", f"The specified IpProtocol {params.get('IpProtocol')!r} is "
                       "not valid.")
    ports = params.get("PortRange", "")
    low, sep, high = ports.partition("/")
    if not sep or not (low.lstrip("-").isdigit() and high.lstrip("-").isdigit()):
        raise ApiError("InvalidPortRange.Malformed", f"The specified PortRange {ports!r} is not valid.")
    rule = {"IpProtocol": proto, "PortRange": ports, "Direction": "ingress", "Policy": "Accept", "Priority": "1",
            "NicType": "intranet"}
    for k in ("SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId"):
        if params.get(k):
            rule[k] = params[k]
    if not any(rule.get(k) for k in ("SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId")):
        raise ApiError("MissingParameter.Source", "One of SourceCidrIp, Ipv6SourceCidrIp, SourceGroupId is needed.")
    if rule.get("SourceGroupId") and rule["SourceGroupId"] not in STATE.security_groups:
        raise ApiError("InvalidSecurityGroupId.NotFound", f"The specified SourceGroupId {rule['SourceGroupId']!r} "
                       "does not exist.", 404)
    return rule


def _same(a: dict[str, str], b: dict[str, str]) -> bool:
    keys = ("IpProtocol", "PortRange", "SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId")
    return all(a.get(k) == b.get(k) for k in keys)


def authorize_security_group(params: dict[str, str]) -> dict[str, Any]:
    sg, rule = _group(params), _rule(params)
    if not any(_same(r, rule) for r in sg["rules"]):  # an existing rule: accepted, nothing added (as ECS)
        sg["rules"].append({**rule, "SecurityGroupRuleId": _new_id("sgr-"),
                            "Description": params.get("Description", ""), "CreateTime": _iso(CLOCK.now())})
    return {"RequestId": _rid()}


def revoke_security_group(params: dict[str, str]) -> dict[str, Any]:
    sg, rule = _group(params), _rule(params)
    sg["rules"] = [r for r in sg["rules"] if not _same(r, rule)]
    return {"RequestId": _rid()}


def describe_security_group_attribute(params: dict[str, str]) -> dict[str, Any]:
    sg = _group(params)
    direction = params.get("Direction", "all")
    perms = [{k: v for k, v in r.items()} for r in sg["rules"] if direction in ("all", r["Direction"])]
    return {"RequestId": _rid(), "SecurityGroupId": sg["SecurityGroupId"], "SecurityGroupName":
            sg["SecurityGroupName"], "VpcId": sg["VpcId"], "RegionId": REGION, "Description": sg["Description"],
            "InnerAccessPolicy": "Accept", "Permissions": {"Permission": perms}}


def delete_security_group(params: dict[str, str]) -> dict[str, Any]:
    sg = _group(params)
    gid = sg["SecurityGroupId"]
    if any(gid in i["SecurityGroupIds"]["SecurityGroupId"] for i in _live()):
        raise ApiError("DependencyViolation", "There is still instance(s) in the specified security group.", 403)
    if any(r.get("SourceGroupId") == gid for g in STATE.security_groups.values() if g is not sg for r in g["rules"]):
        raise ApiError("DependencyViolation", "The specified security group is referenced by another group's rule.",
                       403)
    del STATE.security_groups[gid]
    return {"RequestId": _rid()}


_DS_STRATEGIES = ("LowLatency", "Availability", "AvailabilityGroup")


def _ds_members(ds_id: str) -> list[str]:
    return [i["InstanceId"] for i in _live() if i.get("DeploymentSetId") == ds_id]


def create_deployment_set(params: dict[str, str]) -> dict[str, Any]:
    strategy = params.get("Strategy", "Availability")
    if strategy not in _DS_STRATEGIES:
        raise ApiError("InvalidStrategy.Malformed", f"The specified Strategy {strategy!r} is not valid.")
    group_count = _int(params, "GroupCount", 3)
    if strategy == "AvailabilityGroup" and not 1 <= group_count <= 7:
        raise ApiError("InvalidParameter.GroupCount", "GroupCount is 1-7.")
    token = params.get("ClientToken")
    if token:
        for ds in STATE.deployment_sets.values():
            if ds.get("token") == token:
                return {"RequestId": _rid(), "DeploymentSetId": ds["DeploymentSetId"]}
    ds_id = _new_id("ds-")
    STATE.deployment_sets[ds_id] = {
        "DeploymentSetId": ds_id, "DeploymentSetName": params.get("DeploymentSetName", ""),
        "DeploymentSetDescription": params.get("Description", ""), "DeploymentStrategy": strategy,
        "Strategy": strategy, "Domain": "Default", "Granularity": "Host", "CreationTime": _iso(CLOCK.now()),
        "GroupCount": group_count if strategy == "AvailabilityGroup" else 0, "token": token}
    return {"RequestId": _rid(), "DeploymentSetId": ds_id}


def describe_deployment_sets(params: dict[str, str]) -> dict[str, Any]:
    ids = _json_list(params, "DeploymentSetIds")
    items = []
    for ds in STATE.deployment_sets.values():
        if ids is not None and ds["DeploymentSetId"] not in ids:
            continue
        if params.get("DeploymentSetName") and ds["DeploymentSetName"] != params["DeploymentSetName"]:
            continue
        if params.get("Strategy") and ds["DeploymentStrategy"] != params["Strategy"]:
            continue
        members = _ds_members(ds["DeploymentSetId"])
        items.append({k: v for k, v in ds.items() if k[:1].isupper()} | {
            "InstanceAmount": len(members), "InstanceIds": {"InstanceId": members}})
    page, number, size = _number_page(items, params)
    return {"RequestId": _rid(), "DeploymentSets": {"DeploymentSet": page}, "TotalCount": len(items),
            "PageNumber": number, "PageSize": size, "RegionId": REGION}


def delete_deployment_set(params: dict[str, str]) -> dict[str, Any]:
    ds_id = params.get("DeploymentSetId", "")
    if ds_id not in STATE.deployment_sets:
        raise ApiError("InvalidDeploymentSetId.NotFound", f"The specified DeploymentSetId {ds_id!r} does not exist.",
                       404)
    if _ds_members(ds_id):
        raise ApiError("DependencyViolation.Instance", f"The deployment set {ds_id} still holds instances.", 403)
    del STATE.deployment_sets[ds_id]
    return {"RequestId": _rid()}


def import_key_pair(params: dict[str, str]) -> dict[str, Any]:
    name, body = params.get("KeyPairName", ""), params.get("PublicKeyBody", "").strip()
    if not name or not body.startswith(("ssh-", "ecdsa-")):
        raise ApiError("InvalidParameter.PublicKeyBody", "The specified PublicKeyBody is not valid.")
    if name in STATE.key_pairs:
        raise ApiError("KeyPair.AlreadyExist", f"The key pair {name!r} already exists.")
    blob = base64.b64decode(body.split()[1])
    finger = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    STATE.key_pairs[name] = {"KeyPairName": name, "KeyPairFingerPrint": finger, "PublicKeyBody": body,
                             "CreationTime": _iso(CLOCK.now())}
    return {"RequestId": _rid(), "KeyPairName": name, "KeyPairFingerPrint": finger}


def describe_key_pairs(params: dict[str, str]) -> dict[str, Any]:
    items = [{k: v for k, v in p.items() if k != "PublicKeyBody"} for p in STATE.key_pairs.values()
             if not params.get("KeyPairName") or p["KeyPairName"] == params["KeyPairName"]]
    page, number, size = _number_page(items, params)
    return {"RequestId": _rid(), "KeyPairs": {"KeyPair": page}, "TotalCount": len(items), "PageNumber": number,
            "PageSize": size}


ACTIONS = {
    "RunInstances": run_instances, "DescribeInstances": describe_instances,
    "DescribeInstanceStatus": describe_instance_status, "DeleteInstances": delete_instances,
    "StopInstances": stop_instances, "StartInstances": start_instances,
    "GetInstanceConsoleOutput": get_console_output, "TagResources": tag_resources,
    "DescribeInstanceTypes": describe_instance_types, "DescribeVSwitches": describe_vswitches,
    "CreateSecurityGroup": create_security_group, "DescribeSecurityGroups": describe_security_groups,
    "AuthorizeSecurityGroup": authorize_security_group, "RevokeSecurityGroup": revoke_security_group,
    "DescribeSecurityGroupAttribute": describe_security_group_attribute,
    "DeleteSecurityGroup": delete_security_group, "CreateDeploymentSet": create_deployment_set,
    "DescribeDeploymentSets": describe_deployment_sets, "DeleteDeploymentSet": delete_deployment_set,
    "ImportKeyPair": import_key_pair, "DescribeKeyPairs": describe_key_pairs, "DescribePrice": describe_price,
}
#: (g) Actions after which the simulated hosts' SSH source rules are computed again.
SSH_RULE_ACTIONS = frozenset({"AuthorizeSecurityGroup", "RevokeSecurityGroup", "RunInstances", "DeleteInstances",
                              "StartInstances",
                              "DeleteSecurityGroup", "DescribeInstances", "DescribeInstanceStatus"})


# -- the signature check (a) --------------------------------------------------------------------
def verify_signature(environ: dict[str, Any], body: bytes) -> None:
    """Raise ApiError as ECS answers a request whose signature, date, nonce or payload hash is wrong."""
    headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    if environ.get("CONTENT_LENGTH"):
        headers["content-length"] = str(environ["CONTENT_LENGTH"])
    auth = headers.get("authorization", "")
    algorithm, _, rest = auth.partition(" ")
    if algorithm != SIGN_ALGORITHM:
        raise ApiError("MissingAuthorization" if not auth else "InvalidAuthorization",
                       f"The Authorization header is missing or does not use {SIGN_ALGORITHM}.", 400)
    parts = dict(p.split("=", 1) for p in rest.split(",") if "=" in p)
    ak, signed_list, signature = parts.get("Credential", ""), parts.get("SignedHeaders", ""), parts.get("Signature", "")
    secret = STATE.access_keys.get(ak)
    if secret is None:
        raise ApiError("InvalidAccessKeyId.NotFound", "Specified access key is not found.", 404)
    signed = signed_list.split(";") if signed_list else []
    if signed != sorted(signed):
        raise ApiError("IncompleteSignature", "The SignedHeaders are not in sorted order.")
    unsigned = sorted(h for h in headers if (h.startswith("x-acs-") or h == "host") and h not in signed)
    if unsigned:
        raise ApiError("IncompleteSignature", f"The request signature does not conform to Aliyun standards: "
                       f"header(s) {', '.join(unsigned)} must be signed.")
    if headers.get("x-acs-version") != API_VERSION:
        raise ApiError("InvalidVersion", f"Specified parameter Version is not valid (this API is {API_VERSION}).")
    payload = hashlib.sha256(body).hexdigest()
    if headers.get("x-acs-content-sha256") != payload:
        raise ApiError("SignatureDoesNotMatch", "The x-acs-content-sha256 header does not match the request body.")
    try:
        stamp = datetime.strptime(headers.get("x-acs-date", ""), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise ApiError("MissingTimestamp", "The x-acs-date header is missing or not ISO 8601 "
                       "(yyyy-MM-ddTHH:mm:ssZ).") from None
    now = CLOCK.now()
    if abs(now - stamp) > SKEW:
        raise ApiError("InvalidTimeStamp.Expired", f"Specified time stamp or date value is expired (x-acs-date "
                       f"{stamp:%Y-%m-%dT%H:%M:%SZ}, server time {now:%Y-%m-%dT%H:%M:%SZ}).")
    query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
    canonical = canonical_request(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/"), query,
                                  headers, signed, headers.get("x-acs-content-sha256", ""))
    to_sign, expected = acs3_signature(secret, canonical)
    if not hmac.compare_digest(expected, signature):
        raise ApiError("SignatureDoesNotMatch", "Specified signature does not match our calculation. The string to "
                       f"sign is: {to_sign}", 400)
    nonce = headers.get("x-acs-signature-nonce", "")
    if not nonce:
        raise ApiError("MissingSignatureNonce", "The x-acs-signature-nonce header is mandatory.")
    STATE.nonces = {n: t for n, t in STATE.nonces.items() if now - t <= SKEW}
    if nonce in STATE.nonces:
        raise ApiError("SignatureNonceUsed", "Specified signature nonce was used already.")
    STATE.nonces[nonce] = now


def api(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The ECS RPC API (POST /, action in x-acs-action, parameters in the query string)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    action = environ.get("HTTP_X_ACS_ACTION", "")
    try:
        if not action:
            raise ApiError("InvalidAction.NotFound", "Specified api is not found, please check your url and method.",
                           404)
        verify_signature(environ, body)
        handler = ACTIONS.get(action)
        if handler is None:
            raise ApiError("InvalidAction.NotFound", f"Specified api {action} is not found, please check your url "
                           "and method.", 404)
        params = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        if params.get("RegionId", REGION) != REGION:
            raise ApiError("InvalidRegionId.NotFound", f"The specified RegionId {params['RegionId']!r} does not "
                           f"exist (this emulator is {REGION}).", 404)
        result = handler(params)
    except ApiError as exc:
        reply = error_body(exc.code, exc.message, exc.status)
        start_response(f"{exc.status} Error", [("Content-Type", reply.content_type),
                                               ("Content-Length", str(len(reply.body))), *reply.headers])
        return [reply.body]
    payload = json.dumps(result).encode()
    start_response("200 OK", [("Content-Type", "application/json;charset=utf-8"),
                              ("Content-Length", str(len(payload))), ("x-acs-request-id", str(result["RequestId"]))])
    return [payload]


# -- control endpoints ------------------------------------------------------------------------
def _control_stock(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    STATE.stock[(str(raw["zone"]), str(raw["type"]))] = int(raw["count"])
    return {"ok": True}


def _control_quota(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    STATE.quota = int(raw["instances"])
    return {"ok": True}


def _control_kms(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    STATE.kms_keys.update(str(k) for k in raw["keys"])
    return {"ok": True}


def _control_timing(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    if "boot_seconds" in raw:
        STATE.boot_seconds = float(raw["boot_seconds"])
    if "release_seconds" in raw:
        STATE.release_seconds = float(raw["release_seconds"])
    return {"ok": True}


def _control_prices(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    itype = str(raw["type"])
    if raw.get("hour") is None and raw.get("month") is None:
        STATE.prices.pop(itype, None)
    else:
        STATE.prices[itype] = {"hour": float(raw["hour"]), "month": float(raw["month"])}
    return {"ok": True}


def _control_instances(_raw: dict[str, Any], _query: dict[str, str]) -> Any:
    _live()
    return [{**_public(i), "released": bool(i.get("released"))} for i in STATE.instances.values()]


def _reset_state() -> None:
    keys = dict(STATE.access_keys)
    STATE.__dict__.update(State().__dict__)
    STATE.access_keys = keys


def _after_call(action: str, status: int) -> None:
    if SIM.enabled and action in SSH_RULE_ACTIONS and status == 200:
        _sim_ssh_rules()


def build_app() -> FaultMiddleware:
    def faulted(code: str, message: str, status: int) -> ErrorBody:
        return error_body(code, message, status)

    return FaultMiddleware(api, switch=SWITCH, error_body=faulted, identify=_identify, clock=CLOCK, sim_hosts=SIM,
                           after_call=_after_call, reset_state=_reset_state, controls={
                               ("POST", "stock"): _control_stock, ("POST", "quota"): _control_quota,
                               ("POST", "kms-keys"): _control_kms, ("POST", "timing"): _control_timing,
                               ("POST", "prices"): _control_prices,
                               ("GET", "instances"): _control_instances})


def main(argv: list[str] | None = None) -> int:
    parser = server_parser(__doc__.split("\n\n")[0] if __doc__ else None, default_port=5061,
                           sim_hosts_help="boot a simulated GPU host per instance (g; needs root)")
    parser.add_argument("--access-key", action="append", default=[], metavar="ID:SECRET",
                        help="another AccessKey pair to accept (the test pair is always accepted)")
    args = parser.parse_args(argv)
    for pair in args.access_key:
        ak, _, secret = pair.partition(":")
        STATE.access_keys[ak] = secret
    return run_server(parser, args, build_app, title="Alibaba Cloud ECS emulator", sim_hosts=SIM)


if __name__ == "__main__":
    sys.exit(main())
