"""A local Alibaba Cloud ECS API for tests: a real HTTP server that checks signatures as ECS checks them.

An emulator is a claim about the real service: every rule it enforces is an entry of the reference table
``tests/support/reference/alibaba-ecs.yaml`` (the sentence of the ECS API reference or of the official SDK model
it rests on, the error code and HTTP status it answers), applied here by its id through :func:`refuse` or
``RULES.applies``; the request log (``GET /_metalfleet/requests``) names on each call the rules that decided it.

The driver reaches this server exactly as production reaches ECS: the official SDK (``alibabacloud-ecs20140526``)
with its normal endpoint setting (``endpoint="127.0.0.1:PORT"``, ``protocol="http"``). Nothing in-process is
patched on the client side. Both documented request styles are served, each with its parameters in the query
string or in a form-encoded (``application/x-www-form-urlencoded``) body:

* V3 (``ACS3-HMAC-SHA256`` in the ``Authorization`` header, the action in ``x-acs-action``), as the current SDKs
  sign; answers are JSON.
* RPC V2 (``Action``, ``Version``, ``AccessKeyId``, ``Timestamp``, ``SignatureMethod=HMAC-SHA1``,
  ``SignatureVersion``, ``SignatureNonce`` and ``Signature`` as parameters), as ``aliyun-python-sdk-core`` and
  many tools sign; answers are JSON with ``Format=JSON``, XML otherwise (the documented default).

Run it in the foreground (for a demo)::

    python -m metalfleet.testing.alibaba --port 5061

or from Python, as a subprocess the caller owns::

    with AlibabaEmulator.start() as ecs:   # AlibabaEmulator.start(sim_hosts=True): a simulated host per instance
        driver = AlibabaDriver(region=REGION, endpoint=ecs.url)   # with ACCESS_KEY_ID / ACCESS_KEY_SECRET in env
        ecs.set_faults(throttle=0.3, seed=1)

What it does (the table says, rule by rule, why):

(a) Signatures: a configured AccessKey, the signature recomputed from the request (V3: the canonical request with
    the signed headers and the body hash; V2: the sorted, percent-encoded parameters, body ones included, signed
    with HMAC-SHA1 and ``secret&``), the signed headers complete, the time within 15 minutes of the server's clock,
    a nonce not seen in the last 15 minutes, API version 2014-05-26. Errors are ECS's body: ``RequestId``,
    ``HostId``, ``Code``, ``Message``, ``Recommend``.
(b) Instances go Pending -> Starting -> Running (``boot_seconds``, default 0.3 s, of the emulator's clock);
    StopInstances: Stopping -> Stopped (``release_seconds``), StartInstances: Starting -> Running;
    DeleteInstances (Force, or a stopped instance) puts them in Stopping, and ``release_seconds`` later ECS no
    longer lists them (DescribeInstances/DescribeInstanceStatus forget them; the ids answer NotFound).
(c) RunInstances ``ClientToken``: the same token with the same parameters answers the same InstanceIdSets (even
    once released) and buys nothing; other parameters are refused. CreateSecurityGroup and CreateDeploymentSet
    keep their ClientToken the same way (the id first made, even once deleted; other parameters refused).
    ``DryRun`` checks the request (stock and quota included) and buys nothing. ``Amount``/``MinAmount`` buy what
    the stock allows between the two.
(d) Stock per zone and type (``POST /_metalfleet/stock``; default 64 of each type in each zone) and the fault
    switch's capacity; a quota of live pay-as-you-go instances (``POST /_metalfleet/quota``, default 500).
(e) Launch checks: the network interfaces as the reference allows them (a Primary interface carries the vSwitch
    and security groups, the top level then names neither; ERIs within the type's EriQuantity on its network
    cards), the vSwitch, security groups, image, key pair, KMS key (known keys: ``POST /_metalfleet/kms-keys``),
    disks, tags, IMDS options, billing parameters and deployment set.
(f) Tags (Tag.N on RunInstances and CreateSecurityGroup; TagResources) and tag filters on DescribeInstances and
    DescribeSecurityGroups; pagination as the API pages: NextToken/MaxResults (DescribeInstances,
    DescribeInstanceTypes, DescribeSecurityGroups) and PageNumber/PageSize (DescribeInstanceStatus,
    DescribeDeploymentSets, DescribeVSwitches, DescribeKeyPairs).
(g) Simulated GPU hosts (``--sim-hosts``; needs root): each instance RunInstances makes (not a ClientToken replay)
    gets a VM-mode simulated host for its type whose ``ubuntu`` login accepts the key pair's public key
    (ImportKeyPair); the instance's private IP is the host's 127.x.y.z address; GetInstanceConsoleOutput answers
    cloud-init output (base64) with the host's key. The host's eRDMA devices come from the interfaces the
    emulator attached: one per HighPerformance interface on a network card of a type whose EriQuantity allows it
    (``erdma_fabric``). DeleteInstances stops the host. The security groups decide who reaches a host's SSH port.
(h) DescribePrice (``ResourceType=instance``): ``PriceUnit`` Hour (pay-as-you-go; with a spot ``SpotStrategy``, the
    spot hour), Month or Year (subscription), in ECS's shape, from the emulator's own made-up price table
    (:data:`PRICES`), never the catalogue's, so a price a refresh writes can only have come through the API;
    subscriptions get a 15 % discount (rule 1001); a type the table has no spot price for answers ``PriceNotFound``
    when asked the spot price.
(i) Subscriptions: a PrePaid instance carries its ``ExpiredTime`` (creation + Period); DeleteInstances refuses it
    until it has expired (and then only with ``TerminateSubscription``); ModifyInstanceChargeType converts it to
    pay-as-you-go (Running or Stopped, not expired), answering the refund with ``IsDetailFee``; ``POST
    /_metalfleet/expire {"instance"}`` lets a term run out now.

Control endpoints (not ECS; never counted or faulted; the kit's, plus): ``POST /_metalfleet/stock {"zone", "type",
"count"}``, ``POST /_metalfleet/quota {"instances": n}``, ``POST /_metalfleet/kms-keys {"keys": [...]}`` (added),
``POST /_metalfleet/timing {"boot_seconds", "release_seconds"}``, ``POST /_metalfleet/prices {"type", "hour",
"month", "spot"}`` (set a type's list prices, ``spot`` optional; ``null`` hour and month withdraw it), ``POST
/_metalfleet/expire {"instance"}``, ``GET /_metalfleet/instances`` (every instance record, released ones included).
Faults answer ECS's errors:
``Throttling.User`` (400), ``ServiceUnavailable`` (503), and RunInstances' ``OperationDenied.NoStock`` (403).
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape as xml_escape

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
from metalfleet.testing.reference import Enforcer

__all__ = ["ACCESS_KEY_ID", "ACCESS_KEY_SECRET", "API_VERSION", "IMAGES", "INSTANCE_TYPES", "KMS_KEY", "OTHER_VPC_ID",
           "PRICES", "REGION", "RULES", "VPC_ID", "ZONES", "AlibabaEmulator", "acs3_signature", "canonical_request",
           "default_vswitch_id", "erdma_fabric", "rpc_signature", "rpc_string_to_sign"]

#: The test AccessKey pair the emulator accepts (a server started with --access-key ID:SECRET accepts others).
ACCESS_KEY_ID = "LTAI5tMetalfleetEmulat0r"
ACCESS_KEY_SECRET = "mf-emulator-secret-0123456789abcdef"
API_VERSION = "2014-05-26"
REGION = "cn-wulanchabu"
ZONES = ("cn-wulanchabu-a", "cn-wulanchabu-b", "cn-wulanchabu-c")
VPC_ID = "vpc-mf0emulator0000000001"
#: A second VPC, with no vSwitch of its own: a security group made in it is in another VPC than every vSwitch.
OTHER_VPC_ID = "vpc-mf0emulator0000000002"
#: System images the emulator knows (ECS public image ids).
IMAGES = ("ubuntu_22_04_x64_20G_alibase_20240101.vhd", "ubuntu_24_04_x64_20G_alibase_20240812.vhd")
#: A KMS key every emulator knows (tests' default disk key).
KMS_KEY = "key-mfemulator0000000001"
SIGN_ALGORITHM = "ACS3-HMAC-SHA256"
#: The RPC (V2) signature method and version: Signature, SignatureMethod ... as request parameters.
RPC_SIGN_METHOD = "HMAC-SHA1"
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
        "MemorySize": 1024.0, "GPUAmount": 8, "GPUSpec": "NVIDIA A100", "GPUMemorySize": 80.0, "EriQuantity": 2,
        "NetworkCardQuantity": 2, "EniQuantity": 16, "InstanceBandwidthRx": 160000000,
        "InstanceBandwidthTx": 160000000, "LocalStorageAmount": 0, "InstanceCategory": "ECS Bare Metal",
        "CpuArchitecture": "X86",
        "NetworkCards": {"NetworkCardInfo": [{"NetworkCardIndex": i} for i in range(2)]}, "NvmeSupport": "required"},
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
#: Per-ERI bandwidth (Gbit/s) of the types with ERI: the family page's eRDMA bandwidth over its ERIs (ebmgn8v: "up
#: to 160 Gbit/s of bandwidth per instance"; ebmgn7ex: two ERIs on different network card indexes "160 Gbit/s",
#: 实例规格族 https://help.aliyun.com/document_detail/25378.html, read 2026-12-01; ebmgn7ex: 2 physical network
#: cards, 16 ENIs, 160 (80 x 2) Gbit/s, as that page's table gives).
ERI_GBPS = {"ecs.ebmgn8v.48xlarge": 80.0, "ecs.ebmgn7ex.32xlarge": 80.0}
DEFAULT_STOCK = 64
#: (h) The emulator's own DescribePrice table: type -> list price in CNY per hour (pay-as-you-go), per month
#: (subscription) and, for a type sold as spot, per spot hour. Made-up figures, deliberately unlike the catalogue's;
#: the general-purpose type is priced too; two types have no spot price (DescribePrice answers PriceNotFound).
PRICES: dict[str, dict[str, float]] = {
    "ecs.ebmgn8v.48xlarge": {"hour": 160.0, "month": 73000.0, "spot": 48.5},
    "ecs.ebmgn7ex.32xlarge": {"hour": 120.5, "month": 58400.0, "spot": 37.25},
    "ecs.ebmgn7e.32xlarge": {"hour": 110.0, "month": 51100.0, "spot": 33.0},
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

    def set_price(self, instance_type: str, hour: float | None, month: float | None,
                  spot: float | None = None) -> None:
        """(h) Set a type's DescribePrice list prices (CNY per hour, per month, per spot hour: None, not sold as
        spot); hour and month None withdraw it."""
        self.control("POST", "prices", {"type": instance_type, "hour": hour, "month": month, "spot": spot})

    def instances(self) -> list[dict[str, Any]]:
        """Every instance record, released ones included (``released``: true)."""
        result: list[dict[str, Any]] = self.control("GET", "instances")
        return result

    def record_answers(self, on: bool = True) -> None:
        """Put each call's JSON answer on its request-log entry (``requests()[i]["answer"]``) from now on."""
        self.control("POST", "record-answers", {"on": on})

    def expire(self, instance_id: str) -> None:
        """(i) Let a subscription (PrePaid) instance's term run out now: its ExpiredTime moves a minute into the
        past, as if the term had ended (DeleteInstances then releases it with TerminateSubscription)."""
        self.control("POST", "expire", {"instance": instance_id})


# ---------------------------------------------------------------------------------------------
# Signatures (a).
# ---------------------------------------------------------------------------------------------
def _quote(value: str) -> str:
    """RFC 3986 percent-encoding as both signatures use it (A-Z a-z 0-9 - _ . ~ stay as they are)."""
    return urllib.parse.quote(value, safe="~")


def canonical_request(method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str],
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


def rpc_string_to_sign(method: str, params: Mapping[str, str]) -> str:
    """The RPC (V2) StringToSign: ``METHOD&%2F&`` + the percent-encoded canonicalized query string (every
    parameter but Signature, sorted by name, each name and value percent-encoded)."""
    canonical = "&".join(f"{_quote(k)}={_quote(params[k])}" for k in sorted(params) if k != "Signature")
    return f"{method}&{_quote('/')}&{_quote(canonical)}"


def rpc_signature(secret: str, method: str, params: Mapping[str, str]) -> str:
    """Base64(HMAC-SHA1(secret + "&", StringToSign)), the RPC (V2) signature."""
    digest = hmac.new(f"{secret}&".encode(), rpc_string_to_sign(method, params).encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


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
#: The reference table's rules, each applied below by its id (and named on the call's log entry).
RULES = Enforcer("alibaba-ecs", SWITCH.note_rule)


def refuse(rule_id: str, **fmt: Any) -> ApiError:
    """The error of refusal rule ``rule_id`` of the table (its code, HTTP status and message), to raise."""
    code, status, message = RULES.refusal(rule_id, **fmt)
    return ApiError(code, message, status)


def _sim_console(address: str, host_key: str, booted: datetime) -> str:
    return console_text(address, host_key, booted, kernel="5.15.0-119-generic", datasource="DataSourceAliYun",
                        interface="eth0", hostname="iZ" + hashlib.sha256(address.encode()).hexdigest()[:20] + "Z")


SIM = SimHosts(provider="alibaba", console=_sim_console)

#: The RPC (V2) common parameters: the signature's, not the operation's (left out of the logged parameters).
RPC_COMMON = frozenset({"Action", "Version", "AccessKeyId", "Signature", "SignatureMethod", "SignatureVersion",
                        "SignatureNonce", "SignatureType", "Timestamp", "Format", "SecurityToken"})


@dataclass
class Call:
    """One API request as read off the wire: its style (``v3`` or ``rpc``), action, operation parameters (query
    and form body merged), where they came from, and the answer format."""

    style: str
    action: str
    params: dict[str, str]
    query: dict[str, str]
    form: dict[str, str]
    fmt: str


CTX = threading.local()


def read_call(environ: Mapping[str, Any], body: bytes) -> Call | None:
    """The call ``environ``/``body`` make, or None when it is not an API call (no action anywhere)."""
    query = dict(urllib.parse.parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True))
    form: dict[str, str] = {}
    if body and str(environ.get("CONTENT_TYPE", "")).lower().startswith("application/x-www-form-urlencoded"):
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    merged = {**query, **form}
    header_action = str(environ.get("HTTP_X_ACS_ACTION", ""))
    v3 = str(environ.get("HTTP_AUTHORIZATION", "")).startswith(SIGN_ALGORITHM)
    # RPC: the signature is a parameter (some RPC clients send x-acs-* headers as well); V3: the Authorization header
    if not v3 and ("Signature" in merged or ("Action" in merged and not header_action)):
        fmt = "JSON" if merged.get("Format", "XML").upper() == "JSON" else "XML"
        return Call("rpc", merged.get("Action") or header_action,
                    {k: v for k, v in merged.items() if k not in RPC_COMMON}, query, form, fmt)
    if v3 or header_action:
        return Call("v3", header_action, merged, query, form, "JSON")
    return None


def _xml(tag: str, value: Any) -> str:
    if isinstance(value, dict):
        return f"<{tag}>" + "".join(_xml(k, v) for k, v in value.items()) + f"</{tag}>"
    if isinstance(value, list):
        return "".join(_xml(tag, v) for v in value)
    if isinstance(value, bool):
        value = "true" if value else "false"
    text = "" if value is None else str(value)
    return f"<{tag}>{xml_escape(text)}</{tag}>"


def render(doc: dict[str, Any], root: str, fmt: str) -> tuple[str, bytes]:
    """(content type, body) of an answer in the call's format: JSON, or XML (a list repeats its element)."""
    if fmt == "XML":
        return "text/xml;charset=utf-8", ("<?xml version='1.0' encoding='UTF-8'?>" + _xml(root, doc)).encode()
    return "application/json;charset=utf-8", json.dumps(doc).encode()


def error_body(code: str, message: str, status: int, request_id: str | None = None) -> ErrorBody:
    """ECS's error reply (JSON, or XML for an RPC call that asked for XML or no format)."""
    rid = request_id or str(uuid.uuid4()).upper()
    doc = {"RequestId": rid, "HostId": f"ecs.{REGION}.aliyuncs.com", "Code": code, "Message": message,
           "Recommend": f"https://api.aliyun.com/troubleshoot?q={code}&product=Ecs&requestId={rid}"}
    call = getattr(CTX, "call", None)
    content_type, payload = render(doc, "Error", call.fmt if call is not None else "JSON")
    return ErrorBody(content_type, payload, headers=(("x-acs-request-id", rid),))


def _identify(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    call = read_call(environ, body)
    CTX.call = call
    return (call.action, dict(call.params)) if call is not None else None


@dataclass
class State:
    """Everything the emulated ECS holds (one region)."""

    access_keys: dict[str, str] = field(default_factory=lambda: {ACCESS_KEY_ID: ACCESS_KEY_SECRET})
    nonces: dict[str, datetime] = field(default_factory=dict)
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    tokens: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    charge_tokens: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: CreateSecurityGroup / CreateDeploymentSet ClientToken -> (the first request's digest, the id it made); kept
    #: once the resource is deleted, as RunInstances' tokens are (rules sg-client-token-*, ds-client-token-*)
    sg_tokens: dict[str, tuple[str, str]] = field(default_factory=dict)
    ds_tokens: dict[str, tuple[str, str]] = field(default_factory=dict)
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
    #: Whether each call's JSON answer goes on its request-log entry (``answer``), for tests that hold the answers
    #: to the table's types (``POST /_metalfleet/record-answers {"on": true}``); off by default.
    record_answers: bool = False


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


def _parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%MZ").replace(tzinfo=UTC)


def _add_months(t: datetime, months: int) -> datetime:
    year, month = divmod(t.month - 1 + months, 12)
    day = min(t.day, calendar.monthrange(t.year + year, month + 1)[1])
    return t.replace(year=t.year + year, month=month + 1, day=day)


# -- parameters -------------------------------------------------------------------------------
def _indexed(params: Mapping[str, str], name: str) -> list[tuple[int, str]]:
    """(N, rest) for every key ``name.N`` or ``name.N.rest``."""
    out = []
    for key in params:
        if key.startswith(name + "."):
            n, _, rest = key[len(name) + 1:].partition(".")
            if n.isdigit():
                out.append((int(n), rest))
    return out


def plist(params: Mapping[str, str], name: str) -> list[str]:
    """A flattened list parameter (``InstanceId.1``, ``InstanceId.2``) in order."""
    return [params[f"{name}.{n}"] for n, rest in sorted(_indexed(params, name)) if not rest]


def objs(params: Mapping[str, str], name: str) -> list[dict[str, str]]:
    """A flattened list of objects (``Tag.1.Key``) as dicts of their flat sub-keys, in order."""
    by_n: dict[int, dict[str, str]] = {}
    for n, rest in _indexed(params, name):
        if rest:
            by_n.setdefault(n, {})[rest] = params[f"{name}.{n}.{rest}"]
    return [by_n[n] for n in sorted(by_n)]


def _json_list(params: Mapping[str, str], name: str) -> list[str] | None:
    raw = params.get(name)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        raise refuse("param-json-array", name=name) from None
    if not isinstance(value, list):
        raise refuse("param-json-array", name=name)
    return [str(v) for v in value]


def _int(params: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(params.get(name, default))
    except ValueError:
        raise refuse("param-integer", name=name, value=params.get(name)) from None


def _bool(params: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = params.get(name)
    return default if raw is None else raw.lower() == "true"


def _tags_of(params: Mapping[str, str]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in objs(params, "Tag") if t.get("Key")}


def _tag_block(tags: dict[str, str]) -> dict[str, Any]:
    return {"Tag": [{"TagKey": k, "TagValue": v} for k, v in tags.items()]}


def _check_tags(params: Mapping[str, str], action: str) -> dict[str, str]:
    """(f) The Tag.N of a request (RunInstances, CreateSecurityGroup, TagResources), refused as ``action`` refuses
    too many, a bad key or value, or a key given twice."""
    items = objs(params, "Tag")
    if len(items) > 20:
        if action == "TagResources":
            raise refuse("tag-count", count=len(items))
        if action == "CreateSecurityGroup":
            raise refuse("sg-tag-count", count=len(items))
        raise refuse("run-tag-count", count=len(items))
    seen: set[str] = set()
    for t in items:
        key, value = t.get("Key", ""), t.get("Value", "")
        if (not key or len(key) > 128 or key.lower().startswith(("aliyun", "acs:"))
                or "http://" in key or "https://" in key):
            raise refuse("tag-key", key=key)
        if len(value) > 128 or "http://" in value or "https://" in value:
            raise refuse("tag-value", key=key, value=value)
        if key in seen:
            raise refuse("tag-duplicate", key=key)
        seen.add(key)
    return {t["Key"]: t.get("Value", "") for t in items}


def _token_page(items: list[Any], params: Mapping[str, str], default: int = 10, low: int = 1,
                high: int = 100) -> tuple[list[Any], str]:
    """NextToken/MaxResults paging: the page and the next token ("" at the end); MaxResults brought into the
    operation's range (``low``..``high``)."""
    size = max(low, min(_int(params, "MaxResults", default), high))
    token = params.get("NextToken") or ""
    start = 0
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except ValueError:
            raise refuse("param-next-token", token=token) from None
    page = items[start:start + size]
    more = start + size < len(items)
    RULES.applies("page-next-token")
    return page, base64.urlsafe_b64encode(str(start + size).encode()).decode() if more else ""


def _number_page(items: list[Any], params: Mapping[str, str], default: int = 10,
                 high: int = 50) -> tuple[list[Any], int, int]:
    """PageNumber/PageSize paging: the page, its number and size (at most ``high``)."""
    number = max(1, _int(params, "PageNumber", 1))
    size = max(1, min(_int(params, "PageSize", default), high))
    RULES.applies("page-number")
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


def _expired(inst: Mapping[str, Any]) -> bool:
    """(i) A subscription whose term has run out (by the emulator's clock)."""
    return (inst.get("InstanceChargeType") == "PrePaid" and bool(inst.get("ExpiredTime"))
            and CLOCK.now() >= _parse_iso(str(inst["ExpiredTime"])))


#: Disk categories the RunInstances reference lists (system disks; data disks add the last three).
SYSTEM_DISK_CATEGORIES = ("cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud", "cloud_auto", "cloud_essd_entry")
DATA_DISK_CATEGORIES = (*SYSTEM_DISK_CATEGORIES, "cloud_regional_disk_auto", "elastic_ephemeral_disk_standard",
                        "elastic_ephemeral_disk_premium")
#: cloud_essd_entry is only for these families (u1, e).
ESSD_ENTRY_FAMILIES = ("ecs.u1", "ecs.e")
#: Size ranges (GiB) per category (an ESSD at its default performance level PL1).
SYSTEM_DISK_SIZE = {"cloud": (20, 500), "cloud_essd": (20, 2048), "cloud_auto": (1, 2048)}
DATA_DISK_SIZE = {"cloud_efficiency": (20, 32768), "cloud_ssd": (20, 32768), "cloud_essd": (20, 65536),
                  "cloud": (5, 2000), "cloud_auto": (1, 65536), "cloud_essd_entry": (10, 32768)}
ESSD_PL_SIZE = {"PL0": 1, "PL1": 20, "PL2": 461, "PL3": 1261}
#: Period values per PeriodUnit for a subscription (Week: the China site only).
PERIODS = {"Month": (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 24, 36, 48, 60), "Week": (1, 2, 3, 4)}
_HOST_SEGMENT = re.compile(r"[A-Za-z0-9-]+")


def _check_disks(params: Mapping[str, str], info: Mapping[str, Any]) -> None:
    family = str(info["InstanceTypeFamily"])
    system = {k.removeprefix("SystemDisk."): v for k, v in params.items() if k.startswith("SystemDisk.")}
    data = objs(params, "DataDisk")
    if len(data) > 16:
        raise refuse("run-data-disk-count", count=len(data))
    disks = [("SystemDisk", system, SYSTEM_DISK_CATEGORIES, SYSTEM_DISK_SIZE)] + [
        (f"DataDisk.{i}", d, DATA_DISK_CATEGORIES, DATA_DISK_SIZE) for i, d in enumerate(data, 1)]
    for where, d, categories, sizes in disks:
        kind = "system" if where == "SystemDisk" else "data"
        category = d.get("Category")
        if category is not None and (category not in categories or (
                category == "cloud_essd_entry" and family not in ESSD_ENTRY_FAMILIES)):
            if kind == "system":
                raise refuse("run-system-disk-category", where=where, category=category, family=family)
            raise refuse("run-data-disk-category", where=where, category=category, family=family)
        if "Size" in d:
            size = _int(d, "Size", 0)
            low, high = sizes.get(category or "cloud_efficiency", (20, 2048 if kind == "system" else 32768))
            if category == "cloud_essd":
                low = ESSD_PL_SIZE.get(d.get("PerformanceLevel", "PL1"), low)
            if not low <= size <= high and kind == "system":
                raise refuse("run-system-disk-size", where=where, size=size, low=low, high=high,
                             category=category or "cloud_efficiency")
            if not low <= size <= high:
                raise refuse("run-data-disk-size", where=where, size=size, low=low, high=high,
                             category=category or "cloud_efficiency")
        kms = d.get("KMSKeyId")
        if kms and d.get("Encrypted", "false").lower() != "true":
            raise refuse("run-kms-needs-encrypted", where=where)
        if kms and kms not in STATE.kms_keys:
            raise refuse("run-kms-key-unknown", where=where, key=kms)


def _check_names(params: Mapping[str, str]) -> None:
    name = params.get("InstanceName")
    if name is not None and not 2 <= len(name) <= 128:
        raise refuse("run-instance-name", name=name)
    host = params.get("HostName")
    if host is not None:
        segments = host.split(".")
        if (not 2 <= len(host) <= 64 or host[0] in ".-" or host[-1] in ".-" or ".." in host or "--" in host
                or not all(_HOST_SEGMENT.fullmatch(s) for s in segments)):
            raise refuse("run-host-name", name=host)


def _check_billing(params: Mapping[str, str]) -> str:
    charge = params.get("InstanceChargeType", "PostPaid")
    if charge not in ("PrePaid", "PostPaid"):
        raise refuse("run-charge-type", value=charge)
    spot = params.get("SpotStrategy", "NoSpot")
    if spot not in ("NoSpot", "SpotWithPriceLimit", "SpotAsPriceGo"):
        raise refuse("run-spot-strategy", value=spot)
    if charge == "PrePaid":
        if "Period" not in params:
            raise refuse("run-period-required")
        unit = params.get("PeriodUnit", "Month")
        period = _int(params, "Period", 0)
        if period not in PERIODS.get(unit, ()):
            raise refuse("run-period-invalid", period=period, unit=unit)
        if spot != "NoSpot":
            raise refuse("run-spot-prepaid", value=spot)
    elif not _bool(params, "AutoPay", True):
        raise refuse("run-autopay-postpaid")
    return charge


def _groups_of(params: Mapping[str, str], prefix: str = "") -> list[str]:
    one = params.get(f"{prefix}SecurityGroupId")
    many = plist(params, f"{prefix}SecurityGroupIds")
    return [one] if one else many


def _check_network(params: Mapping[str, str], info: Mapping[str, Any]) -> tuple[dict[str, Any], list[str],
                                                                             list[dict[str, str]]]:
    """(e) The instance's vSwitch, security groups and network interfaces, as the reference allows them."""
    itype = str(info["InstanceTypeId"])
    nics = objs(params, "NetworkInterface")
    primary = [n for n in nics if n.get("InstanceType") == "Primary"]
    top_groups = "SecurityGroupId" in params or bool(plist(params, "SecurityGroupIds"))
    if "SecurityGroupId" in params and plist(params, "SecurityGroupIds"):
        raise refuse("run-security-group-both")
    if primary:
        nic = primary[0]
        if "VSwitchId" in params:
            raise refuse("run-primary-nic-vswitch", vswitch=params["VSwitchId"])
        if top_groups:
            raise refuse("run-primary-nic-security-group")
        if not nic.get("VSwitchId"):
            raise refuse("run-primary-nic-needs-vswitch")
        if nic.get("SecurityGroupId") and plist(nic, "SecurityGroupIds"):
            raise refuse("run-nic-security-group-both")
        if not _groups_of(nic):
            raise refuse("run-primary-nic-needs-security-group")
        if int(nic.get("NetworkCardIndex") or 0) != 0:
            raise refuse("run-primary-nic-card-index", card=nic.get("NetworkCardIndex"))
        vswitch_id, groups = nic["VSwitchId"], _groups_of(nic)
    else:
        vswitch_id, groups = params.get("VSwitchId", ""), _groups_of(params)
    if not vswitch_id:
        raise refuse("run-vswitch-required")
    vsw = VSWITCHES.get(vswitch_id)
    if vsw is None:
        raise refuse("run-vswitch-not-found", vswitch=vswitch_id)
    zone = params.get("ZoneId") or ""
    if zone and vsw["ZoneId"] != zone:
        raise refuse("run-vswitch-zone", vswitch=vswitch_id, vswitch_zone=vsw["ZoneId"], zone=zone)
    if not groups:
        raise refuse("run-security-group-required")
    secondary_groups = [g for n in nics if n.get("InstanceType") != "Primary" for g in _groups_of(n)]
    for g in [*groups, *secondary_groups]:
        sg = STATE.security_groups.get(g)
        if sg is None:
            raise refuse("run-security-group-not-found", group=g)
        if sg["VpcId"] != vsw["VpcId"]:
            raise refuse("run-security-group-vpc", group=g, vswitch=vswitch_id)
    for n in nics:
        if n.get("InstanceType") != "Primary" and n.get("VSwitchId"):
            other = VSWITCHES.get(n["VSwitchId"])
            if other is None:
                raise refuse("run-vswitch-not-found", vswitch=n["VSwitchId"])
            if other["ZoneId"] != vsw["ZoneId"]:
                raise refuse("run-vswitch-zone", vswitch=n["VSwitchId"], vswitch_zone=other["ZoneId"],
                             zone=vsw["ZoneId"])
    if len(nics) > int(info["EniQuantity"]):
        raise refuse("run-nic-count", count=len(nics), itype=itype, limit=info["EniQuantity"])
    eri = [n for n in nics if n.get("NetworkInterfaceTrafficMode") == "HighPerformance"]
    if len(eri) > int(info["EriQuantity"]):
        raise refuse("run-eri-count", count=len(eri), itype=itype, limit=info["EriQuantity"])
    cards = int(info["NetworkCardQuantity"])
    for n in nics:
        card = int(n.get("NetworkCardIndex") or 0)
        if not 0 <= card < cards:
            raise refuse("run-nic-card-index", card=card, itype=itype, cards=cards)
    if eri:
        RULES.applies("run-eri-attached")
    return vsw, groups, nics


def _check_run(params: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, str]], list[str],
                                                   str]:
    """(e) The checks RunInstances makes before it buys: (type, vSwitch, interfaces, security groups, charge)."""
    for name in ("InstanceType", "ImageId"):
        if not params.get(name):
            raise refuse("run-missing-parameter", name=name)
    itype = params["InstanceType"]
    info = INSTANCE_TYPES.get(itype)
    if info is None:
        raise refuse("run-instance-type-unknown", itype=itype)
    if params["ImageId"] not in IMAGES:
        raise refuse("run-image-unknown", image=params["ImageId"])
    vsw, groups, nics = _check_network(params, info)
    key = params.get("KeyPairName")
    if key and key not in STATE.key_pairs:
        raise refuse("run-key-pair-unknown", name=key)
    _check_disks(params, info)
    _check_names(params)
    if params.get("HttpTokens", "optional") not in ("optional", "required"):
        raise refuse("run-http-tokens", value=params["HttpTokens"])
    if params.get("HttpEndpoint", "enabled") not in ("enabled", "disabled"):
        raise refuse("run-http-endpoint", value=params["HttpEndpoint"])
    if not 0 <= _int(params, "InternetMaxBandwidthOut", 0) <= 100:
        raise refuse("run-bandwidth-out", value=params.get("InternetMaxBandwidthOut"))
    if params.get("InternetChargeType", "PayByTraffic") not in ("PayByBandwidth", "PayByTraffic"):
        raise refuse("run-internet-charge-type", value=params["InternetChargeType"])
    charge = _check_billing(params)
    _check_tags(params, "RunInstances")
    user_data = params.get("UserData")
    if user_data is not None:
        try:
            decoded = base64.b64decode(user_data, validate=True)
        except ValueError:
            raise refuse("run-user-data", size=-1) from None
        if len(decoded) > 32 * 1024:
            raise refuse("run-user-data", size=len(decoded))
    ds_id = params.get("DeploymentSetId")
    if ds_id:
        ds = STATE.deployment_sets.get(ds_id)
        if ds is None:
            raise refuse("run-deployment-set-not-found", ds=ds_id)
    return info, vsw, nics, groups, charge


def _digest(params: Mapping[str, str], leave_out: Iterable[str]) -> str:
    skip = set(leave_out)
    return hashlib.sha256(json.dumps(sorted((k, v) for k, v in params.items() if k not in skip)).encode()).hexdigest()


def run_instances(params: dict[str, str]) -> dict[str, Any]:
    token = params.get("ClientToken")
    if token is not None and (not token or len(token) > 64 or not token.isascii()):
        raise refuse("run-client-token-invalid", token=token)
    dry = _bool(params, "DryRun")
    digest = _digest(params, ("ClientToken", "DryRun"))
    if token and token in STATE.tokens and not dry:
        first, ids = STATE.tokens[token]
        if first != digest:
            raise refuse("run-client-token-mismatch", token=token)
        RULES.applies("run-client-token-replay")
        return {"RequestId": _rid(), "InstanceIdSets": {"InstanceIdSet": ids}}
    info, vsw, nics, groups, charge = _check_run(params)
    itype, zone = info["InstanceTypeId"], vsw["ZoneId"]
    amount = _int(params, "Amount", 1)
    if not 1 <= amount <= 100:
        raise refuse("run-amount", amount=amount)
    minimum = _int(params, "MinAmount", amount) if "MinAmount" in params else None
    if minimum is not None and not 1 <= minimum <= amount:
        raise refuse("run-min-amount", min=minimum, amount=amount)
    if charge == "PostPaid" and len([i for i in _live() if i["InstanceChargeType"] == "PostPaid"]) + (
            minimum or amount) > STATE.quota:
        raise refuse("run-quota-afterpay", quota=STATE.quota)
    stock = STATE.stock.get((zone, itype), DEFAULT_STOCK)
    buy = min(amount, stock)
    if buy < (minimum or amount):
        raise refuse("run-no-stock", itype=itype, zone=zone)
    if dry:
        raise refuse("run-dry-run")
    if not SWITCH.take_capacity(buy):
        raise refuse("run-no-stock", itype=itype, zone=zone)
    if buy < amount:
        RULES.applies("run-min-amount-partial")
    STATE.stock[(zone, itype)] = stock - buy
    tags = _tags_of(params)
    ids = []
    primary = next((n for n in nics if n.get("InstanceType") == "Primary"), None)
    secondaries = [n for n in nics if n is not primary]
    interfaces = [primary or {}, *secondaries]
    months = _int(params, "Period", 1) * (1 if params.get("PeriodUnit", "Month") == "Month" else 0)
    weeks = _int(params, "Period", 1) if params.get("PeriodUnit") == "Week" else 0
    for _ in range(buy):
        iid = _new_id("i-")
        STATE.ip_next += 1
        n = STATE.ip_next
        third = vsw["CidrBlock"].split(".")[2]
        eni = [{"NetworkInterfaceId": _new_id("eni-"), "Type": "Primary" if k == 0 else "Secondary",
                "PrimaryIpAddress": f"172.16.{third}.{(n + k) % 250 + 2}",
                "MacAddress": "00:16:3e:" + ":".join(f"{b:02x}" for b in os.urandom(3))}
               for k in range(len(interfaces))]
        now = CLOCK.now()
        inst = {
            "InstanceId": iid, "InstanceName": params.get("InstanceName") or iid, "HostName": params.get("HostName")
            or iid, "InstanceType": itype, "InstanceTypeFamily": info["InstanceTypeFamily"], "RegionId": REGION,
            "ZoneId": zone, "Status": "Pending", "ImageId": params["ImageId"], "OSType": "linux",
            "OSName": "Ubuntu 22.04 64 bit", "Cpu": info["CpuCoreCount"], "Memory": int(info["MemorySize"] * 1024),
            "GPUAmount": info["GPUAmount"], "GPUSpec": info["GPUSpec"], "InstanceNetworkType": "vpc",
            "InstanceChargeType": charge, "SpotStrategy": params.get("SpotStrategy", "NoSpot"),
            "InternetChargeType": params.get("InternetChargeType", "PayByTraffic"),
            "InternetMaxBandwidthOut": _int(params, "InternetMaxBandwidthOut", 0),
            "KeyPairName": params.get("KeyPairName", ""), "DeploymentSetId": params.get("DeploymentSetId", ""),
            "CreationTime": _iso(now), "StartTime": _iso(now),
            "VpcAttributes": {"VpcId": vsw["VpcId"], "VSwitchId": vsw["VSwitchId"],
                              "PrivateIpAddress": {"IpAddress": [eni[0]["PrimaryIpAddress"]]}},
            "PublicIpAddress": {"IpAddress": [f"47.92.{n // 250 % 250}.{n % 250 + 1}"]
                                if _int(params, "InternetMaxBandwidthOut", 0) > 0 else []},
            "SecurityGroupIds": {"SecurityGroupId": groups},
            "NetworkInterfaces": {"NetworkInterface": eni},
            "MetadataOptions": {"HttpTokens": params.get("HttpTokens", "optional"),
                                "HttpEndpoint": params.get("HttpEndpoint", "enabled")},
            "Tags": _tag_block(tags),
            "created": CLOCK.time(), "delete_at": None, "released": False, "period_months": months,
            "eri": [(i.get("NetworkInterfaceTrafficMode", "Standard"), int(i.get("NetworkCardIndex") or 0))
                    for i in interfaces],
        }
        if charge == "PrePaid":
            ends = _add_months(now, months) if months else now + timedelta(weeks=weeks)
            inst["ExpiredTime"] = _iso(ends)
            RULES.applies("run-prepaid-expiry")
        STATE.instances[iid] = inst
        ids.append(iid)
        if SIM.enabled:
            _sim_boot(inst)
    RULES.applies("run-starts")
    if token:
        STATE.tokens[token] = (digest, ids)
    # OrderId: "This parameter is returned only when `InstanceChargeType` is set to PrePaid." TradePrice: the
    # transaction price (the emulator's own prices: a subscription's term, or a pay-as-you-go hour).
    answer: dict[str, Any] = {"RequestId": _rid(), "InstanceIdSets": {"InstanceIdSet": ids}}
    if charge == "PrePaid":
        answer.update(OrderId=str(secrets.randbelow(10**15)),
                      TradePrice=_money(buy * _month_price(itype) * max(months, 1) * (1 - SUBSCRIPTION_DISCOUNT)))
    else:
        answer["TradePrice"] = _money(buy * float((STATE.prices.get(itype) or {"hour": 0.0})["hour"]))
    return answer


def _month_price(itype: str) -> float:
    return float((STATE.prices.get(itype) or PRICES.get(itype) or {"month": 0.0})["month"])


def _sim_boot(inst: dict[str, Any]) -> None:
    pair = STATE.key_pairs.get(inst["KeyPairName"] or "")
    keys = [pair["PublicKeyBody"]] if pair else []
    tags = {t["TagKey"]: t["TagValue"] for t in inst["Tags"]["Tag"]}
    try:
        host = SIM.boot(inst["InstanceId"], inst["InstanceType"], keys, tags,
                        fabric=erdma_fabric(inst["InstanceType"], inst["eri"]))
    except Exception as exc:  # the emulator's own machinery failed: the service's internal error
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
    if _bool(params, "DryRun"):
        raise refuse("describe-dry-run")
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
        if params.get("InstanceChargeType") and inst["InstanceChargeType"] != params["InstanceChargeType"]:
            continue
        items.append(_public(inst))
    RULES.applies("describe-released-gone")
    if "PageNumber" in params and "NextToken" not in params and "MaxResults" not in params:
        page, number, size = _number_page(items, params, high=100)
        return {"RequestId": _rid(), "Instances": {"Instance": page}, "TotalCount": len(items), "PageNumber": number,
                "PageSize": size}
    page, token = _token_page(items, params, low=10)
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
        raise refuse("delete-missing-instance-id")
    live = {i["InstanceId"]: i for i in _live()}
    force = _bool(params, "Force")
    for iid in ids:
        inst = live.get(iid)
        if inst is None:
            raise refuse("delete-not-found", id=iid)
        if inst["InstanceChargeType"] == "PrePaid" and inst.get("delete_at") is None:
            if not _expired(inst):
                raise refuse("delete-subscription-unexpired", id=iid, expires=inst["ExpiredTime"])
            if not _bool(params, "TerminateSubscription"):
                raise refuse("delete-subscription-expired-needs-terminate", id=iid, expires=inst["ExpiredTime"])
        if inst["Status"] not in ("Stopped",) and not force and inst.get("delete_at") is None:
            raise refuse("delete-needs-force", id=iid, status=inst["Status"])
    if _bool(params, "DryRun"):
        raise refuse("delete-dry-run")
    for iid in ids:
        inst = live[iid]
        if inst.get("delete_at") is None:
            if inst["InstanceChargeType"] == "PrePaid":
                RULES.applies("delete-expired-subscription")
            inst["delete_at"] = CLOCK.time()
            inst["Status"] = "Stopping"
            SIM.power_off(iid)
    RULES.applies("delete-releases")
    return {"RequestId": _rid()}


def modify_instance_charge_type(params: dict[str, str]) -> dict[str, Any]:
    """(i) PrePaid <-> PostPaid for up to 20 instances, Running or Stopped, not expired; the refund of a
    subscription converted to pay-as-you-go answered per instance with IsDetailFee."""
    ids = _json_list(params, "InstanceIds")
    if not ids:
        raise refuse("charge-instance-ids", ids=params.get("InstanceIds"))
    if len(ids) > 20:
        raise refuse("charge-too-many", count=len(ids))
    target = params.get("InstanceChargeType", "PrePaid")
    if target not in ("PrePaid", "PostPaid"):
        raise refuse("charge-type-invalid", value=target)
    token = params.get("ClientToken")
    if token is not None and (not token or len(token) > 64 or not token.isascii()):
        raise refuse("charge-client-token-invalid", token=token)
    dry = _bool(params, "DryRun")
    digest = _digest(params, ("ClientToken", "DryRun"))
    if token and token in STATE.charge_tokens and not dry and STATE.charge_tokens[token][0] == digest:
        RULES.applies("charge-client-token-replay")
        return {**STATE.charge_tokens[token][1], "RequestId": _rid()}
    live = {i["InstanceId"]: i for i in _live()}
    for iid in ids:
        inst = live.get(iid)
        if inst is None:
            raise refuse("charge-instance-ids", ids=iid)
        if inst["Status"] not in ("Running", "Stopped") or inst.get("delete_at") is not None:
            raise refuse("charge-status", id=iid, status=inst["Status"])
        if inst["InstanceChargeType"] == target:
            raise refuse("charge-same-type", id=iid, value=target)
        if _expired(inst):
            raise refuse("charge-expired", id=iid)
    months = 0
    if target == "PrePaid":
        unit = params.get("PeriodUnit", "Month")
        period = _int(params, "Period", 1)
        if unit != "Month" or period not in PERIODS["Month"]:
            raise refuse("charge-period-invalid", period=period, unit=unit)
        months = period
    if dry:
        raise refuse("charge-dry-run")
    now = CLOCK.now()
    fees = []
    for iid in ids:
        inst = live[iid]
        if target == "PostPaid":
            ends = _parse_iso(inst.pop("ExpiredTime"))
            term = max((ends - _parse_iso(inst["CreationTime"])).total_seconds(), 1.0)
            left = max((ends - now).total_seconds(), 0.0)
            paid = _month_price(inst["InstanceType"]) * max(inst.get("period_months") or 1, 1) * (
                1 - SUBSCRIPTION_DISCOUNT)
            fees.append({"InstanceId": iid, "Fee": f"{-paid * left / term:.2f}", "Currency": "CNY"})
            inst["InstanceChargeType"], inst["period_months"] = "PostPaid", 0
            RULES.applies("charge-to-postpaid")
        else:
            inst["InstanceChargeType"], inst["period_months"] = "PrePaid", months
            inst["ExpiredTime"] = _iso(_add_months(now, months))
            fees.append({"InstanceId": iid, "Fee": f"{_month_price(inst['InstanceType']) * months:.2f}",
                         "Currency": "CNY"})
            RULES.applies("charge-to-prepaid")
    answer: dict[str, Any] = {"RequestId": _rid()}
    if target == "PrePaid":
        answer["OrderId"] = str(secrets.randbelow(10**15))
    if target == "PrePaid" or _bool(params, "IsDetailFee"):
        answer["FeeOfInstances"] = {"FeeOfInstance": fees}
    if token:
        STATE.charge_tokens[token] = (digest, {k: v for k, v in answer.items() if k != "RequestId"})
    return answer


def stop_instances(params: dict[str, str]) -> dict[str, Any]:
    """(b) Running -> Stopping -> Stopped (``release_seconds``); the simulated host powers off, its disk stays."""
    ids = plist(params, "InstanceId")
    live = {i["InstanceId"]: i for i in _live()}
    for iid in ids:
        inst = live.get(iid)
        if inst is None:
            raise refuse("stop-not-found", id=iid)
        if inst["Status"] != "Running" or inst.get("delete_at") is not None:
            raise refuse("stop-needs-running", id=iid, status=inst["Status"])
    for iid in ids:
        live[iid]["Status"], live[iid]["stop_at"] = "Stopping", CLOCK.time()
        live[iid]["StoppedMode"] = params.get("StoppedMode", "KeepCharging")
        SIM.power_off(iid)
    RULES.applies("stop-stops")
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
            raise refuse("start-not-found", id=iid)
        if inst["Status"] != "Stopped":
            raise refuse("start-needs-stopped", id=iid, status=inst["Status"])
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
        raise refuse("console-not-found", id=iid)
    text = SIM.console(iid) or (f"[    0.000000] Linux version 5.15.0-119-generic (buildd@lcy02-amd64-020)\r\n"
                                f"Ubuntu 22.04.4 LTS {inst['InstanceName']} ttyS0\r\n")
    return {"RequestId": _rid(), "InstanceId": iid, "ConsoleOutput": base64.b64encode(text.encode()).decode(),
            "LastUpdateTime": _iso(CLOCK.now())}


#: TagResources' ResourceType values (the emulator keeps instances and security groups).
RESOURCE_TYPES = ("instance", "disk", "snapshot", "image", "securitygroup", "volume", "eni", "ddh", "ddhcluster",
                  "keypair", "launchtemplate", "reservedinstance", "snapshotpolicy", "elasticityassurance",
                  "capacityreservation", "command", "invocation", "activation", "managedinstance")


def tag_resources(params: dict[str, str]) -> dict[str, Any]:
    kind = params.get("ResourceType", "")
    if kind not in RESOURCE_TYPES:
        raise refuse("tag-resource-type", value=kind)
    resource_ids = plist(params, "ResourceId")
    if len(resource_ids) > 50:
        raise refuse("tag-resource-count", count=len(resource_ids))
    tags = _check_tags(params, "TagResources")
    if not tags:
        raise refuse("tag-missing-tags")
    held: dict[str, dict[str, str]] = {}
    live = {i["InstanceId"]: i for i in _live()}
    for rid in resource_ids:
        if kind == "instance" and rid in live:
            held[rid] = {t["TagKey"]: t["TagValue"] for t in live[rid]["Tags"]["Tag"]}
        elif kind == "securitygroup" and rid in STATE.security_groups:
            held[rid] = dict(STATE.security_groups[rid]["tags"])
        else:
            raise refuse("tag-resource-not-found", id=rid)
    for rid, current in held.items():
        if len({**current, **tags}) > 20:
            raise refuse("tag-resource-quota", id=rid)
    for rid, current in held.items():
        current.update(tags)
        if kind == "instance":
            live[rid]["Tags"] = _tag_block(current)
        else:
            STATE.security_groups[rid]["tags"] = current
    RULES.applies("tag-overwrites")
    return {"RequestId": _rid()}


def describe_instance_types(params: dict[str, str]) -> dict[str, Any]:
    names = plist(params, "InstanceTypes")
    items = [t for n, t in INSTANCE_TYPES.items() if not names or n in names]
    page, token = _token_page(items, params, default=1600, high=1600)
    return {"RequestId": _rid(), "InstanceTypes": {"InstanceType": page}, "NextToken": token}


def _money(value: float) -> float:
    return round(value, 4)


def describe_price(params: dict[str, str]) -> dict[str, Any]:
    """(h) ECS's price of an instance order: list price, discount and trade price, itemised, with the rules."""
    if params.get("ResourceType", "instance") != "instance":
        raise refuse("price-resource-type", value=params.get("ResourceType"))
    itype = params.get("InstanceType", "")
    if not itype:
        raise refuse("price-instance-type-missing")
    table = STATE.prices.get(itype)
    if table is None:
        raise refuse("price-instance-type-unknown", itype=itype)
    unit = params.get("PriceUnit", "Hour")
    period = _int(params, "Period", 1)
    limits = {"Hour": 1, "Week": 4, "Month": 9, "Year": 5}
    if unit not in limits:
        raise refuse("price-unit", value=unit)
    if unit != "Hour" and not 1 <= period <= limits[unit]:
        raise refuse("price-period", period=period, unit=unit)
    months = 0 if unit in ("Hour", "Week") else period * (12 if unit == "Year" else 1)
    hours = {"Hour": 1.0, "Week": 168.0 * period}.get(unit, 0.0)
    disk_size = _int(params, "SystemDisk.Size", 40)
    hourly = table["hour"]
    if params.get("SpotStrategy") in ("SpotWithPriceLimit", "SpotAsPriceGo"):
        if unit != "Hour" or period != 1:
            RULES.applies("price-spot-subscription")
        elif table.get("spot") is None:
            raise refuse("price-spot-not-found", itype=itype)
        else:
            RULES.applies("price-spot")
            hourly = table["spot"]
    instance = hourly * hours if hours else table["month"] * months
    disk = disk_size * (DISK_GIB["Hour"] * hours if hours else DISK_GIB["Month"] * months)
    lines = [("instanceType", instance), ("systemDisk", disk)]
    rate = SUBSCRIPTION_DISCOUNT if unit != "Hour" else 0.0
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
def _group(params: Mapping[str, str]) -> dict[str, Any]:
    gid = params.get("SecurityGroupId", "")
    sg = STATE.security_groups.get(gid)
    if sg is None:
        raise refuse("sg-not-found", group=gid)
    return sg


def create_security_group(params: dict[str, str]) -> dict[str, Any]:
    vpc = params.get("VpcId", "")
    if vpc not in (VPC_ID, OTHER_VPC_ID):
        raise refuse("sg-vpc-not-found", vpc=vpc)
    tags = _check_tags(params, "CreateSecurityGroup")
    token, digest = params.get("ClientToken"), _digest(params, ("ClientToken",))
    if token and token in STATE.sg_tokens:
        first, made = STATE.sg_tokens[token]
        if first != digest:
            raise refuse("sg-client-token-mismatch", token=token)
        RULES.applies("sg-client-token-replay")
        return {"RequestId": _rid(), "SecurityGroupId": made}
    gid = _new_id("sg-")
    STATE.security_groups[gid] = {"SecurityGroupId": gid, "SecurityGroupName": params.get("SecurityGroupName", ""),
                                  "Description": params.get("Description", ""), "VpcId": vpc,
                                  "SecurityGroupType": params.get("SecurityGroupType", "normal"),
                                  "CreationTime": _iso(CLOCK.now()), "tags": tags, "rules": []}
    if token:
        STATE.sg_tokens[token] = (digest, gid)
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


def _permissions(params: Mapping[str, str]) -> list[dict[str, str]]:
    """A request's rules: Permissions.N (the current form) or the deprecated top-level fields (one rule)."""
    listed = objs(params, "Permissions")
    if listed:
        return listed
    keys = ("IpProtocol", "PortRange", "SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId", "Description", "Policy",
            "Priority", "NicType")
    return [{k: params[k] for k in keys if k in params}]


def _rule(perm: Mapping[str, str], action: str) -> dict[str, str]:
    proto = perm.get("IpProtocol", "").upper()
    if proto not in ("ALL", "TCP", "UDP", "ICMP", "GRE"):
        raise refuse("sg-rule-protocol", value=perm.get("IpProtocol"))
    ports = perm.get("PortRange", "")
    low, sep, high = ports.partition("/")
    numeric = bool(sep) and low.lstrip("-").isdigit() and high.lstrip("-").isdigit()
    ok = (numeric and 1 <= int(low) <= int(high) <= 65535) if proto in ("TCP", "UDP") else ports == "-1/-1"
    if not ok and action == "RevokeSecurityGroup":
        raise refuse("revoke-rule-port-range", value=ports, protocol=proto)
    if not ok:
        raise refuse("authorize-rule-port-range", value=ports, protocol=proto)
    rule = {"IpProtocol": proto, "PortRange": ports, "Direction": "ingress", "Policy": perm.get("Policy", "accept")
            .capitalize(), "Priority": perm.get("Priority", "1"), "NicType": perm.get("NicType", "intranet")}
    for k in ("SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId"):
        if perm.get(k):
            rule[k] = perm[k]
    if not any(rule.get(k) for k in ("SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId")):
        raise refuse("sg-rule-source-missing")
    if rule.get("SourceGroupId") and rule["SourceGroupId"] not in STATE.security_groups:
        raise refuse("sg-rule-source-group-not-found", group=rule["SourceGroupId"])
    if (rule.get("SourceGroupId") and not (rule.get("SourceCidrIp") or rule.get("Ipv6SourceCidrIp"))
            and rule["NicType"] != "intranet"):
        raise refuse("sg-rule-group-nic-type", value=rule["NicType"])
    return rule


def _same(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    keys = ("IpProtocol", "PortRange", "SourceCidrIp", "Ipv6SourceCidrIp", "SourceGroupId")
    return all(a.get(k) == b.get(k) for k in keys)


def authorize_security_group(params: dict[str, str]) -> dict[str, Any]:
    sg = _group(params)
    for perm in _permissions(params):
        rule = _rule(perm, "AuthorizeSecurityGroup")
        if any(_same(r, rule) for r in sg["rules"]):
            RULES.applies("authorize-existing-rule")
            continue
        sg["rules"].append({**rule, "SecurityGroupRuleId": _new_id("sgr-"), "Description": perm.get("Description", ""),
                            "CreateTime": _iso(CLOCK.now())})
    return {"RequestId": _rid()}


def revoke_security_group(params: dict[str, str]) -> dict[str, Any]:
    sg = _group(params)
    for perm in _permissions(params):
        rule = _rule(perm, "RevokeSecurityGroup")
        sg["rules"] = [r for r in sg["rules"] if not _same(r, rule)]
    return {"RequestId": _rid()}


def describe_security_group_attribute(params: dict[str, str]) -> dict[str, Any]:
    sg = _group(params)
    direction = params.get("Direction", "all")
    perms = [dict(r) for r in sg["rules"] if direction in ("all", r["Direction"])]
    return {"RequestId": _rid(), "SecurityGroupId": sg["SecurityGroupId"], "SecurityGroupName":
            sg["SecurityGroupName"], "VpcId": sg["VpcId"], "RegionId": REGION, "Description": sg["Description"],
            "InnerAccessPolicy": "Accept", "Permissions": {"Permission": perms}}


def delete_security_group(params: dict[str, str]) -> dict[str, Any]:
    sg = _group(params)
    gid = sg["SecurityGroupId"]
    if any(gid in i["SecurityGroupIds"]["SecurityGroupId"] for i in _live()):
        raise refuse("sg-delete-in-use", group=gid)
    if any(r.get("SourceGroupId") == gid for g in STATE.security_groups.values() if g is not sg for r in g["rules"]):
        raise refuse("sg-delete-referenced", group=gid)
    del STATE.security_groups[gid]
    return {"RequestId": _rid()}


_DS_STRATEGIES = ("LowLatency", "Availability", "AvailabilityGroup")


def _ds_members(ds_id: str) -> list[str]:
    return [i["InstanceId"] for i in _live() if i.get("DeploymentSetId") == ds_id]


def create_deployment_set(params: dict[str, str]) -> dict[str, Any]:
    name = params.get("DeploymentSetName")
    if name is not None and not re.fullmatch(r"[A-Za-z\u4e00-\u9fa5][A-Za-z0-9\u4e00-\u9fa5:_-]{1,127}", name):
        raise refuse("ds-name", name=name)
    description = params.get("Description")
    if description is not None and (not 2 <= len(description) <= 256 or description.startswith(("http://",
                                                                                                   "https://"))):
        raise refuse("ds-description", description=description)
    strategy = params.get("Strategy", "Availability")
    if strategy not in _DS_STRATEGIES:
        raise refuse("ds-strategy", value=strategy)
    group_count = _int(params, "GroupCount", 3)
    if strategy == "AvailabilityGroup" and not 1 <= group_count <= 7:
        raise refuse("ds-group-count", count=group_count)
    token, digest = params.get("ClientToken"), _digest(params, ("ClientToken",))
    if token and token in STATE.ds_tokens:
        first, made = STATE.ds_tokens[token]
        if first != digest:
            raise refuse("ds-client-token-mismatch", token=token)
        RULES.applies("ds-client-token-replay")
        return {"RequestId": _rid(), "DeploymentSetId": made}
    ds_id = _new_id("ds-")
    STATE.deployment_sets[ds_id] = {
        "DeploymentSetId": ds_id, "DeploymentSetName": params.get("DeploymentSetName", ""),
        "DeploymentSetDescription": params.get("Description", ""), "DeploymentStrategy": strategy,
        "Strategy": strategy, "Domain": "Default", "Granularity": "Host", "CreationTime": _iso(CLOCK.now()),
        "GroupCount": group_count if strategy == "AvailabilityGroup" else 0}
    if token:
        STATE.ds_tokens[token] = (digest, ds_id)
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
    if not ds_id:
        raise refuse("ds-delete-missing-id")
    if ds_id not in STATE.deployment_sets:
        raise refuse("ds-not-found", ds=ds_id)
    if _ds_members(ds_id):
        raise refuse("ds-in-use", ds=ds_id)
    del STATE.deployment_sets[ds_id]
    return {"RequestId": _rid()}


def import_key_pair(params: dict[str, str]) -> dict[str, Any]:
    name, body = params.get("KeyPairName", ""), params.get("PublicKeyBody", "").strip()
    if not re.fullmatch(r"[A-Za-z\u4e00-\u9fa5][A-Za-z0-9\u4e00-\u9fa5._:-]{1,127}", name):
        raise refuse("keypair-name", name=name)
    if not body:
        raise refuse("keypair-body-missing")
    parts = body.split()
    try:
        blob = base64.b64decode(parts[1], validate=True) if len(parts) >= 2 and parts[0].startswith(
            ("ssh-", "ecdsa-")) else b""
    except ValueError:
        blob = b""
    if not blob:
        raise refuse("keypair-body", name=name)
    if name in STATE.key_pairs:
        raise refuse("keypair-exists", name=name)
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
    "ModifyInstanceChargeType": modify_instance_charge_type,
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
                              "StartInstances", "DeleteSecurityGroup", "DescribeInstances", "DescribeInstanceStatus"})


# -- the signature checks (a) -------------------------------------------------------------------
def _check_time(stamp_text: str, what: str) -> datetime:
    try:
        stamp = datetime.strptime(stamp_text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise refuse("sig-incomplete", what=f"{what} is missing or not ISO 8601 (yyyy-MM-ddTHH:mm:ssZ)") from None
    now = CLOCK.now()
    if abs(now - stamp) > SKEW:
        raise refuse("sig-time-skew", stamp=f"{stamp:%Y-%m-%dT%H:%M:%SZ}", now=f"{now:%Y-%m-%dT%H:%M:%SZ}")
    return now


def _check_nonce(nonce: str, now: datetime) -> None:
    if not nonce:
        raise refuse("sig-incomplete", what="the signature nonce is missing")
    STATE.nonces = {n: t for n, t in STATE.nonces.items() if now - t <= SKEW}
    if nonce in STATE.nonces:
        raise refuse("sig-nonce-used", nonce=nonce)
    STATE.nonces[nonce] = now


def verify_v3(environ: Mapping[str, Any], body: bytes) -> None:
    """Raise the refusal ECS answers a V3 (ACS3-HMAC-SHA256) request whose signature, date, nonce or payload hash
    is wrong."""
    headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = str(environ["CONTENT_TYPE"])
    if environ.get("CONTENT_LENGTH"):
        headers["content-length"] = str(environ["CONTENT_LENGTH"])
    auth = headers.get("authorization", "")
    algorithm, _, rest = auth.partition(" ")
    if algorithm != SIGN_ALGORITHM:
        raise refuse("sig-incomplete", what=f"the Authorization header is missing or does not use {SIGN_ALGORITHM}")
    parts = dict(p.split("=", 1) for p in rest.split(",") if "=" in p)
    ak, signed_list, signature = parts.get("Credential", ""), parts.get("SignedHeaders", ""), parts.get("Signature", "")
    secret = STATE.access_keys.get(ak)
    if secret is None:
        raise refuse("sig-access-key-unknown", key=ak)
    signed = signed_list.split(";") if signed_list else []
    if signed != sorted(signed):
        raise refuse("sig-incomplete", what="the SignedHeaders are not in sorted order")
    unsigned = sorted(h for h in headers if (h.startswith("x-acs-") or h == "host") and h not in signed)
    if unsigned:
        raise refuse("sig-incomplete", what=f"header(s) {', '.join(unsigned)} must be signed")
    if headers.get("x-acs-version") != API_VERSION:
        raise refuse("api-version", version=headers.get("x-acs-version", ""))
    if headers.get("x-acs-content-sha256") != hashlib.sha256(body).hexdigest():
        raise refuse("sig-mismatch", to_sign="(x-acs-content-sha256 does not match the request body)")
    now = _check_time(headers.get("x-acs-date", ""), "the x-acs-date header")
    query = dict(urllib.parse.parse_qsl(str(environ.get("QUERY_STRING", "")), keep_blank_values=True))
    canonical = canonical_request(str(environ.get("REQUEST_METHOD", "GET")), str(environ.get("PATH_INFO", "/")),
                                  query, headers, signed, headers.get("x-acs-content-sha256", ""))
    to_sign, expected = acs3_signature(secret, canonical)
    if not hmac.compare_digest(expected, signature):
        raise refuse("sig-mismatch", to_sign=to_sign)
    _check_nonce(headers.get("x-acs-signature-nonce", ""), now)
    RULES.applies("sig-v3-accepted")


def verify_rpc(environ: Mapping[str, Any], call: Call) -> None:
    """Raise the refusal ECS answers an RPC (V2) request whose signature, timestamp or nonce is wrong."""
    every = {**call.query, **call.form}
    if not every.get("Signature"):
        raise refuse("sig-incomplete", what="the Signature parameter is missing")
    secret = STATE.access_keys.get(every.get("AccessKeyId", ""))
    if secret is None:
        raise refuse("sig-access-key-unknown", key=every.get("AccessKeyId", ""))
    if every.get("Version") != API_VERSION:
        raise refuse("api-version", version=every.get("Version", ""))
    now = _check_time(every.get("Timestamp", ""), "the Timestamp parameter")
    method = str(environ.get("REQUEST_METHOD", "GET")).upper()
    to_sign = rpc_string_to_sign(method, every)
    if every.get("SignatureMethod") != RPC_SIGN_METHOD or not hmac.compare_digest(
            rpc_signature(secret, method, every), every["Signature"]):
        raise refuse("sig-mismatch", to_sign=to_sign)
    _check_nonce(every.get("SignatureNonce", ""), now)
    RULES.applies("sig-rpc-accepted")


def api(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """The ECS RPC API: POST or GET /, V3- or RPC-signed, parameters in the query string or a form body."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    call = read_call(environ, body)
    CTX.call = call
    action = call.action if call is not None else ""
    try:
        if call is None or not action:
            raise refuse("action-unknown", action=action)
        if call.style == "v3":
            verify_v3(environ, body)
        else:
            verify_rpc(environ, call)
        if call.form:
            RULES.applies("params-form-body")
        handler = ACTIONS.get(action)
        if handler is None:
            raise refuse("action-unknown", action=action)
        params = call.params
        if params.get("RegionId", REGION) != REGION:
            raise refuse("region-unknown", region=params["RegionId"])
        result = handler(params)
    except ApiError as exc:
        reply = error_body(exc.code, exc.message, exc.status)
        start_response(f"{exc.status} Error", [("Content-Type", reply.content_type),
                                               ("Content-Length", str(len(reply.body))), *reply.headers])
        return [reply.body]
    if call.fmt == "XML":
        RULES.applies("rpc-format-xml")
    entry = getattr(SWITCH.local, "entry", None)
    if STATE.record_answers and entry is not None:
        entry["answer"] = result
    content_type, payload = render(result, f"{action}Response", call.fmt)
    start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(payload))),
                              ("x-acs-request-id", str(result["RequestId"]))])
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
        if raw.get("spot") is not None:
            STATE.prices[itype]["spot"] = float(raw["spot"])
    return {"ok": True}


def _control_expire(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    inst = STATE.instances.get(str(raw["instance"]))
    if inst is None or inst.get("InstanceChargeType") != "PrePaid":
        raise LookupError(f"no subscription instance {raw['instance']!r}")
    inst["ExpiredTime"] = _iso(CLOCK.now() - timedelta(minutes=1))
    return {"ok": True, "ExpiredTime": inst["ExpiredTime"]}


def _control_record_answers(raw: dict[str, Any], _query: dict[str, str]) -> Any:
    STATE.record_answers = bool(raw.get("on", True))
    return {"ok": True}


def _control_instances(_raw: dict[str, Any], _query: dict[str, str]) -> Any:
    _live()
    return [{**_public(i), "released": bool(i.get("released"))} for i in STATE.instances.values()]


def _reset_state() -> None:
    keys, record = dict(STATE.access_keys), STATE.record_answers
    STATE.__dict__.update(State().__dict__)
    STATE.access_keys, STATE.record_answers = keys, record


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
                               ("POST", "prices"): _control_prices, ("POST", "expire"): _control_expire,
                               ("POST", "record-answers"): _control_record_answers,
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
