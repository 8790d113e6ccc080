"""The pool inventory: one YAML file naming a team's own GPU servers, their BMCs and SSH addresses.

One shape, two readers. The raw-shape helpers here (:func:`host_entries`, :func:`is_pool_inventory` and the
documented defaults; ``defaults`` merge under each host by :func:`~metalfleet.providers.merge.deep_merge`) use the
standard library only, and both the driver and the policy adapter (``metalfleet.policies.adapters.inventory``)
walk a file through them, so the two can never disagree on which hosts a file lists or how ``defaults`` merge
under them. The driver then validates each merged host strictly (:func:`.model.parse_pool`, pydantic): unknown
keys and bad values are :class:`~metalfleet.providers.errors.InvalidSpecError` naming the field path
(``hosts.gpu-02.bmc.port``); the policy adapter stays lenient and judges what it can. This module imports nothing
of :mod:`.model`: the strict reader stands on it, not the other way round.

::

    pool: colo-a                          # the pool's name: the cluster spec's region
    management_cidrs: [10.10.0.0/16]      # optional: the BMC network
    defaults:                             # optional: merged under every host (bmc:, ssh:, labels:, hardware:)
      bmc: {protocol: ipmi, port: 623, cipher_suite: 17, credentials: {user: admin, env: POOL_BMC_PASSWORD}}
    hosts:                                # a list of hosts, or a mapping name -> host
      - name: gpu-01
        bmc:
          address: 10.10.0.11             # IP or host name; Redfish also http(s)://host[:port]
          port: 623                       # default 623 (ipmi), 443 (redfish https), 80 (redfish http)
          protocol: ipmi                  # ipmi | redfish
          interface: lanplus              # ipmi: lanplus (IPMI 2.0; the only one pyghmi speaks)
          cipher_suite: 17                # ipmi: RMCP+ cipher suite, 3 or 17 (default 3)
          verify_tls: true                # redfish: verify the certificate (default true)
          ca_bundle: /etc/pki/bmc-ca.pem  # redfish: CA for a private certificate
          system: /redfish/v1/Systems/1   # redfish: the system's path (default: the only system)
          credentials: {user: admin, env: GPU01_BMC}   # env / file / config: a reference, never the secret
        ssh: {address: 10.0.1.11, port: 22, host_keys: ["ssh-ed25519 AAAA..."]}
        hardware: {gpu_model: H100, gpu_count: 8, fabric: infiniband, nvme_count: 8}   # or {offering: ...}
        labels: {rack: r12, zone: row-a}  # labels.zone: the host's zone (default: the pool's name)
    ssh: {known_hosts: ~/.ssh/known_hosts.colo, pin_on_first_contact: false}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..merge import deep_merge

__all__ = ["DEFAULT_CIPHER_SUITE", "DEFAULT_INTERFACE", "DEFAULT_PORTS", "HostEntry", "host_entries",
           "is_pool_inventory"]

#: The BMC port when the inventory gives none, by protocol (redfish: by scheme).
DEFAULT_PORTS: Mapping[str, int] = {"ipmi": 623, "redfish": 443, "redfish+http": 80}
#: RMCP+ cipher suite 3 (HMAC-SHA1, AES-128): what ipmitool and pyghmi use unless told.
DEFAULT_CIPHER_SUITE = 3
DEFAULT_INTERFACE = "lanplus"


@dataclass(frozen=True)
class HostEntry:
    """One host of the file: its name, its mapping with ``defaults`` merged under it, and where it is
    (``("hosts", 0)`` for a list item, ``("hosts", "gpu-01")`` for a mapping key)."""

    name: str
    data: dict[str, Any]
    path: tuple[str | int, ...]
    #: The mapping exactly as written (without the defaults), or None when the entry is not a mapping.
    raw: Mapping[str, Any] | None

    @property
    def where(self) -> str:
        return ".".join(str(p) for p in self.path)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def is_pool_inventory(data: Any) -> bool:
    """Whether a parsed YAML document is a pool inventory: ``hosts`` with a ``bmc`` (or BMC defaults)."""
    if not isinstance(data, dict) or "hosts" not in data:
        return False
    hosts = data["hosts"]
    entries = hosts.values() if isinstance(hosts, dict) else hosts if isinstance(hosts, list) else []
    defaults = _dict(data.get("defaults"))
    return "bmc" in defaults or any(isinstance(h, dict) and "bmc" in h for h in entries)


def host_entries(data: Mapping[str, Any]) -> list[HostEntry]:
    """Every host of the file in order, each with ``defaults`` merged under it. Lenient: an entry that is
    not a mapping comes back with empty data (the strict reader names it)."""
    defaults = _dict(data.get("defaults"))
    hosts = data.get("hosts")
    found: list[tuple[str, Any, tuple[str | int, ...]]] = []
    if isinstance(hosts, dict):
        found = [(str(k), v, ("hosts", str(k))) for k, v in hosts.items()]
    elif isinstance(hosts, list):
        found = [(str((h or {}).get("name") or f"hosts[{i}]") if isinstance(h, dict) else f"hosts[{i}]", h,
                  ("hosts", i)) for i, h in enumerate(hosts)]
    return [HostEntry(name, deep_merge(defaults, host if isinstance(host, dict) else {}), path,
                      host if isinstance(host, dict) else None) for name, host, path in found]

