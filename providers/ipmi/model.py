"""The pool inventory, validated strictly (pydantic): what the driver orders from.

Hosts are walked with :func:`.inventory.host_entries` (the one reader of the file's shape, shared with the
policy adapter) and each merged host is validated on its own, so an error names the host's own path
(``hosts.1.bmc.credentials``). A host's hardware becomes one of the catalogue's ``ipmi`` offerings:
``hardware.offering`` names it, or its GPU model, count and fabric pick it; a host that matches none is an
error naming ``hosts.<i>.hardware``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..catalog import CatalogOffering, load_catalog
from ..errors import InvalidSpecError
from ..models import Fabric
from ..spec import load_yaml, validation_error
from .inventory import DEFAULT_PORTS, host_entries

__all__ = ["BmcConfig", "Credentials", "Hardware", "PoolHost", "PoolInventory", "load_pool", "parse_pool"]

PROVIDER = "ipmi"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Credentials(_Strict):
    """Where the BMC password is: an environment variable, a file, or a key of the driver's ``secrets``
    (a Pulumi secret config). Exactly one; the password itself never appears in the inventory."""

    user: str = Field(..., min_length=1)
    env: str | None = None
    file: str | None = None
    config: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Credentials:
        given = [k for k in ("env", "file", "config") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError("give exactly one of env (a variable name), file (a path) or config (a key of the "
                             f"driver's secrets) for the BMC password; got {given or 'none'}")
        return self


class BmcConfig(_Strict):
    address: str = Field(..., min_length=1)
    protocol: Literal["ipmi", "redfish"]
    port: int | None = Field(None, ge=1, le=65535)
    interface: Literal["lanplus"] = "lanplus"
    cipher_suite: Literal[3, 17] = 3  # DEFAULT_CIPHER_SUITE
    verify_tls: bool = True
    ca_bundle: str | None = None
    system: str | None = None
    credentials: Credentials
    #: Seconds one BMC request may take before it counts as unanswered (a transient fault).
    timeout: float = Field(10.0, gt=0, le=120)

    @model_validator(mode="after")
    def _shape(self) -> BmcConfig:
        if self.protocol == "ipmi" and "://" in self.address:
            raise ValueError(f"an ipmi BMC address is a host name or IP, not a URL ({self.address})")
        if self.protocol == "redfish" and "://" in self.address:
            scheme = urlsplit(self.address).scheme
            if scheme not in ("http", "https"):
                raise ValueError(f"a Redfish address is http(s)://host[:port] or a host name, got {self.address}")
        return self

    @property
    def scheme(self) -> str:
        return urlsplit(self.address).scheme if "://" in self.address else "https"

    @property
    def host(self) -> str:
        return (urlsplit(self.address).hostname or self.address) if "://" in self.address else self.address

    @property
    def effective_port(self) -> int:
        if self.port:
            return self.port
        if "://" in self.address and urlsplit(self.address).port:
            return int(urlsplit(self.address).port or 0)
        if self.protocol == "redfish":
            return DEFAULT_PORTS["redfish+http" if self.scheme == "http" else "redfish"]
        return DEFAULT_PORTS["ipmi"]

    @property
    def url(self) -> str:
        """Redfish: the service root's scheme://host:port."""
        return f"{self.scheme}://{self.host}:{self.effective_port}"


class SshConfig(_Strict):
    address: str = Field(..., min_length=1)
    port: int = Field(22, ge=1, le=65535)
    user: str | None = None
    host_keys: list[str] = Field(default_factory=list)
    pin_on_first_contact: bool = False


class Hardware(_Strict):
    offering: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = Field(None, ge=0, le=64)
    fabric: Fabric | None = None
    nvme_count: int | None = Field(None, ge=0)


class PoolHost(_Strict):
    name: str = Field(..., min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    bmc: BmcConfig
    ssh: SshConfig
    hardware: Hardware = Hardware()
    labels: dict[str, str] = Field(default_factory=dict)


class PoolSsh(_Strict):
    known_hosts: str | None = None
    pin_on_first_contact: bool = False


@dataclass(frozen=True)
class Host:
    """A validated pool host and the catalogue offering its hardware is."""

    spec: PoolHost
    offering: str
    zone: str
    #: The host's path in the file, for errors (``hosts.1``).
    where: str

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class PoolInventory:
    name: str
    hosts: tuple[Host, ...]
    management_cidrs: tuple[str, ...] = ()
    ssh: PoolSsh = field(default_factory=PoolSsh)
    source: str = "<pool>"

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

    def offerings(self) -> list[str]:
        """The offerings the pool has hosts of, in first-seen order."""
        return list(dict.fromkeys(h.offering for h in self.hosts))


def _match(hw: Hardware, entries: list[CatalogOffering], where: str, source: str) -> str:
    if hw.offering:
        if not any(e.name == hw.offering for e in entries):
            known = ", ".join(e.name for e in entries) or "none"
            raise InvalidSpecError(f"pool inventory {source}: {where}.hardware.offering: {hw.offering!r} is not an "
                                   f"ipmi offering of the catalogue (known: {known})",
                                   field=f"{where}.hardware.offering", value=hw.offering, provider=PROVIDER)
        return hw.offering
    fits = [e for e in entries
            if (hw.gpu_model is None or e.gpu_model.lower() == hw.gpu_model.lower())
            and (hw.gpu_count is None or e.gpu_count == hw.gpu_count)
            and (hw.fabric is None or e.fabric == hw.fabric)
            and (hw.nvme_count is None or e.nvme_count == hw.nvme_count)]
    if hw.gpu_model is None or len(fits) != 1:
        have = hw.model_dump(exclude_none=True)
        known = "; ".join(f"{e.name} ({e.gpu_count}x {e.gpu_model}, {e.fabric.value})" for e in entries)
        why = "matches no" if not fits else "matches more than one" if hw.gpu_model else "names no GPU model for an"
        raise InvalidSpecError(f"pool inventory {source}: {where}.hardware {have} {why} ipmi offering of the "
                               f"catalogue: give hardware.offering or gpu_model/gpu_count/fabric (known: {known})",
                               field=f"{where}.hardware", value=have, provider=PROVIDER)
    return fits[0].name


def load_pool(path: str | Path) -> PoolInventory:
    """Read and validate a pool inventory file."""
    return parse_pool(load_yaml(path, "pool inventory"), str(path))


def parse_pool(data: Any, source: str = "<pool>") -> PoolInventory:
    """The validated inventory; InvalidSpecError naming the field path at fault."""
    if not isinstance(data, dict):
        raise InvalidSpecError(f"pool inventory {source}: top level must be a mapping, got {type(data).__name__}",
                               field="(top level)", value=data, provider=PROVIDER)
    unknown = sorted(set(data) - {"pool", "management_cidrs", "defaults", "hosts", "ssh"})
    if unknown:
        raise InvalidSpecError(f"pool inventory {source}: {unknown[0]}: unknown key (not part of a pool inventory)",
                               field=unknown[0], value=data[unknown[0]], provider=PROVIDER)
    name = data.get("pool")
    if not isinstance(name, str) or not name:
        raise InvalidSpecError(f"pool inventory {source}: pool: the pool's name is required (the cluster spec's "
                               f"region names it)", field="pool", value=name, provider=PROVIDER)
    cidrs = data.get("management_cidrs") or []
    for i, cidr in enumerate(cidrs if isinstance(cidrs, list) else [cidrs]):
        try:
            ipaddress.ip_network(str(cidr), strict=False)
        except ValueError:
            raise InvalidSpecError(f"pool inventory {source}: management_cidrs.{i}: {cidr!r} is not a CIDR",
                                   field=f"management_cidrs.{i}", value=cidr, provider=PROVIDER) from None
    if not isinstance(data.get("hosts"), list | dict) or not data["hosts"]:
        raise InvalidSpecError(f"pool inventory {source}: hosts: a list (or mapping) of at least one host is "
                               "required", field="hosts", value=data.get("hosts"), provider=PROVIDER)
    try:
        ssh = PoolSsh.model_validate(data.get("ssh") or {})
    except ValidationError as exc:
        raise validation_error(exc, f"invalid pool inventory {source}", prefix="ssh.") from None
    entries = load_catalog().of(PROVIDER)
    hosts: list[Host] = []
    seen: dict[str, str] = {}
    for entry in host_entries(data):
        where = entry.where
        if entry.raw is None:
            raise InvalidSpecError(f"pool inventory {source}: {where}: a host must be a mapping",
                                   field=where, value=None, provider=PROVIDER)
        body = dict(entry.data)
        if isinstance(entry.path[-1], str):  # hosts: {name: {...}}
            body.setdefault("name", entry.name)
        try:
            host = PoolHost.model_validate(body)
        except ValidationError as exc:
            raise validation_error(exc, f"invalid pool inventory {source}", prefix=f"{where}.") from None
        if host.name in seen:
            raise InvalidSpecError(f"pool inventory {source}: {where}.name: host {host.name} is listed twice "
                                   f"(also {seen[host.name]})", field=f"{where}.name", value=host.name,
                                   provider=PROVIDER)
        seen[host.name] = where
        offering = _match(host.hardware, entries, where, source)
        hosts.append(Host(spec=host, offering=offering, zone=host.labels.get("zone") or name, where=where))
    return PoolInventory(name=name, hosts=tuple(hosts), management_cidrs=tuple(str(c) for c in cidrs),
                         ssh=ssh, source=source)


def host_facts(host: Host) -> Mapping[str, Any]:
    """Plain facts about a host for ``Node.extra`` (never its credentials)."""
    bmc = host.spec.bmc
    return {"host": host.name, "bmc_protocol": bmc.protocol, "bmc_address": bmc.host,
            "bmc_port": bmc.effective_port, "ssh_port": host.spec.ssh.port, "labels": dict(host.spec.labels),
            "host_keys": list(host.spec.ssh.host_keys)}
