"""The network part of a BMS order: the spec's VPC, subnet and security groups, and a public address only
when the spec asks for one.

Unlike on EC2, metalfleet makes nothing per cluster on Huawei: a BMS needs a VPC subnet and security groups
the account already has (VPC is another service, with its own SDK), so the spec names them and the driver uses
them as they are. A cluster spec's ``network.ssh_ingress_cidrs`` (rules on a group metalfleet would make) is
therefore refused offline, naming the field. A public IP is an EIP ordered with the server (``publicip.eip``)
and released with it (``delete_publicip`` on delete).
"""

from __future__ import annotations

from typing import Any

from ..models import NodeSpec

__all__ = ["EIP_BANDWIDTH_MBIT", "EIP_TYPE", "network_request"]

#: The EIP type ordered for ``public_ip`` (dynamic BGP) and its per-node bandwidth, billed by traffic.
EIP_TYPE = "5_bgp"
EIP_BANDWIDTH_MBIT = 100


def network_request(spec: NodeSpec) -> dict[str, Any]:
    """The ``server`` fields that place it: ``vpcid``, one NIC in the subnet (its network id), the security
    groups, and ``publicip`` only for ``public_ip``."""
    out: dict[str, Any] = {
        "vpcid": spec.vpc_id,
        "nics": [{"subnet_id": spec.subnet_id}],
        "security_groups": [{"id": g} for g in spec.security_group_ids],
    }
    if spec.public_ip:
        out["publicip"] = {"eip": {"iptype": EIP_TYPE, "bandwidth": {
            "size": EIP_BANDWIDTH_MBIT, "sharetype": "PER", "chargemode": "traffic"}}}
    return out
