"""Issue 21's defects in reading native resources, each on plans laid out as ``terraform show -json`` writes them
(planned_values + resource_changes with after / after_unknown; blocks as lists of one object) and, where the
adapter reads Pulumi inputs, through the CrossGuard pack:

- launch configurations and the older alicloud launch template name are read like their modern counterparts;
- ``metadata_options { http_endpoint = "disabled" }`` is no IMDSv1 finding (no metadata service to reach);
- under MF-NET-001's ``gpu_only``, only a type known not to be GPU is skipped; an unknown one is judged and the
  finding says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from metalfleet.policies.adapters.common import gpu_type
from metalfleet.policies.check import check_paths
from metalfleet.policies.config import parse_config
from metalfleet.providers.catalog import load_catalog

from .cases import PULUMI_UNKNOWN, run_pack, write_plan
from .test_rules_native import ALI, P5, _with

AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_LT = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_LC = "aws:ec2/launchConfiguration:LaunchConfiguration"
ALI_OLD_LT = "alicloud:ecs/launchTemplate:LaunchTemplate"

#: A compliant launch configuration of GPU nodes (Pulumi-style inputs; cases.write_plan makes the plan).
LC = {"name": "gpu-lc", "imageId": "ami-0123456789abcdef0", "instanceType": "p5.48xlarge",
      "associatePublicIpAddress": False, "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required"},
      "rootBlockDevice": {"encrypted": True, "volumeSize": 500},
      "ebsBlockDevices": [{"deviceName": "/dev/sdf", "encrypted": True, "volumeSize": 1000}]}
#: A compliant alicloud_launch_template (the deprecated name), with the flat system disk arguments it always had.
ALI_LT = {"name": "gpu-lt", "imageId": "ubuntu_22_04", "instanceType": "ecs.ebmgn8v.48xlarge",
          "internetMaxBandwidthOut": 0, "systemDisk": {"category": "cloud_essd", "size": 200, "encrypted": True},
          "dataDisks": [{"name": "scratch", "size": 2000, "category": "cloud_essd", "encrypted": True}]}


def _findings(tmp_path: Path, resources: list[tuple[str, str, Mapping[str, Any]]], rule: str | None = None,
              config: dict[str, Any] | None = None) -> list[tuple[str, str, str, bool]]:
    """(rule, resource, message, unknown) of every finding of ``rule`` (all rules when None) in a plan."""
    plan = write_plan(tmp_path / "plan.json", resources)
    report = check_paths([plan], parse_config(config or {}))
    return [(f.rule.id, f.resource_name, f.message, f.unknown) for f in report.findings
            if rule is None or f.rule.id == rule]


def _rules(found: list[tuple[str, str, str, bool]]) -> set[tuple[str, str]]:
    return {(r, name) for r, name, _, _ in found}


# ------------------------------------------------------------------------------------------ launch configurations


def test_a_compliant_launch_configuration_has_no_mandatory_finding(tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "plan.json", [("aws_launch_configuration", "gpu", LC)])
    report = check_paths([plan])
    assert report.resources >= 3  # the node and its two devices are read, not dropped
    assert report.blocking == [], [f.message for f in report.blocking]


@pytest.mark.parametrize(("change", "rule", "resource", "says"), [
    ({"rootBlockDevice": {"volumeSize": 500}}, "MF-ENC-001", "aws_launch_configuration.gpu root device",
     "root_block_device.encrypted defaults to false"),
    ({"rootBlockDevice": {"encrypted": False, "volumeSize": 500}}, "MF-ENC-001",
     "aws_launch_configuration.gpu root device", "is not encrypted"),
    ({"ebsBlockDevices": [{"deviceName": "/dev/sdf", "volumeSize": 1000}]}, "MF-ENC-001",
     "aws_launch_configuration.gpu device /dev/sdf", "ebs_block_device.encrypted defaults to false"),
    ({"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "optional"}}, "MF-NET-005",
     "aws_launch_configuration.gpu", "IMDSv1"),
    ({"metadataOptions": None}, "MF-NET-005", "aws_launch_configuration.gpu",
     "the default state is optional"),
    ({"associatePublicIpAddress": True}, "MF-NET-001", "aws_launch_configuration.gpu", "gets a public address"),
])
def test_a_launch_configuration_is_read_like_a_launch_template(tmp_path: Path, change: dict[str, Any], rule: str,
                                                               resource: str, says: str) -> None:
    found = _findings(tmp_path, [("aws_launch_configuration", "gpu", _with(LC, **change))], rule)
    assert any(name == resource and says in message for _, name, message, _ in found), found


def test_launch_configuration_values_unknown_at_plan_time_fail_closed(tmp_path: Path) -> None:
    """root_block_device is Optional+Computed: unknown when not configured (the AMI decides), so unknown."""
    found = _findings(tmp_path, [("aws_launch_configuration", "gpu", _with(
        LC, rootBlockDevice=PULUMI_UNKNOWN, associatePublicIpAddress=PULUMI_UNKNOWN))])
    unknown = {(r, name) for r, name, _, u in found if u}
    assert ("MF-ENC-001", "aws_launch_configuration.gpu root device") in unknown
    assert ("MF-NET-001", "aws_launch_configuration.gpu") in unknown


def test_an_account_that_encrypts_by_default_covers_the_launch_configuration(tmp_path: Path) -> None:
    bare = _with(LC, rootBlockDevice={"volumeSize": 500}, ebsBlockDevices=[{"deviceName": "/dev/sdf"}])
    assert _rules(_findings(tmp_path, [("aws_launch_configuration", "gpu", bare)], "MF-ENC-001")) == {
        ("MF-ENC-001", "aws_launch_configuration.gpu root device"),
        ("MF-ENC-001", "aws_launch_configuration.gpu device /dev/sdf")}
    assert _findings(tmp_path, [("aws_launch_configuration", "gpu", bare),
                                ("aws_ebs_encryption_by_default", "on", {"enabled": True})], "MF-ENC-001") == []


def test_a_launch_configuration_through_the_pulumi_pack() -> None:
    assert run_pack("MF-ENC-001", AWS_LC, LC) == []
    assert any("root device is not encrypted" in m for m in run_pack(
        "MF-ENC-001", AWS_LC, _with(LC, rootBlockDevice={"volumeSize": 500})))
    assert run_pack("MF-NET-005", AWS_LC, LC) == []
    assert any("IMDSv1" in m for m in run_pack("MF-NET-005", AWS_LC, _with(LC, metadataOptions=None)))
    assert any("gets a public address" in m for m in run_pack(
        "MF-NET-001", AWS_LC, _with(LC, associatePublicIpAddress=True)))


# ------------------------------------------------------------------------------------------ alicloud_launch_template


@pytest.mark.parametrize("tf_type", ["alicloud_launch_template", "alicloud_ecs_launch_template"])
def test_the_older_alicloud_launch_template_name_is_read_like_the_new_one(tmp_path: Path, tf_type: str) -> None:
    assert _findings(tmp_path, [(tf_type, "lt", ALI_LT)], "MF-ENC-001") == []
    bad = _with(ALI_LT, systemDisk={"category": "cloud_essd", "size": 200},
                dataDisks=[{"name": "scratch", "size": 2000}], internetMaxBandwidthOut=50)
    found = _findings(tmp_path, [(tf_type, "lt", bad)])
    assert {("MF-ENC-001", f"{tf_type}.lt system disk"), ("MF-ENC-001", f"{tf_type}.lt data disk 0"),
            ("MF-NET-001", f"{tf_type}.lt"), ("MF-NET-005", f"{tf_type}.lt")} <= _rules(found), found
    assert any("system_disk.encrypted unset" in m for r, _, m, _ in found if r == "MF-ENC-001"), found


def test_the_deprecated_flat_system_disk_arguments_describe_an_unencrypted_system_disk(tmp_path: Path) -> None:
    """alicloud_launch_template's own system_disk_category / system_disk_size have no encryption setting."""
    flat = _with(ALI_LT, systemDisk=None, systemDiskCategory="cloud_essd", systemDiskSize=200)
    found = _findings(tmp_path, [("alicloud_launch_template", "lt", flat)], "MF-ENC-001")
    assert _rules(found) == {("MF-ENC-001", "alicloud_launch_template.lt system disk")}, found


def test_the_older_alicloud_launch_template_through_the_pulumi_pack() -> None:
    assert run_pack("MF-ENC-001", ALI_OLD_LT, ALI_LT) == []
    assert any("data disk 0 is not encrypted" in m for m in run_pack(
        "MF-ENC-001", ALI_OLD_LT, _with(ALI_LT, dataDisks=[{"size": 100}])))
    assert any("gets a public address" in m for m in run_pack(
        "MF-NET-001", ALI_OLD_LT, _with(ALI_LT, internetMaxBandwidthOut=10)))


# ------------------------------------------------------------------------------------------ http_endpoint disabled


ENDPOINT_OFF = {"httpEndpoint": "disabled"}


@pytest.mark.parametrize(("tf_type", "props"), [
    ("aws_instance", _with(P5, metadataOptions=ENDPOINT_OFF)),
    ("aws_instance", _with(P5, metadataOptions={"httpEndpoint": "disabled", "httpTokens": "optional"})),
    ("aws_launch_template", {"instanceType": "p5.48xlarge", "metadataOptions": ENDPOINT_OFF}),
    ("aws_launch_configuration", _with(LC, metadataOptions=ENDPOINT_OFF)),
])
def test_a_disabled_metadata_endpoint_passes_the_imds_rule(tmp_path: Path, tf_type: str,
                                                           props: dict[str, Any]) -> None:
    assert _findings(tmp_path, [(tf_type, "n", props)], "MF-NET-005") == []


@pytest.mark.parametrize(("tf_type", "base"), [
    ("aws_instance", P5), ("aws_launch_template", {"instanceType": "p5.48xlarge"}), ("aws_launch_configuration", LC)])
@pytest.mark.parametrize("options", [
    {"httpEndpoint": "enabled", "httpTokens": "optional"}, {"httpEndpoint": "enabled"}, {"httpTokens": "optional"},
    {}, None, {"httpEndpoint": PULUMI_UNKNOWN, "httpTokens": "optional"}])
def test_an_enabled_or_absent_endpoint_without_required_tokens_still_fails(
        tmp_path: Path, tf_type: str, base: dict[str, Any], options: dict[str, Any] | None) -> None:
    """Only a known "disabled" passes: enabled, absent (the default, enabled) and unknown at plan time fail."""
    found = _findings(tmp_path, [(tf_type, "n", _with(base, metadataOptions=options))], "MF-NET-005")
    assert [(r, name) for r, name, _, _ in found] == [("MF-NET-005", f"{tf_type}.n")], found


def test_the_view_says_why_a_disabled_endpoint_has_no_finding() -> None:
    """The engine records no passes; the view's note keeps the reason for anyone reading the views."""
    from metalfleet.policies.adapters.common import Assumptions, snake_keys
    from metalfleet.policies.adapters.native import native_resources
    from metalfleet.policies.model import ComputeNode, Location

    props = snake_keys(_with(P5, metadataOptions=ENDPOINT_OFF))
    node = next(v for v in native_resources("aws_instance", props, "aws_instance.n", Location("plan.json"),
                                            "terraform", Assumptions()) if isinstance(v, ComputeNode))
    assert node.metadata_tokens_required is None
    assert "http_endpoint = disabled" in node.notes["metadata_tokens_required"]


def test_pulumi_metadata_options_http_endpoint_is_read() -> None:
    for t, base in ((AWS_INSTANCE, P5), (AWS_LT, {"instanceType": "p5.48xlarge"}), (AWS_LC, LC)):
        assert run_pack("MF-NET-005", t, _with(base, metadataOptions=ENDPOINT_OFF)) == [], t
        assert any("IMDSv1" in m for m in run_pack("MF-NET-005", t, _with(
            base, metadataOptions={"httpEndpoint": "enabled", "httpTokens": "optional"}))), t


# ------------------------------------------------------------------------------------------ gpu_only


def test_gpu_only_skips_only_types_known_not_to_be_gpu(tmp_path: Path) -> None:
    public: list[tuple[str, str, Mapping[str, Any]]] = [
        ("aws_instance", "bastion", _with(P5, instanceType="t3.micro", associatePublicIpAddress=True)),
        ("aws_instance", "fpga", _with(P5, instanceType="f1.2xlarge", associatePublicIpAddress=True)),
        ("aws_instance", "later", _with(P5, instanceType=PULUMI_UNKNOWN, associatePublicIpAddress=True)),
        ("aws_launch_configuration", "lc", _with(LC, instanceType="zz9.huge", associatePublicIpAddress=True)),
        ("alicloud_instance", "web", _with(ALI, instanceType="ecs.g7.large", internetMaxBandwidthOut=10)),
        ("alicloud_instance", "scc", _with(ALI, instanceType="ecs.sccgn7ex.32xlarge", internetMaxBandwidthOut=10)),
        ("aws_instance", "gpu", _with(P5, associatePublicIpAddress=True)),
    ]
    found = {name: message for _, name, message, _ in _findings(tmp_path, public, "MF-NET-001")}
    assert set(found) == {"aws_instance.fpga", "aws_instance.later", "aws_launch_configuration.lc",
                          "alicloud_instance.scc", "aws_instance.gpu"}, found
    assert "instance type f1.2xlarge is unknown to metalfleet's offering catalogue" in found["aws_instance.fpga"]
    assert "instance type ecs.sccgn7ex.32xlarge is unknown" in found["alicloud_instance.scc"]
    assert "its instance type is unknown at plan time" in found["aws_instance.later"]
    assert "judged as a possible GPU node" not in found["aws_instance.gpu"]  # a known GPU type needs no excuse
    everything = _findings(tmp_path, public, "MF-NET-001", {"rules": {"MF-NET-001": {"gpu_only": False}}})
    assert {name for _, name, _, _ in everything} == {f"{t}.{name}" for t, name, _ in public}
    assert not any("judged as a possible GPU node" in m for _, _, m, _ in everything)


def test_an_unknown_type_whose_address_is_unknown_says_both(tmp_path: Path) -> None:
    found = _findings(tmp_path, [("aws_instance", "n", _with(P5, instanceType="zz9.huge",
                                                             associatePublicIpAddress=None))], "MF-NET-001")
    assert len(found) == 1 and found[0][3], found
    assert "zz9.huge is unknown to metalfleet's offering catalogue" in found[0][2]


def test_unknown_types_are_judged_through_the_pulumi_pack() -> None:
    mystery = run_pack("MF-NET-001", AWS_INSTANCE, _with(P5, instanceType="f1.2xlarge", associatePublicIpAddress=True))
    assert mystery and "f1.2xlarge is unknown to metalfleet's offering catalogue" in mystery[0]
    assert run_pack("MF-NET-001", AWS_INSTANCE, _with(P5, instanceType="t3.micro", associatePublicIpAddress=True)) == []


@pytest.mark.parametrize("provider", ["aws", "alibaba", "huawei"])
def test_every_catalogue_gpu_type_is_known_as_gpu(provider: str) -> None:
    """The finding says an unjudged type is unknown to the catalogue: true only while every GPU type the catalogue
    sells is one the adapters know as GPU (a new family in the catalogue must reach the GPU families too)."""
    offerings = load_catalog().of(provider)
    assert offerings, f"the catalogue has no {provider} offering"
    assert {o.name: gpu_type(provider, o.name) for o in offerings if o.gpu_count} == \
        {o.name: True for o in offerings if o.gpu_count}


def test_tags_are_not_asked_of_a_launch_configuration(tmp_path: Path) -> None:
    """aws_launch_configuration has no tags (the autoscaling group's propagate): no tag finding to invent."""
    assert _findings(tmp_path, [("aws_launch_configuration", "gpu", LC)], "MF-TAG-001") == []
