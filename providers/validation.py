"""Offline spec checks every cloud driver makes the same way (its own ``validation.py`` calls them).

The SSH access fields (``network.ssh_ingress_cidrs``, ``ssh.port``) mean the same on every cloud that makes a
security group, and every driver's tag check refuses the first problem its ``tag_problems`` finds; the
messages and fields are the same for all, so they are written once here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from .errors import InvalidSpecError
from .models import NodeSpec

__all__ = ["check_ssh_access", "raise_first_problem"]


def raise_first_problem(problems: Sequence[tuple[str, str, str]], provider: str) -> None:
    """Raise an InvalidSpecError for the first of ``problems`` ((field, value, why) each), if there is one."""
    if problems:
        field, value, why = problems[0]
        raise InvalidSpecError(why, field=field, value=value, provider=provider)


def check_ssh_access(spec: NodeSpec, provider: str) -> None:
    """``network.ssh_ingress_cidrs`` are CIDRs and not given with the spec's own security groups (metalfleet
    changes none of those); ``ssh.port`` is a TCP port."""
    for i, cidr in enumerate(spec.ssh_ingress_cidrs):
        try:
            ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            raise InvalidSpecError(f"{cidr!r} is not a CIDR (e.g. 203.0.113.0/24)",
                                   field=f"network.ssh_ingress_cidrs[{i}]", value=cidr, provider=provider) from None
    if spec.ssh_ingress_cidrs and spec.security_group_ids:
        raise InvalidSpecError("ssh_ingress_cidrs are rules on the security group metalfleet makes, and with "
                               "security_group_ids it makes none and changes none of yours: put the SSH rule in "
                               "one of your groups", field="network.ssh_ingress_cidrs",
                               value=list(spec.ssh_ingress_cidrs), provider=provider)
    if not 1 <= spec.ssh_port <= 65535:
        raise InvalidSpecError(f"port {spec.ssh_port} is outside 1..65535", field="ssh.port", value=spec.ssh_port,
                               provider=provider)
