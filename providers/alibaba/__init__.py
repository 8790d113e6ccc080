"""Alibaba Cloud ECS Bare Metal (EBM) driver for GPU nodes: ebmgn8v (H20), ebmgn7ex/ebmgn7e/ebmgn7 (A100) and
the other EBM GPU families in the catalogue, with eRDMA interfaces (ERI) where the type has them.

``import metalfleet.providers.alibaba`` imports no SDK: ``alibabacloud-ecs20140526`` loads when a driver is
built, so a missing ``metalfleet[alibaba]`` extra surfaces as the registry's install hint. The package follows
the AWS driver's anatomy (``providers/README.md``); what it sends is held to the ECS reference table
(``tests/support/reference/alibaba-ecs.yaml``):

=================  ===========================================================================================
``driver``         :class:`AlibabaDriver`, the contract's methods, each a few lines over the modules below
``errors``         ECS error codes -> the metalfleet error tree; :func:`boundary`, the one place SDK errors
                   are translated
``validation``     offline checks of a NodeSpec and the one tag check (no API call)
``request``        the RunInstances parameters (deterministic, ClientToken = idempotency key, ERIs with the vSwitch
                   and groups in the Primary interface only, encrypted disks, HttpTokens=required, tags)
``network``        the vSwitch's zone and VPC, the cluster's deployment set and security group
``observe``        the state table, instances -> Nodes, waiting, host keys from the console
``offerings``      the catalogue's Alibaba entries merged with DescribeInstanceTypes; billing constraints
``pricing``        DescribePrice (CNY: hourly, spot, 1 month, 1 and 3 years prepaid) for ``catalogue refresh``
``subscription``   PrePaid nodes: their ExpiredTime, what ending one early refunds, the conversion's ClientToken
=================  ===========================================================================================
"""

from __future__ import annotations

from ..record import DriverFacts, Guarantee, ProviderRecord
from .driver import ENDPOINT_ENV, AlibabaDriver
from .errors import boundary, translate_error
from .observe import STATE_TABLE
from .validation import BILLING, MAX_TAGS, check_tags, tag_problems

__all__ = ["ENDPOINT_ENV", "MAX_TAGS", "PROVIDER", "STATE_TABLE", "AlibabaDriver", "boundary", "check_tags",
           "tag_problems", "translate_error"]

#: The platform as the registry, the spec, the catalogue and the price refresh see it.
PROVIDER = ProviderRecord(
    name="alibaba", driver=AlibabaDriver, extra="alibaba", billing=BILLING,
    price_source="metalfleet.providers.alibaba.pricing:PRICE_SOURCE",
    catalogue="metalfleet.providers:data/catalog.json",
    policy_facts=DriverFacts(
        metadata_tokens=Guarantee(True, "metalfleet's Alibaba driver launches every node with HttpTokens=required",
                                  "metalfleet providers/alibaba/request.py run_instances_request"),
        volume_tags=Guarantee("node", "metalfleet's Alibaba driver tags the instance with RunInstances Tag.N, which "
                              "ECS puts on its disks too",
                              "metalfleet providers/alibaba/request.py run_instances_request")))
