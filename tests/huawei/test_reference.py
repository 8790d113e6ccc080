"""The BMS emulator against its reference table (tests/support/reference/huawei-bms.yaml), and the driver too.

* every rule's probe, run against the emulator: a request built from a valid one for the rule's operation (the
  probe's ``set`` / ``unset`` / ``sign`` / ``raw_body`` changes it, after the ``setup`` it names), answered with
  the rule's code and HTTP status for a refusal or a success for an accepted form or a behaviour, the rule's id
  in that request's log entry (so another rule answering the same code does not pass for it);
* what the driver sends: its real flow (offerings, order, tags, subscriptions, release by unsubscribing, and the
  price inquiries of the catalogue refresh), every parameter of every call, flattened, listed in ``sends``;
* what the emulator answers: every field of every answer a flow draws out, with its JSON type, listed in
  ``answers``, and ``answers`` agreeing with the official SDK's response models (field names and types).
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from metalfleet.providers import NodeState, node_specs_for, parse_spec
from metalfleet.providers.huawei.pricing import HuaweiPriceInquiry
from metalfleet.testing import reference
from metalfleet.testing.huawei import (
    DOMAIN_ID,
    FLAVORS,
    PROJECT_ID,
    REGION,
    TEST_AK,
    TEST_SK,
    ZONES,
    HuaweiEmulator,
    canonical_request,
    signature,
)
from tests.emulators.huawei_fixtures import huawei_driver, huawei_spec_data

REF = reference.load("huawei-bms")
FLAVOR = next(iter(FLAVORS))
#: What a JSON value's type is called in the table.
_JSON = {str: "string", bool: "boolean", int: "integer", float: "number", dict: "object", list: "array"}


# ---------------------------------------------------------------------------------------------
# Requests as the gateway checks them.
# ---------------------------------------------------------------------------------------------
@dataclass
class Call:
    """One API request before it is signed."""

    op: str
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    raw_body: str | None = None
    bss: bool = False


@dataclass
class Answer:
    status: int
    doc: Any
    entry: dict[str, Any]


def send(emulator: HuaweiEmulator, call: Call, sign: dict[str, Any] | None = None) -> Answer:
    """Sign ``call`` as an SDK would (``sign`` bends it: ``sk``, ``access``, ``omit`` headers from the signed ones,
    ``date_offset`` seconds, ``unsigned_payload``, ``domain``) and send it; its answer and its request-log entry."""
    sign = sign or {}
    body = call.raw_body.encode() if call.raw_body is not None else (
        json.dumps(call.body).encode() if call.body is not None else b"")
    date = (datetime.now(UTC) + timedelta(seconds=float(sign.get("date_offset", 0)))).strftime("%Y%m%dT%H%M%SZ")
    query = "&".join(f"{urllib.parse.quote(k, safe='')}={urllib.parse.quote(v, safe='')}"
                     for k, v in call.query.items())
    headers = {"host": emulator.url.removeprefix("http://"), "x-sdk-date": date}
    if body:
        headers["content-type"] = "application/json"
    if call.bss:
        headers["x-domain-id"] = str(sign.get("domain", DOMAIN_ID))
    else:
        headers["x-project-id"] = PROJECT_ID
    if sign.get("unsigned_payload"):
        headers["x-sdk-content-sha256"] = "UNSIGNED-PAYLOAD"
    signed = sorted(h for h in headers if h not in set(sign.get("omit", ())))
    sig = signature(str(sign.get("sk", TEST_SK)), date, canonical_request(call.method, call.path, query, headers,
                                                                          signed, body))
    out = {k: v for k, v in headers.items() if k != "host"}
    out["Authorization"] = (f"SDK-HMAC-SHA256 Access={sign.get('access', TEST_AK)}, "
                            f"SignedHeaders={';'.join(signed)}, Signature={sig}")
    url = emulator.url + urllib.parse.quote(call.path) + (f"?{query}" if query else "")
    before = len(emulator.requests())
    req = urllib.request.Request(url, data=body or None, method=call.method, headers=out)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    entries = emulator.requests()
    assert len(entries) == before + 1, "one request, one log entry"
    return Answer(status, json.loads(raw) if raw else None, entries[-1])


# ---------------------------------------------------------------------------------------------
# Valid requests per operation, and the state some probes need first.
# ---------------------------------------------------------------------------------------------
BMS = f"/v1/{PROJECT_ID}"


@dataclass
class World:
    """What a probe's setup made: values for the ``{placeholders}`` of its request."""

    values: dict[str, Any] = field(default_factory=dict)


def _order_server(emulator: HuaweiEmulator, name: str) -> World:
    driver = huawei_driver(emulator)
    [spec] = node_specs_for(driver, parse_spec({**huawei_spec_data(name, 1), "storage": {
        "kms_key_id": "0f0e0d0c-0b0a-4908-8706-050403020100", "data": [{"size_gib": 100}]}}))
    node = driver.order(spec)
    job = emulator.requests("ShowJobInfos")[-1]["params"]["path"]["job_id"]
    volume = next(k for k, r in emulator.billing()["resources"].items() if r["parent_resource_id"] == node.id)
    return World({"server_id": node.id, "order_id": node.extra["order_id"], "job_id": job, "volume_id": volume,
                  "server_name_part": (node.name or "")[:-1], "_driver": driver})


def setup(emulator: HuaweiEmulator, name: str | None) -> World:
    uid = uuid.uuid4().hex[:6]
    if name is None:
        return World()
    if name == "no_quota":
        emulator.set_quota(0)
        return World()
    if name == "no_stock":
        for zone in ZONES:
            emulator.set_stock(zone, FLAVOR, 0)
        return World()
    world = _order_server(emulator, f"probe-{uid}")
    if name in ("deleting", "deleted"):
        driver = world.values["_driver"]
        emulator.set_timing(60.0 if name == "deleting" else 0.05)
        driver._billing.unsubscribe(world.values["server_id"])
        if name == "deleted":
            driver.wait([world.values["server_id"]], NodeState.TERMINATED, timeout=20, poll=0.05)
    return world


def base(op: str, emulator: HuaweiEmulator) -> Call:
    """A request for ``op`` the emulator takes (with ``{placeholders}`` for what a setup makes)."""
    if op == "ListBaremetalFlavorDetailExtends":
        return Call(op, "GET", f"{BMS}/baremetalservers/flavors")
    if op == "CreateBareMetalServers":
        driver = huawei_driver(emulator)
        [spec] = node_specs_for(driver, parse_spec(huawei_spec_data(f"probe-{uuid.uuid4().hex[:6]}", 1)))
        return Call(op, "POST", f"{BMS}/baremetalservers", body=driver.create_request(spec))
    if op == "ListBareMetalServers":
        return Call(op, "GET", f"{BMS}/baremetalservers/detail", query={"limit": "10", "offset": "1"})
    if op == "ShowBaremetalServerDetails":
        return Call(op, "GET", f"{BMS}/baremetalservers/{{server_id}}")
    if op == "ShowJobInfos":
        return Call(op, "GET", f"{BMS}/jobs/{{job_id}}")
    if op == "BatchCreateBaremetalServerTags":
        return Call(op, "POST", f"{BMS}/baremetalservers/{{server_id}}/tags/action",
                    body={"action": "create", "tags": [{"key": "probe", "value": "1"}]})
    if op == "ShowCustomerOrderDetails":
        return Call(op, "GET", "/v2/orders/customer-orders/details/{order_id}", bss=True)
    if op == "ListPayPerUseCustomerResources":
        return Call(op, "POST", "/v2/orders/suscriptions/resources/query", bss=True,
                    body={"resource_ids": ["{server_id}"], "only_main_resource": 1})
    if op == "CancelResourcesSubscription":
        return Call(op, "POST", "/v2/orders/subscriptions/resources/unsubscribe", bss=True,
                    body={"resource_ids": ["{server_id}"], "unsubscribe_type": 1})
    if op == "ListRateOnPeriodDetail":
        return Call(op, "POST", "/v2/bills/ratings/period-resources/subscribe-rate", bss=True, body={
            "project_id": PROJECT_ID, "product_infos": [{
                "id": "1", "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
                "resource_spec": FLAVOR, "region": REGION, "period_type": 2, "period_num": 1, "subscription_num": 1}]})
    assert op == "ListOnDemandResourceRatings", op
    return Call(op, "POST", "/v2/bills/ratings/on-demand-resources", bss=True, body={
        "project_id": PROJECT_ID, "inquiry_precision": 0, "product_infos": [{
            "id": "1", "cloud_service_type": "hws.service.type.bms", "resource_type": "hws.resource.type.bms",
            "resource_spec": FLAVOR, "region": REGION, "usage_factor": "Duration", "usage_value": 1,
            "usage_measure_id": 4, "subscription_num": 1}]})


#: Values too long to write in the table: built here, named there as ``{name}``.
BUILT: dict[str, Callable[[], Any]] = {
    "ten_tags": lambda: [{"key": f"t{i}", "value": "v"} for i in range(10)],
    "twenty_tags": lambda: [{"key": f"t{i}", "value": "v"} for i in range(20)],
    "sixty_volumes": lambda: [{"volumetype": "SSD", "size": 10} for _ in range(60)],
    "fifty_one_ids": lambda: [str(uuid.UUID(int=i)) for i in range(51)],
}


def _fill(value: Any, world: World) -> Any:
    if isinstance(value, str):
        whole = re.fullmatch(r"\{(\w+)\}", value)
        if whole and whole.group(1) in BUILT:
            return BUILT[whole.group(1)]()
        if whole and whole.group(1) in world.values:
            return world.values[whole.group(1)]
        return re.sub(r"\{(\w+)\}", lambda m: str(world.values.get(m.group(1), m.group(0))), value)
    if isinstance(value, list):
        return [_fill(v, world) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, world) for k, v in value.items()}
    return value


def _walk(doc: Any, dotted: str) -> tuple[Any, str | int]:
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    for part in parts[:-1]:
        doc = doc[part]
    return doc, parts[-1]


def apply(call: Call, probe: dict[str, Any], world: World) -> Call:
    """The probe's changes to a valid request: ``?q`` a query parameter, ``{id}`` a path parameter, anything else
    a dotted path into the JSON body (list indexes as numbers)."""
    out = copy.deepcopy(call)
    out.body = _fill(out.body, world)
    for key, value in (probe.get("set") or {}).items():
        value = _fill(value, world)
        if key.startswith("?"):
            out.query[key[1:]] = str(value)
        elif key.startswith("{"):
            name = key.strip("{}")
            out.path = out.path.replace(f"/{PROJECT_ID}/", f"/{value}/") if name == "project_id" else \
                out.path.replace(key, str(value))
        else:
            parent, last = _walk(out.body, key)
            parent[last] = value
    for key in probe.get("unset") or []:
        if key.startswith("?"):
            out.query.pop(key[1:], None)
        else:
            parent, last = _walk(out.body, key)
            del parent[last]
    out.path = _fill(out.path, world)
    if probe.get("raw_body") is not None:
        out.raw_body = str(probe["raw_body"])
    return out


DATA_PROBES = sorted((r for r in REF.rules.values() if r.probe and "op" in r.probe), key=lambda r: r.id)


def test_every_rule_has_a_probe_this_module_or_a_named_test_runs() -> None:
    for rule in REF.rules.values():
        assert rule.probe and ("op" in rule.probe or "test" in rule.probe), rule.id
        if "op" in rule.probe:
            assert rule.probe["op"] in REF.operations, rule.id


@pytest.mark.parametrize("rule", DATA_PROBES, ids=lambda r: r.id)
def test_the_emulator_keeps_the_rule(huawei_emulator: HuaweiEmulator, rule: reference.Rule) -> None:
    probe = dict(rule.probe or {})
    world = setup(huawei_emulator, probe.get("setup"))
    call = apply(base(probe["op"], huawei_emulator), probe, world)
    answer = send(huawei_emulator, call, probe.get("sign"))
    if rule.kind == "refuse":
        assert (answer.status, (answer.doc or {}).get("error_code")) == (rule.status, rule.code), answer.doc
        assert answer.doc.get("error_msg") and answer.doc.get("request_id")
    else:
        assert 200 <= answer.status < 300, answer.doc
    assert rule.id in (answer.entry.get("rules") or []), (rule.id, answer.entry.get("rules"))


# ---------------------------------------------------------------------------------------------
# What the driver sends.
# ---------------------------------------------------------------------------------------------
def flat(doc: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every leaf of a JSON document: list items as ``[]``, and, with ``dicts``, the
    values of a free-keyed map as ``*``."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from flat(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(doc, list):
        for item in doc:
            yield from flat(item, f"{prefix}[]")
    else:
        yield prefix, doc


def sent_names(params: dict[str, Any]) -> set[str]:
    names = {f"?{k}" for k in params.get("query") or {}}
    names |= {f"{{{k}}}" for k in params.get("path") or {} if k != "project_id"}
    names |= {reference.flat_name(p) for p, _ in flat(params.get("body") or {})}
    return names


@pytest.fixture
def driver_flow(huawei_emulator: HuaweiEmulator) -> list[dict[str, Any]]:
    """The request log of the driver's real flow: offerings, an order (with a data volume and user data), tags,
    the subscription read, the refused and the opted-in release, and the catalogue refresh's price inquiry."""
    from metalfleet.providers.errors import SubscriptionError

    driver = huawei_driver(huawei_emulator)
    assert driver.offerings()
    [spec] = node_specs_for(driver, parse_spec({**huawei_spec_data("sends", 1),
                                      "storage": {"kms_key_id": "0f0e0d0c-0b0a-4908-8706-050403020100",
                                                  "data": [{"size_gib": 200}]}}))
    node = driver.order(dataclasses.replace(spec, user_data="#cloud-config\n{}"))
    driver.set_tags(node.id, {"metalfleet:acceptance": "passed"})
    assert driver.subscriptions([node.id])
    with pytest.raises(SubscriptionError):
        driver.release(node.id)
    driver.release(node.id, unsubscribe=True, timeout=30)
    inquiry = HuaweiPriceInquiry(endpoint=huawei_emulator.url, ak=TEST_AK, sk=TEST_SK, domain_id=DOMAIN_ID,
                                 project_id=PROJECT_ID)
    assert inquiry.prices(REGION, [FLAVOR])
    return huawei_emulator.requests()


#: Parameters the table lists that the flow above does not happen to send (the driver sends them on other paths).
UNEXERCISED = {"ListPayPerUseCustomerResources": {"order_id"}}


def test_every_parameter_the_driver_sends_is_in_the_table(driver_flow: list[dict[str, Any]]) -> None:
    sent: dict[str, set[str]] = {}
    for entry in driver_flow:
        sent.setdefault(entry["action"], set()).update(sent_names(entry["params"]))
    assert set(sent) <= set(REF.operations), f"operations outside the table: {sorted(set(sent) - set(REF.operations))}"
    for op, names in sent.items():
        missing = sorted(names - set(REF.sent(op)))
        assert not missing, f"{op} sends {missing}, which the table does not cite"
    for op, spec in REF.operations.items():
        stale = sorted(set(spec.sends) - sent.get(op, set()) - UNEXERCISED.get(op, set()))
        assert not stale, f"the table says {op} sends {stale}, which the driver's flow did not"
    assert all("tags" not in e["params"]["query"] for e in driver_flow if e["action"] == "ListBareMetalServers")


# ---------------------------------------------------------------------------------------------
# What the emulator answers.
# ---------------------------------------------------------------------------------------------
def answer_types(doc: Any, prefix: str = "", free: frozenset[str] = frozenset({"addresses"})) -> dict[str, str]:
    """``{path: JSON type}`` of a document and all it holds (a null value's type is ``null``); the values of the
    free-keyed maps (``addresses``: VPC id -> its addresses) as ``*``, a key with a dot in it in double quotes
    (``metadata."metering.order_id"``)."""
    out: dict[str, str] = {}
    if prefix:
        out[prefix] = _JSON.get(type(doc), "null")
    if isinstance(doc, dict):
        for k, v in doc.items():
            key = "*" if prefix.rsplit(".", 1)[-1] in free else (f'"{k}"' if "." in k else k)
            out.update(answer_types(v, f"{prefix}.{key}" if prefix else key, free))
    elif isinstance(doc, list):
        for item in doc:
            out.update(answer_types(item, f"{prefix}[]", free))
    return out


def observed_answers(emulator: HuaweiEmulator) -> dict[str, dict[str, str]]:
    """Every field the emulator answers, by operation, over flows that draw each kind of answer out: a server
    ordered, running, tagged, failed (a failed job's fault and sub-job errors), unsubscribed and deleted; an unpaid
    order's job; both orders of a term; the price inquiries (on demand, yearly/monthly)."""
    seen: dict[str, dict[str, str]] = {}

    def note(op: str, answer: Answer) -> Any:
        assert 200 <= answer.status < 300, (op, answer.status, answer.doc)
        for path, kind in answer_types(answer.doc).items():
            if kind != "null" or path not in seen.setdefault(op, {}):
                seen.setdefault(op, {})[path] = kind
        return answer.doc

    def call(op: str, world: World, **changes: Any) -> Any:
        return note(op, send(emulator, apply(base(op, emulator), changes, world)))

    world = _order_server(emulator, "answers")
    call("ListBaremetalFlavorDetailExtends", world)
    call("ShowJobInfos", world)
    call("ShowBaremetalServerDetails", world)
    call("ListBareMetalServers", world)
    call("ShowCustomerOrderDetails", world)
    call("ListPayPerUseCustomerResources", world, set={"only_main_resource": 0})
    call("ListOnDemandResourceRatings", world)
    call("ListRateOnPeriodDetail", world)
    unpaid = call("CreateBareMetalServers", world, unset=["server.extendparam.isAutoPay"])
    call("ShowJobInfos", World({"job_id": unpaid["job_id"]}))
    emulator.set_faults(fail_jobs="Fail to operate baremetal server, reason: flavor is sold out.")
    failed = _order_server(emulator, "answers-failed")
    call("ShowBaremetalServerDetails", failed)
    call("ShowJobInfos", failed)
    call("ListBareMetalServers", failed, set={"?name": "answers-failed"})
    emulator.set_faults()
    emulator.set_timing(0.05)
    ended = call("CancelResourcesSubscription", world)
    call("ShowCustomerOrderDetails", World({"order_id": ended["order_ids"][0]}))
    world.values["_driver"].wait([world.values["server_id"]], NodeState.TERMINATED, timeout=20, poll=0.05)
    call("ShowBaremetalServerDetails", world)
    return seen


def model_type(model: str, path: str) -> str | None:
    """The JSON type the official SDK model ``model`` (``package.Class``) gives ``path``; None when it has no such
    field."""
    package, _, name = model.rpartition(".")
    mod = importlib.import_module(package)
    kind = name
    for part in (p.strip('"') for p in re.findall(r'"[^"]+"|[^.\[\]"]+|\[\]', path)):
        if part == "[]":
            inner = re.fullmatch(r"list\[(.+)\]", kind)
            if not inner:
                return None
            kind = inner.group(1)
            continue
        if part == "*":
            inner = re.fullmatch(r"dict\(str, (.+)\)", kind)
            if not inner:
                return None
            kind = inner.group(1)
            continue
        cls = getattr(mod, kind, None)
        if cls is None or not hasattr(cls, "attribute_map"):
            return None
        by_wire = {wire: attr for attr, wire in cls.attribute_map.items()}
        if part not in by_wire:
            return None
        kind = cls.openapi_types[by_wire[part]]
    if kind.startswith("list["):
        return "array"
    if kind.startswith("dict(") or kind == "object" or hasattr(mod, kind):
        return "object"
    return {"str": "string", "int": "integer", "float": "number", "decimal.Decimal": "number", "bool": "boolean",
            "datetime": "string", "date": "string"}.get(kind)


def test_every_field_the_emulator_answers_is_in_the_table_with_its_type(huawei_emulator: HuaweiEmulator) -> None:
    seen = observed_answers(huawei_emulator)
    for op, fields in seen.items():
        table = REF.operations[op].answers
        unlisted = sorted(p for p in fields if p not in table)
        assert not unlisted, f"{op} answers {unlisted}, which the table does not list"
        wrong = sorted(f"{p}: {k} (table: {table[p]})" for p, k in fields.items() if k != "null" and k != table[p])
        assert not wrong, f"{op} answers fields of another type than the table's: {wrong}"
        stale = sorted(set(table) - set(fields))
        assert not stale, f"the table says {op} answers {stale}, which no flow drew out"


@pytest.mark.parametrize("op", sorted(o for o in REF.operations if REF.operations[o].answers))
def test_the_tables_answers_agree_with_the_sdk_models(op: str) -> None:
    spec = REF.operations[op]
    assert spec.answers_model
    wrong = {}
    for path, kind in spec.answers.items():
        expected = model_type(spec.answers_model, path)
        if expected != kind:
            wrong[path] = f"table {kind}, {spec.answers_model} {expected}"
    assert not wrong, wrong
