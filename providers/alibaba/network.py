"""What a cluster's nodes share: the vSwitch's zone and VPC, a deployment set, a security group.

Made once per cluster, marked with the cluster and removed with it: the security group carries the tag
``metalfleet:cluster`` (CreateSecurityGroup takes tags); a deployment set takes none, so its description says
``metalfleet:cluster=<name>``. A group or set the spec names is used as it is and never listed or touched.

The spec's placement strategy maps to a deployment set strategy: ``cluster`` -> ``LowLatency`` (the eRDMA
choice: the nodes close together in one zone), ``spread`` -> ``Availability`` (each on its own physical
server), ``partition`` -> ``AvailabilityGroup`` with ``partition_count`` groups.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidSpecError, MetalfleetError
from ..models import NodeSpec
from ..network import NetworkMemo, check_subnet_place
from ..tags import TAG_CLUSTER, TAG_NAME
from .errors import PROVIDER

__all__ = ["STRATEGY_OF", "ClusterNetwork", "Net", "cluster_marker", "cluster_resources", "delete_cluster_resources",
           "ensure_deployment_set", "ensure_security_group", "security_group_name"]

#: ECS call: (action, API parameters) -> the response body.
Call = Callable[[str, dict[str, Any]], dict[str, Any]]
#: The spec's placement strategy -> the deployment set strategy.
STRATEGY_OF = {"cluster": "LowLatency", "spread": "Availability", "partition": "AvailabilityGroup"}


@dataclass
class Net:
    """What a cluster's nodes share, looked up or created once per driver."""

    vpc_id: str
    zone: str
    security_group_ids: tuple[str, ...]
    deployment_set_id: str | None


def cluster_marker(cluster: str) -> str:
    """The description of a deployment set metalfleet made for ``cluster`` (deployment sets take no tags)."""
    return f"{TAG_CLUSTER}={cluster}"


def security_group_name(cluster: str) -> str:
    return f"metalfleet-{cluster}-erdma"


class ClusterNetwork:
    """vSwitch facts, deployment set and security group for each cluster, looked up or made once (and once only,
    even with many threads ordering nodes of the same cluster at the same time)."""

    def __init__(self, call: Call, region: str) -> None:
        self._call = call
        self._region = region
        self._vsw_lock = threading.Lock()
        self._vswitches: dict[str, dict[str, Any]] = {}
        self._nets: NetworkMemo[Net] = NetworkMemo()

    def vswitch(self, vswitch_id: str) -> dict[str, Any]:
        with self._vsw_lock:  # held across the call: one DescribeVSwitches per vSwitch
            if vswitch_id not in self._vswitches:
                resp = self._call("DescribeVSwitches", {"RegionId": self._region, "VSwitchId": vswitch_id})
                found = (resp.get("VSwitches") or {}).get("VSwitch") or []
                if not found:
                    raise InvalidSpecError(f"vSwitch {vswitch_id} does not exist in {self._region}",
                                           field="network.subnet_id", value=vswitch_id, provider=PROVIDER,
                                           code="InvalidVSwitchId.NotFound")
                self._vswitches[vswitch_id] = found[0]
            return self._vswitches[vswitch_id]

    def network(self, spec: NodeSpec) -> Net:
        """The cluster's shared network for ``spec``. Reads come first (the vSwitch, its zone and VPC), so a
        vSwitch outside ``network.vpc_id`` or the zone is refused before anything is made."""
        assert spec.subnet_id is not None
        vswitch_id = spec.subnet_id

        def make() -> Net:
            vsw = self.vswitch(vswitch_id)
            zone, vpc_id = str(vsw["ZoneId"]), str(vsw["VpcId"])
            check_subnet_place(spec, "vSwitch", zone, vpc_id, PROVIDER)
            ds = None
            if spec.placement_group:
                ds = ensure_deployment_set(self._call, self._region, spec.placement_group, spec.cluster,
                                           spec.placement_strategy, spec.placement_partitions)
            groups = tuple(spec.security_group_ids) or (ensure_security_group(
                self._call, self._region, spec.cluster, vpc_id, spec.ssh_ingress_cidrs, spec.ssh_port),)
            return Net(vpc_id=vpc_id, zone=zone, security_group_ids=groups, deployment_set_id=ds)

        return self._nets.get(spec, make)

    def forget(self, cluster: str) -> None:
        """Drop what is known of ``cluster`` (its resources were deleted: made again if ordered again)."""
        self._nets.forget(cluster)


def _deployment_sets(call: Call, region: str, **filters: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    page = 1
    while True:
        resp = call("DescribeDeploymentSets", {"RegionId": region, "PageNumber": page, "PageSize": 50, **filters})
        out.extend((resp.get("DeploymentSets") or {}).get("DeploymentSet") or [])
        if page * 50 >= int(resp.get("TotalCount") or 0):
            return out
        page += 1


def ensure_deployment_set(call: Call, region: str, name: str, cluster: str, strategy: str = "cluster",
                          partitions: int | None = None) -> str:
    """The id of the deployment set ``name`` with the strategy ``strategy`` maps to: made (marked with the
    cluster) if absent; an existing one with another strategy is an InvalidSpecError naming the group."""
    want = STRATEGY_OF[strategy]
    found = [d for d in _deployment_sets(call, region, DeploymentSetName=name) if d.get("DeploymentSetName") == name]
    if found:
        ds = found[0]
        if ds.get("DeploymentStrategy") != want:
            raise InvalidSpecError(f"deployment set {name} exists with strategy {ds.get('DeploymentStrategy')}, not "
                                   f"{want} (placement.strategy {strategy}): name another group_name, or delete that "
                                   "set", field="placement.group_name", value=name, provider=PROVIDER)
        return str(ds["DeploymentSetId"])
    # No ClientToken: a token names what it first made for hours, and a cluster released and ordered again must
    # get a new set, not the id of the deleted one. Looked up first, made under the cluster's lock.
    request: dict[str, Any] = {"RegionId": region, "DeploymentSetName": name, "Strategy": want,
                               "Description": cluster_marker(cluster)}
    if strategy == "partition" and partitions is not None:
        request["GroupCount"] = partitions
    return str(call("CreateDeploymentSet", request)["DeploymentSetId"])


def _cluster_tag(cluster: str) -> list[dict[str, str]]:
    return [{"Key": TAG_CLUSTER, "Value": cluster}]


def _security_groups(call: Call, region: str, **filters: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        params: dict[str, Any] = {"RegionId": region, "MaxResults": 100, **filters}
        if token:
            params["NextToken"] = token
        resp = call("DescribeSecurityGroups", params)
        out.extend((resp.get("SecurityGroups") or {}).get("SecurityGroup") or [])
        token = resp.get("NextToken") or None
        if not token:
            return out


def _source_field(cidr: str) -> str:
    return "Ipv6SourceCidrIp" if ":" in cidr else "SourceCidrIp"


def ensure_security_group(call: Call, region: str, cluster: str, vpc_id: str, ssh_cidrs: Sequence[str] = (),
                          ssh_port: int = 22) -> str:
    """The cluster's own group in ``vpc_id``: all traffic between members (eRDMA) and SSH from ``ssh_cidrs``, no
    more: SSH rules of this group that the spec no longer lists are revoked. Rules go as ``Permissions.N`` (the
    top-level IpProtocol, PortRange ... fields are deprecated in the reference)."""
    name = security_group_name(cluster)
    found = [g for g in _security_groups(call, region, VpcId=vpc_id, SecurityGroupName=name, Tag=_cluster_tag(cluster))
             if g.get("SecurityGroupName") == name]
    if found:
        group_id = str(found[0]["SecurityGroupId"])
        new = False
    else:
        created = call("CreateSecurityGroup", {
            "RegionId": region, "VpcId": vpc_id, "SecurityGroupName": name, "SecurityGroupType": "normal",
            "Description": f"metalfleet {cluster}: all traffic between the cluster's nodes (eRDMA), SSH from "
                           "network.ssh_ingress_cidrs",
            "Tag": [*_cluster_tag(cluster), {"Key": TAG_NAME, "Value": name}]})
        group_id, new = str(created["SecurityGroupId"]), True
    perms: list[dict[str, Any]] = []
    if not new:
        attr = call("DescribeSecurityGroupAttribute", {"RegionId": region, "SecurityGroupId": group_id,
                                                       "Direction": "ingress"})
        perms = (attr.get("Permissions") or {}).get("Permission") or []
    if not any(p.get("SourceGroupId") == group_id and str(p.get("IpProtocol")).upper() == "ALL" for p in perms):
        call("AuthorizeSecurityGroup", {"RegionId": region, "SecurityGroupId": group_id, "Permissions": [
            {"IpProtocol": "ALL", "PortRange": "-1/-1", "SourceGroupId": group_id, "NicType": "intranet",
             "Description": "eRDMA: all traffic between members of this group"}]})
    want = {(ssh_port, ipaddress.ip_network(c).compressed) for c in ssh_cidrs}
    have: set[tuple[int, str]] = set()
    for p in perms:
        low, _, high = str(p.get("PortRange") or "").partition("/")
        cidr = p.get("SourceCidrIp") or p.get("Ipv6SourceCidrIp")
        if str(p.get("IpProtocol")).upper() == "TCP" and low == high and low.isdigit() and cidr:
            have.add((int(low), str(cidr)))
    for port, cidr in sorted(want - have):
        call("AuthorizeSecurityGroup", {"RegionId": region, "SecurityGroupId": group_id, "Permissions": [
            {"IpProtocol": "TCP", "PortRange": f"{port}/{port}", _source_field(cidr): cidr,
             "Description": "SSH (network.ssh_ingress_cidrs)"}]})
    for port, cidr in sorted(have - want):
        call("RevokeSecurityGroup", {"RegionId": region, "SecurityGroupId": group_id, "Permissions": [
            {"IpProtocol": "TCP", "PortRange": f"{port}/{port}", _source_field(cidr): cidr}]})
    return group_id


def cluster_resources(call: Call, region: str, cluster: str) -> list[str]:
    """What metalfleet made for ``cluster`` and is still there, as ``security-group:<id>`` and
    ``deployment-set:<id>``."""
    groups = _security_groups(call, region, Tag=_cluster_tag(cluster))
    marker = cluster_marker(cluster)
    sets = [d for d in _deployment_sets(call, region) if d.get("DeploymentSetDescription") == marker]
    return ([f"security-group:{g['SecurityGroupId']}" for g in groups]
            + [f"deployment-set:{d['DeploymentSetId']}" for d in sets])


def delete_cluster_resources(call: Call, region: str, cluster: str, *, timeout: float, poll: float) -> list[str]:
    """Delete what :func:`cluster_resources` lists; returns what was deleted. Right after its instances are
    released, ECS may still count them as members for a while: a group or set still in use
    (DependencyViolation) is retried every ``poll`` seconds until ``timeout``."""
    deleted: list[str] = []
    for resource in cluster_resources(call, region, cluster):
        kind, _, ident = resource.partition(":")
        action, params = (("DeleteSecurityGroup", {"RegionId": region, "SecurityGroupId": ident})
                          if kind == "security-group" else
                          ("DeleteDeploymentSet", {"RegionId": region, "DeploymentSetId": ident}))
        deadline = time.monotonic() + timeout
        while True:
            try:
                call(action, params)
                deleted.append(resource)
                break
            except MetalfleetError as exc:
                code = exc.code or ""
                if code.endswith(".NotFound"):
                    break
                if not code.startswith("DependencyViolation") or time.monotonic() >= deadline:
                    raise
            time.sleep(poll)
    return deleted
