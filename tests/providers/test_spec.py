"""ClusterSpec: strict validation whose errors name the field path and the bad value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import InvalidSpecError, load_spec, parse_spec

BASE: dict[str, Any] = {"name": "train", "provider": "aws", "region": "us-east-1", "offering": "p5.48xlarge",
                        "count": 2, "image": "ami-0123456789abcdef0"}


def _err(**over: Any) -> InvalidSpecError:
    with pytest.raises(InvalidSpecError) as exc:
        parse_spec({**BASE, **over})
    return exc.value


def test_minimal_spec_gets_secure_defaults() -> None:
    spec = parse_spec(BASE)
    assert spec.storage.root.encrypted is True
    assert spec.network.public_ip is False
    assert spec.placement.strategy == "cluster"
    assert spec.placement_group_name == "train-pg"
    ns = spec.node_spec(1, "p5.48xlarge")
    assert ns.tags["metalfleet:cluster"] == "train" and ns.tags["metalfleet:index"] == "1"
    assert ns.idempotency_key == spec.node_spec(1, "p5.48xlarge").idempotency_key
    assert ns.idempotency_key != spec.node_spec(0, "p5.48xlarge").idempotency_key
    assert len(ns.idempotency_key) <= 64


def test_unknown_key_is_an_error_naming_it() -> None:
    e = _err(cuont=4)
    assert e.field == "cuont"
    assert "unknown key" in str(e)


def test_nested_unknown_key_names_the_full_path() -> None:
    e = _err(storage={"root": {"size_gib": 100, "encrypted": True, "kms": "x"}})
    assert e.field == "storage.root.kms"


def test_bad_value_names_field_and_value() -> None:
    e = _err(count=0)
    assert e.field == "count" and e.value == 0
    assert "count" in str(e) and "got 0" in str(e)


def test_every_error_is_reported_at_once() -> None:
    e = _err(count=-1, name="Bad_Name", storage={"root": {"size_gib": 1}})
    text = str(e)
    assert "count" in text and "name" in text and "storage.root.size_gib" in text


def test_offering_xor_requirements() -> None:
    assert "either" in str(_err(offering=None))
    assert "not both" in str(_err(requirements={"gpu": "H100"}))


def test_capacity_block_needs_reservation() -> None:
    e = _err(capacity={"capacity_block": True})
    assert e.field == "capacity"
    assert "reservation_id" in str(e)


def test_fabric_must_be_known() -> None:
    e = _err(offering=None, requirements={"gpu": "H100", "fabric": "token-ring"})
    assert e.field == "requirements.fabric" and e.value == "token-ring"


def test_load_spec_reports_yaml_and_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError) as exc:
        load_spec(tmp_path / "missing.yaml")
    assert "cannot read" in str(exc.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(InvalidSpecError) as exc:
        load_spec(bad)
    assert "not valid YAML" in str(exc.value)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just a string\n")
    with pytest.raises(InvalidSpecError) as exc:
        load_spec(scalar)
    assert "mapping" in str(exc.value)


def test_examples_validate() -> None:
    root = Path(__file__).resolve().parents[2] / "examples"
    specs = sorted(root.glob("*/cluster.yaml"))
    assert specs, "examples must ship at least one cluster.yaml"
    for path in specs:
        load_spec(path)
