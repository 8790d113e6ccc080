"""The ECS emulator held to its reference table (tests/support/reference/alibaba-ecs.yaml), and the driver held to
what the table says it may send.

* Probes: every rule's data-driven probe is sent to a running emulator (the operation's base request below,
  ``set``/``unset``/``repeat`` applied, ``setup`` filling the ``{placeholders}``, ``wire`` and ``sign`` saying how
  it is encoded and signed): a refusal must answer the rule's code and HTTP status, an accept/behave rule success,
  and the request's log entry must name the rule (so another rule answering the same code does not pass).
* Driver sends: the driver's real flows (an ERI order with data disk, tags, key pair and deployment set, a spot
  and a monthly variant, several security groups, SSH rules changed, tags set, console read, subscriptions and
  release with unsubscribe, an expired subscription, the cluster's resources deleted, prices read) against the
  emulator; every parameter it sent, flattened, is in ``sends`` for its operation, and every ``sends`` entry was
  sent by some flow.
* Answers: every field the emulator answered (JSON) is in ``answers`` with its JSON type, and ``answers`` agrees
  with the official SDK's response model (field names and types, introspected).
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from metalfleet.providers import NodeState, node_specs_for, order_cluster, parse_spec, release_cluster
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.providers.alibaba.pricing import AlibabaPriceList
from metalfleet.providers.errors import SubscriptionError
from metalfleet.testing import reference
from metalfleet.testing.alibaba import (
    ACCESS_KEY_ID,
    ACCESS_KEY_SECRET,
    API_VERSION,
    IMAGES,
    KMS_KEY,
    OTHER_VPC_ID,
    REGION,
    VPC_ID,
    ZONES,
    AlibabaEmulator,
    default_vswitch_id,
    rpc_signature,
    rpc_string_to_sign,
)
from tests.emulators.alibaba_fixtures import ALIBABA_ENV, ecs_call
from tests.emulators.running import running_emulator
from tests.specs import DATA_DISK, TEAM_TAGS, cluster_spec_data

from .conftest import FAST

REF = reference.load("alibaba-ecs")
ZONE = ZONES[2]
IMAGE = IMAGES[0]
ERI_TYPE = "ecs.ebmgn8v.48xlarge"
#: A public key ECS takes (ssh-ed25519, 32 zero bytes): ImportKeyPair reads its base64 blob.
PUBLIC_KEY = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes(32)).decode()

#: Each operation's valid base request (string values; {placeholders} filled per probe). RunInstances is a dry run
#: unless a probe unsets DryRun, so a refusal probe never buys anything.
BASES: dict[str, dict[str, str]] = {
    "RunInstances": {
        "ZoneId": ZONE, "InstanceType": ERI_TYPE, "ImageId": IMAGE, "DryRun": "true",
        "NetworkInterface.1.InstanceType": "Primary", "NetworkInterface.1.NetworkCardIndex": "0",
        "NetworkInterface.1.NetworkInterfaceTrafficMode": "HighPerformance", "NetworkInterface.1.VSwitchId": "{vsw}",
        "NetworkInterface.1.SecurityGroupId": "{sg}", "SystemDisk.Category": "cloud_essd", "SystemDisk.Size": "100"},
    "RunInstancesPlain": {
        "ZoneId": ZONE, "InstanceType": "ecs.ebmgn7e.32xlarge", "ImageId": IMAGE, "DryRun": "true",
        "VSwitchId": "{vsw}", "SecurityGroupId": "{sg}"},
    "DeleteInstances": {"InstanceId.1": "{instance}", "Force": "true"},
    "ModifyInstanceChargeType": {"InstanceIds": '["{prepaid}"]', "InstanceChargeType": "PostPaid",
                                 "IsDetailFee": "true"},
    "TagResources": {"ResourceType": "instance", "ResourceId.1": "{instance}", "Tag.1.Key": "probe",
                     "Tag.1.Value": "yes"},
    "StopInstances": {"InstanceId.1": "{instance}"},
    "StartInstances": {"InstanceId.1": "{stopped}"},
    "GetInstanceConsoleOutput": {"InstanceId": "{instance}"},
    "CreateSecurityGroup": {"VpcId": VPC_ID, "SecurityGroupName": "probe-{unique}"},
    "AuthorizeSecurityGroup": {"SecurityGroupId": "{sg}", "Permissions.1.IpProtocol": "TCP",
                               "Permissions.1.PortRange": "22/22", "Permissions.1.SourceCidrIp": "10.0.0.0/8"},
    "RevokeSecurityGroup": {"SecurityGroupId": "{sg}", "Permissions.1.IpProtocol": "TCP",
                            "Permissions.1.PortRange": "22/22", "Permissions.1.SourceCidrIp": "10.0.0.0/8"},
    "DeleteSecurityGroup": {"SecurityGroupId": "{sg}"},
    "CreateDeploymentSet": {"DeploymentSetName": "probe-{unique}", "Strategy": "LowLatency"},
    "DeleteDeploymentSet": {"DeploymentSetId": "{ds}"},
    "DescribePrice": {"ResourceType": "instance", "InstanceType": ERI_TYPE, "PriceUnit": "Month", "Period": "1"},
    "ImportKeyPair": {"KeyPairName": "probe-{unique}", "PublicKeyBody": PUBLIC_KEY},
}


# -- the wire: requests signed and encoded as a probe says ---------------------------------------------------
def send(ecs: AlibabaEmulator, action: str, params: Mapping[str, str], *, wire: str = "v3", sign: str | None = None,
         unset: tuple[str, ...] = ()) -> tuple[int, Any, str]:
    """One request, signed by an official SDK's signer (V3: alibabacloud_tea_openapi; RPC: aliyun-python-sdk-core),
    the parameters in the query string or (``*-form``) a form body; ``sign`` spoils the signature as a probe asks.
    Returns (HTTP status, parsed JSON answer or the raw text, content type)."""
    params = {"RegionId": REGION, **params}
    if wire.startswith("rpc"):
        return _send_rpc(ecs, action, params, form=wire.endswith("form"), unset=unset)
    return _send_v3(ecs, action, params, form=wire.endswith("form"), sign=sign)


def _send_v3(ecs: AlibabaEmulator, action: str, params: Mapping[str, str], *, form: bool,
             sign: str | None) -> tuple[int, Any, str]:
    from alibabacloud_tea_openapi.utils import Utils

    body = urllib.parse.urlencode(params, quote_via=urllib.parse.quote).encode() if form else b""
    query = {} if form else dict(params)
    date = datetime.now(UTC) - (timedelta(minutes=20) if sign == "stale" else timedelta())
    headers = {"host": ecs.endpoint, "x-acs-version": "2016-04-28" if sign == "wrong-version" else API_VERSION,
               "x-acs-action": action, "x-acs-date": date.strftime("%Y-%m-%dT%H:%M:%SZ"),
               "x-acs-signature-nonce": uuid.uuid4().hex, "accept": "application/json",
               "x-acs-content-sha256": hashlib.sha256(body).hexdigest()}
    if form:
        headers["content-type"] = "application/x-www-form-urlencoded"
    key, secret = ((ACCESS_KEY_ID, "not-the-secret") if sign == "wrong-secret" else
                   ("LTAI5tNoSuchKey", ACCESS_KEY_SECRET) if sign == "unknown-key" else (ACCESS_KEY_ID,
                                                                                         ACCESS_KEY_SECRET))
    request = SimpleNamespace(method="POST", pathname="/", query=query, headers=dict(headers))
    headers["Authorization"] = Utils.get_authorization(request, "ACS3-HMAC-SHA256", headers["x-acs-content-sha256"],
                                                       key, secret)
    if sign == "unsigned-header":
        headers["x-acs-extra"] = "not in SignedHeaders"
    url = f"{ecs.url}/?{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"
    if sign == "replay":
        _post(url, body, headers)
    return _post(url, body, headers)


def _send_rpc(ecs: AlibabaEmulator, action: str, params: Mapping[str, str], *, form: bool,
              unset: tuple[str, ...]) -> tuple[int, Any, str]:
    from aliyunsdkcore.auth.composer.rpc_signature_composer import get_signed_url

    common = {"Action": action, "Version": API_VERSION, "RegionId": params["RegionId"]}
    query = {**common, **({} if form else params)}
    fmt = None if "Format" in unset else "JSON"
    path, _to_sign = get_signed_url(query, ACCESS_KEY_ID, ACCESS_KEY_SECRET, fmt, "POST",
                                    dict(params) if form else {})
    body = urllib.parse.urlencode(params).encode() if form else b""
    headers = {"content-type": "application/x-www-form-urlencoded"} if form else {}
    return _post(ecs.url + path, body, headers)


def _post(url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, Any, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers=dict(headers))
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "")
    return status, json.loads(raw) if "json" in ctype else raw.decode(), ctype


# -- probe setups: the state a probe needs, as {placeholders} ------------------------------------------------
class World:
    """The probes' emulator, cleaned before each probe, and the setups that arrange what a probe needs."""

    def __init__(self, ecs: AlibabaEmulator) -> None:
        self.ecs = ecs
        self.ph: dict[str, str] = {}

    def call(self, action: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return ecs_call(self.ecs, action, dict(params))

    def fresh(self) -> dict[str, str]:
        self.ecs.reset_state()
        sg = self.call("CreateSecurityGroup", {"VpcId": VPC_ID, "SecurityGroupName": "probe-base"})
        self.ph = {"vsw": default_vswitch_id(ZONE), "sg": str(sg["SecurityGroupId"]), "kms": KMS_KEY,
                   "unique": uuid.uuid4().hex[:10]}
        return self.ph

    def _wait(self, iid: str, status: str) -> None:
        deadline = datetime.now(UTC) + timedelta(seconds=30)
        while datetime.now(UTC) < deadline:
            got = self.call("DescribeInstanceStatus", {"InstanceId": [iid]})["InstanceStatuses"]["InstanceStatus"]
            if got and got[0]["Status"] == status:
                return
        raise AssertionError(f"{iid} never reached {status}")

    def run(self, **extra: Any) -> str:
        params: dict[str, Any] = {
            "ZoneId": ZONE, "InstanceType": ERI_TYPE, "ImageId": IMAGE, "NetworkInterface": [
                {"InstanceType": "Primary", "NetworkCardIndex": 0, "NetworkInterfaceTrafficMode": "HighPerformance",
                 "VSwitchId": self.ph["vsw"], "SecurityGroupId": self.ph["sg"]}], **extra}
        iid = str(self.call("RunInstances", params)["InstanceIdSets"]["InstanceIdSet"][0])
        self._wait(iid, "Running")
        return iid

    def setup(self, name: str | None) -> None:
        if name is None:
            return
        getattr(self, "setup_" + name.replace("-", "_"))()

    def setup_instance(self) -> None:
        self.ph["instance"] = self.run()

    def setup_prepaid(self) -> None:
        self.ph["prepaid"] = self.run(InstanceChargeType="PrePaid", Period=1, PeriodUnit="Month")

    def setup_expired(self) -> None:
        self.ph["expired"] = self.run(InstanceChargeType="PrePaid", Period=1, PeriodUnit="Month")
        self.ecs.expire(self.ph["expired"])

    def setup_stopped(self) -> None:
        self.ph["stopped"] = self.run()
        self.call("StopInstances", {"InstanceId": [self.ph["stopped"]]})
        self._wait(self.ph["stopped"], "Stopped")

    def setup_prepaid_stopping(self) -> None:
        self.setup_prepaid()
        self.ecs.set_timing(release_seconds=120)  # Stopping for two minutes (reset_state puts it back)
        self.call("StopInstances", {"InstanceId": [self.ph["prepaid"]]})

    def setup_instance_20_tags(self) -> None:
        self.ph["instance"] = self.run(Tag=[{"Key": f"k{i}", "Value": "v"} for i in range(20)])

    def setup_token_used(self) -> None:
        self.ph["token"] = "probe-token-" + self.ph["unique"]
        base = {k: v.format(**self.ph) for k, v in BASES["RunInstances"].items() if k != "DryRun"}
        status, body, _ = send(self.ecs, "RunInstances", {**base, "ClientToken": self.ph["token"]})
        assert status == 200, body

    def setup_converted(self) -> None:
        self.setup_prepaid()
        self.ph["token"] = "probe-charge-" + self.ph["unique"]
        base = {k: v.format(**self.ph) for k, v in BASES["ModifyInstanceChargeType"].items()}
        status, body, _ = send(self.ecs, "ModifyInstanceChargeType", {**base, "ClientToken": self.ph["token"]})
        assert status == 200, body

    def _token_used(self, action: str) -> None:
        """``action`` (a create) sent once with its base request and a ClientToken (``{token}``)."""
        self.ph["token"] = f"probe-{action.lower()}-" + self.ph["unique"]
        base = {k: v.format(**self.ph) for k, v in BASES[action].items()}
        status, body, _ = send(self.ecs, action, {**base, "ClientToken": self.ph["token"]})
        assert status == 200, body

    def setup_sg_token_used(self) -> None:
        self._token_used("CreateSecurityGroup")

    def setup_ds_token_used(self) -> None:
        self._token_used("CreateDeploymentSet")

    def setup_stock_0(self) -> None:
        self.ecs.set_stock(ZONE, ERI_TYPE, 0)

    def setup_stock_1(self) -> None:
        self.ecs.set_stock(ZONE, ERI_TYPE, 1)

    def setup_quota_0(self) -> None:
        self.ecs.set_quota(0)

    def setup_sg_other_vpc(self) -> None:
        made = self.call("CreateSecurityGroup", {"VpcId": OTHER_VPC_ID, "SecurityGroupName": "other-vpc"})
        self.ph["sg_other_vpc"] = str(made["SecurityGroupId"])

    def setup_sg_used(self) -> None:
        self.setup_instance()
        self.ph["sg_used"] = self.ph["sg"]

    def setup_sg_referenced(self) -> None:
        made = self.call("CreateSecurityGroup", {"VpcId": VPC_ID, "SecurityGroupName": "referenced"})
        self.ph["sg_ref"] = str(made["SecurityGroupId"])
        self.call("AuthorizeSecurityGroup", {"SecurityGroupId": self.ph["sg"], "Permissions": [
            {"IpProtocol": "ALL", "PortRange": "-1/-1", "SourceGroupId": self.ph["sg_ref"]}]})

    def setup_rule_exists(self) -> None:
        self.call("AuthorizeSecurityGroup", {"SecurityGroupId": self.ph["sg"], "Permissions": [
            {"IpProtocol": "TCP", "PortRange": "22/22", "SourceCidrIp": "10.0.0.0/8"}]})

    def setup_ds_used(self) -> None:
        made = self.call("CreateDeploymentSet", {"DeploymentSetName": "used", "Strategy": "LowLatency"})
        self.ph["ds"] = str(made["DeploymentSetId"])
        self.run(DeploymentSetId=self.ph["ds"])

    def setup_keypair(self) -> None:
        self.ph["kp"] = "probe-kp-" + self.ph["unique"]
        self.call("ImportKeyPair", {"KeyPairName": self.ph["kp"], "PublicKeyBody": PUBLIC_KEY})


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return f"i-mf0unset{key}"


def probe_request(rule: reference.Rule, ph: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(action, parameters) of ``rule``'s probe: its operation's base request with ``set``/``unset``/``repeat``."""
    probe = dict(rule.probe or {})
    action = str(probe.get("op") or rule.op)
    params = dict(BASES.get(str(probe.get("base") or action), {}))
    params.update({str(k): str(v) for k, v in (probe.get("set") or {}).items()})
    for key in probe.get("unset") or []:
        params.pop(str(key), None)
    for template, (count, value) in (probe.get("repeat") or {}).items():
        for n in range(1, int(count) + 1):
            params[str(template).format(n=n)] = str(value).format(n=n)
    return action, {k: v.format_map(_Blank(ph)) for k, v in params.items()}


@pytest.fixture(scope="module")
def ecs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AlibabaEmulator]:
    with running_emulator(lambda log: AlibabaEmulator.start(log_path=log), tmp_path_factory, "alibaba-reference",
                          ALIBABA_ENV, ("ALIBABA_CLOUD_SECURITY_TOKEN", "ALIBABA_CLOUD_ECS_ENDPOINT")) as emulator:
        emulator.record_answers()
        yield emulator


DATA_PROBES = sorted(r.id for r in REF.rules.values() if not (r.probe or {}).get("test"))


@pytest.mark.parametrize("rule_id", DATA_PROBES)
def test_the_emulator_keeps_the_rule(ecs: AlibabaEmulator, rule_id: str) -> None:
    rule = REF.rules[rule_id]
    probe = dict(rule.probe or {})
    world = World(ecs)
    world.fresh()
    world.setup(probe.get("setup"))
    action, params = probe_request(rule, world.ph)
    ecs.reset_faults()  # clears the request log: the probe's own entry is the last for its action
    status, body, ctype = send(ecs, action, params, wire=str(probe.get("wire", "v3")), sign=probe.get("sign"),
                               unset=tuple(str(u) for u in probe.get("unset") or ()))
    if rule.kind == "refuse":
        assert isinstance(body, dict), body
        assert (status, body.get("Code")) == (rule.status, rule.code), body
        assert set(body) == {"RequestId", "HostId", "Code", "Message", "Recommend"}
    else:
        assert status == 200, body
        if rule.id == "rpc-format-xml":
            assert "xml" in ctype and str(body).startswith("<?xml") and "<DescribeInstancesResponse>" in str(body)
    entries = ecs.requests(action if action in REF.operations else None)
    assert entries, f"no request logged for {action}"
    assert rule_id in entries[-1].get("rules", []), (rule_id, entries[-1])


def test_every_rule_has_a_probe_this_module_runs() -> None:
    for rule in REF.rules.values():
        target = (rule.probe or {}).get("test")
        if target:
            path, _, func = str(target).partition("::")
            assert path.endswith(".py") and func, rule.id
        else:
            assert rule.id in DATA_PROBES
        for key in (rule.probe or {}):
            assert key in {"op", "base", "set", "unset", "repeat", "setup", "wire", "sign", "test"}, (rule.id, key)
        setup = (rule.probe or {}).get("setup")
        assert setup is None or hasattr(World, "setup_" + str(setup).replace("-", "_")), (rule.id, setup)


def test_the_rpc_signature_is_the_references_worked_example() -> None:
    """The reference's DescribeRegions example: AccessKeyId testid, AccessKeySecret testsecret."""
    params = {"Timestamp": "2016-02-23T12:46:24Z", "Format": "XML", "AccessKeyId": "testid",
              "Action": "DescribeRegions", "SignatureMethod": "HMAC-SHA1", "Version": "2014-05-26",
              "SignatureNonce": "3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf", "SignatureVersion": "1.0"}
    assert rpc_string_to_sign("GET", params) == (
        "GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeRegions%26Format%3DXML%26SignatureMethod%3DHMAC-SHA1"
        "%26SignatureNonce%3D3ee8c1b8-83d3-44af-a94f-4e0ad82fd6cf%26SignatureVersion%3D1.0"
        "%26Timestamp%3D2016-02-23T12%253A46%253A24Z%26Version%3D2014-05-26")
    assert rpc_signature("testsecret", "GET", params) == "OLeaidS1JvxuMvnyHOwuJ+uX5qY="


# -- the driver's requests and the emulator's answers --------------------------------------------------------
def _spec(cluster: str, **overrides: Any) -> dict[str, Any]:
    return cluster_spec_data("alibaba", cluster, zone=ZONE, **{
        "offering": ERI_TYPE, "storage": {"kms_key_id": KMS_KEY, "data": [DATA_DISK]}, "tags": TEAM_TAGS, **overrides})


def driver_flows(ecs: AlibabaEmulator) -> None:
    """What the driver does in use, each flow as a user would run it."""
    driver = AlibabaDriver(region=REGION, endpoint=ecs.url, poll=0.02)
    driver.offerings()
    driver._call("ImportKeyPair", {"RegionId": REGION, "KeyPairName": "flows-key", "PublicKeyBody": PUBLIC_KEY})
    # an ERI cluster: data disk, tags, key pair, a LowLatency deployment set, SSH rules (IPv4 and IPv6), user data
    eri = parse_spec(_spec("flows-eri", count=2, ssh={"key_pair": "flows-key"},
                           placement={"strategy": "cluster", "group_name": "flows-ds"},
                           network={"subnet_id": default_vswitch_id(ZONE),
                                    "ssh_ingress_cidrs": ["10.0.0.0/16", "2001:db8::/32"]}))
    first, second = node_specs_for(driver, eri)
    nodes = [driver.order(replace(first, user_data="#cloud-config\n")), driver.order(second)]
    driver.wait([n.id for n in nodes], timeout=60)
    driver.set_tags(nodes[0].id, {"metalfleet:acceptance": "passed"})
    driver.host_keys(nodes[0].id)
    # SSH sources changed: the old rules are revoked
    changed = parse_spec(_spec("flows-eri", count=2, ssh={"key_pair": "flows-key"},
                               placement={"strategy": "cluster", "group_name": "flows-ds"},
                               network={"subnet_id": default_vswitch_id(ZONE), "ssh_ingress_cidrs": ["10.1.0.0/16"]}))
    fresh = AlibabaDriver(region=REGION, endpoint=ecs.url, poll=0.02)
    fresh.prepare_cluster(node_specs_for(fresh, changed)[0])
    release_cluster(driver, "flows-eri", policy=FAST)
    # spot, without ERI, in the user's two security groups
    groups = [str(ecs_call(ecs, "CreateSecurityGroup", {"VpcId": VPC_ID, "SecurityGroupName": f"own-{i}"})
                  ["SecurityGroupId"]) for i in range(2)]
    spot = parse_spec(_spec("flows-spot", offering="ecs.ebmgn7e.32xlarge", capacity={"billing": "spot"},
                            network={"subnet_id": default_vswitch_id(ZONE), "security_group_ids": groups}))
    order_cluster(driver, node_specs_for(driver, spot), policy=FAST, timeout=60)
    release_cluster(driver, "flows-spot", policy=FAST)
    # on demand without ERI, public bandwidth, in a partition deployment set: the top-level vSwitch and group
    plain = parse_spec(_spec("flows-plain", offering="ecs.ebmgn7.26xlarge", network={
        "subnet_id": default_vswitch_id(ZONE), "public_ip": True},
        placement={"strategy": "partition", "partition_count": 3, "group_name": "flows-part"}))
    order_cluster(driver, node_specs_for(driver, plain), policy=FAST, timeout=60)
    release_cluster(driver, "flows-plain", policy=FAST)
    # a cluster of more than a page (made with the SDK): the driver reads it page by page (NextToken)
    many = [{"Key": "metalfleet:cluster", "Value": "flows-many"}]
    made: list[str] = []
    ecs.set_stock(ZONE, "ecs.g7.large", 200)
    for amount in (100, 1):
        made += ecs_call(ecs, "RunInstances", {
            "ZoneId": ZONE, "InstanceType": "ecs.g7.large", "ImageId": IMAGE, "Amount": amount,
            "VSwitchId": default_vswitch_id(ZONE), "SecurityGroupId": groups[0], "Tag": many})[
            "InstanceIdSets"]["InstanceIdSet"]
    assert len(driver.list_nodes("flows-many")) == 101
    for start in (0, 100):
        ecs_call(ecs, "DeleteInstances", {"InstanceId": made[start:start + 100], "Force": True})
    for i in range(101):  # more than a page of the cluster's groups: the driver pages DescribeSecurityGroups
        ecs_call(ecs, "CreateSecurityGroup", {"VpcId": VPC_ID, "SecurityGroupName": f"own-page-{i}", "Tag": [
            {"Key": "metalfleet:cluster", "Value": "flows-groups"}]})
    assert len(driver.cluster_resources("flows-groups")) == 101
    # ERIs in two groups: the Primary interface takes SecurityGroupIds.N
    two = parse_spec(_spec("flows-eri2", network={"subnet_id": default_vswitch_id(ZONE), "security_group_ids": groups}))
    order_cluster(driver, node_specs_for(driver, two), policy=FAST, timeout=60)
    release_cluster(driver, "flows-eri2", policy=FAST)
    # monthly: refused without the opt-in, converted and released with it; an expired one released as it is
    monthly = parse_spec(_spec("flows-monthly", count=2, capacity={"billing": "monthly"}))
    subs = order_cluster(driver, node_specs_for(driver, monthly), policy=FAST, timeout=60)
    assert [s.node_id for s in driver.subscriptions([n.id for n in subs])] == [n.id for n in subs]
    with pytest.raises(SubscriptionError):
        driver.release(subs[0].id)
    ecs.expire(subs[1].id)
    driver.release(subs[1].id, timeout=30)
    driver.release(subs[0].id, timeout=30, unsubscribe=True)
    assert driver.list_nodes("flows-monthly") == []
    driver.release_cluster_resources("flows-monthly")
    AlibabaPriceList(endpoint=ecs.url).prices(REGION, [ERI_TYPE])


@pytest.fixture(scope="module")
def flows(ecs: AlibabaEmulator) -> list[dict[str, Any]]:
    ecs.reset_state()
    ecs.reset_faults()
    driver_flows(ecs)
    return ecs.requests()


def test_the_driver_sends_only_what_the_reference_allows(flows: list[dict[str, Any]]) -> None:
    sent: dict[str, set[str]] = {}
    for entry in flows:
        if entry["action"] in ("CreateSecurityGroup", "RunInstances", "DeleteInstances") and (
                entry["params"].get("SecurityGroupName", "").startswith("own-")
                or entry["params"].get("InstanceType") == "ecs.g7.large"
                or len([k for k in entry["params"] if k.startswith("InstanceId.")]) > 1):
            continue  # what the test made itself with the SDK (its own groups, the large cluster)
        sent.setdefault(entry["action"], set()).update(reference.flat_name(p) for p in entry["params"])
    unknown = {op: sorted(ps - set(REF.sent(op))) for op, ps in sent.items() if ps - set(REF.sent(op))}
    assert unknown == {}, f"sent but not in the table's sends: {unknown}"
    missing_ops = sorted(set(sent) - set(REF.operations))
    assert missing_ops == [], missing_ops
    # the emulator sells five types: DescribeInstanceTypes never has a second page to ask for
    past_a_page = {"DescribeInstanceTypes": {"NextToken"}}
    unused = {op: sorted(set(o.sends) - sent.get(op, set()) - past_a_page.get(op, set()))
              for op, o in REF.operations.items() if set(o.sends) - sent.get(op, set()) - past_a_page.get(op, set())}
    assert unused == {}, f"in the table's sends but no flow sent it: {unused}"
    # the ERI order: the vSwitch and groups in the Primary interface only
    runs = [e["params"] for e in flows if e["action"] == "RunInstances" and "NetworkInterface.1.InstanceType" in
            e["params"]]
    assert runs and all("VSwitchId" not in p and "SecurityGroupId" not in p and not any(
        k.startswith("SecurityGroupIds.") for k in p) for p in runs)
    converted = [e["params"] for e in flows if e["action"] == "ModifyInstanceChargeType"]
    assert converted and all(p["InstanceChargeType"] == "PostPaid" and p["AutoPay"].lower() == "true"
                             for p in converted)
    terminate = [e["params"] for e in flows if e["action"] == "DeleteInstances" and "TerminateSubscription" in
                 e["params"]]
    assert len(terminate) == 1 and terminate[0]["TerminateSubscription"].lower() == "true"
    assert all(e["status"] == 200 for e in flows if e["action"] not in ("DeleteSecurityGroup",
                                                                         "DeleteDeploymentSet")), [
        (e["action"], e["status"]) for e in flows if e["status"] != 200]


_JSON = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "Dict[str, Any]": "object",
         "Any": "object"}


def model_fields(cls: Any, prefix: str = "") -> dict[str, str]:
    """The SDK response model's fields, as ``{dotted.path: JSON type}`` (list items as ``path[]``)."""
    from alibabacloud_ecs20140526 import models

    src = inspect.getsource(cls)
    wire = {a: w for w, a in re.findall(r"result\['(\w+)'\] = self\.(\w+)", src)}
    wire.update({a: w for w, a in re.findall(r"result\['(\w+)'\] = \[\]\s*\n\s*if self\.(\w+) is not None", src)})
    out: dict[str, str] = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self":
            continue
        ann, key = str(p.annotation), prefix + wire.get(name, name)
        if m := re.fullmatch(r"List\[main_models\.(\w+)\]", ann):
            out[key] = "array"
            out.update(model_fields(getattr(models, m.group(1)), key + "[]."))
        elif m := re.fullmatch(r"main_models\.(\w+)", ann):
            out[key] = "object"
            out.update(model_fields(getattr(models, m.group(1)), key + "."))
        elif m := re.fullmatch(r"List\[(\w+)\]", ann):
            out[key], out[key + "[]"] = "array", _JSON.get(m.group(1), m.group(1))
        else:
            out[key] = _JSON.get(ann, ann)
    return out


def answered(doc: Any, prefix: str = "") -> dict[str, str]:
    """Every field of a JSON answer as ``{dotted.path: JSON type}`` (items of a list of scalars as ``path[]``)."""
    out: dict[str, str] = {}
    for key, value in doc.items():
        path = prefix + key
        if isinstance(value, dict):
            out[path] = "object"
            out.update(answered(value, path + "."))
        elif isinstance(value, list):
            out[path] = "array"
            for item in value:
                if isinstance(item, dict):
                    out.update(answered(item, path + "[]."))
                else:
                    out[path + "[]"] = _type(item)
        else:
            out[path] = _type(value)
    return out


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object" if value is None else type(value).__name__


def _model(op: reference.Operation) -> Any:
    from alibabacloud_ecs20140526 import models

    assert op.answers_model and op.answers_model.startswith("alibabacloud_ecs20140526.models."), op.name
    return getattr(models, op.answers_model.rsplit(".", 1)[1])


def _answers(entries: list[dict[str, Any]]) -> dict[str, dict[str, set[str]]]:
    seen: dict[str, dict[str, set[str]]] = {}
    for entry in entries:
        if entry.get("status") == 200 and isinstance(entry.get("answer"), dict):
            for path, kind in answered(entry["answer"]).items():
                seen.setdefault(entry["action"], {}).setdefault(path, set()).add(kind)
    return seen


def test_every_answered_field_is_in_the_table_with_its_type(ecs: AlibabaEmulator,
                                                            flows: list[dict[str, Any]]) -> None:
    # besides the driver's flows, what the tests and demos call: stop and start, the key pairs, the vSwitches
    world = World(ecs)
    world.fresh()
    world.setup_stopped()
    ecs.reset_faults()
    world.call("StartInstances", {"InstanceId": [world.ph["stopped"]]})
    world._wait(world.ph["stopped"], "Running")
    world.call("DescribeKeyPairs", {})
    world.call("DescribeInstances", {"PageNumber": 1, "PageSize": 10})
    world.call("DescribeVSwitches", {})
    world.call("ModifyInstanceChargeType", {"InstanceIds": json.dumps([world.ph["stopped"]]),
                                            "InstanceChargeType": "PrePaid", "Period": 1})
    world.call("StopInstances", {"InstanceId": [world.ph["stopped"]]})
    problems = []
    for action, fields in sorted(_answers([*flows, *ecs.requests()]).items()):
        op = REF.operations.get(action)
        assert op is not None, f"{action} answered but not in the table"
        for path, kinds in sorted(fields.items()):
            if path not in op.answers:
                problems.append(f"{action}: answered {path} ({'/'.join(sorted(kinds))}) is not in answers")
            elif kinds != {op.answers[path]}:
                problems.append(f"{action}: {path} answered as {sorted(kinds)}, the table says {op.answers[path]}")
    assert problems == []


@pytest.mark.parametrize("action", sorted(o for o in REF.operations if REF.operations[o].answers))
def test_the_answers_follow_the_sdk_response_model(action: str) -> None:
    op = REF.operations[action]
    fields = model_fields(_model(op))
    wrong = {p: (t, fields.get(p)) for p, t in op.answers.items() if fields.get(p) != t}
    assert wrong == {}, f"{action}: the table's answers the SDK model {op.answers_model} types otherwise: {wrong}"


def test_a_release_re_run_after_a_kill_finishes_the_job(ecs: AlibabaEmulator) -> None:
    """kill -9 after the conversion or after DeleteInstances: the re-run finds it converted or releasing and ends."""
    driver = AlibabaDriver(region=REGION, endpoint=ecs.url, poll=0.02)
    spec = parse_spec(_spec("flows-rerun", count=2, capacity={"billing": "monthly"}))
    ecs.set_timing(release_seconds=2.0)
    try:
        a, b = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=60)
        # a: killed after its conversion; b: killed after its DeleteInstances (still Stopping, still listed)
        for node in (a, b):
            ecs_call(ecs, "ModifyInstanceChargeType", {"InstanceIds": json.dumps([node.id]),
                                                       "InstanceChargeType": "PostPaid"})
        ecs_call(ecs, "DeleteInstances", {"InstanceId": [b.id], "Force": True})
        again = AlibabaDriver(region=REGION, endpoint=ecs.url, poll=0.02)
        assert again.subscriptions([a.id, b.id]) == []  # pay-as-you-go now: nothing to refuse or convert
        ecs.reset_faults()
        again.release(a.id, timeout=30)
        again.release(b.id, timeout=30, unsubscribe=True)
        assert {again.get(a.id).state, again.get(b.id).state} == {NodeState.TERMINATED}
        assert ecs.calls("ModifyInstanceChargeType") == 0  # converted once, by the first run
        again.release(b.id, unsubscribe=True)  # gone: a no-op
    finally:
        ecs.set_timing(release_seconds=0.2)

