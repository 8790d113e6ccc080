"""Issue 21: plan semantics and unreadable input.

- A security group whose rules are rule resources (``aws_vpc_security_group_ingress_rule`` /
  ``aws_security_group_rule``, ``alicloud_security_group_rule``, ``huaweicloud_networking_secgroup_rule``, each with
  ``security_group_id`` pointing at the group) is judged on those rules, not failed twice for its computed inline
  ``ingress`` being unknown at plan time; what the plan truly cannot tell stays unknown (fail closed).
- Malformed Pulumi documents, Terraform source (``.tf``, ``.tf.json``) and JSON of no known shape are unreadable
  input: exit 2 with one line naming the file and what is wrong, never exit 0.

The plans are written the way ``terraform show -json`` writes them: ``planned_values``, ``resource_changes`` whose
``after`` leaves out what ``after_unknown`` marks, and ``configuration`` with each resource's ``expressions``
(``constant_value`` or ``references``).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.policies.check import check_paths
from metalfleet.stacks.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class R:
    """One resource of a plan: its planned attributes, what is known only after apply, and its configuration."""

    type: str
    name: str
    after: dict[str, Any]
    unknown: dict[str, Any] = field(default_factory=dict)
    #: attribute -> references (a list) or a constant value
    config: dict[str, Any] = field(default_factory=dict)
    module: str = ""  # "module.sg." for a resource in module sg

    @property
    def address(self) -> str:
        return f"{self.module}{self.type}.{self.name}"


def _expr(value: Any) -> dict[str, Any]:
    if isinstance(value, Ref):
        return {"references": list(value.refs)}
    return {"constant_value": value}


@dataclass(frozen=True)
class Ref:
    refs: tuple[str, ...]


def ref(target: str, attr: str = "id") -> Ref:
    """What Terraform records for ``target.attr``: the attribute's traversal and the resource."""
    return Ref((f"{target}.{attr}", target))


def plan(resources: list[R], modules: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A plan as ``terraform show -json`` writes it; ``modules``: name -> {"outputs": {...}, "args": {...}} for a
    local module call (its resources are those whose ``module`` is ``module.<name>.``)."""
    provider = {"aws": "hashicorp/aws", "alicloud": "aliyun/alicloud", "huaweicloud": "huaweicloud/huaweicloud"}
    planned, changes = [], []
    for r in resources:
        common = {"address": r.address, "mode": "managed", "type": r.type, "name": r.name,
                  "provider_name": f"registry.terraform.io/{provider[r.type.split('_')[0]]}"}
        if r.module:
            common["module_address"] = r.module.rstrip(".")
        planned.append({**common, "schema_version": 0, "values": r.after, "sensitive_values": {}})
        changes.append({**common, "change": {"actions": ["create"], "before": None, "after": r.after,
                                             "after_unknown": r.unknown, "before_sensitive": False,
                                             "after_sensitive": {}}})

    def config(prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {"resources": [
            {"address": f"{r.type}.{r.name}", "mode": "managed", "type": r.type, "name": r.name,
             "provider_config_key": r.type.split("_")[0], "schema_version": 0,
             "expressions": {k: _expr(v) for k, v in r.config.items()}}
            for r in resources if r.module == prefix]}
        if not prefix and modules:
            out["module_calls"] = {
                name: {"source": f"./modules/{name}",
                       "expressions": {k: _expr(v) for k, v in m.get("args", {}).items()},
                       "module": {**config(f"module.{name}."),
                                  "outputs": {k: {"expression": _expr(v)} for k, v in m.get("outputs", {}).items()}}}
                for name, m in modules.items()}
        return out

    return {"format_version": "1.2", "terraform_version": "1.9.5",
            "planned_values": {"root_module": {"resources": planned}}, "resource_changes": changes,
            "configuration": {"root_module": config("")}, "timestamp": "2026-01-01T00:00:00Z",
            "applyable": True, "complete": True, "errored": False}


def findings(path: Path, doc: dict[str, Any]) -> set[tuple[str, str, bool]]:
    path.write_text(json.dumps(doc, indent=1))
    return {(f.resource_name, f.rule.id, f.unknown) for f in check_paths([path]).findings}


# ------------------------------------------------------------------------------------------ AWS

#: aws_security_group with no ingress/egress in its configuration: terraform marks both computed blocks unknown.
AWS_GROUP_UNKNOWN = {"arn": True, "egress": True, "id": True, "ingress": True, "name_prefix": True, "owner_id": True,
                     "tags_all": True, "vpc_id": True}


def aws_group(name: str = "gpu", **config: Any) -> R:
    return R("aws_security_group", name, {"name": name, "description": "Managed by Terraform",
                                          "revoke_rules_on_delete": False, "tags": None, "timeouts": None},
             dict(AWS_GROUP_UNKNOWN), {"name": name, **config})


def aws_ingress_rule(name: str, cidr: str, port: int, group: Ref | None = None) -> R:
    after = {"cidr_ipv4": cidr, "cidr_ipv6": None, "description": None, "from_port": port, "ip_protocol": "tcp",
             "prefix_list_id": None, "referenced_security_group_id": None, "tags": None, "to_port": port}
    return R("aws_vpc_security_group_ingress_rule", name, after,
             {"arn": True, "id": True, "security_group_id": True, "security_group_rule_id": True, "tags_all": True},
             {"cidr_ipv4": cidr, "from_port": port, "to_port": port, "ip_protocol": "tcp",
              "security_group_id": group or ref("aws_security_group.gpu")})


def aws_group_rule(name: str, cidrs: list[str], port: int, kind: str = "ingress") -> R:
    after = {"cidr_blocks": cidrs, "description": None, "from_port": port, "ipv6_cidr_blocks": None,
             "prefix_list_ids": None, "protocol": "tcp", "self": False, "timeouts": None, "to_port": port,
             "type": kind}
    return R("aws_security_group_rule", name, after,
             {"cidr_blocks": [False] * len(cidrs), "id": True, "security_group_id": True,
              "security_group_rule_id": True, "source_security_group_id": True},
             {"cidr_blocks": cidrs, "from_port": port, "to_port": port, "protocol": "tcp", "type": kind,
              "security_group_id": ref("aws_security_group.gpu")})


def test_the_issue_case_before_the_fix(tmp_path: Path) -> None:
    """The defect as filed: a group with only rule resources got two mandatory "unknown source" findings (MF-NET-002
    and MF-NET-003 on ``aws_security_group.gpu ingress``); now only the world-open rule resource fails, known."""
    found = findings(tmp_path / "p.json", plan([aws_group(), aws_ingress_rule("ssh", "0.0.0.0/0", 22)]))
    assert found == {("aws_vpc_security_group_ingress_rule.ssh", "MF-NET-002", False)}, found


@pytest.mark.parametrize("rule", [aws_ingress_rule, lambda n, c, p: aws_group_rule(n, [c], p)],
                         ids=["vpc_security_group_ingress_rule", "security_group_rule"])
def test_a_group_is_judged_on_its_rule_resources(tmp_path: Path, rule: Any) -> None:
    world = findings(tmp_path / "world.json", plan([aws_group(), rule("ssh", "0.0.0.0/0", 22)]))
    assert {(n, r) for n, r, _ in world} == {(f"{rule('ssh', '0.0.0.0/0', 22).type}.ssh", "MF-NET-002")}, world
    assert not any(unknown for _, _, unknown in world)
    assert findings(tmp_path / "vpc.json", plan([aws_group(), rule("ssh", "10.0.0.0/16", 22)])) == set()


def test_egress_rule_resources_also_show_the_pattern(tmp_path: Path) -> None:
    """A group whose only rule resource is an egress rule has no inline ingress either: nothing reaches it."""
    assert findings(tmp_path / "p.json", plan([aws_group(), aws_group_rule("out", ["0.0.0.0/0"], 443, "egress")])) \
        == set()


def test_what_the_plan_cannot_tell_stays_unknown(tmp_path: Path) -> None:
    unknown_group = {("aws_security_group.gpu ingress", "MF-NET-002", True),
                     ("aws_security_group.gpu ingress", "MF-NET-003", True)}
    # No rule resource, no .tf source: the configuration section leaves dynamic "ingress" blocks out, so an unset
    # ingress may still be a dynamic block over values known only after apply.
    assert findings(tmp_path / "alone.json", plan([aws_group()])) == unknown_group
    # The configuration sets ingress (to a value known only after apply): that value is what is unknown.
    inline = aws_group(ingress=Ref(("aws_vpc.main.cidr_block", "aws_vpc.main")))
    assert findings(tmp_path / "inline.json", plan([inline, aws_ingress_rule("ssh", "10.0.0.0/16", 22)])) \
        == unknown_group
    # The rule resource's group comes through a local: which group it attaches to cannot be shown.
    via_local = aws_ingress_rule("ssh", "10.0.0.0/16", 22, Ref(("local.sg_id",)))
    assert findings(tmp_path / "local.json", plan([aws_group(), via_local])) == unknown_group
    # Without a configuration section nothing can be resolved.
    doc = plan([aws_group(), aws_ingress_rule("ssh", "10.0.0.0/16", 22)])
    del doc["configuration"]
    assert findings(tmp_path / "noconfig.json", doc) == unknown_group


def test_the_tf_source_settles_a_group_or_keeps_it_unknown(tmp_path: Path) -> None:
    (tmp_path / "main.tf").write_text('resource "aws_security_group" "gpu" {\n  name = "gpu"\n}\n')
    assert findings(tmp_path / "plain.json", plan([aws_group()])) == set(), "no inline rules, none attached"
    (tmp_path / "main.tf").write_text('resource "aws_security_group" "gpu" {\n  name = "gpu"\n'
                                      '  dynamic "ingress" {\n    for_each = var.rules\n'
                                      '    content {\n      from_port = ingress.value\n    }\n  }\n}\n')
    found = findings(tmp_path / "dynamic.json", plan([aws_group(), aws_ingress_rule("ssh", "10.0.0.0/16", 22)]))
    assert found == {("aws_security_group.gpu ingress", "MF-NET-002", True),
                     ("aws_security_group.gpu ingress", "MF-NET-003", True)}, "a dynamic ingress block is unknown"


def test_rule_resources_across_modules(tmp_path: Path) -> None:
    # A rule in the root attached to a module's group through the module's output.
    grp = aws_group("this")
    grp.module = "module.sg."
    rule = aws_ingress_rule("ssh", "0.0.0.0/0", 22, Ref(("module.sg.security_group_id", "module.sg")))
    doc = plan([grp, rule], {"sg": {"outputs": {"security_group_id": ref("aws_security_group.this")}}})
    assert findings(tmp_path / "out.json", doc) == {("aws_vpc_security_group_ingress_rule.ssh", "MF-NET-002", False)}
    # A rule inside a module attached to the root's group through the module's input.
    inner = aws_ingress_rule("ssh", "10.0.0.0/16", 22, Ref(("var.security_group_id",)))
    inner.module = "module.rules."
    doc = plan([aws_group(), inner], {"rules": {"args": {"security_group_id": ref("aws_security_group.gpu")}}})
    assert findings(tmp_path / "in.json", doc) == set()


# ------------------------------------------------------------------------------------------ Alibaba, Huawei


def ali_rule(cidr: str) -> R:
    """alicloud_security_group_rule: cidr_ip, port_range ("-1/-1" default) and policy ("accept" default) are known
    in the plan; security_group_id is the group's computed ID."""
    after = {"cidr_ip": cidr, "description": None, "ip_protocol": "tcp", "ipv6_cidr_ip": None, "policy": "accept",
             "port_range": "22/22", "priority": 1, "source_group_owner_account": None,
             "source_security_group_id": None, "type": "ingress"}
    return R("alicloud_security_group_rule", "ssh", after,
             {"id": True, "nic_type": True, "prefix_list_id": True, "security_group_id": True},
             {"cidr_ip": cidr, "ip_protocol": "tcp", "port_range": "22/22", "type": "ingress",
              "security_group_id": ref("alicloud_security_group.gpu")})


ALI_GROUP = R("alicloud_security_group", "gpu", {"security_group_name": "gpu", "tags": None},
              {"id": True, "vpc_id": True}, {"security_group_name": "gpu"})


def test_alibaba_rule_resources(tmp_path: Path) -> None:
    assert findings(tmp_path / "w.json", plan([ALI_GROUP, ali_rule("0.0.0.0/0")])) \
        == {("alicloud_security_group_rule.ssh", "MF-NET-002", False)}
    assert findings(tmp_path / "v.json", plan([ALI_GROUP, ali_rule("10.0.0.0/16")])) == set()


HW_GROUP = R("huaweicloud_networking_secgroup", "gpu", {"name": "gpu", "delete_default_rules": True},
             {"id": True, "rules": True, "region": True}, {"name": "gpu", "delete_default_rules": True})
HW_BASTION = R("huaweicloud_networking_secgroup", "bastion", {"name": "bastion"}, {"id": True, "rules": True},
               {"name": "bastion"})
#: huaweicloud_networking_secgroup_rule's Optional+Computed attributes, unknown in the plan when not set.
HW_COMPUTED = ("action", "ports", "port_range_max", "port_range_min", "priority", "protocol", "remote_address_group_id",
               "remote_group_id", "remote_ip_prefix")


def hw_rule(**config: Any) -> R:
    config = {"direction": "ingress", "ethertype": "IPv4",
              "security_group_id": ref("huaweicloud_networking_secgroup.gpu"), **config}
    after = {k: v for k, v in config.items() if not isinstance(v, Ref)}
    unknown = {"id": True, "region": True, "security_group_id": True,
               **{k: True for k in HW_COMPUTED if k not in after}}
    return R("huaweicloud_networking_secgroup_rule", "ssh", after, unknown, config)


def test_huawei_rule_resources(tmp_path: Path) -> None:
    ssh = {"protocol": "tcp", "port_range_min": 22, "port_range_max": 22}
    # Before: ports/action/remote_group_id unknown (computed) made the world-open rule an "unknown" finding.
    assert findings(tmp_path / "w.json", plan([HW_GROUP, hw_rule(remote_ip_prefix="0.0.0.0/0", **ssh)])) \
        == {("huaweicloud_networking_secgroup_rule.ssh", "MF-NET-002", False)}
    assert findings(tmp_path / "v.json", plan([HW_GROUP, hw_rule(remote_ip_prefix="10.0.0.0/16", **ssh)])) == set()
    # The source is another group of the plan: no address range at all (before: an unknown source, failed).
    from_group = hw_rule(remote_group_id=ref("huaweicloud_networking_secgroup.bastion"), **ssh)
    assert findings(tmp_path / "g.json", plan([HW_GROUP, HW_BASTION, from_group])) == set()
    # No remote at all: the provider's default is every address (a finding, known, with the default's note).
    found = findings(tmp_path / "n.json", plan([HW_GROUP, hw_rule(**ssh)]))
    assert found == {("huaweicloud_networking_secgroup_rule.ssh", "MF-NET-002", False)}, found
    # A remote group known only through a variable stays unknown.
    via_var = hw_rule(remote_group_id=Ref(("var.bastion_sg",)), **ssh)
    assert findings(tmp_path / "u.json", plan([HW_GROUP, via_var])) \
        == {("huaweicloud_networking_secgroup_rule.ssh", "MF-NET-002", True),
            ("huaweicloud_networking_secgroup_rule.ssh", "MF-NET-003", True)}


# ------------------------------------------------------------------------------------------ unreadable input


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """``metalfleet policy check PATH`` in process: (exit code, stdout, stderr lines)."""
    enabled = gc.isenabled()

    def run(path: Path) -> tuple[int, str, list[str]]:
        code = main(["policy", "check", str(path)])
        out, err = capsys.readouterr()
        return code, out, err.strip().splitlines()

    yield run
    if enabled:
        gc.enable()  # the command turns the cyclic GC off for its own run


UNREADABLE = {
    "steps-string.json": ('{"steps": "x"}', "steps is a string, not an array of steps"),
    "steps-null.json": ('{"steps": null}', "steps is null"),
    "step-scalar.json": ('{"steps": [1]}', "steps[0] is a number"),
    "step-no-type.json": ('{"steps": [{"op": "create", "newState": {"inputs": {}}}]}', "steps[0].newState.type"),
    "inputs-string.json": ('{"steps": [{"op": "create", "newState": {"type": "aws:ec2/instance:Instance", '
                           '"inputs": "x"}}]}', "steps[0].newState.inputs is a string"),
    "resources-string.json": ('{"deployment": {"resources": "x"}}', "deployment.resources is a string"),
    "deployment-string.json": ('{"deployment": "x"}', "deployment is a string, not an object"),
    "resource-list.json": ('{"deployment": {"resources": [[]]}}', "deployment.resources[0] is an array"),
    "array.json": ("[1, 2]", "is JSON (an array)"),
    "other.json": ('{"hello": 1}', "top-level keys: hello"),
    "state.json": ('{"format_version": "1.0", "terraform_version": "1.9.5", "values": {}}', "Terraform state JSON"),
    "main.tf.json": ('{"resource": {"aws_instance": {"gpu": {"instance_type": "p5.48xlarge"}}}}',
                     "Terraform configuration in JSON syntax"),
    "main.tf": ('# GPU nodes\nresource "aws_instance" "gpu" {\n  ami           = "ami-123"\n'
                '  instance_type = \n}\n', "is not valid Terraform HCL at line 4"),  # .tf is read: test_hcl.py
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_unreadable_input_is_exit_2_with_one_line(tmp_path: Path, cli: Any, name: str) -> None:
    text, why = UNREADABLE[name]
    path = tmp_path / name
    path.write_text(text)
    code, out, err = cli(path)
    assert code == 2, (name, out, err)
    assert len(err) == 1 and err[0].startswith("error: ") and str(path) in err[0] and why in err[0], (name, err)
    assert out == ""
    if name.startswith(("main.tf.json", "state")):
        assert "terraform show -json" in err[0], "it says what policy check reads instead"


def test_readable_json_of_known_kinds_still_passes(tmp_path: Path, cli: Any) -> None:
    empty = tmp_path / "empty-stack.json"  # an empty stack's export has no resources key
    empty.write_text('{"version": 3, "deployment": {"manifest": {"time": "2026-01-01T00:00:00Z"}}}')
    assert cli(empty)[0] == 0
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [{"op": "delete", "urn": "urn:pulumi:s::p::aws:ec2/instance:Instance::x",
                                              "oldState": {"type": "aws:ec2/instance:Instance"}}],
                                   "changeSummary": {"delete": 1}}))
    assert cli(preview)[0] == 0, "a preview that only deletes leaves nothing to judge"
    spec = tmp_path / "bad-cluster.json"  # a cluster spec written as JSON is read as the YAML one is
    spec.write_text(json.dumps(yaml.safe_load((FIXTURES / "bad-cluster.yaml").read_text())))
    code, out, _ = cli(spec)
    assert code == 1 and "(cluster-spec," in out, out
