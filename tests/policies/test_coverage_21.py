"""Issue 21, coverage by risk: every resource type that carries a disk, an address or a metadata option is read.

Spot instance requests and spot fleets' launch specifications, Alibaba ESS scaling configurations and Huawei AS
configurations are judged like the instances they make; an autoscaling group or fleet is judged on the template it
launches from (the findings name the template, the group adds none), with the instance types it overrides the
template's with; an EIP bound to a network interface attached to an instance makes that instance public; and an
address bound to an instance of the plan gives one MF-NET-001 finding, the instance's, not a second on the address.
Each type has a case that must be reported and one that must not, in plans shaped as ``terraform show -json``
writes them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metalfleet.policies.adapters.pulumi import pulumi_resources
from metalfleet.policies.check import check_paths
from metalfleet.policies.config import parse_config
from metalfleet.policies.docs import coverage
from metalfleet.policies.model import ComputeNode, Volume
from tests.policies.test_plan_semantics_21 import R, Ref, plan, ref
from tests.policies.test_plan_semantics_eip_volume import aws_eip, aws_instance

Found = dict[str, set[str]]


def findings(path: Path, doc: dict[str, Any], config: dict[str, Any] | None = None) -> Found:
    """rule id -> the resources it reports on ``doc``."""
    path.write_text(json.dumps(doc, indent=1))
    out: Found = {}
    for f in check_paths([path], parse_config(config) if config else None).findings:
        out.setdefault(f.rule.id, set()).add(f.resource_name)
    return out


def nested(doc: dict[str, Any], address: str, attr: str, expression: Any) -> dict[str, Any]:
    """Give one resource's configuration a nested block expression (``launch_template { id = ... }`` is written as
    ``[{"id": {"references": [...]}}]``), which :func:`plan` writes only as constants."""
    for r in doc["configuration"]["root_module"]["resources"]:
        if r["address"] == address:
            r["expressions"][attr] = expression
    return doc


def refs(target: str, attr: str = "id") -> dict[str, Any]:
    return {"references": [f"{target}.{attr}", target]}


TOKENS = {"http_endpoint": "enabled", "http_tokens": "required"}


# ------------------------------------------------------------------------------------------ AWS spot


def spot_instance(public: bool, encrypted: bool, tokens: str) -> R:
    after = {"ami": "ami-1", "instance_type": "p5.48xlarge", "associate_public_ip_address": public,
             "subnet_id": "subnet-1", "spot_price": "30", "metadata_options": [{"http_tokens": tokens}],
             "root_block_device": [{"encrypted": encrypted, "volume_size": 500}], "tags": None}
    return R("aws_spot_instance_request", "gpu", after, {"id": True, "spot_instance_id": True}, {"ami": "ami-1"})


def test_a_spot_instance_request_is_judged_as_an_instance(tmp_path: Path) -> None:
    bad = findings(tmp_path / "a.json", plan([spot_instance(True, False, "optional")]))
    assert "aws_spot_instance_request.gpu" in bad["MF-NET-001"], bad
    assert "aws_spot_instance_request.gpu" in bad["MF-NET-005"], bad
    assert "aws_spot_instance_request.gpu root volume" in bad["MF-ENC-001"], bad
    good = findings(tmp_path / "b.json", plan([spot_instance(False, True, "required")]))
    for rule in ("MF-NET-001", "MF-NET-005", "MF-ENC-001"):
        assert rule not in good, good


def test_an_eip_on_a_spot_instance_makes_it_public_once(tmp_path: Path) -> None:
    doc = plan([spot_instance(False, True, "required"),
                aws_eip(instance=ref("aws_spot_instance_request.gpu", "spot_instance_id"))])
    assert findings(tmp_path / "p.json", doc)["MF-NET-001"] == {"aws_spot_instance_request.gpu"}


def spot_fleet(public: bool, encrypted: bool, itype: str = "p4d.24xlarge") -> R:
    spec = {"ami": "ami-1", "instance_type": itype, "associate_public_ip_address": public,
            "root_block_device": [{"encrypted": encrypted, "volume_size": 200, "kms_key_id": "arn:aws:kms:k"}],
            "ebs_block_device": [{"device_name": "/dev/sdf", "encrypted": True, "kms_key_id": "arn:aws:kms:k"}],
            "tags": None}
    return R("aws_spot_fleet_request", "fleet", {"iam_fleet_role": "arn:aws:iam::1:role/f", "target_capacity": 2,
                                                 "launch_specification": [spec]}, {"id": True}, {})


def test_a_spot_fleets_launch_specifications_are_judged(tmp_path: Path) -> None:
    node = "aws_spot_fleet_request.fleet launch_specification 0"
    bad = findings(tmp_path / "a.json", plan([spot_fleet(True, False)]))
    assert bad["MF-NET-001"] == {node}, bad
    assert bad["MF-NET-005"] == {node}, bad  # no metadata options: the account default, tokens optional
    assert bad["MF-ENC-001"] == {f"{node} root device"}, bad
    # private, encrypted, and an account that requires metadata tokens
    defaults = R("aws_ec2_instance_metadata_defaults", "imds", {"http_tokens": "required"}, {}, {})
    good = findings(tmp_path / "b.json", plan([spot_fleet(False, True), defaults]))
    for rule in ("MF-NET-001", "MF-NET-005", "MF-ENC-001"):
        assert rule not in good, good


# ------------------------------------------------------------------------------------------ groups and fleets


def template(itype: str = "t3.large") -> R:
    """A launch template of a general-purpose type whose interfaces get public addresses."""
    after = {"instance_type": itype, "metadata_options": [TOKENS],
             "network_interfaces": [{"associate_public_ip_address": "true", "device_index": 0}],
             "tag_specifications": [{"resource_type": "instance", "tags": {"owner": "ml", "cost-center": "4711"}}]}
    return R("aws_launch_template", "lt", after, {"id": True, "latest_version": True}, {})


def asg(overrides: list[str]) -> R:
    after = {"max_size": 4, "min_size": 0, "mixed_instances_policy": [{"launch_template": [{
        "launch_template_specification": [{"version": "$Latest"}],
        "override": [{"instance_type": t} for t in overrides]}]}]}
    return R("aws_autoscaling_group", "gpu", after, {"id": True, "arn": True}, {})


ASG_TEMPLATE = [{"launch_template": [{"launch_template_specification": [{"launch_template_id": refs(
    "aws_launch_template.lt")}]}]}]


def test_a_group_that_launches_a_template_as_gpu_instances_judges_the_template_as_gpu(tmp_path: Path) -> None:
    alone = findings(tmp_path / "a.json", plan([template()]))
    assert "MF-NET-001" not in alone, alone  # t3.large: known not to be a GPU type
    doc = nested(plan([template(), asg(["m5.large", "p5.48xlarge"])]), "aws_autoscaling_group.gpu",
                        "mixed_instances_policy", ASG_TEMPLATE)
    launched = findings(tmp_path / "b.json", doc)
    assert launched["MF-NET-001"] == {"aws_launch_template.lt"}, launched  # on the template, none on the group
    assert not any("aws_autoscaling_group.gpu" in names for names in launched.values()), launched
    doc = nested(plan([template(), asg(["m5.large", "c5.xlarge"])]), "aws_autoscaling_group.gpu",
                        "mixed_instances_policy", ASG_TEMPLATE)
    assert "MF-NET-001" not in findings(tmp_path / "c.json", doc)


def test_a_group_of_a_launch_configuration_is_judged_on_the_configuration(tmp_path: Path) -> None:
    lc = R("aws_launch_configuration", "lc", {"image_id": "ami-1", "instance_type": "g5.xlarge",
                                              "associate_public_ip_address": True, "metadata_options": [TOKENS],
                                              "root_block_device": [{"encrypted": False}]}, {"id": True}, {})
    group = R("aws_autoscaling_group", "gpu", {"max_size": 2, "min_size": 0}, {"id": True, "launch_configuration":
                                                                               True},
              {"launch_configuration": ref("aws_launch_configuration.lc", "name")})
    found = findings(tmp_path / "p.json", plan([lc, group]))
    assert found["MF-NET-001"] == {"aws_launch_configuration.lc"}, found
    assert found["MF-ENC-001"] == {"aws_launch_configuration.lc root device"}, found
    assert not any("aws_autoscaling_group.gpu" in names for names in found.values()), found


def test_an_ec2_fleet_overrides_its_templates_instance_type(tmp_path: Path) -> None:
    def fleet(itype: str) -> R:
        return R("aws_ec2_fleet", "fleet", {"type": "instant", "launch_template_config": [{
            "launch_template_specification": [{"version": "1"}], "override": [{"instance_type": itype}]}]},
                 {"id": True}, {})

    config = [{"launch_template_specification": [{"launch_template_id": refs("aws_launch_template.lt")}]}]
    doc = nested(plan([template(), fleet("p4d.24xlarge")]), "aws_ec2_fleet.fleet", "launch_template_config",
                        config)
    assert findings(tmp_path / "a.json", doc)["MF-NET-001"] == {"aws_launch_template.lt"}
    doc = nested(plan([template(), fleet("m6i.large")]), "aws_ec2_fleet.fleet", "launch_template_config",
                        config)
    assert "MF-NET-001" not in findings(tmp_path / "b.json", doc)


def test_an_override_unknown_at_plan_time_judges_the_template_as_a_possible_gpu_node(tmp_path: Path) -> None:
    group = asg([])
    group.unknown["mixed_instances_policy"] = [{"launch_template": [{"override": [{"instance_type": True}]}]}]
    group.after["mixed_instances_policy"][0]["launch_template"][0]["override"] = [{}]
    doc = nested(plan([template(), group]), "aws_autoscaling_group.gpu", "mixed_instances_policy",
                        ASG_TEMPLATE)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    [f] = [f for f in check_paths([path]).findings if f.rule.id == "MF-NET-001"]
    assert f.resource_name == "aws_launch_template.lt" and "instance type is unknown at plan time" in f.message, f


# ------------------------------------------------------------------------------------------ network interfaces


def eni(attached: bool) -> R:
    config: dict[str, Any] = {"subnet_id": "subnet-1"}
    return R("aws_network_interface", "nic", {"subnet_id": "subnet-1", "attachment": [{"device_index": 1}]
                                              if attached else []}, {"id": True}, config)


def eip_on_eni() -> R:
    return R("aws_eip", "ip", {"domain": "vpc", "tags": None}, {"id": True, "network_interface": True},
             {"domain": "vpc", "network_interface": ref("aws_network_interface.nic")})


def test_an_eip_on_an_interface_attached_to_an_instance_makes_the_instance_public(tmp_path: Path) -> None:
    attachment = [{"instance": refs("aws_instance.gpu"), "device_index": {"constant_value": 1}}]
    doc = nested(plan([aws_instance(), eni(True), eip_on_eni()]), "aws_network_interface.nic", "attachment",
                 attachment)
    assert findings(tmp_path / "a.json", doc)["MF-NET-001"] == {"aws_instance.gpu"}
    # the same through an aws_network_interface_attachment
    att = R("aws_network_interface_attachment", "nic", {"device_index": 1}, {"id": True},
            {"instance_id": ref("aws_instance.gpu"), "network_interface_id": ref("aws_network_interface.nic")})
    doc = plan([aws_instance(), eni(False), eip_on_eni(), att])
    assert findings(tmp_path / "b.json", doc)["MF-NET-001"] == {"aws_instance.gpu"}


def test_an_eip_on_an_interface_attached_to_no_instance_of_the_plan_is_reported_on_itself(tmp_path: Path) -> None:
    found = findings(tmp_path / "p.json", plan([aws_instance(), eni(False), eip_on_eni()]))
    assert found["MF-NET-001"] == {"aws_eip.ip"}, found  # bound to the interface; the instance stays private


# ------------------------------------------------------------------------------------------ one finding per instance


def test_a_public_eip_on_a_bastion_gives_one_finding_for_the_one_instance(tmp_path: Path) -> None:
    """An instance, an aws_eip naming it and an aws_eip_association binding them: one MF-NET-001 finding, the
    instance's (it names the address), with gpu_only off so a t3 bastion is judged at all."""
    assoc = R("aws_eip_association", "ip", {"allow_reassociation": None}, {"id": True, "instance_id": True,
                                                                             "allocation_id": True},
              {"instance_id": ref("aws_instance.gpu"), "allocation_id": ref("aws_eip.ip")})
    doc = plan([aws_instance(itype="t3.micro"), aws_eip(instance=ref("aws_instance.gpu")), assoc])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    config = parse_config({"rules": {"MF-NET-001": {"gpu_only": False}}})
    [f] = [f for f in check_paths([path], config).findings if f.rule.id == "MF-NET-001"]
    assert f.resource_name == "aws_instance.gpu" and "aws_eip" in f.message, f


# ------------------------------------------------------------------------------------------ Alibaba Cloud


def ess(bandwidth: int, encrypted: bool) -> R:
    after = {"scaling_group_id": "asg-1", "image_id": "ubuntu_22_04_x64", "instance_type": "ecs.gn7i-c8g1.2xlarge",
             "internet_max_bandwidth_out": bandwidth, "system_disk_encrypted": encrypted,
             "data_disk": [{"size": 500, "category": "cloud_essd", "encrypted": encrypted, "kms_key_id": "k-1"}],
             "tags": {"owner": "ml", "cost-center": "4711"}}
    return R("alicloud_ess_scaling_configuration", "gpu", after, {"id": True}, {})


def test_an_ess_scaling_configuration_is_judged_as_the_instances_it_makes(tmp_path: Path) -> None:
    name = "alicloud_ess_scaling_configuration.gpu"
    bad = findings(tmp_path / "a.json", plan([ess(10, False)]))
    assert bad["MF-NET-001"] == {name}, bad
    assert bad["MF-ENC-001"] == {f"{name} system disk", f"{name} data disk 0"}, bad
    assert name in bad["MF-NET-005"], bad  # no metadata options: ECS's default, token-optional
    good = findings(tmp_path / "b.json", plan([ess(0, True)]))
    for rule in ("MF-NET-001", "MF-ENC-001"):
        assert rule not in good, good


def test_an_ess_group_overrides_its_launch_templates_type(tmp_path: Path) -> None:
    lt = R("alicloud_ecs_launch_template", "lt", {"instance_type": "ecs.g7.large", "internet_max_bandwidth_out": 5,
                                                  "http_tokens": "required"}, {"id": True}, {})
    group = R("alicloud_ess_scaling_group", "gpu", {"min_size": 0, "max_size": 4, "launch_template_override": [
        {"instance_type": "ecs.gn7i-c8g1.2xlarge"}]}, {"id": True, "launch_template_id": True},
              {"launch_template_id": ref("alicloud_ecs_launch_template.lt")})
    assert "MF-NET-001" not in findings(tmp_path / "a.json", plan([lt]))
    assert findings(tmp_path / "b.json", plan([lt, group]))["MF-NET-001"] == {"alicloud_ecs_launch_template.lt"}


def test_an_alicloud_disk_attached_to_an_instance(tmp_path: Path) -> None:
    def disk(encrypted: bool) -> R:
        return R("alicloud_disk", "data", {"zone_id": "cn-1", "size": 500, "encrypted": encrypted}, {"id": True},
                 {"size": 500})

    att = R("alicloud_disk_attachment", "data", {}, {"id": True, "disk_id": True, "instance_id": True},
            {"disk_id": ref("alicloud_disk.data"), "instance_id": Ref(("data.alicloud_instances.x.ids[0]",))})
    assert findings(tmp_path / "a.json", plan([disk(False), att]))["MF-ENC-001"] == {"alicloud_disk.data"}
    assert "MF-ENC-001" not in findings(tmp_path / "b.json", plan([disk(True), att]))


# ------------------------------------------------------------------------------------------ Huawei Cloud


def as_configuration(public: bool, system_kms: str | None) -> R:
    config: dict[str, Any] = {"flavor": "p2s.2xlarge.8", "image": "img-1", "disk": [
        {"size": 40, "volume_type": "SSD", "disk_type": "SYS", "kms_id": system_kms},
        {"size": 500, "volume_type": "SSD", "disk_type": "DATA", "kms_id": "kms-1"}]}
    if public:
        config["public_ip"] = [{"eip": [{"ip_type": "5_bgp", "bandwidth": [{"size": 10, "share_type": "PER",
                                                                             "charging_mode": "traffic"}]}]}]
    return R("huaweicloud_as_configuration", "gpu", {"scaling_configuration_name": "gpu",
                                                     "instance_config": [config]}, {"id": True}, {})


def test_a_huawei_as_configuration_is_judged_as_the_instances_it_makes(tmp_path: Path) -> None:
    name = "huaweicloud_as_configuration.gpu"
    bad = findings(tmp_path / "a.json", plan([as_configuration(True, None)]))
    assert bad["MF-NET-001"] == {name}, bad
    assert bad["MF-ENC-001"] == {f"{name} system disk"}, bad  # the data disk names its KMS key
    good = findings(tmp_path / "b.json", plan([as_configuration(False, "kms-2")]))
    for rule in ("MF-NET-001", "MF-ENC-001"):
        assert rule not in good, good


def test_a_huawei_as_configuration_made_from_an_ecs_has_disks_the_input_does_not_show(tmp_path: Path) -> None:
    doc = plan([R("huaweicloud_as_configuration", "gpu", {"instance_config": [{"instance_id": "ecs-1"}]},
                  {"id": True}, {})])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    enc = [f for f in check_paths([path]).findings if f.rule.id == "MF-ENC-001"]
    assert [f.unknown for f in enc] == [True], enc


# ------------------------------------------------------------------------------------------ Pulumi and the table


def test_pulumi_types_of_the_new_readers() -> None:
    views = pulumi_resources("alicloud:ess/scalingConfiguration:ScalingConfiguration", {
        "scalingGroupId": "asg-1", "instanceType": "ecs.gn7i-c8g1.2xlarge", "internetMaxBandwidthOut": 5,
        "systemDiskEncrypted": False, "dataDisks": [{"size": 100, "encrypted": True}]}, "gpu")
    assert [(type(v).__name__, getattr(v, "public_ip", None), getattr(v, "encrypted", None)) for v in views] == [
        ("ComputeNode", True, None), ("Volume", None, False), ("Volume", None, True)]
    fleet = pulumi_resources("aws:ec2/spotFleetRequest:SpotFleetRequest", {"launchSpecifications": [
        {"ami": "ami-1", "instanceType": "p5.48xlarge", "associatePublicIpAddress": True,
         "rootBlockDevices": [{"encrypted": True}]}]}, "fleet")
    node = fleet[0]
    assert [type(v) for v in fleet] == [ComputeNode, Volume] and isinstance(node, ComputeNode) and node.public_ip


def test_the_coverage_table_lists_the_new_types_under_their_rules() -> None:
    table = coverage()
    assert "aws_spot_fleet_request" in table["MF-ENC-001"]["AWS"]
    assert "aws_spot_instance_request" in table["MF-NET-005"]["AWS"]
    assert "alicloud_ess_scaling_configuration" in table["MF-NET-001"]["Alibaba Cloud"]
    assert "huaweicloud_as_configuration" in table["MF-ENC-001"]["Huawei Cloud"]
    assert "aws_launch_configuration" not in table["MF-TAG-001"]["AWS"]  # it has no tags: the group's propagate
