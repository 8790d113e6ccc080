"""The EC2 emulator keeps every rule of tests/support/reference/ec2.yaml, and the AWS driver sends only what it lists.

* every data-driven probe of the table runs against the session emulator as a raw SigV4 query call (so no SDK-side
  check stands between the probe and the emulator): a refusal answers the rule's code and status, an accept or
  behave rule succeeds (and its ``check`` looks at what the call did), and in every case the request's log entry
  names the rule (``GET /_metalfleet/requests``: ``rules``);
* the driver's real flows (EFA interfaces on every network card, a placement group, a capacity reservation, a
  Capacity Block, tags, release) send, operation by operation, exactly the parameters ``sends`` lists;
* what the extensions answer themselves is in ``answers`` with its JSON type, and ``answers`` agrees with the
  botocore output shapes; every sentence the table quotes from the botocore model is in the model.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from metalfleet.providers import InvalidSpecError, node_specs_for, order_cluster, parse_spec
from metalfleet.providers.aws import AwsDriver
from metalfleet.testing import reference
from metalfleet.testing.ec2 import Ec2Emulator, default_subnet_id
from tests.aws.ec2_wire import answered, error_code, model, model_docs, model_type, signed_call

from .conftest import FAST, IMAGE, KMS_KEY, REGION, ZONE, Specs

REF = reference.load("ec2")
ZONE_B = "us-east-1b"


# ---------------------------------------------------------------------------------------------------------------
# Probes: a base request per operation, placeholders, setups that make what a probe needs, checks of what it did.
# ---------------------------------------------------------------------------------------------------------------
def nics(subnet: str, cards: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in range(cards):
        n = f"NetworkInterface.{c + 1}"
        out.update({f"{n}.NetworkCardIndex": str(c), f"{n}.DeviceIndex": "0" if c == 0 else "1",
                    f"{n}.InterfaceType": "efa", f"{n}.SubnetId": subnet, f"{n}.DeleteOnTermination": "true"})
    return out


def launch_params(itype: str, subnet: str, cards: int) -> dict[str, str]:
    return {"ImageId": IMAGE, "InstanceType": itype, "MinCount": "1", "MaxCount": "1", **nics(subnet, cards)}


BASES: dict[str, Callable[[dict[str, str]], dict[str, str]]] = {
    "efa": lambda v: launch_params("p4de.24xlarge", v["subnet"], 4),
    "efa_p5": lambda v: launch_params("p5.48xlarge", v["subnet"], 2),
    "placement_group": lambda v: {"GroupName": f"pg-{v['uid']}", "Strategy": "cluster"},
    "capacity_reservation": lambda v: {"InstanceType": "p4de.24xlarge", "InstancePlatform": "Linux/UNIX",
                                       "InstanceCount": "1", "AvailabilityZone": ZONE},
    "block_offerings": lambda v: {"InstanceType": "p5.48xlarge", "InstanceCount": "1", "CapacityDurationHours": "24"},
}


class Probe:
    """One probe's world: the emulator, placeholder values, and calls that must succeed."""

    def __init__(self, emulator: Ec2Emulator, subnet: str) -> None:
        self.emulator = emulator
        uid = uuid.uuid4().hex[:10]
        self.values: dict[str, str] = {"uid": uid, "subnet": subnet, "subnet_b": default_subnet_id(ZONE_B),
                                       "long_name": "p" * 256, "long_token": "t" * 65}
        self.extra_set: dict[str, str] = {}

    def call(self, action: str, params: dict[str, str]) -> str:
        status, body = signed_call(self.emulator.url, action, params)
        assert status == 200, f"setup {action} {params}: {status} {body}"
        return body

    def launch(self, itype: str = "p4de.24xlarge", cards: int = 1, subnet: str | None = None,
               **extra: str) -> str:
        body = self.call("RunInstances", {**launch_params(itype, subnet or self.values["subnet"], cards), **extra})
        return first(body, "instanceId")

    def instance(self, instance_id: str) -> dict[str, Any]:
        import boto3

        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=self.emulator.url)
        found: dict[str, Any] = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
        return found

    def reservation(self, cr_id: str) -> dict[str, Any]:
        body = self.call("DescribeCapacityReservations", {"CapacityReservationId.1": cr_id})
        return {k: first(body, k) for k in ("state", "availableInstanceCount", "startDate")}

    def block(self, itype: str = "p5.48xlarge", count: int = 1) -> tuple[str, str]:
        body = self.call("DescribeCapacityBlockOfferings", {"InstanceType": itype, "InstanceCount": str(count),
                                                            "CapacityDurationHours": "24"})
        bought = self.call("PurchaseCapacityBlock", {"CapacityBlockOfferingId": first(body, "capacityBlockOfferingId"),
                                                     "InstancePlatform": "Linux/UNIX"})
        return first(bought, "capacityReservationId"), first(bought, "startDate")

    def start_block(self, created_and_start: tuple[str, str]) -> str:
        from datetime import datetime

        cr_id, start = created_and_start
        wait = (datetime.fromisoformat(start.replace("Z", "+00:00")) - datetime.now().astimezone()).total_seconds()
        self.emulator.advance_clock(wait + 5)
        return cr_id

    def reservation_for(self, itype: str, count: int) -> str:
        body = self.call("CreateCapacityReservation", {"InstanceType": itype, "InstancePlatform": "Linux/UNIX",
                                                       "InstanceCount": str(count), "AvailabilityZone": ZONE,
                                                       "InstanceMatchCriteria": "targeted"})
        return first(body, "capacityReservationId")

    def group(self, name: str) -> str:
        import boto3

        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=self.emulator.url)
        vpc = ec2.describe_subnets(SubnetIds=[self.values["subnet"]])["Subnets"][0]["VpcId"]
        gid: str = ec2.create_security_group(GroupName=f"{name}-{self.values['uid']}", Description="probe",
                                             VpcId=vpc)["GroupId"]
        return gid


def state_of(body: str) -> str:
    """The instance state an XML answer gives its (first) instance."""
    m = re.search(r"<instanceState>\s*<code>\d+</code>\s*<name>([\w-]+)</name>", body)
    assert m, f"no instance state in {body[:2000]}"
    return m.group(1)


def first(body: str, tag: str) -> str:
    m = re.search(rf"<{tag}>([^<]*)</{tag}>", body)
    assert m, f"no <{tag}> in {body[:2000]}"
    return m.group(1)


def _pg(p: Probe, strategy: str = "cluster", **extra: str) -> dict[str, str]:
    name = f"pg-{p.values['uid']}"
    p.call("CreatePlacementGroup", {"GroupName": name, "Strategy": strategy, **extra})
    return {"pg": name}


def _pg_with_instance(p: Probe) -> dict[str, str]:
    made = _pg(p)
    p.launch(**{"Placement.GroupName": made["pg"]})
    return made


def _pg_spread_full(p: Probe) -> dict[str, str]:
    made = _pg(p, "spread")
    for _ in range(7):
        p.launch(**{"Placement.GroupName": made["pg"]})
    return made


def _token_used(p: Probe) -> dict[str, str]:
    token = f"tok-{p.values['uid']}"
    body = p.call("RunInstances", {**BASES["efa"](p.values), "ClientToken": token})
    return {"token": token, "instance": first(body, "instanceId")}


def _token_terminated(p: Probe) -> dict[str, str]:
    made = _token_used(p)
    p.call("TerminateInstances", {"InstanceId.1": made["instance"]})
    return made


def _crowded_card(p: Probe) -> dict[str, str]:  # 16 interfaces on card 0 (a p4de card takes 15)
    p.extra_set = {k: v for d in range(16) for k, v in {
        f"NetworkInterface.{d + 1}.NetworkCardIndex": "0", f"NetworkInterface.{d + 1}.DeviceIndex": str(d),
        f"NetworkInterface.{d + 1}.SubnetId": p.values["subnet"]}.items()}
    return {}


def _cr_cancelled(p: Probe) -> dict[str, str]:
    cr = p.reservation_for("p4de.24xlarge", 1)
    p.call("CancelCapacityReservation", {"CapacityReservationId": cr})
    return {"cr": cr}


def _cr_full(p: Probe) -> dict[str, str]:
    cr = p.reservation_for("p4de.24xlarge", 1)
    p.launch(**{"CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId": cr})
    return {"cr": cr}


def _block_ending(p: Probe) -> dict[str, str]:
    cr = p.start_block(p.block())
    iid = p.launch("p5.48xlarge", **{"CapacityReservationSpecification.CapacityReservationTarget."
                                     "CapacityReservationId": cr, "InstanceMarketOptions.MarketType": "capacity-block"})
    p.emulator.advance_clock(timedelta(hours=23, minutes=31).total_seconds())  # 29 minutes before its end
    return {"instance": iid}


def _instance_terminated(p: Probe) -> dict[str, str]:
    iid = p.launch()
    p.call("TerminateInstances", {"InstanceId.1": iid})
    return {"instance": iid}


def _group_in_use(p: Probe) -> dict[str, str]:
    gid = p.group("used")
    p.launch(**{"NetworkInterface.1.SecurityGroupId.1": gid})
    return {"group": gid}


def _group_referenced(p: Probe) -> dict[str, str]:
    gid, referrer = p.group("referenced"), p.group("referrer")
    p.call("AuthorizeSecurityGroupIngress", {"GroupId": referrer, "IpPermissions.1.IpProtocol": "-1",
                                             "IpPermissions.1.Groups.1.GroupId": gid})
    return {"group": gid}


def _default_group(p: Probe) -> dict[str, str]:
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=p.emulator.url)
    vpc = ec2.describe_subnets(SubnetIds=[p.values["subnet"]])["Subnets"][0]["VpcId"]
    [default] = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]},
                                                      {"Name": "group-name", "Values": ["default"]}])["SecurityGroups"]
    return {"group": str(default["GroupId"])}


def _block_offering(p: Probe) -> dict[str, str]:
    body = p.call("DescribeCapacityBlockOfferings", BASES["block_offerings"](p.values))
    return {"offering": first(body, "capacityBlockOfferingId")}


SETUPS: dict[str, Callable[[Probe], dict[str, str]]] = {
    "pg_cluster": _pg,
    "pg_with_instance": _pg_with_instance,
    "pg_spread_full": _pg_spread_full,
    "pg_partition_3": lambda p: _pg(p, "partition", PartitionCount="3"),
    "token_used": _token_used,
    "token_terminated": _token_terminated,
    "crowded_card": _crowded_card,
    "security_group": lambda p: {"group": p.group("top-level")},
    "cr_cancelled": _cr_cancelled,
    "cr_full": _cr_full,
    "cr_p4de": lambda p: {"cr": p.reservation_for("p4de.24xlarge", 1)},
    "cr_p5": lambda p: {"cr": p.reservation_for("p5.48xlarge", 1)},
    "block_scheduled": lambda p: {"cr": p.block()[0]},
    "block_active": lambda p: {"cr": p.start_block(p.block())},
    "block_ending": _block_ending,
    "block_offering": _block_offering,
    "instance_terminated": _instance_terminated,
    "group_in_use": _group_in_use,
    "group_referenced": _group_referenced,
    "default_group": _default_group,
}


def _check_nic_layout(p: Probe, body: str) -> None:
    inst = p.instance(first(body, "instanceId"))
    assert sorted((n["Attachment"]["NetworkCardIndex"], n["Attachment"]["DeviceIndex"], n["InterfaceType"])
                  for n in inst["NetworkInterfaces"]) == [(0, 0, "efa"), (1, 1, "efa"), (2, 1, "efa"), (3, 1, "efa")]


def _check_same_instance(p: Probe, body: str) -> None:
    assert first(body, "instanceId") == p.values["instance"]
    assert p.emulator.calls("RunInstances") == 2, "the replay bought nothing"


def _check_lifecycle(p: Probe, body: str) -> None:
    inst = p.instance(first(body, "instanceId"))
    assert inst["InstanceLifecycle"] == "capacity-block"
    assert inst["CapacityReservationId"] == p.values["cr"]


def _check_reservation_consumed(p: Probe, body: str) -> None:
    inst = p.instance(first(body, "instanceId"))
    assert inst["CapacityReservationId"] == p.values["cr"]
    assert inst["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == \
        p.values["cr"]
    assert p.reservation(p.values["cr"])["availableInstanceCount"] == "0"
    p.call("TerminateInstances", {"InstanceId.1": inst["InstanceId"]})
    assert p.reservation(p.values["cr"])["availableInstanceCount"] == "1"


def _check_block_scheduled(p: Probe, body: str) -> None:
    assert (first(body, "state"), first(body, "availableInstanceCount")) == ("scheduled", "0")
    assert first(body, "startDate")[11:16] == "11:30" and first(body, "endDate")[11:16] == "11:30"


def _check_kms(p: Probe, body: str) -> None:
    assert state_of(body) == "pending", "EC2 takes the launch ..."
    inst = p.instance(first(body, "instanceId"))
    assert inst["State"]["Name"] == "terminated", "... and terminates it at once"
    assert inst["StateReason"]["Code"] == "Client.InvalidKMSKey.InvalidState"


CHECKS: dict[str, Callable[[Probe, str], None]] = {
    "group_named_by_id": lambda p, body: (first(body, "groupName") == first(body, "groupId")) or pytest.fail(body),
    "same_instance_nothing_bought": _check_same_instance,
    "another_instance": lambda p, body: (first(body, "instanceId") != p.values["instance"]) or pytest.fail(body),
    "nic_layout": _check_nic_layout,
    "no_public_ip": lambda p, body: ("PublicIpAddress" not in p.instance(first(body, "instanceId"))
                                     or pytest.fail("a public IPv4 address")),
    "in_placement_group": lambda p, body: (p.instance(first(body, "instanceId"))["Placement"]["GroupName"]
                                           == p.values["pg"]) or pytest.fail("not in its group"),
    "reservation_consumed": _check_reservation_consumed,
    "preference_open": lambda p, body: (p.instance(first(body, "instanceId"))["CapacityReservationSpecification"]
                                        ["CapacityReservationPreference"] == "open") or pytest.fail("not open"),
    "lifecycle_capacity_block": _check_lifecycle,
    "reservation_cancelled": lambda p, body: (p.reservation(p.values["cr"])["state"] == "cancelled"
                                              or pytest.fail("not cancelled")),
    "block_scheduled": _check_block_scheduled,
    "instance_terminated": lambda p, body: (p.instance(p.values["instance"])["State"]["Name"] == "terminated"
                                            or pytest.fail(body)),
    "terminated_for_kms": _check_kms,
}


def fill(template: Any, values: dict[str, str]) -> str:
    return str(template).format(**values)


def probe_params(probe: dict[str, Any], p: Probe) -> dict[str, str]:
    params = BASES[probe["base"]](p.values) if probe.get("base") else {}
    for pattern in probe.get("unset", []):
        regex = re.compile("^" + re.escape(pattern).replace(r"\*", ".*") + "$")
        params = {k: v for k, v in params.items() if not regex.match(k)}
    params.update({k: fill(v, p.values) for k, v in (probe.get("params") or {}).items()})
    params.update(p.extra_set)
    params.update({k: fill(v, p.values) for k, v in (probe.get("set") or {}).items()})
    return params


DATA_PROBES = sorted(r.id for r in REF.rules.values() if r.probe and "op" in r.probe)


def test_every_rule_has_a_probe_this_module_runs_or_a_test_that_exists() -> None:
    for rule in REF.rules.values():
        probe = rule.probe or {}
        assert "op" in probe or "test" in probe, f"rule {rule.id}: no probe"
        if "op" in probe:
            assert not probe.get("base") or probe["base"] in BASES, f"rule {rule.id}: unknown base {probe['base']}"
            assert not probe.get("setup") or probe["setup"] in SETUPS, f"rule {rule.id}: unknown setup"
            assert not probe.get("check") or probe["check"] in CHECKS, f"rule {rule.id}: unknown check"
            assert probe["op"] in REF.operations, f"rule {rule.id}: probes {probe['op']}, not in the table"


@pytest.mark.parametrize("rule_id", DATA_PROBES)
def test_probe(rule_id: str, emulator: Ec2Emulator, subnet: str) -> None:
    rule = REF.rule(rule_id)
    probe = dict(rule.probe or {})
    p = Probe(emulator, subnet)
    if probe.get("setup"):
        p.values.update(SETUPS[probe["setup"]](p))
    params = probe_params(probe, p)
    status, body = signed_call(emulator.url, probe["op"], params)
    if rule.kind == "refuse":
        assert (error_code(body), status) == (rule.code, rule.status), body
    else:
        assert status == 200, body
    [entry] = emulator.requests(probe["op"])[-1:]
    assert rule_id in entry.get("rules", []), f"{rule_id} did not decide the call (log: {entry.get('rules')})"
    if probe.get("check"):
        CHECKS[probe["check"]](p, body)


def test_refusal_messages_are_filled_from_the_call() -> None:
    """A refusal's message names what it is about (its placeholders are the emulator's own fields)."""
    for rule in REF.rules.values():
        if rule.kind == "refuse":
            assert rule.message, f"{rule.id}: no message"
            assert "{" not in re.sub(r"\{[a-z_]+\}", "", rule.message), f"{rule.id}: bad placeholder"


# ---------------------------------------------------------------------------------------------------------------
# The driver sends what the table lists, no more (and the table lists nothing the driver does not send).
# ---------------------------------------------------------------------------------------------------------------
def _flow_efa(driver: AwsDriver, emulator: Ec2Emulator, subnet: str, cluster: str) -> None:
    """EFA on every card of a p5, a cluster placement group, a targeted capacity reservation, a key pair, a public
    IP, SSH rules for IPv4 and IPv6; tags; release of the nodes and of what the cluster shared."""
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=emulator.url)
    ec2.create_key_pair(KeyName=f"{cluster}-key")
    cr = ec2.create_capacity_reservation(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX",
                                         AvailabilityZone=ZONE, InstanceCount=2,
                                         InstanceMatchCriteria="targeted")["CapacityReservation"]
    spec = parse_spec({
        "name": cluster, "provider": "aws", "region": REGION, "zone": ZONE, "offering": "p5.48xlarge", "count": 2,
        "image": IMAGE, "network": {"subnet_id": subnet, "ssh_ingress_cidrs": ["127.0.0.1/32", "::1/128"],
                                    "public_ip": True},
        "storage": {"kms_key_id": KMS_KEY, "data": [{"size_gib": 500}]}, "tags": {"team": "ml-infra"},
        "capacity": {"reservation_id": cr["CapacityReservationId"]}, "ssh": {"key_pair": f"{cluster}-key"}})
    emulator.reset_faults()  # the log from here on is the driver's
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=60)
    driver.set_tags(nodes[0].id, {"owner": "reference-test"})
    for node in nodes:
        driver.release(node.id)
    assert driver.release_cluster_resources(cluster)


def _flow_block(driver: AwsDriver, emulator: Ec2Emulator, subnet: str, cluster: str) -> list[dict[str, Any]]:
    """A Capacity Block ordered before it starts (refused, explained) and after; a partition placement group; user
    data; SSH rules changed by a stack update (revoked and authorized)."""
    import boto3

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=emulator.url)
    [offer] = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=1,
                                                    CapacityDurationHours=24)["CapacityBlockOfferings"]
    block = ec2.purchase_capacity_block(CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
                                        InstancePlatform="Linux/UNIX")["CapacityReservation"]
    data: dict[str, Any] = {
        "name": cluster, "provider": "aws", "region": REGION, "zone": ZONE, "offering": "p5.48xlarge", "count": 1,
        "image": IMAGE, "network": {"subnet_id": subnet, "ssh_ingress_cidrs": ["127.0.0.1/32", "::1/128"]},
        "placement": {"strategy": "partition", "partition_count": 2},
        "capacity": {"billing": "capacity_block", "capacity_block": True,
                     "reservation_id": block["CapacityReservationId"]}}
    emulator.reset_faults()
    [ns] = node_specs_for(driver, parse_spec(data))
    ns = dataclasses.replace(ns, user_data="#!/bin/sh\necho metalfleet\n")
    with pytest.raises(InvalidSpecError, match="scheduled"):
        driver.order(ns)
    log = emulator.requests()
    emulator.advance_clock((block["StartDate"] - block["CreateDate"]).total_seconds() + 1)
    node = driver.order(ns)
    driver.prepare_cluster(node_specs_for(driver, parse_spec({**data, "network": {
        "subnet_id": subnet, "ssh_ingress_cidrs": ["127.0.0.2/32", "::2/128"]}}))[0])
    log += emulator.requests()
    emulator.reset_faults()
    driver.release(node.id)
    driver.release_cluster_resources(cluster)
    return log + emulator.requests()


def test_the_driver_sends_exactly_what_the_table_lists(emulator: Ec2Emulator, subnet: str, cluster: str) -> None:
    driver = AwsDriver(region=REGION, endpoint_url=emulator.url, poll=0.02)
    _flow_efa(driver, emulator, subnet, cluster)
    log = emulator.requests()
    log += _flow_block(AwsDriver(region=REGION, endpoint_url=emulator.url, poll=0.02), emulator, subnet,
                       f"{cluster}-b")
    sent: dict[str, set[str]] = {}
    for entry in log:
        sent.setdefault(entry["action"], set()).update(
            reference.flat_name(k) for k in entry["params"] if k not in ("Action", "Version"))
    unlisted = {op: sorted(ps - set(REF.sent(op))) for op, ps in sent.items() if ps - set(REF.sent(op))}
    assert not unlisted, f"the driver sends parameters ec2.yaml does not cite: {unlisted}"
    assert set(sent) <= set(REF.operations), f"operations not in ec2.yaml: {sorted(set(sent) - set(REF.operations))}"
    stale = {op.name: sorted(set(op.sends) - sent.get(op.name, set())) for op in REF.operations.values()
             if set(op.sends) - sent.get(op.name, set())}
    assert not stale, f"ec2.yaml lists parameters the driver no longer sends: {stale}"
    # the ClientToken is the node's key, within EC2's "Maximum 64 ASCII characters"
    tokens = {e["params"]["ClientToken"] for e in log if e["action"] == "RunInstances"}
    assert tokens and all(len(t) <= 64 and t.isascii() for t in tokens)


def test_a_long_idempotency_key_becomes_a_client_token_ec2_takes(driver: AwsDriver, emulator: Ec2Emulator,
                                                                 specs: Specs) -> None:
    from metalfleet.providers.aws.request import client_token
    from metalfleet.providers.models import idempotency_key

    key = idempotency_key("c" * 40, 100, 10)
    assert len(key) == 65  # a 30-character prefix, node index 100, generation 10
    token = client_token(key)
    assert len(token) == 64 and token.isascii() and token.startswith(key[:39])
    assert client_token(idempotency_key("c" * 40, 100, 11)) != token
    assert client_token("mf-short-0-0-abc") == "mf-short-0-0-abc"
    [ns] = specs.node_specs(driver)
    ns = dataclasses.replace(ns, cluster="c" * 40, index=100, generation=10)
    node = driver.order(ns)
    params = next(r["params"] for r in emulator.requests("RunInstances") if r["status"] == 200)
    assert params["ClientToken"] == token
    assert node.extra["idempotency_key"] == key  # read back from the metalfleet:key tag, whole
    assert driver.order(ns).id == node.id  # a replay of the same token


# ---------------------------------------------------------------------------------------------------------------
# What the extensions answer themselves: in ``answers``, typed as the botocore output shapes type it.
# ---------------------------------------------------------------------------------------------------------------
ANSWERED_BY_EXTENSIONS = sorted(op.name for op in REF.operations.values() if op.answers)


def _extension_answers(emulator: Ec2Emulator, uid: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}

    def call(op: str, params: dict[str, str]) -> str:
        status, body = signed_call(emulator.url, op, params)
        assert status == 200, body
        for path, kind in answered(op, body).items():
            out.setdefault(op, {})[path] = kind
        return body

    tags = {"TagSpecification.1.ResourceType": "placement-group", "TagSpecification.1.Tag.1.Key": "k",
            "TagSpecification.1.Tag.1.Value": "v"}
    call("CreatePlacementGroup", {"GroupName": f"a-{uid}", "Strategy": "partition", "PartitionCount": "3", **tags})
    call("CreatePlacementGroup", {"GroupName": f"b-{uid}", "Strategy": "cluster"})
    call("DescribePlacementGroups", {})
    call("DeletePlacementGroup", {"GroupName": f"b-{uid}"})
    cr_tags = {"TagSpecifications.1.ResourceType": "capacity-reservation", "TagSpecifications.1.Tag.1.Key": "k",
               "TagSpecifications.1.Tag.1.Value": "v"}
    cr = first(call("CreateCapacityReservation", {"InstanceType": "p4de.24xlarge", "InstancePlatform": "Linux/UNIX",
                                                  "InstanceCount": "1", "AvailabilityZone": ZONE, **cr_tags}),
               "capacityReservationId")
    call("CreateCapacityReservation", {"InstanceType": "p4de.24xlarge", "InstancePlatform": "Linux/UNIX",
                                       "InstanceCount": "1", "AvailabilityZone": ZONE})
    offer = first(call("DescribeCapacityBlockOfferings", {"InstanceType": "p5.48xlarge", "InstanceCount": "2",
                                                          "CapacityDurationHours": "24"}), "capacityBlockOfferingId")
    call("PurchaseCapacityBlock", {"CapacityBlockOfferingId": offer, "InstancePlatform": "Linux/UNIX",
                                   **{k.replace("Specifications", "Specification"): v for k, v in cr_tags.items()}})
    call("DescribeCapacityReservations", {})
    call("CancelCapacityReservation", {"CapacityReservationId": cr})
    return out


def test_what_the_extensions_answer_is_in_the_table(emulator: Ec2Emulator) -> None:
    seen = _extension_answers(emulator, uuid.uuid4().hex[:8])
    for op, fields in seen.items():
        listed = REF.operations[op].answers
        unknown = sorted(p for p, t in fields.items() if t == "?")
        assert not unknown, f"{op} answers fields its botocore output shape does not have: {unknown}"
        missing = {p: t for p, t in fields.items() if listed.get(p) != t}
        assert not missing, f"{op} answers fields ec2.yaml does not list (or types otherwise): {missing}"
    # every operation whose answer an extension builds was called, GetConsoleOutput aside (simulated hosts only:
    # tests/aws/test_sim_hosts.py checks its answer)
    assert set(ANSWERED_BY_EXTENSIONS) - set(seen) == {"GetConsoleOutput"}


@pytest.mark.parametrize("op", ANSWERED_BY_EXTENSIONS)
def test_answers_agree_with_the_botocore_output_shape(op: str) -> None:
    listed = REF.operations[op]
    assert listed.answers_model and model()["operations"][op]["output"]["shape"] in listed.answers_model
    wrong = {p: (t, model_type(op, p)) for p, t in listed.answers.items() if model_type(op, p) != t}
    assert not wrong, f"{op}: answers whose type is not the model's (table, model): {wrong}"


def test_every_sentence_quoted_from_the_botocore_model_is_in_it() -> None:
    docs = model_docs()
    cites = [(f"{op.name} sends {p}", c) for op in REF.operations.values() for p, c in op.sends.items()]
    cites += [(r.id, c) for r in REF.rules.values() for c in (r.cite, r.code_cite) if c is not None]
    bad = []
    for where, c in cites:
        if c.source != "botocore":
            continue
        required = re.fullmatch(r'(\w+) "required": (\[.*\])', c.says)
        if required:
            ok = sorted(model()["shapes"][required.group(1)].get("required", [])) == sorted(
                json.loads(required.group(2)))
        else:
            ok = c.says in docs
        if not ok:
            bad.append(f"{where}: {c.says!r}")
    assert not bad, "quoted from the botocore model but not in it:\n" + "\n".join(bad)
