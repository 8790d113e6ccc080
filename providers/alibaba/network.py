"""What a cluster's nodes share: the vSwitch's zone and VPC, a deployment set, a security group.

Made once per cluster, marked with the cluster and removed with it: the security group carries the tag
``metalfleet:cluster`` (CreateSecurityGroup takes tags); a deployment set takes none, so its description says
``metalfleet:cluster=<name>``. A group or set the spec names is used as it is and never listed or touched.

The spec's placement strategy maps to a deployment set strategy: ``cluster`` -> ``LowLatency`` (the eRDMA
choice: the nodes close together in one zone), ``spread`` -> ``Availability`` (each on its own physical
server), ``partition`` -> ``AvailabilityGroup`` with ``partition_count`` groups.

Made once whoever races: two runs (two processes, two machines, no shared lock) ordering one cluster must end up
with one group and one set, or their RunInstances requests differ and the nodes' ClientTokens answer
IdempotentParameterMismatch. So CreateSecurityGroup and CreateDeploymentSet carry a ClientToken derived from the
region, the cluster (and its VPC or set name) and a generation: racers send the same token and ECS answers both
with the one resource it made ("If an HTTP status code 200 is returned, the retry generates the same result as
the last request", ECS "How to ensure idempotence"). A token goes on naming what it first made after that was
deleted, so a cluster released and ordered again steps to the next generation when the token's resource no
longer exists (or the token was used with other settings): the walk is deterministic, so racers step together.
After a create the resources are read again by name and every racer takes the same one, the oldest.
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConflictError, InvalidSpecError, MetalfleetError
from ..models import NodeSpec
from ..network import NetworkMemo, check_subnet_place
from ..retry import step
from ..tags import TAG_CLUSTER, TAG_NAME
from .errors import IDEMPOTENT_MISMATCH, PROVIDER

__all__ = ["MAX_TOKEN_GENERATIONS", "STRATEGY_OF", "ClusterNetwork", "Net", "cluster_marker", "cluster_resources",
           "delete_cluster_resources", "ensure_deployment_set", "ensure_security_group", "resource_token",
           "security_group_name"]

#: ECS call: (action, API parameters) -> the response body.
Call = Callable[[str, dict[str, Any]], dict[str, Any]]
#: The spec's placement strategy -> the deployment set strategy.
STRATEGY_OF = {"cluster": "LowLatency", "spread": "Availability", "partition": "AvailabilityGroup"}
#: How many ClientToken generations a cluster's group or set steps through (one per release and re-order of the
#: cluster while ECS still remembers the older tokens) before the driver stops and says so.
MAX_TOKEN_GENERATIONS = 64


@dataclass
class Net:
    """What a cluster's nodes share, looked up or created once per driver."""

    vpc_id: str
    zone: str
    security_group_ids: tuple[str, ...]
    deployment_set_id: str | None


def resource_token(kind: str, region: str, cluster: str, *parts: str, generation: int = 0) -> str:
    """The ClientToken of the cluster's ``kind`` resource (``sg``, ``ds``): the same for every run that orders the
    cluster, so racers are answered with one resource; at most 64 ASCII characters, as the reference requires."""
    digest = hashlib.sha256("\x00".join((kind, region, cluster, *parts)).encode()).hexdigest()[:40]
    return f"mf-{kind}-{digest}-{generation}"


def _oldest(items: Sequence[dict[str, Any]], id_key: str) -> dict[str, Any] | None:
    """The one of several same-named resources every racer picks: the oldest, then the smallest id."""
    return min(items, key=lambda r: (str(r.get("CreationTime") or ""), str(r[id_key])), default=None)


def _gone(exc: MetalfleetError) -> bool:
    return (exc.code or "").endswith(".NotFound")


def _mismatch(exc: MetalfleetError) -> bool:
    return isinstance(exc, ConflictError) and exc.code in IDEMPOTENT_MISMATCH


def _too_many(what: str, cluster: str) -> ConflictError:
    return ConflictError(f"the {what} of cluster {cluster}: {MAX_TOKEN_GENERATIONS} ClientToken generations all "
                         "name a deleted resource or other settings; check what keeps deleting it",
                         provider=PROVIDER, code="TokenGenerations")


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


def _named_set(call: Call, region: str, name: str) -> dict[str, Any] | None:
    return _oldest([d for d in _deployment_sets(call, region, DeploymentSetName=name)
                    if d.get("DeploymentSetName") == name], "DeploymentSetId")


def _set_exists(call: Call, region: str, ds_id: str) -> bool:
    found = _deployment_sets(call, region, DeploymentSetIds=f'["{ds_id}"]')
    return any(d.get("DeploymentSetId") == ds_id for d in found)


def ensure_deployment_set(call: Call, region: str, name: str, cluster: str, strategy: str = "cluster",
                          partitions: int | None = None) -> str:
    """The id of the deployment set ``name`` with the strategy ``strategy`` maps to: made (marked with the
    cluster, under the cluster's ClientToken) if absent; an existing one with another strategy is an
    InvalidSpecError naming the group."""
    want = STRATEGY_OF[strategy]

    def checked(ds: dict[str, Any]) -> str:
        if ds.get("DeploymentStrategy") != want:
            raise InvalidSpecError(f"deployment set {name} exists with strategy {ds.get('DeploymentStrategy')}, "
                                   f"not {want} (placement.strategy {strategy}): name another group_name, or "
                                   "delete that set", field="placement.group_name", value=name, provider=PROVIDER)
        return str(ds["DeploymentSetId"])

    found = _named_set(call, region, name)
    if found:
        return checked(found)
    request: dict[str, Any] = {"RegionId": region, "DeploymentSetName": name, "Strategy": want,
                               "Description": cluster_marker(cluster)}
    if strategy == "partition" and partitions is not None:
        request["GroupCount"] = partitions
    for generation in range(MAX_TOKEN_GENERATIONS):
        token = resource_token("ds", region, cluster, name, generation=generation)
        try:
            ds_id = str(call("CreateDeploymentSet", {**request, "ClientToken": token})["DeploymentSetId"])
        except MetalfleetError as exc:
            if not _mismatch(exc):
                raise
            found = _named_set(call, region, name)  # a racer with other settings made it: say so
            if found:
                return checked(found)
            continue  # the token's first request had other settings and its set is gone
        if not _set_exists(call, region, ds_id):
            continue  # the token names a set deleted since (the cluster was released): the next generation
        found = _named_set(call, region, name)
        return checked(found) if found else ds_id
    raise _too_many(f"deployment set {name}", cluster)


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


def _named_group(call: Call, region: str, cluster: str, vpc_id: str, name: str) -> dict[str, Any] | None:
    return _oldest([g for g in _security_groups(call, region, VpcId=vpc_id, SecurityGroupName=name,
                                                Tag=_cluster_tag(cluster))
                    if g.get("SecurityGroupName") == name], "SecurityGroupId")


def _ingress(call: Call, region: str, group_id: str) -> list[dict[str, Any]] | None:
    """The group's ingress rules; None when ECS does not know the group (deleted)."""
    try:
        attr = call("DescribeSecurityGroupAttribute", {"RegionId": region, "SecurityGroupId": group_id,
                                                       "Direction": "ingress"})
    except MetalfleetError as exc:
        if _gone(exc):
            return None
        raise
    return list((attr.get("Permissions") or {}).get("Permission") or [])


def _make_group(call: Call, region: str, cluster: str, vpc_id: str, name: str) -> tuple[str, list[dict[str, Any]]]:
    """The cluster's group made under its ClientToken (or the one a racer made), and its ingress rules."""
    request = {"RegionId": region, "VpcId": vpc_id, "SecurityGroupName": name, "SecurityGroupType": "normal",
               "Description": f"metalfleet {cluster}: all traffic between the cluster's nodes (eRDMA), SSH from "
                              "network.ssh_ingress_cidrs",
               "Tag": [*_cluster_tag(cluster), {"Key": TAG_NAME, "Value": name}]}
    for generation in range(MAX_TOKEN_GENERATIONS):
        token = resource_token("sg", region, cluster, vpc_id, generation=generation)
        try:
            group_id = str(call("CreateSecurityGroup", {**request, "ClientToken": token})["SecurityGroupId"])
        except MetalfleetError as exc:
            if not _mismatch(exc):
                raise
            found = _named_group(call, region, cluster, vpc_id, name)
            if found is None:
                continue  # the token's first request had other settings and its group is gone
            group_id = str(found["SecurityGroupId"])
        found = _named_group(call, region, cluster, vpc_id, name)  # a racer's, made before: every racer takes it
        if found is not None:
            group_id = str(found["SecurityGroupId"])
        perms = _ingress(call, region, group_id)
        if perms is not None:
            return group_id, perms
        # the token names a group deleted since (the cluster was released): the next generation
    raise _too_many(f"security group {name}", cluster)


def ensure_security_group(call: Call, region: str, cluster: str, vpc_id: str, ssh_cidrs: Sequence[str] = (),
                          ssh_port: int = 22) -> str:
    """The cluster's own group in ``vpc_id``: all traffic between members (eRDMA) and SSH from ``ssh_cidrs``, no
    more: SSH rules of this group that the spec no longer lists are revoked. Rules go as ``Permissions.N`` (the
    top-level IpProtocol, PortRange ... fields are deprecated in the reference); a racer adding the same rule is
    harmless (ECS takes a rule the group has)."""
    name = security_group_name(cluster)
    found = _named_group(call, region, cluster, vpc_id, name)
    perms = _ingress(call, region, str(found["SecurityGroupId"])) if found is not None else None
    if found is not None and perms is not None:
        group_id = str(found["SecurityGroupId"])
    else:
        group_id, perms = _make_group(call, region, cluster, vpc_id, name)
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
    (DependencyViolation) is retried every ``poll`` seconds until ``timeout``, and so is a throttled or failed delete
    (each delete on its own: a retry of the whole release would need every call through a storm in one pass)."""
    deleted: list[str] = []
    for resource in step(cluster_resources, call, region, cluster):
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
                if not (code.startswith("DependencyViolation") or exc.retryable) or time.monotonic() >= deadline:
                    raise
            time.sleep(poll)
    return deleted
