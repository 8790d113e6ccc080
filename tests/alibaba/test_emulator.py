"""The ECS emulator as a service: signatures refused as Alibaba refuses them, response shapes the SDK's models
parse, pagination, the launches ECS refuses, and the SDK's wire format as captured from the real SDK."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from metalfleet.providers import order_cluster, release_cluster
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.testing.alibaba import ACCESS_KEY_ID, ACCESS_KEY_SECRET, API_VERSION, VPC_ID, AlibabaEmulator
from tests.emulators.alibaba_fixtures import ecs_call, vswitch

from .conftest import FAST, IMAGE, KMS_KEY, REGION, ZONE, Specs

WIRE = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "wire" / "alibaba-ecs-sdk-7.11.8.jsonl"


def _send(emulator: AlibabaEmulator, action: str, query: dict[str, str], *, secret: str = ACCESS_KEY_SECRET,
          date: datetime | None = None, nonce: str | None = None,
          drop: str | None = None) -> tuple[int, dict[str, Any]]:
    """A request signed by the SDK's own signer (alibabacloud_tea_openapi Utils.get_authorization), sent raw."""
    from alibabacloud_tea_openapi.utils import Utils

    headers = {"host": emulator.endpoint, "x-acs-version": API_VERSION, "x-acs-action": action,
               "x-acs-date": (date or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
               "x-acs-signature-nonce": nonce or hashlib.sha256(str(datetime.now()).encode()).hexdigest()[:32],
               "accept": "application/json", "x-acs-content-sha256": hashlib.sha256(b"").hexdigest()}
    request = SimpleNamespace(method="POST", pathname="/", query=query, headers=dict(headers))
    headers["Authorization"] = Utils.get_authorization(request, "ACS3-HMAC-SHA256", headers["x-acs-content-sha256"],
                                                       ACCESS_KEY_ID, secret)
    if drop:
        headers.pop(drop)
    url = f"{emulator.url}/?{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"
    req = urllib.request.Request(url, data=b"", method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_wrong_secret_is_refused_as_alibaba_refuses_it(emulator: AlibabaEmulator) -> None:
    status, body = _send(emulator, "DescribeInstances", {"RegionId": REGION}, secret="wrong-secret")
    assert status == 400
    assert set(body) == {"RequestId", "HostId", "Code", "Message", "Recommend"}
    assert body["Code"] == "SignatureDoesNotMatch"
    assert body["Message"].startswith("Specified signature does not match our calculation. The string to sign is: "
                                      "ACS3-HMAC-SHA256\n")
    assert body["Recommend"] == (f"https://api.aliyun.com/troubleshoot?q=SignatureDoesNotMatch&product=Ecs"
                                 f"&requestId={body['RequestId']}")
    ok, answer = _send(emulator, "DescribeInstances", {"RegionId": REGION})
    assert ok == 200 and "Instances" in answer


def test_replay_skew_and_unsigned_headers_are_refused(emulator: AlibabaEmulator) -> None:
    nonce = "f" * 32
    assert _send(emulator, "DescribeInstances", {"RegionId": REGION}, nonce=nonce)[0] == 200
    status, body = _send(emulator, "DescribeInstances", {"RegionId": REGION}, nonce=nonce)
    assert (status, body["Code"]) == (400, "SignatureNonceUsed")
    old = datetime.now(UTC) - timedelta(minutes=20)
    status, body = _send(emulator, "DescribeInstances", {"RegionId": REGION}, date=old)
    assert (status, body["Code"]) == (400, "InvalidTimeStamp.Expired")
    # a header the signature covers, removed on the way: the signature no longer matches
    status, body = _send(emulator, "DescribeInstances", {"RegionId": REGION}, drop="accept")
    assert (status, body["Code"]) == (400, "SignatureDoesNotMatch")
    # an unknown AccessKey id
    from metalfleet.testing import alibaba

    assert alibaba.ACCESS_KEY_ID != "LTAI5tNoSuchKey"


def _known_keys(model: Any, raw: Any, path: str = "") -> list[str]:
    """Keys of ``raw`` that the SDK model drops (``from_map`` then ``to_map``): what the SDK cannot read."""
    lost: list[str] = []
    if isinstance(raw, dict):
        kept = model if isinstance(model, dict) else {}
        for key, value in raw.items():
            if key not in kept:
                lost.append(f"{path}{key}")
            else:
                lost.extend(_known_keys(kept[key], value, f"{path}{key}."))
    elif isinstance(raw, list) and isinstance(model, list):
        for i, (m, r) in enumerate(zip(model, raw, strict=False)):
            lost.extend(_known_keys(m, r, f"{path}{i}."))
    return lost


def _raw(emulator: AlibabaEmulator, action: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON body exactly as the emulator sent it (the SDK's generic call_api, body_type json)."""
    from alibabacloud_ecs20140526 import models
    from alibabacloud_ecs20140526.client import Client
    from alibabacloud_tea_openapi.models import Config, OpenApiRequest, Params
    from alibabacloud_tea_openapi.utils import Utils
    from darabonba.runtime import RuntimeOptions

    client = Client(Config(access_key_id=ACCESS_KEY_ID, access_key_secret=ACCESS_KEY_SECRET, region_id=REGION,
                           endpoint=emulator.endpoint, protocol="http"))
    query = Utils.query(getattr(models, f"{action}Request")().from_map({"RegionId": REGION, **params}).to_map())
    answer = client.call_api(Params(action=action, version=API_VERSION, protocol="HTTP", pathname="/",
                                    method="POST", auth_type="AK", style="RPC", req_body_type="formData",
                                    body_type="json"), OpenApiRequest(query=query), RuntimeOptions())
    return dict(answer["body"])


def test_response_shapes_are_the_ones_the_sdk_models_parse(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                            specs: Specs) -> None:
    from alibabacloud_ecs20140526 import models

    nodes = order_cluster(driver, specs.node_specs(driver), policy=FAST, timeout=30)
    sg = driver.cluster_resources(specs.cluster)[0].split(":")[1]
    try:
        calls = {
            "DescribeInstances": {"InstanceIds": json.dumps([nodes[0].id])},
            "DescribeInstanceStatus": {"InstanceId": [nodes[0].id]},
            "DescribeInstanceTypes": {"InstanceTypes": ["ecs.ebmgn8v.48xlarge"]},
            "DescribeVSwitches": {"VSwitchId": vswitch()},
            "DescribeSecurityGroups": {"VpcId": VPC_ID},
            "DescribeSecurityGroupAttribute": {"SecurityGroupId": sg},
            "DescribeDeploymentSets": {},
            "GetInstanceConsoleOutput": {"InstanceId": nodes[0].id},
            "DescribeKeyPairs": {},
            "DescribePrice": {"ResourceType": "instance", "InstanceType": "ecs.ebmgn8v.48xlarge", "PriceUnit": "Month",
                              "Period": 1},
        }
        for action, params in calls.items():
            raw = _raw(emulator, action, params)
            parsed = getattr(models, f"{action}ResponseBody")().from_map(raw).to_map()
            assert _known_keys(parsed, raw) == [], action
            assert raw["RequestId"]
        instance = _raw(emulator, "DescribeInstances", calls["DescribeInstances"])["Instances"]["Instance"][0]
        assert instance["Status"] == "Running" and instance["VpcAttributes"]["VSwitchId"] == vswitch()
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)


def test_pagination_next_token_and_page_number(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                               specs: Specs) -> None:
    nodes = order_cluster(driver, specs.node_specs(driver, count=3), policy=FAST, timeout=30)
    ids = sorted(n.id for n in nodes)
    tag = [{"Key": "metalfleet:cluster", "Value": specs.cluster}]
    try:
        # DescribeInstances: "a value less than 10" is 10, so MaxResults 2 still answers the three in one page
        page = ecs_call(emulator, "DescribeInstances", {"Tag": tag, "MaxResults": 2})
        assert sorted(i["InstanceId"] for i in page["Instances"]["Instance"]) == ids and not page.get("NextToken")
        # NextToken/MaxResults pages of 1 (DescribeSecurityGroups takes 1 to 100)
        mine = [{"Key": "pages", "Value": specs.cluster}]
        made = sorted(ecs_call(emulator, "CreateSecurityGroup", {"VpcId": VPC_ID, "SecurityGroupName": f"page-{i}",
                                                                 "Tag": mine})["SecurityGroupId"] for i in range(3))
        seen, token = [], None
        while True:
            got = ecs_call(emulator, "DescribeSecurityGroups", {"Tag": mine, "MaxResults": 1, **(
                {"NextToken": token} if token else {})})
            assert len(got["SecurityGroups"]["SecurityGroup"]) <= 1
            seen += [g["SecurityGroupId"] for g in got["SecurityGroups"]["SecurityGroup"]]
            token = got.get("NextToken")
            if not token:
                break
        assert sorted(seen) == made
        for gid in made:
            ecs_call(emulator, "DeleteSecurityGroup", {"SecurityGroupId": gid})
        pages = [ecs_call(emulator, "DescribeInstanceStatus", {"InstanceId": ids, "PageSize": 2, "PageNumber": n})
                 for n in (1, 2)]
        assert [len(p["InstanceStatuses"]["InstanceStatus"]) for p in pages] == [2, 1]
        assert {p["TotalCount"] for p in pages} == {3}
        capped = ecs_call(emulator, "DescribeInstanceStatus", {"InstanceId": ids, "PageSize": 100})
        assert capped["PageSize"] == 50  # "Valid values: 1 to 50."
        types = ecs_call(emulator, "DescribeInstanceTypes", {"MaxResults": 1})
        assert len(types["InstanceTypes"]["InstanceType"]) == 1 and types["NextToken"]
        # the driver reads every node of the cluster whatever the page size (its own MaxResults is 100)
        assert sorted(n.id for n in driver.list_nodes(specs.cluster)) == ids
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)


def _run(emulator: AlibabaEmulator, nics: list[dict[str, Any]] | None = None, **overrides: Any) -> str:
    """A RunInstances the test makes itself (the driver never sends these), answering the error code or ok. With
    ``nics`` the first is the Primary interface and carries the vSwitch and group (the top level names neither)."""
    from Tea.exceptions import TeaException

    sg = ecs_call(emulator, "CreateSecurityGroup", {"VpcId": VPC_ID, "SecurityGroupName": "refusals"})
    params: dict[str, Any] = {"ZoneId": ZONE, "InstanceType": "ecs.ebmgn8v.48xlarge", "ImageId": IMAGE, "Amount": 1}
    if nics:
        nics[0] = {**nics[0], "VSwitchId": vswitch(), "SecurityGroupId": sg["SecurityGroupId"]}
        params["NetworkInterface"] = nics
    else:
        params.update(VSwitchId=vswitch(), SecurityGroupId=sg["SecurityGroupId"])
    params.update(overrides)
    try:
        ids = ecs_call(emulator, "RunInstances", params)["InstanceIdSets"]["InstanceIdSet"]
    except TeaException as exc:
        return str(exc.code)
    ecs_call(emulator, "DeleteInstances", {"InstanceId": ids, "Force": True})
    return "ok"


def test_launches_ecs_refuses(emulator: AlibabaEmulator) -> None:
    def eri(card: int, mode: str = "HighPerformance") -> dict[str, Any]:
        return {"InstanceType": "Secondary" if card else "Primary", "NetworkCardIndex": card,
                "NetworkInterfaceTrafficMode": mode}

    assert _run(emulator, [eri(0), eri(1)]) == "ok"
    # the Primary interface's vSwitch named at the top level as well (the driver's old ERI order)
    assert _run(emulator, [eri(0), eri(1)], VSwitchId=vswitch()) == "InvalidParameter.Conflict"
    # ERI on a type without it; more ERIs than the type has; a card it does not have; more interfaces than ENIs
    assert _run(emulator, [eri(0)], InstanceType="ecs.ebmgn7e.32xlarge") == "InvalidParam.NetworkInterface"
    assert _run(emulator, [eri(0), eri(1), eri(1)]) == "InvalidParam.NetworkInterface"
    assert _run(emulator, [eri(0), eri(5, "Standard")]) == "InvalidParam.NetworkInterface"
    assert _run(emulator, [eri(0, "Standard")] + [eri(1, "Standard")] * 3, InstanceType="ecs.g7.large") == (
        "InvalidParam.NetworkInterface")
    # unknown key pair, KMS key, image; a disk category these types do not take; a vSwitch of another zone
    assert _run(emulator, KeyPairName="nobody") == "InvalidKeyPairName.NotFound"
    assert _run(emulator, SystemDisk={"Category": "cloud_essd", "Size": 100, "Encrypted": "true",
                                      "KMSKeyId": "key-nope"}) == "InvalidParameter.KMSKeyId.NotFound"
    assert _run(emulator, SystemDisk={"Category": "cloud_essd", "Size": 100, "Encrypted": "true",
                                      "KMSKeyId": KMS_KEY}) == "ok"
    assert _run(emulator, SystemDisk={"Category": "cloud_essd_entry", "Size": 100}) == (
        "InvalidSystemDiskCategory.ValueNotSupported")
    assert _run(emulator, ImageId="m-doesnotexist") == "InvalidImageId.NotFound"
    assert _run(emulator, ZoneId="cn-wulanchabu-a") == "InvalidParameter.Mismatch"
    # a dry run checks and buys nothing
    before = len(emulator.instances())
    assert _run(emulator, DryRun=True) == "DryRunOperation"
    assert len(emulator.instances()) == before


def test_instances_go_pending_starting_running_then_disappear(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                              specs: Specs) -> None:
    emulator.set_timing(boot_seconds=0.6)
    try:
        [spec] = specs.node_specs(driver)
        node = driver.order(spec)
        seen: list[str] = []
        driver.wait([node.id], timeout=30, poll=0.02,
                    progress=lambda ns: seen.append(str(driver._observer.seen[ns[0].id].extra["ecs_status"])))
        statuses = [ecs_call(emulator, "DescribeInstanceStatus", {"InstanceId": [node.id]})]
        assert statuses[0]["InstanceStatuses"]["InstanceStatus"][0]["Status"] == "Running"
        assert "Pending" in seen
        record = next(i for i in emulator.instances() if i["InstanceId"] == node.id)
        assert record["MetadataOptions"]["HttpTokens"] == "required"
        assert record["InternetMaxBandwidthOut"] == 0 and record["PublicIpAddress"]["IpAddress"] == []
    finally:
        emulator.set_timing(boot_seconds=0.3)
        release_cluster(driver, specs.cluster, policy=FAST)
    assert next(i for i in emulator.instances() if i["InstanceId"] == node.id)["released"]
    with pytest.raises(Exception) as gone:
        ecs_call(emulator, "DeleteInstances", {"InstanceId": [node.id], "Force": True})
    assert getattr(gone.value, "code", None) == "InvalidInstanceId.NotFound"


def test_the_driver_sends_what_the_captured_sdk_sends(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                      specs: Specs) -> None:
    """The wire capture of the real SDK 7.11.8 (tests/support/fixtures/wire): the driver's RunInstances, as the
    emulator received it, uses the same flattened parameter names for ERIs, encrypted disks, tags, the deployment
    set and IMDS, and the SDK signs the same header set the capture shows (the set the emulator insists on)."""
    captured = [json.loads(line) for line in WIRE.read_text().splitlines() if line.strip()]
    run = next(c for c in captured if c["headers"]["x-acs-action"] == "RunInstances")
    order_cluster(driver, specs.node_specs(driver), policy=FAST, timeout=30)
    try:
        [sent] = emulator.requests("RunInstances")
        ours = set(sent["params"])
        for key in ("Amount", "MinAmount", "ClientToken", "DeploymentSetId", "HttpTokens", "ImageId", "InstanceType",
                    "InstanceChargeType", "SpotStrategy", "RegionId", "ZoneId", "NetworkInterface.1.VSwitchId",
                    "NetworkInterface.1.SecurityGroupId", "NetworkInterface.1.InstanceType",
                    "NetworkInterface.1.NetworkCardIndex",
                    "NetworkInterface.2.NetworkInterfaceTrafficMode", "NetworkInterface.2.NetworkCardIndex",
                    "SystemDisk.Category", "SystemDisk.Size", "SystemDisk.Encrypted", "SystemDisk.KMSKeyId",
                    "DataDisk.1.Category", "DataDisk.1.Encrypted", "DataDisk.1.KMSKeyId", "DataDisk.1.Size",
                    "DataDisk.1.DeleteWithInstance", "Tag.1.Key", "Tag.1.Value"):
            assert key in run["query"], key  # the capture's name ...
            assert key in ours, key  # ... is the driver's
        assert not {"VSwitchId", "SecurityGroupId"} & ours  # with a Primary interface: only inside it
        assert sent["params"]["NetworkInterface.2.NetworkInterfaceTrafficMode"] == "HighPerformance"
        assert sent["params"]["HttpTokens"] == "required"
        signed = run["headers"]["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {h for h in run["headers"] if h.lower().startswith("x-acs-")} <= set(signed) | {"Authorization"}
        assert "host" in signed and signed == sorted(signed)
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)


def test_stop_and_start_go_through_stopping_and_starting(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                         specs: Specs) -> None:
    from alibabacloud_ecs20140526 import models

    from metalfleet.providers import NodeState

    [node] = order_cluster(driver, specs.node_specs(driver), policy=FAST, timeout=30)
    try:
        raw = _raw(emulator, "StopInstances", {"InstanceId": [node.id], "ForceStop": True,
                                               "StoppedMode": "StopCharging"})
        assert _known_keys(models.StopInstancesResponseBody().from_map(raw).to_map(), raw) == []
        assert raw["InstanceResponses"]["InstanceResponse"][0]["CurrentStatus"] == "Stopping"
        assert driver.get(node.id).state == NodeState.STOPPING
        [stopped] = driver.wait([node.id], NodeState.STOPPED, timeout=30, poll=0.02)
        assert stopped.state == NodeState.STOPPED
        with pytest.raises(Exception) as twice:
            ecs_call(emulator, "StopInstances", {"InstanceId": [node.id]})
        assert getattr(twice.value, "code", None) == "IncorrectInstanceStatus"
        ecs_call(emulator, "StartInstances", {"InstanceId": [node.id]})
        [running] = driver.wait([node.id], NodeState.RUNNING, timeout=30, poll=0.02)
        assert running.state == NodeState.RUNNING
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)
