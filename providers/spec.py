"""The cluster spec users write in YAML, validated strictly.

Unknown keys are errors (a typo such as ``cuont: 4`` must not silently order the default), and every
error names the dotted field path and the bad value.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .checks import ACCEPTANCE_CHECKS
from .errors import InvalidSpecError
from .models import BillingModel, Fabric, NodeSpec, VolumeSpec
from .tags import TAG_CLUSTER, TAG_INDEX, TAG_NAME, TAG_PREFIX
from .textfile import BadFileError, read_text_file, shorten
from .validation import SSH_RULES_NEED_OWN_GROUP, cidr_problem, partition_problem
from .yamlfile import parse_yaml

__all__ = ["ACCEPTANCE_CHECKS", "SCHEDULER_KINDS", "SLURMCTLD_PORT", "ClusterSpec", "ControllerSpec", "Flag",
           "HealthCheckSpec", "Int", "JoinSpec", "Number", "SchedulerSpec", "billing_problem", "host_problem",
           "load_spec", "load_yaml", "parse_endpoint", "parse_spec", "validation_error"]

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$")


class _Strict(BaseModel):
    #: ``.inf`` and ``.nan`` are no threshold or baseline. Types are otherwise pydantic's lax ones (an enum from its
    #: string, a list from a tuple, 2.0 as 2: resource inputs come back from Pulumi with every number a float);
    #: :data:`Int`, :data:`Number` and :data:`Flag` refuse what lax mode would wrongly take.
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False, allow_inf_nan=False)


def _number_input(what: str) -> Any:
    def check(value: object) -> object:
        if isinstance(value, bool):  # pydantic would read true as 1
            raise ValueError(f"expected {what}, not a boolean")
        if isinstance(value, str | bytes):  # nor would '16' be 16: a quoted number is a typo, or a template's
            raise ValueError(f"expected {what}, not a string: write it without quotes")
        return value

    return check


def _flag_input(value: object) -> object:
    if not isinstance(value, bool):  # pydantic would read 'no', 'off', 0 and 1 as booleans
        raise ValueError("expected true or false")
    return value


#: Whole numbers, numbers and booleans as a user's file must give them: ``count: true`` and ``count: '16'`` are
#: refused (lax pydantic would take both), as is ``encrypted: 'no'``. Integral floats (2.0) still pass as ints.
Int = Annotated[int, BeforeValidator(_number_input("a whole number"))]
Number = Annotated[float, BeforeValidator(_number_input("a number"))]
Flag = Annotated[bool, BeforeValidator(_flag_input)]


class Requirements(_Strict):
    """Pick an offering by what it must have instead of by name."""

    gpu: str | None = Field(None, description="GPU model, e.g. H100, H200, A100, 910B")
    min_gpus: Int = Field(1, ge=1, le=64)
    min_gpu_memory_gib: Int = Field(0, ge=0)
    fabric: Fabric | None = None
    bare_metal: Flag | None = None


def _bad(at: str, value: object, message: str) -> PydanticCustomError:
    """A validation error that names a location below the validator's own (``at``: ".key" or "[i]")
    and the value at fault there; :func:`_format_errors` puts both into the InvalidSpecError."""
    return PydanticCustomError("metalfleet", "{message}", {"message": message, "at": at, "value": value})


class NetworkSpec(_Strict):
    #: The VPC the nodes go into: the subnet must be in it, and the cluster's own security group is made in it.
    #: It does not pick a subnet: give ``subnet_id`` too.
    vpc_id: str | None = None
    subnet_id: str | None = None
    #: Your own security groups, used as they are: metalfleet then makes no group and changes none.
    security_group_ids: list[str] = Field(default_factory=list)
    public_ip: Flag = False
    #: CIDRs allowed to reach the nodes' SSH port (``ssh.port``), as ingress rules on the security group
    #: metalfleet makes for the cluster. Empty: SSH only from the cluster's own members.
    ssh_ingress_cidrs: list[str] = Field(default_factory=list)

    @field_validator("ssh_ingress_cidrs")
    @classmethod
    def _cidrs(cls, v: list[str]) -> list[str]:
        for i, cidr in enumerate(v):
            why = cidr_problem(cidr)
            if why:
                raise _bad(f"[{i}]", cidr, why)
        return v

    @model_validator(mode="after")
    def _combinations(self) -> NetworkSpec:
        if self.ssh_ingress_cidrs and self.security_group_ids:
            raise _bad(".ssh_ingress_cidrs", self.ssh_ingress_cidrs, SSH_RULES_NEED_OWN_GROUP)
        if self.vpc_id and not self.subnet_id:
            raise _bad(".subnet_id", None, f"vpc_id {self.vpc_id} alone picks no subnet: give subnet_id too "
                       "(a subnet of that VPC in the cluster's zone)")
        return self


class PlacementSpec(_Strict):
    #: cluster: one rack-dense group in one zone (EFA's choice); spread: each node on distinct hardware;
    #: partition: nodes spread over ``partition_count`` partitions; none: no placement group.
    strategy: Literal["cluster", "spread", "partition", "none"] = "cluster"
    group_name: str | None = None
    #: Partitions of a ``partition`` group (1-7, the most EC2 allows per zone); only with that strategy.
    partition_count: Int | None = Field(None, ge=1, le=7)

    @model_validator(mode="after")
    def _combinations(self) -> PlacementSpec:
        why = partition_problem(self.strategy, self.partition_count)
        if why:
            raise _bad(".partition_count", self.partition_count, why)
        if self.strategy == "none" and self.group_name:
            raise _bad(".group_name", self.group_name, "strategy none uses no placement group: drop group_name "
                       "or choose a strategy")
        return self


class CapacitySpec(_Strict):
    billing: BillingModel = BillingModel.ON_DEMAND
    reservation_id: str | None = None
    capacity_block: Flag = False
    #: Subscription nodes (monthly, reserved_1y, reserved_3y) are ended early on release (``metalfleet release``,
    #: ``pulumi destroy``, a replaced node): unsubscribed, or converted to pay-as-you-go and released, as the
    #: provider does it. Off: release refuses them, naming each node, its expiry and what ending it refunds.
    release_subscriptions: Flag = False

    @model_validator(mode="after")
    def _block_needs_reservation(self) -> CapacitySpec:
        if self.capacity_block and not self.reservation_id:
            raise ValueError("capacity_block: true needs reservation_id (the Capacity Block's reservation id)")
        return self


class VolumeModel(_Strict):
    size_gib: Int = Field(..., ge=8, le=65536)
    type: str = "gp3"
    encrypted: Flag = True
    kms_key_id: str | None = None
    device_name: str | None = None


class HotTierSpec(_Strict):
    """Local NVMe assembled into RAID0."""

    raid_level: Literal[0] = 0
    filesystem: Literal["xfs", "ext4"] = "xfs"
    mount: str = "/scratch"


class WarmTierSpec(_Strict):
    """Parallel file system client mount."""

    kind: Literal["lustre", "fsx-lustre", "cpfs", "sfs-turbo", "gpfs", "nfs"]
    source: str
    mount: str = "/shared"
    options: str | None = None


class ColdTierSpec(_Strict):
    """Object storage mount or sync tool."""

    kind: Literal["s3", "oss", "obs"]
    bucket: str
    mount: str | None = "/data"
    tool: Literal["mountpoint-s3", "s3fs", "ossfs", "obsfs", "rclone"] | None = None


class StorageSpec(_Strict):
    root: VolumeModel = VolumeModel(size_gib=200)
    data: list[VolumeModel] = Field(default_factory=list)
    kms_key_id: str | None = Field(None, description="default KMS key for every volume")
    hot: HotTierSpec | None = None
    warm: WarmTierSpec | None = None
    cold: ColdTierSpec | None = None


class SshSpec(_Strict):
    user: str = "ubuntu"
    #: The provider's key pair (by name) whose public key the image installs for ``user``.
    key_pair: str | None = None
    private_key: str | None = Field(None, description="path to the private key; agent is used if unset")
    port: Int = Field(22, ge=1, le=65535)
    bastion: str | None = Field(None, description="user@host[:port] of a jump host")
    known_hosts: str | None = None
    #: Accept and record a host's key at first contact (trust on first use). Off by default.
    pin_on_first_contact: Flag = False


class BootstrapSpec(_Strict):
    enabled: Flag = True
    profile: str | None = Field(None, description="profile name; default follows provider and offering")
    #: Per-step settings that override the offering defaults, keyed by step name.
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)


class AcceptanceSpec(_Strict):
    enabled: Flag = True
    threshold: Number = Field(0.9, gt=0, le=1.5, description="pass at this fraction of the baseline")
    replace_failed: Flag = False
    retry_budget: Int = Field(2, ge=0, le=20)
    #: Baseline values by dotted path (``nccl.all_reduce.intra_node_ring_busbw_gbs: 300``).
    baselines: dict[str, Number] = Field(default_factory=dict)
    #: The checks a node must pass: one that fails, or that is skipped (no evidence, no baseline value),
    #: fails the node. None: the offering baseline's ``required`` list; []: none (every check advisory).
    mandatory: list[str] | None = Field(None, description="check names a node must pass (default: the baseline's)")
    #: A node whose own figures pass but sit far below its peers' (median and MAD): warned about (advisory) or
    #: failed and quarantined (mandatory).
    outliers: Literal["advisory", "mandatory"] = "advisory"
    #: After a failed run across nodes, rounds of smaller runs name the nodes, links or switch group at fault.
    localise: Flag = True

    @field_validator("mandatory")
    @classmethod
    def _known_checks(cls, v: list[str] | None) -> list[str] | None:
        for name in v or []:
            if name not in ACCEPTANCE_CHECKS:
                raise ValueError(f"unknown check {name!r} (known: {', '.join(ACCEPTANCE_CHECKS)})")
            if v and v.count(name) > 1:
                raise ValueError(f"check {name!r} is listed twice")
        return v


#: Slurm partition names as metalfleet writes them into slurm.conf (``PartitionName=``).
_PARTITION = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
#: Slurm node feature names: no space, comma or constraint operator (``&|*[]()!:``) inside, so a user can
#: constrain on each one with ``--constraint``.
_FEATURE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_DNS_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
#: slurmctld's port when slurm.conf names none (``SlurmctldPort``).
SLURMCTLD_PORT = 6817
SCHEDULER_KINDS = ("slurm",)
_MUNGE_SCHEMES: tuple[Literal["env", "file", "config"], ...] = ("env", "file", "config")
_MUNGE_SOURCES = "env:NAME, file:PATH or config:NAME (a Pulumi secret: pulumi config set --secret NAME ...)"


def host_problem(host: str) -> str | None:
    """Why ``host`` is no IP address or DNS name (RFC 1123 labels), or None when it is one."""
    if not host:
        return "empty host: give an IP address or a DNS name"
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return None
    name = host.removesuffix(".")
    if len(name) > 253 or not all(_DNS_LABEL.match(label) for label in name.split(".")):
        return f"{host!r} is neither an IP address nor a DNS name (letters, digits, '-' and '.')"
    if name.rsplit(".", 1)[-1].isdigit():  # 10.0.0.256 is a bad address, not a name
        return f"{host!r} is not a valid IP address"
    return None


def parse_endpoint(address: str, default_port: int = SLURMCTLD_PORT) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` as ``(host, port)``; ValueError saying why not."""
    host, port = address, str(default_port)
    if address.startswith("["):
        inside, bracket, rest = address[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{address!r}: an IPv6 address goes in brackets, [addr] or [addr]:port")
        host, port = inside, rest[1:] if rest else port
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{address!r}: only an IPv6 address goes in brackets") from None
    elif address.count(":") == 1:  # more than one: a bare IPv6 address, which has no room for a port
        host, port = address.split(":")
    if not port.isdecimal() or not 1 <= int(port) <= 65535:
        raise ValueError(f"port {port!r} of {address!r} is not a port (1-65535)")
    why = host_problem(host)
    if why:
        raise ValueError(why)
    return host, int(port)


def _munge_key_shape(ref: str) -> str | None:
    """Why ``ref`` is no munge key reference, without echoing it (it may be the key itself)."""
    scheme, colon, rest = ref.partition(":")
    if not colon or not _SCHEME.match(ref) or scheme not in _MUNGE_SCHEMES:
        return f"not a reference: never put the munge key itself in the spec; use {_MUNGE_SOURCES}"
    if scheme == "env" and not _ENV_NAME.match(rest):
        return f"env:{rest} names no environment variable (letters, digits, '_')"
    if scheme == "file" and not rest:
        return "file: names no file"
    if scheme == "config" and not _CONFIG_NAME.match(rest):
        return f"config:{rest} names no Pulumi config key"
    return None


def _shown_key(ref: str) -> str:
    """The value an error shows for a munge_key: the reference when it is one, else only its length."""
    if _SCHEME.match(ref) and ref.partition(":")[0] in _MUNGE_SCHEMES:
        return ref
    return f"<{len(ref)} characters, not shown>"


class HealthCheckSpec(_Strict):
    """Slurm's ``HealthCheckProgram``: metalfleet's fast node checks, run every ``interval_s`` seconds by each
    slurmd (``HealthCheckInterval``); a node that fails them is drained with the check's reason. Giving the
    section turns it on; ``enabled: false`` keeps it written down but off."""

    enabled: Flag = True
    interval_s: Int = Field(300, ge=60, le=86400)


class ControllerSpec(_Strict):
    """metalfleet stands slurmctld up: on the cluster's node ``node`` or on ``host`` (reached with ``ssh``)."""

    node: Int | None = None
    host: str | None = None
    #: Optional: the munge key the controller (and every node) is given; None: metalfleet makes one.
    munge_key: str | None = None

    @model_validator(mode="after")
    def _one_place(self) -> ControllerSpec:
        if (self.node is None) == (self.host is None):
            got = f"node={self.node!r}, host={self.host!r}" if self.host is not None else "neither node nor host"
            raise _bad("", got, "give the controller's place as exactly one of node (an index of this cluster) or host")
        if self.host is not None:
            why = host_problem(self.host)
            if why:
                raise _bad(".host", self.host, why)
        if self.node is not None and self.node < 0:
            raise _bad(".node", self.node, "node index must be 0 or more")
        return self


class JoinSpec(_Strict):
    """The nodes join a slurmctld that runs already."""

    #: ``host[:port]`` of slurmctld (port: 6817 when not given); an IPv6 address in brackets.
    address: str
    #: The controller's munge key: a reference (env:, file:, config:), never the key.
    munge_key: str | None = None

    @field_validator("address")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        try:
            parse_endpoint(v)
        except ValueError as exc:
            raise ValueError(f"unknown controller: {exc}") from None
        return v

    @model_validator(mode="after")
    def _key_given(self) -> JoinSpec:
        if self.munge_key is None:
            raise _bad(".munge_key", None, "missing munge key: joining a controller needs its munge key, as "
                       + _MUNGE_SOURCES)
        return self


_SLURM_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9]{1,63}$")
_OWN_SLURM_KEYS = {"nodename", "partitionname", "slurmctldhost", "controlmachine", "clustername", "include"}


class SchedulerSpec(_Strict):
    """The Slurm partition the accepted nodes go into (issue 24): joined to a controller that exists, or with a
    controller metalfleet stands up.

    The munge key is only ever a reference: ``env:NAME`` (an environment variable where metalfleet runs),
    ``file:PATH`` (a file there; ``~`` expands, relative to the working directory) or ``config:NAME`` (a
    Pulumi secret config value). :meth:`munge_key_problem` checks that env: and file: resolve; a config: value
    only the stack can read, so only the stack can check it.
    """

    kind: str
    #: None: the cluster's name (:meth:`partition_name`).
    partition: str | None = None
    controller: ControllerSpec | None = None
    join: JoinSpec | None = None
    #: Extra node features beside the ones metalfleet adds (offering, fabric, provider).
    features: list[str] = Field(default_factory=list)
    #: None: no health check program.
    health_check: HealthCheckSpec | None = None
    #: slurm.conf keys laid over metalfleet's own (``ProctrackType: proctrack/linuxproc`` where the nodes have no
    #: writable cgroup filesystem). The nodes, the partition and the controller are metalfleet's to write.
    settings: dict[str, str] = Field(default_factory=dict)
    #: Each node's slurmd on its own port, this one plus the node's index, where nodes share one address space
    #: (several simulated hosts on one machine); None: every node on SlurmdPort.
    node_port_base: Int | None = Field(None, ge=1024, le=60000)

    @field_validator("settings")
    @classmethod
    def _slurm_settings(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _SLURM_KEY.match(key):
                raise _bad(f".{key}", key, "a slurm.conf key is letters and digits (ProctrackType)")
            if key.lower() in _OWN_SLURM_KEYS:
                raise _bad(f".{key}", key, f"{key} is written by metalfleet from the accepted nodes and the "
                           "controller; it cannot be set here")
            if "\n" in value or "\r" in value or "#" in value:
                raise _bad(f".{key}", value, "a slurm.conf value is one line without '#'")
        return v

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v not in SCHEDULER_KINDS:
            raise ValueError(f"unknown scheduler kind {v!r} (known: {', '.join(SCHEDULER_KINDS)})")
        return v

    @field_validator("partition")
    @classmethod
    def _partition_name(cls, v: str | None) -> str | None:
        if v is not None and not _PARTITION.match(v):
            raise ValueError("a Slurm partition name is 1-40 letters, digits, '_' or '-'")
        return v

    @field_validator("features")
    @classmethod
    def _feature_names(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            if not _FEATURE.match(name):
                raise _bad(f"[{i}]", name, "a Slurm feature name is letters, digits, '_', '.' or '-' "
                           "(no space, comma or constraint operator), at most 63")
            if name in v[:i]:
                raise _bad(f"[{i}]", name, f"feature {name!r} is listed twice")
        return v

    @model_validator(mode="after")
    def _one_mode(self, info: ValidationInfo) -> SchedulerSpec:
        if (self.controller is None) == (self.join is None):
            raise _bad("", "controller and join" if self.controller else "neither controller nor join",
                       "give exactly one of controller (metalfleet stands it up) or join (an existing controller)")
        if self.join is not None:  # the controller's slurm.conf is the site's: nothing of it is metalfleet's to set
            health = bool(self.health_check and self.health_check.enabled)
            for name, given in (("settings", bool(self.settings)), ("health_check", health),
                                ("node_port_base", self.node_port_base is not None)):
                if given:
                    raise _bad(f".{name}", name, f"{name} is written into a slurm.conf metalfleet stands up; joining "
                               "a controller that exists, its slurm.conf is the site's (dynamic nodes all listen on "
                               "its SlurmdPort)")
        ref = self._munge_ref()
        if ref is not None:
            at = ".join.munge_key" if self.join else ".controller.munge_key"
            why = _munge_key_shape(ref)
            if why is None and (info.context or {}).get("check_references", True):
                why = self.munge_key_problem()
            if why:
                raise _bad(at, _shown_key(ref), why)
        return self

    def _munge_ref(self) -> str | None:
        section = self.join or self.controller
        return section.munge_key if section else None

    def munge_key_source(self) -> tuple[Literal["env", "file", "config"], str] | None:
        """The munge key reference as ``(scheme, name)``; None: metalfleet makes the key (controller mode)."""
        ref = self._munge_ref()
        if ref is None:
            return None
        scheme, _, name = ref.partition(":")
        for known in _MUNGE_SCHEMES:
            if scheme == known:
                return known, name
        raise AssertionError(f"munge_key scheme {scheme!r} passed validation")  # the validator refuses any other

    def munge_key_problem(self) -> str | None:
        """Why the munge key reference does not resolve here (an unset or empty variable; a missing, unreadable
        or empty file), or None. ``config:`` is not checked: only the stack can read Pulumi config."""
        source = self.munge_key_source()
        if source is None:
            return None
        scheme, name = source
        if scheme == "env":
            if not os.environ.get(name):
                return f"environment variable {name} is {'empty' if name in os.environ else 'not set'}"
        elif scheme == "file":
            path = Path(name).expanduser()
            try:
                size = path.stat().st_size
                if not path.is_file():
                    return f"munge key file {name} is not a file"
                with path.open("rb"):
                    pass
            except OSError as exc:
                return f"munge key file {name}: {exc.strerror or exc}"
            if size == 0:
                return f"munge key file {name} is empty"
        return None

    def partition_name(self, cluster: str) -> str:
        """The partition's name: ``partition``, or the cluster's name (a valid partition name) when unset."""
        return self.partition or cluster

    def controller_node_index(self) -> int | None:
        """The index of the cluster node that runs slurmctld; None when it runs elsewhere."""
        return self.controller.node if self.controller else None

    def join_endpoint(self) -> tuple[str, int] | None:
        """``(host, port)`` of an existing controller the nodes join; None in controller mode."""
        return parse_endpoint(self.join.address) if self.join else None


Name = Annotated[str, Field(min_length=2, max_length=40)]


class ClusterSpec(_Strict):
    """A GPU cluster: where, what, how many, and how to make it ready."""

    name: Name
    #: A registered provider's name (:func:`~metalfleet.providers.registry.available_drivers`).
    provider: str
    region: str
    zone: str | None = None
    offering: str | None = None
    requirements: Requirements | None = None
    count: Int = Field(..., ge=1, le=2048)
    image: str
    network: NetworkSpec = NetworkSpec()
    placement: PlacementSpec = PlacementSpec()
    capacity: CapacitySpec = CapacitySpec()
    storage: StorageSpec = StorageSpec()
    tags: dict[str, str] = Field(default_factory=dict)
    ssh: SshSpec = SshSpec()
    bootstrap: BootstrapSpec = BootstrapSpec()
    acceptance: AcceptanceSpec = AcceptanceSpec()
    #: The Slurm partition the accepted nodes join; None: no scheduler.
    scheduler: SchedulerSpec | None = None

    @field_validator("name")
    @classmethod
    def _name_shape(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError("must be lowercase letters, digits and '-', start with a letter")
        return v

    @field_validator("provider")
    @classmethod
    def _registered(cls, v: str) -> str:
        from .registry import available_drivers

        if v not in available_drivers():
            raise ValueError(f"unknown provider {v!r}; available: {', '.join(available_drivers())}")
        return v

    @field_validator("tags")
    @classmethod
    def _tag_rules(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """Tags are checked against the provider's rules here, before any call (errors name tags.<key>)."""
        for key in v:
            if key.lower().startswith(TAG_PREFIX):
                raise _bad(f".{key}", key, f"tag key {key!r}: the {TAG_PREFIX} prefix is metalfleet's own "
                           f"({TAG_CLUSTER} finds the cluster's nodes)")
        provider = info.data.get("provider")
        if provider:
            from .registry import provider_record

            network = info.data.get("network")
            problems = provider_record(provider).tag_problems(v, public_ip=bool(network and network.public_ip))
            if problems:
                at, value, why = problems[0]
                raise _bad(at.removeprefix("tags"), value, why)
        return v

    @model_validator(mode="after")
    def _provider_rules(self) -> ClusterSpec:
        """What the provider would refuse about the whole spec (placement limits, billing models it does not
        sell), refused here, naming the field, before any call."""
        from .registry import provider_record

        problems = provider_record(self.provider).spec_problems(self)
        if problems:
            at, value, why = problems[0]
            raise _bad(f".{at}", value, why)
        problem = billing_problem(self.provider, self.capacity.billing)
        if problem:
            raise _bad(".capacity.billing", self.capacity.billing.value, problem)
        return self

    @model_validator(mode="after")
    def _offering_or_requirements(self) -> ClusterSpec:
        if not self.offering and not self.requirements:
            raise ValueError("give either 'offering' (a node type name) or 'requirements'")
        if self.offering and self.requirements:
            raise ValueError("give 'offering' or 'requirements', not both")
        return self

    @model_validator(mode="after")
    def _controller_node_in_range(self) -> ClusterSpec:
        node = self.scheduler.controller_node_index() if self.scheduler else None
        if node is not None and node >= self.count:
            raise _bad(".scheduler.controller.node", node, f"the controller's node must be one of this cluster's "
                       f"(0..{self.count - 1}, count {self.count})")
        if self.scheduler is not None and not self.acceptance.enabled:
            raise _bad(".scheduler", self.scheduler.kind, "nodes join the scheduler only once the acceptance gate "
                       "has passed them: acceptance.enabled must be true")
        return self

    @property
    def placement_group_name(self) -> str | None:
        if self.placement.strategy == "none":
            return None
        return self.placement.group_name or f"{self.name}-pg"

    def all_tags(self) -> dict[str, str]:
        return {TAG_CLUSTER: self.name, **self.tags}

    def node_spec(self, index: int, offering: str, generation: int = 0) -> NodeSpec:
        """The NodeSpec for node ``index``, with encryption defaults applied to every volume."""
        if not 0 <= index < self.count:
            raise InvalidSpecError(f"node index {index} outside 0..{self.count - 1}", field="count", value=index)
        kms = self.storage.kms_key_id

        def vol(v: VolumeModel) -> VolumeSpec:
            return VolumeSpec(size_gib=v.size_gib, encrypted=v.encrypted, kms_key_id=v.kms_key_id or kms,
                              volume_type=v.type, device_name=v.device_name)

        return NodeSpec(
            cluster=self.name,
            index=index,
            offering=offering,
            region=self.region,
            zone=self.zone,
            image=self.image,
            subnet_id=self.network.subnet_id,
            security_group_ids=tuple(self.network.security_group_ids),
            placement_group=self.placement_group_name,
            placement_strategy=self.placement.strategy,
            placement_partitions=self.placement.partition_count,
            vpc_id=self.network.vpc_id,
            ssh_ingress_cidrs=tuple(self.network.ssh_ingress_cidrs),
            ssh_port=self.ssh.port,
            capacity_reservation_id=self.capacity.reservation_id,
            capacity_block=self.capacity.capacity_block,
            billing=self.capacity.billing,
            release_subscriptions=self.capacity.release_subscriptions,
            public_ip=self.network.public_ip,
            key_name=self.ssh.key_pair,
            root_volume=vol(self.storage.root),
            data_volumes=tuple(vol(v) for v in self.storage.data),
            tags={**self.all_tags(), TAG_INDEX: str(index), TAG_NAME: f"{self.name}-{index}"},
            generation=generation,
        )


def billing_problem(provider: str, billing: BillingModel) -> str | None:
    """Why ``provider`` does not sell ``billing`` (its record's billing models), or None when it does."""
    from .registry import provider_record

    return provider_record(provider).billing_problem(billing)


def validation_error(exc: ValidationError, heading: str, *, prefix: str = "",
                     unknown: str = "unknown key") -> InvalidSpecError:
    """One InvalidSpecError for a pydantic ValidationError: every problem on its own line as
    ``path: message (got value)``, the first one's path and value as the error's field and value.

    ``heading`` names what was being read (``invalid cluster spec cluster.yaml``); ``prefix`` is the dotted
    path of the validated object inside a larger document (``bootstrap.overrides.nccl.``). Used for cluster
    specs, inventories and step settings alike, so every such error reads the same.
    """
    lines = []
    first_field: str | None = None
    first_value: object = None
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        value = err.get("input")
        ctx = err.get("ctx") or {}
        if err["type"] == "metalfleet":  # _bad(): the location below the validator's, and its value
            loc = (loc + str(ctx["at"])).lstrip(".")
            value = ctx.get("value")
        path = f"{prefix}{loc}".rstrip(".") or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = unknown
        shown = shorten(value) if not isinstance(value, dict) else "{...}"
        lines.append(f"  {path}: {msg} (got {shown})")
        if first_field is None:
            first_field, first_value = path, value
    return InvalidSpecError(f"{heading}:\n" + "\n".join(lines), field=first_field, value=first_value)


def _format_errors(exc: ValidationError, source: str) -> InvalidSpecError:
    return validation_error(exc, f"invalid cluster spec {source}", unknown="unknown key (not part of the cluster spec)")


def parse_spec(data: Any, source: str = "<data>", *, check_references: bool = True) -> ClusterSpec:
    """``check_references=False`` skips checking that references to secrets resolve here (an ``env:`` munge key's
    variable set, its ``file:`` present): for commands that do not use them, such as ``release``."""
    if not isinstance(data, dict):
        raise InvalidSpecError(f"invalid cluster spec {source}: top level must be a mapping, "
                               f"got {type(data).__name__}", field="(top level)", value=data)
    try:
        return ClusterSpec.model_validate(data, context={"check_references": check_references})
    except ValidationError as exc:
        raise _format_errors(exc, source) from None


def load_yaml(path: str | Path, what: str, *, allow_empty: bool = False) -> Any:
    """Read and parse a YAML file. Bad bytes, bad YAML, a missing, empty or oversized file: a
    BadFileError (an InvalidSpecError) naming the path and the byte offset or line and column."""
    data = parse_yaml(read_text_file(path, what, allow_empty=allow_empty), str(path), what)
    if data is None and not allow_empty:
        raise BadFileError(f"{what} {path} holds no YAML document (only comments, blank lines or null)",
                           path=str(path))
    return data


def load_spec(path: str | Path, *, check_references: bool = True) -> ClusterSpec:
    """Load and validate a cluster spec from a YAML file (``check_references``: as for :func:`parse_spec`)."""
    return parse_spec(load_yaml(path, "cluster spec"), str(path), check_references=check_references)
