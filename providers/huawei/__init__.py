"""Huawei Cloud Bare Metal Server (BMS) driver for GPU and Ascend nodes (extra ``metalfleet[huawei]``).

``import metalfleet.providers.huawei`` imports no SDK: huaweicloudsdkbms loads when a driver is built, so a
missing extra surfaces as the registry's install hint. The package follows the AWS driver's anatomy
(``providers/README.md``):

=================  ===========================================================================================
``driver``         :class:`HuaweiDriver`, the contract's methods, each a few lines over the modules below
``errors``         Huawei error codes (APIGW, BMS, BSS) -> the metalfleet error tree; :func:`boundary`
``validation``     offline checks of a NodeSpec (yearly/monthly billing only) and the one tag check
``request``        the CreateBareMetalServers body (prePaid; deterministic name and ``metalfleet:key`` tag)
``network``        the VPC, subnet and security groups of an order (nothing made per cluster, no EIP)
``observe``        the state table, servers -> Nodes, lookups by name (documented filters only), waiting
``billing``        BSS: an order's status, a server's term and expiry, unsubscribing it
``offerings``      the catalogue's Huawei entries joined with ListBaremetalFlavorDetailExtends
``jobs``           the asynchronous job API: ShowJobInfos -> server ids, failures -> errors
``transport``      the SDK clients' HTTP layer: no retrying of its own (not even of 429s), Retry-After kept
=================  ===========================================================================================

BMS has no client token: a re-run finds what an earlier run ordered (ListBareMetalServers by the node's
deterministic server name, its ``metalfleet:key`` tag compared client-side) before it creates anything, and a
create whose answer was lost is looked for again before it is retried; runs that raced converge on the node's
oldest server, unsubscribing the younger one. BMS creates yearly/monthly (prePaid) servers only and deletes none:
releasing one unsubscribes it through BSS, and only when the caller opts in.
"""

from __future__ import annotations

from ..record import DriverFacts, Guarantee, ProviderRecord
from .driver import HuaweiDriver
from .errors import boundary, translate
from .observe import STATE_TABLE
from .validation import MAX_TAGS, SOLD_BILLING, billing_problem, check_tags, spec_tag_problems, tag_problems

__all__ = ["MAX_TAGS", "PROVIDER", "SOLD_BILLING", "STATE_TABLE", "HuaweiDriver", "billing_problem", "boundary",
           "check_tags", "tag_problems", "translate"]

#: The platform as the registry, the spec, the catalogue and the price refresh see it (BMS's own reason for a
#: billing model it does not sell).
PROVIDER = ProviderRecord(
    name="huawei", driver=HuaweiDriver, extra="huawei", billing=tuple(sorted(SOLD_BILLING)),
    billing_refusal=billing_problem, tag_rules=spec_tag_problems,
    price_source="metalfleet.providers.huawei.pricing:PRICE_SOURCE",
    catalogue="metalfleet.providers:data/catalog.json",
    policy_facts=DriverFacts(
        metadata_tokens=Guarantee(True, "metalfleet's Huawei driver creates every BMS with metadata_options "
                                  "http_tokens=required", "metalfleet providers/huawei/request.py create_request"),
        volume_tags=Guarantee("unknown", "metalfleet's Huawei driver tags the server (server_tags); BMS gives the EVS "
                              "volumes it creates with the server no tags of their own",
                              "metalfleet providers/huawei/request.py create_request")))
