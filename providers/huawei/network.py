"""The network part of a BMS order: the spec's VPC, subnet and security groups.

Unlike on EC2, metalfleet makes nothing per cluster on Huawei: a BMS needs a VPC subnet and security groups
the account already has (VPC is another service, with its own SDK), so the spec names them and the driver uses
them as they are. A cluster spec's ``network.ssh_ingress_cidrs`` (rules on a group metalfleet would make) is
therefore refused offline, naming the field, and so is ``network.public_ip``: an EIP ordered with a yearly/monthly
server is a resource of its own, and nothing in the references says that unsubscribing the server releases it.
"""

from __future__ import annotations

from typing import Any

from ..models import NodeSpec

__all__ = ["network_request"]


def network_request(spec: NodeSpec) -> dict[str, Any]:
    """The ``server`` fields that place it: ``vpcid``, one NIC in the subnet (its network id) and the security
    groups."""
    return {
        "vpcid": spec.vpc_id,
        "nics": [{"subnet_id": spec.subnet_id}],
        "security_groups": [{"id": g} for g in spec.security_group_ids],
    }
