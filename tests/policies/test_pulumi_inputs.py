"""`pulumi preview --json` and `pulumi stack export` files as `metalfleet policy check` inputs: the same rules as
the pack, over every resource in the document (unknown sentinels, secrets, deletes and providers handled)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from metalfleet.policies.check import check_paths

from .cases import PULUMI_UNKNOWN, TAGS, urn
from .test_rules_metalfleet import NEW_TYPES, OLD_TYPE, _props
from .test_rules_native import AWS_INSTANCE, HW_BMS, HW_BMS_PROPS, HW_RULE, P5, _with

SECRET = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}


def _state(type_name: str, name: str, inputs: dict[str, object]) -> dict[str, object]:
    return {"urn": urn(type_name, name), "custom": True, "type": type_name, "inputs": inputs, "outputs": {}}


def test_preview_json(tmp_path: Path) -> None:
    steps = [
        {"op": "create", "urn": urn("pulumi:pulumi:Stack", "s"),
         "newState": _state("pulumi:pulumi:Stack", "s", {})},
        {"op": "create", "urn": urn(AWS_INSTANCE, "gpu"),
         "newState": _state(AWS_INSTANCE, "gpu", _with(P5, rootBlockDevice={"encrypted": PULUMI_UNKNOWN}))},
        {"op": "create", "urn": urn(HW_BMS, "bms"),
         "newState": _state(HW_BMS, "bms", _with(HW_BMS_PROPS, eipId="eip-1"))},
        {"op": "create", "urn": urn(HW_RULE, "ssh"),
         "newState": _state(HW_RULE, "ssh", {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp",
                                             "ports": "22", "securityGroupId": "sg"})},
        {"op": "delete", "urn": urn(AWS_INSTANCE, "old"),
         "oldState": _state(AWS_INSTANCE, "old", _with(P5, associatePublicIpAddress=True))},
        {"op": "create", "urn": urn(NEW_TYPES["GpuNode"], "n0"),
         "newState": _state(NEW_TYPES["GpuNode"], "n0", {**_props("GpuNode"), "secrets": SECRET})},
    ]
    path = tmp_path / "preview.json"
    path.write_text(json.dumps({"config": {}, "steps": steps, "diagnostics": [], "changeSummary": {"create": 5}}))
    report = check_paths([path])
    assert report.inputs[0].kind == "pulumi-preview"
    found = {(f.resource_name, f.rule.id, f.unknown) for f in report.findings}
    assert ("gpu root volume", "MF-ENC-001", True) in found
    assert ("bms", "MF-NET-001", False) in found and ("bms", "MF-NET-005", False) in found
    assert ("ssh", "MF-NET-002", False) in found
    assert not any(name == "old" for name, _, _ in found), "a resource the preview deletes is not judged"
    assert not any(name.startswith("n0") for name, _, _ in found), "the compliant GpuNode"
    assert all(f.location.address and f.location.address.startswith("urn:pulumi:") for f in report.findings)


def test_stack_export(tmp_path: Path) -> None:
    resources = [
        _state("pulumi:providers:aws", "default", {"region": "us-east-1"}),
        _state(OLD_TYPE, "c-0", _props("GpuNode", tags={"team": "ml"})),
        _state(OLD_TYPE, "c-network", _props("ClusterNetwork", network={"subnet_id": "s",
                                                                        "ssh_ingress_cidrs": ["0.0.0.0/0"]})),
        _state(AWS_INSTANCE, "tagged", _with(P5, tags=TAGS)),
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"version": 3, "deployment": {"manifest": {}, "resources": resources}}))
    report = check_paths([path])
    assert report.inputs[0].kind == "pulumi-export"
    found = {(f.resource_name, f.rule.id) for f in report.findings}
    assert ("c-0", "MF-TAG-001") in found
    assert ("c-network ssh_ingress_cidrs[0]", "MF-NET-002") in found
    assert not any(name == "tagged" for name, _ in found)


def test_up_and_preview_show_the_specs_findings(tmp_path: Path) -> None:
    """`metalfleet preview SPEC` prints the policy findings (on stderr) before it runs the engine."""
    spec = Path(__file__).parent / "fixtures" / "bad-cluster.yaml"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no PULUMI_CONFIG_PASSPHRASE: stops before the engine
    res = subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", "preview", str(spec)], capture_output=True,
                         text=True, env=env, check=False, timeout=120)
    assert "policy: MANDATORY MF-NET-002" in res.stderr and "policy: FAIL" in res.stderr, res.stderr
    assert res.returncode == 2 and "PULUMI_CONFIG_PASSPHRASE" in res.stderr
