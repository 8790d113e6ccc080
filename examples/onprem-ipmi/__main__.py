"""`pulumi up` here claims hosts from the pool in pool.yaml, powers them on through their BMCs, bootstraps and
accepts the cluster described in cluster.yaml; `pulumi destroy` powers them off and returns them to the pool."""

from pathlib import Path

from metalfleet.stacks import run_from_yaml

HERE = Path(__file__).resolve().parent

# The pool inventory (hosts, BMCs, credential references) and the claim store beside it (pool.claims.json):
# which host each node holds. Teams sharing a pool point every stack at one inventory and one claim store.
run_from_yaml(HERE / "cluster.yaml", driver_config={"inventory": str(HERE / "pool.yaml")})
