"""Issue 21, the defects the public IaC corpus found (tests/policies/corpus), each with a case that must be reported
and one that must not, as .tf files and as plans shaped as ``terraform show -json`` writes them:

- an Alibaba launch template's ``tags`` are its instances' and disks' tags (``template_tags`` the template's own);
- an EIP bound to a NAT gateway, a load balancer or a HaVip is no node's public address, nor is an aws_eip that a
  NAT gateway takes by ``allocation_id``;
- a rule's source that refers to a subnet's or VPC's range takes its value (a range known only after apply is
  still never the world); any other reference the plan cannot tell stays unknown;
- a group attached only to load balancers is not judged by MF-NET-003 (a node's exposure); MF-NET-002 still is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metalfleet.policies.adapters.common import Assumptions
from metalfleet.policies.adapters.hcl import read_tf
from metalfleet.policies.check import check_paths
from metalfleet.policies.model import SecurityRule
from tests.policies.test_plan_semantics_21 import R, Ref, plan, ref

#: rule id -> {resource name: unknown?}
Found = dict[str, dict[str, bool]]


def tf(folder: Path, text: str) -> Found:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "main.tf").write_text(text)
    return _found(folder)


def planned(path: Path, doc: dict[str, Any]) -> Found:
    path.write_text(json.dumps(doc, indent=1))
    return _found(path)


def _found(path: Path) -> Found:
    out: Found = {}
    for f in check_paths([path]).findings:
        out.setdefault(f.rule.id, {})[f.resource_name] = f.unknown
    return out


# ------------------------------------------------------------------------------------------ Alibaba template tags


def launch_template(kind: str, tags: str) -> str:
    return f'''
resource "{kind}" "gpu" {{
  instance_type = "ecs.gn7i-c8g1.2xlarge"
  image_id      = "ubuntu_22_04_x64"
  http_tokens   = "required"
  template_tags = {{ owner = "ml", cost-center = "cc-1" }}
  {tags}
  system_disk {{
    encrypted = true
  }}
}}
'''


def test_an_alibaba_launch_template_is_judged_by_its_instances_tags(tmp_path: Path) -> None:
    for kind in ("alicloud_ecs_launch_template", "alicloud_launch_template"):
        bad = tf(tmp_path / kind / "bad", launch_template(kind, ""))  # template_tags only: the template's own
        assert set(bad["MF-TAG-001"]) == {f"{kind}.gpu", f"{kind}.gpu system disk"}, bad
        good = tf(tmp_path / kind / "good", launch_template(kind, 'tags = { owner = "ml", cost-center = "cc-1" }'))
        assert "MF-TAG-001" not in good, good


def test_an_alibaba_launch_templates_tag_note_names_the_argument(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(launch_template("alicloud_ecs_launch_template", ""))
    views, _, _ = read_tf(tmp_path, Assumptions())
    node = next(v for v in views if v.name == "alicloud_ecs_launch_template.gpu")
    assert "template_tags are the template's own" in node.notes["tags"], node.notes


# ------------------------------------------------------------------------------------------ EIPs on non-nodes

ALI_EIP = '''
resource "alicloud_instance" "gpu" {
  instance_type              = "ecs.gn7i-c8g1.2xlarge"
  image_id                   = "ubuntu_22_04_x64"
  internet_max_bandwidth_out = 0
}
resource "alicloud_nat_gateway" "nat" {
  vpc_id = "vpc-1"
}
resource "alicloud_eip_address" "ip" {
  address_name = "x"
}
resource "alicloud_eip_association" "ip" {
  allocation_id = alicloud_eip_address.ip.id
  %s
}
'''


def test_an_eip_bound_to_a_nat_gateway_is_no_nodes_address(tmp_path: Path) -> None:
    nat = tf(tmp_path / "nat", ALI_EIP % "instance_id = alicloud_nat_gateway.nat.id")
    assert "MF-NET-001" not in nat, nat
    node = tf(tmp_path / "node", ALI_EIP % "instance_id = alicloud_instance.gpu.id")
    assert node["MF-NET-001"] == {"alicloud_instance.gpu": False}, node


def test_an_alibaba_association_by_instance_type(tmp_path: Path) -> None:
    for kind in ("Nat", "SlbInstance", "HaVip"):
        found = tf(tmp_path / kind, ALI_EIP % f'instance_id = "x-123"\n  instance_type = "{kind}"')
        assert "MF-NET-001" not in found, (kind, found)
    ecs = tf(tmp_path / "ecs", ALI_EIP % 'instance_id = "i-123"\n  instance_type = "EcsInstance"')
    assert ecs["MF-NET-001"] == {"alicloud_eip_association.ip": False}, ecs  # an instance outside the input
    eni = tf(tmp_path / "eni", ALI_EIP % 'instance_id = "eni-123"\n  instance_type = "NetworkInterface"')
    assert "alicloud_eip_association.ip" in eni["MF-NET-001"], eni  # an interface may be an instance's


def test_a_huawei_eip_on_a_load_balancer_port_is_no_nodes_address(tmp_path: Path) -> None:
    text = '''
resource "huaweicloud_lb_loadbalancer" "lb" {
  vip_subnet_id = "subnet-1"
}
resource "huaweicloud_vpc_eip_associate" "ip" {
  public_ip = "1.2.3.4"
  port_id   = %s
}
'''
    assert "MF-NET-001" not in tf(tmp_path / "lb", text % "huaweicloud_lb_loadbalancer.lb.vip_port_id")
    outside = tf(tmp_path / "var", text % "var.port")  # a port the input cannot tell: unknown, fails closed
    assert outside["MF-NET-001"] == {"huaweicloud_vpc_eip_associate.ip": True}, outside


def aws_eip(config: dict[str, Any]) -> R:
    """An aws_eip as a real plan has it: instance and network_interface known only after apply (Optional+Computed)
    whatever the configuration says."""
    unknown = {"id": True, "allocation_id": True, "public_ip": True, "instance": True, "network_interface": True}
    return R("aws_eip", "nat", {"domain": "vpc", "tags": None}, unknown, {"domain": "vpc", **config})


def test_an_aws_eip_a_nat_gateway_takes_is_no_nodes_address(tmp_path: Path) -> None:
    nat = R("aws_nat_gateway", "nat", {"subnet_id": "subnet-1"}, {"id": True, "allocation_id": True},
            {"subnet_id": "subnet-1", "allocation_id": ref("aws_eip.nat")})
    assert "MF-NET-001" not in planned(tmp_path / "a.json", plan([aws_eip({}), nat]))
    # one whose instance is configured from something the plan cannot tell stays unknown
    other = planned(tmp_path / "b.json", plan([aws_eip({"instance": Ref(("local.node",))}), nat]))
    assert other["MF-NET-001"] == {"aws_eip.nat": True}, other


# ------------------------------------------------------------------------------------------ sources from references


HW_RULE = '''
resource "huaweicloud_vpc_subnet" "net" {
  name       = "net"
  vpc_id     = "vpc-1"
  cidr       = %s
  gateway_ip = "192.168.0.1"
}
resource "huaweicloud_networking_secgroup_rule" "ssh" {
  security_group_id = "sg-1"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  ports             = "22"
  remote_ip_prefix  = %s
}
'''


def test_a_source_that_names_a_subnets_cidr_takes_its_value(tmp_path: Path) -> None:
    subnet = tf(tmp_path / "subnet", HW_RULE % ('"192.168.0.0/24"', "huaweicloud_vpc_subnet.net.cidr"))
    assert "MF-NET-002" not in subnet, subnet
    # the value is the referenced attribute's, so a world one is reported (not just any reference passed)
    world = tf(tmp_path / "world", HW_RULE % ('"0.0.0.0/0"', "huaweicloud_vpc_subnet.net.cidr"))
    assert world["MF-NET-002"] == {"huaweicloud_networking_secgroup_rule.ssh": False}, world
    # a subnet range known only after apply is a range all the same, never the world
    later = tf(tmp_path / "later", HW_RULE % ("var.cidr", "huaweicloud_vpc_subnet.net.ipv6_cidr"))
    assert "MF-NET-002" not in later, later
    # what the input cannot tell stays unknown and fails closed
    unknown = tf(tmp_path / "unknown", HW_RULE % ('"192.168.0.0/24"', "var.source"))
    assert unknown["MF-NET-002"] == {"huaweicloud_networking_secgroup_rule.ssh": True}, unknown
    instance = tf(tmp_path / "instance", HW_RULE % ('"192.168.0.0/24"', "huaweicloud_vpc_subnet.net.id"))
    assert instance["MF-NET-002"] == {"huaweicloud_networking_secgroup_rule.ssh": True}, instance  # id: after apply


def test_a_range_known_only_after_apply_is_noted(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(HW_RULE % ("var.cidr", "huaweicloud_vpc_subnet.net.ipv6_cidr"))
    views, _, _ = read_tf(tmp_path, Assumptions())
    rule = next(v for v in views if isinstance(v, SecurityRule))
    assert "huaweicloud_vpc_subnet.net.ipv6_cidr: a network's address range" in rule.notes["sources"], rule.notes


AWS_RULES = '''
resource "aws_vpc" "main" {
  cidr_block = "10.0.0.0/16"
}
resource "aws_subnet" "a" {
  vpc_id     = aws_vpc.main.id
  cidr_block = "10.0.1.0/24"
}
resource "aws_security_group" "inline" {
  vpc_id = aws_vpc.main.id
  ingress {
    from_port   = 0
    to_port     = 65535
    protocol    = "tcp"
    cidr_blocks = [%s]
  }
}
resource "aws_security_group_rule" "subnet" {
  type              = "ingress"
  security_group_id = "sg-1"
  from_port         = 22
  to_port           = 22
  protocol          = "tcp"
  cidr_blocks       = [%s]
}
resource "alicloud_security_group_rule" "vswitch" {
  type              = "ingress"
  security_group_id = "sg-2"
  ip_protocol       = "tcp"
  port_range        = "22/22"
  cidr_ip           = %s
}
resource "alicloud_vswitch" "a" {
  vpc_id     = "vpc-2"
  cidr_block = "172.16.0.0/24"
}
'''


def test_aws_and_alibaba_sources_from_vpc_and_subnet_ranges(tmp_path: Path) -> None:
    good = tf(tmp_path / "good", AWS_RULES % ("aws_vpc.main.cidr_block", "aws_subnet.a.cidr_block",
                                              "alicloud_vswitch.a.cidr_block"))
    assert "MF-NET-002" not in good and "MF-NET-003" not in good, good
    bad = tf(tmp_path / "bad", AWS_RULES % ("var.open", "var.open", "var.open"))
    assert set(bad["MF-NET-002"]) == {"aws_security_group.inline ingress[0]", "aws_security_group_rule.subnet",
                                      "alicloud_security_group_rule.vswitch"}, bad
    assert all(bad["MF-NET-002"].values()), bad  # unknown: fails closed
    assert bad["MF-NET-003"]["aws_security_group.inline ingress[0]"] is True, bad


def test_a_plans_planned_cidr_resolves_a_rule_resources_source(tmp_path: Path) -> None:
    subnet = R("aws_subnet", "a", {"cidr_block": "10.0.1.0/24", "vpc_id": "vpc-1"}, {"id": True},
               {"cidr_block": "10.0.1.0/24", "vpc_id": "vpc-1"})
    rule = R("aws_security_group_rule", "ssh", {"type": "ingress", "from_port": 22, "to_port": 22, "protocol": "tcp",
                                                "security_group_id": "sg-1", "cidr_blocks": [None]},
             {"id": True, "cidr_blocks": [True]},
             {"type": "ingress", "security_group_id": "sg-1", "cidr_blocks": ref("aws_subnet.a", "cidr_block")})
    assert "MF-NET-002" not in planned(tmp_path / "a.json", plan([subnet, rule]))
    subnet.after = {"vpc_id": "vpc-1"}
    subnet.unknown = {"id": True, "cidr_block": True}  # a subnet's CIDR from the VPC's IPAM: still a range
    assert "MF-NET-002" not in planned(tmp_path / "b.json", plan([subnet, rule]))
    rule.config["cidr_blocks"] = Ref(("var.cidrs",))
    found = planned(tmp_path / "c.json", plan([subnet, rule]))
    assert found["MF-NET-002"] == {"aws_security_group_rule.ssh": True}, found


# ------------------------------------------------------------------------------------------ load balancers' groups


def hcl(head: str, body: str = "", **attrs: str) -> str:
    """One block: ``head { k = v ... }`` (attributes as HCL expressions), nested blocks in ``body``."""
    return f"{head} {{\n" + "".join(f"  {k} = {v}\n" for k, v in attrs.items()) + body + "}\n"


def world(port: int) -> dict[str, str]:
    return {"from_port": str(port), "to_port": str(port), "protocol": '"tcp"', "cidr_blocks": '["0.0.0.0/0"]'}


LB = (hcl('resource "aws_security_group" "lb"', hcl("ingress", **world(80)) + hcl("ingress", **world(22)),
          vpc_id='"vpc-1"')
      + hcl('resource "aws_security_group_rule" "https"', type='"ingress"',
            security_group_id="aws_security_group.lb.id", **world(443))
      + hcl('resource "aws_lb" "web"', security_groups="[aws_security_group.lb.id]")
      + "%s\n")

def test_a_group_only_load_balancers_use_is_not_judged_by_mf_net_003(tmp_path: Path) -> None:
    lb = tf(tmp_path / "lb", LB % "")
    assert "MF-NET-003" not in lb, lb
    assert set(lb["MF-NET-002"]) == {"aws_security_group.lb ingress[1]"}, lb  # world SSH is judged everywhere
    node = tf(tmp_path / "node", LB % '''
resource "aws_instance" "web" {
  instance_type          = "t3.micro"
  vpc_security_group_ids = [aws_security_group.lb.id]
}''')
    assert set(node["MF-NET-003"]) == {"aws_security_group.lb ingress[0]", "aws_security_group_rule.https"}, node


def test_a_load_balancers_group_says_so_in_its_note(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text(LB % "")
    views, _, _ = read_tf(tmp_path, Assumptions())
    rules = [v for v in views if isinstance(v, SecurityRule)]
    assert len(rules) == 3 and all(r.load_balancer == "aws_lb.web" for r in rules), rules
    assert "attached only to the load balancer(s) aws_lb.web" in rules[0].notes["load_balancer"], rules[0].notes
