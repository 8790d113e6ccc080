"""The spec-level rules every platform shares, written once: the cluster spec applies them at parse time and
each cloud driver's ``validation.py`` calls them before its own rules (with its own limits where they differ).

The SSH access fields (``network.ssh_ingress_cidrs``, ``ssh.port``) mean the same on every cloud that makes a
security group, placement's ``partition_count`` goes with strategy partition only, a spread group holds a
bounded number of nodes per zone, and every node spec names an offering the driver sells, an image, and the
driver's region; every driver's tag check refuses the first problem its ``tag_problems`` finds.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from .errors import InvalidSpecError
from .models import NodeSpec

__all__ = ["SSH_RULES_NEED_OWN_GROUP", "check_ids", "check_node_basics", "check_placement", "check_ssh_access",
           "cidr_problem", "partition_problem", "raise_first_problem", "spread_problem"]

#: Why ``ssh_ingress_cidrs`` cannot go with ``security_group_ids``.
SSH_RULES_NEED_OWN_GROUP = ("ssh_ingress_cidrs become rules on the security group metalfleet makes for the cluster, "
                            "and with security_group_ids metalfleet makes none and changes none of yours: add the "
                            "SSH rule to one of your groups and drop ssh_ingress_cidrs, or drop security_group_ids")


def cidr_problem(cidr: str) -> str | None:
    """Why ``cidr`` is no network in CIDR notation (host bits set, or no CIDR at all), or None."""
    try:
        ipaddress.ip_network(cidr, strict=True)
    except ValueError as exc:
        why = "has host bits set" if "host bits" in str(exc) else "is not an IPv4 or IPv6 CIDR"
        return f"{cidr!r} {why} (e.g. 203.0.113.0/24)"
    return None


def partition_problem(strategy: str, partitions: int | None, most: int = 7,
                      limit: str = "the most partitions EC2 allows per Availability Zone") -> str | None:
    """Why ``partitions`` does not go with ``strategy`` (at most ``most``; ``limit`` says whose limit), or None."""
    if strategy == "partition" and (partitions is None or not 1 <= partitions <= most):
        return (f"strategy partition needs partition_count 1-{most} ({limit})"
                + (f", not {partitions}" if partitions is not None else ""))
    if strategy != "partition" and partitions is not None:
        return f"partition_count is for strategy partition, not {strategy}"
    return None


def spread_problem(nodes: int, most: int) -> str | None:
    """Why ``nodes`` nodes (at least) cannot share a spread group that holds ``most`` per zone, or None."""
    if nodes <= most:
        return None
    return (f"a spread placement group runs at most {most} instances per Availability Zone, and every node of the "
            f"cluster goes into the subnet's zone: use at most {most} nodes, or strategy partition")


def raise_first_problem(problems: Sequence[tuple[str, str, str]], provider: str) -> None:
    """Raise an InvalidSpecError for the first of ``problems`` ((field, value, why) each), if there is one."""
    if problems:
        field, value, why = problems[0]
        raise InvalidSpecError(why, field=field, value=value, provider=provider)


def check_ssh_access(spec: NodeSpec, provider: str) -> None:
    """``network.ssh_ingress_cidrs`` are CIDRs and not given with the spec's own security groups (metalfleet
    changes none of those); ``ssh.port`` is a TCP port."""
    for i, cidr in enumerate(spec.ssh_ingress_cidrs):
        why = cidr_problem(cidr)
        if why:
            raise InvalidSpecError(why, field=f"network.ssh_ingress_cidrs[{i}]", value=cidr, provider=provider)
    if spec.ssh_ingress_cidrs and spec.security_group_ids:
        raise InvalidSpecError(SSH_RULES_NEED_OWN_GROUP, field="network.ssh_ingress_cidrs",
                               value=list(spec.ssh_ingress_cidrs), provider=provider)
    if not 1 <= spec.ssh_port <= 65535:
        raise InvalidSpecError(f"port {spec.ssh_port} is outside 1..65535", field="ssh.port", value=spec.ssh_port,
                               provider=provider)


def check_placement(spec: NodeSpec, provider: str, strategies: Sequence[str], *, partitions_max: int,
                    limit: str) -> None:
    """The node's placement strategy is one the platform has (``strategies``), and its ``partition_count`` goes
    with it (at most ``partitions_max``, ``limit`` saying whose limit); nothing to check without a group."""
    if not spec.placement_group:
        return
    if spec.placement_strategy not in strategies:
        raise InvalidSpecError(f"placement strategy {spec.placement_strategy!r} is not one of "
                               f"{', '.join(strategies)}", field="placement.strategy",
                               value=spec.placement_strategy, provider=provider)
    why = partition_problem(spec.placement_strategy, spec.placement_partitions, partitions_max, limit)
    if why:
        raise InvalidSpecError(why, field="placement.partition_count", value=spec.placement_partitions,
                               provider=provider)


def check_node_basics(spec: NodeSpec, provider: str, region: str, offerings: Sequence[str], image: str,
                      zone: str) -> None:
    """What every driver checks first: the offering is one it orders, an image is given (``image``: what one
    looks like there), the node is in the driver's region, and a zone given is one of the region's (``zone``: a
    pattern of the part after the region's name)."""
    if spec.offering not in offerings:
        raise InvalidSpecError(f"unknown offering {spec.offering!r} for provider {provider} (supported: "
                               f"{', '.join(offerings)})", field="offering", value=spec.offering, provider=provider)
    if not spec.image:
        raise InvalidSpecError(f"image is required: {image}", field="image", value=spec.image, provider=provider)
    if spec.region != region:
        raise InvalidSpecError(f"region {spec.region!r} differs from the driver's region {region!r}",
                               field="region", value=spec.region, provider=provider)
    if spec.zone and not re.fullmatch(re.escape(region) + zone, spec.zone):
        raise InvalidSpecError(f"zone {spec.zone!r} is not in region {region}", field="zone", value=spec.zone,
                               provider=provider)


def check_ids(provider: str, ids: Iterable[tuple[str, str | None, re.Pattern[str], str]]) -> None:
    """Each given id has the platform's shape: ``(field, value, pattern, what)`` refuses a value (None: not given)
    that ``pattern`` does not match as "'value' is not ``what``" (``a subnet id (subnet-...)``)."""
    for field, value, pattern, what in ids:
        if value is not None and not pattern.match(value):
            raise InvalidSpecError(f"{value!r} is not {what}", field=field, value=value, provider=provider)
