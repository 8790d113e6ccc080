"""IPMI / Redfish pool inventories (issue 13: your own GPU servers as a provider).

The format, as issue 13 describes it (the driver that orders from such a pool reads the same file)::

    pool: colo-a                          # optional name
    management_cidrs: [10.10.0.0/16]      # optional: the BMC network
    defaults:                             # optional: merged under every host (bmc:, ssh:, labels:)
      bmc: {protocol: ipmi, port: 623, cipher_suite: 17}
    hosts:                                # a list of hosts, or a mapping name -> host
      - name: gpu-01
        bmc:
          address: 10.10.0.11             # IP or host name; Redfish also https://host[:port]
          port: 623
          protocol: ipmi                  # ipmi | redfish
          interface: lanplus              # ipmi: lanplus (IPMI 2.0, default) | lan (IPMI 1.5, unencrypted)
          cipher_suite: 17                # ipmi: RMCP+ cipher suite (default 3)
          verify_tls: true                # redfish: verify the certificate (default true)
          ca_bundle: /etc/pki/bmc-ca.pem  # redfish: CA for a private certificate
          credentials: {env: GPU01_BMC}   # a reference (env / file / config), never the secret itself
        ssh: {address: 10.0.1.11, port: 22, user: ubuntu, host_keys: ["ssh-ed25519 AAAA..."]}
        hardware: {gpu_model: H100, gpu_count: 8, fabric: infiniband, nvme_count: 8}
        labels: {rack: r12}
    ssh:                                  # optional, for every host
      known_hosts: ~/.ssh/known_hosts.colo
      pin_on_first_contact: false

The file's shape (which hosts it lists, how ``defaults`` merge under them, the documented defaults) is read
through :mod:`metalfleet.providers.ipmi.inventory`, the module the driver reads it with. The adapter is lenient
about fields it does not judge (the driver validates the file strictly); a field it
does judge that is missing takes the documented default, and a value it cannot read is UNKNOWN.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from metalfleet.providers.ipmi.inventory import DEFAULT_CIPHER_SUITE, host_entries, is_pool_inventory
from metalfleet.providers.merge import deep_merge

from ..defaults import note
from ..model import UNKNOWN, BmcEndpoint, ComputeNode, Location, Resource
from ..rules import is_public_address
from ..yamlpos import Positions

__all__ = ["inventory_resources", "is_pool_inventory"]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _host_resources(name: str, host: dict[str, Any], path: tuple[str | int, ...], file: str, pos: Positions,
                    ssh_defaults: Mapping[str, Any]) -> list[Resource]:
    def at(*sub: str | int) -> Location:
        line, col = pos.get(*path, *sub)
        return Location(file, line, col, ".".join(str(p) for p in (*path, *sub)))

    base: dict[str, Any] = {"platform": "ipmi", "source": "inventory", "type": "pool inventory host",
                            "location": at()}
    bmc = _dict(host.get("bmc"))
    protocol = str(bmc.get("protocol")).lower() if bmc.get("protocol") else UNKNOWN
    address_raw = bmc.get("address")
    address: Any = UNKNOWN
    tls: Any = None
    verify: Any = None
    notes: dict[str, str] = {}
    if isinstance(address_raw, str) and address_raw:
        if "://" in address_raw:
            parts = urlsplit(address_raw)
            address = parts.hostname or UNKNOWN
            tls = parts.scheme == "https"
        else:
            address = address_raw
    if protocol == "redfish":
        if tls is None:
            tls = True  # a bare host: the driver speaks https
        v = bmc.get("verify_tls")
        verify = v if isinstance(v, bool) else (True if v is None else UNKNOWN)
        if v is None:
            notes["verify_tls"] = note("redfish.verify_tls")
    lanplus: Any = None
    suite: Any = None
    if protocol == "ipmi":
        iface = bmc.get("interface")
        lanplus = True if iface in (None, "lanplus") else (False if iface == "lan" else UNKNOWN)
        if iface is None:
            notes["lanplus"] = note("ipmi.interface")
        cs = bmc.get("cipher_suite")
        if cs is None:
            suite, notes["cipher_suite"] = DEFAULT_CIPHER_SUITE, note("ipmi.cipher_suite")
        else:
            suite = cs if isinstance(cs, int) and not isinstance(cs, bool) else UNKNOWN
    out: list[Resource] = [BmcEndpoint(
        **{**base, "name": f"{name} bmc", "location": at("bmc"), "notes": notes}, host=name, address=address,
        protocol=protocol, lanplus=lanplus, cipher_suite=suite, tls=tls, verify_tls=verify,
        locations={"address": at("bmc", "address"), "protocol": at("bmc", "protocol"),
                   "lanplus": at("bmc", "interface") if "interface" in bmc else at("bmc"),
                   "cipher_suite": at("bmc", "cipher_suite") if "cipher_suite" in bmc else at("bmc"),
                   "tls": at("bmc", "address"),
                   "verify_tls": at("bmc", "verify_tls") if "verify_tls" in bmc else at("bmc")})]
    ssh = deep_merge(ssh_defaults, _dict(host.get("ssh")))
    ssh_addr = ssh.get("address") or host.get("address")
    public = is_public_address(str(ssh_addr)) if ssh_addr else None
    pinned = bool(ssh.get("pin_on_first_contact"))
    hw = _dict(host.get("hardware"))
    gpus = hw.get("gpu_count")
    out.append(ComputeNode(
        **{**base, "name": name, "notes": {"public_ip": "the SSH address is a host name" if ssh_addr and public is None
                                           else ""}},
        instance_type=str(hw.get("gpu_model") or "") or None, gpu=True if gpus is None else bool(gpus),
        public_ip=UNKNOWN if ssh_addr and public is None else (None if not ssh_addr else public),
        ssh_host_key_verification=not pinned,
        locations={"public_ip": at("ssh", "address") if "address" in _dict(host.get("ssh")) else at(),
                   "ssh_host_key_verification": at("ssh", "pin_on_first_contact")}))
    return out


def inventory_resources(data: dict[str, Any], file: str, pos: Positions) -> list[Resource]:
    """The hosts as the driver reads them (:func:`metalfleet.providers.ipmi.inventory.host_entries`: the same
    walk and the same ``defaults`` merge), each judged leniently."""
    ssh_top = _dict(data.get("ssh"))
    out: list[Resource] = []
    for entry in host_entries(data):
        out.extend(_host_resources(entry.name, entry.data, entry.path, file, pos, ssh_top))
    return out
