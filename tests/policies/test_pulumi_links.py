"""Issue 21, plan semantics for Pulumi inputs: an input known only after apply that depends on exactly one resource of
the document, of a type it may name (``propertyDependencies``), links the two as a Terraform plan's references do:
an EIP association makes its instance public, a volume attachment names its instance in the volume's findings. A
dependency on two resources, on one of another type, or on none stays unknown and fails closed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metalfleet.policies.check import check_paths

from .cases import PULUMI_UNKNOWN, urn
from .test_rules_native import ALI, ALI_DISK, ALI_INSTANCE, AWS_EIP, AWS_INSTANCE, AWS_VOLUME, HW_BMS, HW_BMS_PROPS, P5

ASSOC = "aws:ec2/eipAssociation:EipAssociation"
ATTACHMENT = "aws:ec2/volumeAttachment:VolumeAttachment"
HW_EIP_ASSOCIATE = "huaweicloud:Ecs/eipAssociate:EipAssociate"
GPU, GPU2, IP, DATA = (AWS_INSTANCE, "gpu"), (AWS_INSTANCE, "gpu2"), (AWS_EIP, "ip"), (AWS_VOLUME, "data")
VOLUME = {"availabilityZone": "us-east-1a", "size": 100, "encrypted": False}


def _state(type_name: str, name: str, inputs: dict[str, Any],
           deps: dict[str, list[tuple[str, str]]] | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"urn": urn(type_name, name), "custom": True, "type": type_name, "inputs": inputs}
    if deps is not None:
        state["propertyDependencies"] = {k: [urn(*d) for d in v] for k, v in deps.items()}
    return state


def _preview(path: Path, *states: dict[str, Any]) -> dict[str, list[tuple[str, bool]]]:
    """resource -> [(rule: message, unknown)] of ``pulumi preview --json`` creating ``states``."""
    steps = [{"op": "create", "urn": s["urn"], "newState": s} for s in states]
    path.write_text(json.dumps({"config": {}, "steps": steps, "diagnostics": []}))
    return _found(path)


def _found(path: Path) -> dict[str, list[tuple[str, bool]]]:
    out: dict[str, list[tuple[str, bool]]] = {}
    for f in check_paths([path]).findings:
        out.setdefault(f.resource_name, []).append((f"{f.rule.id}: {f.message}", f.unknown))
    return out


def _association(deps: list[tuple[str, str]] | None) -> dict[str, Any]:
    return _state(ASSOC, "assoc", {"instanceId": PULUMI_UNKNOWN, "allocationId": PULUMI_UNKNOWN},
                  None if deps is None else {"instanceId": deps, "allocationId": [IP]})


def test_eip_association_makes_its_instance_public(tmp_path: Path) -> None:
    found = _preview(tmp_path / "preview.json", _state(*GPU, P5), _state(*IP, {"domain": "vpc"}),
                     _association([GPU]))
    assert ("MF-NET-001: gpu gets a public address (assoc binds a public address to it through its instance_id)",
            False) in found["gpu"]
    assert "assoc" not in found, "the instance's finding is the association's"


@pytest.mark.parametrize("deps", [[GPU, GPU2], [DATA], None], ids=["two-resources", "another-type", "none"])
def test_eip_association_not_linked_stays_unknown(tmp_path: Path, deps: list[tuple[str, str]] | None) -> None:
    found = _preview(tmp_path / "preview.json", _state(*GPU, P5), _state(*GPU2, P5), _state(*IP, {"domain": "vpc"}),
                     _state(*DATA, VOLUME), _association(deps))
    assert not any(m.startswith("MF-NET-001") for m, _ in found.get("gpu", [])), found.get("gpu")
    assert [u for m, u in found["assoc"] if m.startswith("MF-NET-001")] == [True]


def test_volume_attachment_names_its_instance(tmp_path: Path) -> None:
    attachment = _state(ATTACHMENT, "att", {"deviceName": "/dev/sdf", "instanceId": PULUMI_UNKNOWN,
                                            "volumeId": PULUMI_UNKNOWN}, {"instanceId": [GPU], "volumeId": [DATA]})
    found = _preview(tmp_path / "preview.json", _state(*GPU, P5), _state(*DATA, VOLUME), attachment)
    assert ("MF-ENC-001: data is not encrypted (attached to gpu by att)", False) in found["data"]


def test_volume_attachment_to_two_volumes_names_none(tmp_path: Path) -> None:
    attachment = _state(ATTACHMENT, "att", {"deviceName": "/dev/sdf", "instanceId": PULUMI_UNKNOWN,
                                            "volumeId": PULUMI_UNKNOWN},
                        {"instanceId": [GPU], "volumeId": [DATA, (AWS_VOLUME, "other")]})
    found = _preview(tmp_path / "preview.json", _state(*GPU, P5), _state(*DATA, VOLUME),
                     _state(AWS_VOLUME, "other", VOLUME), attachment)
    assert ("MF-ENC-001: data is not encrypted", False) in found["data"]


def test_stack_export_links_by_property_dependencies(tmp_path: Path) -> None:
    """In a stack export the IDs are known; the dependency still says which resource of the stack they name."""
    resources = [{**s, "outputs": {}} for s in (
        _state(*GPU, P5), _state(*DATA, VOLUME),
        _state(ATTACHMENT, "att", {"deviceName": "/dev/sdf", "instanceId": "i-0abc", "volumeId": "vol-0abc"},
               {"instanceId": [GPU], "volumeId": [DATA]}))]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"version": 3, "deployment": {"manifest": {}, "resources": resources}}))
    found = _found(path)
    assert ("MF-ENC-001: data is not encrypted (attached to gpu by att)", False) in found["data"]


def test_huawei_eip_associate_makes_its_instance_public(tmp_path: Path) -> None:
    associate = _state(HW_EIP_ASSOCIATE, "assoc", {"publicIp": PULUMI_UNKNOWN, "instanceId": PULUMI_UNKNOWN},
                       {"instanceId": [(HW_BMS, "bms")]})
    found = _preview(tmp_path / "preview.json", _state(HW_BMS, "bms", HW_BMS_PROPS), associate)
    assert any(m.startswith("MF-NET-001: bms gets a public address (assoc binds") and not u for m, u in found["bms"])
    assert "assoc" not in found


@pytest.mark.parametrize("token", ["alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment",
                                   "alicloud:ecs/diskAttachment:DiskAttachment"])
def test_alibaba_disk_attachment_names_its_instance(tmp_path: Path, token: str) -> None:
    attachment = _state(token, "att", {"instanceId": PULUMI_UNKNOWN, "diskId": PULUMI_UNKNOWN},
                        {"instanceId": [(ALI_INSTANCE, "ali")], "diskId": [(ALI_DISK, "scratch")]})
    found = _preview(tmp_path / "preview.json", _state(ALI_INSTANCE, "ali", ALI),
                     _state(ALI_DISK, "scratch", {"zoneId": "cn-wulanchabu-a", "size": 500, "encrypted": False}),
                     attachment)
    assert ("MF-ENC-001: scratch is not encrypted (attached to ali by att)", False) in found["scratch"], found
