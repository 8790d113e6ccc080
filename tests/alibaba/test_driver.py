"""The Alibaba driver beyond the contract: no SDK at import, registry, plain pickling, the RunInstances request,
offline validation, tags, host keys and the cluster's security group and deployment set."""

from __future__ import annotations

import pickle
import subprocess
import sys
from dataclasses import replace

import pytest

from metalfleet.providers import (
    BillingModel,
    InvalidSpecError,
    NodeState,
    get_driver,
    order_cluster,
    release_cluster,
)
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.providers.contract import ClusterResourcesDriver, TaggingDriver
from metalfleet.testing.alibaba import AlibabaEmulator
from tests.emulators.alibaba_fixtures import ecs_call

from .conftest import ALL_TYPES, FAST, KMS_KEY, REGION, ZONE, Specs


def test_importing_the_package_loads_no_sdk() -> None:
    code = ("import sys, metalfleet.providers.alibaba; "
            "bad=[m for m in sys.modules if m.split('.')[0] in ('alibabacloud_ecs20140526','Tea','darabonba',"
            "'alibabacloud_tea_openapi')]; print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


def test_registry_builds_it_and_it_pickles_as_plain_config(emulator: AlibabaEmulator) -> None:
    driver = get_driver("alibaba", region=REGION, endpoint=emulator.url)
    assert isinstance(driver, AlibabaDriver)
    assert isinstance(driver, TaggingDriver) and isinstance(driver, ClusterResourcesDriver)
    state = driver.__getstate__()
    assert state == {"region": REGION, "endpoint": emulator.url, "poll": 5.0, "connect_timeout": 10.0,
                     "read_timeout": 60.0}
    assert "secret" not in pickle.dumps(driver).decode("latin-1").lower()
    again = pickle.loads(pickle.dumps(driver))
    assert [o.name for o in again.offerings()] == ALL_TYPES


def test_offerings_merge_describe_instance_types_with_the_catalogue(driver: AlibabaDriver) -> None:
    h20, a100, a100e, a100_40 = driver.offerings()
    assert (h20.gpu_model, h20.gpu_count, h20.gpu_memory_gib, h20.vcpus, h20.memory_gib) == ("H20", 8, 96, 192, 1024)
    assert (h20.fabric.value, h20.fabric_cards, h20.fabric_gbps) == ("erdma", 2, 160.0)  # eRDMA, not the VPC 170
    assert h20.extra["charge_types"] == ["PostPaid", "PrePaid"] and h20.extra["spot"] is False
    assert (a100.gpu_model, a100.fabric_cards, a100.fabric_gbps) == ("A100", 2, 160.0)  # 2 ERIs, not 4
    assert (a100e.gpu_memory_gib, a100e.fabric.value, a100e.extra["spot"]) == (80, "none", True)
    assert (a100_40.gpu_memory_gib, a100_40.vcpus, a100_40.memory_gib) == (40, 104, 768)


def test_the_request_is_deterministic_and_complete(driver: AlibabaDriver, specs: Specs) -> None:
    [spec] = specs.node_specs(driver, tags={"b": "2", "a": "1"})
    net = driver._nets.network(spec)
    first = driver.run_instances_request(spec, net)
    again = driver.run_instances_request(replace(spec, tags=dict(reversed(list(spec.tags.items())))), net)
    assert first == again
    assert (first["Amount"], first["MinAmount"], first["ClientToken"]) == (1, 1, spec.idempotency_key)
    assert first["HttpTokens"] == "required" and first["InternetMaxBandwidthOut"] == 0
    assert first["SystemDisk"] == {"Category": "cloud_essd", "Size": 200, "Encrypted": "true", "KMSKeyId": KMS_KEY}
    assert first["DataDisk"] == [{"Category": "cloud_essd", "Size": 500, "Encrypted": "true", "KMSKeyId": KMS_KEY,
                                  "DeleteWithInstance": True}]
    assert [(n["InstanceType"], n["NetworkCardIndex"], n["NetworkInterfaceTrafficMode"])
            for n in first["NetworkInterface"]] == [("Primary", 0, "HighPerformance"), ("Secondary", 1,
                                                                                          "HighPerformance")]
    # a Primary interface carries the vSwitch and the group: the reference forbids both at the top level then
    primary, secondary = first["NetworkInterface"]
    assert (primary["VSwitchId"], primary["SecurityGroupId"]) == (spec.subnet_id, net.security_group_ids[0])
    assert not {"VSwitchId", "SecurityGroupId", "SecurityGroupIds"} & set(first)
    assert not {"VSwitchId", "SecurityGroupId", "SecurityGroupIds"} & set(secondary)
    assert first["DeploymentSetId"] == net.deployment_set_id
    plain = driver.run_instances_request(replace(spec, offering="ecs.ebmgn7e.32xlarge"), net)
    assert "NetworkInterface" not in plain  # no ERI: the top level makes the primary interface
    assert (plain["VSwitchId"], plain["SecurityGroupId"]) == (spec.subnet_id, net.security_group_ids[0])
    tags = {t["Key"]: t["Value"] for t in first["Tag"]}
    assert tags["metalfleet:cluster"] == specs.cluster and tags["metalfleet:key"] == spec.idempotency_key


@pytest.mark.parametrize(("change", "field"), [
    ({"subnet_id": "subnet-0123456789abcdef0"}, "network.subnet_id"),
    ({"image": "ami-0123456789abcdef0!"}, "image"),
    ({"zone": "us-east-1a"}, "zone"),
    ({"billing": BillingModel.SPOT}, "capacity.billing"),
    ({"capacity_reservation_id": "cr-0123456789abcdef0"}, "capacity.reservation_id"),
    ({"security_group_ids": ("sg-0123456789abcdef0!",)}, "network.security_group_ids"),
    ({"tags": {"aliyun:x": "1"}}, "tags.aliyun:x"),
])
def test_bad_specs_are_refused_offline(driver: AlibabaDriver, emulator: AlibabaEmulator, specs: Specs,
                                       change: dict[str, object], field: str) -> None:
    [spec] = specs.node_specs(driver)
    before = emulator.calls()
    with pytest.raises(InvalidSpecError) as info:
        driver.validate(replace(spec, **change))  # type: ignore[arg-type]
    assert info.value.field == field
    assert emulator.calls() == before


def test_set_tags_host_keys_and_cluster_resources(driver: AlibabaDriver, emulator: AlibabaEmulator,
                                                  specs: Specs) -> None:
    [node] = order_cluster(driver, specs.node_specs(driver, ssh={"port": 22},
                                                    network={"subnet_id": specs.cluster_spec().network.subnet_id,
                                                             "ssh_ingress_cidrs": ["10.0.0.0/16"]}),
                           policy=FAST, timeout=30)
    try:
        driver.set_tags(node.id, {"metalfleet:acceptance": "quarantined"})
        fresh = AlibabaDriver(region=REGION, endpoint=emulator.url, poll=0.02)
        got = fresh.get(node.id)
        assert got.tags["metalfleet:acceptance"] == "quarantined" and got.tags["team"] == "ml-infra"
        assert got.state == NodeState.RUNNING and got.zone == ZONE
        assert fresh.host_keys(node.id) == ()  # no simulated host: the console has no host key block
        resources = sorted(driver.cluster_resources(specs.cluster))
        assert [r.split(":")[0] for r in resources] == ["deployment-set", "security-group"]
        sg = resources[1].split(":")[1]
        rules = ecs_call(emulator, "DescribeSecurityGroupAttribute", {"SecurityGroupId": sg})["Permissions"]
        pairs = {(p["IpProtocol"], p["PortRange"], p.get("SourceCidrIp") or p.get("SourceGroupId"))
                 for p in rules["Permission"]}
        assert pairs == {("ALL", "-1/-1", sg), ("TCP", "22/22", "10.0.0.0/16")}
        assert driver.release_cluster_resources(specs.cluster) == []  # in use while the node lives
    finally:
        release_cluster(driver, specs.cluster, policy=FAST)
    assert driver.cluster_resources(specs.cluster) == []
    assert driver.get(node.id).state == NodeState.TERMINATED


def test_a_released_nodes_key_steps_to_the_next_generation(driver: AlibabaDriver, specs: Specs) -> None:
    """ECS answers a repeated ClientToken with the instance it first bought, even released: the driver says it is
    gone and fleet.order_node orders the next generation, once; the re-made security group is a new one."""
    from metalfleet.providers.fleet import order_node

    [spec] = specs.node_specs(driver)
    first = driver.order(spec)
    release_cluster(driver, specs.cluster, policy=FAST)
    assert driver.cluster_resources(specs.cluster) == []
    replay = AlibabaDriver(region=REGION, endpoint=driver.endpoint, poll=0.02)
    try:
        node = order_node(replay, spec, policy=FAST)
        assert node.id != first.id and node.tags["metalfleet:key"] != spec.idempotency_key
        assert [n.id for n in replay.list_nodes(specs.cluster)] == [node.id]
    finally:
        release_cluster(replay, specs.cluster, policy=FAST)


def test_a_subscription_is_released_only_with_unsubscribe_converted_first(driver: AlibabaDriver,
                                                                           emulator: AlibabaEmulator,
                                                                           specs: Specs) -> None:
    """An unexpired PrePaid node: release refuses it, naming it, its ExpiredTime and the refund, and sends nothing;
    with unsubscribe it is converted (ModifyInstanceChargeType PostPaid, AutoPay, a ClientToken of its own) and
    then released. An expired one is released as it is (TerminateSubscription), without the opt-in."""
    from metalfleet.providers.errors import SubscriptionError

    nodes = order_cluster(driver, specs.node_specs(driver, count=2, capacity={"billing": "monthly"}), policy=FAST,
                          timeout=30)
    kept, expired = sorted(nodes, key=lambda n: n.id)
    [sub] = driver.subscriptions([kept.id])
    assert sub.expires_at and sub.expires_at.endswith("Z") and "refund quota" in (sub.refund or "")
    assert "192 vCPU x" in (sub.refund or "") and "ModifyInstanceChargeType" in sub.how
    emulator.reset_faults()
    with pytest.raises(SubscriptionError) as refused:
        driver.release(kept.id)
    assert kept.id in str(refused.value) and str(sub.expires_at) in str(refused.value)
    assert refused.value.field == "capacity.release_subscriptions" and refused.value.subscriptions == [sub]
    assert emulator.calls("ModifyInstanceChargeType") == emulator.calls("DeleteInstances") == 0
    emulator.expire(expired.id)
    assert driver.subscriptions([expired.id]) == []  # its term ran out: nothing to end early
    driver.release(expired.id, timeout=30)
    [gone] = emulator.requests("DeleteInstances")
    assert gone["params"]["TerminateSubscription"].lower() == "true"
    driver.release(kept.id, timeout=30, unsubscribe=True)
    actions = [r["action"] for r in emulator.requests() if r["action"] in ("ModifyInstanceChargeType",
                                                                           "DeleteInstances")]
    assert actions == ["DeleteInstances", "ModifyInstanceChargeType", "DeleteInstances"]
    [converted] = emulator.requests("ModifyInstanceChargeType")
    assert converted["params"]["InstanceChargeType"] == "PostPaid" and converted["params"]["ClientToken"]
    assert driver.get(kept.id).state == NodeState.TERMINATED
    release_cluster(driver, specs.cluster, policy=FAST)
