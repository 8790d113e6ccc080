"""Hosts to bootstrap: from an inventory YAML file, or from a ClusterSpec plus the provider's nodes.

An inventory file::

    defaults:               # applied to every host unless the host says otherwise
      user: ubuntu
      key: ~/.ssh/id_ed25519
      provider: aws
      offering: p5.48xlarge
      bastion: ec2-user@bastion.example.com
    hosts:
      - name: node-0
        address: 10.0.1.10
        labels: {rack: r1}
      - name: node-1
        address: 10.0.1.11
        port: 2222
        fabric: efa           # traits can be given directly for offerings metalfleet does not know
        gpu_count: 8
    known_hosts: ~/.ssh/known_hosts
    pin_on_first_contact: false

``hosts`` may also be a mapping of name -> fields. Unknown keys are errors naming the field.

A host's hardware traits come from metalfleet's offering catalogue (:mod:`metalfleet.providers.catalog`)
for its ``provider`` and ``offering``, and traits given in the file win over them. Parsing a file never
calls a provider: an offering the catalogue does not know, with no traits given, is an error naming the
field (``hosts.1.offering``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from metalfleet.providers.catalog import CatalogOffering, load_catalog
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import Fabric, Interconnect, Node, Offering
from metalfleet.providers.spec import ClusterSpec, load_yaml, parse_spec, validation_error
from metalfleet.providers.tags import node_index

from .connector import Endpoint, SshOptions

__all__ = ["Host", "Inventory", "NodeTraits", "hosts_from_spec", "load_inventory", "load_target", "parse_inventory",
           "traits_for"]

#: The catalogue's Vendor, spelled again: mypy reads metalfleet.providers as Any from a source checkout (it
#: does not follow setuptools' editable mapping), and the steps compare vendors as str. A test keeps them equal.
Vendor = Literal["nvidia", "ascend", "none"]


@dataclass(frozen=True)
class NodeTraits:
    """What the steps need to know about a node's hardware to pick their defaults."""

    vendor: Vendor = "nvidia"
    gpu_model: str = ""
    gpu_count: int = 0
    interconnect: Interconnect = Interconnect.PCIE
    fabric: Fabric = Fabric.NONE
    fabric_cards: int = 0
    nvme_count: int = 0

    @property
    def nvswitch(self) -> bool:
        return bool(self.interconnect == Interconnect.NVSWITCH)

    @classmethod
    def from_offering(cls, o: Offering) -> NodeTraits:
        model = o.gpu_model.lower()
        vendor: Vendor = "ascend" if ("910" in model or "ascend" in model or o.interconnect == Interconnect.HCCS) \
            else ("none" if o.gpu_count == 0 else "nvidia")
        return cls(vendor=vendor, gpu_model=o.gpu_model, gpu_count=o.gpu_count, interconnect=o.interconnect,
                   fabric=o.fabric, fabric_cards=o.fabric_cards, nvme_count=o.nvme_count)

    @classmethod
    def from_catalog(cls, e: CatalogOffering) -> NodeTraits:
        # an unknown count (None: no provider page gives it) is none to set up; the host's facts still say
        return cls(vendor=e.vendor, gpu_model=e.gpu_model, gpu_count=e.gpu_count, interconnect=e.interconnect,
                   fabric=e.fabric, fabric_cards=e.fabric_cards or 0, nvme_count=e.nvme_count or 0)


def traits_for(provider: str | None, offering: str | None) -> NodeTraits | None:
    """Traits of a named offering from the offering catalogue; None when it is not there (no provider call)."""
    entry = load_catalog().get(provider, offering) if provider and offering else None
    return NodeTraits.from_catalog(entry) if entry else None


@dataclass(frozen=True)
class Host:
    """One node to bootstrap."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    bastion: str | None = None
    provider: str | None = None
    offering: str | None = None
    traits: NodeTraits = field(default_factory=NodeTraits)
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Position in the cluster (0-based); steps use it for per-node addresses (HCCN).
    index: int | None = None
    #: Public keys the provider reported for this host (console output): trusted and recorded.
    host_keys: tuple[str, ...] = ()
    #: Where the node's filesystem is rooted. "/" on real nodes; the test harness points it at a
    #: per-host sandbox, and an image build could point it at a chroot.
    fs_root: str = "/"

    def path(self, p: str) -> str:
        """``p`` (absolute, as seen on the node) under :attr:`fs_root`."""
        if self.fs_root in ("", "/"):
            return p
        return posixpath.join(self.fs_root, p.lstrip("/"))

    def endpoint(self) -> Endpoint:
        return Endpoint(address=self.address, port=self.port, user=self.user, key_path=self.key,
                        bastion=self.bastion, name=self.name)

    def with_traits(self, **kw: Any) -> Host:
        return replace(self, traits=replace(self.traits, **kw))


@dataclass(frozen=True)
class Inventory:
    hosts: tuple[Host, ...]
    ssh: SshOptions = field(default_factory=SshOptions)

    def __iter__(self) -> Any:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)


# --------------------------------------------------------------------------------------------
# Inventory file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _HostFields(_Strict):
    address: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    user: str | None = None
    key: str | None = None
    bastion: str | None = None
    provider: str | None = None
    offering: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    index: int | None = Field(None, ge=0)
    host_keys: list[str] = Field(default_factory=list)
    fs_root: str | None = None
    vendor: Vendor | None = None
    gpu_model: str | None = None
    gpu_count: int | None = Field(None, ge=0)
    interconnect: Interconnect | None = None
    fabric: Fabric | None = None
    fabric_cards: int | None = Field(None, ge=0)
    nvme_count: int | None = Field(None, ge=0)


class _HostEntry(_HostFields):
    name: str | None = None


class _InventoryFile(_Strict):
    defaults: _HostFields = _HostFields()
    hosts: list[_HostEntry] | dict[str, _HostFields]
    known_hosts: str | None = None
    pin_on_first_contact: bool = False


_TRAIT_FIELDS = ("vendor", "gpu_model", "gpu_count", "interconnect", "fabric", "fabric_cards", "nvme_count")


def _build_host(name: str, entry: _HostFields, defaults: _HostFields, where: str) -> Host:
    def pick(attr: str) -> Any:
        v = getattr(entry, attr)
        return v if v is not None else getattr(defaults, attr)

    address = pick("address") or name
    provider, offering = pick("provider"), pick("offering")
    traits = traits_for(provider, offering)
    explicit = {a: pick(a) for a in _TRAIT_FIELDS if pick(a) is not None}
    if traits is None and offering and not explicit:
        raise InvalidSpecError(f"{where}: offering {offering!r} of provider {provider!r} is not in metalfleet's "
                               f"offering catalogue; give its traits ({', '.join(_TRAIT_FIELDS)})",
                               field=f"{where}.offering", value=offering)
    traits = replace(traits or NodeTraits(), **explicit)
    return Host(name=name, address=address, port=pick("port") or 22, user=pick("user") or "root",
                key=pick("key"), bastion=pick("bastion"), provider=provider, offering=offering, traits=traits,
                labels={**defaults.labels, **entry.labels}, index=entry.index,
                host_keys=tuple(entry.host_keys or defaults.host_keys), fs_root=pick("fs_root") or "/")


def parse_inventory(data: Any, source: str = "<inventory>") -> Inventory:
    if not isinstance(data, dict):
        raise InvalidSpecError(f"inventory {source}: top level must be a mapping", field="(top level)", value=data)
    try:
        doc = _InventoryFile.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, f"invalid inventory {source}") from None
    hosts: list[Host] = []
    if isinstance(doc.hosts, dict):
        for i, (name, entry) in enumerate(doc.hosts.items()):
            h = _build_host(name, entry, doc.defaults, f"hosts.{name}")
            hosts.append(h if h.index is not None else replace(h, index=i))
    else:
        for i, e in enumerate(doc.hosts):
            entry_name = e.name or e.address
            if not entry_name:
                raise InvalidSpecError(f"inventory {source}: hosts.{i} needs a name or an address",
                                       field=f"hosts.{i}", value=None)
            h = _build_host(entry_name, e, doc.defaults, f"hosts.{i}")
            hosts.append(h if h.index is not None else replace(h, index=i))
    names = [h.name for h in hosts]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidSpecError(f"inventory {source}: duplicate host names {dupes}", field="hosts", value=dupes)
    pinned = {h.name: list(h.host_keys) for h in hosts if h.host_keys}
    return Inventory(tuple(hosts), SshOptions(known_hosts=doc.known_hosts, pinned_keys=pinned,
                                              trust_on_first_use=doc.pin_on_first_contact))


def load_target(path: str | Path) -> Inventory | ClusterSpec:
    """An inventory (``hosts:``) or a cluster spec (``provider:``) from one YAML file, read once."""
    doc = load_yaml(path, "inventory or cluster spec")
    if isinstance(doc, dict) and "hosts" in doc:
        return parse_inventory(doc, str(path))
    if isinstance(doc, dict) and "provider" in doc:
        return parse_spec(doc, str(path))
    top = "a mapping without hosts: or provider:" if isinstance(doc, dict) else f"a {type(doc).__name__}, not a mapping"
    raise InvalidSpecError(f"{path} is neither an inventory (hosts:) nor a cluster spec (provider:, count:); "
                           f"its top level is {top}", field="(top level)", value=str(path))


def load_inventory(path: str | Path) -> Inventory:
    """Load an inventory YAML file (see the module docstring for its shape)."""
    return parse_inventory(load_yaml(path, "inventory"), str(path))


# --------------------------------------------------------------------------------------------
# From a cluster spec


def hosts_from_spec(spec: ClusterSpec, nodes: Sequence[Node], offering: Offering | None = None) -> Inventory:
    """Hosts for the provider's ``nodes`` of ``spec``: private IPs, the spec's SSH settings.

    A node's ``extra["host_keys"]`` (key lines the driver read from the console output) become
    pinned keys. A host is named as its node (its id when it has no name); two nodes of one name are
    told apart by their ids (``name@id``). ``offering`` (the driver's, as
    :func:`~metalfleet.providers.fleet.resolve_offering` returns it) supplies the hardware traits; without
    it they come from the offering catalogue, and an offering the catalogue does not know is an error
    naming it (no provider is asked).
    """
    if offering is not None:
        traits: NodeTraits | None = NodeTraits.from_offering(offering)
    else:
        name = spec.offering or next((n.offering for n in nodes if n.offering), None)
        traits = traits_for(spec.provider, name)
        if traits is None and name:
            raise InvalidSpecError(f"offering {name!r} of provider {spec.provider!r} is not in metalfleet's offering "
                                   "catalogue: pass the driver's Offering (hosts_from_spec(spec, nodes, offering))",
                                   field="offering", value=name)
    hosts: list[Host] = []
    pinned: dict[str, list[str]] = {}
    names = [node.name or node.id for node in nodes]
    for pos, node in enumerate(nodes):
        if not node.private_ip:
            raise InvalidSpecError(f"node {node.id} has no private IP yet", field="nodes", value=node.id)
        index = node_index(node.tags, pos)
        keys = tuple(node.extra.get("host_keys", ()) or ())
        # two nodes of one name (a duplicate buy) stay two hosts, with their own logs and reports
        name = names[pos] if names.count(names[pos]) == 1 or names[pos] == node.id else f"{names[pos]}@{node.id}"
        h = Host(name=name, address=node.private_ip, port=spec.ssh.port, user=spec.ssh.user,
                 key=spec.ssh.private_key, bastion=spec.ssh.bastion, provider=node.provider,
                 offering=node.offering, traits=traits or NodeTraits(), labels=dict(node.tags), index=index,
                 host_keys=keys)
        hosts.append(h)
        if keys:
            pinned[h.address] = list(keys)
    hosts.sort(key=lambda h: (h.index if h.index is not None else 0, h.name))
    return Inventory(tuple(hosts), SshOptions(known_hosts=spec.ssh.known_hosts, pinned_keys=pinned,
                                              trust_on_first_use=spec.ssh.pin_on_first_contact))
