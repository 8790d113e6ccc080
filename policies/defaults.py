"""What an absent attribute means, per provider resource, with where that is documented.

An adapter that finds an attribute absent takes its value from here and attaches the note to the resource, so
a finding says *why* a volume counts as unencrypted ("absent: ... defaults to false"). The table is also
printed in RULES.md. Sources are the providers' own documentation (the Terraform provider docs, which the
Pulumi bridged providers reuse for the same attributes) or, for metalfleet's own resources, its code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULTS", "Default", "note"]


@dataclass(frozen=True)
class Default:
    key: str
    value: Any
    meaning: str
    source: str

    @property
    def note(self) -> str:
        return f"absent: {self.meaning} [{self.source}]"


_TF_AWS = "Terraform AWS provider docs (registry: hashicorp/aws), also pulumi-aws"
_TF_ALI = "Terraform alicloud provider docs (aliyun/alicloud), also pulumi-alicloud"
_TF_HW = "Terraform huaweicloud provider docs (huaweicloud/huaweicloud), also pulumi-huaweicloud"

DEFAULTS: dict[str, Default] = {d.key: d for d in (
    # ---- AWS
    Default("aws_instance.root_block_device.encrypted", False,
            "root_block_device.encrypted defaults to false: the root volume is unencrypted unless EBS encryption by "
            "default is on in the account", f"{_TF_AWS}, aws_instance root_block_device"),
    Default("aws_instance.ebs_block_device.encrypted", False, "ebs_block_device.encrypted defaults to false",
            f"{_TF_AWS}, aws_instance ebs_block_device"),
    Default("aws_instance.metadata_options.http_tokens", "optional",
            "metadata_options.http_tokens defaults to optional (IMDSv1 allowed)",
            f"{_TF_AWS}, aws_instance metadata_options; EC2 User Guide, instance metadata options"),
    Default("aws_instance.associate_public_ip_address", None,
            "associate_public_ip_address unset: the subnet's map_public_ip_on_launch decides (true in a default "
            "VPC's default subnets)", f"{_TF_AWS}, aws_instance; Amazon VPC User Guide, default subnets"),
    Default("aws_instance.metadata_options.http_endpoint", "enabled",
            "metadata_options.http_endpoint defaults to enabled: the metadata service answers, so http_tokens "
            "decides (only disabled turns it off)",
            f"{_TF_AWS}, aws_instance / aws_launch_template / aws_launch_configuration metadata_options; EC2 Auto "
            "Scaling API InstanceMetadataOptions.HttpEndpoint (\"If the parameter is not specified, the default state "
            "is enabled.\")"),
    Default("aws_launch_configuration.root_block_device.encrypted", False,
            "root_block_device.encrypted defaults to false (a launch configuration cannot name a KMS key: an "
            "encrypted volume uses the account's default key)", f"{_TF_AWS}, aws_launch_configuration "
            "root_block_device; EC2 Auto Scaling API Ebs (no KmsKeyId member)"),
    Default("aws_launch_configuration.ebs_block_device.encrypted", False,
            "ebs_block_device.encrypted defaults to false (from snapshot_id: the snapshot's encryption)",
            f"{_TF_AWS}, aws_launch_configuration ebs_block_device"),
    Default("aws_launch_configuration.metadata_options.http_tokens", "optional",
            "metadata_options.http_tokens unset: the default state is optional (IMDSv1 allowed)",
            f"{_TF_AWS}, aws_launch_configuration metadata_options"),
    Default("aws_launch_template.block_device_mappings.ebs.encrypted", False,
            "block_device_mappings.ebs.encrypted unset: the volume follows its snapshot (unencrypted for public "
            "AMIs) unless EBS encryption by default is on", f"{_TF_AWS}, aws_launch_template block_device_mappings"),
    Default("aws_launch_template.metadata_options.http_tokens", "optional",
            "metadata_options.http_tokens unset: instances get the default, optional",
            f"{_TF_AWS}, aws_launch_template metadata_options"),
    Default("aws_ebs_volume.encrypted", False, "encrypted defaults to false", f"{_TF_AWS}, aws_ebs_volume"),
    Default("aws_ebs_encryption_by_default.enabled", True, "enabled defaults to true",
            f"{_TF_AWS}, aws_ebs_encryption_by_default"),
    Default("aws_ec2_capacity_reservation.end_date_type", "unlimited", "end_date_type defaults to unlimited",
            f"{_TF_AWS}, aws_ec2_capacity_reservation"),
    Default("aws_security_group_rule.protocol", None, "protocol -1 means all protocols and ports",
            f"{_TF_AWS}, aws_security_group ingress"),
    Default("aws_spot_fleet_request.launch_specification.metadata_options", "optional",
            "a launch_specification has no metadata_options (the API's SpotFleetLaunchSpecification has no "
            "MetadataOptions member): its instances get the default, http_tokens optional (IMDSv1 allowed), unless "
            "the account's instance metadata defaults require tokens",
            f"{_TF_AWS}, aws_spot_fleet_request launch_specification (\"similar but not identical inputs as "
            "aws_instance\"); EC2 API SpotFleetLaunchSpecification; EC2 User Guide, instance metadata options"),
    Default("aws_spot_fleet_request.launch_specification.encrypted", False,
            "launch_specification root_block_device / ebs_block_device encrypted unset: the volume follows its "
            "snapshot (unencrypted for public AMIs) unless EBS encryption by default is on",
            f"{_TF_AWS}, aws_spot_fleet_request launch_specification; EC2 API SpotFleetLaunchSpecification "
            "BlockDeviceMappings (EbsBlockDevice.Encrypted)"),
    # ---- Alibaba Cloud
    Default("alicloud_instance.system_disk_encrypted", False, "system_disk_encrypted defaults to false",
            f"{_TF_ALI}, alicloud_instance"),
    Default("alicloud_instance.data_disks.encrypted", False, "data_disks.encrypted defaults to false",
            f"{_TF_ALI}, alicloud_instance data_disks"),
    Default("alicloud_instance.http_tokens", "optional", "http_tokens defaults to optional (IMDSv1 allowed)",
            f"{_TF_ALI}, alicloud_instance"),
    Default("alicloud_instance.internet_max_bandwidth_out", 0,
            "internet_max_bandwidth_out unset is 0: no public IP (a value above 0 allocates one)",
            f"{_TF_ALI}, alicloud_instance; ECS API CreateInstance InternetMaxBandwidthOut"),
    Default("alicloud_ecs_disk.encrypted", False, "encrypted defaults to false", f"{_TF_ALI}, alicloud_ecs_disk"),
    Default("alicloud_security_group_rule.port_range", "-1/-1", "port_range defaults to -1/-1 (all ports)",
            f"{_TF_ALI}, alicloud_security_group_rule"),
    Default("alicloud_security_group_rule.policy", "accept", "policy defaults to accept",
            f"{_TF_ALI}, alicloud_security_group_rule"),
    Default("alicloud_ecs_launch_template.http_tokens", "optional", "http_tokens unset: optional",
            f"{_TF_ALI}, alicloud_ecs_launch_template"),
    Default("alicloud_ecs_launch_template.system_disk.encrypted", False,
            "system_disk.encrypted unset (or only the deprecated system_disk_category / _size / _name / "
            "_description, which have no encryption setting): the system disk is not encrypted",
            f"{_TF_ALI}, alicloud_ecs_launch_template and alicloud_launch_template system_disk; ECS API "
            "CreateLaunchTemplate SystemDisk.Encrypted (Default value: false)"),
    Default("alicloud_ecs_launch_template.data_disks.encrypted", False, "data_disks.encrypted defaults to false",
            f"{_TF_ALI}, alicloud_launch_template data_disks (Default to false); ECS API CreateLaunchTemplate "
            "DataDisk.N.Encrypted"),
    Default("alicloud_ess_scaling_configuration.system_disk_encrypted", False,
            "system_disk_encrypted unset: the system disk is not encrypted",
            f"{_TF_ALI}, alicloud_ess_scaling_configuration (system_disk_encrypted, Optional); ESS API "
            "CreateScalingConfiguration SystemDisk.Encrypted (default false)"),
    Default("alicloud_ess_scaling_configuration.data_disk.encrypted", False,
            "data_disk.encrypted defaults to false", f"{_TF_ALI}, alicloud_ess_scaling_configuration data_disk "
            "(\"Default value: `false`\")"),
    Default("alicloud_ess_scaling_configuration.internet_max_bandwidth_out", 0,
            "internet_max_bandwidth_out unset is 0: no public IP (a value above 0 allocates one)",
            f"{_TF_ALI}, alicloud_ess_scaling_configuration; ESS API CreateScalingConfiguration "
            "InternetMaxBandwidthOut (default 0)"),
    Default("alicloud_ess_scaling_configuration.http_tokens", "optional",
            "alicloud_ess_scaling_configuration has no metadata options (no http_tokens argument): its instances "
            "keep ECS's default, token-less metadata access allowed",
            f"{_TF_ALI}, alicloud_ess_scaling_configuration (argument list); ECS instance metadata, HttpTokens "
            "default optional"),
    # ---- Huawei Cloud
    Default("huaweicloud_bms_instance.disk_encryption", False,
            "huaweicloud_bms_instance has no disk encryption argument: its system and data disks are created "
            "without a KMS key (unencrypted)", f"{_TF_HW}, huaweicloud_bms_instance"),
    Default("huaweicloud_bms_instance.metadata_http_tokens", "optional",
            "huaweicloud_bms_instance has no metadata options; the BMS metadata configuration defaults "
            "http_tokens to optional", "Huawei Cloud BMS API reference, Updating the Metadata Configuration of a "
            "BMS (http_tokens default optional)"),
    Default("huaweicloud_compute_instance.system_disk_kms_key_id", None,
            "system_disk_kms_key_id unset: the system disk is not encrypted",
            f"{_TF_HW}, huaweicloud_compute_instance"),
    Default("huaweicloud_compute_instance.data_disks.kms_key_id", None,
            "data_disks.kms_key_id unset: the data disk is not encrypted", f"{_TF_HW}, huaweicloud_compute_instance"),
    Default("huaweicloud_compute_instance.metadata_http_tokens", "optional",
            "huaweicloud_compute_instance has no metadata options: token-less (IMDSv1-style) metadata access stays "
            "allowed", f"{_TF_HW}, huaweicloud_compute_instance"),
    Default("huaweicloud_evs_volume.kms_id", None, "kms_id unset: the disk is not encrypted",
            f"{_TF_HW}, huaweicloud_evs_volume"),
    Default("huaweicloud_networking_secgroup_rule.remote_ip_prefix", "0.0.0.0/0",
            "remote_ip_prefix unset (and no remote group): all addresses, the same as 0.0.0.0/0 (::/0 for IPv6)",
            f"{_TF_HW}, huaweicloud_networking_secgroup_rule"),
    Default("huaweicloud_networking_secgroup_rule.protocol", None, "protocol unset: all protocols",
            f"{_TF_HW}, huaweicloud_networking_secgroup_rule"),
    Default("huaweicloud_networking_secgroup_rule.ports", None, "no ports given: all ports",
            f"{_TF_HW}, huaweicloud_networking_secgroup_rule"),
    Default("huaweicloud_as_configuration.instance_config.disk.kms_id", None,
            "instance_config.disk.kms_id unset: the disk is not encrypted",
            f"{_TF_HW}, huaweicloud_as_configuration instance_config disk (\"kms_id - (Optional, String, ForceNew) "
            "The Encryption KMS ID of the data disk.\")"),
    # ---- metalfleet's own resources (cluster spec, GpuNode)
    Default("metalfleet.storage.encrypted", True, "storage volumes default to encrypted: true",
            "metalfleet providers/spec.py VolumeModel.encrypted"),
    Default("metalfleet.storage.kms_key_id", None, "no kms_key_id: the provider's managed key (AWS alias/aws/ebs)",
            "metalfleet providers/spec.py StorageSpec.kms_key_id"),
    Default("metalfleet.network.public_ip", False, "network.public_ip defaults to false",
            "metalfleet providers/spec.py NetworkSpec.public_ip"),
    Default("metalfleet.ssh.pin_on_first_contact", False, "ssh.pin_on_first_contact defaults to false",
            "metalfleet providers/spec.py SshSpec"),
    Default("metalfleet.driver.unknown", None,
            "metalfleet has no driver for this provider yet that says how it sets this (its provider record states no "
            "policy_facts)", "metalfleet providers/record.py DriverFacts"),
    # ---- IPMI / Redfish pool inventory (issue 13)
    Default("ipmi.interface", "lanplus", "interface defaults to lanplus (IPMI 2.0 RMCP+)",
            "metalfleet pool inventory format (issue 13): IPMI through pyghmi, lanplus"),
    Default("ipmi.cipher_suite", 3, "cipher_suite defaults to 3 (RAKP-HMAC-SHA1, AES-CBC-128)",
            "metalfleet pool inventory format (issue 13): cipher suite 3/17 as configured; pyghmi default"),
    Default("redfish.verify_tls", True, "verify_tls defaults to true", "metalfleet pool inventory format (issue "
            "13): Redfish TLS verified by default"),
)}


_NOTES: dict[str, str] = {}


def note(key: str) -> str:
    found = _NOTES.get(key)
    if found is None:
        found = _NOTES[key] = DEFAULTS[key].note
    return found
