"""AWS EC2 driver for GPU nodes: P5, P5en, P4de and P4d with an EFA interface on every network card.

``import metalfleet.providers.aws`` imports no SDK: boto3 loads when a driver is built, so a missing
``metalfleet[aws]`` extra surfaces as the registry's install hint. The package is the template the other
cloud drivers follow (see ``providers/README.md``):

=================  ===========================================================================================
``driver``         :class:`AwsDriver`, the contract's methods, each a few lines over the modules below
``errors``         EC2 error codes -> the metalfleet error tree; :func:`boundary`, the one place SDK errors
                   are translated
``validation``     offline checks of a NodeSpec and the one tag check (no API call)
``request``        the RunInstances request (deterministic, ClientToken from the idempotency key); KMS pre-flight
``network``        the cluster's subnet facts, placement group, security group and SSH rules, Elastic IPs
``observe``        the state table, instances -> Nodes, waiting, host keys from the console
``offerings``      the catalogue's AWS entries merged with DescribeInstanceTypes
=================  ===========================================================================================

What ``order`` sends, per node: one EFA interface per network card, a placement group with the spec's
strategy and a per-cluster security group (all traffic between members, SSH from
``network.ssh_ingress_cidrs``; both tagged ``metalfleet:cluster`` and removed with the cluster, never a group
the spec names), IMDSv2 only, encrypted volumes (the spec's KMS keys are looked up first), tags on the
instance, its volumes and interfaces, no public IPv4 unless ``public_ip`` (then an Elastic IP), and
``ClientToken`` = the node's idempotency key (cut to EC2's 64 characters with a digest when longer), so a re-run
returns the instance the first attempt bought. What it sends is listed, cited, in tests/support/reference/ec2.yaml.
"""

from __future__ import annotations

from ..record import DriverFacts, Guarantee, ProviderRecord
from .driver import AwsDriver
from .errors import boundary, translate_client_error
from .observe import STATE_TABLE
from .validation import MAX_TAGS, PARTITIONS_MAX, SOLD_BILLING, SPREAD_MAX_PER_ZONE, check_tags, tag_problems

__all__ = ["MAX_TAGS", "PARTITIONS_MAX", "PROVIDER", "SPREAD_MAX_PER_ZONE", "STATE_TABLE", "AwsDriver", "boundary",
           "check_tags", "tag_problems", "translate_client_error"]

#: The platform as the registry, the spec, the catalogue and the price refresh see it.
PROVIDER = ProviderRecord(
    name="aws", driver=AwsDriver, extra="aws", billing=SOLD_BILLING,
    spec_rules="metalfleet.providers.aws.validation:spec_problems", tag_rules=tag_problems,
    price_source="metalfleet.providers.aws.pricing:PRICE_SOURCE", catalogue="metalfleet.providers:data/catalog.json",
    # the Deep Learning Base AMI, resolved through SSM at launch
    policy_facts=DriverFacts(
        metadata_tokens=Guarantee(True, "metalfleet's AWS driver launches every node with MetadataOptions "
                                  "HttpTokens=required", "metalfleet providers/aws/request.py run_instances_request"),
        volume_tags=Guarantee("node", "metalfleet's AWS driver tags the instance, its volumes and interfaces alike "
                              "(TagSpecifications)", "metalfleet providers/aws/request.py run_instances_request")),
    default_image="resolve:ssm:/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id")
