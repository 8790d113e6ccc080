"""A deliberately non-compliant stack of metalfleet resources, for the policy pack's end-to-end test.

Every resource is one of metalfleet's own (GpuNode, ClusterNetwork, NodeBootstrap) declared directly from a
cluster spec, so `pulumi preview` needs no cloud: a preview registers resources without ordering anything.
Planted: a public IP, an unencrypted root volume and missing owner/cost-center tags on an AWS node; SSH open
to 0.0.0.0/0 on the cluster's security group; a node on a provider whose driver does not guarantee IMDSv2
tokens (metalfleet's AWS driver always requires them, so IMDSv1 shows as "unknown", which fails); trust on
first use for SSH host keys and an object store whose encryption the spec cannot show.
"""

from metalfleet.providers import parse_spec
from metalfleet.providers.models import node_spec_to_dict
from metalfleet.stacks.bootstrap import NodeBootstrap
from metalfleet.stacks.network import ClusterNetwork
from metalfleet.stacks.node import GpuNode

BAD = {
    "name": "bad-p5", "provider": "aws", "region": "us-east-1", "zone": "us-east-1a", "offering": "p5.48xlarge",
    "count": 1, "image": "ami-0123456789abcdef0",
    "network": {"subnet_id": "subnet-0123456789abcdef0", "public_ip": True, "ssh_ingress_cidrs": ["0.0.0.0/0"]},
    "storage": {"root": {"size_gib": 200, "encrypted": False}, "cold": {"kind": "s3", "bucket": "training-data"}},
    "tags": {"team": "ml"},
    "ssh": {"key_pair": "ops", "pin_on_first_contact": True},
}

spec = parse_spec(BAD)
node_spec = node_spec_to_dict(spec.node_spec(0, "p5.48xlarge"))
ClusterNetwork("bad-p5-network", "aws", node_spec, {"region": "us-east-1"})
node = GpuNode("bad-p5-0", "aws", node_spec, {"region": "us-east-1"})
NodeBootstrap("bad-p5-0-bootstrap", spec, {"id": "i-0", "name": "bad-p5-0", "private_ip": "10.0.0.10",
                                           "offering": "p5.48xlarge", "provider": "aws", "region": "us-east-1"})

# a provider whose driver cannot show a rule is met (Huawei: BMS does not tag the volumes it creates): unknown
hw = parse_spec({**BAD, "name": "bad-hw", "provider": "huawei", "region": "cn-north-4", "zone": None,
                 "offering": "physical.kat2e.48xlarge.8.313t", "network": {"subnet_id": "subnet-1"},
                 "storage": {"root": {"size_gib": 200}}, "tags": {"owner": "ml", "cost-center": "42"},
                 "capacity": {"billing": "monthly"}})
GpuNode("bad-hw-0", "huawei", node_spec_to_dict(hw.node_spec(0, "physical.kat2e.48xlarge.8.313t")), {})
