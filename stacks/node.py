"""A Pulumi dynamic resource per GPU node, backed by a metalfleet compute driver.

The provider object is pickled into state, so it holds only plain data: no SDK client, no
credentials. Each method builds the driver (and so the SDK client) itself; credentials come from
the environment or the provider's own config chain, never from resource inputs. Secret settings
(``secrets``, see :mod:`metalfleet.stacks.secrets`) are put back into the spec and driver config in
memory only; outputs and errors never carry them in plaintext.

A node of another generation (``spec.generation``, raised when :class:`~metalfleet.stacks.cluster.GpuCluster`
replaces a quarantined node) is a replacement: the old node is released first, then the new one ordered
with the next idempotency key. A lower generation than the one stored never replaces a node: generations
only go forward.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

from metalfleet.providers import get_driver
from metalfleet.providers.contract import TaggingDriver, capability
from metalfleet.providers.errors import NotFoundError
from metalfleet.providers.fleet import order_node
from metalfleet.providers.lifecycle import GENERATION_TAG
from metalfleet.providers.models import NodeState, node_spec_from_dict
from metalfleet.providers.retry import DEFAULT_POLICY

from .dynamic import MODULE, resource_options, unsubscribe
from .secrets import SECRETS, guarded, reveal, scrub_outputs

__all__ = ["REPLACE_ON", "GpuNode", "NodeProvider"]

#: Inputs whose change means a different machine: the node is replaced, never edited in place.
REPLACE_ON = ("provider", "driver_config", "spec.offering", "spec.zone", "spec.image", "spec.region",
              "spec.subnet_id", "spec.placement_group", "spec.capacity_reservation_id", "spec.root_volume",
              "spec.data_volumes", "spec.public_ip", "spec.security_group_ids", "spec.billing")


def _get(props: dict[str, Any], dotted: str) -> Any:
    cur: Any = props
    for part in dotted.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _generation(props: dict[str, Any]) -> int:
    return int(_get(props, "spec.generation") or 0)


def _tags(props: dict[str, Any]) -> dict[str, Any]:
    """The node's tags, but its generation (compared as ``spec.generation``)."""
    return {k: v for k, v in (_get(props, "spec.tags") or {}).items() if k != GENERATION_TAG}


def _outs(props: dict[str, Any], node_dict: dict[str, Any]) -> dict[str, Any]:
    """Outputs from the stored (unrevealed) props and what the cloud reported, secret values scrubbed."""
    return scrub_outputs({
        "provider": props["provider"],
        "driver_config": props.get("driver_config") or {},
        "spec": props["spec"],
        "node_id": node_dict["id"],
        "state": node_dict["state"],
        "private_ip": node_dict.get("private_ip") or "",
        "public_ip": node_dict.get("public_ip") or "",
        "zone": node_dict.get("zone") or "",
        "offering": node_dict["offering"],
        "generation": node_dict.get("extra", {}).get("generation", props["spec"].get("generation", 0)),
        "tags": node_dict.get("tags") or {},
        "node_name": node_dict.get("name") or "",
        # Host keys the driver read from the provider (e.g. console output), pinned by bootstrap.
        "host_keys": list((node_dict.get("extra") or {}).get("host_keys") or []),
        SECRETS: props.get(SECRETS) or [],
    }, props)


class NodeProvider(ResourceProvider):
    """Create orders (idempotently), read observes, delete releases and waits."""

    def _driver(self, full: dict[str, Any]) -> Any:
        return get_driver(full["provider"], **(full.get("driver_config") or {}))

    def create(self, props: dict[str, Any]) -> CreateResult:
        with guarded(props):
            full = reveal(props)
            driver = self._driver(full)
            spec = node_spec_from_dict(full["spec"])
            node = order_node(driver, spec)
            node = DEFAULT_POLICY.call(driver.wait, [node.id], NodeState.RUNNING)[0]
            return CreateResult(id_=node.id, outs=_outs(props, node.to_dict()))

    def diff(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        # Compared with secrets put back, so a changed secret setting counts like a changed plain one.
        old, new = reveal(olds), reveal(news)
        replaces = [k for k in REPLACE_ON if _get(old, k) != _get(new, k)]
        if _generation(new) > _generation(old):
            replaces.append("spec.generation")
        changes = bool(replaces) or _tags(old) != _tags(new) or (
            bool(_get(old, "spec.release_subscriptions")) != bool(_get(new, "spec.release_subscriptions")))
        return DiffResult(changes=changes, replaces=replaces, delete_before_replace=True)

    def update(self, id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        # Only tags and release_subscriptions reach here (everything else replaces). Drivers that can retag do;
        # the new spec is recorded either way, so the next diff is clean and a later delete sees the opt-in.
        with guarded(news):
            full = reveal(news)
            driver = self._driver(full)
            tagging = capability(driver, TaggingDriver)
            if tagging is not None:
                DEFAULT_POLICY.call(tagging.set_tags, id, dict(_get(full, "spec.tags") or {}))
            node = DEFAULT_POLICY.call(driver.get, id)
            return UpdateResult(outs=_outs(news, node.to_dict()))

    def read(self, id: str, props: dict[str, Any]) -> ReadResult:
        with guarded(props):
            driver = self._driver(reveal(props))
            try:
                node = DEFAULT_POLICY.call(driver.get, id)
            except NotFoundError:
                return ReadResult(id_="", outs={})
            if node.state.is_gone:
                # Terminated behind Pulumi's back: report it gone so `refresh` drops it and the next
                # `up` orders a replacement.
                return ReadResult(id_="", outs={})
            outs = _outs(props, node.to_dict())
            # A plain get() does not re-read the console: keep the host keys pinned at create time.
            outs["host_keys"] = outs["host_keys"] or list(props.get("host_keys") or [])
            return ReadResult(id_=id, outs=outs)

    def delete(self, id: str, props: dict[str, Any]) -> None:
        with guarded(props):
            driver = self._driver(reveal(props))
            try:
                DEFAULT_POLICY.call(driver.release, id, wait=True,
                                    unsubscribe=unsubscribe(_get(props, "spec.release_subscriptions")))
            except NotFoundError:
                pulumi.log.info(f"node {id} was already gone")


class GpuNode(Resource, module=MODULE, name="GpuNode"):
    """One GPU node. Outputs: node_id, private_ip, public_ip, zone, state, offering.

    ``spec`` and ``driver_config`` are stored in plain state; secret values go in ``secrets`` (an Output
    from :func:`metalfleet.stacks.secrets.secret_input`), stored encrypted."""

    node_id: pulumi.Output[str]
    private_ip: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    zone: pulumi.Output[str]
    state: pulumi.Output[str]
    offering: pulumi.Output[str]
    node_name: pulumi.Output[str]
    tags: pulumi.Output[dict[str, str]]
    host_keys: pulumi.Output[list[str]]

    def __init__(self, name: str, provider: str, spec: dict[str, Any], driver_config: dict[str, Any] | None = None,
                 opts: pulumi.ResourceOptions | None = None, *, secrets: pulumi.Input[Any] | None = None) -> None:
        props = {"provider": provider, "spec": spec, "driver_config": driver_config or {},
                 SECRETS: pulumi.Output.secret(secrets if secrets is not None else []),
                 "node_id": None, "private_ip": None, "public_ip": None, "zone": None, "state": None,
                 "offering": None, "generation": None, "tags": None, "node_name": None, "host_keys": None}
        super().__init__(NodeProvider(), name, props, resource_options(opts, delete_before_replace=True))

