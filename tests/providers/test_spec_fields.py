"""Every accepted network, placement and tag field has an effect or a clear refusal, checked before any call."""

from __future__ import annotations

from typing import Any

import pytest

from metalfleet.providers import InvalidSpecError, parse_spec
from metalfleet.providers.aws import check_tags, tag_problems

BASE: dict[str, Any] = {"name": "train", "provider": "aws", "region": "us-east-1", "offering": "p5.48xlarge",
                        "count": 2, "image": "ami-0123456789abcdef0",
                        "network": {"subnet_id": "subnet-0123456789abcdef0"}}


def _err(**over: Any) -> InvalidSpecError:
    with pytest.raises(InvalidSpecError) as exc:
        parse_spec({**BASE, **over})
    return exc.value


def test_network_and_placement_fields_reach_every_node_spec() -> None:
    spec = parse_spec({**BASE, "network": {"subnet_id": "subnet-0123456789abcdef0", "vpc_id": "vpc-0123456789abcdef0",
                                           "ssh_ingress_cidrs": ["10.0.0.0/16", "2001:db8::/32"]},
                       "placement": {"strategy": "partition", "partition_count": 3}, "ssh": {"port": 2222}})
    ns = spec.node_spec(1, "p5.48xlarge")
    assert ns.vpc_id == "vpc-0123456789abcdef0"
    assert ns.ssh_ingress_cidrs == ("10.0.0.0/16", "2001:db8::/32") and ns.ssh_port == 2222
    assert (ns.placement_group, ns.placement_strategy, ns.placement_partitions) == ("train-pg", "partition", 3)


@pytest.mark.parametrize(("cidrs", "index"), [(["10.0.0.0/8", "10.1.2.3/8"], 1), (["bastion.example.com"], 0),
                                              (["10.0.0.0/33"], 0), ([""], 0)])
def test_a_bad_ssh_cidr_names_its_index_and_value(cidrs: list[str], index: int) -> None:
    e = _err(network={"subnet_id": "subnet-0123456789abcdef0", "ssh_ingress_cidrs": cidrs})
    assert e.field == f"network.ssh_ingress_cidrs[{index}]" and e.value == cidrs[index]
    assert f"network.ssh_ingress_cidrs[{index}]" in str(e) and repr(cidrs[index]) in str(e)


def test_ssh_cidrs_with_own_security_groups_are_refused_not_ignored() -> None:
    e = _err(network={"subnet_id": "subnet-0123456789abcdef0", "security_group_ids": ["sg-0123456789abcdef0"],
                      "ssh_ingress_cidrs": ["10.0.0.0/16"]})
    assert e.field == "network.ssh_ingress_cidrs" and e.value == ["10.0.0.0/16"]
    assert "security_group_ids" in str(e)


def test_vpc_id_alone_picks_no_subnet() -> None:
    e = _err(network={"vpc_id": "vpc-0123456789abcdef0"})
    assert e.field == "network.subnet_id" and "vpc-0123456789abcdef0" in str(e)


@pytest.mark.parametrize(("placement", "field", "value"), [
    ({"strategy": "partition"}, "placement.partition_count", None),
    ({"strategy": "cluster", "partition_count": 2}, "placement.partition_count", 2),
    ({"strategy": "none", "group_name": "mine"}, "placement.group_name", "mine"),
    ({"strategy": "partition", "partition_count": 8}, "placement.partition_count", 8),
])
def test_placement_combinations_that_would_do_nothing_are_refused(placement: dict[str, Any], field: str,
                                                                  value: Any) -> None:
    e = _err(placement=placement)
    assert e.field == field and e.value == value


def test_spread_over_seven_nodes_is_refused_for_aws_before_any_call() -> None:
    e = _err(count=8, placement={"strategy": "spread"})
    assert e.field == "placement.strategy" and e.value == "spread" and "at most 7" in str(e)
    assert parse_spec({**BASE, "count": 7, "placement": {"strategy": "spread"}}).placement.strategy == "spread"
    assert parse_spec({**BASE, "provider": "fake", "count": 8, "placement": {"strategy": "spread"}})


@pytest.mark.parametrize(("tags", "field", "value"), [
    ({"a$(id)": "x"}, "tags.a$(id)", "a$(id)"),
    ({"team": "ml;reboot"}, "tags.team", "ml;reboot"),
    ({"aws:owner": "me"}, "tags.aws:owner", "aws:owner"),
    ({"k" * 129: "x"}, "tags." + "k" * 129, "k" * 129),
    ({"team": "v" * 257}, "tags.team", "v" * 257),
    ({"metalfleet:cluster": "other"}, "tags.metalfleet:cluster", "metalfleet:cluster"),
])
def test_tags_break_a_rule_named_by_key_and_value(tags: dict[str, str], field: str, value: str) -> None:
    e = _err(tags=tags)
    assert e.field == field and e.value == value


def test_tags_that_keep_the_rules_pass_and_the_count_includes_metalfleets_own() -> None:
    fine = {"team": "ml-infra", "cost center": "4711", "owner": "a.b@example.com", "path": "/x/y:z", "e": "a+b=c_d",
            "Zürich": "über"}
    assert parse_spec({**BASE, "tags": fine}).tags == fine
    # 5 own tags (Name, metalfleet:cluster/index/key/generation - a replacement node carries its generation) and
    # 2 kept for the acceptance gate: 43 user tags fit
    assert parse_spec({**BASE, "tags": {f"k{i}": "v" for i in range(43)}})
    e = _err(tags={f"k{i}": "v" for i in range(44)})
    assert e.field == "tags" and "51" in str(e)
    e = _err(tags={f"k{i}": "v" for i in range(43)},
             network={"subnet_id": "subnet-0123456789abcdef0", "public_ip": True})  # + metalfleet:public-ip
    assert e.field == "tags"
    # another provider's rules are its own: the aws character set is not applied to fake
    assert parse_spec({**BASE, "provider": "fake", "tags": {"a$(id)": "x"}})


def test_one_tag_check_with_ec2s_laxer_set_for_free_text() -> None:
    assert tag_problems({"reason": "expected 8 GPUs, found 7"}, portable=False, count=False) == []
    assert [f for f, _, _ in tag_problems({"reason": "expected 8 GPUs, found 7"})] == ["tags.reason"]
    with pytest.raises(InvalidSpecError) as exc:
        check_tags({"aws:x": "y"}, portable=False, count=False)
    assert exc.value.field == "tags.aws:x"
