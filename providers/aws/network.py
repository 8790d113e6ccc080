"""What a cluster's nodes share on EC2, made once and removed with the cluster.

* the subnet's facts (zone, VPC), checked against ``zone`` and ``network.vpc_id`` before anything is made;
* a placement group with the spec's strategy (cluster, spread or partition), created if absent;
* unless the spec names its own groups, a per-cluster security group letting members reach each other on all
  traffic, in and out (as EFA requires), plus SSH on ``ssh.port`` from exactly ``network.ssh_ingress_cidrs``;
* an Elastic IP per node when the spec asks for a public IP (EC2 cannot auto-assign one to an instance
  launched with several interfaces), found again by the node's ``metalfleet:key`` tag.

What metalfleet makes carries ``metalfleet:cluster``: :func:`cluster_resources` lists exactly that, and a
group the spec names is never tagged, listed or touched.
"""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidSpecError, MetalfleetError, NotFoundError, ProviderError
from ..models import Node, NodeSpec
from ..network import NetworkMemo, check_subnet_place
from ..retry import step
from ..tags import TAG_CLUSTER, TAG_KEY, TAG_NAME, TAG_PUBLIC_IP
from .errors import PROVIDER, boundary

__all__ = ["ClusterNetwork", "Net", "cluster_resources", "delete_cluster_resources", "ensure_placement_group",
           "ensure_public_ip", "ensure_security_group", "release_public_ip", "security_group_name"]


@dataclass
class Net:
    """What a cluster's nodes share, looked up or created once per driver."""

    vpc_id: str
    zone: str
    security_group_ids: tuple[str, ...]


class ClusterNetwork:
    """Subnet facts, placement group and security group for each cluster, looked up or made once (and once
    only, even with many threads ordering nodes of the same cluster at the same time)."""

    def __init__(self, ec2: Callable[[], Any]) -> None:
        self._ec2 = ec2
        self._subnet_lock = threading.Lock()
        self._subnets: dict[str, dict[str, Any]] = {}
        self._nets: NetworkMemo[Net] = NetworkMemo()

    def subnet(self, subnet_id: str) -> dict[str, Any]:
        with self._subnet_lock:  # held across the call: one DescribeSubnets per subnet
            if subnet_id not in self._subnets:
                with boundary("DescribeSubnets"):
                    resp = self._ec2().describe_subnets(SubnetIds=[subnet_id])
                self._subnets[subnet_id] = resp["Subnets"][0]
            return self._subnets[subnet_id]

    def network(self, spec: NodeSpec) -> Net:
        """The cluster's shared network for ``spec``. Reads come first (the subnet, its zone and VPC), so a
        subnet outside ``network.vpc_id`` or the zone is refused before anything is made."""
        assert spec.subnet_id is not None
        subnet_id = spec.subnet_id

        def make() -> Net:
            subnet = self.subnet(subnet_id)
            zone, vpc_id = str(subnet["AvailabilityZone"]), str(subnet["VpcId"])
            check_subnet_place(spec, "subnet", zone, vpc_id, PROVIDER)
            ec2 = self._ec2()
            if spec.placement_group:
                ensure_placement_group(ec2, spec.placement_group, spec.cluster, spec.placement_strategy,
                                       spec.placement_partitions)
            groups = tuple(spec.security_group_ids) or (ensure_security_group(
                ec2, spec.cluster, vpc_id, spec.ssh_ingress_cidrs, spec.ssh_port),)
            return Net(vpc_id=vpc_id, zone=zone, security_group_ids=groups)

        return self._nets.get(spec, make)

    def forget(self, cluster: str) -> None:
        """Drop what is known of ``cluster`` (its resources were deleted: made again if ordered again)."""
        self._nets.forget(cluster)


def ensure_placement_group(ec2: Any, name: str, cluster: str, strategy: str = "cluster",
                           partitions: int | None = None) -> None:
    """The placement group ``name`` with ``strategy``: made (tagged with the cluster) if absent; an
    existing one with another strategy or partition count is an InvalidSpecError."""
    with boundary("DescribePlacementGroups"):
        found = ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": [name]}])
    groups = found.get("PlacementGroups", [])
    if groups:
        group = groups[0]
        if group.get("Strategy") != strategy:
            raise InvalidSpecError(f"placement group {name} exists with strategy {group.get('Strategy')}, not "
                                   f"{strategy}: name another group_name, or delete that group",
                                   field="placement.group_name", value=name, provider=PROVIDER)
        if strategy == "partition" and partitions is not None and group.get("PartitionCount") != partitions:
            raise InvalidSpecError(f"placement group {name} exists with {group.get('PartitionCount')} "
                                   f"partitions, not {partitions}", field="placement.partition_count",
                                   value=partitions, provider=PROVIDER)
        return
    request: dict[str, Any] = {"GroupName": name, "Strategy": strategy, "TagSpecifications": [
        {"ResourceType": "placement-group", "Tags": [{"Key": TAG_CLUSTER, "Value": cluster}]}]}
    if strategy == "partition" and partitions is not None:
        request["PartitionCount"] = partitions
    try:
        with boundary("CreatePlacementGroup"):
            ec2.create_placement_group(**request)
    except InvalidSpecError as exc:  # another process created it between our look and our create
        if exc.code != "InvalidPlacementGroup.Duplicate":
            raise


def security_group_name(cluster: str) -> str:
    return f"metalfleet-{cluster}-efa"


def _ssh_perms(rules: set[tuple[int, str]]) -> list[dict[str, Any]]:
    perms = []
    for port in sorted({p for p, _ in rules}):
        cidrs = sorted(c for p, c in rules if p == port)
        perm: dict[str, Any] = {"IpProtocol": "tcp", "FromPort": port, "ToPort": port}
        v4 = [{"CidrIp": c, "Description": "SSH (network.ssh_ingress_cidrs)"} for c in cidrs if ":" not in c]
        v6 = [{"CidrIpv6": c, "Description": "SSH (network.ssh_ingress_cidrs)"} for c in cidrs if ":" in c]
        if v4:
            perm["IpRanges"] = v4
        if v6:
            perm["Ipv6Ranges"] = v6
        perms.append(perm)
    return perms


def ensure_security_group(ec2: Any, cluster: str, vpc_id: str, ssh_cidrs: Sequence[str] = (),
                          ssh_port: int = 22) -> str:
    """The cluster's own group in ``vpc_id``: all traffic between members (EFA) and SSH from
    ``ssh_cidrs``, no more: SSH rules of this group that the spec no longer lists are revoked."""
    name = security_group_name(cluster)
    filters = [{"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc_id]}]
    with boundary("DescribeSecurityGroups"):
        groups = ec2.describe_security_groups(Filters=filters).get("SecurityGroups", [])
    if groups:
        group = groups[0]
    else:
        try:
            with boundary("CreateSecurityGroup"):
                created = ec2.create_security_group(
                    GroupName=name, VpcId=vpc_id,
                    Description=f"metalfleet {cluster}: all traffic between the cluster's nodes (EFA), "
                                "SSH from network.ssh_ingress_cidrs",
                    TagSpecifications=[{"ResourceType": "security-group",
                                        "Tags": [{"Key": TAG_CLUSTER, "Value": cluster},
                                                 {"Key": TAG_NAME, "Value": name}]}])
            group = {"GroupId": created["GroupId"]}  # new: no rules of ours yet
        except (InvalidSpecError, ProviderError) as exc:
            if exc.code != "InvalidGroup.Duplicate":
                raise
            with boundary("DescribeSecurityGroups"):  # made by another process meanwhile
                group = ec2.describe_security_groups(Filters=filters)["SecurityGroups"][0]
    group_id = str(group["GroupId"])
    rule = {"IpProtocol": "-1", "UserIdGroupPairs": [
        {"GroupId": group_id, "Description": "EFA: all traffic between members of this group"}]}

    def has_self_rule(perms: Sequence[Mapping[str, Any]]) -> bool:
        return any(p.get("IpProtocol") == "-1" and any(g.get("GroupId") == group_id
                                                       for g in p.get("UserIdGroupPairs", []))
                   for p in perms)

    def call(action: str, fn: str, perms: list[dict[str, Any]], tolerate: str) -> None:
        try:
            with boundary(action):
                getattr(ec2, fn)(GroupId=group_id, IpPermissions=perms)
        except MetalfleetError as exc:
            if exc.code != tolerate:
                raise

    for direction, perms in (("Ingress", group.get("IpPermissions", [])),
                             ("Egress", group.get("IpPermissionsEgress", []))):
        if not has_self_rule(perms):
            call(f"AuthorizeSecurityGroup{direction}", f"authorize_security_group_{direction.lower()}",
                 [rule], "InvalidPermission.Duplicate")

    # SSH: exactly the spec's CIDRs on the spec's port (this group's tcp rules with addresses are all ours)
    want = {(ssh_port, ipaddress.ip_network(c).compressed) for c in ssh_cidrs}
    have: set[tuple[int, str]] = set()
    for p in group.get("IpPermissions", []):
        if p.get("IpProtocol") in ("tcp", "6") and p.get("FromPort") == p.get("ToPort"):
            have |= {(int(p["FromPort"]), r["CidrIp"]) for r in p.get("IpRanges", [])}
            have |= {(int(p["FromPort"]), r["CidrIpv6"]) for r in p.get("Ipv6Ranges", [])}
    if want - have:
        call("AuthorizeSecurityGroupIngress", "authorize_security_group_ingress", _ssh_perms(want - have),
             "InvalidPermission.Duplicate")
    if have - want:
        call("RevokeSecurityGroupIngress", "revoke_security_group_ingress", _ssh_perms(have - want),
             "InvalidPermission.NotFound")
    return group_id


def cluster_resources(ec2: Any, cluster: str) -> list[str]:
    """What metalfleet made for ``cluster`` and is still there, as ``security-group:<id>`` and
    ``placement-group:<name>``: the groups tagged ``metalfleet:cluster=<cluster>``."""
    by_tag = [{"Name": f"tag:{TAG_CLUSTER}", "Values": [cluster]}]
    with boundary("DescribeSecurityGroups"):
        groups = ec2.describe_security_groups(Filters=by_tag).get("SecurityGroups", [])
    with boundary("DescribePlacementGroups"):
        placement = ec2.describe_placement_groups(Filters=by_tag).get("PlacementGroups", [])
    return ([f"security-group:{g['GroupId']}" for g in groups]
            + [f"placement-group:{g['GroupName']}" for g in placement if g.get("State") != "deleted"])


def delete_cluster_resources(ec2: Any, cluster: str, *, timeout: float, poll: float) -> list[str]:
    """Delete what :func:`cluster_resources` lists; returns what was deleted. Right after its instances
    terminate, EC2 may still hold their interfaces for a while: a group still in use (DependencyViolation,
    InvalidPlacementGroup.InUse) is retried every ``poll`` seconds until ``timeout``, and so is a throttled or failed
    delete."""
    deleted: list[str] = []
    for resource in step(cluster_resources, ec2, cluster):
        kind, _, ident = resource.partition(":")
        gone: tuple[str, ...]
        if kind == "security-group":
            action, call, kwargs = "DeleteSecurityGroup", ec2.delete_security_group, {"GroupId": ident}
            busy, gone = "DependencyViolation", ("InvalidGroup.NotFound", "InvalidSecurityGroupID.NotFound")
        else:
            action, call, kwargs = "DeletePlacementGroup", ec2.delete_placement_group, {"GroupName": ident}
            busy, gone = "InvalidPlacementGroup.InUse", ("InvalidPlacementGroup.Unknown",)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with boundary(action):
                    call(**kwargs)
                deleted.append(resource)
                break
            except MetalfleetError as exc:
                if exc.code in gone:
                    break
                # throttling and 5xx are retried here, each delete on its own: a retry of the whole release by the
                # caller's policy would have to get every read and delete through the storm in one pass
                if not (exc.code == busy or exc.retryable) or time.monotonic() >= deadline:
                    raise
            time.sleep(poll)
    return deleted


def ensure_public_ip(ec2: Any, spec: NodeSpec, instance: Mapping[str, Any]) -> None:
    """An Elastic IP on the primary interface, found again by the node's key on a re-run."""
    primary = next(n for n in instance["NetworkInterfaces"] if n.get("Attachment", {}).get("DeviceIndex") == 0
                   and n.get("Attachment", {}).get("NetworkCardIndex", 0) == 0)
    key_filter = [{"Name": f"tag:{TAG_KEY}", "Values": [spec.idempotency_key]}]
    with boundary("DescribeAddresses"):
        addresses = ec2.describe_addresses(Filters=key_filter).get("Addresses", [])
    if addresses:
        address = addresses[0]
    else:
        tags = [{"Key": TAG_CLUSTER, "Value": spec.cluster}, {"Key": TAG_KEY, "Value": spec.idempotency_key},
                {"Key": TAG_NAME, "Value": spec.name}]
        with boundary("AllocateAddress"):
            address = ec2.allocate_address(Domain="vpc", TagSpecifications=[
                {"ResourceType": "elastic-ip", "Tags": tags}])
    if address.get("NetworkInterfaceId") != primary["NetworkInterfaceId"]:
        with boundary("AssociateAddress"):
            ec2.associate_address(AllocationId=address["AllocationId"],
                                  NetworkInterfaceId=primary["NetworkInterfaceId"], AllowReassociation=True)


def release_public_ip(ec2: Any, node: Node) -> None:
    """Release the Elastic IP :func:`ensure_public_ip` gave ``node`` (none: nothing to do)."""
    key = node.tags.get(TAG_KEY)
    if node.tags.get(TAG_PUBLIC_IP) != "eip" or not key:
        return
    with boundary("DescribeAddresses"):
        addresses = ec2.describe_addresses(Filters=[{"Name": f"tag:{TAG_KEY}", "Values": [key]}])["Addresses"]
    for address in addresses:
        if address.get("AssociationId"):
            with contextlib.suppress(NotFoundError), boundary("DisassociateAddress"):
                ec2.disassociate_address(AssociationId=address["AssociationId"])
        with contextlib.suppress(NotFoundError), boundary("ReleaseAddress"):
            ec2.release_address(AllocationId=address["AllocationId"])
