"""A local Huawei Cloud BMS and BSS API for tests: a real HTTP server on 127.0.0.1 speaking the REST JSON subset
the Huawei driver uses, reached by the official SDKs (huaweicloudsdkbms, huaweicloudsdkbss, and the Go SDK in
tests/clients/huawei_go) through their clients' endpoints.

Run it in the foreground (for a demo)::

    python -m metalfleet.testing.huawei --port 5062

or from Python, as a subprocess the caller owns::

    with HuaweiEmulator.start() as bms:
        HuaweiDriver(region=REGION, project_id=PROJECT_ID, domain_id=DOMAIN_ID, user_id=USER_ID, endpoint=bms.url,
                     bss_endpoint=bms.url, ak=TEST_AK, sk=TEST_SK)
        bms.set_faults(throttle=0.3, seed=1)

An emulator is a claim about the real service: every rule it applies is an entry of the reference table
``tests/support/reference/huawei-bms.yaml`` (rendered as ``huawei-bms.md``), named here by its id through
:data:`RULES` (``refuse("rule-id", ...)`` for a refusal, whose code, HTTP status and message come from the table;
``RULES.applies("rule-id")`` where an accepted form or a documented behaviour decides the answer), and every
field it answers is one the official SDK models have, with their types. The request log
(``GET /_metalfleet/requests``) names the rules that decided each call (``rules``) and its parameters as
``{"query": ..., "path": ..., "body": ...}``. In short (the table has the sentences):

(a) The API gateway's signature check (SDK-HMAC-SHA256): the canonical request (method, the URI with every
    segment percent-encoded and a trailing ``/``, the sorted query string, the signed headers lower-cased and
    trimmed in the order named, their names, the SHA-256 of the body or the ``X-Sdk-Content-Sha256`` value), the
    string to sign, HMAC-SHA256 with the secret key of the access key named. Only ``x-sdk-date`` must be signed
    (the Go SDK signs no ``host``), and ``X-Sdk-Date`` must be within 15 minutes of the server's clock. A refusal
    is the gateway's 401 ``APIGW.0301`` body, as is a request for another project or (BSS, a global service,
    signed with ``X-Domain-Id``) another account. Credentials: :data:`TEST_AK` / :data:`TEST_SK`, project
    :data:`PROJECT_ID`, account :data:`DOMAIN_ID`, IAM user :data:`USER_ID`.
(b) BMS creates yearly/monthly (prePaid) servers only: postPaid is refused; a prePaid create answers its
    ``order_id`` and ``job_id``. With ``isAutoPay`` the order is paid at once (status 3, processing), its server
    is BUILD and its job RUNNING, naming the server, and when ``job_seconds`` have passed on the emulator's clock
    the job is SUCCESS, the server ACTIVE, the order completed (5) and its resources (the server, the EVS disks as
    its sub-resources) listed by BSS with their expiry; without, the order waits for payment (6) and no server
    is made. A server is never deleted through BMS: CancelResourcesSubscription ends it (an unsubscribe order,
    the server ``deleting`` and DELETED ``job_seconds`` later, its BSS resources no longer listed).
(c) Stock per AZ and flavor (``POST /_metalfleet/stock``; the flavor list's ``cond:operation:az`` says
    ``sellout`` for an AZ without stock), a server quota (``POST /_metalfleet/quota``), key pairs
    (``POST /_metalfleet/keypairs``), and the VPC, subnet, security group, image and KMS key of :data:`WORLD`.
(d) Tags: ``server_tags`` at create (9 of one's own at most, with the system's ``__type_baremetal``),
    BatchCreateBaremetalServerTags (20 a server), ``ServerDetails.tags`` as ``key=value`` strings;
    ListBareMetalServers' ``name`` (matched fuzzily), ``tags`` (servers whose tag strings include the value),
    ``status``, ``flavor``, ``reservation_id`` and pagination by ``limit`` / ``offset`` (the page number, from 1).
(e) The kit's fault switch (throttle answers ``APIGW.0308`` 429, server errors ``BMS.9999`` 500, capacity the
    sold-out refusal, lost responses a 500 after the work was done) and control endpoint, plus ``fail_jobs``
    (a message): create jobs taken from then on FAIL when they end (``BMS.0006`` and that reason, per sub-job too)
    and their servers go to ERROR with it as their ``fault`` (still billed: release unsubscribes them).
(f) The BSS price inquiry: on demand (ListOnDemandResourceRatings) from :data:`PRICES`, the emulator's own price
    table (made-up CNY figures per region and flavor, never copied from the catalogue), and yearly/monthly
    (ListRateOnPeriodDetail) from :data:`PERIOD_PRICES` (per region, flavor and period type: a month or a year,
    the figures :data:`TERM_PRICES` charges orders at); a flavor either table lacks is "not found"
    (``CBC.99006006``) for that inquiry only. ``POST /_metalfleet/prices`` sets a price (with ``period_type``, a
    period one), a null price removes it; yearly/monthly orders are charged from :data:`TERM_PRICES` (made up too).
(g) Simulated hosts (``--sim-hosts``; needs root): a VM-mode host per server, for its flavor (Ascend flavors get
    the ``ascend-910b`` host, whose npu-smi / hccn_tool answer from its simulated hardware), whose ``ubuntu``
    login takes the server's key pair; the server's fixed IP is the host's address.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import json
import re
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterable
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
    run_server,
    server_parser,
)
from metalfleet.testing.reference import Enforcer

__all__ = ["DOMAIN_ID", "FLAVORS", "PERIOD_PRICES", "PRICES", "PROJECT_ID", "REGION", "RULES", "TERM_PRICES",
           "TEST_AK", "TEST_SK", "USER_ID", "WORLD", "ZONES", "HuaweiEmulator", "canonical_request", "identify",
           "signature"]

#: The test credentials and project (the project id is the one in the SDK wire captures).
TEST_AK = "HWAKTEST"
TEST_SK = "HWSKTEST-metalfleet-emulator"
PROJECT_ID = "0123456789abcdef0123456789abcdef"
REGION = "cn-southwest-2"
#: The account (domain) id BSS calls are signed for (GlobalCredentials' ``X-Domain-Id``).
DOMAIN_ID = "fedcba9876543210fedcba9876543210"
#: The IAM user id CreateBareMetalServers takes as ``metadata.op_svc_userid``.
USER_ID = "7a1b2c3d4e5f40718293a4b5c6d7e8f9"
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
#: The emulator's own yearly/monthly prices (made up): flavor -> CNY per month; a year is charged ten months.
TERM_PRICES: dict[str, float] = {"physical.kat2e.48xlarge.8.313t": 123456.78}
#: The emulator's own yearly/monthly price inquiry table: (region, flavor, period_type) -> CNY for one server for
#: one period (period_type 2 a month, 3 a year). The figures orders are charged at (:data:`TERM_PRICES`, a year ten
#: months), in the regions :data:`PRICES` prices on demand.
PERIOD_PRICES: dict[tuple[str, str, int], float] = {
    (region, flavor, period): round(TERM_PRICES[flavor] * (10 if period == 3 else 1), 2)
    for region, flavor in PRICES if flavor in TERM_PRICES for period in (2, 3)}
SKEW_SECONDS = 15 * 60
_DATE = "%Y%m%dT%H%M%SZ"
_ISO = "%Y-%m-%dT%H:%M:%SZ"


class HuaweiEmulator(EmulatorClient):
    """A running BMS/BSS emulator subprocess (``python -m metalfleet.testing.huawei``)."""

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

    def set_period_price(self, region: str, flavor: str, period_type: int, amount: float | None) -> None:
        """Set (or, with None, remove) the BSS yearly/monthly price of ``flavor`` in ``region`` (CNY for one server
        for one period of ``period_type``: 2 a month, 3 a year)."""
        self.control("POST", "prices", {"region": region, "flavor": flavor, "period_type": period_type,
                                        "amount": amount})

    def billing(self) -> dict[str, Any]:
        """The emulator's BSS tables as they stand: ``orders`` and ``resources`` (by id)."""
        result: dict[str, Any] = self.control("GET", "billing")
        return result


# ---------------------------------------------------------------------------------------------
# The reference table: every rule applied below is an entry there, with its citation.
# ---------------------------------------------------------------------------------------------
SWITCH = FaultSwitch(FaultCodes(
    throttle=Fault("APIGW.0308", 429, "The throttling threshold has been reached: policy user over ratelimit,"
                                      "limit:20,time:1 second"),
    server_error=Fault("BMS.9999", 500, "Internal server error."),
    capacity=Fault("BMS.0006", 400, "Fail to operate baremetal server: sold out.")),
    capacity_actions={"CreateBareMetalServers"}, extra_keys={"fail_jobs"})
RULES = Enforcer("huawei-bms", SWITCH.note_rule)
CLOCK = Clock()
SIM = SimHosts(provider="huawei")
LOCK = threading.RLock()


class Refusal(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def refuse(rule_id: str, **fmt: Any) -> Refusal:
    """The refusal of table rule ``rule_id`` (its code, status and message), recorded on the call."""
    code, status, message = RULES.refusal(rule_id, **fmt)
    return Refusal(code, message, status)


# ---------------------------------------------------------------------------------------------
# The signature, as the gateway computes it (independent of the SDKs' signers).
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
    digest = payload if payload else hashlib.sha256(body).hexdigest()
    return "\n".join([method.upper(), uri, canonical_query, canonical_headers, ";".join(signed), digest])


def signature(secret: str, date: str, canonical: str) -> str:
    to_sign = f"SDK-HMAC-SHA256\n{date}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    return hmac.new(secret.encode(), to_sign.encode(), hashlib.sha256).hexdigest()


_AUTH = re.compile(r"^SDK-HMAC-SHA256\s+Access=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]+)$")


def _headers(environ: dict[str, Any]) -> dict[str, str]:
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["content-type"] = environ["CONTENT_TYPE"]
    if environ.get("CONTENT_LENGTH"):
        headers["content-length"] = environ["CONTENT_LENGTH"]
    return headers


def check_signature(environ: dict[str, Any], body: bytes, now: datetime) -> None:
    """Raise the gateway's refusal when the request's signature does not hold."""
    headers = _headers(environ)
    match = _AUTH.match(headers.get("authorization", "").strip())
    if not match:
        raise refuse("gateway-signature", why="Authorization header missing or not SDK-HMAC-SHA256")
    access, signed_raw, given = match.groups()
    signed = signed_raw.split(";")
    if "x-sdk-date" not in signed:
        raise refuse("gateway-x-sdk-date-signed", signed=signed_raw)
    if access != TEST_AK:
        raise refuse("gateway-access-key")
    date = headers.get("x-sdk-date", "")
    try:
        stamp = datetime.strptime(date, _DATE).replace(tzinfo=UTC)
    except ValueError:
        raise refuse("gateway-date", date=date or "(none)") from None
    if abs((now - stamp).total_seconds()) > SKEW_SECONDS:
        raise refuse("gateway-date", date=date)
    if "host" not in signed:
        RULES.applies("gateway-host-optional")
    if headers.get("x-sdk-content-sha256") == "UNSIGNED-PAYLOAD":
        RULES.applies("gateway-unsigned-payload")
    canonical = canonical_request(environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", ""),
                                  environ.get("QUERY_STRING", ""), headers, signed, body)
    if not hmac.compare_digest(signature(TEST_SK, date, canonical), given):
        raise refuse("gateway-signature", why="the signature does not match")


# ---------------------------------------------------------------------------------------------
# Routing: the operation a REST call is.
# ---------------------------------------------------------------------------------------------
_BMS = re.compile(r"^/v1/([^/]+)/(.*)$")
#: BSS paths (global: no project in them).
RATINGS = "/v2/bills/ratings/on-demand-resources"
PERIOD_RATINGS = "/v2/bills/ratings/period-resources/subscribe-rate"
ORDER_DETAILS = "/v2/orders/customer-orders/details/"
RESOURCES_QUERY = "/v2/orders/suscriptions/resources/query"
UNSUBSCRIBE = "/v2/orders/subscriptions/resources/unsubscribe"


def route(method: str, path: str) -> tuple[str | None, dict[str, str]]:
    """(operation, path parameters) of a request; operation None for a path the emulator does not serve."""
    path = path.rstrip("/") or "/"
    if path == RATINGS and method == "POST":
        return "ListOnDemandResourceRatings", {}
    if path == PERIOD_RATINGS and method == "POST":
        return "ListRateOnPeriodDetail", {}
    if path.startswith(ORDER_DETAILS) and method == "GET":
        return "ShowCustomerOrderDetails", {"order_id": path[len(ORDER_DETAILS):]}
    if path == RESOURCES_QUERY and method == "POST":
        return "ListPayPerUseCustomerResources", {}
    if path == UNSUBSCRIBE and method == "POST":
        return "CancelResourcesSubscription", {}
    match = _BMS.match(path)
    if not match:
        return None, {}
    ids: dict[str, str] = {"project_id": match.group(1)}
    parts = match.group(2).split("/")
    fixed = {("GET", "baremetalservers/flavors"): "ListBaremetalFlavorDetailExtends",
             ("GET", "baremetalservers/detail"): "ListBareMetalServers",
             ("POST", "baremetalservers"): "CreateBareMetalServers"}
    name = fixed.get((method, "/".join(parts)))
    if name:
        return name, ids
    if method == "GET" and parts[0] == "jobs" and len(parts) == 2:
        return "ShowJobInfos", {**ids, "job_id": parts[1]}
    if parts[0] == "baremetalservers" and len(parts) == 2 and method == "GET":
        return "ShowBaremetalServerDetails", {**ids, "server_id": parts[1]}
    if parts[0] == "baremetalservers" and parts[2:] == ["tags", "action"] and method == "POST":
        return "BatchCreateBaremetalServerTags", {**ids, "server_id": parts[1]}
    return None, ids


#: Requests the official SDK sends that this emulator names without serving them (the driver calls none).
_NAMED = {("POST", "baremetalservers/delete"): "DeleteBaremetalServer",
          ("POST", "baremetalservers/action"): "BaremetalServersAction",
          ("GET", "baremetalservers/limits"): "ShowTenantQuota"}


def identify(environ: dict[str, Any], body: bytes) -> tuple[str, dict[str, Any]] | None:
    """The operation a REST call is (by method and path) and its parameters to log: ``query``, ``path`` (the
    path's ids) and ``body`` (the JSON body)."""
    method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
    name, ids = route(method, path)
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = {}
    params: dict[str, Any] = {"query": dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", ""),
                                                                  keep_blank_values=True)),
                              "path": ids, "body": doc if isinstance(doc, dict) else {}}
    if name is None:
        match = _BMS.match(path)
        rest = match.group(2).rstrip("/") if match else path
        name = _NAMED.get((method, rest)) or (
            "BatchDeleteBaremetalServerTags" if rest.endswith("/tags/action") and params["body"].get("action")
            == "delete" else f"{method} {rest}")
    return name, params


# ---------------------------------------------------------------------------------------------
# The service's state.
# ---------------------------------------------------------------------------------------------
class State:
    def __init__(self) -> None:
        self.servers: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.orders: dict[str, dict[str, Any]] = {}
        #: BSS resources by resource id (a server's id, its volumes' ids).
        self.resources: dict[str, dict[str, Any]] = {}
        #: Servers whose term was ended: id -> the time BMS has deleted it.
        self.ending: dict[str, float] = {}
        self.stock: dict[tuple[str, str], int] = {(z, f): 64 for z in ZONES for f in FLAVORS}
        self.quota = 1000
        self.keypairs: dict[str, str] = {"metalfleet-test": ""}
        self.job_seconds = 0.2
        self.ips = 10
        self.prices: dict[tuple[str, str], float] = dict(PRICES)
        self.period_prices: dict[tuple[str, str, int], float] = dict(PERIOD_PRICES)


STATE = State()


def _now_iso() -> str:
    return CLOCK.now().strftime(_ISO)


def _add_months(when: datetime, months: int) -> datetime:
    month = when.month - 1 + months
    year, month = when.year + month // 12, month % 12 + 1
    return when.replace(year=year, month=month, day=min(when.day, calendar.monthrange(year, month)[1]))


def _error(code: str, message: str, status: int) -> ErrorBody:
    rid = uuid.uuid4().hex
    doc = {"error_code": code, "error_msg": message, "request_id": rid}
    return ErrorBody("application/json", json.dumps(doc).encode(), (("X-Request-Id", rid),))


def _advance() -> None:
    """Let the clock move jobs, orders and servers on (called with LOCK held)."""
    now = CLOCK.time()
    for job in STATE.jobs.values():
        if job["status"] == "RUNNING" and now >= job["done_at"]:
            _finish_job(job)
    for sid, when in list(STATE.ending.items()):
        server = STATE.servers.get(sid)
        if server is not None and now >= when and server["status"] != "DELETED":
            server.update({"status": "DELETED", "OS-EXT-STS:vm_state": "deleted", "OS-EXT-STS:task_state": "",
                           "OS-EXT-STS:power_state": 0, "OS-SRV-USG:terminated_at": _now_iso(),
                           "updated": _now_iso()})
            key = (server["OS-EXT-AZ:availability_zone"], server["flavor"]["id"])
            STATE.stock[key] = STATE.stock.get(key, 0) + 1
            SIM.stop(sid)


def _finish_job(job: dict[str, Any]) -> None:
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
                           "fault": {"message": failure, "code": 500, "details": "", "created": _now_iso()},
                           "updated": _now_iso()})
        elif server["status"] == "BUILD":
            server.update({"status": "ACTIVE", "OS-EXT-STS:vm_state": "active", "OS-EXT-STS:task_state": "",
                           "OS-EXT-STS:power_state": 1, "OS-SRV-USG:launched_at": _now_iso(),
                           "updated": _now_iso()})
    order = STATE.orders.get(job.get("order_id") or "")
    if order is not None and order["status"] == 3:
        order["status"] = 5
        _open_resources(order)


def _open_resources(order: dict[str, Any]) -> None:
    """The order's servers (and their EVS disks, as sub-resources) become BSS resources with their term."""
    effective = CLOCK.now().replace(microsecond=0)
    line = order["order_line_items"][0]
    months = line["period_num"] * (12 if line["period_type"] == 3 else 1)
    expires = _add_months(effective, months)
    line["effective_time"], line["expire_time"] = effective.strftime(_ISO), expires.strftime(_ISO)
    for sid in order["_servers"]:
        server = STATE.servers[sid]
        common = {"region_code": REGION, "project_id": PROJECT_ID, "effective_time": effective.strftime(_ISO),
                  "expire_time": expires.strftime(_ISO), "status": 2, "update_time": effective.strftime(_ISO),
                  "expire_policy": 3 if order["_renew"] else 0, "product_id": line["product_id"],
                  "enterprise_project": {"id": "0", "name": "default"}, "_order": order["order_id"]}
        STATE.resources[sid] = {
            "id": "INS" + uuid.uuid4().hex[:20].upper(), "resource_id": sid, "resource_name": server["name"],
            "service_type_code": "hws.service.type.bms", "resource_type_code": "hws.resource.type.pm",
            "resource_type_name": "裸金属服务器", "service_type_name": "裸金属服务器",
            "resource_spec_code": f"{server['flavor']['id']}.linux", "parent_resource_id": "",
            "is_main_resource": 1, "product_spec_desc": server["flavor"]["id"], **common}
        for vol in server["os-extended-volumes:volumes_attached"]:
            STATE.resources[vol["id"]] = {
                "id": "INS" + uuid.uuid4().hex[:20].upper(), "resource_id": vol["id"],
                "resource_name": f"{server['name']}-volume-{vol['bootIndex']}",
                "service_type_code": "hws.service.type.ebs", "resource_type_code": "hws.resource.type.volume",
                "resource_type_name": "云硬盘", "service_type_name": "云硬盘", "resource_spec_code": vol["_type"],
                "parent_resource_id": sid, "is_main_resource": 0, "product_spec_desc": vol["_type"],
                "spec_size": float(vol["_size"]), "spec_size_measure_id": 17, **common}


def _new_job(job_type: str, server_ids: list[str], *, order_id: str | None = None,
             status: str = "RUNNING") -> dict[str, Any]:
    job_id = uuid.uuid4().hex
    job = {"job_id": job_id, "job_type": job_type, "status": status, "begin_time": _now_iso(),
           "end_time": "", "error_code": None, "fail_reason": None, "done_at": CLOCK.time() + STATE.job_seconds,
           "order_id": order_id,
           "sub_jobs": [{"status": "RUNNING", "entities": {"server_id": sid}, "job_id": uuid.uuid4().hex,
                         "job_type": "baremetalSingleCreate", "begin_time": _now_iso(), "end_time": "",
                         "error_code": None, "fail_reason": None} for sid in server_ids]}
    STATE.jobs[job_id] = job
    return job


# ---------------------------------------------------------------------------------------------
# BMS.
# ---------------------------------------------------------------------------------------------
def _flavor_record(name: str) -> dict[str, Any]:
    f = FLAVORS[name]
    az = ",".join(f"{z}({'normal' if STATE.stock.get((z, name), 0) > 0 else 'sellout'})" for z in ZONES)
    return {"id": name, "name": name, "vcpus": f["vcpus"], "ram": f["ram"], "disk": f["disk"], "swap": "",
            "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False, "rxtx_factor": 1.0,
            "rxtx_quota": "", "rxtx_cap": "", "os-flavor-access:is_public": True,
            "links": [{"rel": "self", "href": f"https://bms.{REGION}.myhuaweicloud.com/v1/{PROJECT_ID}/flavors/{name}",
                       "type": ""}],
            "os_extra_specs": {"resource_type": "ironic", "capabilities:cpu_arch": f["cpu_arch"],
                               "capabilities:hypervisor_type": "ironic", "baremetal:__support_evs": "true",
                               "baremetal:extBootType": "Volume", "capabilities:board_type": "dl",
                               "baremetal:net_num": "2", "cond:operation:status": "normal",
                               "cond:operation:az": az}}


def _flavors() -> dict[str, Any]:
    RULES.applies("flavors-az-status")
    return {"flavors": [_flavor_record(f) for f in FLAVORS]}


_NAME = re.compile(r"^[\w.\-\u4e00-\u9fff]{1,63}$", re.ASCII)
_TAG_FORBIDDEN = frozenset("=*<>\\,|/")
VOLUME_TYPES = ("GPSSD", "SATA", "SAS", "SSD")


def _bad_tag_text(text: str) -> bool:
    return any(ord(c) < 32 or c in _TAG_FORBIDDEN for c in text)


def _check_extendparam(extend: dict[str, Any]) -> tuple[str, int, bool, bool]:
    """(periodType, periodNum, auto pay, auto renew) of a create's ``extendparam``; refusals as the table has them."""
    mode = extend.get("chargingMode")
    if mode is None:
        RULES.applies("create-prepaid-default")
    elif mode != "prePaid":
        raise refuse("create-postpaid", mode=mode)
    period = extend.get("periodType")
    if period not in ("month", "year"):
        raise refuse("create-period-type", period=period)
    num = extend.get("periodNum")
    top = 9 if period == "month" else 1
    if not isinstance(num, int) or isinstance(num, bool) or not 1 <= num <= top:
        raise refuse("create-period-num", num=num, period=period, top=top)
    autopay = extend.get("isAutoPay") == "true"
    if autopay:
        RULES.applies("create-autopay")
    else:
        RULES.applies("create-pending-payment")
    return period, num, autopay, extend.get("isAutoRenew") == "true"


def _check_volumes(server: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    root = server.get("root_volume")
    volumes: list[tuple[str, dict[str, Any]]] = [("root_volume", root)] if isinstance(root, dict) else []
    volumes += [(f"data_volumes[{i}]", v) for i, v in enumerate(server.get("data_volumes") or [])]
    if len(volumes) > 60:
        raise refuse("create-volumes-count", count=len(volumes))
    for where, vol in volumes:
        if vol.get("volumetype") not in VOLUME_TYPES:
            raise refuse("create-volume-type", where=where, type=vol.get("volumetype"))
        low, high = (40, 1024) if where == "root_volume" else (10, 32768)
        size = vol.get("size")
        if (not isinstance(size, int) or not low <= size <= high) and where == "root_volume":
            raise refuse("create-root-volume-size", where=where, size=size, low=low, high=high)
        if not isinstance(size, int) or not low <= size <= high:
            raise refuse("create-data-volume-size", where=where, size=size, low=low, high=high)
        meta = vol.get("metadata") or {}
        if meta.get("__system__encrypted") == "1" and meta.get("__system__cmkid") != WORLD["kms_key_id"]:
            raise refuse("create-kms-key", key=meta.get("__system__cmkid"))
    return volumes


def _check_tags(server: dict[str, Any]) -> list[dict[str, str]]:
    tags = server.get("server_tags") or []
    if len(tags) > 9:
        raise refuse("create-tags-count", count=len(tags))
    for t in tags:
        key, value = str(t.get("key") or ""), str(t.get("value") or "")
        if not 1 <= len(key) <= 36 or len(value) > 43 or _bad_tag_text(key) or _bad_tag_text(value):
            raise refuse("create-tag", key=key, value=value)
    return [{"key": str(t["key"]), "value": str(t.get("value") or "")} for t in tags]


def _create(doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    server = doc.get("server")
    if not isinstance(server, dict):
        raise refuse("create-body")
    flavor = server.get("flavorRef")
    if flavor not in FLAVORS:
        raise refuse("create-flavor", flavor=flavor)
    if server.get("imageRef") != WORLD["image_id"]:
        raise refuse("create-image", image=server.get("imageRef"))
    name = server.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise refuse("create-name", name=name)
    if not (server.get("metadata") or {}).get("op_svc_userid"):
        raise refuse("create-user-id")
    zone = server.get("availability_zone")
    if zone not in ZONES:
        raise refuse("create-zone", zone=zone)
    if server.get("vpcid") != WORLD["vpc_id"]:
        raise refuse("create-vpc", vpc=server.get("vpcid"))
    nics = server.get("nics") or []
    if not nics or any(n.get("subnet_id") != WORLD["subnet_id"] for n in nics):
        raise refuse("create-subnet", subnets=[n.get("subnet_id") for n in nics])
    groups = server.get("security_groups") or []
    if any(g.get("id") != WORLD["security_group_id"] for g in groups):
        raise refuse("create-security-group", groups=[g.get("id") for g in groups])
    key_name = server.get("key_name")
    if key_name not in STATE.keypairs:
        raise refuse("create-key-pair", key=key_name)
    if (server.get("metadata_options") or {}).get("http_tokens") not in (None, "optional", "required"):
        raise refuse("create-metadata-options", value=server["metadata_options"].get("http_tokens"))
    volumes = _check_volumes(server)
    tags = _check_tags(server)
    count = server.get("count", 1)
    if not isinstance(count, int) or not 1 <= count <= 100:
        raise refuse("create-count", count=count)
    period, num, autopay, renew = _check_extendparam(server.get("extendparam") or {})
    live = sum(1 for s in STATE.servers.values() if s["status"] != "DELETED")
    if live + count > STATE.quota:
        raise refuse("create-quota", used=live, quota=STATE.quota, count=count)
    if STATE.stock.get((zone, flavor), 0) < count or not SWITCH.take_capacity(count):
        raise refuse("create-sold-out", flavor=flavor, zone=zone)
    order_id = "CS" + CLOCK.now().strftime("%y%m%d%H%M") + uuid.uuid4().hex[:7].upper()
    months = num * (12 if period == "year" else 1)
    amount = round(TERM_PRICES.get(flavor, 99999.0) * (10 * num if period == "year" else months) * count, 2)
    line = {"order_line_item_id": order_id + "-000001", "service_type_code": "hws.service.type.bms",
            "service_type_name": "裸金属服务器",
            "product_id": "OFFI" + hashlib.sha256(flavor.encode()).hexdigest()[:20],
            "product_spec_desc": f"{flavor} | {zone}", "period_type": 3 if period == "year" else 2,
            "period_num": num, "subscription_num": count, "amount_after_discount": amount,
            "official_amount": amount, "currency": "CNY", "category_code": "hws.resource.type.pm",
            "product_owner_service": "hws.service.type.bms", "commercial_resource": "hws.resource.type.pm",
            "order_id": order_id}
    order: dict[str, Any] = {
        "order_id": order_id, "customer_id": DOMAIN_ID, "service_type_code": "hws.service.type.bms",
        "service_type_name": "裸金属服务器", "source_type": 1, "status": 3 if autopay else 6, "order_type": 1,
        "amount_after_discount": amount, "official_amount": amount, "measure_id": 1, "create_time": _now_iso(),
        "payment_time": _now_iso() if autopay else "", "currency": "CNY", "user_name": "metalfleet-test",
        "order_line_items": [line], "_servers": [], "_renew": renew}
    STATE.orders[order_id] = order
    RULES.applies("create-order-id")
    if not autopay:  # the order waits for payment: no server is made until then
        job = _new_job("baremetalBatchCreate", [], order_id=order_id, status="PENDING_PAYMENT")
        return 200, {"order_id": order_id, "job_id": job["job_id"]}
    STATE.stock[(zone, flavor)] -= count
    RULES.applies("create-system-tag")
    tag_strings = [f"{t['key']}={t['value']}" for t in tags] + ["__type_baremetal"]
    reservation = "r-" + uuid.uuid4().hex[:8]
    ids = []
    for i in range(count):
        sid = str(uuid.uuid4())
        sname = name if count == 1 else f"{name}-{i + 1:04d}"
        STATE.ips += 1
        ip = f"192.168.{STATE.ips // 250}.{STATE.ips % 250 + 2}"
        attached = [{"id": str(uuid.uuid4()), "delete_on_termination": "true",
                     "bootIndex": "0" if where == "root_volume" else "-1",
                     "device": f"/dev/sd{chr(ord('a') + n)}", "_type": vol["volumetype"], "_size": vol["size"]}
                    for n, (where, vol) in enumerate(volumes)]
        record: dict[str, Any] = {
            "id": sid, "name": sname, "status": "BUILD", "created": _now_iso(), "updated": _now_iso(),
            "tenant_id": PROJECT_ID, "user_id": server["metadata"]["op_svc_userid"], "hostId": uuid.uuid4().hex,
            "key_name": key_name, "image": {"id": server["imageRef"]},
            "flavor": {"id": flavor, "name": flavor, "vcpus": FLAVORS[flavor]["vcpus"],
                       "ram": str(FLAVORS[flavor]["ram"]), "disk": FLAVORS[flavor]["disk"]},
            "security_groups": [{"name": g.get("id"), "id": g.get("id")} for g in groups],
            "accessIPv4": "", "accessIPv6": "", "progress": 0, "config_drive": "",
            "metadata": {"chargingMode": "1", "metering.order_id": order_id,
                         "metering.product_id": line["product_id"], "vpc_id": server["vpcid"],
                         "metering.image_id": server["imageRef"], "metering.imagetype": "gold",
                         "metering.resourcespeccode": f"{flavor}.linux",
                         "metering.resourcetype": "hws.resource.type.pm",
                         "image_name": "Ubuntu-22.04-server-64bit-for-BareMetal",
                         "op_svc_userid": server["metadata"]["op_svc_userid"], "os_type": "Linux", "os_bit": "64",
                         "__bms_support_evs": "true"},
            "OS-EXT-STS:task_state": "spawning", "OS-EXT-STS:vm_state": "building", "OS-EXT-STS:power_state": 0,
            "OS-EXT-SRV-ATTR:host": "pod01.cn-southwest-2a", "OS-EXT-SRV-ATTR:instance_name": f"instance-{i:08x}",
            "OS-EXT-SRV-ATTR:hypervisor_hostname": uuid.uuid4().hex, "OS-EXT-AZ:availability_zone": zone,
            "OS-DCF:diskConfig": "MANUAL", "OS-SRV-USG:launched_at": "", "OS-SRV-USG:terminated_at": "",
            "os-extended-volumes:volumes_attached": attached,
            "description": "", "host_status": "UP", "OS-EXT-SRV-ATTR:hostname": sname.lower(),
            "OS-EXT-SRV-ATTR:reservation_id": reservation, "OS-EXT-SRV-ATTR:launch_index": i,
            "OS-EXT-SRV-ATTR:root_device_name": "/dev/sda",
            "OS-EXT-SRV-ATTR:user_data": server.get("user_data") or "", "locked": False,
            "tags": list(tag_strings), "os:scheduler_hints": {"dec_baremetal": ["share"]},
            "enterprise_project_id": "0", "sys_tags": [{"key": "_sys_enterprise_project_id", "value": "0"}],
            "_ip": ip, "_mac": "fa:16:3e:" + ":".join(f"{b:02x}" for b in uuid.uuid4().bytes[:3]),
            "_port": str(uuid.uuid4()),
        }
        if SIM.enabled:
            pub = STATE.keypairs.get(key_name or "") or ""
            host = SIM.boot(sid, flavor, [pub] if pub else [], dict(t.split("=", 1) for t in tag_strings if "=" in t))
            record["_ip"] = host.address
        STATE.servers[sid] = record
        ids.append(sid)
    order["_servers"] = ids
    job = _new_job("baremetalBatchCreate", ids, order_id=order_id)
    fail = SWITCH.faults.extra.get("fail_jobs")
    if fail:
        job["fail"] = str(fail)
    return 200, {"order_id": order_id, "job_id": job["job_id"]}


def _visible(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: ([_visible(i) if isinstance(i, dict) else i for i in v] if isinstance(v, list) else v)
            for k, v in doc.items() if not k.startswith("_")}


def _server_doc(server: dict[str, Any]) -> dict[str, Any]:
    doc = _visible(server)
    doc["addresses"] = {} if server["status"] == "DELETED" else {server["metadata"]["vpc_id"]: [
        {"version": "4", "addr": server["_ip"], "OS-EXT-IPS:type": "fixed",
         "OS-EXT-IPS-MAC:mac_addr": server["_mac"], "OS-EXT-IPS:port_id": server["_port"]}]}
    return doc


def _show_server(server_id: str) -> dict[str, Any]:
    server = STATE.servers.get(server_id)
    if server is None:
        raise refuse("server-unknown", server_id=server_id)
    if server["status"] == "DELETED":
        RULES.applies("server-deleted")
    return {"server": _server_doc(server)}


def _list(query: dict[str, str]) -> dict[str, Any]:
    RULES.applies("list-no-deleted")
    found = [s for s in STATE.servers.values() if s["status"] != "DELETED"]
    if query.get("status"):
        found = [s for s in found if s["status"] == query["status"]]
    if query.get("name"):
        RULES.applies("list-name")
        found = [s for s in found if query["name"] in s["name"]]
    if query.get("tags"):
        RULES.applies("list-tags")
        found = [s for s in found if query["tags"] in s["tags"]]
    if query.get("flavor"):
        found = [s for s in found if s["flavor"]["id"] == query["flavor"]]
    if query.get("reservation_id"):
        found = [s for s in found if s["OS-EXT-SRV-ATTR:reservation_id"] == query["reservation_id"]]
    if query.get("enterprise_project_id"):
        found = [s for s in found if s["enterprise_project_id"] == query["enterprise_project_id"]]
    found.sort(key=lambda s: s["created"] + s["id"])
    RULES.applies("list-pages")
    limit = min(int(query.get("limit") or 25), 1000)
    page = int(query.get("offset") or 1)
    chunk = found[(page - 1) * limit: page * limit]
    return {"servers": [_server_doc(s) for s in chunk], "count": len(found)}


def _job(job_id: str) -> dict[str, Any]:
    job = STATE.jobs.get(job_id)
    if job is None:
        raise refuse("job-unknown", job_id=job_id)
    RULES.applies("job-status")
    payload = {k: v for k, v in job.items() if k not in ("done_at", "sub_jobs", "fail", "order_id")}
    payload["entities"] = {"sub_jobs_total": len(job["sub_jobs"]), "sub_jobs": job["sub_jobs"]}
    return payload


def _tags(server_id: str, doc: dict[str, Any]) -> tuple[int, None]:
    server = STATE.servers.get(server_id)
    if server is None or server["status"] == "DELETED":
        raise refuse("tags-server-unknown", server_id=server_id)
    if doc.get("action") != "create":
        raise refuse("tags-action", action=doc.get("action"))
    pairs: dict[str, str] = {}
    for t in doc.get("tags") or []:
        key, value = str(t.get("key") or ""), str(t.get("value") or "")
        if not 1 <= len(key) <= 36 or len(value) > 43 or _bad_tag_text(key) or _bad_tag_text(value):
            raise refuse("tags-tag", key=key, value=value)
        pairs[key] = value
    kept = [t for t in server["tags"] if t.partition("=")[0] not in pairs]
    own = [t for t in kept if t != "__type_baremetal"]
    if len(own) + len(pairs) > 20:
        raise refuse("tags-count", count=len(own) + len(pairs))
    if any(t.partition("=")[0] in pairs for t in server["tags"]):
        RULES.applies("tags-overwrite")
    server["tags"] = kept + [f"{k}={v}" for k, v in pairs.items()]
    return 204, None


# ---------------------------------------------------------------------------------------------
# BSS.
# ---------------------------------------------------------------------------------------------
def _order(order_id: str) -> dict[str, Any]:
    order = STATE.orders.get(order_id)
    if order is None:
        raise refuse("order-unknown", order_id=order_id)
    RULES.applies("order-status")
    info = {k: v for k, v in order.items() if not k.startswith("_") and k != "order_line_items"}
    return {"total_count": len(order["order_line_items"]), "order_info": info,
            "order_line_items": [dict(line) for line in order["order_line_items"]]}


def _resources(doc: dict[str, Any]) -> dict[str, Any]:
    ids = doc.get("resource_ids")
    if ids is not None and (not isinstance(ids, list) or len(ids) > 50):
        raise refuse("resources-ids", count=len(ids) if isinstance(ids, list) else ids)
    RULES.applies("resources-query")
    main_only = doc.get("only_main_resource") == 1
    found = list(STATE.resources.values())
    if ids:
        found = [r for r in found if r["resource_id"] in ids or (not main_only and r["parent_resource_id"] in ids)]
    if doc.get("order_id"):
        found = [r for r in found if r["_order"] == doc["order_id"]]
    if main_only:
        found = [r for r in found if r["is_main_resource"] == 1]
    if doc.get("status_list"):
        found = [r for r in found if r["status"] in doc["status_list"]]
    if doc.get("service_type_code"):
        found = [r for r in found if r["service_type_code"] == doc["service_type_code"]]
    if doc.get("expire_time_begin"):
        found = [r for r in found if r["expire_time"] >= doc["expire_time_begin"]]
    if doc.get("expire_time_end"):
        found = [r for r in found if r["expire_time"] <= doc["expire_time_end"]]
    offset, limit = int(doc.get("offset") or 0), int(doc.get("limit") or 10)
    return {"data": [_visible(r) for r in found[offset:offset + limit]], "total_count": len(found)}


def _unsubscribe(doc: dict[str, Any]) -> dict[str, Any]:
    ids = doc.get("resource_ids")
    if not isinstance(ids, list) or not 1 <= len(ids) <= 10:
        raise refuse("unsubscribe-ids", count=len(ids) if isinstance(ids, list) else ids)
    kind = doc.get("unsubscribe_type")
    if kind not in (1, 2):
        raise refuse("unsubscribe-type", kind=kind)
    for rid in ids:
        resource = STATE.resources.get(rid)
        if resource is None:
            if rid in STATE.ending and STATE.servers[rid]["status"] == "DELETED":
                raise refuse("unsubscribe-gone", resource_id=rid)
            if rid in STATE.ending:
                raise refuse("unsubscribe-in-progress", resource_id=rid)
            raise refuse("unsubscribe-unknown", resource_id=rid)
        if resource["is_main_resource"] != 1:
            raise refuse("unsubscribe-main-only", resource_id=rid)
    if kind == 2:  # no term is ever renewed here: there is no renewed period to unsubscribe
        raise refuse("unsubscribe-renewal", resource_id=ids[0])
    RULES.applies("unsubscribe-ends")
    orders = []
    for rid in ids:
        main = STATE.resources[rid]
        bought = STATE.orders[main["_order"]]
        effective = datetime.strptime(main["effective_time"], _ISO).replace(tzinfo=UTC)
        expires = datetime.strptime(main["expire_time"], _ISO).replace(tzinfo=UTC)
        now = CLOCK.now()
        share = bought["amount_after_discount"] / max(1, len(bought["_servers"]))
        if now - effective <= timedelta(days=5):
            refund = share
        else:
            refund = share * max(0.0, (expires - now) / (expires - effective))
        unsub = "CS" + CLOCK.now().strftime("%y%m%d%H%M") + uuid.uuid4().hex[:7].upper()
        STATE.orders[unsub] = {
            "order_id": unsub, "customer_id": DOMAIN_ID, "service_type_code": "hws.service.type.bms",
            "service_type_name": "裸金属服务器", "source_type": 1, "status": 5, "order_type": 4,
            "amount_after_discount": -round(refund, 2), "official_amount": -round(refund, 2), "measure_id": 1,
            "create_time": _now_iso(), "payment_time": _now_iso(), "currency": "CNY",
            "user_name": "metalfleet-test", "order_line_items": [], "_servers": [rid], "_renew": False}
        orders.append(unsub)
        for key in [k for k, r in STATE.resources.items() if k == rid or r["parent_resource_id"] == rid]:
            del STATE.resources[key]
        server = STATE.servers[rid]
        server["OS-EXT-STS:task_state"] = "deleting"
        STATE.ending[rid] = CLOCK.time() + STATE.job_seconds
    return {"order_ids": orders}


def _bms_product(info: dict[str, Any], inquiry: str) -> None:
    """Both price inquiries price BMS servers only: another service or resource type is an unknown product."""
    if (info.get("cloud_service_type"), info.get("resource_type")) != ("hws.service.type.bms", "hws.resource.type.bms"):
        raise refuse(f"{inquiry}-product-unknown",
                     product=f"{info.get('cloud_service_type')}/{info.get('resource_type')}")


def _rate(doc: dict[str, Any]) -> dict[str, Any]:
    """ListOnDemandResourceRatings from STATE.prices (called with LOCK held)."""
    if doc.get("project_id") != PROJECT_ID:
        raise refuse("rating-project", project=doc.get("project_id"))
    infos = doc.get("product_infos")
    if not isinstance(infos, list) or not infos or any(not isinstance(i, dict) or not i.get("id") for i in infos):
        raise refuse("rating-products")
    results = []
    total = 0.0
    for info in infos:
        _bms_product(info, "rating")
        if str(info.get("usage_factor") or "").lower() != "duration":
            raise refuse("rating-usage-factor", factor=info.get("usage_factor"))
        if info.get("usage_measure_id") != 4:
            raise refuse("rating-usage-unit", unit=info.get("usage_measure_id"))
        hourly = STATE.prices.get((str(info.get("region")), str(info.get("resource_spec"))))
        if hourly is None:
            raise refuse("rating-product-unknown", product=f"{info.get('resource_spec')} in {info.get('region')}")
        amount = round(hourly * float(info.get("usage_value") or 0) * int(info.get("subscription_num") or 1), 6)
        total += amount
        results.append({"id": info["id"], "product_id": "OFFI" + hashlib.sha256(
            f"{info.get('region')}/{info.get('resource_spec')}".encode()).hexdigest()[:24].upper(),
            "amount": amount, "discount_amount": 0.0, "official_website_amount": amount, "measure_id": 1,
            "discount_rating_results": []})
    RULES.applies("rating-price")
    return {"amount": round(total, 6), "discount_amount": 0.0, "official_website_amount": round(total, 6),
            "measure_id": 1, "currency": "CNY", "product_rating_results": results}


#: PeriodProductInfo.period_type, as the SDK model lists it: 0 day, 2 month, 3 year, 4 hour.
PERIOD_TYPES = (0, 2, 3, 4)


def _rate_period(doc: dict[str, Any]) -> dict[str, Any]:
    """ListRateOnPeriodDetail from STATE.period_prices (called with LOCK held)."""
    if doc.get("project_id") != PROJECT_ID:
        raise refuse("period-project", project=doc.get("project_id"))
    infos = doc.get("product_infos")
    ids = [i.get("id") for i in infos if isinstance(i, dict)] if isinstance(infos, list) else []
    if (not isinstance(infos, list) or not 1 <= len(infos) <= 100 or len(ids) != len(infos) or not all(ids)
            or len(set(ids)) != len(ids)):
        raise refuse("period-products")
    results = []
    total = 0.0
    for info in infos:
        _bms_product(info, "period")
        period = info.get("period_type")
        if period not in PERIOD_TYPES:
            raise refuse("period-type", period=period)
        counts = (info.get("period_num"), info.get("subscription_num"))
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts):
            raise refuse("period-counts", period_num=counts[0], subscription_num=counts[1])
        price = STATE.period_prices.get((str(info.get("region")), str(info.get("resource_spec")), period))
        if price is None:
            raise refuse("period-product-unknown", product=f"{info.get('resource_spec')} in {info.get('region')} "
                                                           f"for period_type {period}")
        amount = round(price * counts[0] * counts[1], 6)
        total += amount
        results.append({"id": info["id"], "product_id": "OFFI" + hashlib.sha256(
            f"{info.get('region')}/{info.get('resource_spec')}/{period}".encode()).hexdigest()[:24].upper(),
            "official_website_amount": amount, "measure_id": 1})
    RULES.applies("period-price")
    return {"official_website_rating_result": {"official_website_amount": round(total, 6), "measure_id": 1,
                                               "product_rating_results": results}, "currency": "CNY"}


# ---------------------------------------------------------------------------------------------
# The WSGI app.
# ---------------------------------------------------------------------------------------------
def _answer(op: str, ids: dict[str, str], query: dict[str, str], doc: dict[str, Any]) -> tuple[int, Any]:
    if op == "ListBaremetalFlavorDetailExtends":
        return 200, _flavors()
    if op == "CreateBareMetalServers":
        return _create(doc)
    if op == "ListBareMetalServers":
        return 200, _list(query)
    if op == "ShowBaremetalServerDetails":
        return 200, _show_server(ids["server_id"])
    if op == "ShowJobInfos":
        return 200, _job(ids["job_id"])
    if op == "BatchCreateBaremetalServerTags":
        return _tags(ids["server_id"], doc)
    if op == "ShowCustomerOrderDetails":
        return 200, _order(ids["order_id"])
    if op == "ListPayPerUseCustomerResources":
        return 200, _resources(doc)
    if op == "CancelResourcesSubscription":
        return 200, _unsubscribe(doc)
    if op == "ListRateOnPeriodDetail":
        return 200, _rate_period(doc)
    return 200, _rate(doc)


def api(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
    status: int = 200
    payload: Any = None
    try:
        check_signature(environ, body, CLOCK.now())
        op, ids = route(method, path)
        if op is None:
            raise Refusal("Emulator.NotServed", f"{method} {path} is not an operation this emulator serves (it "
                                                "serves the operations of tests/support/reference/huawei-bms.yaml)",
                          501)
        if "project_id" in ids:
            if ids["project_id"] != PROJECT_ID or environ.get("HTTP_X_PROJECT_ID", PROJECT_ID) != PROJECT_ID:
                raise refuse("gateway-project", project=ids["project_id"])
        elif environ.get("HTTP_X_DOMAIN_ID") != DOMAIN_ID:
            raise refuse("gateway-domain", domain=environ.get("HTTP_X_DOMAIN_ID") or "(none)")
        query = dict(urllib.parse.parse_qsl(environ.get("QUERY_STRING", "")))
        try:
            doc = json.loads(body) if body else {}
        except ValueError:
            doc = None
        if not isinstance(doc, dict) and "project_id" in ids:
            raise refuse("request-json")
        if not isinstance(doc, dict):
            raise refuse("bss-request-json")
        with LOCK:
            _advance()
            status, payload = _answer(op, ids, query, doc)
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
    if raw.get("period_type") is not None:
        period_key = (str(raw["region"]), str(raw["flavor"]), int(raw["period_type"]))
        with LOCK:
            if raw.get("amount") is None:
                STATE.period_prices.pop(period_key, None)
            else:
                STATE.period_prices[period_key] = float(raw["amount"])
        return {"ok": True}
    key = (str(raw["region"]), str(raw["flavor"]))
    with LOCK:
        if raw.get("hourly") is None:
            STATE.prices.pop(key, None)
        else:
            STATE.prices[key] = float(raw["hourly"])
    return {"ok": True}


def _billing(_raw: dict[str, Any], _q: dict[str, str]) -> Any:
    with LOCK:
        _advance()
        return {"orders": {k: {**_visible(v), "servers": v["_servers"]} for k, v in STATE.orders.items()},
                "resources": {k: _visible(v) for k, v in STATE.resources.items()}}


def _reset_state() -> None:
    global STATE
    with LOCK:
        STATE = State()


def build_app() -> FaultMiddleware:
    return FaultMiddleware(api, switch=SWITCH, error_body=_error, identify=identify, clock=CLOCK, sim_hosts=SIM,
                           reset_state=_reset_state,
                           controls={("POST", "stock"): _set_stock, ("POST", "quota"): _set_quota,
                                     ("POST", "keypairs"): _add_keypair, ("POST", "timing"): _set_timing,
                                     ("POST", "prices"): _set_price, ("GET", "billing"): _billing})


def main(argv: list[str] | None = None) -> int:
    parser = server_parser("Huawei Cloud BMS emulator", default_port=5062,
                           sim_hosts_help="boot a simulated GPU/NPU host per server (needs root)")
    parser.add_argument("--job-seconds", type=float, default=0.2, help="how long a job runs (emulator clock)")
    args = parser.parse_args(argv)
    STATE.job_seconds = args.job_seconds
    return run_server(parser, args, build_app, title="Huawei BMS emulator", sim_hosts=SIM)


if __name__ == "__main__":
    sys.exit(main())
