"""What the rest of metalfleet needs to know about a platform, in one record its package exports.

Each platform package exports one :class:`ProviderRecord` (``metalfleet.providers.aws.PROVIDER``) and registers it
in the ``metalfleet.providers`` entry-point group; the registry, the cluster spec, the catalogue and the price
refresh loop over the registered records, so a new platform (built in or a separate package) is its package and
one entry point. Standard library only, and a record imports no SDK: its driver, rules and price source are
``"module:attr"`` targets loaded on first use (or the objects themselves).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .models import BillingModel

if TYPE_CHECKING:
    from .spec import ClusterSpec

__all__ = ["ContractSetup", "DriverFacts", "Guarantee", "PriceFetch", "PriceSource", "Problem", "ProviderRecord",
           "TagRules", "Target", "load_target"]

#: ``"module:attr"`` (imported when first used) or the object itself.
Target = str | Callable[..., Any]
#: One way a spec breaks a rule: the dotted field (``tags.team``, ``placement.strategy``), the value, why.
Problem = tuple[str, Any, str]
#: region, offering names -> offering -> billing model -> hourly price in the source's currency.
PriceFetch = Callable[[str, Sequence[str]], Mapping[str, Mapping[BillingModel, float]]]


class TagRules(Protocol):
    """The user's tags checked as the platform would (``public_ip``: the nodes get an address the driver tags)."""

    def __call__(self, tags: Mapping[str, str], *, public_ip: bool) -> Sequence[Problem]: ...


@dataclass(frozen=True)
class PriceSource:
    """A provider's pricing API: its currency, what to call it in the catalogue, and a factory for the fetch
    (given the endpoint URL, or None for the provider's own)."""

    currency: str
    source: str
    make: Callable[[str | None], PriceFetch]


@dataclass(frozen=True)
class ContractSetup:
    """How the contract suite (tests/contract) runs against a provider, as its record's ``contract`` hook returns
    it for a test's folder and faults: the driver is ``get_driver(name, **settings)``; ``spec`` holds a cluster
    spec's fields besides name, provider and count (``region``, ``zone``, ``offering``, ``image``, ...). A driver
    with an ``api_calls()`` counter lets the suite check that a bad spec costs no call."""

    settings: Mapping[str, Any]
    spec: Mapping[str, Any]


@dataclass(frozen=True)
class Guarantee:
    """Something the driver always does that the spec does not say, with where it does it: a policy finding about
    a spec cites both (``absent: <meaning> [<source>]``)."""

    value: Any
    meaning: str
    source: str


@dataclass(frozen=True)
class DriverFacts:
    """What the policy rules may take for granted about a platform's nodes (metalfleet.policies reads it).

    ``metadata_tokens``: the nodes' metadata service requires session tokens (IMDSv2-style), value True; None: the
    nodes have no metadata service. ``volume_tags``: value ``"node"`` when the node's volumes carry its tags,
    ``"unknown"`` when the platform does not say; None: volumes are not resources of their own. ``own_network``:
    the nodes are the owner's hosts on the owner's network, so no public address or placement group is judged.
    A record without facts leaves all of this unknown to the rules, never assumed compliant."""

    metadata_tokens: Guarantee | None = None
    volume_tags: Guarantee | None = None
    own_network: bool = False


def load_target(target: Target) -> Any:
    """The object ``target`` names (``"module:attr"`` is imported now), or ``target`` itself."""
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class ProviderRecord:
    """Everything metalfleet needs about one platform besides its driver's own code.

    ``extra``: the ``metalfleet[...]`` extra the driver's SDK comes with (the install hint when it is missing).
    ``spec_rules``: the whole cluster spec's problems the platform would refuse (placement limits, ...), checked
    at parse time. ``tag_rules``: the user's tags' problems. ``billing``: the billing models sold (None: not
    checked); ``billing_refusal``: the platform's own reason for a model it does not sell, instead of the
    generic one. ``price_source``: a :class:`PriceSource` for ``catalogue refresh``. ``catalogue``: a catalogue
    JSON shipped as a package resource, ``"package:path"``, merged into the offering catalogue. ``contract``:
    the contract suite's hook, ``(tmp_dir, *, throttle, capacity, seed) -> ContractSetup``: a driver whose state
    lives under ``tmp_dir``, with those faults on (a ``throttle`` fraction of calls rate-limited, at most
    ``capacity`` live nodes). ``policy_facts``: what the policy rules may take for granted about its nodes
    (:class:`DriverFacts`; None: nothing, every such value is unknown). ``default_image``: the image a spec the
    planner writes uses when the requirements name none (None: the user must name one).
    """

    name: str
    driver: Target
    extra: str | None = None
    spec_rules: Target | None = None
    tag_rules: Target | None = None
    billing: tuple[BillingModel, ...] | None = None
    billing_refusal: Target | None = None
    price_source: Target | None = None
    catalogue: str | None = None
    contract: Target | None = None
    policy_facts: DriverFacts | None = None
    default_image: str | None = None

    def factory(self) -> Callable[..., Any]:
        """The driver's constructor (not called: no SDK is imported)."""
        return load_target(self.driver)  # type: ignore[no-any-return]

    def spec_problems(self, spec: ClusterSpec) -> list[Problem]:
        return list(load_target(self.spec_rules)(spec)) if self.spec_rules else []

    def tag_problems(self, tags: Mapping[str, str], *, public_ip: bool) -> list[Problem]:
        return list(load_target(self.tag_rules)(tags, public_ip=public_ip)) if self.tag_rules else []

    def billing_problem(self, billing: BillingModel) -> str | None:
        """Why the platform does not sell ``billing``, or None when it does (or sells anything)."""
        if self.billing is None or billing in self.billing:
            return None
        if self.billing_refusal:
            return load_target(self.billing_refusal)(billing)  # type: ignore[no-any-return]
        return (f"{self.name} does not sell {billing.value} nodes through metalfleet: capacity.billing must be one of "
                f"{', '.join(b.value for b in self.billing)}")
