"""Issue 21: an EIP associated with an instance, a volume attached to an instance, resolved from the plan.

An instance whose own attributes give it no public address, but which an ``aws_eip`` / ``aws_eip_association`` /
``alicloud_eip_association`` / ``huaweicloud_vpc_eip_associate`` / ``huaweicloud_compute_eip_associate`` of the
same plan binds a public address to, is judged by MF-NET-001 exactly as one with a public IP set inline (and a
known non-GPU type is left alone, as inline). A standalone volume is judged for encryption attached or not, and
its finding names the instance an attachment resource puts it on. The links come from the plan's
``configuration`` references, since the IDs are unknown at plan time; what the plan truly cannot tell (an ID from
a data source) stays unknown and fails closed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metalfleet.policies.check import check_paths
from tests.policies.test_plan_semantics_21 import R, Ref, plan, ref


def found(path: Path, doc: dict[str, Any], rule: str) -> dict[str, list[tuple[str, bool]]]:
    """resource -> [(message, unknown)] of one rule's findings on ``doc``."""
    path.write_text(json.dumps(doc, indent=1))
    out: dict[str, list[tuple[str, bool]]] = {}
    for f in check_paths([path]).findings:
        if f.rule.id == rule:
            out.setdefault(f.resource_name, []).append((f.message, f.unknown))
    return out


def counted(doc: dict[str, Any]) -> dict[str, Any]:
    """A plan whose ``count`` resources (named ``gpu[0]`` ...) have one configuration block each, as Terraform
    writes it (``aws_instance.gpu``, with ``count`` among its expressions)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in doc["configuration"]["root_module"]["resources"]:
        name = r["name"].split("[")[0]
        r["name"], r["address"] = name, f"{r['type']}.{name}"
        if "[" in r.get("address", "") or r["address"] not in seen:
            seen.setdefault(r["address"], {**r, "count_expression": {"constant_value": 2}})
    doc["configuration"]["root_module"]["resources"] = list(seen.values())
    return doc


def splat(target: str, *index: str) -> Ref:
    """What Terraform records for ``target[<index>].id`` with a non-constant index: the resource and the index."""
    return Ref((target, *index))


# ------------------------------------------------------------------------------------------ resources

def aws_instance(name: str = "gpu", itype: str = "p5.48xlarge") -> R:
    after = {"ami": "ami-0123", "instance_type": itype, "associate_public_ip_address": False,
             "subnet_id": "subnet-0private", "metadata_options": [{"http_endpoint": "enabled",
                                                                  "http_tokens": "required"}],
             "root_block_device": [{"encrypted": True, "volume_size": 500}], "tags": None}
    return R("aws_instance", name, after, {"id": True, "public_ip": True, "arn": True},
             {"ami": "ami-0123", "instance_type": itype, "associate_public_ip_address": False,
              "subnet_id": "subnet-0private"})


def aws_eip(name: str = "ip", instance: Ref | None = None) -> R:
    config: dict[str, Any] = {"domain": "vpc"}
    unknown = {"id": True, "public_ip": True, "allocation_id": True}
    after: dict[str, Any] = {"domain": "vpc", "tags": None}
    if instance is not None:
        config["instance"] = instance
        unknown["instance"] = True
    return R("aws_eip", name, after, unknown, config)


def ali_instance(name: str = "gpu") -> R:
    after = {"instance_type": "ecs.gn7i-c8g1.2xlarge", "internet_max_bandwidth_out": 0, "http_tokens": "required",
             "system_disk_encrypted": True, "image_id": "ubuntu_22_04_x64"}
    return R("alicloud_instance", name, after, {"id": True, "public_ip": True}, dict(after))


def hw_instance(name: str = "gpu") -> R:
    after = {"flavor_id": "p2s.2xlarge.8", "image_id": "img-1", "system_disk_kms_key_id": "kms-1"}
    return R("huaweicloud_compute_instance", name, after, {"id": True, "network": True, "access_ip_v4": True},
             dict(after))


def hw_port(instance: str) -> Ref:
    """``huaweicloud_compute_instance.gpu.network[0].port`` as Terraform records it."""
    return Ref((f"{instance}.network[0].port", f"{instance}.network[0]", f"{instance}.network", instance))


# ------------------------------------------------------------------------------------------ EIPs

def test_an_aws_eip_makes_its_instance_public(tmp_path: Path) -> None:
    before = found(tmp_path / "a.json", plan([aws_instance()]), "MF-NET-001")
    assert "aws_instance.gpu" not in before, before  # private on its own
    after = found(tmp_path / "b.json", plan([aws_instance(), aws_eip(instance=ref("aws_instance.gpu"))]),
                  "MF-NET-001")
    [(message, unknown)] = after["aws_instance.gpu"]
    assert not unknown and "gets a public address" in message and "aws_eip.ip" in message, message
    assert "aws_eip.ip" not in after, after  # one finding per instance: the instance's names the EIP


def test_a_non_gpu_instance_with_an_eip_is_left_alone_like_an_inline_public_ip(tmp_path: Path) -> None:
    after = found(tmp_path / "p.json", plan([aws_instance(itype="t3.micro"),
                                             aws_eip(instance=ref("aws_instance.gpu"))]), "MF-NET-001")
    assert "aws_instance.gpu" not in after, after


def test_an_aws_eip_association(tmp_path: Path) -> None:
    assoc = R("aws_eip_association", "ip", {"allow_reassociation": None}, {"id": True, "instance_id": True,
                                                                             "allocation_id": True},
              {"instance_id": ref("aws_instance.gpu"), "allocation_id": ref("aws_eip.ip")})
    after = found(tmp_path / "p.json", plan([aws_instance(), aws_eip(), assoc]), "MF-NET-001")
    assert [u for _, u in after["aws_instance.gpu"]] == [False], after
    assert "aws_eip_association.ip" in after["aws_instance.gpu"][0][0]
    assert "aws_eip.ip" not in after, after  # allocated, bound by the association: no second finding on it


def test_count_pairs_each_eip_with_the_instance_of_its_index(tmp_path: Path) -> None:
    nodes = [aws_instance(f"gpu[{i}]") for i in range(3)]
    for n in nodes:
        n.config = {"instance_type": "p5.48xlarge"}
    eips = [aws_eip(f"ip[{i}]", splat("aws_instance.gpu", "count.index")) for i in range(2)]
    after = found(tmp_path / "p.json", counted(plan([*nodes, *eips])), "MF-NET-001")
    assert {"aws_instance.gpu[0]", "aws_instance.gpu[1]"} <= set(after), after
    assert "aws_instance.gpu[2]" not in after, after
    # a literal index names its instance only
    one = aws_eip("ip", Ref(("aws_instance.gpu[2].id", "aws_instance.gpu[2]", "aws_instance.gpu")))
    after = found(tmp_path / "q.json", counted(plan([*nodes, one])), "MF-NET-001")
    assert [a for a in after if a.startswith("aws_instance")] == ["aws_instance.gpu[2]"], after


def test_an_eip_bound_to_an_instance_in_a_module(tmp_path: Path) -> None:
    node = aws_instance()
    node.module = "module.gpu."
    eip = aws_eip(instance=Ref(("module.gpu.id", "module.gpu")))
    doc = plan([node, eip], modules={"gpu": {"outputs": {"id": ref("aws_instance.gpu")}}})
    after = found(tmp_path / "p.json", doc, "MF-NET-001")
    assert [u for _, u in after["module.gpu.aws_instance.gpu"]] == [False], after


def test_what_the_plan_cannot_tell_stays_unknown(tmp_path: Path) -> None:
    """An association whose instance is computed from no resource (a local of unknown value): the address is judged
    unknown (fail closed), and no instance of the plan is said to be public for it. One bound to an instance
    outside the plan (a data source) is bound, and names it."""
    assoc = R("aws_eip_association", "ip", {}, {"id": True, "instance_id": True},
              {"instance_id": Ref(("local.node_id",))})
    after = found(tmp_path / "p.json", plan([aws_instance(), assoc]), "MF-NET-001")
    assert [u for _, u in after["aws_eip_association.ip"]] == [True], after
    assert "aws_instance.gpu" not in after, after
    assoc.config = {"instance_id": Ref(("data.aws_instance.other.id", "data.aws_instance.other"))}
    after = found(tmp_path / "q.json", plan([aws_instance(), assoc]), "MF-NET-001")
    assert [("bound to data.aws_instance.other" in m, u) for m, u in after["aws_eip_association.ip"]] == [
        (True, False)], after
    assert "aws_instance.gpu" not in after, after


def test_an_alibaba_eip_association(tmp_path: Path) -> None:
    eip = R("alicloud_eip_address", "ip", {"address_name": "gpu", "payment_type": "PayAsYouGo"},
            {"id": True, "ip_address": True}, {"address_name": "gpu"})
    assoc = R("alicloud_eip_association", "ip", {"instance_type": None}, {"id": True, "instance_id": True,
                                                                           "allocation_id": True},
              {"allocation_id": ref("alicloud_eip_address.ip"), "instance_id": ref("alicloud_instance.gpu")})
    assert "alicloud_instance.gpu" not in found(tmp_path / "a.json", plan([ali_instance(), eip]), "MF-NET-001")
    after = found(tmp_path / "b.json", plan([ali_instance(), eip, assoc]), "MF-NET-001")
    [(message, unknown)] = after["alicloud_instance.gpu"]
    assert not unknown and "alicloud_eip_association.ip" in message, message
    assert "alicloud_eip_association.ip" not in after, after  # one finding per instance


@pytest.mark.parametrize(("kind", "attr", "target"), [
    ("huaweicloud_vpc_eip_associate", "port_id", hw_port("huaweicloud_compute_instance.gpu")),
    ("huaweicloud_vpc_eip_associate", "fixed_ip", ref("huaweicloud_compute_instance.gpu", "access_ip_v4")),
    ("huaweicloud_networking_eip_associate", "port_id", hw_port("huaweicloud_compute_instance.gpu")),
    ("huaweicloud_compute_eip_associate", "instance_id", ref("huaweicloud_compute_instance.gpu")),
])
def test_huawei_eip_associations(tmp_path: Path, kind: str, attr: str, target: Ref) -> None:
    eip = R("huaweicloud_vpc_eip", "ip", {"publicip": [{"type": "5_bgp"}]}, {"id": True, "address": True},
            {"publicip": [{"type": "5_bgp"}]})
    assoc = R(kind, "ip", {}, {"id": True, attr: True, "public_ip": True},
              {"public_ip": ref("huaweicloud_vpc_eip.ip", "address"), attr: target})
    after = found(tmp_path / "p.json", plan([hw_instance(), eip, assoc]), "MF-NET-001")
    [(message, unknown)] = after["huaweicloud_compute_instance.gpu"]
    assert not unknown and f"{kind}.ip" in message, message
    # the association's own target is resolved too, not left unknown: one finding per instance, the instance's
    assert f"{kind}.ip" not in after, after


# ------------------------------------------------------------------------------------------ volumes

def aws_volume(name: str = "data", encrypted: bool | None = False) -> R:
    after: dict[str, Any] = {"availability_zone": "us-east-1a", "size": 2000, "type": "gp3", "tags": None}
    if encrypted is not None:
        after["encrypted"] = encrypted
    unknown: dict[str, Any] = {"id": True, "arn": True, "kms_key_id": True}
    if encrypted is None:
        unknown["encrypted"] = True  # Optional+Computed: unknown when the configuration does not set it
    return R("aws_ebs_volume", name, after, unknown, {k: v for k, v in after.items() if k != "tags"})


def attach(kind: str, name: str, vol_attr: str, volume: str, instance: Ref | str) -> R:
    after: dict[str, Any] = {"device_name": "/dev/sdf"} if kind == "aws_volume_attachment" else {}
    unknown: dict[str, Any] = {"id": True, vol_attr: True}
    config: dict[str, Any] = {vol_attr: ref(volume)}
    if isinstance(instance, str):
        after["instance_id"] = config["instance_id"] = instance
    else:
        unknown["instance_id"] = True
        config["instance_id"] = instance
    return R(kind, name, after, unknown, config)


def test_an_attached_aws_volume_is_judged_and_names_its_instance(tmp_path: Path) -> None:
    att = attach("aws_volume_attachment", "data", "volume_id", "aws_ebs_volume.data", ref("aws_instance.gpu"))
    after = found(tmp_path / "p.json", plan([aws_instance(), aws_volume(), att]), "MF-ENC-001")
    [(message, unknown)] = after["aws_ebs_volume.data"]
    assert not unknown and "is not encrypted" in message, message
    assert "attached to aws_instance.gpu by aws_volume_attachment.data" in message, message
    # encrypted: no finding, attached or not; unattached and unencrypted: still found, naming no instance
    assert "aws_ebs_volume.data" not in found(tmp_path / "q.json", plan([aws_instance(), aws_volume(encrypted=True),
                                                                         att]), "MF-ENC-001")
    [(alone, _)] = found(tmp_path / "r.json", plan([aws_volume()]), "MF-ENC-001")["aws_ebs_volume.data"]
    assert "attached to" not in alone, alone


def test_an_attachment_to_an_instance_outside_the_plan_names_its_id(tmp_path: Path) -> None:
    att = attach("aws_volume_attachment", "data", "volume_id", "aws_ebs_volume.data", "i-0abc1234")
    [(message, _)] = found(tmp_path / "p.json", plan([aws_volume(), att]), "MF-ENC-001")["aws_ebs_volume.data"]
    assert "attached to i-0abc1234 by aws_volume_attachment.data" in message, message


def test_a_volume_whose_configuration_leaves_encryption_out_is_the_default_not_unknown(tmp_path: Path) -> None:
    """encrypted is Optional+Computed: unknown in the plan when not configured, yet the volume is made unencrypted
    (unless the account encrypts by default); from a snapshot it takes the snapshot's, which the plan cannot tell."""
    att = attach("aws_volume_attachment", "data", "volume_id", "aws_ebs_volume.data", ref("aws_instance.gpu"))
    doc = plan([aws_instance(), aws_volume(encrypted=None), att])
    [(message, unknown)] = found(tmp_path / "p.json", doc, "MF-ENC-001")["aws_ebs_volume.data"]
    assert not unknown and "is not encrypted" in message and "attached to aws_instance.gpu" in message, message
    on = R("aws_ebs_encryption_by_default", "on", {"enabled": True}, {"id": True}, {"enabled": True})
    assert "aws_ebs_volume.data" not in found(tmp_path / "q.json", plan([aws_volume(encrypted=None), on]),
                                              "MF-ENC-001")
    snap = aws_volume(encrypted=None)
    snap.after["snapshot_id"] = snap.config["snapshot_id"] = "snap-0123"
    [(message, unknown)] = found(tmp_path / "r.json", plan([snap]), "MF-ENC-001")["aws_ebs_volume.data"]
    assert unknown, message


@pytest.mark.parametrize(("disk", "attachment", "instance", "vol_attr"), [
    ("alicloud_ecs_disk", "alicloud_ecs_disk_attachment", "alicloud_instance", "disk_id"),
    ("alicloud_disk", "alicloud_disk_attachment", "alicloud_instance", "disk_id"),
    ("huaweicloud_evs_volume", "huaweicloud_compute_volume_attach", "huaweicloud_compute_instance", "volume_id"),
])
def test_alibaba_and_huawei_attachments(tmp_path: Path, disk: str, attachment: str, instance: str,
                                        vol_attr: str) -> None:
    node = ali_instance() if instance == "alicloud_instance" else hw_instance()
    props = {"size": 500, "category": "cloud_essd"} if disk.startswith("alicloud") else \
        {"size": 500, "volume_type": "SSD"}
    vol = R(disk, "data", props, {"id": True}, dict(props))
    att = attach(attachment, "data", vol_attr, f"{disk}.data", ref(f"{instance}.gpu"))
    after = found(tmp_path / "p.json", plan([node, vol, att]), "MF-ENC-001")
    [(message, unknown)] = after[f"{disk}.data"]
    assert not unknown and f"attached to {instance}.gpu by {attachment}.data" in message, message
