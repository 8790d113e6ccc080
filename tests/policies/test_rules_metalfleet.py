"""The rules on metalfleet's own inputs: cluster specs (with line numbers), IPMI/Redfish pool inventories, and the
Pulumi dynamic resources (by their type names, and by input shape in state written before they had names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.policies.check import check_paths
from metalfleet.policies.config import parse_config
from metalfleet.policies.model import UNKNOWN
from metalfleet.providers import parse_spec
from metalfleet.providers.models import node_spec_to_dict

from .cases import TAGS, run_pack

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]

GOOD_SPEC = {"name": "good-p5", "provider": "aws", "region": "us-east-1", "zone": "us-east-1a",
             "offering": "p5.48xlarge", "count": 2, "image": "ami-0123456789abcdef0",
             "network": {"subnet_id": "subnet-0123456789abcdef0", "ssh_ingress_cidrs": ["10.0.0.0/16"]},
             "storage": {"kms_key_id": "alias/ml-ebs", "root": {"size_gib": 500}},
             "tags": dict(TAGS), "ssh": {"key_pair": "ops"}}


def _findings(path: Path, config: dict[str, Any] | None = None) -> dict[str, list[Any]]:
    report = check_paths([path], parse_config(config or {}))
    out: dict[str, list[Any]] = {}
    for f in report.findings:
        out.setdefault(f.rule.id, []).append(f)
    return out


def _spec(tmp_path: Path, **changes: Any) -> Path:
    data = {**GOOD_SPEC, **changes}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ------------------------------------------------------------------------------------------ cluster specs


def test_the_examples_comply() -> None:
    for path in (ROOT / "examples" / "aws-p5" / "cluster.yaml", ROOT / "examples" / "alibaba-ebm" / "cluster.yaml"):
        report = check_paths([path])
        assert report.exit_code == 0 and report.findings == [], [f.message for f in report.findings]


def test_a_compliant_spec_has_no_findings(tmp_path: Path) -> None:
    assert _findings(_spec(tmp_path)) == {}


def test_the_bad_spec_reports_each_planted_violation_at_its_line() -> None:
    found = _findings(FIXTURES / "bad-cluster.yaml")
    lines = (FIXTURES / "bad-cluster.yaml").read_text().splitlines()
    planted = {"MF-NET-001": "public_ip: true", "MF-NET-002": "0.0.0.0/0", "MF-ENC-001": "encrypted: false",
               "MF-ENC-003": "cold:", "MF-TAG-001": "tags:", "MF-TRN-002": "pin_on_first_contact: true",
               "MF-ADV-001": "placement:"}
    assert set(found) == set(planted)
    for rule_id, text in planted.items():
        (f,) = found[rule_id]
        assert f.location.file and f.location.file.endswith("bad-cluster.yaml")
        assert text in lines[f.location.line - 1], (rule_id, f.location, lines[f.location.line - 1])
    assert found["MF-ENC-003"][0].unknown and found["MF-ADV-001"][0].level == "advisory"


@pytest.mark.parametrize(("changes", "rule", "says"), [
    ({"network": {"subnet_id": "subnet-1", "public_ip": True}}, "MF-NET-001", "gets a public address"),
    ({"network": {"subnet_id": "subnet-1", "ssh_ingress_cidrs": ["::/0"]}}, "MF-NET-002", "lets ::/0 reach SSH"),
    ({"storage": {"root": {"size_gib": 100, "encrypted": False}}}, "MF-ENC-001", "root volume is not encrypted"),
    ({"storage": {"kms_key_id": "alias/k", "root": {"size_gib": 100},
                  "data": [{"size_gib": 100, "encrypted": False}]}}, "MF-ENC-001", "data volume 0"),
    ({"storage": {"root": {"size_gib": 100}, "warm": {"kind": "fsx-lustre", "source": "fs-0abc@tcp:/x"}}},
     "MF-ENC-003", "fs-0abc@tcp:/x"),
    ({"tags": {"owner": "a"}}, "MF-TAG-001", "lacks required tag(s) cost-center"),
    ({"ssh": {"pin_on_first_contact": True}}, "MF-TRN-002", "accepts host keys it has never seen"),
    ({"placement": {"strategy": "spread"}}, "MF-ADV-001", "strategy is spread"),
])
def test_spec_rules(tmp_path: Path, changes: dict[str, Any], rule: str, says: str) -> None:
    found = _findings(_spec(tmp_path, **changes))
    assert rule in found and any(says in f.message for f in found[rule]), found


def test_storage_known_encrypted_and_the_customer_key_advice(tmp_path: Path) -> None:
    path = _spec(tmp_path, storage={"kms_key_id": "alias/k", "root": {"size_gib": 100},
                                    "cold": {"kind": "s3", "bucket": "datasets-eu"}})
    assert "MF-ENC-003" in _findings(path)
    assert "MF-ENC-003" not in _findings(path, {"rules": {"MF-ENC-003": {"known_encrypted": ["s3://datasets-*"]}}})
    default_key = _findings(_spec(tmp_path, storage={"root": {"size_gib": 100}}))
    assert [f.level for f in default_key["MF-ENC-002"]] == ["advisory"]
    assert "provider-managed default key" in default_key["MF-ENC-002"][0].message


def test_the_huawei_driver_states_imds_tokens_but_not_volume_tags(tmp_path: Path) -> None:
    path = _spec(tmp_path, provider="huawei", region="cn-north-4", zone=None,
                 offering="physical.kat2e.48xlarge.8.313t", capacity={"billing": "monthly"})
    found = _findings(path)
    assert "MF-NET-005" not in found  # the driver creates every BMS with http_tokens=required
    assert found["MF-TAG-001"][0].unknown  # BMS gives the EVS volumes it creates no tags of their own


def test_a_provider_without_a_driver_is_unknown_not_compliant() -> None:
    from metalfleet.policies.adapters.metalfleet import driver_facts

    facts = driver_facts("acme")
    assert facts["imds_tokens"] is UNKNOWN and "no driver for this provider yet" in facts["imds_note"]


def test_the_alibaba_driver_states_imds_tokens_and_disk_tags(tmp_path: Path) -> None:
    path = _spec(tmp_path, provider="alibaba", region="cn-wulanchabu", zone=None, offering="ecs.ebmgn8v.48xlarge")
    found = _findings(path)
    assert "MF-NET-005" not in found and "MF-TAG-001" not in found


def test_capacity_reservations_in_a_spec(tmp_path: Path) -> None:
    path = _spec(tmp_path, capacity={"billing": "capacity_block", "reservation_id": "cr-1", "capacity_block": True})
    assert "MF-ADV-002" not in _findings(path)  # no planned end: nothing to compare
    late = _findings(path, {"rules": {"MF-ADV-002": {"planned_run_end": "2026-12-31"}}})
    assert late["MF-ADV-002"][0].unknown and late["MF-ADV-002"][0].level == "advisory"


# ------------------------------------------------------------------------------------------ pool inventories


def test_pool_inventory_bmc_and_ssh_findings() -> None:
    found = _findings(FIXTURES / "pool.yaml")
    messages = {rule: sorted(f.message for f in fs) for rule, fs in found.items()}
    assert messages["MF-NET-004"] == ["BMC of gpu-02 has the public address 203.0.113.12"]
    assert messages["MF-TRN-001"] == [
        "BMC of gpu-02 uses IPMI 1.5 'lan' (no encryption)",
        "BMC of gpu-02 uses IPMI cipher suite 0; allowed: 3, 17",
        "BMC of gpu-03 speaks Redfish over plain HTTP",
        "BMC of gpu-03: Redfish TLS certificate verification is off",
    ]
    assert messages["MF-NET-001"] == ["gpu-03 gets a public address"]
    assert messages["MF-TRN-002"] == ["SSH to gpu-03 accepts host keys it has never seen"]
    assert not any("gpu-01" in m for ms in messages.values() for m in ms), "gpu-01 is compliant"


def test_inventory_management_network_and_cipher_settings(tmp_path: Path) -> None:
    inv = tmp_path / "pool.yaml"
    inv.write_text(yaml.safe_dump({"hosts": {"h1": {"bmc": {"protocol": "ipmi", "address": "10.20.0.5"}},
                                             "h2": {"bmc": {"protocol": "redfish", "address": "bmc-h2.colo.internal"}},
                                             "h3": {"bmc": {"address": "10.10.0.3"}}}}))
    found = _findings(inv, {"rules": {"MF-NET-004": {"management_cidrs": ["10.10.0.0/16"]},
                                      "MF-TRN-001": {"ipmi_cipher_suites": [17]}}})
    net = sorted(f.message for f in found["MF-NET-004"])
    assert net[0] == "BMC of h1 (10.20.0.5) is outside the management network 10.10.0.0/16"
    assert "host name 'bmc-h2.colo.internal'" in net[1]
    trn = sorted(f.message for f in found["MF-TRN-001"])
    assert "BMC of h1 uses IPMI cipher suite 3 (absent: cipher_suite defaults to 3" in trn[0]
    assert any("the BMC protocol of h3 bmc is unknown" in m for m in trn), trn


# ------------------------------------------------------------------------------------------ Pulumi dynamic


def _node_spec(**changes: Any) -> dict[str, Any]:
    spec = parse_spec({**GOOD_SPEC, **changes})
    return node_spec_to_dict(spec.node_spec(0, "p5.48xlarge"))


NEW_TYPES = {"GpuNode": "pulumi-python:dynamic/metalfleet:GpuNode",
             "ClusterNetwork": "pulumi-python:dynamic/metalfleet:ClusterNetwork",
             "NodeBootstrap": "pulumi-python:dynamic/metalfleet:NodeBootstrap",
             "ClusterAcceptance": "pulumi-python:dynamic/metalfleet:ClusterAcceptance"}
OLD_TYPE = "pulumi-python:dynamic:Resource"


def _props(kind: str, **spec_changes: Any) -> dict[str, Any]:
    """Inputs as stacks/ registers them (node.py, network.py, bootstrap.py, acceptance.py)."""
    if kind in ("GpuNode", "ClusterNetwork"):
        props = {"provider": "aws", "spec": _node_spec(**spec_changes), "driver_config": {"region": "us-east-1"},
                 "secrets": [], "__provider": "pickled"}
        props.update({"node_id": None} if kind == "GpuNode" else {"cluster": None, "resources": None})
        return props
    spec = parse_spec({**GOOD_SPEC, **spec_changes}).model_dump(mode="json")
    if kind == "NodeBootstrap":
        return {"spec": spec, "node": {"id": "i-1"}, "fingerprint": "abc", "secrets": [], "status": None}
    return {"spec": spec, "nodes": [], "driver_config": {}, "fingerprint": "abc", "secrets": []}


@pytest.mark.parametrize("type_style", ["new", "old"])
@pytest.mark.parametrize(("kind", "rule", "changes", "says"), [
    ("GpuNode", "MF-NET-001", {"network": {"subnet_id": "s", "public_ip": True}}, "gets a public address"),
    ("GpuNode", "MF-ENC-001", {"storage": {"root": {"size_gib": 99, "encrypted": False}}}, "root volume is not"),
    ("GpuNode", "MF-TAG-001", {"tags": {"team": "x"}}, "lacks required tag(s) owner, cost-center"),
    ("ClusterNetwork", "MF-NET-002", {"network": {"subnet_id": "s", "ssh_ingress_cidrs": ["0.0.0.0/0"]}},
     "lets 0.0.0.0/0 reach SSH"),
    ("NodeBootstrap", "MF-TRN-002", {"ssh": {"pin_on_first_contact": True}}, "accepts host keys"),
    ("NodeBootstrap", "MF-ENC-003", {"storage": {"root": {"size_gib": 99}, "cold": {"kind": "s3", "bucket": "b"}}},
     "s3://b"),
    ("ClusterAcceptance", "MF-TRN-002", {"ssh": {"pin_on_first_contact": True}}, "accepts host keys"),
])
def test_metalfleet_dynamic_resources(type_style: str, kind: str, rule: str, changes: dict[str, Any],
                                      says: str) -> None:
    type_name = NEW_TYPES[kind] if type_style == "new" else OLD_TYPE
    assert run_pack(rule, type_name, _props(kind), name=f"c-{kind}") == []
    found = run_pack(rule, type_name, _props(kind, **changes), name=f"c-{kind}")
    assert any(says in m for m in found), found


def test_the_aws_driver_facts_count_for_gpu_nodes() -> None:
    """metalfleet's AWS driver requires IMDSv2 and tags volumes like the node: no findings, not unknowns."""
    for rule in ("MF-NET-005", "MF-TAG-001"):
        assert run_pack(rule, NEW_TYPES["GpuNode"], _props("GpuNode")) == []
    fake = _props("GpuNode")
    fake["provider"] = "fake"
    assert run_pack("MF-NET-005", NEW_TYPES["GpuNode"], fake) == []


def test_other_dynamic_resources_are_not_taken_for_metalfleet_ones() -> None:
    assert run_pack("MF-NET-001", OLD_TYPE, {"spec": "x", "something": 1}) == []
    assert run_pack("MF-NET-001", "pulumi-python:dynamic/other:Thing", _props("GpuNode")) == []
