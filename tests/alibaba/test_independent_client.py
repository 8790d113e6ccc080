"""A client we did not write: the older official RPC-signing SDK (aliyun-python-sdk-ecs 4.24.83 on
aliyun-python-sdk-core 2.16.1, HMAC-SHA1 signatures as request parameters) runs the driver's core flow against the
ECS emulator with the parameters the driver sends, in the query string and in a form body, and the requests the
reference refuses are refused with their documented codes.

The flow: DescribeInstanceTypes, RunInstances of an ERI type with the interfaces as the reference allows them
(the vSwitch and group in the Primary interface only) and a ClientToken, DescribeInstances/DescribeInstanceStatus
until Running, TagResources, DeleteInstances; and a PrePaid instance converted with ModifyInstanceChargeType, then
released. Refused: the Primary-interface conflict (InvalidParameter.Conflict), DeleteInstances of an unexpired
PrePaid instance (ChargeTypeViolation), a wrong signature (SignatureDoesNotMatch).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from metalfleet.testing.alibaba import ACCESS_KEY_ID, ACCESS_KEY_SECRET, REGION, VPC_ID, ZONES, AlibabaEmulator
from tests.emulators.alibaba_fixtures import IMAGE, KMS_KEY, vswitch

ZONE = ZONES[2]
ERI_TYPE = "ecs.ebmgn8v.48xlarge"


def _client(secret: str = ACCESS_KEY_SECRET) -> Any:
    from aliyunsdkcore.client import AcsClient

    return AcsClient(ACCESS_KEY_ID, secret, REGION, auto_retry=False, max_retry_time=0, timeout=30,
                     connect_timeout=10)


class Rpc:
    """The SDK's typed requests, sent to the emulator over HTTP, their parameters in the query string or (``form``)
    moved into a form body; the answer as the SDK returns it (JSON bytes), parsed."""

    def __init__(self, ecs: AlibabaEmulator, *, form: bool = False, secret: str = ACCESS_KEY_SECRET) -> None:
        self.ecs, self.form, self.client = ecs, form, _client(secret)

    def __call__(self, name: str, **params: Any) -> dict[str, Any]:
        import importlib

        from aliyunsdkcore.http import method_type, protocol_type

        module = importlib.import_module(f"aliyunsdkecs.request.v20140526.{name}Request")
        request = getattr(module, f"{name}Request")()
        for key, value in params.items():
            getattr(request, f"set_{key}")(value)
        request.set_endpoint(self.ecs.endpoint)
        request.set_protocol_type(protocol_type.HTTP)
        request.set_method(method_type.POST)
        request.set_accept_format("JSON")
        if self.form:  # every operation parameter in an application/x-www-form-urlencoded body
            for key, value in list(request.get_query_params().items()):
                request.add_body_params(key, value)
            request.set_query_params({})
        answer: dict[str, Any] = json.loads(self.client.do_action_with_exception(request))
        return answer


def _code(call: Any, *args: Any, **kw: Any) -> tuple[str, int]:
    from aliyunsdkcore.acs_exception.exceptions import ServerException

    with pytest.raises(ServerException) as info:
        call(*args, **kw)
    return str(info.value.get_error_code()), int(info.value.get_http_status())


@pytest.fixture
def ecs(alibaba_emulator: AlibabaEmulator) -> Iterator[AlibabaEmulator]:
    yield alibaba_emulator


def _group(rpc: Rpc) -> str:
    made = rpc("CreateSecurityGroup", VpcId=VPC_ID, SecurityGroupName=f"ind-{uuid.uuid4().hex[:8]}",
               SecurityGroupType="normal")
    return str(made["SecurityGroupId"])


def _eri_order(rpc: Rpc, group: str, token: str, **extra: Any) -> dict[str, Any]:
    """RunInstances as the driver sends it for an ERI type (tests/support/reference/alibaba-ecs.yaml, sends)."""
    return {"ZoneId": ZONE, "InstanceType": ERI_TYPE, "ImageId": IMAGE, "Amount": 1, "MinAmount": 1,
            "ClientToken": token, "InstanceName": "ind-0", "HostName": "ind-0", "HttpTokens": "required",
            "HttpEndpoint": "enabled", "InternetMaxBandwidthOut": 0, "InstanceChargeType": "PostPaid",
            "SpotStrategy": "NoSpot",
            "SystemDiskCategory": "cloud_essd", "SystemDiskSize": 200,
            "SystemDisk": {"Encrypted": "true", "KMSKeyId": KMS_KEY},
            "DataDisks": [{"Category": "cloud_essd", "Size": 500, "Encrypted": "true", "KMSKeyId": KMS_KEY,
                           "DeleteWithInstance": True}],
            "Tags": [{"Key": "metalfleet:cluster", "Value": "independent"}, {"Key": "team", "Value": "ml"}],
            "NetworkInterfaces": [
                {"InstanceType": "Primary", "NetworkCardIndex": 0, "NetworkInterfaceTrafficMode": "HighPerformance",
                 "VSwitchId": vswitch(ZONE), "SecurityGroupId": group},
                {"InstanceType": "Secondary", "NetworkCardIndex": 1, "NetworkInterfaceTrafficMode": "HighPerformance",
                 "DeleteOnRelease": True}], **extra}


def _wait(rpc: Rpc, iid: str, status: str = "Running") -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = rpc("DescribeInstanceStatus", InstanceIds=[iid], PageNumber=1, PageSize=50)
        states = {s["InstanceId"]: s["Status"] for s in got["InstanceStatuses"]["InstanceStatus"]}
        if states.get(iid) == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"{iid} not {status}")


@pytest.mark.parametrize("form", [False, True], ids=["query", "form-body"])
def test_the_drivers_flow_with_the_rpc_signing_sdk(ecs: AlibabaEmulator, form: bool) -> None:
    rpc = Rpc(ecs, form=form)
    types = rpc("DescribeInstanceTypes", InstanceTypess=[ERI_TYPE], MaxResults=100)
    [eri] = types["InstanceTypes"]["InstanceType"]
    assert (eri["EriQuantity"], eri["NetworkCardQuantity"]) == (2, 2)
    group = _group(rpc)
    token = f"ind-{uuid.uuid4().hex}"
    order = _eri_order(rpc, group, token)
    [iid] = rpc("RunInstances", **order)["InstanceIdSets"]["InstanceIdSet"]
    # the same ClientToken and parameters: the same instance, nothing bought twice
    assert rpc("RunInstances", **order)["InstanceIdSets"]["InstanceIdSet"] == [iid]
    _wait(rpc, iid)
    [inst] = rpc("DescribeInstances", InstanceIds=json.dumps([iid]), MaxResults=100)["Instances"]["Instance"]
    assert inst["Status"] == "Running" and inst["VpcAttributes"]["VSwitchId"] == vswitch(ZONE)
    assert inst["SecurityGroupIds"]["SecurityGroupId"] == [group]
    assert len(inst["NetworkInterfaces"]["NetworkInterface"]) == 2
    rpc("TagResources", ResourceType="instance", ResourceIds=[iid], Tags=[{"Key": "metalfleet:acceptance",
                                                                           "Value": "passed"}])
    [tagged] = rpc("DescribeInstances", InstanceIds=json.dumps([iid]))["Instances"]["Instance"]
    assert {t["TagKey"]: t["TagValue"] for t in tagged["Tags"]["Tag"]}["metalfleet:acceptance"] == "passed"
    rpc("DeleteInstances", InstanceIds=[iid], Force=True, ForceStop=True)
    _gone(rpc, iid)
    # a subscription: refused by DeleteInstances, converted to pay-as-you-go, then released
    [sub] = rpc("RunInstances", **_eri_order(rpc, group, f"ind-{uuid.uuid4().hex}", InstanceChargeType="PrePaid",
                                             Period=1, PeriodUnit="Month", AutoPay=True))["InstanceIdSets"][
        "InstanceIdSet"]
    _wait(rpc, sub)
    [prepaid] = rpc("DescribeInstances", InstanceIds=json.dumps([sub]))["Instances"]["Instance"]
    assert prepaid["InstanceChargeType"] == "PrePaid" and prepaid["ExpiredTime"]
    assert _code(rpc, "DeleteInstances", InstanceIds=[sub], Force=True) == ("ChargeTypeViolation", 403)
    fee = rpc("ModifyInstanceChargeType", InstanceIds=json.dumps([sub]), InstanceChargeType="PostPaid", AutoPay=True,
              IsDetailFee=True, ClientToken=f"ind-{uuid.uuid4().hex}")
    assert [f["InstanceId"] for f in fee["FeeOfInstances"]["FeeOfInstance"]] == [sub] and "OrderId" not in fee
    rpc("DeleteInstances", InstanceIds=[sub], Force=True, ForceStop=True)
    _gone(rpc, sub)
    rpc("DeleteSecurityGroup", SecurityGroupId=group)
    # the emulator saw this SDK's signature and, for the form variant, the body
    logged = ecs.requests("RunInstances")[-1]
    assert "sig-rpc-accepted" in logged["rules"]
    assert ("params-form-body" in logged["rules"]) == form
    assert logged["params"]["NetworkInterface.1.VSwitchId"] == vswitch(ZONE) and "VSwitchId" not in logged["params"]


def _gone(rpc: Rpc, iid: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not rpc("DescribeInstances", InstanceIds=json.dumps([iid]))["Instances"]["Instance"]:
            return
        time.sleep(0.05)
    raise AssertionError(f"{iid} still listed")


def test_what_the_reference_refuses_is_refused_the_same_way(ecs: AlibabaEmulator) -> None:
    rpc = Rpc(ecs)
    group = _group(rpc)
    # the Primary interface's vSwitch and group named at the top level too: refused, nothing bought
    before = len(ecs.instances())
    conflict = _eri_order(rpc, group, f"ind-{uuid.uuid4().hex}", VSwitchId=vswitch(ZONE))
    assert _code(rpc, "RunInstances", **conflict) == ("InvalidParameter.Conflict", 400)
    conflict = _eri_order(rpc, group, f"ind-{uuid.uuid4().hex}", SecurityGroupId=group)
    assert _code(rpc, "RunInstances", **conflict) == ("InvalidParameter.Conflict", 400)
    assert len(ecs.instances()) == before
    # a wrong secret: the HMAC-SHA1 signature does not match
    assert _code(Rpc(ecs, secret="not-the-secret"), "DescribeInstances") == ("SignatureDoesNotMatch", 400)
    assert _code(Rpc(ecs, form=True, secret="not-the-secret"), "DescribeInstances") == ("SignatureDoesNotMatch",
                                                                                        400)
    # DeleteInstances of an unexpired subscription
    [sub] = rpc("RunInstances", **_eri_order(rpc, group, f"ind-{uuid.uuid4().hex}", InstanceChargeType="PrePaid",
                                             Period=1, PeriodUnit="Month"))["InstanceIdSets"]["InstanceIdSet"]
    _wait(rpc, sub)
    assert _code(Rpc(ecs, form=True), "DeleteInstances", InstanceIds=[sub], Force=True) == ("ChargeTypeViolation",
                                                                                             403)
    ecs.expire(sub)
    rpc("DeleteInstances", InstanceIds=[sub], Force=True, TerminateSubscription=True)
    _gone(rpc, sub)
