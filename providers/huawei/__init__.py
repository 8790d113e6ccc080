"""Huawei Cloud Bare Metal Server (BMS) driver for GPU and Ascend nodes (extra ``metalfleet[huawei]``).

``import metalfleet.providers.huawei`` imports no SDK: huaweicloudsdkbms loads when a driver is built, so a
missing extra surfaces as the registry's install hint. The package follows the AWS driver's anatomy
(``providers/README.md``):

=================  ===========================================================================================
``driver``         :class:`HuaweiDriver`, the contract's methods, each a few lines over the modules below
``errors``         Huawei error codes (APIGW, BMS) -> the metalfleet error tree; :func:`boundary`
``validation``     offline checks of a NodeSpec (billing per flavor included) and the one tag check
``request``        the CreateBareMetalServers body (deterministic name and ``metalfleet:key`` tag)
``network``        the VPC, subnet, security groups and optional EIP of an order (nothing made per cluster)
``observe``        the state table, servers -> Nodes, lookups by tag, waiting
``offerings``      the catalogue's Huawei entries joined with ListBaremetalFlavorDetailExtends
``jobs``           the asynchronous job API: ShowJobInfos -> server ids, failures -> errors
=================  ===========================================================================================

BMS has no client token: a re-run finds what an earlier run ordered by the node's ``metalfleet:key`` tag before
it creates anything, and a create whose answer was lost is looked for again before it is retried.
"""

from __future__ import annotations

from .driver import HuaweiDriver
from .errors import boundary, translate
from .observe import STATE_TABLE
from .validation import MAX_TAGS, check_tags, tag_problems

__all__ = ["MAX_TAGS", "STATE_TABLE", "HuaweiDriver", "boundary", "check_tags", "tag_problems", "translate"]
