"""`pulumi up` here orders, bootstraps and accepts the cluster described in cluster.yaml."""

from metalfleet.stacks import run_from_yaml

run_from_yaml("cluster.yaml")
