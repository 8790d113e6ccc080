"""The readers and writers behind every file-reading flag, and the strict values of specs and requirements
(issue 19, item 8), below the CLI: what each refuses, what it still takes, and what it leaves on disk."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from metalfleet.providers import InvalidSpecError, parse_spec
from metalfleet.providers.catalog import catalog_document, catalog_from_file, parse_catalog
from metalfleet.providers.registry import parse_driver_config
from metalfleet.providers.requirements import parse_requirements
from metalfleet.providers.textfile import BadFileError, check_output_path, parse_json, write_text_file

SPEC = {"name": "demo", "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 2,
        "image": "img-fake"}


# -- JSON ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "word", "offset"), [
    ('{"a": }', "line 1, column 7", 6),
    ('{\n  "a": x}', "line 2, column 8", 9),
    ("\ufeff[1,]", "line 1, column 5", 6),  # the BOM is 3 bytes, so the offset is in the file's bytes
    ("[" * 200_000, "nested too deeply", None),
    ("9" * 5000, "4300 digits", None),
    ('{"a": 1, "a": 2}', "duplicate key 'a'", None),
    ("[NaN]", "NaN is not a number", None),
    ("[-Infinity]", "-Infinity is not a number", None),
    ("[1e400]", "out of range", None),
])
def test_parse_json_refuses_with_a_place(text: str, word: str, offset: int | None) -> None:
    with pytest.raises(BadFileError, match=word) as info:
        parse_json(text, "f.json", "offering catalogue")
    assert str(info.value).startswith("offering catalogue f.json ")
    assert info.value.offset == offset and "\n" not in str(info.value)


def test_parse_json_takes_a_byte_order_mark_and_plain_json() -> None:
    assert parse_json('\ufeff{"a": [1, 2.5, "x", null, true]}', "f", "x") == {"a": [1, 2.5, "x", None, True]}


# -- writing ---------------------------------------------------------------------------------------------

def test_write_replaces_a_regular_file_atomically_keeping_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "out.yaml"
    target.write_text("old\n")
    target.chmod(0o640)
    write_text_file(target, "new\n", "--out file")
    assert target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.yaml"]  # no temporary file left


def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_text_file(tmp_path / "new.svg", "<svg/>", "--plot file")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.svg").stat().st_mode) == 0o644


def test_a_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    link = tmp_path / "sink"
    link.symlink_to("/dev/null")
    write_text_file(link, "x" * 100, "--out file")
    assert link.is_symlink() and os.readlink(link) == "/dev/null"


@pytest.mark.parametrize(("name", "word"), [("dir", "it is a directory"), ("missing/x", "does not exist"),
                                            ("file/x", "is not a directory"), ("", "no file name")])
def test_output_paths_that_cannot_be_written(tmp_path: Path, name: str, word: str) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    path = str(tmp_path / name) if name else ""
    with pytest.raises(BadFileError, match=word) as info:
        check_output_path(path, "--out file")
    assert "--out file" in str(info.value)


# -- the catalogue ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "word"), [
    ("gpu_count", True, "expected int"), ("gpu_count", -1, ">= 0"), ("gpu_count", 8.0, "expected int"),
    ("fabric_gbps", False, "expected a number"), ("nvme_count", "2", "expected int"), ("vcpus", -4, ">= 0"),
    ("bare_metal", 1, "expected bool"), ("regions", "us-east-1", "expected list"), ("zones", [], "expected dict"),
])
def test_catalogue_entries_take_exact_types(key: str, value: object, word: str) -> None:
    doc = catalog_document()
    doc["offerings"][0][key] = value
    with pytest.raises(InvalidSpecError, match=word) as info:
        parse_catalog(doc, "c.json")
    assert info.value.field == f"offerings.0.{key}"


@pytest.mark.parametrize(("change", "field"), [
    ({"offerings": {"a": 1}}, "offerings"), ({"price_lists": 3}, "price_lists"), ({"schema": True}, "schema"),
])
def test_catalogue_containers_must_have_their_shape(change: dict[str, object], field: str) -> None:
    doc = catalog_document()
    doc.update(change)
    with pytest.raises(InvalidSpecError) as info:
        parse_catalog(doc, "c.json")
    assert info.value.field == field


def test_price_list_fields_must_be_strings_and_mappings() -> None:
    doc = catalog_document()
    doc["price_lists"][0]["currency"] = 840
    with pytest.raises(InvalidSpecError, match="non-empty string") as info:
        parse_catalog(doc, "c.json")
    assert info.value.field == "price_lists.0.currency"
    doc = catalog_document()
    region = next(iter(doc["price_lists"][0]["regions"]))
    doc["price_lists"][0]["regions"][region] = ["p5.48xlarge"]
    with pytest.raises(InvalidSpecError, match="must be a mapping"):
        parse_catalog(doc, "c.json")


def test_catalog_from_file_reads_the_shipped_catalogue(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(catalog_document()))
    assert len(catalog_from_file(str(path)).entries) == len(catalog_document()["offerings"])


# -- strict spec and requirements values ---------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    ({"count": True}, "count"), ({"count": "16"}, "count"), ({"count": 2.5}, "count"),
    ({"count": float("inf")}, "count"), ({"acceptance": {"threshold": float("nan")}}, "acceptance.threshold"),
    ({"acceptance": {"baselines": {"x": float("inf")}}}, "acceptance.baselines.x"),
    ({"ssh": {"port": "22"}}, "ssh.port"), ({"network": {"public_ip": "yes"}}, "network.public_ip"),
    ({"capacity": {"release_subscriptions": 1}}, "capacity.release_subscriptions"),
])
def test_spec_numbers_and_flags_are_strict(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        parse_spec({**SPEC, **change}, "s.yaml")
    assert info.value.field == field


def test_spec_still_takes_what_resource_inputs_carry() -> None:
    """Pulumi hands every number back as a float and enums as strings: 2.0 is still a count of 2."""
    spec = parse_spec({**SPEC, "count": 2.0, "ssh": {"port": 22.0}, "capacity": {"billing": "on_demand"},
                       "acceptance": {"threshold": 1, "baselines": {"x": 300}}}, "resource input")
    assert (spec.count, spec.ssh.port, spec.acceptance.threshold, spec.acceptance.baselines) == (2, 22, 1.0,
                                                                                                 {"x": 300.0})
    assert isinstance(spec.count, int)


@pytest.mark.parametrize(("change", "field"), [
    ({"gpus": True}, "gpus"), ({"gpus": "64"}, "gpus"), ({"duration": {"hours": float("inf")}}, "duration.hours"),
    ({"duration": {"days": 40000}}, "duration.days"), ({"exchange_rates": {"CNY": float("inf")}}, "exchange_rates.CNY"),
    ({"exchange_rates": {"CNY": "0.14"}}, "exchange_rates.CNY"), ({"budget": float("nan")}, "budget"),
    ({"storage": {"shared_tib": True}}, "storage.shared_tib"), ({"checks": {"max_price_age_days": "9"}},
                                                                "checks.max_price_age_days"),
])
def test_requirements_numbers_are_strict(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        parse_requirements({"nodes": 1, "duration": {"days": 2}, **change}, "r.yaml")
    assert info.value.field == field


def test_requirements_take_enum_strings() -> None:
    req = parse_requirements({"gpus": 8, "fabric": ["efa"], "billing": ["spot"], "duration": {"weeks": 1}})
    assert [f.value for f in req.fabric] == ["efa"] and [b.value for b in req.billing] == ["spot"]  # type: ignore[union-attr]


# -- --driver-config against the driver's constructor -----------------------------------------------------

def test_driver_config_converts_by_the_constructor_annotations() -> None:
    got = parse_driver_config(["poll=2", "connect_timeout=1.5", "endpoint_url=http://127.0.0.1:1",
                               "max_pool_connections=8"], provider="aws")
    assert got == {"poll": 2.0, "connect_timeout": 1.5, "endpoint_url": "http://127.0.0.1:1",
                   "max_pool_connections": 8}
    assert isinstance(got["poll"], float)
    ipmi = parse_driver_config(["inventory=/x.yaml", "release_power=on", 'provision={"image": "u"}',
                                "claims=null"], provider="ipmi")
    assert ipmi == {"inventory": "/x.yaml", "release_power": "on", "provision": {"image": "u"}, "claims": None}
    assert parse_driver_config(["addresses=[\"10.0.0.1\"]", "seed=-2", "capacity=3"], provider="fake") == {
        "addresses": ["10.0.0.1"], "seed": -2, "capacity": 3}


@pytest.mark.parametrize(("provider", "item", "word"), [
    ("aws", "state_path=/x", "the aws driver takes no setting 'state_path'"),
    ("fake", "endpoint_url=http://x", "the fake driver takes no setting 'endpoint_url'"),
    ("ipmi", "release_power=maybe", "one of off, on"),
    ("ipmi", "store=x", "cannot be given on the command line"),
    ("ipmi", "provision=[1]", "JSON dict"),
    ("huawei", "pool_size=-1", ">= 0"),
    ("huawei", "job_timeout=1e999", "finite"),
    ("alibaba", "read_timeout=ten", "takes a number"),
    ("fake", "region=x", "comes from the spec"),
    ("nosuch", "a=1", "unknown provider"),
])
def test_driver_config_refusals_name_the_key_and_value(provider: str, item: str, word: str) -> None:
    with pytest.raises(InvalidSpecError, match=word) as info:
        parse_driver_config([item], provider=provider)
    if provider != "nosuch":
        key = item.split("=")[0]
        assert info.value.field == f"driver_config.{key}" and repr(item) in str(info.value)
