"""The same cluster from Python instead of YAML: build the spec in code, compose with other resources.

Run with `pulumi up` in this folder (Pulumi.yaml beside it), or import `declare` from your own program:

    pulumi config set image ami-0123456789abcdef0
    pulumi config set subnetId subnet-0123456789abcdef0
    pulumi config set keyPair my-key-pair
    pulumi config set --path 'sshIngressCidrs[0]' 10.0.0.0/16   # where `pulumi up` reaches the nodes from
    pulumi config set --secret privateKey ~/.ssh/my-key      # a path, or the key itself:
    #   pulumi config set --secret privateKey < ~/.ssh/my-key
    pulumi preview

The private key stays a secret Output from config to state: it is never unwrapped into the (plain)
spec but passed beside it as ``secret_spec``, and the resources store it encrypted.
"""

import pulumi

from metalfleet.providers import parse_spec
from metalfleet.stacks import GpuCluster


def declare() -> GpuCluster:
    cfg = pulumi.Config()
    spec = parse_spec({
        "name": cfg.get("name") or "train-h100",
        "provider": "aws",
        "region": cfg.get("region") or "us-east-1",
        "zone": cfg.get("zone") or "us-east-1a",
        "requirements": {"gpu": "H100", "min_gpus": 8, "fabric": "efa"},
        "count": cfg.get_int("count") or 2,
        "image": cfg.require("image"),
        "network": {"subnet_id": cfg.require("subnetId"),
                    "ssh_ingress_cidrs": cfg.get_object("sshIngressCidrs") or []},
        "ssh": {"user": cfg.get("sshUser") or "ubuntu", "key_pair": cfg.get("keyPair"),
                "known_hosts": cfg.get("knownHosts")},
        "storage": {"kms_key_id": cfg.get("kmsKeyId"), "root": {"size_gib": 500}},
        # owner and cost-center: required by metalfleet's policies (policies/RULES.md, MF-TAG-001)
        "tags": {"owner": cfg.get("owner") or "ml-infra@example.com", "team": "ml-infra", "cost-center": "research"},
    })
    secret_spec = {}
    private_key = cfg.get_secret("privateKey")  # a secret Output (None when unset: the SSH agent is used)
    if private_key is not None:
        secret_spec["ssh.private_key"] = private_key
    cluster = GpuCluster(spec.name, spec, secret_spec=secret_spec)
    pulumi.export("hostfile", cluster.hostfile)
    pulumi.export("node_ids", cluster.node_ids)
    return cluster


declare()
