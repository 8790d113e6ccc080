"""Each rule on the native resources of AWS, Alibaba Cloud and Huawei Cloud: a compliant and a violating case,
as a Pulumi resource (through the CrossGuard pack's validate seam) and as a Terraform plan (through
``metalfleet policy check``'s reading of ``terraform show -json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from metalfleet.policies.check import check_paths
from metalfleet.policies.config import parse_config

from .cases import PULUMI_UNKNOWN, TAGS, run_pack, write_plan

AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_LT = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_LC = "aws:ec2/launchConfiguration:LaunchConfiguration"
AWS_SG = "aws:ec2/securityGroup:SecurityGroup"
AWS_SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
AWS_VOLUME = "aws:ebs/volume:Volume"
AWS_EIP = "aws:ec2/eip:Eip"
AWS_CR = "aws:ec2/capacityReservation:CapacityReservation"
ALI_INSTANCE = "alicloud:ecs/instance:Instance"
ALI_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
ALI_DISK = "alicloud:ecs/ecsDisk:EcsDisk"
ALI_EIP_ASSOC = "alicloud:ecs/eipAssociation:EipAssociation"
ALI_OLD_LT = "alicloud:ecs/launchTemplate:LaunchTemplate"
HW_BMS = "huaweicloud:Bms/instance:Instance"
HW_ECS = "huaweicloud:Ecs/instance:Instance"
HW_RULE = "huaweicloud:Vpc/secgroupRule:SecgroupRule"
HW_EIP_ASSOC = "huaweicloud:Vpc/eipAssociate:EipAssociate"
HW_EVS = "huaweicloud:Evs/volume:Volume"

TF_TYPES = {AWS_INSTANCE: "aws_instance", AWS_LT: "aws_launch_template", AWS_LC: "aws_launch_configuration",
            ALI_OLD_LT: "alicloud_launch_template", AWS_SG: "aws_security_group",
            AWS_SG_RULE: "aws_security_group_rule", AWS_INGRESS: "aws_vpc_security_group_ingress_rule",
            AWS_VOLUME: "aws_ebs_volume", AWS_EIP: "aws_eip", AWS_CR: "aws_ec2_capacity_reservation",
            ALI_INSTANCE: "alicloud_instance", ALI_RULE: "alicloud_security_group_rule", ALI_DISK: "alicloud_ecs_disk",
            ALI_EIP_ASSOC: "alicloud_eip_association", HW_BMS: "huaweicloud_bms_instance",
            HW_ECS: "huaweicloud_compute_instance", HW_RULE: "huaweicloud_networking_secgroup_rule",
            HW_EIP_ASSOC: "huaweicloud_vpc_eip_associate", HW_EVS: "huaweicloud_evs_volume"}

#: A compliant p5 instance; cases change one thing.
P5 = {"ami": "ami-0123456789abcdef0", "instanceType": "p5.48xlarge", "subnetId": "subnet-0123456789abcdef0",
      "associatePublicIpAddress": False, "placementGroup": "train-pg",
      "metadataOptions": {"httpTokens": "required"}, "tags": TAGS, "volumeTags": TAGS,
      "rootBlockDevice": {"encrypted": True, "kmsKeyId": "arn:aws:kms:us-east-1:111122223333:key/k1",
                          "volumeSize": 500}}
ALI = {"instanceType": "ecs.ebmgn8v.48xlarge", "imageId": "ubuntu_22_04", "vswitchId": "vsw-1",
       "internetMaxBandwidthOut": 0, "httpTokens": "required", "systemDiskEncrypted": True,
       "systemDiskKmsKeyId": "key-1", "tags": TAGS, "volumeTags": TAGS, "deploymentSetId": "ds-1"}
HW_COMPUTE = {"name": "n0", "flavorId": "p2s.16xlarge.8", "imageId": "img", "systemDiskKmsKeyId": "kms-1",
              "tags": TAGS, "network": [{"uuid": "net-1"}], "schedulerHints": {"group": "sg-1"}}
#: A compliant launch configuration (issue 21: read like a launch template).
AWS_LC_PROPS = {"imageId": "ami-0123456789abcdef0", "instanceType": "p5.48xlarge", "associatePublicIpAddress": False,
                "metadataOptions": {"httpTokens": "required"}, "rootBlockDevice": {"encrypted": True}}
HW_BMS_PROPS = {"name": "n0", "flavorId": "physical.kat2ne.48xlarge.8.ei.pod101", "imageId": "img", "userId": "u",
                "availabilityZone": "cn-southwest-2a", "vpcId": "vpc-1", "nics": [{"subnetId": "sn-1"}],
                "tags": TAGS}


@dataclass
class Case:
    rule: str
    type: str
    good: dict[str, Any] | None
    bad: dict[str, Any]
    says: str  # a piece of the violation's message
    config: dict[str, Any] = field(default_factory=dict)  # the rule's settings (pack config / policy.yaml)

    @property
    def id(self) -> str:
        return f"{self.rule}-{self.type.split(':')[0]}-{self.type.rsplit(':', 1)[-1]}-{self.says[:18]}"


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    out = {**base, **changes}
    return {k: v for k, v in out.items() if v is not None}


CASES = [
    # ---- encryption at rest
    Case("MF-ENC-001", AWS_INSTANCE, P5, _with(P5, rootBlockDevice={"volumeSize": 500}), "defaults to false"),
    Case("MF-ENC-001", AWS_INSTANCE, P5, _with(P5, rootBlockDevice=None), "root volume is not encrypted"),
    Case("MF-ENC-001", AWS_INSTANCE, P5, _with(P5, ebsBlockDevices=[{"deviceName": "/dev/sdf", "volumeSize": 9}]),
         "/dev/sdf is not encrypted"),
    Case("MF-ENC-001", AWS_INSTANCE, None, _with(P5, rootBlockDevice={"encrypted": PULUMI_UNKNOWN}), "is unknown"),
    Case("MF-ENC-001", AWS_LT,
         {"instanceType": "p5.48xlarge", "metadataOptions": {"httpTokens": "required"},
          "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "true", "volumeSize": 500}}]},
         {"instanceType": "p5.48xlarge", "metadataOptions": {"httpTokens": "required"},
          "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"volumeSize": 500}}]},
         "device /dev/sda1 is not encrypted"),
    Case("MF-ENC-001", AWS_LC, AWS_LC_PROPS, _with(AWS_LC_PROPS, rootBlockDevice={"volumeSize": 500}),
         "root device is not encrypted"),
    Case("MF-ENC-001", ALI_OLD_LT, {"instanceType": "ecs.ebmgn8v.48xlarge", "systemDisk": {"encrypted": True}},
         {"instanceType": "ecs.ebmgn8v.48xlarge", "systemDiskCategory": "cloud_essd"}, "system disk is not encrypted"),
    Case("MF-ENC-001", AWS_VOLUME, {"availabilityZone": "us-east-1a", "size": 100, "encrypted": True, "tags": TAGS},
         {"availabilityZone": "us-east-1a", "size": 100, "tags": TAGS}, "encrypted defaults to false"),
    Case("MF-ENC-001", ALI_INSTANCE, ALI, _with(ALI, systemDiskEncrypted=None, systemDiskKmsKeyId=None),
         "system_disk_encrypted defaults to false"),
    Case("MF-ENC-001", ALI_INSTANCE, _with(ALI, dataDisks=[{"size": 100, "encrypted": True}]),
         _with(ALI, dataDisks=[{"size": 100}]), "data disk 0 is not encrypted"),
    Case("MF-ENC-001", ALI_DISK, {"size": 100, "encrypted": True, "tags": TAGS}, {"size": 100, "tags": TAGS},
         "encrypted defaults to false"),
    Case("MF-ENC-001", HW_ECS, HW_COMPUTE, _with(HW_COMPUTE, systemDiskKmsKeyId=None), "system disk is not encrypted"),
    Case("MF-ENC-001", HW_EVS, {"volumeType": "SSD", "size": 100, "kmsId": "kms-1", "tags": TAGS},
         {"volumeType": "SSD", "size": 100, "tags": TAGS}, "kms_id unset"),
    Case("MF-ENC-001", HW_BMS, None, _with(HW_BMS_PROPS, systemDiskType="SSD"), "has no disk encryption argument"),
    # ---- customer-managed keys (advisory by default; still reported)
    Case("MF-ENC-002", AWS_VOLUME, {"size": 10, "encrypted": True, "kmsKeyId": "arn:aws:kms:::key/k", "tags": TAGS},
         {"size": 10, "encrypted": True, "tags": TAGS}, "provider-managed default key"),
    Case("MF-ENC-002", ALI_DISK, {"size": 10, "encrypted": True, "kmsKeyId": "key-1", "tags": TAGS},
         {"size": 10, "encrypted": True, "tags": TAGS}, "provider-managed default key"),
    # ---- public addresses
    Case("MF-NET-001", AWS_INSTANCE, P5, _with(P5, associatePublicIpAddress=True), "gets a public address"),
    Case("MF-NET-001", AWS_INSTANCE, P5, _with(P5, associatePublicIpAddress=None, subnetId=None),
         "default VPC's default subnet"),
    Case("MF-NET-001", AWS_INSTANCE, None, _with(P5, associatePublicIpAddress=None), "is unknown"),
    Case("MF-NET-001", AWS_EIP, {"domain": "vpc"}, {"domain": "vpc", "instance": "i-0123456789abcdef0"},
         "bound to i-0123456789abcdef0"),
    Case("MF-NET-001", ALI_INSTANCE, ALI, _with(ALI, internetMaxBandwidthOut=100), "gets a public address"),
    Case("MF-NET-001", ALI_EIP_ASSOC, None, {"allocationId": "eip-1", "instanceId": "i-bp1"}, "bound to i-bp1"),
    Case("MF-NET-001", HW_BMS, HW_BMS_PROPS, _with(HW_BMS_PROPS, eipId="eip-123"), "gets a public address"),
    Case("MF-NET-001", HW_BMS, HW_BMS_PROPS, _with(HW_BMS_PROPS, iptype="5_bgp", bandwidthSize=100),
         "gets a public address"),
    Case("MF-NET-001", HW_EIP_ASSOC, None, {"publicIp": "203.0.113.7", "portId": "port-1"}, "bound to port-1"),
    Case("MF-NET-001", AWS_INSTANCE, None, _with(P5, associatePublicIpAddress=True), "gets a public address",
         {"allow": False}),
    # ---- SSH and any port from the world
    Case("MF-NET-002", AWS_SG, {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22,
                                             "cidrBlocks": ["10.0.0.0/16"]}]},
         {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]}]},
         "lets 0.0.0.0/0 reach SSH"),
    Case("MF-NET-002", AWS_SG, None, {"ingress": [{"protocol": "-1", "fromPort": 0, "toPort": 0,
                                                   "cidrBlocks": ["0.0.0.0/0"]}]}, "all protocols and ports"),
    Case("MF-NET-002", AWS_SG_RULE, {"type": "ingress", "protocol": "tcp", "fromPort": 22, "toPort": 22,
                                     "securityGroupId": "sg-1", "ipv6CidrBlocks": ["2001:db8::/32"]},
         {"type": "ingress", "protocol": "tcp", "fromPort": 0, "toPort": 1024, "securityGroupId": "sg-1",
          "ipv6CidrBlocks": ["::/0"]}, "lets ::/0 reach SSH"),
    Case("MF-NET-002", AWS_INGRESS, {"securityGroupId": "sg-1", "ipProtocol": "tcp", "fromPort": 22, "toPort": 22,
                                     "cidrIpv4": "192.168.0.0/16"},
         {"securityGroupId": "sg-1", "ipProtocol": "tcp", "fromPort": 22, "toPort": 22, "cidrIpv4": "0.0.0.0/0"},
         "reach SSH"),
    Case("MF-NET-002", ALI_RULE, {"type": "ingress", "ipProtocol": "tcp", "portRange": "22/22", "cidrIp": "10.0.0.0/8",
                                  "securityGroupId": "sg-1"},
         {"type": "ingress", "ipProtocol": "tcp", "portRange": "22/22", "cidrIp": "0.0.0.0/0",
          "securityGroupId": "sg-1"}, "reach SSH"),
    Case("MF-NET-002", HW_RULE, {"securityGroupId": "sg-1", "direction": "ingress", "ethertype": "IPv4",
                                 "protocol": "tcp", "ports": "22", "remoteIpPrefix": "10.0.0.0/8"},
         {"securityGroupId": "sg-1", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "ports": "22"},
         "remote_ip_prefix unset"),
    Case("MF-NET-002", HW_RULE, None, {"securityGroupId": "sg-1", "direction": "ingress", "ethertype": "IPv6",
                                       "protocol": "tcp", "portRangeMin": 20, "portRangeMax": 30},
         "lets ::/0 reach SSH"),
    Case("MF-NET-003", AWS_SG, {"ingress": [{"protocol": "tcp", "fromPort": 443, "toPort": 443,
                                             "cidrBlocks": ["0.0.0.0/0"]}]},
         {"ingress": [{"protocol": "tcp", "fromPort": 8888, "toPort": 8888, "cidrBlocks": ["0.0.0.0/0"]}]},
         "tcp port 8888", {"allowed_ports": [443]}),
    Case("MF-NET-003", ALI_RULE, None, {"type": "ingress", "ipProtocol": "all", "cidrIp": "0.0.0.0/0",
                                        "securityGroupId": "sg-1"}, "all protocols and ports"),
    Case("MF-NET-003", HW_RULE, {"securityGroupId": "sg-1", "direction": "ingress", "ethertype": "IPv4",
                                 "protocol": "tcp", "ports": "8888", "remoteGroupId": "sg-2"},
         {"securityGroupId": "sg-1", "direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
          "ports": "8888"}, "tcp port 8888"),
    # ---- instance metadata v2
    Case("MF-NET-005", AWS_INSTANCE, P5, _with(P5, metadataOptions=None), "defaults to optional"),
    Case("MF-NET-005", AWS_INSTANCE, P5, _with(P5, metadataOptions={"httpTokens": "optional"}), "IMDSv1"),
    Case("MF-NET-005", AWS_INSTANCE, _with(P5, metadataOptions={"httpEndpoint": "disabled"}),
         _with(P5, metadataOptions={"httpEndpoint": "enabled"}), "defaults to optional"),
    Case("MF-NET-005", AWS_LC, _with(AWS_LC_PROPS, metadataOptions={"httpEndpoint": "disabled"}),
         _with(AWS_LC_PROPS, metadataOptions={"httpTokens": "optional"}), "IMDSv1"),
    Case("MF-NET-001", AWS_LC, AWS_LC_PROPS, _with(AWS_LC_PROPS, associatePublicIpAddress=True),
         "gets a public address"),
    Case("MF-NET-005", AWS_LT, {"instanceType": "p5.48xlarge", "metadataOptions": {"httpTokens": "required"}},
         {"instanceType": "p5.48xlarge"}, "unset: instances get the default"),
    Case("MF-NET-005", ALI_INSTANCE, ALI, _with(ALI, httpTokens=None), "http_tokens defaults to optional"),
    Case("MF-NET-005", HW_BMS, None, HW_BMS_PROPS, "BMS metadata configuration defaults"),
    Case("MF-NET-005", HW_ECS, None, HW_COMPUTE, "has no metadata options"),
    # ---- tags, on nodes and their volumes
    Case("MF-TAG-001", AWS_INSTANCE, P5, _with(P5, tags={"team": "ml"}), "lacks required tag(s) owner, cost-center"),
    Case("MF-TAG-001", AWS_INSTANCE, P5, _with(P5, volumeTags=None), "root volume lacks required tag(s)"),
    Case("MF-TAG-001", AWS_INSTANCE, None, _with(P5, tags={**TAGS, "cost-center": "x"}), "is not allowed",
         {"required": {"owner": ".+", "cost-center": "[0-9]{4}"}}),
    Case("MF-TAG-001", AWS_VOLUME, {"size": 10, "encrypted": True, "tags": TAGS}, {"size": 10, "encrypted": True},
         "lacks required tag(s) owner"),
    Case("MF-TAG-001", ALI_INSTANCE, ALI, _with(ALI, volumeTags=None), "system disk lacks required tag"),
    Case("MF-TAG-001", HW_BMS, HW_BMS_PROPS, _with(HW_BMS_PROPS, tags={"owner": "x"}), "lacks required tag(s) "
         "cost-center"),
    # ---- advisory: placement and capacity
    Case("MF-ADV-002", AWS_CR, {"instanceType": "p5.48xlarge", "instanceCount": 2, "endDateType": "limited",
                                "endDate": "2027-06-30T00:00:00Z"},
         {"instanceType": "p5.48xlarge", "instanceCount": 2, "endDateType": "limited",
          "endDate": "2026-02-01T00:00:00Z"}, "ends 2026-02-01", {"planned_run_end": "2026-03-31"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rule_through_the_pack(case: Case) -> None:
    if case.good is not None:
        assert run_pack(case.rule, case.type, case.good, config=case.config) == []
    found = run_pack(case.rule, case.type, case.bad, config=case.config)
    assert found, f"{case.rule} found nothing in {case.bad}"
    assert all(m.startswith(f"{case.rule} [") for m in found), found
    assert any(case.says in m for m in found), found


def _plan_findings(tmp_path: Path, case_props: dict[str, Any], case: Case, name: str) -> list[str]:
    plan = write_plan(tmp_path / f"{name}.json", [(TF_TYPES[case.type], "this", case_props)])
    config = parse_config({"rules": {case.rule: case.config}} if case.config else {})
    report = check_paths([plan], config)
    return [f.message for f in report.findings if f.rule.id == case.rule]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rule_on_a_terraform_plan(case: Case, tmp_path: Path) -> None:
    if case.good is not None:
        assert _plan_findings(tmp_path, case.good, case, "good") == []
    found = _plan_findings(tmp_path, case.bad, case, "bad")
    assert any(case.says in m for m in found), found


def test_a_plan_that_turns_on_ebs_default_encryption_makes_absent_encrypted_fine(tmp_path: Path) -> None:
    bare = _with(P5, rootBlockDevice={"volumeSize": 500})
    plan = write_plan(tmp_path / "p.json", [("aws_instance", "gpu", bare),
                                            ("aws_ebs_encryption_by_default", "on", {"enabled": True})])
    assert not [f for f in check_paths([plan]).findings if f.rule.id == "MF-ENC-001"]
    only = write_plan(tmp_path / "q.json", [("aws_instance", "gpu", bare)])
    assert [f for f in check_paths([only]).findings if f.rule.id == "MF-ENC-001"]
    assert not [f for f in check_paths([only], parse_config({"aws": {"ebs_encryption_by_default": True}})).findings
                if f.rule.id == "MF-ENC-001"]


def test_plan_references_resolve_an_eip_and_a_subnet(tmp_path: Path) -> None:
    """Values unknown at plan time are followed through the configuration's references."""
    public_subnet = {"vpcId": "vpc-1", "cidrBlock": "10.0.1.0/24", "mapPublicIpOnLaunch": True}
    plan = write_plan(tmp_path / "p.json", [
        ("aws_subnet", "public", public_subnet),
        ("aws_instance", "gpu", _with(P5, associatePublicIpAddress=None, subnetId=PULUMI_UNKNOWN)),
        ("aws_eip", "ip", {"domain": "vpc", "instance": PULUMI_UNKNOWN}),
    ], references={"aws_instance.gpu": {"subnet_id": ["aws_subnet.public.id", "aws_subnet.public"]},
                   "aws_eip.ip": {"instance": ["aws_instance.gpu.id", "aws_instance.gpu"]}})
    found = {(f.resource_name, f.message) for f in check_paths([plan]).findings if f.rule.id == "MF-NET-001"}
    assert ("aws_instance.gpu", "aws_instance.gpu gets a public address (associate_public_ip_address unset: the "
            "subnet's map_public_ip_on_launch is true)") in found
    assert not any(name == "aws_eip.ip" for name, _ in found), found  # one finding per instance


@pytest.mark.parametrize(("tf_type", "lone"), [("aws_instance", _with(P5, placementGroup=None)),
                                               ("alicloud_instance", _with(ALI, deploymentSetId=None))])
def test_count_groups_nodes_for_the_placement_advice(tmp_path: Path, tf_type: str, lone: dict[str, Any]) -> None:
    """A node alone in a resource has no group to advise on; Terraform's count shows the group."""
    plan = write_plan(tmp_path / "p.json", [(tf_type, f"gpu[{i}]", lone) for i in range(4)])
    advice = [f for f in check_paths([plan]).findings if f.rule.id == "MF-ADV-001"]
    assert len(advice) == 4 and all(f.level == "advisory" and "4 nodes" in f.message for f in advice)
    single = write_plan(tmp_path / "q.json", [(tf_type, "gpu", lone)])
    assert not [f for f in check_paths([single]).findings if f.rule.id == "MF-ADV-001"]


def test_unknown_values_fail_unless_configured(tmp_path: Path) -> None:
    bad = _with(P5, rootBlockDevice={"encrypted": PULUMI_UNKNOWN})
    plan = write_plan(tmp_path / "p.json", [("aws_instance", "gpu", bad)])
    strict = [f for f in check_paths([plan]).findings if f.rule.id == "MF-ENC-001"]
    assert len(strict) == 1 and strict[0].unknown and strict[0].blocking
    advisory = check_paths([plan], parse_config({"unknown": "advisory"}))
    assert [f.level for f in advisory.findings if f.rule.id == "MF-ENC-001"] == ["advisory"]
    assert advisory.exit_code == 0
    ignored = check_paths([plan], parse_config({"rules": {"MF-ENC-001": {"unknown": "ignore"}}}))
    assert not [f for f in ignored.findings if f.rule.id == "MF-ENC-001"]
    assert run_pack("MF-ENC-001", AWS_INSTANCE, bad, config={"unknown": "ignore"}) == []
    assert run_pack("MF-ENC-001", AWS_INSTANCE, bad) != []


def test_enforcement_is_configurable_per_rule(tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "p.json", [("aws_instance", "gpu", _with(P5, associatePublicIpAddress=True))])
    assert check_paths([plan]).exit_code == 1
    relaxed = check_paths([plan], parse_config({"rules": {"MF-NET-001": "advisory"}}))
    assert relaxed.exit_code == 0 and [f.level for f in relaxed.findings] == ["advisory"]
    off = check_paths([plan], parse_config({"rules": {"MF-NET-001": {"enforcement": "disabled"}}}))
    assert off.findings == []
    allowed = check_paths([plan], parse_config({"rules": {"MF-NET-001": {"allow": True}}}))
    assert allowed.findings == []


def test_non_gpu_nodes_may_be_public_but_unknown_types_may_not() -> None:
    bastion = _with(P5, instanceType="t3.micro", associatePublicIpAddress=True)
    assert run_pack("MF-NET-001", AWS_INSTANCE, bastion) == []
    mystery = _with(P5, instanceType="zz9.huge", associatePublicIpAddress=True)
    assert run_pack("MF-NET-001", AWS_INSTANCE, mystery)
    assert run_pack("MF-NET-001", AWS_INSTANCE, bastion, config={"gpu_only": False})


class _Reads(dict[str, Any]):
    """Props that remember which attributes a builder looked at (a plain dict to the builders)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)


def test_a_plan_keeps_the_unknowns_of_every_attribute_a_builder_reads() -> None:
    """A plan's after_unknown is cut down to native.FIELDS[type] once per count block. An attribute a builder reads
    but FIELDS leaves out would lose its 'known after apply' and read as absent: a default where the rules must
    see UNKNOWN (fail open). Every builder, on every case's props, on no props and on all-unknown props, reads only
    attributes FIELDS names."""
    from metalfleet.policies.adapters.common import Assumptions, snake_keys
    from metalfleet.policies.adapters.native import FIELDS, NATIVE, native_resources
    from metalfleet.policies.model import UNKNOWN, Location

    missing: dict[str, set[str]] = {}
    tried: dict[str, list[dict[str, Any]]] = {t: [{}] for t in NATIVE}
    for case in CASES:
        tried[TF_TYPES[case.type]] += [snake_keys(p) for p in (case.good, case.bad) if p is not None]
    for tf_type, variants in tried.items():
        assert tf_type in FIELDS, f"{tf_type} has a builder but no FIELDS entry"
        variants.append(dict.fromkeys(FIELDS[tf_type], UNKNOWN))
        for props in variants:
            for assume in (Assumptions(), Assumptions(ebs_encryption_by_default=True,
                                                      imds_tokens_required_by_default=True)):
                seen = _Reads(props)
                native_resources(tf_type, seen, "this", Location("plan.json"), "terraform", assume, None, 2)
                if seen.read - set(FIELDS[tf_type]):
                    missing.setdefault(tf_type, set()).update(seen.read - set(FIELDS[tf_type]))
    assert missing == {}


def test_collections_known_only_after_apply_are_unknown_not_a_crash(tmp_path: Path) -> None:
    """A launch template whose network interfaces, and instances whose data disks, are known only after apply:
    reported as unknown (a mandatory failure by default), never a traceback and never a pass."""
    plan = write_plan(tmp_path / "plan.json", [
        ("aws_launch_template", "lt", {"instanceType": "p5.48xlarge", "metadataOptions": {"httpTokens": "required"},
                                       "networkInterfaces": PULUMI_UNKNOWN}),
        ("alicloud_instance", "ali", _with(ALI, dataDisks=PULUMI_UNKNOWN)),
        ("huaweicloud_bms_instance", "bms", _with(HW_BMS_PROPS, dataDisks=PULUMI_UNKNOWN)),
    ])
    report = check_paths([plan])
    unknown = {(f.rule.id, f.resource_name) for f in report.findings if f.unknown and f.blocking}
    assert ("MF-NET-001", "aws_launch_template.lt") in unknown
    assert ("MF-ENC-001", "alicloud_instance.ali data disks") in unknown
    assert ("MF-ENC-001", "huaweicloud_bms_instance.bms data disks") in unknown
