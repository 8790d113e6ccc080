"""The driver contract: a small compute protocol, and one small protocol per optional capability.

Every driver implements :class:`ComputeDriver` and passes one shared contract test suite. Beyond it, a driver
implements what its platform has (only hosts behind a BMC have :class:`PowerDriver`); callers ask for a capability
one way, :func:`capability`, which checks the runtime-checkable protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar, cast, runtime_checkable

from .errors import SubscriptionError
from .models import Node, NodeSpec, NodeState, Offering

__all__ = ["ClusterResourcesDriver", "ComputeDriver", "HealthDriver", "HostKeysDriver", "OrderProgress",
           "PowerDriver", "PowerState", "Subscription", "SubscriptionDriver", "TaggingDriver", "capability",
           "refuse_release"]

#: Called by ``wait`` with the nodes as last seen, each poll. (Not bootstrap's ProgressCallback, which
#: takes one ProgressEvent.)
OrderProgress = Callable[[Sequence[Node]], None]


@runtime_checkable
class ComputeDriver(Protocol):
    """Order, observe and release nodes on one provider."""

    name: str

    def offerings(self) -> list[Offering]:
        """GPU node types this provider sells, with prices."""
        ...

    def validate(self, spec: NodeSpec) -> None:
        """Check ``spec`` offline; raise InvalidSpecError naming the field. Makes no API call."""
        ...

    def order(self, spec: NodeSpec) -> Node:
        """Order one node. Idempotent on ``spec.idempotency_key``: a repeat returns the same node."""
        ...

    def get(self, node_id: str) -> Node:
        """The node as the provider sees it now; NotFoundError if it never existed."""
        ...

    def list_nodes(self, cluster: str) -> list[Node]:
        """Every live (not terminated) node tagged with ``cluster``."""
        ...

    def wait(
        self,
        node_ids: Sequence[str],
        state: NodeState = NodeState.RUNNING,
        *,
        timeout: float = 1800.0,
        poll: float = 5.0,
        progress: OrderProgress | None = None,
    ) -> list[Node]:
        """Block until every node is in ``state``; OperationTimeout past ``timeout``."""
        ...

    def release(self, node_id: str, *, wait: bool = True, timeout: float = 1800.0, unsubscribe: bool = False) -> None:
        """Terminate the node; with ``wait``, return once it is gone. Releasing a gone node is a no-op.

        A node bought for a term (a :class:`Subscription`) is released only with ``unsubscribe`` (the provider's
        way of ending a subscription early: unsubscribe, or convert to pay-as-you-go and release); without it,
        :class:`~metalfleet.providers.errors.SubscriptionError` and nothing changes. Drivers without
        subscriptions take the flag and ignore it."""
        ...


@dataclass(frozen=True)
class Subscription:
    """A node bought for a term: what releasing it before its end means, as the provider's API says it.

    ``expires_at``: ISO 8601 (UTC), None when the API does not say. ``refund``: what unsubscribing refunds or
    costs ("refund 10,322.58 CNY"), or where the API only says it after the fact, how to learn it; None when
    unknown. ``how``: what ``release(..., unsubscribe=True)`` does on this provider."""

    node_id: str
    charge_type: str
    expires_at: str | None
    refund: str | None
    how: str
    name: str | None = None

    def line(self) -> str:
        who = f"{self.node_id} ({self.name})" if self.name else self.node_id
        ends = f"expires {self.expires_at}" if self.expires_at else "expiry not given by the API"
        money = f"; {self.refund}" if self.refund else ""
        return f"{who}: {self.charge_type}, {ends}{money}"


@runtime_checkable
class SubscriptionDriver(Protocol):
    """Optional capability of a provider that sells nodes for a term (Alibaba PrePaid, Huawei prePaid): which
    nodes are subscriptions, so a cluster release can refuse them all, naming each, before it releases any."""

    def subscriptions(self, node_ids: Sequence[str]) -> list[Subscription]:
        """The subscriptions among ``node_ids`` (pay-as-you-go nodes are left out); reads the provider."""
        ...


def refuse_release(provider: str, subs: Sequence[Subscription]) -> SubscriptionError:
    """The error of a refused release (for a driver, or a cluster release, to raise): every subscription node,
    its expiry and refund, what ending it does, and the two opt-ins."""
    how = "; ".join(sorted({s.how for s in subs}))
    return SubscriptionError(f"{len(subs)} {provider} node(s) are subscriptions, so nothing was released:\n"
            + "\n".join(f"  {s.line()}" for s in subs)
            + f"\nEnding them early: {how}. To do it, set capacity.release_subscriptions: true in the spec or run "
              "`metalfleet release --unsubscribe` (a Pulumi stack: `metalfleet destroy --unsubscribe`); otherwise "
              "let them run to their end.", subscriptions=subs, provider=provider, code="SubscriptionNotReleased")


@runtime_checkable
class TaggingDriver(Protocol):
    """Optional capability: add or overwrite tags on a node, keeping the others.

    Used to mark a node quarantined after a failed acceptance; drivers without it fall back to a
    quarantine file. NotFoundError for an unknown node.
    """

    def set_tags(self, node_id: str, tags: Mapping[str, str]) -> None: ...


@runtime_checkable
class ClusterResourcesDriver(Protocol):
    """Optional capability: resources a driver makes for a whole cluster, which its nodes share (AWS: the
    cluster's security group and placement group), and removes when the cluster is released.

    Resources are named ``<kind>:<id>``. Only what the driver itself made is listed or deleted, never a
    resource the spec names (a user's own security group or an existing placement group).
    """

    def prepare_cluster(self, spec: NodeSpec) -> list[str]:
        """Make (or find and update to ``spec``) the shared resources of ``spec.cluster``; idempotent.
        ``order`` does this too; a stack calls it first so the nodes depend on them."""
        ...

    def cluster_resources(self, cluster: str) -> list[str]:
        """The shared resources the driver made for ``cluster`` that still exist."""
        ...

    def release_cluster_resources(self, cluster: str) -> list[str]:
        """Delete them once ``cluster`` has no live node (while it has one, nothing: they are in use);
        returns what was deleted. Idempotent."""
        ...


@runtime_checkable
class HostKeysDriver(Protocol):
    """Optional capability: the node's SSH host keys as its platform reports them (a cloud's console output, a
    pool inventory), so bootstrap pins them; () while there are none (bootstrap then checks known_hosts)."""

    def host_keys(self, node_id: str) -> tuple[str, ...]: ...


class PowerState(StrEnum):
    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"


@runtime_checkable
class PowerDriver(Protocol):
    """Power control for hosts behind a BMC: act, then wait for the state."""

    def power_state(self, node_id: str) -> PowerState: ...

    def set_power(self, node_id: str, state: PowerState, *, wait: bool = True, timeout: float = 300.0) -> None:
        ...

    def set_boot_device(self, node_id: str, device: str) -> None: ...


@runtime_checkable
class HealthDriver(Protocol):
    """Optional capability: faults the hardware itself reports (a BMC's event log), which no check over SSH
    sees. The acceptance gate fails a node that has any, naming them."""

    def critical_events(self, node_id: str) -> list[str]:
        """The node's critical hardware faults now (e.g. "power supply failure detected"); [] when healthy."""
        ...


C = TypeVar("C")


def capability(driver: object, protocol: Callable[..., C]) -> C | None:
    """``driver`` as ``protocol`` (an optional capability: :class:`TaggingDriver`, :class:`HostKeysDriver`, ...)
    when it implements every method of it, else None: the one way callers test for an optional capability.

    (``protocol`` is typed as what makes a ``C``, not ``type[C]``: mypy takes no protocol class for the latter.)"""
    return cast(C, driver) if isinstance(driver, cast(type, protocol)) else None
