"""Native cloud resources of the aws, alicloud and huaweicloud providers, from Terraform or Pulumi.

Pulumi's bridged providers are these same Terraform providers, so one reader serves both: Pulumi's
camelCase inputs are turned into the Terraform names first (:func:`~.common.snake_keys`), Pulumi's type
tokens map to the Terraform type names (:data:`PULUMI_TYPES`), and a Terraform block (a list of one object)
reads the same as Pulumi's object. Absent attributes take the provider default from
:mod:`metalfleet.policies.defaults`, and the resource carries that note.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from ..defaults import note
from ..model import (
    UNKNOWN,
    Address,
    ComputeNode,
    Location,
    Maybe,
    Reservation,
    Resource,
    SecurityRule,
    Unknown,
    Volume,
)
from .common import Assumptions, block, blocks, gpu_type, maybe_bool, maybe_int, maybe_str, tags_of

__all__ = ["ACCOUNT_SETTINGS", "FIELDS", "NATIVE", "PULUMI_TYPES", "READERS", "Reader", "native_resources"]

#: Pulumi type token -> Terraform resource type.
PULUMI_TYPES: Mapping[str, str] = {
    "aws:ec2/instance:Instance": "aws_instance",
    "aws:ec2/launchTemplate:LaunchTemplate": "aws_launch_template",
    "aws:ec2/launchConfiguration:LaunchConfiguration": "aws_launch_configuration",
    "aws:ec2/securityGroup:SecurityGroup": "aws_security_group",
    "aws:ec2/securityGroupRule:SecurityGroupRule": "aws_security_group_rule",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "aws_vpc_security_group_ingress_rule",
    "aws:ebs/volume:Volume": "aws_ebs_volume",
    "aws:ec2/eip:Eip": "aws_eip",
    "aws:ec2/eipAssociation:EipAssociation": "aws_eip_association",
    "aws:ebs/encryptionByDefault:EncryptionByDefault": "aws_ebs_encryption_by_default",
    "aws:ec2/instanceMetadataDefaults:InstanceMetadataDefaults": "aws_ec2_instance_metadata_defaults",
    "aws:ec2/capacityReservation:CapacityReservation": "aws_ec2_capacity_reservation",
    "alicloud:ecs/instance:Instance": "alicloud_instance",
    "alicloud:ecs/securityGroupRule:SecurityGroupRule": "alicloud_security_group_rule",
    "alicloud:ecs/ecsDisk:EcsDisk": "alicloud_ecs_disk",
    "alicloud:ecs/disk:Disk": "alicloud_disk",
    "alicloud:ecs/eipAddress:EipAddress": "alicloud_eip_address",
    "alicloud:ecs/eip:Eip": "alicloud_eip",
    "alicloud:ecs/eipAssociation:EipAssociation": "alicloud_eip_association",
    "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate": "alicloud_ecs_launch_template",
    "alicloud:ecs/launchTemplate:LaunchTemplate": "alicloud_launch_template",
    "huaweicloud:Bms/instance:Instance": "huaweicloud_bms_instance",
    "huaweicloud:Ecs/instance:Instance": "huaweicloud_compute_instance",
    "huaweicloud:Vpc/secgroupRule:SecgroupRule": "huaweicloud_networking_secgroup_rule",
    "huaweicloud:Vpc/eip:Eip": "huaweicloud_vpc_eip",
    "huaweicloud:Vpc/eipAssociate:EipAssociate": "huaweicloud_vpc_eip_associate",
    "huaweicloud:Ecs/eipAssociate:EipAssociate": "huaweicloud_compute_eip_associate",
    "huaweicloud:Evs/volume:Volume": "huaweicloud_evs_volume",
    "aws:ec2/spotInstanceRequest:SpotInstanceRequest": "aws_spot_instance_request",
    "aws:ec2/spotFleetRequest:SpotFleetRequest": "aws_spot_fleet_request",
    "alicloud:ess/scalingConfiguration:ScalingConfiguration": "alicloud_ess_scaling_configuration",
    "huaweicloud:As/configuration:Configuration": "huaweicloud_as_configuration",
}

#: Resources that change account defaults rather than describe a node (read in a first pass).
ACCOUNT_SETTINGS = ("aws_ebs_encryption_by_default", "aws_ec2_instance_metadata_defaults")

Builder = Callable[[dict[str, Any], "Ctx"], list[Resource]]


class Ctx:
    def __init__(self, tf_type: str, name: str, location: Location, source: str, assume: Assumptions,
                 subnet_public: Maybe[bool] | None = None, count: int = 1) -> None:
        #: Instances from the same configuration block (Terraform count/for_each).
        self.count = count
        self.tf_type = tf_type
        self.name = name
        self.location = location
        self.source = source
        self.assume = assume
        #: Terraform: the referenced subnet's map_public_ip_on_launch, when the plan has it.
        self.subnet_public = subnet_public

    def base(self, platform: str, name: str | None = None, **notes: str) -> dict[str, Any]:
        return {"name": name or self.name, "platform": platform, "source": self.source, "type": self.tf_type,
                "location": self.location, "notes": {k: v for k, v in notes.items() if v}}


def _first(p: dict[str, Any], *keys: str) -> Any:
    """The first of ``keys`` the input sets (not None or ""); UNKNOWN when the first one that may be set is known
    only after apply; None when none is set. (``a or b`` would ask an unknown value for its truth.)"""
    for key in keys:
        v = p.get(key)
        if v is UNKNOWN:
            return UNKNOWN
        if v is not None and v != "":
            return v
    return None


def _label(value: Any, index: int) -> Any:
    """A device's name for a view's name, or its index when it has none (or none known yet)."""
    return value if value is not UNKNOWN and value else index


def _unknown_disks(c: Ctx, platform: str, role: str, tags: Maybe[Mapping[str, str]] | None = None,
                   attached_to: str | None = None) -> Volume:
    """Data disks known only after apply: one view whose encryption is unknown (never fail open)."""
    return Volume(**c.base(platform, f"{c.name} data disks", encrypted="data_disks unknown at plan time"), role=role,
                  encrypted=UNKNOWN, kms_key=UNKNOWN, tags=tags, attached_to=attached_to)


def _group(value: Any) -> Maybe[str]:
    """A placement group / deployment set name; "" for none."""
    return UNKNOWN if value is UNKNOWN else str(value or "")


def _kms_managed(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("alias/aws/")


def _enc(value: Any, default_key: str, assume_on: bool) -> tuple[Maybe[bool], str]:
    """Encryption from an attribute, its documented default when absent, or the account default."""
    v = maybe_bool(value)
    if v is None:
        if assume_on:
            return True, "absent: encrypted by the account's EBS encryption by default (policy config / plan)"
        return False, note(default_key)
    if v is False and assume_on:
        return True, "encrypted: false is overridden by the account's EBS encryption by default"
    return v, ""


def _imds(tokens: Any, default_key: str, assume_required: bool) -> tuple[Maybe[bool], str]:
    t = tokens
    if t is UNKNOWN or t is None or t == "":
        if assume_required:
            return True, "absent: the account's instance metadata defaults require tokens"
        why = note(default_key)
        return False, why if t is not UNKNOWN else "unknown at plan time; " + why
    return str(t).lower() == "required", ""


#: Why a node whose metadata endpoint is off has no IMDS finding (the view's note; the rule skips None). Amazon EC2
#: Auto Scaling API, InstanceMetadataOptions.HttpEndpoint (botocore autoscaling 2011-01-01 model): "If the parameter
#: is not specified, the default state is enabled." / "If you specify a value of disabled, you will not be able to
#: access your instance metadata." EC2 API InstanceMetadataOptionsRequest.HttpEndpoint: "If you specify a value of
#: disabled, you cannot access your instance metadata." "Default: enabled"
_IMDS_OFF = ("metadata_options.http_endpoint = disabled: the instance metadata service does not answer, so no "
             "request reaches it with or without a token [Terraform AWS provider docs, metadata_options "
             "http_endpoint; EC2 User Guide, instance metadata options]")


def _aws_imds(p: dict[str, Any], default_key: str, assume_required: bool) -> tuple[Maybe[bool] | None, str]:
    """IMDS tokens from ``metadata_options`` (aws_instance, aws_launch_template, aws_launch_configuration alike).

    ``http_endpoint = "disabled"`` turns the metadata service off: nothing to require tokens of, so None (the
    rule skips it). Only a known "disabled" counts: absent is enabled (the provider default) and an endpoint
    unknown at plan time is judged as enabled, the side that fails."""
    opts = block(p, "metadata_options")
    if isinstance(opts, dict):
        endpoint = opts.get("http_endpoint")
        if type(endpoint) is str and endpoint.lower() == "disabled":
            return None, _IMDS_OFF
        return _imds(opts.get("http_tokens"), default_key, assume_required)
    return _imds(opts, default_key, assume_required)


# ------------------------------------------------------------------------------------------ AWS


def _aws_volume_tags(p: dict[str, Any], dev: Any) -> Maybe[Mapping[str, str]]:
    own = tags_of(dev, "tags_all", "tags") if isinstance(dev, dict) else {}
    shared = tags_of(p, "volume_tags")
    if own is UNKNOWN or shared is UNKNOWN:
        return UNKNOWN
    if not own:
        return shared  # the usual case: volume_tags only (views never change a tag map)
    return {**shared, **own}


def _aws_public(p: dict[str, Any], c: Ctx) -> tuple[Maybe[bool], str]:
    """Whether an instance gets a public IPv4 address, and the default that decided it when the plan does not."""
    public = maybe_bool(p.get("associate_public_ip_address"))
    if public is not None and public is not UNKNOWN:
        return public, ""
    if c.subnet_public is not None:
        return c.subnet_public, "associate_public_ip_address unset: the subnet's map_public_ip_on_launch is " + (
            "unknown" if c.subnet_public is UNKNOWN else str(c.subnet_public).lower())
    if p.get("subnet_id") is None and not blocks(p, "network_interface", "network_interfaces"):
        return True, "no subnet_id: the default VPC's default subnet assigns a public IPv4 address [Amazon VPC " \
            "User Guide, default subnets]"
    return UNKNOWN, note("aws_instance.associate_public_ip_address")


def _aws_instance(p: dict[str, Any], c: Ctx) -> list[Resource]:
    # The hot path of a large plan (one call per instance): the views are built field by field, without Ctx.base.
    itype = maybe_str(p.get("instance_type"))
    imds, imds_note = _aws_imds(p, "aws_instance.metadata_options.http_tokens",
                                c.assume.imds_tokens_required_by_default)
    public, public_note = _aws_public(p, c)
    cr = block(block(p, "capacity_reservation_specification"), "capacity_reservation_target")
    notes = {}
    if imds_note:
        notes["metadata_tokens_required"] = imds_note
    if public_note:
        notes["public_ip"] = public_note
    name, source, tf_type, location = c.name, c.source, c.tf_type, c.location
    node = ComputeNode(name=name, platform="aws", source=source, type=tf_type, location=location, notes=notes,
                       instance_type=itype, gpu=gpu_type("aws", itype), public_ip=public, count=c.count,
                       metadata_tokens_required=imds, tags=tags_of(p, "tags_all", "tags"),
                       placement_group=_group(p.get("placement_group")),
                       capacity_reservation=maybe_str(cr.get("capacity_reservation_id")) if isinstance(cr, dict)
                       else (UNKNOWN if cr is UNKNOWN else None))
    out: list[Resource] = [node]
    root = block(p, "root_block_device")
    launch_template = block(p, "launch_template")
    if root is not None or launch_template is None or launch_template is UNKNOWN:  # else the template's devices
        enc, why = _enc(root.get("encrypted") if isinstance(root, dict) else None,
                        "aws_instance.root_block_device.encrypted", c.assume.ebs_encryption_by_default)
        if root is UNKNOWN:
            enc, why = UNKNOWN, "root_block_device unknown at plan time"
        key = root.get("kms_key_id") if isinstance(root, dict) else None
        out.append(Volume(name=f"{name} root volume", platform="aws", source=source, type=tf_type, location=location,
                          notes={"encrypted": why} if why else {}, role="root", encrypted=enc,
                          kms_key=maybe_str(key), provider_managed_key=_kms_managed(key),
                          tags=_aws_volume_tags(p, root), attached_to=name))
    devices = blocks(p, "ebs_block_device", "ebs_block_devices")
    if devices is UNKNOWN:  # Optional+Computed in the aws provider: unknown whenever the configuration sets none
        devices = []
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict):
            continue
        enc, why = _enc(dev.get("encrypted"), "aws_instance.ebs_block_device.encrypted",
                        c.assume.ebs_encryption_by_default)
        label = _label(dev.get("device_name"), i)
        out.append(Volume(**c.base("aws", f"{c.name} volume {label}", encrypted=why), role="data", encrypted=enc,
                          kms_key=maybe_str(dev.get("kms_key_id")), provider_managed_key=_kms_managed(
                              dev.get("kms_key_id")), tags=_aws_volume_tags(p, dev), attached_to=c.name))
    return out


def _aws_launch_template(p: dict[str, Any], c: Ctx) -> list[Resource]:
    itype = maybe_str(p.get("instance_type"))
    imds, imds_note = _aws_imds(p, "aws_launch_template.metadata_options.http_tokens",
                                c.assume.imds_tokens_required_by_default)
    public: Maybe[bool] | None = None
    nics = blocks(p, "network_interfaces")
    if nics is UNKNOWN:
        public = UNKNOWN  # the interfaces are known only after apply: so is their public address
        nics = []
    for nic in nics:
        v = maybe_bool(nic.get("associate_public_ip_address")) if isinstance(nic, dict) else None
        if v is not None:
            public = v if public is None or public is False else public
    specs = blocks(p, "tag_specifications")
    inst_tags: dict[str, str] = {}
    vol_tags: dict[str, str] = {}
    for spec in specs if isinstance(specs, list) else []:
        if isinstance(spec, dict):
            t = tags_of(spec, "tags")
            if t is UNKNOWN:
                continue
            if spec.get("resource_type") == "instance":
                inst_tags.update(t)
            elif spec.get("resource_type") == "volume":
                vol_tags.update(t)
    node = ComputeNode(**c.base("aws", metadata_tokens_required=imds_note,
                                tags="instance tags from tag_specifications (resource_type instance)"),
                       instance_type=itype, gpu=gpu_type("aws", itype), public_ip=public,
                       metadata_tokens_required=imds, tags=inst_tags,
                       placement_group=None, capacity_reservation=None)
    out: list[Resource] = [node]
    mappings = blocks(p, "block_device_mappings", "block_device_mapping")
    for i, m in enumerate(mappings if isinstance(mappings, list) else []):
        if not isinstance(m, dict):
            continue
        ebs = block(m, "ebs")
        if ebs is None:
            continue  # an instance-store or no_device mapping
        raw = ebs.get("encrypted") if isinstance(ebs, dict) else UNKNOWN
        enc, why = _enc(raw, "aws_launch_template.block_device_mappings.ebs.encrypted",
                        c.assume.ebs_encryption_by_default)
        key = ebs.get("kms_key_id") if isinstance(ebs, dict) else None
        out.append(Volume(**c.base("aws", f"{c.name} device {_label(m.get('device_name'), i)}", encrypted=why,
                                   tags="volume tags from tag_specifications (resource_type volume)"),
                          role="launch-template", encrypted=enc, kms_key=maybe_str(key),
                          provider_managed_key=_kms_managed(key), tags=vol_tags))
    return out


def _aws_launch_configuration(p: dict[str, Any], c: Ctx) -> list[Resource]:
    """The older template of an autoscaling group: the same disks, metadata options and public address as a launch
    template (read like one), in aws_instance's attribute names (root_block_device, ebs_block_device). It has no
    tags (the group's propagate) and names no KMS key, so an encrypted device uses the account's default key."""
    itype = maybe_str(p.get("instance_type"))
    imds, imds_note = _aws_imds(p, "aws_launch_configuration.metadata_options.http_tokens",
                                c.assume.imds_tokens_required_by_default)
    # Unset: the group's subnets decide (not in this resource), as for a launch template without interfaces.
    public = maybe_bool(p.get("associate_public_ip_address"))
    out: list[Resource] = [ComputeNode(**c.base("aws", metadata_tokens_required=imds_note), instance_type=itype,
                                       gpu=gpu_type("aws", itype), public_ip=public, metadata_tokens_required=imds,
                                       tags=None, placement_group=None, capacity_reservation=None)]
    root = block(p, "root_block_device")
    if root is UNKNOWN:  # Optional+Computed: unknown when not configured; the AMI's root volume then decides
        enc: Maybe[bool] = UNKNOWN
        why = "root_block_device unknown at plan time"
    else:
        enc, why = _enc(root.get("encrypted") if isinstance(root, dict) else None,
                        "aws_launch_configuration.root_block_device.encrypted", c.assume.ebs_encryption_by_default)
    out.append(Volume(**c.base("aws", f"{c.name} root device", encrypted=why), role="launch-template",
                      encrypted=enc, kms_key=None, tags=None))
    devices = blocks(p, "ebs_block_device", "ebs_block_devices")
    if devices is UNKNOWN:  # Optional+Computed, as on aws_instance
        devices = []
    for i, dev in enumerate(devices):
        if not isinstance(dev, dict):
            continue
        if maybe_bool(dev.get("no_device")) is True:
            continue  # suppresses a device of the AMI: no volume
        enc, why = _enc(dev.get("encrypted"), "aws_launch_configuration.ebs_block_device.encrypted",
                        c.assume.ebs_encryption_by_default)
        out.append(Volume(**c.base("aws", f"{c.name} device {_label(dev.get('device_name'), i)}", encrypted=why),
                          role="launch-template", encrypted=enc, kms_key=None, tags=None))
    return out


def _aws_spot_fleet_request(p: dict[str, Any], c: Ctx) -> list[Resource]:
    """Each ``launch_specification`` block is a template the fleet launches Spot Instances from: a node (its
    instance type, its public address) and its root and EBS devices, in aws_instance's names. The fleet's
    ``launch_template_config`` names launch templates, judged as themselves (the plan reader carries the fleet's
    instance type overrides to them). A launch specification has no metadata options: its instances get the
    account's default, token-optional unless the account requires tokens."""
    specs = blocks(p, "launch_specification", "launch_specifications")
    if specs is UNKNOWN:  # the specifications are known only after apply: so is all they would tell
        return [ComputeNode(**c.base("aws", f"{c.name} launch_specification", public_ip="launch_specification "
                                     "unknown at plan time"), instance_type=UNKNOWN, public_ip=UNKNOWN,
                            metadata_tokens_required=UNKNOWN),
                _unknown_disks(c, "aws", "launch-template")]
    out: list[Resource] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            continue
        name = f"{c.name} launch_specification {i}"
        itype = maybe_str(spec.get("instance_type"))
        imds, imds_note = _imds(None, "aws_spot_fleet_request.launch_specification.metadata_options",
                                c.assume.imds_tokens_required_by_default)
        # true adds an interface with a public address; false (the schema's default) or unset leaves it to the
        # subnet, not in this resource, as for a launch configuration
        public = maybe_bool(spec.get("associate_public_ip_address"))
        out.append(ComputeNode(**c.base("aws", name, metadata_tokens_required=imds_note), instance_type=itype,
                               gpu=gpu_type("aws", itype), public_ip=None if public is False else public,
                               metadata_tokens_required=imds,
                               tags=tags_of(spec, "tags"), placement_group=_group(spec.get("placement_group")),
                               capacity_reservation=None))
        root = block(spec, "root_block_device", "root_block_devices")
        if root is UNKNOWN:  # Optional+Computed: unknown when not configured; the AMI's root volume then decides
            out.append(Volume(**c.base("aws", f"{name} root device", encrypted="root_block_device unknown at plan "
                                       "time"), role="launch-template", encrypted=UNKNOWN, kms_key=UNKNOWN, tags=None))
        else:
            out.append(_spot_fleet_device(c, f"{name} root device", root if isinstance(root, dict) else {}))
        devices = blocks(spec, "ebs_block_device", "ebs_block_devices")
        for j, dev in enumerate([] if devices is UNKNOWN else devices):  # Optional+Computed, as on aws_instance
            if isinstance(dev, dict):
                out.append(_spot_fleet_device(c, f"{name} device {_label(dev.get('device_name'), j)}", dev))
    return out


def _spot_fleet_device(c: Ctx, name: str, dev: dict[str, Any]) -> Volume:
    enc, why = _enc(dev.get("encrypted"), "aws_spot_fleet_request.launch_specification.encrypted",
                    c.assume.ebs_encryption_by_default)
    key = dev.get("kms_key_id")
    return Volume(**c.base("aws", name, encrypted=why), role="launch-template", encrypted=enc, kms_key=maybe_str(key),
                  provider_managed_key=_kms_managed(key), tags=None)


def _aws_ebs_volume(p: dict[str, Any], c: Ctx) -> list[Resource]:
    enc, why = _enc(p.get("encrypted"), "aws_ebs_volume.encrypted", c.assume.ebs_encryption_by_default)
    key = p.get("kms_key_id")
    return [Volume(**c.base("aws", encrypted=why), role="standalone", encrypted=enc, kms_key=maybe_str(key),
                   provider_managed_key=_kms_managed(key), tags=tags_of(p, "tags_all", "tags"))]


def _aws_rule(p: dict[str, Any], c: Ctx, name: str, direction: str, v6: bool = False) -> SecurityRule:
    proto = p.get("protocol", p.get("ip_protocol"))
    proto = UNKNOWN if proto is UNKNOWN else ("all" if str(proto) in ("-1", "all") else str(proto))
    lo, hi = maybe_int(p.get("from_port")), maybe_int(p.get("to_port"))
    if proto == "all" or lo is None:
        lo, hi = 0, 65535
    sources: Any = []
    for key in ("cidr_blocks", "ipv6_cidr_blocks", "cidr_ipv4", "cidr_ipv6"):
        v = p.get(key)
        if v is UNKNOWN:
            sources = UNKNOWN
            break
        if isinstance(v, list):
            if any(x is UNKNOWN for x in v):
                sources = UNKNOWN
                break
            sources.extend(str(x) for x in v)
        elif v:
            sources.append(str(v))
    return SecurityRule(**c.base("aws", name), direction="ingress" if direction == "ingress" else "egress",
                        protocol=proto, port_from=lo if lo is not None else 0, port_to=hi if hi is not None else lo
                        if lo is not None else 65535, sources=tuple(sources) if sources is not UNKNOWN else UNKNOWN)


def _aws_security_group(p: dict[str, Any], c: Ctx) -> list[Resource]:
    out: list[Resource] = []
    ingress = blocks(p, "ingress")
    if ingress is UNKNOWN:
        return [SecurityRule(**c.base("aws", f"{c.name} ingress"), sources=UNKNOWN)]
    for i, rule in enumerate(ingress):
        if isinstance(rule, dict):
            out.append(_aws_rule(rule, c, f"{c.name} ingress[{i}]", "ingress"))
    return out


def _aws_security_group_rule(p: dict[str, Any], c: Ctx) -> list[Resource]:
    kind = p.get("type")
    if kind == "egress":
        return []
    if kind is UNKNOWN:
        return [SecurityRule(**c.base("aws"), sources=UNKNOWN)]
    return [_aws_rule(p, c, c.name, "ingress")]


def _aws_sg_ingress_rule(p: dict[str, Any], c: Ctx) -> list[Resource]:
    return [_aws_rule(p, c, c.name, "ingress")]


def _attached(value: Any) -> Maybe[str | None]:
    if isinstance(value, Unknown):
        return Unknown.UNKNOWN
    return str(value) if value else None


def _aws_eip(p: dict[str, Any], c: Ctx) -> list[Resource]:
    target = p.get("instance", p.get("instance_id"))
    if target in (None, "") and p.get("network_interface") not in (None, ""):
        target = p.get("network_interface")
    return [Address(**c.base("aws"), attached_to=_attached(target))]


def _aws_capacity_reservation(p: dict[str, Any], c: Ctx) -> list[Resource]:
    kind = _first(p, "end_date_type")
    kind = "unlimited" if kind is None else kind
    end = p.get("end_date")
    ends: Maybe[date | None]
    if end is UNKNOWN or kind is UNKNOWN:
        ends = UNKNOWN
    elif kind == "unlimited" or not end:
        ends = None
    else:
        ends = _parse_date(end)
    return [Reservation(**c.base("aws"), ends=ends)]


def _parse_date(value: Any) -> Maybe[date]:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).date()
    except ValueError:
        return UNKNOWN


# ------------------------------------------------------------------------------------------ Alibaba Cloud


def _ali_instance(p: dict[str, Any], c: Ctx) -> list[Resource]:
    itype = maybe_str(p.get("instance_type"))
    bw = maybe_int(p.get("internet_max_bandwidth_out"))
    public: Maybe[bool] = UNKNOWN if bw is UNKNOWN else (bw or 0) > 0
    public_note = note("alicloud_instance.internet_max_bandwidth_out") if bw is None else ""
    imds, imds_note = _imds(p.get("http_tokens"), "alicloud_instance.http_tokens", False)
    node = ComputeNode(**c.base("alibaba", public_ip=public_note, metadata_tokens_required=imds_note),
                       instance_type=itype, gpu=gpu_type("alibaba", itype), public_ip=public, count=c.count,
                       metadata_tokens_required=imds, tags=tags_of(p, "tags"),
                       placement_group=_group(p.get("deployment_set_id")), capacity_reservation=None)
    vol_tags = tags_of(p, "volume_tags")
    enc, why = _enc(p.get("system_disk_encrypted"), "alicloud_instance.system_disk_encrypted", False)
    out: list[Resource] = [node, Volume(**c.base("alibaba", f"{c.name} system disk", encrypted=why), role="root",
                                        encrypted=enc, kms_key=maybe_str(p.get("system_disk_kms_key_id")),
                                        tags=vol_tags, attached_to=c.name)]
    disks = blocks(p, "data_disks")
    if disks is UNKNOWN:
        out.append(_unknown_disks(c, "alibaba", "data", vol_tags, c.name))
        disks = []
    for i, d in enumerate(disks):
        if isinstance(d, dict):
            enc, why = _enc(d.get("encrypted"), "alicloud_instance.data_disks.encrypted", False)
            out.append(Volume(**c.base("alibaba", f"{c.name} data disk {_label(d.get('name'), i)}", encrypted=why),
                              role="data", encrypted=enc, kms_key=maybe_str(d.get("kms_key_id")), tags=vol_tags,
                              attached_to=c.name))
    return out


#: The system disk arguments alicloud_ecs_launch_template deprecated in favour of its system_disk block (they are all
#: alicloud_launch_template had; neither has an encryption setting for them).
_ALI_FLAT_SYSTEM_DISK = ("system_disk_category", "system_disk_size", "system_disk_name", "system_disk_description")


#: Why a launch template's instances and disks are judged by its ``tags``, not ``template_tags``: "tags - (Optional) A
#: mapping of tags to assign to instance, block storage, and elastic network." / "template_tags - (Optional) A
#: mapping of tags to assign to the launch template." (terraform-provider-alicloud website/docs/r/
#: ecs_launch_template.html.markdown, the same in launch_template.html.markdown), as aws_launch_template's
#: tag_specifications are its instances' and volumes' tags.
_ALI_LT_TAGS = "instance and disk tags from tags (template_tags are the template's own)"


def _ali_launch_template(p: dict[str, Any], c: Ctx) -> list[Resource]:
    """alicloud_ecs_launch_template, and alicloud_launch_template: the alicloud provider's older name for it,
    "DEPRECATED: This resource has been deprecated from version `1.120.0`. Please use new resource
    alicloud_ecs_launch_template" (terraform-provider-alicloud website/docs/r/launch_template.html.markdown; its
    provider.go maps "alicloud_launch_template" to resourceAliCloudEcsLaunchTemplate(), the same schema;
    pulumi-alicloud: alicloud.ecs.LaunchTemplate)."""
    itype = maybe_str(p.get("instance_type"))
    imds, imds_note = _imds(p.get("http_tokens"), "alicloud_ecs_launch_template.http_tokens", False)
    bw = maybe_int(p.get("internet_max_bandwidth_out"))
    tags = tags_of(p, "tags")
    out: list[Resource] = [ComputeNode(**c.base("alibaba", metadata_tokens_required=imds_note, tags=_ALI_LT_TAGS),
                                       instance_type=itype, gpu=gpu_type("alibaba", itype),
                                       metadata_tokens_required=imds, tags=tags,
                                       public_ip=None if bw is None else (UNKNOWN if bw is UNKNOWN else bw > 0))]
    system = block(p, "system_disk")
    if system is None and any(p.get(k) not in (None, "", UNKNOWN) for k in _ALI_FLAT_SYSTEM_DISK):
        system = {}  # only the deprecated flat arguments (alicloud_launch_template's own): no encryption setting
    disks = blocks(p, "data_disks")
    if disks is UNKNOWN:
        out.append(_unknown_disks(c, "alibaba", "launch-template"))
        disks = []
    for i, d in enumerate([system, *disks]):
        if not isinstance(d, dict):
            continue
        enc, why = _enc(d.get("encrypted"), "alicloud_ecs_launch_template.system_disk.encrypted" if i == 0 else
                        "alicloud_ecs_launch_template.data_disks.encrypted", False)
        out.append(Volume(**c.base("alibaba", f"{c.name} {'system disk' if i == 0 else f'data disk {i - 1}'}",
                                   encrypted=why, tags=_ALI_LT_TAGS), role="launch-template", encrypted=enc,
                          kms_key=maybe_str(d.get("kms_key_id")), tags=tags))
    return out


def _ali_disk(p: dict[str, Any], c: Ctx) -> list[Resource]:
    enc, why = _enc(p.get("encrypted"), "alicloud_ecs_disk.encrypted", False)
    return [Volume(**c.base("alibaba", encrypted=why), role="standalone", encrypted=enc,
                   kms_key=maybe_str(p.get("kms_key_id")), tags=tags_of(p, "tags"))]


def _ali_ess_scaling_configuration(p: dict[str, Any], c: Ctx) -> list[Resource]:
    """The template an ESS scaling group launches ECS instances from: a node (its instance types, a public address
    when internet_max_bandwidth_out is above 0) and its system and data disks. It has no metadata options, so its
    instances keep ECS's default, token-optional metadata access."""
    types = p.get("instance_types")
    itypes: list[Any] = [p.get("instance_type")] + (types if isinstance(types, list) else [types])
    known = [t for t in itypes if type(t) is str and t]
    gpus = [gpu_type("alibaba", t) for t in known]
    gpu: Maybe[bool] = True if True in gpus else UNKNOWN if (UNKNOWN in gpus or UNKNOWN in itypes or not known) \
        else False
    itype: Maybe[str | None] = UNKNOWN if UNKNOWN in itypes else (known[0] if known else None)
    bw = maybe_int(p.get("internet_max_bandwidth_out"))
    out: list[Resource] = [ComputeNode(
        **c.base("alibaba", metadata_tokens_required=note("alicloud_ess_scaling_configuration.http_tokens"),
                 public_ip=note("alicloud_ess_scaling_configuration.internet_max_bandwidth_out") if bw is None else ""),
        instance_type=itype, gpu=gpu, public_ip=UNKNOWN if bw is UNKNOWN else (bw or 0) > 0,
        metadata_tokens_required=False, tags=tags_of(p, "tags"), placement_group=None, capacity_reservation=None)]
    enc, why = _enc(p.get("system_disk_encrypted"), "alicloud_ess_scaling_configuration.system_disk_encrypted", False)
    out.append(Volume(**c.base("alibaba", f"{c.name} system disk", encrypted=why), role="launch-template",
                      encrypted=enc, kms_key=maybe_str(p.get("system_disk_kms_key_id"))))
    disks = blocks(p, "data_disk", "data_disks")
    if disks is UNKNOWN:
        out.append(_unknown_disks(c, "alibaba", "launch-template"))
        disks = []
    for i, d in enumerate(disks):
        if isinstance(d, dict):
            enc, why = _enc(d.get("encrypted"), "alicloud_ess_scaling_configuration.data_disk.encrypted", False)
            out.append(Volume(**c.base("alibaba", f"{c.name} data disk {_label(d.get('name'), i)}", encrypted=why),
                              role="launch-template", encrypted=enc, kms_key=maybe_str(d.get("kms_key_id"))))
    return out


def _port_range(text: Any) -> tuple[Maybe[int], Maybe[int]]:
    if text is UNKNOWN:
        return UNKNOWN, UNKNOWN
    parts = str(text or "-1/-1").split("/")
    try:
        lo, hi = int(parts[0]), int(parts[-1])
    except ValueError:
        return UNKNOWN, UNKNOWN
    if lo == -1 or hi == -1:
        return 0, 65535
    return lo, hi


def _ali_sg_rule(p: dict[str, Any], c: Ctx) -> list[Resource]:
    if p.get("type") == "egress":
        return []
    proto = p.get("ip_protocol")
    proto = UNKNOWN if proto is UNKNOWN else str(proto or "all").lower()
    lo, hi = _port_range(p.get("port_range"))
    if proto in ("all", "gre", "icmp", "icmpv6"):
        lo, hi = 0, 65535
    sources: Any = [str(v) for k in ("cidr_ip", "ipv6_cidr_ip") if (v := p.get(k)) not in (None, "")]
    if any(p.get(k) is UNKNOWN for k in ("cidr_ip", "ipv6_cidr_ip")):
        sources = UNKNOWN
    policy = _first(p, "policy")  # unknown: judged as accept
    notes = {"ports": note("alicloud_security_group_rule.port_range") if p.get("port_range") is None else ""}
    return [SecurityRule(**c.base("alibaba", **notes), protocol=proto, port_from=lo, port_to=hi,
                         sources=UNKNOWN if sources is UNKNOWN else tuple(sources),
                         action="deny" if policy == "drop" else "allow")]


#: alicloud_eip_association's instance_type values that are no instance: "instance_type - (Optional, ForceNew) The
#: type of cloud product that the EIP instance to bind. Valid values: EcsInstance, SlbInstance, Nat,
#: NetworkInterface, HaVip and IpAddress." (terraform-provider-alicloud website/docs/r/eip_association.html.markdown).
#: A NetworkInterface may be an instance's: it stays judged.
_ALI_NOT_NODES = {"slbinstance": "a load balancer", "nat": "a NAT gateway", "havip": "a high-availability virtual IP",
                  "ipaddress": "an IP address"}


def _ali_eip_association(p: dict[str, Any], c: Ctx) -> list[Resource]:
    kind = p.get("instance_type")
    other = _ALI_NOT_NODES.get(kind.lower()) if type(kind) is str else None
    if other is not None:
        return [Address(**c.base("alibaba", attached_to=f"instance_type = {kind}: bound to {other}, not a node"),
                        attached_to=None)]
    return [Address(**c.base("alibaba"), attached_to=_attached(p.get("instance_id")))]


def _unattached(platform: str) -> Builder:
    def build(p: dict[str, Any], c: Ctx) -> list[Resource]:
        target = _first(p, "instance_id", "instance", "network_interface_id")
        return [Address(**c.base(platform), attached_to=_attached(target))]

    return build


# ------------------------------------------------------------------------------------------ Huawei Cloud


def _hw_public(p: dict[str, Any]) -> Maybe[bool]:
    keys = ("eip_id", "iptype", "eip_type", "bandwidth_size", "bandwidth")
    if any(p.get(k) is UNKNOWN for k in keys):
        return UNKNOWN
    return any(p.get(k) not in (None, "", [], {}, 0) for k in keys)


def _hw_bms(p: dict[str, Any], c: Ctx) -> list[Resource]:
    flavor = maybe_str(p.get("flavor_id"))
    node = ComputeNode(**c.base("huawei", metadata_tokens_required=note(
        "huaweicloud_bms_instance.metadata_http_tokens")), instance_type=flavor, gpu=gpu_type("huawei", flavor),
                       public_ip=_hw_public(p), count=c.count, metadata_tokens_required=False, tags=tags_of(p, "tags"),
                       placement_group=None, capacity_reservation=None)
    why = note("huaweicloud_bms_instance.disk_encryption")
    out: list[Resource] = [node]
    if p.get("system_disk_type") not in (None, ""):
        out.append(Volume(**c.base("huawei", f"{c.name} system disk", encrypted=why), role="root", encrypted=False,
                          tags=None, attached_to=c.name))
    disks = blocks(p, "data_disks")
    if disks is UNKNOWN:
        out.append(_unknown_disks(c, "huawei", "data", None, c.name))
        disks = []
    for i, _d in enumerate(disks):
        out.append(Volume(**c.base("huawei", f"{c.name} data disk {i}", encrypted=why), role="data", encrypted=False,
                          tags=None, attached_to=c.name))
    return out


def _hw_kms(value: Any, key: str) -> tuple[Maybe[bool], Maybe[str | None], str]:
    if value is UNKNOWN:
        return UNKNOWN, UNKNOWN, ""
    if value in (None, ""):
        return False, None, note(key)
    return True, str(value), ""


def _hw_ecs(p: dict[str, Any], c: Ctx) -> list[Resource]:
    flavor = maybe_str(_first(p, "flavor_id", "flavor_name"))
    hints = block(p, "scheduler_hints")
    group = _group(hints.get("group")) if isinstance(hints, dict) else (UNKNOWN if hints is UNKNOWN else "")
    node = ComputeNode(**c.base("huawei", metadata_tokens_required=note(
        "huaweicloud_compute_instance.metadata_http_tokens")), instance_type=flavor, gpu=gpu_type("huawei", flavor),
                       public_ip=_hw_public(p), count=c.count, metadata_tokens_required=False, tags=tags_of(p, "tags"),
                       placement_group=group, capacity_reservation=None)
    enc, key, why = _hw_kms(p.get("system_disk_kms_key_id"), "huaweicloud_compute_instance.system_disk_kms_key_id")
    out: list[Resource] = [node, Volume(**c.base("huawei", f"{c.name} system disk", encrypted=why), role="root",
                                        encrypted=enc, kms_key=key, attached_to=c.name)]
    disks = blocks(p, "data_disks")
    if disks is UNKNOWN:
        out.append(_unknown_disks(c, "huawei", "data", None, c.name))
        disks = []
    for i, d in enumerate(disks):
        if isinstance(d, dict):
            enc, key, why = _hw_kms(d.get("kms_key_id"), "huaweicloud_compute_instance.data_disks.kms_key_id")
            out.append(Volume(**c.base("huawei", f"{c.name} data disk {i}", encrypted=why), role="data",
                              encrypted=enc, kms_key=key, attached_to=c.name))
    return out


def _hw_evs(p: dict[str, Any], c: Ctx) -> list[Resource]:
    enc, key, why = _hw_kms(p.get("kms_id"), "huaweicloud_evs_volume.kms_id")
    return [Volume(**c.base("huawei", encrypted=why), role="standalone", encrypted=enc, kms_key=key,
                   tags=tags_of(p, "tags"))]


def _hw_as_configuration(p: dict[str, Any], c: Ctx) -> list[Resource]:
    """The template an AS group launches ECSs from (``instance_config``): a node (its flavor; a ``public_ip`` block
    gives every instance an EIP) and its ``disk`` blocks (SYS / DATA), each encrypted by its ``kms_id``. A
    configuration made from an existing ECS (``instance_id``) takes that ECS's flavor and disks, which the input
    does not show."""
    ic = block(p, "instance_config")
    metadata = note("huaweicloud_compute_instance.metadata_http_tokens")
    if not isinstance(ic, dict):  # unknown at plan time (or absent: the provider requires it)
        return [ComputeNode(**c.base("huawei", metadata_tokens_required=metadata), instance_type=UNKNOWN,
                            public_ip=UNKNOWN, metadata_tokens_required=False, tags=None),
                _unknown_disks(c, "huawei", "launch-template")]
    flavor = maybe_str(ic.get("flavor"))
    public_ip = ic.get("public_ip")
    public: Maybe[bool] = UNKNOWN if public_ip is UNKNOWN else public_ip not in (None, [], {})
    out: list[Resource] = [ComputeNode(**c.base("huawei", metadata_tokens_required=metadata), instance_type=flavor,
                                       gpu=gpu_type("huawei", flavor), public_ip=public,
                                       metadata_tokens_required=False, tags=None, placement_group=None,
                                       capacity_reservation=None)]
    disks = blocks(ic, "disk", "disks")
    if disks is UNKNOWN or (not disks and ic.get("instance_id") not in (None, "")):
        out.append(_unknown_disks(c, "huawei", "launch-template"))
        disks = []
    data = 0
    for d in disks:
        if not isinstance(d, dict):
            continue
        system = type(d.get("disk_type")) is str and d["disk_type"].upper() == "SYS"  # unknown: judged as data
        enc, key, why = _hw_kms(d.get("kms_id"), "huaweicloud_as_configuration.instance_config.disk.kms_id")
        label = "system disk" if system else f"data disk {data}"
        data += 0 if system else 1
        out.append(Volume(**c.base("huawei", f"{c.name} {label}", encrypted=why), role="launch-template",
                          encrypted=enc, kms_key=key))
    return out


_HW_PORTS = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


def _hw_sg_rule(p: dict[str, Any], c: Ctx) -> list[Resource]:
    if p.get("direction") == "egress":
        return []
    proto = p.get("protocol")
    notes: dict[str, str] = {}
    if proto in (None, ""):
        proto, notes["ports"] = "all", note("huaweicloud_networking_secgroup_rule.protocol")
    elif proto is not UNKNOWN:
        proto = str(proto).lower()
    ranges: list[tuple[Maybe[int], Maybe[int]]] = []
    ports = p.get("ports")
    lo, hi = maybe_int(p.get("port_range_min")), maybe_int(p.get("port_range_max"))
    if ports is UNKNOWN or lo is UNKNOWN or hi is UNKNOWN:
        ranges.append((UNKNOWN, UNKNOWN))
    elif ports not in (None, ""):
        for part in str(ports).split(","):
            m = _HW_PORTS.match(part)
            ranges.append((int(m.group(1)), int(m.group(2) or m.group(1))) if m else (UNKNOWN, UNKNOWN))
    elif lo is not None:
        ranges.append((lo, hi if hi is not None else lo))
    else:
        ranges.append((0, 65535))
        if proto != "all":
            notes["ports"] = note("huaweicloud_networking_secgroup_rule.ports")
    remote = p.get("remote_ip_prefix")
    sources: Any
    if remote is UNKNOWN:
        sources = UNKNOWN
    elif remote not in (None, ""):
        sources = (str(remote),)
    elif p.get("remote_group_id") not in (None, "") or p.get("remote_address_group_id") not in (None, ""):
        sources = UNKNOWN if UNKNOWN in (p.get("remote_group_id"), p.get("remote_address_group_id")) else ()
    else:
        ether = _first(p, "ethertype")
        sources = ("0.0.0.0/0", "::/0") if ether is UNKNOWN else ("::/0",) if str(ether or "IPv4").lower() == "ipv6" \
            else ("0.0.0.0/0",)
        notes["sources"] = note("huaweicloud_networking_secgroup_rule.remote_ip_prefix")
    act = _first(p, "action")  # unknown: judged as allow
    action: Literal["allow", "deny"] = "deny" if act is not UNKNOWN and str(act or "allow").lower() == "deny" \
        else "allow"
    out: list[Resource] = []
    for lo_, hi_ in ranges:
        name = c.name if len(ranges) == 1 else f"{c.name} ports {lo_}-{hi_}"
        out.append(SecurityRule(**c.base("huawei", name, **notes), protocol=proto, port_from=lo_, port_to=hi_,
                                sources=sources, action=action))
    return out


def _hw_eip_associate(p: dict[str, Any], c: Ctx) -> list[Resource]:
    target = _first(p, "instance_id", "port_id", "fixed_ip")
    return [Address(**c.base("huawei"), attached_to=_attached(target))]


_AWS_RULE = ("protocol", "ip_protocol", "from_port", "to_port", "cidr_blocks", "ipv6_cidr_blocks", "cidr_ipv4",
             "cidr_ipv6")
_AWS_INSTANCE = ("instance_type", "metadata_options", "associate_public_ip_address", "subnet_id", "network_interface",
                 "capacity_reservation_specification", "tags", "tags_all", "placement_group", "root_block_device",
                 "launch_template", "ebs_block_device", "volume_tags", "ebs_block_devices", "network_interfaces")
_ALI_LT = ("instance_type", "http_tokens", "internet_max_bandwidth_out", "system_disk", *_ALI_FLAT_SYSTEM_DISK,
           "data_disks", "tags")
_ALI_EIP = ("instance_id", "instance", "network_interface_id")
_HW_PUBLIC = ("eip_id", "iptype", "eip_type", "bandwidth_size", "bandwidth")
_HW_EIP_ASSOCIATE = ("instance_id", "port_id", "fixed_ip")


@dataclass(frozen=True)
class Reader:
    """How one resource type is read: the builder of its views, and the attributes it reads (a plan's
    after_unknown is cut down to these once per count block, so the overlay of 10,000 instances touches only what
    the rules can see; a builder that reads an attribute must list it, or its unknown value would read as absent:
    tests/policies/test_rules_native.py checks every builder against it). Dispatch (:func:`native_resources`), the
    plan reader and the coverage table of RULES.md (:mod:`metalfleet.policies.docs`) all read this one registry."""

    build: Builder
    fields: tuple[str, ...]


#: Terraform resource type -> its reader (Pulumi types map here through :data:`PULUMI_TYPES`).
READERS: Mapping[str, Reader] = {
    "aws_instance": Reader(_aws_instance, _AWS_INSTANCE),
    # "This resource supports all arguments of aws_instance" (terraform-provider-aws website/docs/r/
    # spot_instance_request.html.markdown, paraphrase): the same disks, metadata options and public address.
    "aws_spot_instance_request": Reader(_aws_instance, _AWS_INSTANCE),
    "aws_spot_fleet_request": Reader(_aws_spot_fleet_request, ("launch_specification", "launch_specifications")),
    "aws_launch_template": Reader(_aws_launch_template, ("instance_type", "metadata_options", "network_interfaces",
                                                         "tag_specifications", "block_device_mappings",
                                                         "block_device_mapping")),
    "aws_launch_configuration": Reader(_aws_launch_configuration, (
        "instance_type", "metadata_options", "associate_public_ip_address", "root_block_device", "ebs_block_device",
        "ebs_block_devices")),
    "aws_ebs_volume": Reader(_aws_ebs_volume, ("encrypted", "kms_key_id", "tags", "tags_all")),
    "aws_security_group": Reader(_aws_security_group, ("ingress",)),
    "aws_security_group_rule": Reader(_aws_security_group_rule, ("type", *_AWS_RULE)),
    "aws_vpc_security_group_ingress_rule": Reader(_aws_sg_ingress_rule, _AWS_RULE),
    "aws_eip": Reader(_aws_eip, ("instance", "instance_id", "network_interface")),
    "aws_eip_association": Reader(_unattached("aws"), ("instance_id", "instance", "network_interface",
                                                       "network_interface_id")),
    "aws_ec2_capacity_reservation": Reader(_aws_capacity_reservation, ("end_date_type", "end_date")),
    "alicloud_instance": Reader(_ali_instance, ("instance_type", "internet_max_bandwidth_out", "http_tokens", "tags",
                                                "deployment_set_id", "volume_tags", "system_disk_encrypted",
                                                "system_disk_kms_key_id", "data_disks")),
    "alicloud_ecs_launch_template": Reader(_ali_launch_template, _ALI_LT),
    "alicloud_launch_template": Reader(_ali_launch_template, _ALI_LT),
    "alicloud_ess_scaling_configuration": Reader(_ali_ess_scaling_configuration, (
        "instance_type", "instance_types", "internet_max_bandwidth_out", "tags", "system_disk_encrypted",
        "system_disk_kms_key_id", "data_disk", "data_disks")),
    "alicloud_ecs_disk": Reader(_ali_disk, ("encrypted", "kms_key_id", "tags")),
    "alicloud_disk": Reader(_ali_disk, ("encrypted", "kms_key_id", "tags")),
    "alicloud_security_group_rule": Reader(_ali_sg_rule, ("type", "ip_protocol", "port_range", "cidr_ip",
                                                          "ipv6_cidr_ip", "policy")),
    "alicloud_eip_association": Reader(_ali_eip_association, ("instance_id", "instance", "instance_type")),
    "alicloud_eip_address": Reader(_unattached("alibaba"), _ALI_EIP),
    "alicloud_eip": Reader(_unattached("alibaba"), _ALI_EIP),
    "huaweicloud_bms_instance": Reader(_hw_bms, ("flavor_id", *_HW_PUBLIC, "tags", "system_disk_type", "data_disks")),
    "huaweicloud_compute_instance": Reader(_hw_ecs, ("flavor_id", "flavor_name", "scheduler_hints", *_HW_PUBLIC,
                                                     "tags", "system_disk_kms_key_id", "data_disks")),
    "huaweicloud_as_configuration": Reader(_hw_as_configuration, ("instance_config",)),
    "huaweicloud_evs_volume": Reader(_hw_evs, ("kms_id", "tags")),
    "huaweicloud_networking_secgroup_rule": Reader(_hw_sg_rule, (
        "direction", "protocol", "ports", "port_range_min", "port_range_max", "remote_ip_prefix", "remote_group_id",
        "remote_address_group_id", "ethertype", "action")),
    "huaweicloud_vpc_eip": Reader(_unattached("huawei"), _ALI_EIP),
    "huaweicloud_vpc_eip_associate": Reader(_hw_eip_associate, _HW_EIP_ASSOCIATE),
    "huaweicloud_compute_eip_associate": Reader(_hw_eip_associate, _HW_EIP_ASSOCIATE),
    # the older name of huaweicloud_vpc_eip_associate
    "huaweicloud_networking_eip_associate": Reader(_hw_eip_associate, _HW_EIP_ASSOCIATE),
}
NATIVE: Mapping[str, Builder] = {t: r.build for t, r in READERS.items()}
#: The attributes read of each type (:attr:`Reader.fields`), and of the types read in the plan's first pass.
FIELDS: Mapping[str, tuple[str, ...]] = {
    **{t: r.fields for t, r in READERS.items()},
    "aws_ebs_encryption_by_default": ("enabled",),
    "aws_ec2_instance_metadata_defaults": ("http_tokens",),
    "aws_subnet": ("map_public_ip_on_launch",),
}


def account_settings(tf_type: str, props: dict[str, Any], assume: Assumptions) -> None:
    """Resources that turn on account-wide defaults (EBS encryption, IMDS tokens) in the same input."""
    if tf_type == "aws_ebs_encryption_by_default" and maybe_bool(props.get("enabled")) in (None, True):
        assume.ebs_encryption_by_default = True
    if tf_type == "aws_ec2_instance_metadata_defaults" and props.get("http_tokens") == "required":
        assume.imds_tokens_required_by_default = True


def native_resources(tf_type: str, props: dict[str, Any], name: str, location: Location, source: str,
                     assume: Assumptions, subnet_public: Maybe[bool] | None = None, count: int = 1) -> list[Resource]:
    """The neutral views of one native resource (``props`` in Terraform's attribute names)."""
    build = NATIVE.get(tf_type)
    if build is None:
        return []
    return build(props, Ctx(tf_type, name, location, source, assume, subnet_public, count))
