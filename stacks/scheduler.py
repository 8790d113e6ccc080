"""A Pulumi dynamic resource for the cluster's Slurm partition: accepted nodes in, refused nodes drained.

It runs after the acceptance gate and takes the gate's verdicts (its ``gate_nodes`` output), so one ``pulumi up``
goes from nothing to a partition jobs can be submitted to (:func:`metalfleet.bootstrap.scheduler.join_slurm`:
the nodes' facts, the configs, munge/slurmd/slurmctld, the gate's drains). A later ``up`` whose gate quarantines a
node drains it with the gate's reason; its successor joins in its place. On delete (``pulumi destroy``, or the
scheduler section removed) the nodes are taken out of service before the engine releases their machines: the
partition depends on the nodes, so the engine deletes it first.

The munge key is a reference in the spec (``scheduler.*.munge_key``): ``env:``/``file:`` are read where the engine
runs the provider; ``config:NAME`` is the stack's secret config value, read by the program and passed in as a
secret. Without one (controller mode), the key is made once here and kept, encrypted, in this resource's state.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult

from metalfleet.providers import ClusterSpec, get_driver, parse_spec
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

from .dynamic import MODULE, resource_options
from .hooks import ClusterContext, HookResult
from .inputs import node_from_input, node_input, node_key, spec_fingerprint
from .secrets import SECRETS, guarded, private_key_file, reveal, scrub_outputs

__all__ = ["SlurmPartition", "SlurmPartitionProvider", "scheduler_hook"]

#: The secret input/output holding the munge key (base64): stored encrypted.
KEY = "munge_key_b64"


def resolve_munge_key(spec: ClusterSpec, given: str | None, kept: str | None) -> str:
    """The key (base64): the spec's env:/file: reference, else the one the program passed (config:), else the one
    this resource made before, else a new one (controller mode only)."""
    sched = spec.scheduler
    assert sched is not None
    source = sched.munge_key_source()
    if source is not None and source[0] in ("env", "file"):
        problem = sched.munge_key_problem()
        if problem:
            raise InvalidSpecError(problem, field="scheduler.munge_key", value=f"{source[0]}:{source[1]}")
        scheme, name = source
        raw = os.environ[name].encode() if scheme == "env" else Path(os.path.expanduser(name)).read_bytes()
        return _as_key(raw)
    if source is not None:  # config:NAME, read by the program
        if not given:
            raise InvalidSpecError(f"scheduler munge_key config:{source[1]}: the stack has no such secret config "
                                   f"value; set it with `pulumi config set --secret {source[1]} <base64 key>`",
                                   field="scheduler.munge_key", value=f"config:{source[1]}")
        return _as_key(given.encode())
    if kept:
        return kept
    return base64.b64encode(os.urandom(1024)).decode()


def _as_key(raw: bytes) -> str:
    """A key given as base64 text stays as it is; raw key bytes are encoded."""
    text = raw.strip()
    try:
        if len(base64.b64decode(text, validate=True)) >= 32:
            return text.decode()
    except ValueError:
        pass
    return base64.b64encode(raw).decode()


class SlurmPartitionProvider(ResourceProvider):
    def _run(self, props: dict[str, Any], kept: str | None) -> dict[str, Any]:
        with guarded(props):
            full = reveal(props)
            with private_key_file(full["spec"]) as spec_dict:
                outs = self._join(props, {**full, "spec": spec_dict}, kept)
                key = outs.pop(KEY)
                return {**scrub_outputs(outs, props), KEY: key}  # KEY: a secret output, stored encrypted

    def _setup(self, spec: ClusterSpec, full: dict[str, Any], key: str | None) -> tuple[Any, Any]:
        """The nodes' inventory and the partition's set-up (a controller to stand up, or the one ``scheduler.join``
        names); ``key`` None where no key is needed (taking the nodes out of service on delete)."""
        from metalfleet.bootstrap.inventory import Host, hosts_from_spec
        from metalfleet.bootstrap.scheduler import SlurmSetup
        from metalfleet.providers.fleet import resolve_offering
        from metalfleet.providers.lifecycle import node_index

        sched = spec.scheduler
        assert sched is not None
        driver = get_driver(spec.provider, **{"region": spec.region, **(full.get("driver_config") or {})})
        nodes = sorted((node_from_input(n) for n in full["nodes"]), key=lambda n: node_index(n, 0))
        inv = hosts_from_spec(spec, nodes, resolve_offering(driver, spec))
        features = tuple(sched.features)
        munge = base64.b64decode(key) if key else b""
        endpoint = sched.join_endpoint()
        if endpoint is not None:  # a controller that exists: the nodes join it as dynamic nodes
            host, port = endpoint
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            return inv, SlurmSetup(cluster=spec.name, partition=sched.partition_name(spec.name), controller=None,
                                   munge_key=munge, features=features, join=address)
        controller: Host
        idx = sched.controller_node_index()
        if idx is not None:
            by_index = {node_index(n, -1): h for n, h in zip(nodes, inv.hosts, strict=True)}
            if idx not in by_index:
                raise InvalidSpecError(f"scheduler.controller.node {idx}: the cluster has no running node of that "
                                       "index", field="scheduler.controller.node", value=idx)
            controller = by_index[idx]
        else:
            ctl_host = sched.controller.host if sched.controller else None
            assert ctl_host
            controller = Host(name=ctl_host.split(".")[0], address=ctl_host, port=spec.ssh.port, user=spec.ssh.user,
                              key=spec.ssh.private_key, bastion=spec.ssh.bastion)
        base = sched.node_port_base
        ports = {h.name: base + i for i, h in enumerate(inv.hosts)} if base else {}
        setup = SlurmSetup(cluster=spec.name, partition=sched.partition_name(spec.name), controller=controller,
                           munge_key=munge, settings=dict(sched.settings), features=features, ports=ports,
                           health_interval=sched.health_check.interval_s
                           if sched.health_check and sched.health_check.enabled else None)
        return inv, setup

    def _join(self, props: dict[str, Any], full: dict[str, Any], kept: str | None) -> dict[str, Any]:
        from metalfleet.bootstrap.scheduler import join_slurm
        from metalfleet.bootstrap.slurm import GateNode

        spec = parse_spec(full["spec"], "scheduler resource input")
        key = resolve_munge_key(spec, (full.get("munge") or {}).get("key"), kept)
        inv, setup = self._setup(spec, full, key)
        gates = [GateNode.from_dict(g) for g in full.get("gate_nodes") or []]
        outcome = join_slurm(inv, gates, setup)
        if not outcome.ok:
            raise MetalfleetError(f"cluster {spec.name}: the Slurm partition was not made:\n{outcome.summary()}")
        return {**props, "partition": setup.partition,
                "controller": setup.join or setup.controller_host().address,
                "nodes_in": [n.name for n in outcome.nodes], "summary": outcome.summary(), KEY: key}

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=f"slurm-{props['spec']['name']}", outs=self._run(props, None))

    def diff(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        def key(p: dict[str, Any]) -> Any:
            nodes = p.get("nodes")
            return (p.get("fingerprint"), [node_key(n) for n in nodes] if isinstance(nodes, list) else None,
                    p.get("gate_nodes"))

        return DiffResult(changes=key(olds) != key(news), replaces=[], delete_before_replace=False)

    def update(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        outs = self._run(news, olds.get(KEY))
        now = set(outs.get("nodes_in") or [])
        gone = [n for n in olds.get("nodes_in") or [] if n not in now]
        if gone and ((news.get("spec") or {}).get("scheduler") or {}).get("join"):
            # a replaced node's predecessor (or a smaller cluster): the site's controller would keep it for good;
            # its machine still runs here (the engine deletes a replaced node after its dependents are updated)
            self._take_out(olds, gone, f"could not delete {', '.join(gone)} from the controller they joined")
        return UpdateResult(outs=outs)

    def delete(self, id: str, props: dict[str, Any]) -> None:
        # the machines go anyway: a failure is said, it does not block the destroy
        self._take_out(props, list(props.get("nodes_in") or []), "could not take the nodes out of service first")

    def _take_out(self, props: dict[str, Any], names: list[str], failed: str) -> None:
        """``names`` out of Slurm as the resource's recorded state describes it: joined nodes stopped and deleted
        from the site's controller (through a node that stays when a leaving machine is gone), a partition of
        metalfleet's own drained and downed. A failure is a warning starting "slurm: ``failed``"."""
        from metalfleet.bootstrap.scheduler import leave_joined, leave_slurm

        with guarded(props):
            full = reveal(props)
            with private_key_file(full["spec"]) as spec_dict:
                spec = parse_spec(spec_dict, "scheduler resource state", check_references=False)
                try:
                    inv, setup = self._setup(spec, {**full, "spec": spec_dict}, None)
                    if setup.join is not None:
                        by_name = {h.name: h for h in inv.hosts}
                        leave_joined({n: by_name[n] for n in names if n in by_name},
                                     via=[h for n, h in by_name.items() if n not in names], ssh=inv.ssh)
                    else:
                        leave_slurm(setup.controller_host(), names, ssh=inv.ssh)
                except MetalfleetError as exc:
                    pulumi.log.warn(f"slurm: {failed}: {exc.message}")


class SlurmPartition(Resource, module=MODULE, name="SlurmPartition"):
    """The cluster's Slurm partition. Outputs: partition, controller (address), nodes_in, summary."""

    partition: pulumi.Output[str]
    controller: pulumi.Output[str]
    nodes_in: pulumi.Output[list[str]]
    summary: pulumi.Output[str]

    def __init__(self, name: str, spec: dict[str, Any], nodes: Sequence[dict[str, Any]],
                 gate_nodes: pulumi.Input[list[dict[str, Any]]], driver_config: dict[str, Any] | None = None,
                 opts: pulumi.ResourceOptions | None = None, *, secrets: pulumi.Input[Any] | None = None) -> None:
        props = {"spec": spec, "nodes": list(nodes), "gate_nodes": gate_nodes, "driver_config": driver_config or {},
                 SECRETS: pulumi.Output.secret(secrets if secrets is not None else []),
                 "fingerprint": spec_fingerprint(spec, "scheduler", "ssh"), KEY: None,
                 "partition": None, "controller": None, "nodes_in": None, "summary": None}
        super().__init__(SlurmPartitionProvider(), name, props, resource_options(
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=[KEY]))))


def scheduler_hook(ctx: ClusterContext) -> HookResult:
    """``GpuCluster`` seam: the partition after the acceptance gate (its verdicts are what the nodes join with)."""
    spec = ctx.spec
    gate = next((r for r in ctx.added if type(r).__name__ == "ClusterAcceptance"), None)
    if gate is None:
        raise InvalidSpecError("scheduler: the nodes join Slurm only once the acceptance gate has passed them; "
                               "acceptance.enabled must be true", field="acceptance.enabled", value=False)
    plain, secrets = ctx.spec_inputs(True)
    sched = spec.scheduler
    assert sched is not None
    source = sched.munge_key_source()
    if source is not None and source[0] == "config":  # the stack's secret config value, under secrets["munge"]
        ns, _, name = source[1].rpartition(":")
        secret_key = pulumi.Config(ns or None).require_secret(name)
        secrets = pulumi.Output.secret(pulumi.Output.all(secrets, secret_key).apply(
            lambda v: [*(v[0] or []), ["munge", ["key"], v[1]]]))
    part = SlurmPartition(f"{ctx.name}-slurm", plain, [node_input(n, spec.provider, spec.region) for n in ctx.nodes],
                          gate.gate_nodes, dict(ctx.driver_config),  # type: ignore[attr-defined]
                          opts=pulumi.ResourceOptions(parent=ctx.parent, depends_on=[*ctx.nodes, *ctx.added]),
                          secrets=secrets)
    return HookResult(resources=(part,), scheduler=part.summary)
