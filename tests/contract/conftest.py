"""The drivers the contract suite runs against, behind one small harness.

* ``fake``: FakeDriver with file-backed state in the test's tmp dir (so a child process shares it).
* ``aws``: AwsDriver against the EC2 emulator over HTTP (one emulator per session/xdist worker).
* ``huawei``: HuaweiDriver against the BMS emulator over HTTP, signatures checked (one per session/worker).
* ``alibaba``: AlibabaDriver against the Alibaba Cloud ECS emulator over HTTP, with its ACS3 signatures checked.
* ``ipmi``: IpmiDriver on a simulated pool (one per session/xdist worker): two hosts behind ipmi_sim (IPMI 2.0)
  and two behind the sushy-tools Redfish emulator, each a VM-mode GPU host its BMC powers on and off; a fresh
  inventory and claim store per test. Capacity is the pool's: ``capacity=n`` leaves n hosts free (the others
  claimed by another cluster); throttling is the Redfish BMCs' (HTTP 429; ipmi_sim has no busy fault).

The harness hides only how each provider is set up and how its faults are switched on; the tests
then talk to the driver through the ComputeDriver protocol alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from metalfleet.providers import ClusterSpec, ComputeDriver, parse_spec
from metalfleet.providers.alibaba import AlibabaDriver
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.contract import PowerState
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.ipmi import IpmiDriver
from metalfleet.providers.ipmi.pool import FileClaimStore, claim_host, release_claim
from metalfleet.testing import usage as areas
from metalfleet.testing.bmc import BmcPool, start_bmc_pool
from metalfleet.testing.ec2 import Ec2Emulator
from metalfleet.testing.kit import EmulatorClient
from metalfleet.testing.retrycount import CountingPolicy as _Counting
from tests.emulators import alibaba_fixtures as ali
from tests.emulators.fixtures import (
    KMS_KEY,
    REGION,
    ZONE,
    default_subnet,
    ec2_client,
)
from tests.emulators.huawei_fixtures import ZONE as HUAWEI_ZONE
from tests.emulators.huawei_fixtures import huawei_driver
from tests.specs import cluster_spec_data


class CountingPolicy(_Counting):
    """The production retry policy with short waits (at most 12 tries, 30 s), counting the retries it makes."""

    def __init__(self) -> None:
        super().__init__(attempts=12, deadline=30.0)


@dataclass
class Harness:
    kind: str
    cluster: str
    zone: str
    tmp: Path
    emulator: EmulatorClient | None = None
    subnet: str | None = None
    drivers: list[ComputeDriver] = field(default_factory=list)
    #: The provider's throttling error code, the call that buys a node, the calls planning may make, and how
    #: many shared resources the driver makes per cluster (AWS: its security and placement group).
    throttle_code: str = "RequestLimitExceeded"
    create_action: str = "RunInstances"
    read_actions: frozenset[str] = frozenset({"DescribeInstanceTypes", "DescribeSubnets"})
    shared_resources: int = 2
    pool: BmcPool | None = None
    #: The calls that end a node and that read its state (the fault suite aims faults at them).
    release_action: str = "TerminateInstances"
    read_action: str = "DescribeInstances"

    # -- drivers -------------------------------------------------------------------------
    def driver(self, *, throttle: float = 0.0, capacity: int | None = None, seed: int = 7) -> ComputeDriver:
        """A fresh driver on the same cloud; ``throttle``/``capacity`` switch that provider's faults on."""
        if self.kind not in BUILT_IN:
            from metalfleet.providers.registry import get_driver

            d: ComputeDriver = get_driver(self.kind, **self.contract(throttle, capacity, seed).settings)
        elif self.kind == "fake":
            d = FakeDriver(region="local-1", state_path=self.tmp / "fake-cloud.json",
                                          throttle=throttle, capacity=capacity, seed=seed)
        elif self.kind == "ipmi":
            assert self.pool is not None
            self.pool.redfish.set_faults(**({"throttle": throttle, "seed": seed} if throttle else {}))
            d = IpmiDriver(**{k: v for k, v in self.driver_config().items() if k != "kind"})
            if capacity is not None:  # the other hosts are another cluster's
                with FileClaimStore(self.tmp / "claims.json").transaction() as st:
                    for i in range(len(self.pool.hosts) - capacity):
                        claim_host(st, key=f"blocker-{i}", candidates=[h.name for h in self.pool.hosts],
                                   record={"tags": {"metalfleet:cluster": "blocker"}})
        else:
            assert self.emulator is not None
            faults: dict[str, Any] = {}
            if throttle:
                faults.update(throttle=throttle, seed=seed)
            if capacity is not None:
                faults.update(capacity_remaining=capacity)
            self.emulator.set_faults(**faults)
            if self.kind == "huawei":
                d = huawei_driver(self.emulator)
            elif self.kind == "alibaba":
                d = AlibabaDriver(region=ali.REGION, endpoint=self.emulator.url, poll=0.02)
            else:
                d = AwsDriver(region=REGION, endpoint_url=self.emulator.url, poll=0.02)
        self.drivers.append(d)
        return d

    def faults(self, **faults: Any) -> None:
        """Switch the emulator's faults (the kit's settings: throttle, server_error, lost_response, latency_ms,
        actions, script, seed); on the pool, its Redfish BMCs' (ipmi_sim has no faults). The fake has none."""
        target = self.pool.redfish if self.pool is not None else self.emulator
        assert target is not None, f"{self.kind} has no fault switch"
        target.set_faults(**faults)

    @property
    def throttle_status(self) -> int:
        """The HTTP status the provider's throttling answers with (as the emulators' fault codes say)."""
        return {"aws": 503, "alibaba": 400, "huawei": 429}.get(self.kind, 429)

    def fault_stats(self) -> dict[str, int]:
        """The faults injected so far, by code (the emulator's, or the pool's Redfish BMCs')."""
        target = self.pool.redfish if self.pool is not None else self.emulator
        assert target is not None, f"{self.kind} has no fault switch"
        return dict(target.stats()["faults"])

    def orphans(self, cluster: str) -> list[str]:
        """Everything the cloud itself still lists for ``cluster``: live nodes, the shared resources
        (:meth:`made_for`) and, on AWS, the volumes and network interfaces its instances were tagged with."""
        left = [f"node:{n.id}" for n in self.cloud_nodes(cluster)] + self.made_for(cluster)
        if self.kind == "aws":
            assert self.emulator is not None
            ec2 = ec2_client(self.emulator)
            mine = [{"Name": "tag:metalfleet:cluster", "Values": [cluster]}]
            left += [f"volume:{v['VolumeId']}" for v in ec2.describe_volumes(Filters=mine)["Volumes"]]
            left += [f"eni:{e['NetworkInterfaceId']}"
                     for e in ec2.describe_network_interfaces(Filters=mine)["NetworkInterfaces"]]
        return left

    def cloud_nodes(self, cluster: str) -> list[Any]:
        """The cluster's live nodes, read by a fresh driver with every fault off."""
        self.faults_off()
        d = self.driver()
        return d.list_nodes(cluster)

    def faults_off(self) -> None:
        if self.emulator is not None:
            self.emulator.set_faults()
        if self.pool is not None:
            self.pool.redfish.set_faults()
            with FileClaimStore(self.tmp / "claims.json").transaction() as st:
                for node in list(st["nodes"].values()):
                    if node["key"].startswith("blocker-"):
                        release_claim(st, node["id"])

    def _inventory(self) -> Path:
        path = self.tmp / "pool.yaml"
        if not path.exists():
            assert self.pool is not None
            self.pool.write_inventory(path, pool=IPMI_POOL)
        return path

    def contract(self, throttle: float = 0.0, capacity: int | None = None, seed: int = 7) -> Any:
        """The ContractSetup of a provider registered by its own package (its record's ``contract`` hook)."""
        from metalfleet.providers.record import load_target
        from metalfleet.providers.registry import provider_record

        hook = provider_record(self.kind).contract
        assert hook is not None, f"provider {self.kind}'s record has no contract hook"
        return load_target(hook)(self.tmp, throttle=throttle, capacity=capacity, seed=seed)

    def driver_config(self) -> dict[str, Any]:
        """How a child process builds the same driver (see order_proc.py)."""
        if self.kind not in BUILT_IN:
            return {"kind": self.kind, **self.contract().settings}
        if self.kind == "fake":
            return {"kind": "fake", "region": "local-1", "state_path": str(self.tmp / "fake-cloud.json")}
        if self.kind == "ipmi":
            return {"kind": "ipmi", "inventory": str(self._inventory()), "claims": str(self.tmp / "claims.json"),
                    "poll": 0.05}
        assert self.emulator is not None
        if self.kind == "huawei":
            d = huawei_driver(self.emulator)
            return {"kind": "huawei", "region": d.region, "project_id": d.project_id, "endpoint": d.endpoint,
                    "bss_endpoint": d.bss_endpoint, "poll": d.poll, "lost_answer_grace": d.lost_answer_grace}
        if self.kind == "alibaba":
            return {"kind": "alibaba", "region": ali.REGION, "endpoint": self.emulator.url, "poll": 0.02}
        return {"kind": "aws", "region": REGION, "endpoint_url": self.emulator.url, "poll": 0.02}

    def api_calls(self, driver: ComputeDriver) -> int:
        """API calls made so far (the emulator's request counter; the fake's call counter)."""
        if self.kind not in BUILT_IN:  # the driver's own counter, where it keeps one
            counter = getattr(driver, "api_calls", None)
            return int(counter()) if counter else 0
        if self.kind == "fake":
            assert isinstance(driver, FakeDriver)
            return next(driver.calls)  # advances the counter by one; compare two readings with -1
        if self.pool is not None:  # chassis_control requests (IPMI) and Redfish API calls
            return self.pool.requests()
        assert self.emulator is not None
        return self.emulator.calls()

    def calls_between(self, driver: ComputeDriver, before: int) -> int:
        after = self.api_calls(driver)
        return after - before - (1 if self.kind == "fake" else 0)

    def made_for(self, cluster: str) -> list[str]:
        """What the provider holds that was made for ``cluster`` besides its nodes, as the cloud itself lists
        it (not the driver): AWS, the security and placement groups tagged metalfleet:cluster; the fake and
        the pool make nothing of the kind."""
        if self.kind in ("fake", "huawei", "ipmi") or self.kind not in BUILT_IN:
            return []  # Huawei: the spec names its VPC, subnet and groups; the pool: nothing to make
        assert self.emulator is not None
        if self.kind == "alibaba":  # the security group tagged with the cluster, the deployment set described so
            groups = ali.ecs_call(self.emulator, "DescribeSecurityGroups",
                                  {"Tag": [{"Key": "metalfleet:cluster", "Value": cluster}]})
            sets = ali.ecs_call(self.emulator, "DescribeDeploymentSets", {"PageSize": 100})
            return ([f"security-group:{g['SecurityGroupId']}" for g in groups["SecurityGroups"]["SecurityGroup"]]
                    + [f"deployment-set:{d['DeploymentSetId']}" for d in sets["DeploymentSets"]["DeploymentSet"]
                       if d.get("DeploymentSetDescription") == f"metalfleet:cluster={cluster}"])
        ec2 = ec2_client(self.emulator)
        mine = [{"Name": "tag:metalfleet:cluster", "Values": [cluster]}]
        return ([f"security-group:{g['GroupId']}" for g in ec2.describe_security_groups(Filters=mine)["SecurityGroups"]]
                + [f"placement-group:{g['GroupName']}"
                   for g in ec2.describe_placement_groups(Filters=mine)["PlacementGroups"]])

    # -- specs ---------------------------------------------------------------------------
    def subscription_spec(self, count: int = 2) -> ClusterSpec | None:
        """A spec bought for a term (monthly) on a platform that sells one, without the release opt-in; None
        where the platform sells none (AWS sells no instance for a term it would not terminate; a pool is no
        purchase)."""
        if self.kind in ("aws", "ipmi"):
            return None
        if self.kind not in BUILT_IN:
            from metalfleet.providers import BillingModel
            from metalfleet.providers.registry import provider_record

            if provider_record(self.kind).billing_problem(BillingModel.MONTHLY):
                return None
        return self.spec(count=count, capacity={"billing": "monthly"})

    def spec(self, count: int = 2, name: str | None = None, **overrides: Any) -> ClusterSpec:
        if self.kind not in BUILT_IN:
            data: dict[str, Any] = {"name": name or self.cluster, "provider": self.kind, "count": count,
                                    **self.contract().spec}
        else:  # the shared factory's spec in this harness's zone, with what the suite adds per provider
            owner = {"tags": {"owner": "contract-suite"}}
            extra: dict[str, dict[str, Any]] = {
                "fake": {}, "huawei": {}, "ipmi": {"region": IPMI_POOL, **owner},
                "alibaba": {"storage": {"kms_key_id": ali.KMS_KEY}, **owner},
                "aws": {"network": {"subnet_id": self.subnet}, "storage": {"kms_key_id": KMS_KEY}, **owner}}
            data = cluster_spec_data(self.kind, name or self.cluster, count, zone=self.zone, **extra[self.kind])
        data.update(overrides)
        return parse_spec(data)


def _cluster_name(nodeid: str) -> str:
    return "ct-" + hashlib.sha256(nodeid.encode()).hexdigest()[:10]


@pytest.fixture
def policy() -> CountingPolicy:
    return CountingPolicy()


IPMI_POOL = "contract-pool"


@pytest.fixture(scope="session")
def ipmi_pool() -> Iterator[BmcPool]:
    """Two IPMI and two Redfish pool hosts, each a simulated GPU host (one pool per xdist worker)."""
    from tests.ipmi.conftest import require_bmc_tools

    require_bmc_tools()
    with start_bmc_pool(("ipmi", "ipmi", "redfish", "redfish")) as pool:
        yield pool


#: The providers the harness knows how to set up itself; any other registered one brings its record's contract hook.
BUILT_IN = ("fake", "aws", "huawei", "alibaba", "ipmi")


def _providers() -> list[str]:
    """The built-in providers, or only METALFLEET_CONTRACT_PROVIDER (a provider another package registers)."""
    import os

    named = os.environ.get("METALFLEET_CONTRACT_PROVIDER")
    return [named] if named else list(BUILT_IN)


@pytest.fixture(params=_providers())
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    cluster = _cluster_name(request.node.nodeid)
    if request.param not in BUILT_IN:
        h = Harness(request.param, cluster, "", tmp_path, shared_resources=0)
        h.zone = h.contract().spec["zone"]
        yield h
        return
    if request.param == "fake":
        yield Harness("fake", cluster, "local-1a", tmp_path)
        return
    if request.param == "huawei":
        bms = request.getfixturevalue("huawei_emulator")
        yield Harness("huawei", cluster, HUAWEI_ZONE, tmp_path, emulator=bms, throttle_code="APIGW.0308",
                      create_action="CreateBareMetalServers",
                      read_actions=frozenset({"ListBaremetalFlavorDetailExtends"}), shared_resources=0,
                      release_action="CancelResourcesSubscription", read_action="ShowBaremetalServerDetails")
        bms.set_faults()
        return
    if request.param == "alibaba":
        ecs: EmulatorClient = request.getfixturevalue("alibaba_emulator")
        yield Harness("alibaba", cluster, ali.ZONE, tmp_path, emulator=ecs, throttle_code="Throttling.User",
                      release_action="DeleteInstances")
        ecs.set_faults()
        return
    if request.param == "ipmi":
        pool: BmcPool = request.getfixturevalue("ipmi_pool")
        areas.note("sim host")  # the session's pool: its hosts and BMC simulators
        h = Harness("ipmi", cluster, IPMI_POOL, tmp_path, pool=pool, shared_resources=0,
                    create_action="POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset",
                    release_action="POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset",
                    read_action="GET /redfish/v1/Systems/{id}")
        yield h
        pool.redfish.set_faults()
        off = IpmiDriver(h._inventory(), tmp_path / "teardown-claims.json")
        for host in off.pool.hosts:  # the next test starts from a pool that is off, as a fresh one is
            if pool.power(host.name) == "on":
                off.bmc(host).set_power(PowerState.OFF, timeout=30)
        return
    emulator: Ec2Emulator = request.getfixturevalue("ec2_emulator")
    h = Harness("aws", cluster, ZONE, tmp_path, emulator=emulator, subnet=default_subnet(emulator))
    yield h
    emulator.set_faults()
