"""metalfleet's own resources: a cluster spec (cluster.yaml) and the Pulumi dynamic resources built from it.

What a driver does beyond the spec (metalfleet's AWS driver always requires IMDSv2 tokens and copies the
node's tags to its volumes) is stated in its provider record (``ProviderRecord.policy_facts``), with the code it
comes from. A provider that is not registered, or whose record states nothing, leaves those values UNKNOWN, never
assumed compliant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from metalfleet.providers.record import Guarantee

from ..defaults import note
from ..model import UNKNOWN, ComputeNode, Location, Maybe, Reservation, Resource, SecurityRule, Storage, Volume

__all__ = ["cluster_resources", "driver_facts", "network_resources", "node_resources"]

Where = Callable[..., Location]


def _guarantee_note(g: Guarantee) -> str:
    return f"absent: {g.meaning} [{g.source}]"


def driver_facts(provider: str) -> dict[str, Any]:
    """What ``provider``'s record says its driver guarantees: ``imds_tokens`` (True, or None: no metadata service),
    ``volume_tags`` (``"node"``, UNKNOWN, or None: no separate volumes), ``own_network``, and a note for each; all
    UNKNOWN for a provider that is not registered or states nothing."""
    from metalfleet.providers.registry import find_record

    record = find_record(provider)
    facts = record.policy_facts if record else None
    if facts is None:
        return {"imds_tokens": UNKNOWN, "imds_note": note("metalfleet.driver.unknown"), "volume_tags": UNKNOWN,
                "volume_tags_note": note("metalfleet.driver.unknown"), "own_network": False}
    tokens, tags = facts.metadata_tokens, facts.volume_tags
    return {"imds_tokens": tokens.value if tokens else None, "imds_note": _guarantee_note(tokens) if tokens else "",
            "volume_tags": (UNKNOWN if tags.value == "unknown" else tags.value) if tags else None,
            "volume_tags_note": _guarantee_note(tags) if tags else "", "own_network": facts.own_network}


def _volume(name: str, role: str, v: Mapping[str, Any], default_key: Any, facts: Mapping[str, Any],
            base: dict[str, Any], where: Location, tags_where: Location, enc_where: Location | None = None) -> Volume:
    key = v.get("kms_key_id") or default_key
    notes: dict[str, str] = {}
    if not key:
        notes["kms_key"] = note("metalfleet.storage.kms_key_id")
    if facts["volume_tags"] is UNKNOWN:
        notes["tags"] = str(facts.get("volume_tags_note") or "")
    encrypted = v.get("encrypted")
    if encrypted is None:
        encrypted, notes["encrypted"] = True, note("metalfleet.storage.encrypted")
    return Volume(**{**base, "name": name, "notes": notes}, role=role, encrypted=bool(encrypted),
                  kms_key=str(key) if key else None, provider_managed_key=str(key or "").startswith("alias/aws/"),
                  tags=UNKNOWN if facts["volume_tags"] is UNKNOWN else None, attached_to=base["name"],
                  locations={"encrypted": enc_where or where, "kms_key": where, "tags": tags_where})


def cluster_resources(spec: Mapping[str, Any], where: Where, source: str, type_name: str,
                      parts: tuple[str, ...] = ("node", "network", "ssh", "storage", "capacity"),
                      name: str | None = None) -> list[Resource]:
    """Views of a cluster spec (``spec`` as ClusterSpec.model_dump(mode="json")).

    ``where(*path)`` gives the location of a spec field; ``parts`` picks what to describe (a Pulumi
    NodeBootstrap describes only its SSH and storage, the GpuNode the node itself).
    """
    provider = str(spec.get("provider") or "unknown")
    name = name or str(spec.get("name") or "cluster")
    base: dict[str, Any] = {"name": name, "platform": provider, "source": source, "type": type_name,
                            "location": where()}
    net = spec.get("network") or {}
    storage = spec.get("storage") or {}
    ssh = spec.get("ssh") or {}
    out: list[Resource] = []
    facts = driver_facts(provider)
    if "node" in parts:
        placement = spec.get("placement") or {}
        strategy = placement.get("strategy") or "cluster"
        group = (placement.get("group_name") or f"{name}-pg") if strategy == "cluster" else ""
        notes: dict[str, str] = {"public_ip": note("metalfleet.network.public_ip") if "public_ip" not in net else "",
                 "metadata_tokens_required": str(facts.get("imds_note") or ""),
                 "placement_group": f"placement.strategy is {strategy}, not a cluster placement group"
                 if not group else ""}
        out.append(ComputeNode(
            **{**base, "notes": {k: v for k, v in notes.items() if v}},
            instance_type=spec.get("offering") or "(by requirements)", gpu=True, count=int(spec.get("count") or 1),
            public_ip=None if facts["own_network"] else bool(net.get("public_ip")),
            metadata_tokens_required=facts["imds_tokens"], tags=dict(spec.get("tags") or {}),
            placement_group=None if facts["own_network"] else group,
            capacity_reservation=(spec.get("capacity") or {}).get("reservation_id"),
            locations={"public_ip": where("network", "public_ip"), "tags": where("tags"),
                       "placement_group": where("placement"), "metadata_tokens_required": where("provider")}))
        root = storage.get("root") or {"size_gib": 200}
        out.append(_volume(f"{name} root volume", "root", root, storage.get("kms_key_id"), facts, base,
                           where("storage", "root"), where("tags"), where("storage", "root", "encrypted")))
        for i, v in enumerate(storage.get("data") or []):
            out.append(_volume(f"{name} data volume {i}", "data", v, storage.get("kms_key_id"), facts, base,
                               where("storage", "data", i), where("tags"), where("storage", "data", i, "encrypted")))
    if "ssh" in parts:
        pinned = bool(ssh.get("pin_on_first_contact"))
        out.append(ComputeNode(**{**base, "notes": {"ssh_host_key_verification": "ssh.pin_on_first_contact: true"}
                                  if pinned else {}},
                               gpu=True, ssh_host_key_verification=not pinned,
                               locations={"ssh_host_key_verification": where("ssh", "pin_on_first_contact")}))
    if "network" in parts and not net.get("security_group_ids"):
        port = int(ssh.get("port") or 22)
        for i, cidr in enumerate(net.get("ssh_ingress_cidrs") or []):
            out.append(SecurityRule(**{**base, "name": f"{name} network.ssh_ingress_cidrs[{i}]",
                                       "location": where("network", "ssh_ingress_cidrs", i)},
                                    protocol="tcp", port_from=port, port_to=port, sources=(str(cidr),),
                                    ssh_port=port))
    if "storage" in parts:
        warm, cold = storage.get("warm"), storage.get("cold")
        why = "metalfleet mounts this store; the spec cannot show how it is encrypted"
        if warm:
            out.append(Storage(**{**base, "name": f"{name} storage.warm", "location": where("storage", "warm"),
                                  "notes": {"encrypted": why}}, storage_kind=f"{warm.get('kind')} file system",
                               target=str(warm.get("source") or ""), encrypted=UNKNOWN))
        if cold:
            target = f"{cold.get('kind')}://{cold.get('bucket')}"
            out.append(Storage(**{**base, "name": f"{name} storage.cold", "location": where("storage", "cold"),
                                  "notes": {"encrypted": why}}, storage_kind=f"{cold.get('kind')} bucket",
                               target=target, encrypted=UNKNOWN))
    if "capacity" in parts:
        rid = (spec.get("capacity") or {}).get("reservation_id")
        if rid:
            out.append(Reservation(**{**base, "name": f"{name} capacity {rid}",
                                      "location": where("capacity", "reservation_id"),
                                      "notes": {"ends": "the spec names the reservation but not when it ends"}},
                                   ends=UNKNOWN))
    return out


def node_resources(provider: str, spec: Mapping[str, Any], name: str, location: Location, source: str,
                   type_name: str) -> list[Resource]:
    """A GpuNode's view: its node spec as stored (``metalfleet.providers.models.node_spec_to_dict``)."""
    facts = driver_facts(provider)
    tags = {k: v for k, v in (spec.get("tags") or {}).items()}
    base: dict[str, Any] = {"name": name, "platform": provider, "source": source, "type": type_name,
                            "location": location}
    strategy = spec.get("placement_strategy") or "cluster"
    group: Maybe[str] = str(spec.get("placement_group") or "") if strategy == "cluster" else ""
    node = ComputeNode(**{**base, "notes": {"metadata_tokens_required": str(facts.get("imds_note") or "")}},
                       instance_type=spec.get("offering"), gpu=True, count=1,
                       public_ip=None if facts["own_network"] else bool(spec.get("public_ip")),
                       metadata_tokens_required=facts["imds_tokens"], tags=tags,
                       placement_group=None if facts["own_network"] else group,
                       capacity_reservation=spec.get("capacity_reservation_id"))
    out: list[Resource] = [node]
    vols = [("root", spec.get("root_volume") or {"size_gib": 200}),
            *(("data", v) for v in spec.get("data_volumes") or [])]
    for i, (role, v) in enumerate(vols):
        label = "root volume" if role == "root" else f"data volume {i - 1}"
        out.append(_volume(f"{name} {label}", role, v, None, facts, base, location, location))
    return out


def network_resources(provider: str, spec: Mapping[str, Any], name: str, location: Location, source: str,
                      type_name: str) -> list[Resource]:
    """A ClusterNetwork's view: the SSH ingress rules it puts on the cluster's security group."""
    if spec.get("security_group_ids"):
        return []
    port = int(spec.get("ssh_port") or 22)
    base: dict[str, Any] = {"platform": provider, "source": source, "type": type_name, "location": location}
    return [SecurityRule(**base, name=f"{name} ssh_ingress_cidrs[{i}]", protocol="tcp", port_from=port, port_to=port,
                         sources=(str(c),), ssh_port=port)
            for i, c in enumerate(spec.get("ssh_ingress_cidrs") or [])]
