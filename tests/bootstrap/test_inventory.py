"""Inventory traits come from the offering catalogue, never from a provider call made while parsing a file."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, get_args

import pytest

from metalfleet.bootstrap import inventory
from metalfleet.bootstrap.inventory import NodeTraits, hosts_from_spec, parse_inventory, traits_for
from metalfleet.providers import Node, NodeState, parse_spec
from metalfleet.providers.catalog import Vendor, load_catalog
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import Fabric, Interconnect


def test_every_catalogue_offering_gives_its_traits() -> None:
    for e in load_catalog().entries:
        t = traits_for(e.provider, e.name)
        assert t == NodeTraits(e.vendor, e.gpu_model, e.gpu_count, e.interconnect, e.fabric, e.fabric_cards or 0,
                               e.nvme_count or 0), e.name  # an unknown count: none to set up
    assert traits_for("aws", "p9.96xlarge") is None and traits_for(None, "p5.48xlarge") is None
    assert get_args(inventory.Vendor) == get_args(Vendor)


def test_traits_of_providers_without_a_driver_and_of_the_fake_one() -> None:
    doc = {"hosts": [{"name": "ali", "provider": "alibaba", "offering": "ecs.ebmgn8v.48xlarge"},
                     {"name": "npu", "provider": "huawei", "offering": "physical.kat2e.48xlarge.8.313t"},
                     {"name": "fk", "provider": "fake", "offering": "fake.8xa100", "nvme_count": 2}]}
    ali, npu, fk = parse_inventory(doc, "hosts.yaml").hosts
    assert (ali.traits.vendor, ali.traits.gpu_model, ali.traits.fabric) == ("nvidia", "H20", Fabric.ERDMA)
    # HCCS inside the server, RoCE (the NPUs' own ports) between servers
    assert (npu.traits.vendor, npu.traits.interconnect, npu.traits.fabric) == ("ascend", Interconnect.HCCS,
                                                                               Fabric.ROCE)
    assert (fk.traits.fabric, fk.traits.gpu_model, fk.traits.nvme_count) == (Fabric.ROCE, "A100", 2)  # file wins


def test_an_unknown_offering_names_the_field_and_asks_no_provider() -> None:
    """Before the catalogue, an offering missing from the inventory's own table made the parser build the
    provider's driver (boto3 and all) and call its API inside a bare except."""
    code = ("import sys\n"
            "from metalfleet.bootstrap.inventory import parse_inventory\n"
            "from metalfleet.providers.errors import InvalidSpecError\n"
            "try:\n"
            "    parse_inventory({'defaults': {'provider': 'aws', 'offering': 'p9.96xlarge'},"
            " 'hosts': [{'name': 'a'}, {'name': 'b', 'offering': 'p6.48xlarge'}]}, 'hosts.yaml')\n"
            "except InvalidSpecError as exc:\n"
            "    print(exc.field, exc.value)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["hosts.0.offering p9.96xlarge", "[]"]


def test_an_unknown_offering_with_traits_given_is_fine() -> None:
    doc: dict[str, Any] = {"hosts": [{"name": "own", "provider": "own", "offering": "hgx", "gpu_count": 8,
                                      "fabric": "infiniband"}]}
    [own] = parse_inventory(doc, "hosts.yaml").hosts
    assert (own.traits.gpu_count, own.traits.fabric, own.traits.vendor) == (8, Fabric.INFINIBAND, "nvidia")


def _spec(**over: Any) -> Any:
    return parse_spec({"name": "train", "provider": "aws", "region": "us-east-1", "count": 1,
                       "image": "ami-0123456789abcdef0", **over})


def _node(offering: str) -> Node:
    return Node(id="i-0", provider="aws", region="us-east-1", state=NodeState.RUNNING, offering=offering,
                private_ip="10.0.0.10", name="train-0")


def test_hosts_from_spec_takes_traits_from_the_catalogue_or_names_the_offering() -> None:
    [host] = hosts_from_spec(_spec(offering="p4d.24xlarge"), [_node("p4d.24xlarge")]).hosts
    assert (host.traits.gpu_model, host.traits.fabric_cards) == ("A100", 4)
    by_requirements = _spec(requirements={"gpu": "H200", "min_gpus": 8})
    [host] = hosts_from_spec(by_requirements, [_node("p5en.48xlarge")]).hosts  # the node says what it is
    assert (host.traits.gpu_model, host.traits.fabric_cards) == ("H200", 16)
    with pytest.raises(InvalidSpecError) as exc:
        hosts_from_spec(by_requirements, [_node("p6-b200.48xlarge")])
    assert (exc.value.field, exc.value.value) == ("offering", "p6-b200.48xlarge")
    offering = load_catalog().require("aws", "p5.48xlarge").offering()
    [host] = hosts_from_spec(by_requirements, [_node("p6-b200.48xlarge")], offering).hosts  # the driver's word
    assert host.traits.gpu_model == "H100"
