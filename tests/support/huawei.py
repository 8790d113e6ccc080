"""A local Huawei Cloud BMS API for tests: a real HTTP server on 127.0.0.1 speaking the REST JSON subset the
Huawei driver uses, reached by the official SDK (huaweicloudsdkbms) through its client builder's endpoint.

Run it in the foreground (for a demo)::

    python -m metalfleet.testing.huawei --port 5062

or from Python, as a subprocess the caller owns::

    with HuaweiEmulator.start() as bms:
        HuaweiDriver(region=REGION, project_id=PROJECT_ID, endpoint=bms.url, ak=TEST_AK, sk=TEST_SK)
        bms.set_faults(throttle=0.3, seed=1)

What it does as the service does:

(a) The API gateway's signature check (SDK-HMAC-SHA256, as https://support.huaweicloud.com/intl/en-us/
    devg-apisign/api-sign-algorithm.html describes it): the canonical request (method, the URI with every segment
    percent-encoded and a trailing ``/``, the sorted query string, the signed headers lower-cased and trimmed,
    their names, the SHA-256 of the body or ``UNSIGNED-PAYLOAD`` when ``X-Sdk-Content-Sha256`` says so), the
    string to sign (``SDK-HMAC-SHA256``, ``X-Sdk-Date``, the canonical request's hash), HMAC-SHA256 with the
    secret key of the access key named. ``host`` and ``x-sdk-date`` must be signed, and ``X-Sdk-Date`` within
    15 minutes of the server's clock. A refusal is the gateway's 401 ``APIGW.0301`` body (``error_code``,
    ``error_msg``, ``request_id``), as is a request for another project than the credentials'. Credentials:
    :data:`TEST_AK` / :data:`TEST_SK`, project :data:`PROJECT_ID` (the wire captures' project id).
(b) Asynchronous jobs: CreateBareMetalServers and DeleteBaremetalServer answer ``job_id`` (a prePaid order also
    its ``order_id``); ShowJobInfos shows the job RUNNING with one sub-job per server (naming its ``server_id``
    from the start) and SUCCESS once ``job_seconds`` have passed on the emulator's clock. A server is BUILD until
    its job succeeds, then ACTIVE; a deleted one is DELETED (read by id; no longer listed).
(c) Stock per AZ and flavor (``POST /_metalfleet/stock``; the flavor list's ``cond:operation:az`` says
    ``sellout`` for an AZ without stock), a server quota (``POST /_metalfleet/quota``), key pairs
    (``POST /_metalfleet/keypairs``), and the VPC, subnet, security group, image and KMS key of :data:`WORLD`.
    Refusals (HTTP 400, Huawei's body): an unknown flavor ``BMS.0008``, an unknown image ``BMS.0010``, a flavor
    sold out in the AZ ``BMS.0006`` with a message naming flavor and AZ, the quota ``BMS.0006`` naming the
    quota, any other bad reference (VPC, subnet, security group, key pair, KMS key, a missing ``metadata_options``
    value) ``BMS.0001``; a prePaid server cannot be deleted (``BMS.0006``). The BMS reference pins no code of its
    own to stock or quota (bms_api_0802: codes and messages are not one-to-one), so those are the emulator's
    choice of the generic create failure with a telling message.
(d) Tags: ``server_tags`` at create, BatchCreate/DeleteBaremetalServerTags, ``ServerDetails.tags`` as
    ``key=value`` strings, ListBareMetalServers' ``tags`` filter (servers whose tags hold the string), ``name``
    (substring), ``status``, ``flavor``, and pagination by ``limit`` / ``offset`` (the page number, from 1).
(e) The kit's fault switch (throttle answers ``APIGW.0308`` 429, server errors ``BMS.9999`` 500, capacity the
    sold-out refusal, lost responses a 500 after the work was done) and control endpoint, plus ``fail_jobs``
    (a message): create jobs taken from then on FAIL when they end (``BMS.0006`` and that reason, per sub-job too)
    and their servers go to ERROR with it as their ``fault``.
(g) The BSS price inquiry (``POST /v2/bills/ratings/on-demand-resources``, ListOnDemandResourceRatings; a
    global API: no project in the path, the request signed with ``X-Domain-Id`` :data:`DOMAIN_ID`, the body naming
    project :data:`PROJECT_ID`). It answers from :data:`PRICES`, the emulator's own price table (made-up CNY
    figures per region and flavor, never copied from the catalogue; ``POST /_metalfleet/prices`` sets one, a
    null price removes it), as ``amount`` / ``official_website_amount`` per product (``measure_id`` 1, yuan),
    for ``hws.service.type.bms`` / ``hws.resource.type.bms`` used by the hour (``usage_measure_id`` 4). A flavor
    the table does not price is refused as BSS refuses it: 400 ``CBC.99006006`` ("the product you inquired
    about cannot be found"); a malformed inquiry is ``CBC.0100`` (parameter error).
(f) Simulated hosts (``--sim-hosts``; needs root): a VM-mode host per server, for its flavor (Ascend flavors get
    the ``ascend-910b`` host, whose npu-smi / hccn_tool answer from its simulated hardware), whose ``ubuntu``
    login takes the server's key pair; the server's fixed IP is the host's address.

Every answer is shaped as the SDK's models read it (tests/huawei/test_emulator.py checks each key against them).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
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
    run_server,
    server_parser,
)

__all__ = ["DOMAIN_ID", "FLAVORS", "PRICES", "PROJECT_ID", "REGION", "TEST_AK", "TEST_SK", "WORLD", "ZONES",
           "HuaweiEmulator", "canonical_request", "signature"]

#: The test credentials and project (the project id is the one in the SDK wire captures).
TEST_AK = "HWAKTEST"
TEST_SK = "HWSKTEST-metalfleet-emulator"
PROJECT_ID = "0123456789abcdef0123456789abcdef"
REGION = "cn-southwest-2"
#: The account (domain) id the BSS price inquiry is signed for (GlobalCredentials' ``X-Domain-Id``).
DOMAIN_ID = "fedcba9876543210fedcba9876543210"
ZONES = ("cn-southwest-2a", "cn-southwest-2b")
#: What the account already has: a VPC with one subnet, a security group, a BMS image, a KMS key.
WORLD = {
    "vpc_id": "3b5a4d4c-1f2e-4b8a-9c7d-0e1f2a3b4c5d",
    "subnet_id": "7c9e6f1a-2b3c-4d5e-8f90-a1b2c3d4e5f6",
    "security_group_id": "5d6e7f80-9a1b-4c2d-8e3f-405162738495",
    "image_id": "9f8e7d6c-5b4a-4392-8172-6a5b4c3d2e1f",
    "kms_key_id": "0f0e0d0c-0b0a-4908-8706-050403020100",
}
#: Flavors: the catalogue's Huawei offering. vCPUs and RAM are the emulator's values (no public source pins them
#: for this flavor); the API lists no accelerator for it.
FLAVORS: dict[str, dict[str, Any]] = {
    "physical.kat2e.48xlarge.8.313t": {"vcpus": "192", "ram": 1572864, "disk": "0", "cpu_arch": "aarch64"},
}
#: The emulator's own BSS price table: (region, flavor) -> on-demand CNY per hour (made-up figures, chosen to
#: differ from anything the catalogue ships, so a refreshed price can only have come through the API).
PRICES: dict[tuple[str, str], float] = {
    (REGION, "physical.kat2e.48xlarge.8.313t"): 271.35,
    ("cn-north-4", "physical.kat2e.48xlarge.8.313t"): 268.8,
}
SKEW_SECONDS = 15 * 60
_DATE = "%Y%m%dT%H%M%SZ"


class HuaweiEmulator(EmulatorClient):
    """A running BMS emulator subprocess (``python -m metalfleet.testing.huawei``)."""

    module = "metalfleet.testing.huawei"
    title = "Huawei BMS emulator"

    def set_stock(self, zone: str, flavor: str, count: int) -> None:
        self.control("POST", "stock", {"zone": zone, "flavor": flavor, "count": count})

    def set_quota(self, instances: int) -> None:
        self.control("POST", "quota", {"instances": instances})

    def add_keypair(self, name: str, public_key: str) -> None:
        self.control("POST", "keypairs", {"name": name, "public_key": public_key})

    def set_timing(self, job_seconds: float) -> None:
        self.control("POST", "timing", {"job_seconds": job_seconds})

    def set_price(self, region: str, flavor: str, hourly: float | None) -> None:
        """Set (or, with None, remove) the BSS on-demand price of ``flavor`` in ``region`` (CNY per hour)."""
        self.control("POST", "prices", {"region": region, "flavor": flavor, "hourly": hourly})


# ---------------------------------------------------------------------------------------------
# The signature, as the gateway computes it (independent of the SDK's signer).
# ---------------------------------------------------------------------------------------------
def _enc(s: str) -> str:
    return urllib.parse.quote(s, safe="~")


def canonical_request(method: str, path: str, query: str, headers: dict[str, str], signed: list[str],
                      body: bytes) -> str:
    segments = [_enc(urllib.parse.unquote(p)) for p in path.split("/")]
    uri = "/".join(segments)
    if not uri.endswith("/"):
        uri += "/"
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    canonical_query = "&".join(f"{_enc(k)}={_enc(v)}" for k, v in sorted(pairs))
    lower = {k.lower(): v for k, v in headers.items()}
    canonical_headers = "".join(f"{h}:{lower.get(h, '').strip()}\n" for h in signed)
    payload = lower.get("x-sdk-content-sha256")
    digest = "UNSIGNED-PAYLOAD" if payload == "UNSIGNED-PAYLOAD" else hashlib.sha256(body).hexdigest()
    return "\n".join([method.upper(), uri, canonical_query, canonical_headers, ";".join(signed), digest])


def signature(secret: str, date: str, canonical: str) -> str:
    to_sign = f"SDK-HMAC-SHA256\n{date}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    return hmac.new(secret.encode(), to_sign.encode(), hashlib.sha256).hexdigest()


_AUTH = re.compile(r"^SDK-HMAC-SHA256\s+Access=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]+)$")


def check_signature(environ: dict[str, Any], body: bytes, now: datetime) -> str | None:
    """Why the gateway refuses the request's signature, or None when it holds."""
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    if environ.get("CONTENT_LENGTH"):
        headers["content-length"] = environ["CONTENT_LENGTH"]
    match = _AUTH.match(headers.get("authorization", "").strip())
    if not match:
        return "Authorization header missing or not SDK-HMAC-SHA256"
    access, signed_raw, given = match.groups()
    signed = signed_raw.split(";")
    if signed != sorted(signed) or "host" not in signed or "x-sdk-date" not in signed:
        return "SignedHeaders must be sorted and include host and x-sdk-date"
    if access != TEST_AK:
        return "The access key does not exist"
    date = headers.get("x-sdk-date", "")
    try:
        stamp = datetime.strptime(date, _DATE).replace(tzinfo=UTC)
    except ValueError:
        return "X-Sdk-Date is missing or malformed"
    if abs((now - stamp).total_seconds()) > SKEW_SECONDS:
        return f"X-Sdk-Date {date} is more than 15 minutes from the server's time"
    canonical = canonical_request(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""),
                                  environ.get("QUERY_STRING", ""), headers, signed, body)
    if not hmac.compare_digest(signature(TEST_SK, date, canonical), given):
        return "The signature does not match"
    return None


# ---------------------------------------------------------------------------------------------
# The service.
# ---------------------------------------------------------------------------------------------
SWITCH = FaultSwitch(FaultCodes(
    throttle=Fault("APIGW.0308", 429, "The throttling threshold has been reached: policy user over ratelimit,"
                                      "limit:20,time:1 second"),
    server_error=Fault("BMS.9999", 500, "Internal server error."),
    capacity=Fault("BMS.0006", 400, "Fail to operate baremetal server: sold out.")),
    capacity_actions={"CreateBareMetalServers"}, extra_keys={"fail_jobs"})
CLOCK = Clock()
SIM = SimHosts(provider="huawei")
LOCK = threading.RLock()


class State:
    def __init__(self) -> None:
        self.servers: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.stock: dict[tuple[str, str], int] = {(z, f): 64 for z in ZONES for f in FLAVORS}
        self.quota = 1000
        self.keypairs: dict[str, str] = {"metalfleet-test": ""}
        self.job_seconds = 0.2
        self.ips = 10
        self.prices: dict[tuple[str, str], float] = dict(PRICES)


STATE = State()


def _now_iso() -> str:
    return CLOCK.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _error(code: str, message: str, status: int) -> ErrorBody:
    rid = uuid.uuid4().hex
    doc = {"error_code": code, "error_msg": message, "request_id": rid}
    return ErrorBody("application/json", json.dumps(doc).encode(), (("X-Request-Id", rid),))


class Refusal(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


_PREFIX = re.compile(r"^/v1/([^/]+)/(.*)$")
#: The BSS price inquiry's path (global: no project in it).
RATINGS = "/v2/bills/ratings/on-demand-resources"


def identify(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    """The BMS action a REST call is (by method and path) and its parameters to log."""
    if environ.get("PATH_INFO", "").rstrip("/") == RATINGS:
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = {}
        return ("ListOnDemandResourceRatings", {"body": doc if isinstance(doc, dict) else {}})
    match = _PREFIX.match(environ.get("PATH_INFO", ""))
    if not match:
        return None
    method, rest = environ.get("REQUEST_METHOD", "GET"), match.group(2)
    params: dict[str, Any] = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = {}
    if isinstance(doc, dict):
        params["body"] = doc
    parts = rest.strip("/").split("/")
    table = {
        ("GET", "baremetalservers/flavors"): "ListBaremetalFlavorDetailExtends",
        ("GET", "baremetalservers/detail"): "ListBareMetalServers",
        ("GET", "baremetalservers/limits"): "ShowTenantQuota",
        ("POST", "baremetalservers"): "CreateBareMetalServers",
        ("POST", "baremetalservers/delete"): "DeleteBaremetalServer",
        ("POST", "baremetalservers/action"): "BaremetalServersAction",
    }
    action = table.get((method, "/".join(parts)))
    if action is None and parts[0] == "jobs" and len(parts) == 2 and method == "GET":
        action, params["job_id"] = "ShowJobInfos", parts[1]
    elif action is None and parts[0] == "baremetalservers" and len(parts) == 2 and method == "GET":
        action, params["server_id"] = "ShowBaremetalServerDetails", parts[1]
    elif action is None and parts[0] == "baremetalservers" and parts[2:] == ["tags", "action"]:
        params["server_id"] = parts[1]
        action = ("BatchDeleteBaremetalServerTags" if isinstance(doc, dict) and doc.get("action") == "delete"
                  else "BatchCreateBaremetalServerTags")
    elif action is None and parts[0] == "baremetalservers" and parts[2:] == ["tags"] and method == "GET":
        action = "ShowBaremetalServerTags"
    return (action or f"{method} {rest}", params)


def _advance() -> None:
    """Let the clock move jobs and servers on (called with LOCK held)."""
    now = CLOCK.time()
    for job in STATE.jobs.values():
        if job["status"] == "RUNNING" and now >= job["done_at"]:
            failure = job.get("fail")
            job["status"] = "FAIL" if failure else "SUCCESS"
            job["end_time"] = _now_iso()
            if failure:
                job["error_code"], job["fail_reason"] = "BMS.0006", failure
            for sub in job["sub_jobs"]:
                sub["status"], sub["end_time"] = job["status"], job["end_time"]
                server = STATE.servers.get(sub["entities"]["server_id"])
                if server is None:
                    continue
                if failure:
                    sub["error_code"], sub["fail_reason"] = "BMS.0006", failure
                    server.update({"status": "ERROR", "OS-EXT-STS:vm_state": "error", "OS-EXT-STS:task_state": "",
                                   "fault": {"message": failure, "code": 500, "details": "",
                                             "created": _now_iso()}, "updated": _now_iso()})
                    continue
                if job["job_type"] == "baremetalBatchCreate" and server["status"] == "BUILD":
                    server.update({"status": "ACTIVE", "OS-EXT-STS:vm_state": "active",
                                   "OS-EXT-STS:task_state": "", "OS-EXT-STS:power_state": 1,
                                   "OS-SRV-USG:launched_at": _now_iso(), "updated": _now_iso()})
                elif job["job_type"] == "baremetalBatchDelete":
                    server.update({"status": "DELETED", "OS-EXT-STS:vm_state": "deleted",
                                   "OS-EXT-STS:task_state": "", "OS-EXT-STS:power_state": 0,
                                   "OS-SRV-USG:terminated_at": _now_iso(), "updated": _now_iso()})
                    key = (server["OS-EXT-AZ:availability_zone"], server["flavor"]["id"])
                    STATE.stock[key] = STATE.stock.get(key, 0) + 1
                    SIM.stop(server["id"])


def _new_job(job_type: str, server_ids: list[str]) -> dict[str, Any]:
    job_id = uuid.uuid4().hex
    single = "baremetalSingleCreate" if job_type == "baremetalBatchCreate" else "baremetalSingleDelete"
    job = {"job_id": job_id, "job_type": job_type, "status": "RUNNING", "begin_time": _now_iso(),
           "end_time": "", "error_code": None, "fail_reason": None, "done_at": CLOCK.time() + STATE.job_seconds,
           "sub_jobs": [{"status": "RUNNING", "entities": {"server_id": sid}, "job_id": uuid.uuid4().hex,
                         "job_type": single, "begin_time": _now_iso(), "end_time": "", "error_code": None,
                         "fail_reason": None} for sid in server_ids]}
    STATE.jobs[job_id] = job
    return job


def _flavor_record(name: str) -> dict[str, Any]:
    f = FLAVORS[name]
    az = ",".join(f"{z}({'normal' if STATE.stock.get((z, name), 0) > 0 else 'sellout'})" for z in ZONES)
    return {"id": name, "name": name, "vcpus": f["vcpus"], "ram": f["ram"], "disk": f["disk"], "swap": "",
            "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False, "rxtx_factor": 1.0,
            "rxtx_quota": "", "rxtx_cap": "", "os-flavor-access:is_public": True,
            "links": [{"rel": "self", "href": f"https://bms.{REGION}.myhuaweicloud.com/v1/{PROJECT_ID}/flavors/{name}"}],
            "os_extra_specs": {"resource_type": "ironic", "capabilities:cpu_arch": f["cpu_arch"],
                               "capabilities:hypervisor_type": "ironic", "baremetal:__support_evs": "true",
                               "baremetal:extBootType": "Volume", "capabilities:board_type": "dl",
                               "baremetal:net_num": "2", "cond:operation:status": "normal",
                               "cond:operation:az": az}}


def _rate(doc: dict[str, Any]) -> dict[str, Any]:
    """ListOnDemandResourceRatings from STATE.prices (called with LOCK held)."""
    if doc.get("project_id") != PROJECT_ID:
        raise Refusal("CBC.0100", f"Invalid parameter: project_id {doc.get('project_id')!r} does not exist.")
    infos = doc.get("product_infos")
    if not isinstance(infos, list) or not infos:
        raise Refusal("CBC.0100", "Invalid parameter: product_infos is empty.")
    results = []
    total = 0.0
    for info in infos:
        if not isinstance(info, dict) or not info.get("id"):
            raise Refusal("CBC.0100", "Invalid parameter: product_infos[].id is required.")
        if (info.get("cloud_service_type"), info.get("resource_type")) != ("hws.service.type.bms",
                                                                            "hws.resource.type.bms"):
            raise Refusal("CBC.99006006", "The product you inquired about cannot be found: "
                                          f"{info.get('cloud_service_type')}/{info.get('resource_type')}.")
        if info.get("usage_factor") != "Duration" or info.get("usage_measure_id") != 4:
            raise Refusal("CBC.0100", "Invalid parameter: usage_factor must be Duration and usage_measure_id 4 "
                                      "(hour) for hws.resource.type.bms.")
        hourly = STATE.prices.get((str(info.get("region")), str(info.get("resource_spec"))))
        if hourly is None:
            raise Refusal("CBC.99006006", "The product you inquired about cannot be found: "
                                          f"{info.get('resource_spec')} in {info.get('region')}.")
        amount = round(hourly * float(info.get("usage_value") or 0) * int(info.get("subscription_num") or 1), 6)
        total += amount
        results.append({"id": info["id"], "product_id": "OFFI" + hashlib.sha256(
            f"{info.get('region')}/{info.get('resource_spec')}".encode()).hexdigest()[:24].upper(),
            "amount": amount, "discount_amount": 0, "official_website_amount": amount, "measure_id": 1,
            "discount_rating_results": []})
    return {"amount": round(total, 6), "discount_amount": 0, "official_website_amount": round(total, 6),
            "measure_id": 1, "currency": "CNY", "product_rating_results": results}


def _visible(server: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in server.items() if not k.startswith("_")}


def _create(doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    server = doc.get("server")
    if not isinstance(server, dict):
        raise Refusal("BMS.0003", "Create BareMetal Server error, request is null.")
    flavor = server.get("flavorRef")
    if flavor not in FLAVORS:
        raise Refusal("BMS.0008", f"Fail to query flavor [{flavor}], reason: flavor does not exist.")
    if server.get("imageRef") != WORLD["image_id"]:
        raise Refusal("BMS.0010", f"Fail to query image [{server.get('imageRef')}], reason: image does not exist.")
    zone = server.get("availability_zone")
    if zone not in ZONES:
        raise Refusal("BMS.0001", f"Fail to parse request, reason: availability zone {zone} does not exist.")
    if server.get("vpcid") != WORLD["vpc_id"]:
        raise Refusal("BMS.0001", f"Fail to parse request, reason: vpc {server.get('vpcid')} does not exist.")
    nics = server.get("nics") or []
    if not nics or any(n.get("subnet_id") != WORLD["subnet_id"] for n in nics):
        raise Refusal("BMS.0001", "Fail to parse request, reason: subnet does not exist in the vpc.")
    groups = server.get("security_groups") or []
    if any(g.get("id") != WORLD["security_group_id"] for g in groups):
        raise Refusal("BMS.0001", "Fail to parse request, reason: security group does not exist.")
    key_name = server.get("key_name")
    if key_name not in STATE.keypairs:
        raise Refusal("BMS.0001", f"Fail to parse request, reason: keypair {key_name} does not exist.")
    if (server.get("metadata_options") or {}).get("http_tokens") not in (None, "optional", "required"):
        raise Refusal("BMS.0001", "Fail to parse request, reason: metadata_options.http_tokens is invalid.")
    for vol in [server.get("root_volume") or {}, *(server.get("data_volumes") or [])]:
        meta = vol.get("metadata") or {}
        if meta.get("__system__encrypted") == "1" and meta.get("__system__cmkid") != WORLD["kms_key_id"]:
            raise Refusal("BMS.0001", f"Fail to parse request, reason: KMS key {meta.get('__system__cmkid')} does "
                                      "not exist or is not enabled.")
    count = int(server.get("count") or 1)
    live = sum(1 for s in STATE.servers.values() if s["status"] != "DELETED")
    if live + count > STATE.quota:
        raise Refusal("BMS.0006", f"Fail to operate baremetal server, reason: insufficient quota: {live} of "
                                  f"{STATE.quota} servers used, {count} more asked.")
    if STATE.stock.get((zone, flavor), 0) < count or not SWITCH.take_capacity(count):
        raise Refusal("BMS.0006", f"Fail to operate baremetal server, reason: flavor {flavor} is sold out in "
                                  f"availability zone {zone}.")
    STATE.stock[(zone, flavor)] -= count
    extend = server.get("extendparam") or {}
    prepaid = extend.get("chargingMode") in ("prePaid", 1, "1")
    tags = [f"{t['key']}={t['value']}" for t in server.get("server_tags") or []] + ["__type_baremetal"]
    ids = []
    for i in range(count):
        sid = str(uuid.uuid4())
        name = server.get("name") or "bms"
        if count > 1:
            name = f"{name}-{i + 1:04d}"
        STATE.ips += 1
        ip = f"192.168.{STATE.ips // 250}.{STATE.ips % 250 + 2}"
        record: dict[str, Any] = {
            "id": sid, "name": name, "status": "BUILD", "created": _now_iso(), "updated": _now_iso(),
            "tenant_id": PROJECT_ID, "user_id": "7a1b2c3d4e5f40718293a4b5c6d7e8f9", "hostId": uuid.uuid4().hex,
            "key_name": key_name, "image": {"id": server["imageRef"]},
            "flavor": {"id": flavor, "name": flavor, "vcpus": FLAVORS[flavor]["vcpus"],
                       "ram": str(FLAVORS[flavor]["ram"]), "disk": FLAVORS[flavor]["disk"]},
            "security_groups": [{"name": g.get("id")} for g in groups],
            "accessIPv4": "", "accessIPv6": "", "progress": 0, "config_drive": "",
            "metadata": {"chargingMode": "1" if prepaid else "0", "vpc_id": server["vpcid"],
                         "metering.image_id": server["imageRef"], "metering.resourcespeccode": f"{flavor}.linux",
                         "metering.resourcetype": "1", "image_name": "Ubuntu-22.04-server-64bit-for-BareMetal",
                         "os_type": "Linux", "os_bit": "64", "__bms_support_evs": "true"},
            "OS-EXT-STS:task_state": "spawning", "OS-EXT-STS:vm_state": "building", "OS-EXT-STS:power_state": 0,
            "OS-EXT-SRV-ATTR:host": "pod01.cn-southwest-2a", "OS-EXT-SRV-ATTR:instance_name": f"instance-{i:08x}",
            "OS-EXT-SRV-ATTR:hypervisor_hostname": uuid.uuid4().hex, "OS-EXT-AZ:availability_zone": zone,
            "OS-DCF:diskConfig": "MANUAL", "OS-SRV-USG:launched_at": "", "OS-SRV-USG:terminated_at": "",
            "os-extended-volumes:volumes_attached": [{"id": str(uuid.uuid4()), "delete_on_termination": True}],
            "description": "", "host_status": "UP", "OS-EXT-SRV-ATTR:hostname": name.lower(),
            "OS-EXT-SRV-ATTR:reservation_id": "r-" + uuid.uuid4().hex[:8], "OS-EXT-SRV-ATTR:launch_index": i,
            "OS-EXT-SRV-ATTR:root_device_name": "/dev/sda", "locked": False, "tags": list(tags),
            "enterprise_project_id": "0", "sys_tags": [{"key": "_sys_enterprise_project_id", "value": "0"}],
            "_prepaid": prepaid, "_ip": ip, "_mac": "fa:16:3e:" + ":".join(f"{b:02x}" for b in uuid.uuid4().bytes[:3]),
            "_port": str(uuid.uuid4()),
        }
        if SIM.enabled:
            pub = STATE.keypairs.get(key_name or "") or ""
            host = SIM.boot(sid, flavor, [pub] if pub else [], dict(t.split("=", 1) for t in tags if "=" in t))
            record["_ip"] = host.address
        STATE.servers[sid] = record
        ids.append(sid)
    job = _new_job("baremetalBatchCreate", ids)
    fail = SWITCH.faults.extra.get("fail_jobs")
    if fail:
        job["fail"] = str(fail)
    answer: dict[str, Any] = {"job_id": job["job_id"]}
    if prepaid:
        answer["order_id"] = "CS" + uuid.uuid4().hex[:18].upper()
    return 200, answer


def _server_doc(server: dict[str, Any]) -> dict[str, Any]:
    doc = _visible(server)
    doc["addresses"] = {} if server["status"] == "DELETED" else {server["metadata"]["vpc_id"]: [
        {"version": "4", "addr": server["_ip"], "OS-EXT-IPS:type": "fixed",
         "OS-EXT-IPS-MAC:mac_addr": server["_mac"], "OS-EXT-IPS:port_id": server["_port"]}]}
    return doc


def _list(query: dict[str, str]) -> dict[str, Any]:
    found = [s for s in STATE.servers.values() if s["status"] != "DELETED"]
    if query.get("status"):
        found = [s for s in found if s["status"] == query["status"]]
    if query.get("name"):
        found = [s for s in found if query["name"] in s["name"]]
    if query.get("flavor"):
        found = [s for s in found if s["flavor"]["id"] == query["flavor"]]
    if query.get("tags"):
        found = [s for s in found if query["tags"] in s["tags"]]
    found.sort(key=lambda s: s["created"] + s["id"])
    limit = min(int(query.get("limit") or 25), 1000)
    page = int(query.get("offset") or 1)
    chunk = found[(page - 1) * limit: page * limit]
    return {"servers": [_server_doc(s) for s in chunk], "count": len(found)}


def _delete(doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    ids = [str(s.get("id")) for s in doc.get("servers") or []]
    if not ids:
        raise Refusal("BMS.0001", "Fail to parse request, reason: servers is empty.")
    for sid in ids:
        server = STATE.servers.get(sid)
        if server is None or server["status"] == "DELETED":
            raise Refusal("BMS.0001", f"Fail to parse request, reason: server {sid} does not exist.", 404)
        if server["_prepaid"]:
            raise Refusal("BMS.0006", f"Fail to operate baremetal server, reason: server {sid} is a yearly/monthly "
                                      "server and cannot be deleted with this API.")
    for sid in ids:
        STATE.servers[sid]["OS-EXT-STS:task_state"] = "deleting"
    return 200, {"job_id": _new_job("baremetalBatchDelete", ids)["job_id"]}


def _tags(server_id: str, doc: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    server = STATE.servers.get(server_id)
    if server is None or server["status"] == "DELETED":
        raise Refusal("BMS.0001", f"Fail to parse request, reason: server {server_id} does not exist.", 404)
    pairs = {t["key"]: t.get("value", "") for t in doc.get("tags") or []}
    kept = [t for t in server["tags"] if t.partition("=")[0] not in pairs]
    if doc.get("action") == "delete":
        server["tags"] = kept
    else:
        server["tags"] = kept + [f"{k}={v}" for k, v in pairs.items()]
    return 204, None


def api(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")
    status: int = 200
    payload: dict[str, Any] | None = None
    try:
        why = check_signature(environ, body, CLOCK.now())
        if why:
            raise Refusal("APIGW.0301", f"Incorrect IAM authentication information: {why}", 401)
        if path.rstrip("/") == RATINGS:
            if method != "POST":
                raise Refusal("APIGW.0101", "The API does not exist or has not been published in the environment",
                              404)
            if environ.get("HTTP_X_DOMAIN_ID") != DOMAIN_ID:
                raise Refusal("APIGW.0301", "Incorrect IAM authentication information: domain mismatch", 401)
            try:
                rating = json.loads(body) if body else {}
            except ValueError as exc:
                raise Refusal("CBC.0100", f"Invalid parameter: {exc}.") from None
            with LOCK:
                payload = _rate(rating if isinstance(rating, dict) else {})
            out = json.dumps(payload).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out))),
                                      ("X-Request-Id", uuid.uuid4().hex)])
            return [out]
        match = _PREFIX.match(path)
        if not match:
            raise Refusal("APIGW.0101", "The API does not exist or has not been published in the environment", 404)
        project, rest = match.group(1), match.group(2).strip("/")
        if project != PROJECT_ID or environ.get("HTTP_X_PROJECT_ID", PROJECT_ID) != PROJECT_ID:
            raise Refusal("APIGW.0301", "Incorrect IAM authentication information: project mismatch", 401)
        query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
        try:
            doc = json.loads(body) if body else {}
        except ValueError as exc:
            raise Refusal("BMS.0001", f"Fail to parse request, reason: {exc}.") from None
        parts = rest.split("/")
        with LOCK:
            _advance()
            if method == "GET" and rest == "baremetalservers/flavors":
                payload = {"flavors": [_flavor_record(f) for f in FLAVORS]}
            elif method == "GET" and rest == "baremetalservers/detail":
                payload = _list(query)
            elif method == "GET" and rest == "baremetalservers/limits":
                used = sum(1 for s in STATE.servers.values() if s["status"] != "DELETED")
                payload = {"absolute": {"maxTotalInstances": STATE.quota, "totalInstancesUsed": used}}
            elif method == "POST" and rest == "baremetalservers":
                status, payload = _create(doc)
            elif method == "POST" and rest == "baremetalservers/delete":
                status, payload = _delete(doc)
            elif method == "GET" and parts[0] == "jobs" and len(parts) == 2:
                job = STATE.jobs.get(parts[1])
                if job is None:
                    raise Refusal("BMS.0001", f"Fail to parse request, reason: job {parts[1]} does not exist.", 404)
                payload = {k: v for k, v in job.items() if k not in ("done_at", "sub_jobs", "fail")}
                payload["entities"] = {"sub_jobs_total": len(job["sub_jobs"]), "sub_jobs": job["sub_jobs"]}
            elif method == "GET" and parts[0] == "baremetalservers" and len(parts) == 2:
                server = STATE.servers.get(parts[1])
                if server is None:
                    raise Refusal("BMS.0001", f"Fail to parse request, reason: server {parts[1]} does not exist.",
                                  404)
                payload = {"server": _server_doc(server)}
            elif method == "POST" and parts[0] == "baremetalservers" and parts[2:] == ["tags", "action"]:
                status, payload = _tags(parts[1], doc)
            else:
                raise Refusal("APIGW.0101", "The API does not exist or has not been published in the environment",
                              404)
    except Refusal as exc:
        reply = _error(exc.code, exc.message, exc.status)
        start_response(f"{exc.status} Error", [("Content-Type", reply.content_type),
                                               ("Content-Length", str(len(reply.body))), *reply.headers])
        return [reply.body]
    out = json.dumps(payload).encode() if payload is not None else b""
    rid = uuid.uuid4().hex
    start_response(f"{status} OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out))),
                                    ("X-Request-Id", rid)])
    return [out]


# ---------------------------------------------------------------------------------------------
# Control endpoints beyond the kit's.
# ---------------------------------------------------------------------------------------------
def _set_stock(raw: dict[str, Any], _q: dict[str, str]) -> Any:
    if raw["zone"] not in ZONES or raw["flavor"] not in FLAVORS:
        raise ValueError(f"zone must be one of {ZONES} and flavor one of {sorted(FLAVORS)}")
    with LOCK:
        STATE.stock[(raw["zone"], raw["flavor"])] = int(raw["count"])
    return {"ok": True}


def _set_quota(raw: dict[str, Any], _q: dict[str, str]) -> Any:
    with LOCK:
        STATE.quota = int(raw["instances"])
    return {"ok": True}


def _add_keypair(raw: dict[str, Any], _q: dict[str, str]) -> Any:
    with LOCK:
        STATE.keypairs[str(raw["name"])] = str(raw.get("public_key") or "")
    return {"ok": True}


def _set_timing(raw: dict[str, Any], _q: dict[str, str]) -> Any:
    with LOCK:
        STATE.job_seconds = float(raw["job_seconds"])
    return {"ok": True}


def _set_price(raw: dict[str, Any], _q: dict[str, str]) -> Any:
    key = (str(raw["region"]), str(raw["flavor"]))
    with LOCK:
        if raw.get("hourly") is None:
            STATE.prices.pop(key, None)
        else:
            STATE.prices[key] = float(raw["hourly"])
    return {"ok": True}


def _reset_state() -> None:
    global STATE
    with LOCK:
        STATE = State()


def build_app() -> FaultMiddleware:
    return FaultMiddleware(api, switch=SWITCH, error_body=_error, identify=identify, clock=CLOCK, sim_hosts=SIM,
                           reset_state=_reset_state,
                           controls={("POST", "stock"): _set_stock, ("POST", "quota"): _set_quota,
                                     ("POST", "keypairs"): _add_keypair, ("POST", "timing"): _set_timing,
                                     ("POST", "prices"): _set_price})


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("Huawei Cloud BMS emulator", default_port=5062,
                           sim_hosts_help="boot a simulated GPU/NPU host per server (needs root)")
    parser.add_argument("--job-seconds", type=float, default=0.2, help="how long a job runs (emulator clock)")
    args = parser.parse_args(argv)
    STATE.job_seconds = args.job_seconds
    return run_server(parser, args, build_app, title="Huawei BMS emulator", sim_hosts=SIM)


if __name__ == "__main__":
    sys.exit(main())
