"""examples/aws-p5/cluster.yaml validates, plans offline and orders unchanged on the emulator."""

from __future__ import annotations

from pathlib import Path

from metalfleet.providers import NodeState, load_spec, order_cluster, plan, release_cluster
from metalfleet.providers.aws import AwsDriver
from tests.emulators.ec2_server import Ec2Emulator, default_subnet_id

from .conftest import FAST

EXAMPLE = Path(__file__).parents[2] / "examples" / "aws-p5" / "cluster.yaml"


def test_example_cluster_yaml(driver: AwsDriver, emulator: Ec2Emulator) -> None:
    spec = load_spec(EXAMPLE)
    assert (spec.provider, spec.region, spec.offering, spec.count) == ("aws", "us-east-1", "p5.48xlarge", 2)
    assert spec.placement.strategy == "cluster" and spec.storage.kms_key_id
    assert spec.network.subnet_id == default_subnet_id("us-east-1a")
    specs = plan(driver, spec)
    assert {s.root_volume.kms_key_id for s in specs} == {spec.storage.kms_key_id}

    nodes = order_cluster(driver, specs, policy=FAST, timeout=30)
    try:
        assert [n.name for n in nodes] == ["llm-p5-0", "llm-p5-1"]
        assert all(n.state == NodeState.RUNNING and n.extra["efa_interfaces"] == 32 for n in nodes)
        assert {n.zone for n in nodes} == {"us-east-1a"}
    finally:
        release_cluster(driver, spec.name, policy=FAST)
    assert driver.list_nodes(spec.name) == []
