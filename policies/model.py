"""The neutral resource view every rule reads, whatever the input was.

Adapters (``metalfleet.policies.adapters``) turn a cluster spec, a pool inventory, Pulumi resources or a
Terraform plan into these few kinds; rules never see provider attribute names. Two values need care:

- :data:`UNKNOWN`: the input does not tell (a value computed at apply time, a driver that does not say).
  It is a value of its own and has no truth value, so a rule cannot mistake it for ``False``: rules
  report it, and the engine fails a mandatory rule on it unless configured otherwise (never fail open).
- ``None`` on an attribute: the attribute does not apply to this resource (a bare-metal host in a
  colo has no instance metadata service), so rules about it skip the resource.

Where a value is a provider default rather than what the input says, the resource's ``notes`` say which
default and where it is documented, and findings about that attribute quote the note.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import date
from typing import Any, ClassVar, Final, Literal, TypeVar, Union

import msgspec

__all__ = [
    "UNKNOWN",
    "Address",
    "BmcEndpoint",
    "ComputeNode",
    "Location",
    "Maybe",
    "Reservation",
    "Resource",
    "SecurityRule",
    "Storage",
    "Unknown",
    "Volume",
    "is_known",
]


class Unknown(enum.Enum):
    """The type of :data:`UNKNOWN` (a one-member enum, so type checkers narrow ``x is UNKNOWN``). It has no truth
    value: compare with ``is UNKNOWN``."""

    UNKNOWN = "unknown"

    def __repr__(self) -> str:
        return "unknown"

    def __bool__(self) -> bool:
        raise TypeError("an unknown value has no truth value; test it with `is UNKNOWN`")


UNKNOWN: Final = Unknown.UNKNOWN

T = TypeVar("T")
#: A value, or UNKNOWN when the input cannot tell.
Maybe = Union[T, Unknown]  # noqa: UP007  (a generic alias: Maybe[bool])


def is_known(value: object) -> bool:
    return value is not UNKNOWN


class Location(msgspec.Struct, frozen=True, gc=False):
    """Where a resource or one of its values comes from.

    ``file`` with ``line``/``column`` (1-based) when the input has them (YAML specs and inventories, a
    Terraform plan whose .tf files lie beside it); ``address`` is the input's own name for the resource: a
    spec field path, a Terraform address (``module.gpu.aws_instance.node[0]``) or a Pulumi URN.
    """

    file: str | None = None
    line: int | None = None
    column: int | None = None
    address: str | None = None

    def at(self, line: int | None, column: int | None = None, address: str | None = None) -> Location:
        return Location(self.file, line if line is not None else self.line,
                        column if line is not None else self.column, address or self.address)

    def describe(self) -> str:
        where = self.file or ""
        if self.file and self.line:
            where += f":{self.line}" + (f":{self.column}" if self.column else "")
        if self.address and self.address != self.file:
            where = f"{where} ({self.address})" if where else self.address
        return where or "(input)"


Kind = Literal["compute", "volume", "security_rule", "address", "storage", "bmc", "reservation"]


class Resource(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What every resource view has.

    ``name``: how reports name it (spec name, Terraform address, Pulumi resource name); ``platform``:
    aws, alibaba, huawei, ipmi, fake or unknown; ``source``: spec, inventory, pulumi or terraform;
    ``type``: the input's own type name (``aws_instance``, ``aws:ec2/instance:Instance``, ``cluster spec``);
    ``locations``: per attribute, where the input sets it (findings about that attribute point there);
    ``notes``: per attribute, the provider default that applied because the input left it out.
    """

    kind: ClassVar[Kind]
    name: str
    platform: str
    source: str
    type: str
    location: Location = Location()
    locations: Mapping[str, Location] = msgspec.field(default_factory=dict)
    notes: Mapping[str, str] = msgspec.field(default_factory=dict)

    def where(self, attribute: str) -> Location:
        return self.locations.get(attribute, self.location)

    def note(self, attribute: str) -> str:
        text = self.notes.get(attribute)
        return f" ({text})" if text else ""


class ComputeNode(Resource, frozen=True, kw_only=True, gc=False):
    """A GPU node or group of identical nodes (a cluster spec's ``count``)."""

    kind: ClassVar[Kind] = "compute"
    instance_type: Maybe[str | None] = None
    #: Whether it carries accelerators; UNKNOWN when the type is not known or not recognised.
    gpu: Maybe[bool] = UNKNOWN
    count: int = 1
    #: Whether it gets a public address; None: not described by this input.
    public_ip: Maybe[bool] | None = None
    #: Whether the instance metadata service requires session tokens (IMDSv2); None: no such service.
    metadata_tokens_required: Maybe[bool] | None = None
    #: Tags (labels) on the node; None: this input does not carry the node's tags.
    tags: Maybe[Mapping[str, str]] | None = None
    #: Placement group / deployment set; "": none; None: not described by this input.
    placement_group: Maybe[str] | None = None
    #: Capacity reservation or block it runs in; None in the value: none.
    capacity_reservation: Maybe[str | None] | None = None
    #: Whether SSH verifies host keys (False: trust on first use or checking off); None: not described.
    ssh_host_key_verification: Maybe[bool] | None = None


class Volume(Resource, frozen=True, kw_only=True, gc=False):
    kind: ClassVar[Kind] = "volume"
    #: root, data, launch-template (a template's device) or standalone (a volume resource of its own).
    role: str = "standalone"
    encrypted: Maybe[bool] = UNKNOWN
    #: The key: None for the provider-managed default key, a string for a named (customer) key.
    kms_key: Maybe[str | None] = None
    #: True when ``kms_key`` names the provider's own managed key (AWS ``alias/aws/ebs``).
    provider_managed_key: bool = False
    tags: Maybe[Mapping[str, str]] | None = None
    attached_to: str | None = None


class SecurityRule(Resource, frozen=True, kw_only=True, gc=False):
    """One firewall rule (security group rule, an inline ingress block, or a spec's SSH CIDR)."""

    kind: ClassVar[Kind] = "security_rule"
    direction: Literal["ingress", "egress"] = "ingress"
    #: tcp, udp, icmp, all, ... ("all" also for AWS "-1").
    protocol: Maybe[str] = "all"
    port_from: Maybe[int] = 0
    port_to: Maybe[int] = 65535
    #: Source CIDRs; empty when the source is a group or prefix list.
    sources: Maybe[tuple[str, ...]] = ()
    action: Literal["allow", "deny"] = "allow"
    #: The SSH port of the nodes behind it (22 unless the spec says otherwise).
    ssh_port: int = 22
    #: The load balancers its group is attached to when it is attached to nothing else (no instance, template or
    #: node): world ingress there is a public endpoint's, so the rule about nodes' exposure does not judge it.
    load_balancer: str | None = None


class Address(Resource, frozen=True, kw_only=True, gc=False):
    """A public (elastic) address; ``attached_to`` the compute resource it is bound to, if any."""

    kind: ClassVar[Kind] = "address"
    attached_to: Maybe[str | None] = None


class Storage(Resource, frozen=True, kw_only=True, gc=False):
    """A bucket or a (parallel) file system a cluster uses."""

    kind: ClassVar[Kind] = "storage"
    storage_kind: str = "bucket"
    target: str = ""
    encrypted: Maybe[bool] = UNKNOWN


class BmcEndpoint(Resource, frozen=True, kw_only=True, gc=False):
    """A server's baseboard management controller as a pool inventory names it."""

    kind: ClassVar[Kind] = "bmc"
    host: str = ""
    address: Maybe[str] = UNKNOWN
    protocol: Maybe[str] = UNKNOWN
    #: IPMI: the RMCP+ (lanplus, IPMI 2.0) interface; False: IPMI 1.5 ``lan`` (no encryption).
    lanplus: Maybe[bool] | None = None
    cipher_suite: Maybe[int] | None = None
    #: Redfish: https, and whether the certificate is verified.
    tls: Maybe[bool] | None = None
    verify_tls: Maybe[bool] | None = None


class Reservation(Resource, frozen=True, kw_only=True, gc=False):
    """A capacity reservation or block, with the date it ends (None: open-ended)."""

    kind: ClassVar[Kind] = "reservation"
    ends: Maybe[date | None] = UNKNOWN


def describe_value(value: Any) -> str:
    if value is UNKNOWN:
        return "unknown"
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
