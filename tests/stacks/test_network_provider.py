"""ClusterNetworkProvider's methods called directly against the EC2 emulator: create makes the cluster's
groups, an SSH change is an in-place update, delete removes them once no node is left."""

from __future__ import annotations

from typing import Any

from metalfleet.providers import parse_spec
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.models import node_spec_to_dict
from metalfleet.stacks.network import ClusterNetworkProvider
from metalfleet.testing.ec2 import Ec2Emulator
from tests.emulators.fixtures import (
    IMAGE,
    KMS_KEY,
    REGION,
    ZONE,
    default_subnet,
    ec2_client,
)


def _props(emulator: Ec2Emulator, cidrs: list[str], **over: Any) -> dict[str, Any]:
    spec = parse_spec({"name": "net-unit", "provider": "aws", "region": REGION, "zone": ZONE,
                       "offering": "p4de.24xlarge", "count": 2, "image": IMAGE,
                       "network": {"subnet_id": default_subnet(emulator), "ssh_ingress_cidrs": cidrs},
                       "storage": {"kms_key_id": KMS_KEY}, **over})
    return {"provider": "aws", "driver_config": {"region": REGION, "endpoint_url": emulator.url},
            "spec": node_spec_to_dict(spec.node_spec(0, "p4de.24xlarge"))}


def _ssh(emulator: Ec2Emulator) -> set[str]:
    [group] = ec2_client(emulator).describe_security_groups(
        Filters=[{"Name": "group-name", "Values": ["metalfleet-net-unit-efa"]}])["SecurityGroups"]
    return {r["CidrIp"] for p in group["IpPermissions"] if p["IpProtocol"] == "tcp" for r in p["IpRanges"]}


def test_create_update_delete(ec2_emulator: Ec2Emulator) -> None:
    p = ClusterNetworkProvider()
    props = _props(ec2_emulator, ["10.0.0.0/16"])
    made = p.create(props)
    resources = made.outs["resources"]
    assert made.id == "net-unit-network" and sorted(r.split(":")[0] for r in resources) == [
        "placement-group", "security-group"]
    assert _ssh(ec2_emulator) == {"10.0.0.0/16"}

    assert not p.diff(made.id, made.outs, props).changes
    tagged = {**props, "spec": {**props["spec"], "tags": {"team": "x"}, "offering": "p5.48xlarge"}}
    assert not p.diff(made.id, made.outs, tagged).changes, "what the nodes alone depend on is not this resource's"
    wider = _props(ec2_emulator, ["10.0.0.0/16", "192.0.2.0/24"])
    d = p.diff(made.id, made.outs, wider)
    assert d.changes and not d.replaces
    updated = p.update(made.id, made.outs, wider)
    assert _ssh(ec2_emulator) == {"10.0.0.0/16", "192.0.2.0/24"} and updated.outs["resources"] == resources
    assert p.diff(made.id, made.outs, _props(ec2_emulator, [], name="net-other")).replaces == ["spec.cluster"]
    assert p.read(made.id, updated.outs).outs["resources"] == resources

    # a node of the cluster still runs: delete keeps the groups it uses
    driver = AwsDriver(region=REGION, endpoint_url=ec2_emulator.url, poll=0.02)
    spec = parse_spec({"name": "net-unit", "provider": "aws", "region": REGION, "zone": ZONE,
                       "offering": "p4de.24xlarge", "count": 1, "image": IMAGE,
                       "network": {"subnet_id": default_subnet(ec2_emulator)}, "storage": {"kms_key_id": KMS_KEY}})
    node = driver.order(spec.node_spec(0, "p4de.24xlarge"))
    p.delete(made.id, updated.outs)
    assert driver.cluster_resources("net-unit") == resources
    driver.release(node.id)
    p.delete(made.id, updated.outs)
    assert driver.cluster_resources("net-unit") == []
    p.delete(made.id, updated.outs)  # gone already: no error
