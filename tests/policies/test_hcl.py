"""Terraform ``.tf`` files read directly (issue 21, item 3): a pull request is checked on its files, no plan needed.

Attributes left out take the provider defaults (as in a plan); references and other expressions are unknown (fail
closed); ``count``/``for_each`` blocks are one resource ``type.name[*]``; registry modules are reported as not
read, local ones are read; rule resources, EIP associations and volume attachments are linked to what they name.
The equivalence case compares a configuration with the plan ``terraform`` made of it (a committed fixture).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from metalfleet.policies.adapters import load_input
from metalfleet.policies.check import check_paths
from metalfleet.policies.engine import Report
from metalfleet.policies.model import UNKNOWN, ComputeNode, Resource, SecurityRule, Volume
from metalfleet.stacks.cli import main

EQUIVALENCE = Path(__file__).parent / "fixtures" / "hcl" / "equivalence"
TODAY = date(2026, 12, 1)


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _views(path: Path) -> dict[str, Resource]:
    loaded = load_input(path)
    assert loaded.kind == "terraform-hcl"
    return {r.name: r for r in loaded.resources}


def _found(report: Report) -> set[tuple[str, str, bool]]:
    return {(f.rule.id, f.resource_name, f.unknown) for f in report.findings}


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """``metalfleet policy check ARGS`` in process: (exit code, stdout, stderr lines)."""
    enabled = gc.isenabled()

    def run(*args: str) -> tuple[int, str, list[str]]:
        code = main(["policy", "check", *args])
        out, err = capsys.readouterr()
        return code, out, err.strip().splitlines()

    yield run
    if enabled:
        gc.enable()  # the command turns the cyclic GC off for its own run


INSTANCE = '''resource "aws_instance" "gpu" {
  ami           = "ami-123"
  instance_type = "p5.48xlarge"
  subnet_id     = "subnet-0abc"
  tags = {
    owner         = "ml"
    "cost-center" = "42"
  }
}
'''


def test_attributes_left_out_take_the_provider_defaults(tmp_path: Path) -> None:
    views = _views(_write(tmp_path, "main.tf", INSTANCE))
    node, root = views["aws_instance.gpu"], views["aws_instance.gpu root volume"]
    assert isinstance(node, ComputeNode) and isinstance(root, Volume)
    assert node.gpu is True and node.instance_type == "p5.48xlarge"
    assert node.metadata_tokens_required is False and "absent: metadata_options.http_tokens" in node.notes[
        "metadata_tokens_required"]
    assert root.encrypted is False and "absent: root_block_device.encrypted" in root.notes["encrypted"]
    assert node.location.file == str(tmp_path / "main.tf") and node.location.line == 1
    found = _found(check_paths([tmp_path / "main.tf"], today=TODAY))
    assert ("MF-NET-005", "aws_instance.gpu", False) in found and \
        ("MF-ENC-001", "aws_instance.gpu root volume", False) in found


def test_references_and_expressions_are_unknown_and_fail_closed(tmp_path: Path) -> None:
    _write(tmp_path, "main.tf", '''variable "encrypted" {}
locals {
  tokens = "required"
}
resource "aws_instance" "gpu" {
  ami           = "ami-123"
  instance_type = "p5.48xlarge"
  subnet_id     = aws_subnet.private.id
  associate_public_ip_address = false
  metadata_options {
    http_tokens = local.tokens
  }
  root_block_device {
    encrypted  = var.encrypted
    kms_key_id = aws_kms_key.disk.arn
  }
  tags = merge(local.tags, { Name = "gpu-${terraform.workspace}" })
}
resource "aws_ebs_volume" "data" {
  availability_zone = "us-east-1a"
  encrypted         = true
  kms_key_id        = "${aws_kms_key.disk.arn}"
}
''')
    views = _views(tmp_path / "main.tf")
    node, root, data = views["aws_instance.gpu"], views["aws_instance.gpu root volume"], views["aws_ebs_volume.data"]
    assert isinstance(node, ComputeNode) and isinstance(root, Volume) and isinstance(data, Volume)
    # an unknown http_tokens is judged as not required, as in a plan (the native reader's rule)
    assert node.metadata_tokens_required is False and "unknown" in node.notes["metadata_tokens_required"]
    assert root.encrypted is UNKNOWN and root.kms_key is UNKNOWN
    assert data.encrypted is True and data.kms_key is UNKNOWN, "an interpolation is unknown too"
    report = check_paths([tmp_path / "main.tf"], today=TODAY)
    assert {("MF-NET-005", "aws_instance.gpu", False), ("MF-ENC-001", "aws_instance.gpu root volume", True),
            ("MF-ENC-002", "aws_ebs_volume.data", True)} <= _found(report)
    assert report.exit_code == 1, "unknown values of mandatory rules fail"


def test_a_variables_literal_default_is_taken_and_said(tmp_path: Path) -> None:
    _write(tmp_path, "variables.tf", 'variable "type" {\n  default = "p5.48xlarge"\n}\nvariable "ami" {}\n')
    _write(tmp_path, "main.tf", INSTANCE.replace('"p5.48xlarge"', "var.type").replace('"ami-123"', "var.ami"))
    views = _views(tmp_path / "main.tf")
    node = views["aws_instance.gpu"]
    assert isinstance(node, ComputeNode) and node.instance_type == "p5.48xlarge" and node.gpu is True
    assert "var.type" in node.notes["instance_type"] and "may differ" in node.notes["instance_type"]
    assert set(views) == {"aws_instance.gpu", "aws_instance.gpu root volume"}, "variables.tf has no resources"


def test_count_and_for_each_are_one_resource_each(tmp_path: Path) -> None:
    _write(tmp_path, "main.tf", INSTANCE.replace('"gpu" {', '"gpu" {\n  count = 3', 1)
           + INSTANCE.replace('"gpu" {', '"each" {\n  for_each = var.names', 1)
           + INSTANCE.replace('"gpu" {', '"off" {\n  count = 0', 1))
    views = _views(tmp_path / "main.tf")
    gpu, each = views["aws_instance.gpu[*]"], views["aws_instance.each[*]"]
    assert isinstance(gpu, ComputeNode) and isinstance(each, ComputeNode)
    assert (gpu.count, each.count) == (3, 1), "a literal count is the group's size; an unknown one reads as one"
    assert not any(name.startswith("aws_instance.off") for name in views), "count = 0: no resource"
    advisory = [f for f in check_paths([tmp_path], today=TODAY).findings if f.rule.id == "MF-ADV-001"]
    assert [f.resource_name for f in advisory] == ["aws_instance.gpu[*]"], "3 nodes, no placement group"


def test_registry_module_is_reported_not_read_and_local_module_is_read(tmp_path: Path, cli: Any) -> None:
    _write(tmp_path, "main.tf", '''module "vpc" {
  source  = "terraform-aws-modules/vpc/aws"
  version = "5.0.0"
}
module "nodes" {
  source = "./modules/nodes"
  type   = "p5.48xlarge"
}
module "gone" {
  source = "./modules/missing"
}
''')
    _write(tmp_path, "modules/nodes/main.tf", 'variable "type" {}\n\n'
           + INSTANCE.replace('"p5.48xlarge"', "var.type").replace('subnet_id     = "subnet-0abc"',
                                                                  "associate_public_ip_address = true"))
    code, out, err = cli(str(tmp_path), "--format", "json")
    assert err == [] and code == 1, err
    doc = json.loads(out)
    (inp,) = doc["inputs"]
    assert inp["kind"] == "terraform-hcl"
    assert [n.split(" ")[0] for n in inp["not_read"]] == ["module.vpc", "module.gone"]
    assert "terraform-aws-modules/vpc/aws" in inp["not_read"][0]
    public = [f for f in doc["findings"] if f["rule"] == "MF-NET-001"]
    assert [f["resource"] for f in public] == ["module.nodes.aws_instance.gpu"], "the module's call gave its type"
    assert public[0]["location"]["file"] == str(tmp_path / "modules/nodes/main.tf")
    assert public[0]["location"]["line"] == 3
    code, out, _ = cli(str(tmp_path))
    assert "not read: module.vpc (source terraform-aws-modules/vpc/aws" in out


def test_a_registry_module_alone_is_a_notice_not_a_failure(tmp_path: Path, cli: Any) -> None:
    _write(tmp_path, "main.tf", 'module "vpc" {\n  source = "terraform-aws-modules/vpc/aws"\n}\n')
    code, out, err = cli(str(tmp_path / "main.tf"), "--format", "github")
    assert code == 0 and err == []
    assert "::notice title=not read::module.vpc (source terraform-aws-modules/vpc/aws" in out


def test_rule_resources_and_bindings_are_linked_by_reference(tmp_path: Path) -> None:
    _write(tmp_path, "main.tf", '''resource "aws_security_group" "gpu" {
  name = "gpu"
}
resource "aws_security_group" "dyn" {
  name = "dyn"
  dynamic "ingress" {
    for_each = var.rules
    content {
      from_port = ingress.value
    }
  }
}
resource "aws_vpc_security_group_ingress_rule" "ssh" {
  security_group_id = aws_security_group.gpu.id
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = "0.0.0.0/0"
}
resource "aws_subnet" "private" {
  vpc_id     = "vpc-1"
  cidr_block = "10.0.0.0/24"
}
''' + INSTANCE.replace('"subnet-0abc"', "aws_subnet.private.id") + '''
resource "aws_eip_association" "gpu" {
  allocation_id = "eipalloc-1"
  instance_id   = aws_instance.gpu.id
}
resource "aws_ebs_volume" "data" {
  availability_zone = "us-east-1a"
  encrypted         = true
}
resource "aws_volume_attachment" "data" {
  device_name = "/dev/sdf"
  volume_id   = aws_ebs_volume.data.id
  instance_id = aws_instance.gpu.id
}
''')
    views = _views(tmp_path / "main.tf")
    rule, node, data = views["aws_vpc_security_group_ingress_rule.ssh"], views["aws_instance.gpu"], \
        views["aws_ebs_volume.data"]
    assert isinstance(rule, SecurityRule) and rule.sources == ("0.0.0.0/0",)
    assert not [n for n in views if n.startswith("aws_security_group.gpu")], "its rules are the rule resource"
    assert isinstance(node, ComputeNode) and node.public_ip is True and "aws_eip_association.gpu" in node.notes[
        "public_ip"], "private subnet, but the association binds an EIP to it"
    assert isinstance(data, Volume) and data.attached_to == "aws_instance.gpu"
    found = _found(check_paths([tmp_path], today=TODAY))
    assert ("MF-NET-002", "aws_vpc_security_group_ingress_rule.ssh", False) in found
    assert ("MF-NET-001", "aws_instance.gpu", False) in found
    assert not [f for f in found if f[1].startswith("aws_security_group.gpu")]
    assert [f for f in found if f[1].startswith("aws_security_group.dyn")], "a dynamic block is unknown"
    assert all(u for _, n, u in found if n.startswith("aws_security_group.dyn"))


def test_a_file_reads_its_module_but_reports_only_its_own_resources(tmp_path: Path) -> None:
    _write(tmp_path, "sg.tf", 'resource "aws_security_group" "gpu" {\n  name = "gpu"\n}\n'
           'resource "aws_security_group_rule" "ssh" {\n  type = "ingress"\n  from_port = 22\n  to_port = 22\n'
           '  protocol = "tcp"\n  cidr_blocks = ["0.0.0.0/0"]\n  security_group_id = aws_security_group.gpu.id\n}\n')
    _write(tmp_path, "main.tf", INSTANCE)
    assert set(_views(tmp_path / "main.tf")) == {"aws_instance.gpu", "aws_instance.gpu root volume"}
    assert set(_views(tmp_path / "sg.tf")) == {"aws_security_group_rule.ssh"}
    assert set(_views(tmp_path)) == {"aws_instance.gpu", "aws_instance.gpu root volume",
                                     "aws_security_group_rule.ssh"}


def test_a_suppression_comment_in_a_block_applies(tmp_path: Path) -> None:
    _write(tmp_path, "main.tf", INSTANCE.replace(
        '  ami ', '  # metalfleet:suppress MF-NET-005 reason: IMDS is off in the AMI\n  ami ', 1))
    report = check_paths([tmp_path / "main.tf"], today=TODAY)
    assert [f.rule.id for f in report.suppressed] == ["MF-NET-005"]
    assert "MF-NET-005" not in {f.rule.id for f in report.findings}


def test_a_malformed_file_is_exit_2_with_one_line_naming_file_and_line(tmp_path: Path, cli: Any) -> None:
    bad = _write(tmp_path, "main.tf", 'resource "aws_instance" "gpu" {\n  ami = "ami-1"\n  instance_type =\n}\n')
    code, out, err = cli(str(bad))
    assert (code, out) == (2, "")
    assert len(err) == 1 and err[0].startswith(f"error: policy input {bad} is not valid Terraform HCL at line 3")
    good = _write(tmp_path / "other", "main.tf", INSTANCE)
    _write(tmp_path / "other", "broken.tf", 'resource "x" "y" {\n')
    code, _, err = cli(str(good))
    assert code == 2 and len(err) == 1 and str(good) in err[0] and "broken.tf" in err[0], \
        "a broken file of its module: terraform would refuse the module too"


def test_a_folder_without_tf_files_is_still_a_directory_error(tmp_path: Path, cli: Any) -> None:
    code, _, err = cli(str(tmp_path))
    assert code == 2 and err == [f"error: cannot read policy input {tmp_path}: it is a directory, not a file"]


def test_tf_and_the_plan_terraform_made_of_it_give_the_same_findings() -> None:
    """The fixture's plan.json is ``terraform show -json`` of its main.tf. Findings are compared by rule and resource
    block (a plan names ``aws_instance.gpu[0]``, the .tf ``aws_instance.gpu[*]``). Where they differ, the .tf knows
    more than the plan: what the configuration leaves out is a provider default, while the plan marks it computed."""
    plan = check_paths([EQUIVALENCE / "plan.json"], today=TODAY)
    tf = check_paths([EQUIVALENCE / "main.tf"], today=TODAY)
    assert (plan.inputs[0].kind, tf.inputs[0].kind) == ("terraform-plan", "terraform-hcl")

    def by_block(report: Report) -> dict[tuple[str, str], set[bool]]:
        out: dict[tuple[str, str], set[bool]] = {}
        for f in report.findings:
            name = f.resource_name.replace("[*]", "").replace("[0]", "").replace("[1]", "")
            out.setdefault((f.rule.id, name), set()).add(f.unknown)
            assert f.location.file == str(EQUIVALENCE / "main.tf") and f.location.line, f
        return out

    from_plan, from_tf = by_block(plan), by_block(tf)
    both = {("MF-NET-002", "aws_security_group_rule.ssh"), ("MF-NET-002", "aws_security_group.open ingress"),
            ("MF-NET-003", "aws_security_group.open ingress"), ("MF-NET-001", "aws_instance.gpu"),
            ("MF-NET-005", "aws_instance.bastion"), ("MF-ENC-001", "aws_instance.bastion root volume"),
            ("MF-ENC-001", "aws_ebs_volume.scratch"), ("MF-ENC-002", "aws_instance.gpu root volume"),
            ("MF-TAG-001", "aws_instance.bastion")}
    assert both <= set(from_plan) and both <= set(from_tf)
    assert set(from_tf) <= set(from_plan), "the .tf finds nothing the plan does not"
    # What only the plan reports is a value it leaves computed that the .tf shows: aws_eip.gpu sets no instance, so
    # the plan marks it unknown (fail closed) while the .tf shows it bound to nothing (its association is judged
    # on its own).
    assert all(from_plan[k] == {True} for k in set(from_plan) - set(from_tf)), set(from_plan) - set(from_tf)
    assert ("MF-NET-001", "aws_eip.gpu") not in from_tf
    # Judged in both, unknown in the plan only, where it leaves computed what the .tf leaves to the default (the
    # bastion's root_block_device, the instances' placement group and subnet).
    differ = {k for k in from_tf if from_tf[k] != from_plan[k]}
    assert ("MF-ENC-001", "aws_instance.bastion root volume") in differ
    assert all(from_tf[k] == {False} and True in from_plan[k] for k in differ), differ
    assert from_tf[("MF-ENC-002", "aws_instance.gpu root volume")] == {True}, "a key reference: unknown in both"
    assert tf.exit_code == plan.exit_code == 1
