"""Terraform plans (``terraform show -json plan.out``) for the aws, alicloud and huaweicloud providers.

Read from ``resource_changes``: each change's ``after`` with ``after_unknown`` laid over it (a value known only
after apply is UNKNOWN), deletions left out. The ``configuration`` section gives references between
resources that the plan cannot resolve yet (an EIP bound to ``aws_instance.gpu``, an instance in
``aws_subnet.private``, a rule resource of ``aws_security_group.gpu``) and ``count`` groups: a value unknown only
because it is computed from another resource of the plan is resolved from it (``PlanReader._resolved``). A plan
has no line numbers; when the configuration's .tf files lie beside the plan (or in the folder ``--tf-dir`` names),
each resource is located at its ``resource`` block, and ``# metalfleet:suppress`` comments in a block apply to it.

The plan is decoded with msgspec against a schema that names only what is read (``planned_values`` and
``prior_state`` are skipped, each change's ``after`` kept as raw bytes), then one change at a time is decoded,
turned into views and dropped, so a 10,000-instance plan takes a fraction of a second and little memory.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

import msgspec

from ..config import Suppression
from ..model import UNKNOWN, Address, ComputeNode, Location, Maybe, Resource, SecurityRule, Volume
from ..yamlpos import suppression_comments
from .common import Assumptions, ShapeError, gpu_type, maybe_bool
from .native import ACCOUNT_SETTINGS, FIELDS, NATIVE, account_settings, native_resources

__all__ = ["LINKS", "PlanError", "PlanReader", "created", "read_plan"]


class PlanError(ShapeError):
    """The document is JSON but not a Terraform plan this adapter can read."""


class _Change(msgspec.Struct):
    actions: list[str] = []
    after: msgspec.Raw = msgspec.Raw(b"null")
    after_unknown: msgspec.Raw = msgspec.Raw(b"null")


def created(after: Any, unknown: Any) -> _Change:
    """What a plan holds for a resource it creates: ``after`` planned, ``unknown`` the values known only after apply
    (the input a ``.tf`` file or a Pulumi document is turned into, so this reader reads them too)."""
    return _Change(actions=["create"], after=msgspec.Raw(msgspec.json.encode(after)),
                   after_unknown=msgspec.Raw(msgspec.json.encode(unknown)))


class _ResourceChange(msgspec.Struct):
    address: str
    type: str
    mode: str = "managed"
    module_address: str | None = None
    name: str = ""
    change: _Change | None = None


class _Plan(msgspec.Struct):
    format_version: str | None = None
    terraform_version: str | None = None
    resource_changes: list[_ResourceChange] = []
    configuration: dict[str, Any] | None = None


_DECODER = msgspec.json.Decoder(_Plan)


_NESTED = (dict, list)


def _overlay(after: Any, unknown: Any) -> Any:
    """``after`` with every value ``after_unknown`` marks replaced by UNKNOWN. ``after`` is changed in place: it
    was just decoded for this one change and nothing else holds it."""
    if unknown is True:
        return UNKNOWN
    if not unknown:  # None (pruned) / {} / [] / false: nothing unknown below
        return after
    if isinstance(unknown, dict):
        out = after if isinstance(after, dict) else {}
        for k, u in unknown.items():
            if u is True:
                out[k] = UNKNOWN
            elif u and isinstance(u, _NESTED):
                out[k] = _overlay(out.get(k), u)
        return out
    if isinstance(unknown, list):
        items = after if isinstance(after, list) else []
        for i, u in enumerate(unknown):
            if i < len(items):
                if u:  # {} / [] / false leave the item as it is
                    items[i] = _overlay(items[i], u)
            elif u is True:
                items.append(UNKNOWN)
            elif isinstance(u, dict) and u:
                items.append(_overlay({}, u))
        return items
    return after


# ------------------------------------------------------------------------------------------ configuration


@dataclass
class _ConfigResource:
    address: str  # module-qualified config address, without index: module.x.aws_instance.gpu
    references: dict[str, list[str]]  # attribute -> referenced addresses (module-qualified)
    module_dir: str | None  # a local module's source folder, relative to the root module


def _refs(expr: Any) -> list[str]:
    if isinstance(expr, dict):
        refs = expr.get("references")
        if isinstance(refs, list):
            return [str(r) for r in refs]
    return []


def _deep_refs(expr: Any) -> list[str]:
    """The references of an attribute's expression, or of every expression inside a nested block (the
    configuration section writes a block as a list of objects of expressions: ``launch_template`` ->
    ``[{"id": {"references": [...]}}]``)."""
    if isinstance(expr, dict):
        if "references" in expr or "constant_value" in expr:
            return _refs(expr)
        return [r for v in expr.values() for r in _deep_refs(v)]
    if isinstance(expr, list):
        return [r for v in expr for r in _deep_refs(v)]
    return []


def _walk_config(module: Mapping[str, Any], prefix: str, folder: str | None,
                 out: dict[str, _ConfigResource], aliases: dict[str, list[str]] | None = None) -> None:
    """The managed resources of ``module`` (and its calls) into ``out``; into ``aliases``, what a reference to a
    module's output (``module.sg.id``) or, inside a module, to one of its inputs (``module.sg.var.vpc``) stands
    for: the references of the output's or the call argument's expression, qualified."""
    aliases = {} if aliases is None else aliases
    for name, output in (module.get("outputs") or {}).items():
        if isinstance(output, dict) and prefix:
            aliases[f"{prefix}{name}"] = [f"{prefix}{x}" for x in _refs(output.get("expression"))]
    for r in module.get("resources") or []:
        if not isinstance(r, dict) or r.get("mode", "managed") != "managed":
            continue
        addr = f"{prefix}{r.get('address')}"
        raw = r.get("expressions")
        exprs: dict[str, Any] = raw if isinstance(raw, dict) else {}
        refs = {k: [f"{prefix}{x}" for x in _deep_refs(v)] for k, v in exprs.items()}
        out[addr] = _ConfigResource(addr, refs, folder)
    for name, call in (module.get("module_calls") or {}).items():
        if not isinstance(call, dict):
            continue
        source = str(call.get("source") or "")
        sub = None
        if source.startswith(("./", "../")) and folder is not None:
            sub = str(Path(folder) / source)
        inner = f"{prefix}module.{name}."
        args = call.get("expressions")
        for arg, expr in (args.items() if isinstance(args, dict) else ()):
            aliases[f"{inner}var.{arg}"] = [f"{prefix}{x}" for x in _refs(expr)]
        _walk_config(call.get("module") or {}, inner, sub, out, aliases)


_INDEX = re.compile(r"\[[^\]]*\]")


def _base(address: str) -> str:
    """``module.a["x"].aws_instance.gpu[3]`` -> ``module.a.aws_instance.gpu`` (the configuration's address)."""
    return _INDEX.sub("", address)


def _target(refs: list[str]) -> str | None:
    """The resource a reference list points at (``aws_instance.gpu[0].id`` -> ``aws_instance.gpu[0]``)."""
    for ref in refs:
        parts = ref.split(".")
        for i in range(len(parts) - 1):
            if re.fullmatch(r"[a-z0-9]+_[a-z0-9_]+", parts[i]) and not parts[i].startswith("module"):
                return ".".join(parts[: i + 2])
    return None


#: Names that start a reference to something other than a managed resource.
_NOT_RESOURCE = frozenset({"var", "local", "data", "each", "count", "path", "terraform", "self"})


def _resources_of(refs: list[str], aliases: Mapping[str, list[str]], depth: int = 0) -> set[str] | None:
    """The configuration addresses of the managed resources ``refs`` (one expression's references) come from,
    following module outputs and inputs; None when any reference leads elsewhere (a variable, a local, a data
    source, ``count.index``), so the expression's value cannot be shown to come from resources only."""
    found: set[str] = set()
    for raw in refs:
        ref = _INDEX.sub("", raw)
        parts = ref.split(".")
        i = 0
        while i + 1 < len(parts) and parts[i] == "module":
            i += 2
        if i >= len(parts):  # a whole module (module.sg): stands beside its outputs in the list
            continue
        prefix = ".".join(parts[:i])
        head = f"{prefix}." if prefix else ""
        key = None
        if parts[i] == "var":
            key = f"{head}var.{parts[i + 1]}" if i + 1 < len(parts) else ""
        elif prefix and f"{head}{parts[i]}" in aliases:  # a module's output
            key = f"{head}{parts[i]}"
        if key is not None:
            if key not in aliases or depth >= 8:
                return None
            sub = _resources_of(aliases[key], aliases, depth + 1)
            if sub is None:
                return None
            found |= sub
            continue
        if parts[i] in _NOT_RESOURCE or i + 1 >= len(parts):
            return None
        found.add(f"{head}{parts[i]}.{parts[i + 1]}")
    return found


#: Rule resources that attach to a group by ``security_group_id``, and the group types they attach to:
#: aws_security_group_rule / aws_vpc_security_group_{ingress,egress}_rule ("security_group_id - (Required) The ID of
#: the security group", registry.terraform.io/providers/hashicorp/aws/latest/docs/resources/
#: vpc_security_group_ingress_rule), alicloud_security_group_rule ("security_group_id - (Required, ForceNew) The ID
#: of the Security Group", help.aliyun.com/zh/terraform/alicloud-security-group-rule),
#: huaweicloud_networking_secgroup_rule (security_group_id, Required: huaweicloud/services/vpc/
#: resource_huaweicloud_networking_secgroup_rule.go).
_RULE_RESOURCES = frozenset({"aws_security_group_rule", "aws_vpc_security_group_ingress_rule",
                             "aws_vpc_security_group_egress_rule", "alicloud_security_group_rule",
                             "huaweicloud_networking_secgroup_rule"})
_GROUPS = frozenset({"aws_security_group", "alicloud_security_group", "huaweicloud_networking_secgroup"})
#: huaweicloud_networking_secgroup_rule's attributes that are Optional and Computed in the provider's schema
#: (resource_huaweicloud_networking_secgroup_rule.go: remote_group_id, remote_address_group_id, remote_ip_prefix,
#: ports, port_range_min/max, protocol, action: "Optional: true, ForceNew: true, Computed: true"): one the
#: configuration does not set is unknown in the plan, yet the rule is made without it, so it is read as absent (the
#: builder's documented default). The remote group ones, set to a resource of the plan, are that resource's ID:
#: "remote_group_id ... Specifies the peer ID of the belonged security group. This parameter value is mutually
#: exclusive with remote_ip_prefix and remote_address_group_id." (support.huaweicloud.com/intl/en-us/api-vpc/
#: vpc_sg02_0008xx.html).
_HW_RULE_COMPUTED = ("remote_ip_prefix", "remote_group_id", "remote_address_group_id", "ports", "port_range_min",
                     "port_range_max", "protocol", "action")
_HW_RULE_REMOTES = {"remote_group_id": "huaweicloud_networking_secgroup",
                    "remote_address_group_id": "huaweicloud_vpc_address_group"}


_RESOLVED = frozenset({"aws_security_group", "huaweicloud_networking_secgroup_rule", "aws_ebs_volume", "aws_eip"})

#: Where each rule type names its source CIDRs (aws_security_group's inline ``ingress`` blocks: cidr_blocks,
#: ipv6_cidr_blocks). A source that refers to attributes of resources of the plan takes their values (see
#: ``PlanReader._sources``).
_SOURCE_ATTRS: Mapping[str, tuple[str, ...]] = {
    "aws_security_group_rule": ("cidr_blocks", "ipv6_cidr_blocks"),
    "aws_vpc_security_group_ingress_rule": ("cidr_ipv4", "cidr_ipv6"),
    "alicloud_security_group_rule": ("cidr_ip", "ipv6_cidr_ip"),
    "huaweicloud_networking_secgroup_rule": ("remote_ip_prefix",),
}
_INLINE_SOURCES = ("cidr_blocks", "ipv6_cidr_blocks")
#: The address ranges of networks: a source that is one is never the whole internet even while its value is known
#: only after apply (an IPv6 range the cloud assigns). A VPC's IPv4 block is "between a /16 netmask (65,536 IP
#: addresses) and /28 netmask (16 IP addresses)" and its IPv6 block a /56 or an IPAM pool's /44-/60 (Amazon VPC User
#: Guide, VPC CIDR blocks; paraphrase for IPv6), a subnet's a part of it; an Alibaba VPC's and vSwitch's block has a
#: mask of 8 to 28 bits and an IPv6 vSwitch a /64 (paraphrase of the VPC documentation, help.aliyun.com/zh/vpc);
#: a Huawei VPC's and subnet's cidr is within 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16 (paraphrase of
#: terraform-provider-huaweicloud docs/resources/vpc.md and vpc_subnet.md) and an IPv6 subnet a /64.
_RANGES: Mapping[str, frozenset[str]] = {
    **dict.fromkeys(("aws_vpc", "aws_default_vpc", "aws_subnet", "aws_default_subnet", "alicloud_vpc",
                     "alicloud_vswitch"), frozenset({"cidr_block", "ipv6_cidr_block"})),
    "aws_vpc_ipv4_cidr_block_association": frozenset({"cidr_block"}),
    "huaweicloud_vpc": frozenset({"cidr"}),
    "huaweicloud_vpc_subnet": frozenset({"cidr", "ipv6_cidr"}),
}

#: Load balancers that take security groups, and the attribute naming them: aws_elb "`security_groups` - (Optional)
#: A list of security group IDs to assign to the ELB." (terraform-provider-aws website/docs/r/elb.html.markdown);
#: aws_lb / aws_alb "`security_groups` - (Optional) List of security group IDs to assign to the LB." (website/docs/r/
#: lb.html.markdown); alicloud_nlb_load_balancer's ``security_group_ids`` and huaweicloud_lb_loadbalancer's
#: ``security_group_ids``, the groups of the load balancer's port (paraphrase of terraform-provider-alicloud
#: website/docs/r/nlb_load_balancer.html.markdown and terraform-provider-huaweicloud docs/resources/
#: lb_loadbalancer.md). Alibaba's classic SLB and Huawei's dedicated ELB take no groups.
_LOAD_BALANCERS: Mapping[str, str] = {"aws_elb": "security_groups", "aws_lb": "security_groups",
                                      "aws_alb": "security_groups", "alicloud_nlb_load_balancer": "security_group_ids",
                                      "huaweicloud_lb_loadbalancer": "security_group_ids"}

#: The instance types an address or a volume binds to (each is read as a ComputeNode with its disks).
_COMPUTE = frozenset({"aws_instance", "aws_spot_instance_request", "alicloud_instance", "huaweicloud_compute_instance",
                      "huaweicloud_bms_instance"})
#: Standalone volumes, each read for encryption on its own (native.py: _aws_ebs_volume, _ali_disk, _hw_evs).
_VOLUMES = frozenset({"aws_ebs_volume", "alicloud_ecs_disk", "alicloud_disk", "huaweicloud_evs_volume"})
#: Public addresses and their associations, and the attributes that name what the address is bound to. Each
#: association gives its instance a public IPv4 address, judged by MF-NET-001 as one set on the instance itself
#: (quotes from the providers' docs; paraphrase where marked):
#:
#: - aws_eip: "`instance` - (Optional) EC2 instance ID." / "`network_interface` - (Optional) Network interface ID to
#:   associate with." (terraform-provider-aws website/docs/r/eip.html.markdown);
#: - aws_eip_association: "`allocation_id` - (Optional, Forces new resource) ID of the associated Elastic IP." /
#:   "`instance_id` - (Optional, Forces new resource) ID of the instance." / "`network_interface_id` - (Optional,
#:   Forces new resource) ID of the network interface." (website/docs/r/eip_association.html.markdown);
#: - alicloud_eip_association: "`instance_id` - (Required, ForceNew) The ID of the ECS or SLB instance or Nat
#:   Gateway or NetworkInterface or HaVip." (terraform-provider-alicloud website/docs/r/eip_association.html.markdown):
#:   only an instance of the plan read as a node counts;
#: - huaweicloud_vpc_eip_associate: "`fixed_ip` - (Optional, String, ForceNew) Specifies a private IP address to
#:   associate with the EIP." / "`network_id` - (Optional, String, ForceNew) Specifies the ID of the network to
#:   which the **fixed_ip** belongs." / "`port_id` - (Optional, String, ForceNew) Specifies an existing port ID to
#:   associate with the EIP." (terraform-provider-huaweicloud docs/resources/vpc_eip_associate.md); the port or
#:   fixed IP is an instance's (``huaweicloud_compute_instance.x.network[0].port`` / ``.access_ip_v4``), so their
#:   references lead to it; huaweicloud_networking_eip_associate, its older name: "`port_id` - (Required, String,
#:   ForceNew) Specifies an existing port ID to associate with this EIP.";
#: - huaweicloud_compute_eip_associate (paraphrase of docs/resources/compute_eip_associate.md): ``public_ip`` (the
#:   EIP's address) and ``instance_id`` (the ECS instance it is bound to), both Required and ForceNew.
_EIP_LINKS: Mapping[str, tuple[str, ...]] = {
    "aws_eip": ("instance", "network_interface"),
    "aws_eip_association": ("instance_id", "network_interface_id"),
    "alicloud_eip_association": ("instance_id",),
    "huaweicloud_vpc_eip_associate": ("port_id", "fixed_ip"),
    "huaweicloud_networking_eip_associate": ("port_id",),
    "huaweicloud_compute_eip_associate": ("instance_id",),
}
#: What an address can be bound to that is no node, so an association to one of this plan makes no node public
#: and the address is bound to no node (MF-NET-001 judges nodes): "instance_id - (Required, ForceNew) The ID of the
#: ECS or SLB instance or Nat Gateway or NetworkInterface or HaVip." (alicloud_eip_association, above); a Huawei EIP
#: associated with a load balancer's port (``huaweicloud_elb_loadbalancer.x.ipv4_port_id``, paraphrase of
#: terraform-provider-huaweicloud docs/resources/vpc_eip_associate.md's port_id). An AWS NAT gateway takes its EIP
#: by ``aws_nat_gateway.allocation_id`` (no association): that aws_eip names no instance (see ``_resolved``). A
#: network interface is not here: one attached to no instance of the plan may be attached to one outside it.
_NOT_NODES: Mapping[str, str] = {
    **dict.fromkeys(("alicloud_nat_gateway", "huaweicloud_nat_gateway"), "a NAT gateway"),
    **dict.fromkeys(("alicloud_slb", "alicloud_slb_load_balancer", "alicloud_alb_load_balancer",
                     "alicloud_nlb_load_balancer", "huaweicloud_elb_loadbalancer", "huaweicloud_lb_loadbalancer"),
                    "a load balancer"),
    **dict.fromkeys(("alicloud_havip", "alicloud_vpc_ha_vip"), "a high-availability virtual IP"),
}
#: Volume attachments: (the volume's attribute, the instance's attribute):
#:
#: - aws_volume_attachment: "`instance_id` - (Required) ID of the Instance to attach to" / "`volume_id` -
#:   (Required) ID of the Volume to be attached" (terraform-provider-aws website/docs/r/
#:   volume_attachment.html.markdown);
#: - alicloud_ecs_disk_attachment / alicloud_disk_attachment, its older name (paraphrase of terraform-provider-
#:   alicloud website/docs/r/ecs_disk_attachment.html.markdown): ``disk_id``, the disk, and ``instance_id``, the ECS
#:   instance it is attached to, both Required and ForceNew;
#: - huaweicloud_compute_volume_attach (paraphrase of terraform-provider-huaweicloud docs/resources/
#:   compute_volume_attach.md, "Attaches a volume to an ECS Instance."): ``instance_id`` and ``volume_id``, both
#:   Required and ForceNew.
_ATTACHMENTS: Mapping[str, tuple[str, str]] = {
    "aws_volume_attachment": ("volume_id", "instance_id"),
    "alicloud_ecs_disk_attachment": ("disk_id", "instance_id"),
    "alicloud_disk_attachment": ("disk_id", "instance_id"),
    "huaweicloud_compute_volume_attach": ("volume_id", "instance_id"),
}
#: Network interfaces, and what attaches one to an instance: an address bound to the interface is the instance's.
#:
#: - aws_network_interface's own ``attachment`` block: "`instance` - (Required) ID of the instance to attach to."
#:   (terraform-provider-aws website/docs/r/network_interface.html.markdown);
#: - aws_network_interface_attachment: "`instance_id` - (Required) Instance ID to attach." / "`network_interface_id`
#:   - (Required) ENI ID to attach." (website/docs/r/network_interface_attachment.html.markdown);
#: - aws_instance's ``network_interface`` blocks: "`network_interface_id` - (Required) ID of the network interface to
#:   attach." (website/docs/r/instance.html.markdown).
#:
#: type -> (the attribute naming the interface, the one naming the instance); "" for the resource itself.
_INTERFACE_LINKS: Mapping[str, tuple[str, str]] = {
    "aws_network_interface": ("", "attachment"),
    "aws_network_interface_attachment": ("network_interface_id", "instance_id"),
}
_INTERFACES = frozenset({"aws_network_interface"})
#: Groups and fleets that launch instances from a template of the plan: the template is judged (its findings name
#: it, the group adds none of its own), with the instance types the group overrides it with, so a template of a
#: general-purpose type that a group launches as GPU instances is judged as a GPU node. Type -> the attributes that
#: name the template:
#:
#: - aws_autoscaling_group: "`launch_configuration` - (Optional) Name of the launch configuration to use." /
#:   "`launch_template` - (Optional) Nested argument with Launch template specification to use to launch instances."
#:   / "`mixed_instances_policy` - (Optional) Configuration block containing settings to define launch targets for
#:   Auto Scaling groups.", its ``launch_template.override`` blocks' "`instance_type` - (Optional) Override the
#:   instance type in the Launch Template." (website/docs/r/autoscaling_group.html.markdown);
#: - aws_ec2_fleet: "`launch_template_config` - (Required) Nested argument containing EC2 Launch Template
#:   configurations.", its ``override`` blocks' ``instance_type`` (website/docs/r/ec2_fleet.html.markdown);
#: - aws_spot_fleet_request: "`launch_template_config` - (Optional) Launch template configuration block.", its
#:   ``overrides`` blocks' "`instance_type` - (Optional) The type of instance to request."
#:   (website/docs/r/spot_fleet_request.html.markdown);
#: - alicloud_ess_scaling_group (paraphrase of terraform-provider-alicloud website/docs/r/ess_scaling_group.
#:   html.markdown): ``launch_template_id``, the ECS launch template its instances are made from, and
#:   ``launch_template_override`` blocks, each with an ``instance_type`` that extends the template's.
_LAUNCHERS: Mapping[str, tuple[str, ...]] = {
    "aws_autoscaling_group": ("launch_template", "mixed_instances_policy", "launch_configuration"),
    "aws_ec2_fleet": ("launch_template_config",),
    "aws_spot_fleet_request": ("launch_template_config",),
    "alicloud_ess_scaling_group": ("launch_template_id",),
}
_TEMPLATES = frozenset({"aws_launch_template", "aws_launch_configuration", "alicloud_ecs_launch_template",
                        "alicloud_launch_template"})
_OVERRIDES = ("override", "overrides", "launch_template_override")
#: What each resource type read for the links it makes settles (the second coverage table of RULES.md, derived
#: from the tables the plan reader follows).
LINKS: Mapping[str, str] = {
    **dict.fromkeys(_RULE_RESOURCES, "a rule of a security group of the plan: the group's computed inline rules are "
                    "read as none, its rules judged on their own"),
    **dict.fromkeys(_EIP_LINKS, "binds a public address to an instance of the plan, or to an interface attached to "
                    "one: MF-NET-001 judges the instance, whose finding names the address"),
    **dict.fromkeys(_ATTACHMENTS, "attaches a volume of the plan to an instance: the volume's findings name it"),
    **dict.fromkeys(_INTERFACE_LINKS, "attaches a network interface to an instance: an address bound to the "
                    "interface makes the instance public"),
    **dict.fromkeys(_LAUNCHERS, "launches instances from a template of the plan: judged on the template, with the "
                    "instance types it overrides the template's with"),
    **dict.fromkeys(_LOAD_BALANCERS, "names security groups of the plan: a group only load balancers use is a "
                    "public endpoint's, not judged by MF-NET-003 (MF-NET-002 still judges it)"),
}
#: The attributes by which one resource names the instance (or its port) it is bound to: an unknown one that refers
#: to a resource of the plan reads as that resource's address (see _EIP_LINKS).
_BINDS = ("instance", "instance_id", "network_interface", "network_interface_id", "port_id", "fixed_ip")
#: References that make ``x[count.index]`` / ``x[each.key]`` mean "the instance with my own index".
_PAIRING = ("count.index", "each.key", "each.value")
_OWN_INDEX = re.compile(r"(\[[^\]]*\])$")


# ------------------------------------------------------------------------------------------ .tf locations


_RESOURCE = re.compile(r'^\s*resource\s+"([^"]+)"\s+"([^"]+)"\s*\{')


@dataclass
class _Block:
    file: str
    line: int
    end: int
    #: the ``dynamic "name"`` blocks inside (their content is unknown to the plan's configuration section, which
    #: leaves dynamic blocks out)
    dynamic: frozenset[str] = frozenset()


_DYNAMIC = re.compile(r'^\s*dynamic\s+"([^"]+)"\s*\{')


def _tf_blocks(folder: Path) -> tuple[dict[str, _Block], list[tuple[str, Suppression]]]:
    """Resource blocks (``type.name`` -> file and lines) in the .tf files of ``folder``, and the suppression
    comments inside (or right above) each block."""
    blocks: dict[str, _Block] = {}
    sups: list[tuple[str, Suppression]] = []
    try:
        files = sorted(folder.glob("*.tf"))
    except OSError:
        return blocks, sups
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines = text.splitlines()
        starts: list[tuple[str, int, int]] = []
        for i, line in enumerate(lines):
            m = _RESOURCE.match(line)
            if not m:
                continue
            depth, end = 0, len(lines)
            for j in range(i, len(lines)):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0:
                    end = j + 1
                    break
            key = f"{m.group(1)}.{m.group(2)}"
            dynamic = frozenset(d.group(1) for x in lines[i + 1:end] if (d := _DYNAMIC.match(x)))
            blocks.setdefault(key, _Block(str(f), i + 1, end, dynamic))
            starts.append((key, i + 1, end))
        for c in suppression_comments(text, hcl=True):
            owner = next((k for k, a, b in starts if a <= c.line <= b or a == c.first), None)
            if owner is not None:
                sups.append((owner, Suppression(c.rule, c.reason, c.expires, None, Location(str(f), c.line, c.column),
                                                bad_expiry=c.expires_text if c.expires is None else None)))
    return blocks, sups


# ------------------------------------------------------------------------------------------ the plan


_JSON = msgspec.json.Decoder()


def _decode_after(raw: msgspec.Raw) -> dict[str, Any]:
    """One change's ``after`` as a dict (every attribute: a plan lists its schema's attributes; the builders read
    a few, and decoding all of them generically costs less than skipping the rest)."""
    value = _JSON.decode(raw)
    return value if isinstance(value, dict) else {}


def _prune(unknown: Any) -> Any:
    """An ``after_unknown`` value without the entries that mark nothing unknown ({}, [], [{}], false); None when
    nothing is left. The overlay then touches only what is unknown."""
    if unknown is True:
        return True
    if isinstance(unknown, dict):
        kept = {k: p for k, v in unknown.items() if (p := _prune(v)) is not None}
        return kept or None
    if isinstance(unknown, list):
        items = [_prune(v) for v in unknown]
        return items if any(i is not None for i in items) else None
    return None


def _unknown_for(rc: _ResourceChange, unknowns: dict[tuple[str, bytes], Any]) -> Any:
    """The change's ``after_unknown``, decoded and pruned once per distinct text and type (the instances of one
    ``count`` block share one), limited to the attributes the type's builder reads (:data:`.native.FIELDS`)."""
    assert rc.change is not None
    key = (rc.type, bytes(rc.change.after_unknown))
    if key in unknowns:
        return unknowns[key]
    names = FIELDS.get(rc.type, ())
    value = _JSON.decode(rc.change.after_unknown)
    if value is True:  # the whole object known only after apply
        pruned: Any = dict.fromkeys(names, True)
    elif isinstance(value, dict):
        pruned = _prune({k: v for k, v in value.items() if k in names})
    else:
        pruned = None
    unknowns[key] = pruned
    return pruned


def _props(rc: _ResourceChange, unknowns: dict[tuple[str, bytes], Any]) -> dict[str, Any]:
    """The planned attributes of one change, values known only after apply as UNKNOWN."""
    assert rc.change is not None
    after = _decode_after(rc.change.after)
    unknown = _unknown_for(rc, unknowns)
    return _overlay(after, unknown) if unknown else after


def _override_types(after: Any) -> list[Any]:
    """The instance types of the ``override`` / ``overrides`` / ``launch_template_override`` blocks anywhere in a
    group's or fleet's planned attributes (UNKNOWN where one is known only after apply)."""
    found: list[Any] = []
    if isinstance(after, dict):
        for k, v in after.items():
            if k in _OVERRIDES and isinstance(v, list):
                found += [t for o in v if isinstance(o, dict) and (t := o.get("instance_type")) not in (None, "")]
            else:
                found += _override_types(v)
    elif isinstance(after, list):
        for v in after:
            found += _override_types(v)
    return found


def _launched_as(node: ComputeNode, by: str, types: list[Any]) -> ComputeNode:
    """A template's node as the group that overrides its instance type launches it: a GPU node when any override is
    a GPU type, of unknown type when an override is unknown at plan time and none is a GPU type (unless the
    template's own type is a GPU type already)."""
    if node.gpu is True:
        return node
    platform = node.platform
    gpu = next((t for t in types if type(t) is str and gpu_type(platform, t) is True), None)
    why = f"launched by {by} with the instance types {', '.join(str(t) for t in types)} (its overrides)"
    if gpu is not None:
        return msgspec.structs.replace(node, instance_type=gpu, gpu=True, notes={**node.notes, "instance_type": why})
    if any(t is UNKNOWN or gpu_type(platform, t) is UNKNOWN for t in types):
        return msgspec.structs.replace(node, instance_type=UNKNOWN, gpu=UNKNOWN,
                                       notes={**node.notes, "instance_type": why})
    if node.instance_type is None:  # the overrides are all the types it is launched as: none a GPU type
        return msgspec.structs.replace(node, instance_type=types[0], gpu=False,
                                       notes={**node.notes, "instance_type": why})
    return node


def _fronted(config: Mapping[str, _ConfigResource], aliases: Mapping[str, list[str]]) -> dict[str, str]:
    """The groups that load balancers of the configuration name (:data:`_LOAD_BALANCERS`) and no other resource
    does (an instance, a template, an interface, a database...): group -> the load balancers. A rule resource
    attached to the group, and another group whose rules name it as a source, are not uses of it."""
    if not any(c.address.rsplit(".", 2)[-2] in _LOAD_BALANCERS for c in config.values()):
        return {}
    fronts: dict[str, set[str]] = {}
    used: set[str] = set()
    for c in config.values():
        kind = c.address.rsplit(".", 2)[-2]
        if kind in _RULE_RESOURCES or kind in _GROUPS:
            continue
        for attr, refs in c.references.items():
            for ref in refs:  # one at a time, as _linked does: a variable beside a group does not hide it
                groups = {t for t in _resources_of([ref], aliases) or () if t.rsplit(".", 2)[-2] in _GROUPS}
                if _LOAD_BALANCERS.get(kind) == attr:
                    for g in groups:
                        fronts.setdefault(g, set()).add(c.address)
                else:
                    used |= groups
    return {g: ", ".join(sorted(lbs)) for g, lbs in fronts.items() if g not in used}


def read_plan(data: bytes | mmap.mmap, file: str, assume: Assumptions, tf_dir: str | Path | None = None) -> PlanReader:
    """A plan decoded and its whole-plan facts read; :meth:`PlanReader.views` builds the views."""
    try:
        plan = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise PlanError(f"not a Terraform plan this tool can read: {exc}") from None
    return PlanReader(plan.resource_changes, plan.configuration, file, assume, tf_dir)


class PlanReader:
    """A decoded plan, read in two steps: what holds for the whole plan (account defaults and subnets it sets,
    its configuration's references, the .tf blocks and their suppression comments) when made, then the views of
    any share of its resources (:meth:`views`), one change at a time, so processes can divide a large plan."""

    def __init__(self, resource_changes: list[_ResourceChange], configuration: dict[str, Any] | None, file: str,
                 assume: Assumptions, tf_dir: str | Path | None = None) -> None:
        self.file, self.assume = file, assume
        self.config: dict[str, _ConfigResource] = {}
        self.aliases: dict[str, list[str]] = {}
        root_dir = Path(tf_dir) if tf_dir is not None else Path(file).resolve().parent
        if isinstance(configuration, dict):
            _walk_config(configuration.get("root_module") or {}, "", ".", self.config, self.aliases)
        wanted = [rc for rc in resource_changes
                  if rc.mode == "managed" and rc.change is not None and rc.change.actions != ["delete"]
                  and (rc.type in NATIVE or rc.type in ACCOUNT_SETTINGS or rc.type == "aws_subnet")]
        self.unknowns: dict[tuple[str, bytes], Any] = {}
        self.subnets: dict[str, Maybe[bool]] = {}
        for rc in wanted:  # first pass: what changes the defaults of the rest
            if rc.type in ACCOUNT_SETTINGS:
                account_settings(rc.type, _props(rc, self.unknowns), assume)
            elif rc.type == "aws_subnet":
                v = maybe_bool(_props(rc, self.unknowns).get("map_public_ip_on_launch"))
                self.subnets[_base(rc.address)] = False if v is None else v  # default false (aws_subnet docs)
        self.blocks: dict[str, _Block] = {}
        self.suppressions: list[Suppression] = []
        dirs = {c.module_dir for c in self.config.values() if c.module_dir} | {"."}
        block_sups: list[tuple[str, Suppression]] = []
        for d in sorted(dirs):
            found, found_sups = _tf_blocks(root_dir / d)
            prefix = "" if d == "." else next((c.address.rsplit(".", 2)[0] + "." for c in self.config.values()
                                               if c.module_dir == d), "")
            self.blocks.update({f"{prefix}{k}": v for k, v in found.items()})
            block_sups.extend((f"{prefix}{k}", s) for k, s in found_sups)
        for owner, s in block_sups:
            self.suppressions.append(dc_replace(s, resource=owner))
        self.changes = [rc for rc in wanted if rc.type not in ACCOUNT_SETTINGS and rc.type != "aws_subnet"]
        self.bases = [_base(rc.address) for rc in self.changes]
        self.counts: dict[str, int] = {}
        for base in self.bases:
            self.counts[base] = self.counts.get(base, 0) + 1
        #: per configuration block: the resources its reference attributes point at, and its subnet's setting
        self.links: dict[str, tuple[list[tuple[str, str]], Maybe[bool] | None]] = {}
        #: groups (configuration addresses) that rule resources of this plan attach to
        self.ruled: set[str] = set()
        #: rule resource (configuration address) -> the groups of the plan it attaches to
        self.rule_groups: dict[str, set[str]] = {}
        #: instance address -> why it gets a public address (an EIP / association of this plan bound to it)
        self.public_via: dict[str, str] = {}
        #: volume address -> (the instance address it is attached to, what says so)
        self.attached: dict[str, tuple[str, str]] = {}
        links = [rc for rc in resource_changes
                 if (rc.type in _RULE_RESOURCES or rc.type in _EIP_LINKS or rc.type in _ATTACHMENTS
                     or rc.type in _INTERFACE_LINKS or rc.type in _LAUNCHERS)
                 and rc.mode == "managed" and rc.change is not None and rc.change.actions != ["delete"]]
        #: configuration address -> its instances' addresses (the nodes, volumes, interfaces and templates links may
        #: point at)
        self.addresses: dict[str, list[str]] = {}
        self._by_index: dict[str, dict[str, list[str]]] = {}  # the same, by their last index ("[0]", '["a"]')
        #: interface address -> the instances it is attached to
        self.interfaces: dict[str, list[str]] = {}
        #: addresses and associations bound to an instance of the plan: the instance's finding is theirs
        self.bound_addresses: set[str] = set()
        #: addresses and associations bound to a resource of the plan that is no node (:data:`_NOT_NODES`): why
        self.unbound: dict[str, str] = {}
        #: template address -> (the group / fleet that launches it, the instance types it overrides it with)
        self.launched: dict[str, tuple[str, list[Any]]] = {}
        if links:
            for rc in links:
                if rc.type in _INTERFACES:
                    self.addresses.setdefault(_base(rc.address), []).append(rc.address)
            for rc, base in zip(self.changes, self.bases, strict=True):
                if rc.type in _COMPUTE or rc.type in _VOLUMES or rc.type in _TEMPLATES:
                    self.addresses.setdefault(base, []).append(rc.address)
                cfg = self.config.get(base)
                if rc.type in _COMPUTE and cfg is not None and cfg.references.get("network_interface"):
                    for eni in self._linked(rc.address, cfg.references["network_interface"], _INTERFACES):
                        self.interfaces.setdefault(eni, []).append(rc.address)
        for rc in links:
            cfg = self.config.get(_base(rc.address))
            if cfg is None:
                continue
            if rc.type in _RULE_RESOURCES:
                targets = _resources_of(cfg.references.get("security_group_id", []), self.aliases) or set()
                groups = {t for t in targets if t.rsplit(".", 2)[-2] in _GROUPS}
                self.ruled.update(groups)
                self.rule_groups[_base(rc.address)] = groups
            elif rc.type in _INTERFACE_LINKS:
                eni_attr, inst_attr = _INTERFACE_LINKS[rc.type]
                enis = self._linked(rc.address, cfg.references.get(eni_attr, []), _INTERFACES) if eni_attr \
                    else [rc.address]
                for inst in self._linked(rc.address, cfg.references.get(inst_attr, []), _COMPUTE):
                    for eni in enis:
                        self.interfaces.setdefault(eni, []).append(inst)
            elif rc.type in _ATTACHMENTS:
                vol_attr, inst_attr = _ATTACHMENTS[rc.type]
                insts = self._linked(rc.address, cfg.references.get(inst_attr, []), _COMPUTE)
                where = ", ".join(insts) if insts else self._constant(rc, inst_attr)
                if where:
                    for vol in self._linked(rc.address, cfg.references.get(vol_attr, []), _VOLUMES):
                        self.attached.setdefault(vol, (where, rc.address))
        for rc in links:  # after the interfaces: an address bound to one is its instance's
            cfg = self.config.get(_base(rc.address))
            if cfg is None:
                continue
            if rc.type in _EIP_LINKS:
                for attr in _EIP_LINKS[rc.type]:
                    refs = cfg.references.get(attr, [])
                    insts = self._linked(rc.address, refs, _COMPUTE)
                    for eni in self._linked(rc.address, refs, _INTERFACES):
                        insts += [i for i in self.interfaces.get(eni, []) if i not in insts]
                    for inst in insts:
                        self.public_via.setdefault(inst, f"{rc.address} binds a public address to it through its "
                                                         f"{attr}")
                    if insts:
                        self.bound_addresses.add(rc.address)
                    elif (others := _resources_of(refs, self.aliases)) and all(
                            t.rsplit(".", 2)[-2] in _NOT_NODES for t in others):
                        target = sorted(others)[0]
                        self.unbound.setdefault(rc.address, f"bound through its {attr} to {target}, "
                                                            f"{_NOT_NODES[target.rsplit('.', 2)[-2]]}, not a node")
            if rc.type in _LAUNCHERS:
                refs = [r for attr in _LAUNCHERS[rc.type] for r in cfg.references.get(attr, [])]
                assert rc.change is not None
                overrides = _override_types(_overlay(_decode_after(rc.change.after),
                                                     _JSON.decode(rc.change.after_unknown)))
                for template in self._linked(rc.address, refs, _TEMPLATES):
                    self.launched.setdefault(template, (rc.address, overrides))
        #: group (configuration address) -> the load balancers it is attached to, when it is attached to nothing else
        self.fronted = _fronted(self.config, self.aliases)
        #: per configuration block of a group / rule: what its unknown attributes resolve to (see _resolved)
        self.resolved: dict[str, dict[str, Any]] = {}
        #: per (configuration block, attribute): the source values its references take, and the note (_sources)
        self.sourced: dict[tuple[str, str], tuple[list[str], str] | None] = {}
        self._all = resource_changes
        self._instances: dict[str, list[dict[str, Any]]] | None = None

    def _linked(self, own: str, refs: list[str], types: frozenset[str]) -> list[str]:
        """The addresses of this plan's resources of ``types`` that one expression of resource ``own`` refers to
        (an EIP's ``instance``, an attachment's ``volume_id``), through module outputs and inputs like the rule
        resources' ``security_group_id``. Of a block with several instances (count / for_each): the one a literal
        index names (``aws_instance.gpu[0].id``); the one with ``own``'s index when the index is ``count.index`` or
        ``each.key`` (``aws_eip.ip[count.index]`` -> ``aws_instance.gpu[count.index]``, the usual pairing); else all
        of them (a splat, or an index the plan cannot show: judged as bound, never left out)."""
        if not refs:
            return []
        targets: set[str] = set()
        for ref in refs:  # one at a time: a var or count.index beside the resource does not hide it
            found = _resources_of([ref], self.aliases)
            targets.update(t for t in found or () if t.rsplit(".", 2)[-2] in types)
        out: list[str] = []
        for target in sorted(targets):
            addrs = self.addresses.get(target, [])
            if len(addrs) <= 1:
                out.extend(addrs)
                continue
            by_index = self._by_index.get(target)
            if by_index is None:  # once per block: a 10,000-instance count pairs in linear time
                by_index = self._by_index[target] = {}
                for a in addrs:
                    if (m := _OWN_INDEX.search(a)) is not None:
                        by_index.setdefault(m.group(1), []).append(a)
            pick: list[str] = []
            mine = _OWN_INDEX.search(own)
            cut = own.rfind(".", 0, own.rfind("."))  # module.a[0].aws_eip.ip[1] -> module.a[0]
            module_path = own[:cut] if cut > 0 and target.startswith("module.") else ""
            literal = re.compile(re.escape(target) + r"(\[[^\]]*\])")
            for ref in refs:
                m = literal.match(ref)
                if m and m.group(1) not in ("[count.index]", "[each.key]", "[each.value]"):
                    pick = by_index.get(m.group(1), [])
                    break
            else:
                if mine and any(r in _PAIRING for r in refs):
                    pick = by_index.get(mine.group(1), [])
            if module_path and len(pick) > 1:
                pick = [a for a in pick if a.startswith(module_path)] or pick
            out.extend(pick or addrs)
        return out

    @staticmethod
    def _constant(rc: _ResourceChange, attr: str) -> str:
        """An attribute the plan knows (an instance ID of a resource outside it), or ""."""
        assert rc.change is not None
        value = _decode_after(rc.change.after).get(attr)
        return value if type(value) is str else ""

    def _bound(self, rc: _ResourceChange, built: list[Resource]) -> list[Resource]:
        """The views of one change with what the plan's other resources bind to it: the node an EIP association
        makes public, the standalone volume an attachment puts on an instance (named in its encryption note), the
        template a group launches with other instance types. An address bound to an instance of the plan has no
        view of its own: the instance's MF-NET-001 finding names it (one finding per instance, judged with its
        type as an inline public IP is)."""
        public = self.public_via.get(rc.address)
        attached = self.attached.get(rc.address)
        launched = self.launched.get(rc.address)
        out: list[Resource] = []
        unbound = self.unbound.get(rc.address)
        for r in built:
            if isinstance(r, Address) and rc.address in self.bound_addresses:
                continue
            if isinstance(r, Address) and unbound is not None:
                r = msgspec.structs.replace(r, attached_to=None, notes={**r.notes, "attached_to": unbound})
            if public is not None and isinstance(r, ComputeNode) and r.name == rc.address and r.public_ip is not True:
                r = msgspec.structs.replace(r, public_ip=True, notes={**r.notes, "public_ip": public})
            elif attached is not None and isinstance(r, Volume) and r.name == rc.address:
                inst, by = attached
                prior = r.notes.get("encrypted")
                why = f"attached to {inst} by {by}"
                r = msgspec.structs.replace(r, attached_to=inst, notes={
                    **r.notes, "encrypted": f"{prior}; {why}" if prior else why})
            elif launched is not None and isinstance(r, ComputeNode) and r.name == rc.address and launched[1]:
                r = _launched_as(r, *launched)
            out.append(r)
        return out

    def _resolved(self, rc: _ResourceChange, base: str) -> dict[str, Any]:
        """Attributes of a group or rule that the plan leaves unknown but its other resources settle:

        - an ``aws_security_group`` whose configuration sets no ``ingress`` (nor a ``dynamic "ingress"`` block in
          the .tf source, when it is at hand) has no inline rules: its computed ``ingress`` is unknown only because
          its rules are rule resources, each judged on its own. The provider forbids mixing the two: "You should
          not use the aws_security_group resource with in-line rules ... in conjunction with the
          aws_vpc_security_group_egress_rule and aws_vpc_security_group_ingress_rule resources or the
          aws_security_group_rule resource" (registry.terraform.io/providers/hashicorp/aws/latest/docs/resources/
          security_group). The plan's configuration section leaves dynamic blocks out, so without the .tf source
          this holds only for a group that rule resources of the plan attach to; any other stays unknown;
        - a ``huaweicloud_networking_secgroup_rule``'s Optional+Computed attributes (:data:`_HW_RULE_COMPUTED`).
        """
        found = self.resolved.get(base)
        if found is not None:
            return found
        found = {}
        cfg = self.config.get(base)
        if cfg is not None and rc.type == "aws_security_group" and "ingress" not in cfg.references:
            block = self.blocks.get(base)
            if (base in self.ruled and block is None) or (block is not None and "ingress" not in block.dynamic):
                found["ingress"] = []
        elif cfg is not None and rc.type == "aws_ebs_volume" and "snapshot_id" not in cfg.references:
            # encrypted and kms_key_id are Optional+Computed in the aws provider, so unknown in a plan whenever
            # the configuration leaves them out; the volume is then made with the defaults: "encrypted -
            # (Optional) If true, the disk will be encrypted." / "kms_key_id - (Optional) ARN for the KMS
            # encryption key. When specifying `kms_key_id`, `encrypted` needs to be set to true." (terraform-
            # provider-aws website/docs/r/ebs_volume.html.markdown), i.e. unencrypted unless the account's EBS
            # encryption by default is on (read as absent: defaults.py). A volume made from a snapshot takes the
            # snapshot's encryption, which the plan cannot tell: it stays unknown.
            for attr in ("encrypted", "kms_key_id"):
                if attr not in cfg.references:
                    found[attr] = None
        elif cfg is not None and rc.type == "aws_eip":
            # instance and network_interface are Optional+Computed: unknown in a plan whenever the configuration
            # leaves them out, yet the EIP is then bound to neither (an association or a NAT gateway's
            # allocation_id binds it, each read on its own): "instance - (Optional) EC2 instance ID." /
            # "network_interface - (Optional) Network interface ID to associate with." (website/docs/r/
            # eip.html.markdown); "allocation_id - (Optional) Allocation ID of the Elastic IP address for the NAT
            # Gateway." (website/docs/r/nat_gateway.html.markdown).
            for attr in ("instance", "network_interface"):
                if attr not in cfg.references:
                    found[attr] = None
        elif cfg is not None and rc.type == "huaweicloud_networking_secgroup_rule":
            for attr in _HW_RULE_COMPUTED:
                if attr not in cfg.references:
                    found[attr] = None
                elif attr in _HW_RULE_REMOTES:
                    targets = _resources_of(cfg.references[attr], self.aliases)
                    if targets and len(targets) == 1 and all(t.rsplit(".", 2)[-2] == _HW_RULE_REMOTES[attr]
                                                             for t in targets):
                        found[attr] = next(iter(targets))
        self.resolved[base] = found
        return found

    def _source_values(self, refs: list[str]) -> tuple[list[str], str] | None:
        """The values a source expression's references take in this plan (its planned values; a .tf file's
        literals), and a note naming each network range known only after apply; None when any reference leads
        elsewhere (a variable, a data source, a module output) or to a value the plan cannot tell, which stays
        unknown. Every instance of a block with several counts: a source is judged by all it may be."""
        if self._instances is None:
            self._instances = {}
            for rc in self._all:
                if rc.mode == "managed" and rc.change is not None and rc.change.actions != ["delete"]:
                    self._instances.setdefault(_base(rc.address), []).append(
                        _overlay(_decode_after(rc.change.after), _JSON.decode(rc.change.after_unknown)))
        values: list[str] = []
        ranges: list[str] = []
        named: set[str] = set()
        bare: set[str] = set()
        for raw in refs:
            parts = _INDEX.sub("", raw).split(".")
            i = 0
            while i + 1 < len(parts) and parts[i] == "module":
                i += 2
            if i + 1 >= len(parts) or parts[i] in _NOT_RESOURCE:
                return None
            resource = ".".join(parts[:i + 2])
            if i + 2 >= len(parts):
                bare.add(resource)
                continue
            attr = parts[i + 2]
            named.add(resource)
            instances = self._instances.get(resource)
            if not instances:
                return None
            for after in instances:
                v = after.get(attr)
                if type(v) is str and v:
                    values.append(v)
                elif isinstance(v, list) and v and all(type(x) is str for x in v):
                    values.extend(v)
                elif attr in _RANGES.get(parts[i], ()):
                    ranges.append(f"{resource}.{attr}")
                else:
                    return None
        if not named or bare - named:
            return None
        why = ""
        if ranges:
            values.extend(sorted(set(ranges)))
            why = (f"{', '.join(sorted(set(ranges)))}: a network's address range, known only after apply; never "
                   "0.0.0.0/0 or ::/0")
        return values, why

    def _sources(self, rc: _ResourceChange, base: str, cfg: _ConfigResource, props: dict[str, Any]) -> str:
        """Source CIDRs unknown in the plan only because they refer to attributes of its other resources (a
        subnet's ``cidr``, a VPC's ``cidr_block``) take those values; returns the note for the rule's sources."""
        notes: list[str] = []

        def resolved(attr: str) -> tuple[list[str], str] | None:
            key = (base, attr)
            if key not in self.sourced:
                refs = cfg.references.get(attr)
                self.sourced[key] = self._source_values(refs) if refs else None
            return self.sourced[key]

        def fill(holder: dict[str, Any], attr: str, refs_attr: str) -> None:
            v = holder.get(attr)
            unknown = v is UNKNOWN or (isinstance(v, list) and any(x is UNKNOWN for x in v))
            if not unknown or (found := resolved(refs_attr)) is None:
                return
            values, why = found
            if isinstance(v, list) or attr in _INLINE_SOURCES:  # the list attributes
                holder[attr] = [x for x in (v if isinstance(v, list) else []) if x is not UNKNOWN] + values
            elif len(values) == 1:
                holder[attr] = values[0]
            else:
                return
            if why and why not in notes:
                notes.append(why)

        if rc.type == "aws_security_group":
            for rule in props.get("ingress") or ():
                if isinstance(rule, dict):
                    for attr in _INLINE_SOURCES:
                        fill(rule, attr, "ingress")
        else:
            for attr in _SOURCE_ATTRS[rc.type]:
                fill(props, attr, attr)
        return "; ".join(notes)

    def views(self, part: tuple[int, int] = (0, 1)) -> list[Resource]:
        """The views of the i-th of n equal runs of the plan's resources (``part`` (i, n); all by default)."""
        index, parts = part
        lo, hi = len(self.changes) * index // parts, len(self.changes) * (index + 1) // parts
        file, blocks, config, links, counts = self.file, self.blocks, self.config, self.links, self.counts
        public_via, attached = self.public_via, self.attached
        launched, bound_addresses, unbound = self.launched, self.bound_addresses, self.unbound
        bound = bool(public_via or attached or launched or bound_addresses or unbound)
        out: list[Resource] = []
        for rc, base in zip(self.changes[lo:hi], self.bases[lo:hi], strict=True):  # one at a time: only views stay
            props = _props(rc, self.unknowns)
            if rc.type in _RESOLVED:
                for attr, value in self._resolved(rc, base).items():
                    if props.get(attr) is UNKNOWN:
                        if value is None:
                            props.pop(attr)
                        else:
                            props[attr] = value
            sourced = ""
            if rc.type in _SOURCE_ATTRS or (rc.type == "aws_security_group" and isinstance(props.get("ingress"),
                                                                                           list)):
                cfg = config.get(base)
                if cfg is not None:
                    sourced = self._sources(rc, base, cfg, props)
            b = blocks.get(base)
            loc = Location(b.file if b else file, b.line if b else None, 1 if b else None, rc.address)
            subnet: Maybe[bool] | None = None
            cfg = config.get(base)
            if cfg is not None:
                link = links.get(base)
                if link is None:
                    targets = [(attr, target) for attr in _BINDS
                               if (target := _target(cfg.references.get(attr, [])))]
                    sn = _target(cfg.references.get("subnet_id", []))
                    link = links[base] = (targets, self.subnets[_base(sn)] if sn is not None and _base(sn) in
                                          self.subnets else None)
                for attr, target in link[0]:
                    if props.get(attr) in (UNKNOWN, None, ""):
                        props[attr] = target
                subnet = link[1]
            built = native_resources(rc.type, props, rc.address, loc, "terraform", self.assume, subnet,
                                     counts.get(base, 1))
            fronts = self.fronted.get(base) if self.fronted else None
            if self.fronted and fronts is None and base in self.rule_groups:
                lbs = [self.fronted.get(g) for g in self.rule_groups[base]]
                fronts = ", ".join(x for x in lbs if x) if lbs and all(lbs) else None
            if fronts:
                why = (f"its group is attached only to the load balancer(s) {fronts}, no instance, template or node: "
                       "MF-NET-003 does not judge a load balancer's own group (MF-NET-002 does)")
                built = [msgspec.structs.replace(r, load_balancer=fronts, notes={**r.notes, "load_balancer": why})
                         if isinstance(r, SecurityRule) else r for r in built]
            if sourced:
                built = [msgspec.structs.replace(r, notes={**r.notes, "sources": "; ".join(
                    n for n in (r.notes.get("sources"), sourced) if n)}) if isinstance(r, SecurityRule) else r
                    for r in built]
            if bound and (rc.address in public_via or rc.address in attached or rc.address in launched
                          or rc.address in bound_addresses or rc.address in unbound):
                built = self._bound(rc, built)
            out.extend(built)
        return out
