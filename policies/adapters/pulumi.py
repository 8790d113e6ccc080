"""Pulumi resources: one resource (the CrossGuard pack's ``args``), a ``pulumi preview --json`` document, or a
``pulumi stack export``.

metalfleet's dynamic resources are recognised by their type names (``pulumi-python:dynamic/metalfleet:GpuNode``,
``...:NodeBootstrap``, ``...:ClusterAcceptance``, ``...:ClusterNetwork``) and, in state written before they had
names of their own (``pulumi-python:dynamic:Resource``), by the shape of their inputs. Native resources of
pulumi-aws, pulumi-alicloud and pulumi-huaweicloud go through :mod:`.native`. Values unknown during a
preview (Pulumi's unknown sentinels) become UNKNOWN; secret values are never read, only noted as set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ..model import UNKNOWN, Location, Resource
from .common import Assumptions, ShapeError, json_type, snake, snake_keys
from .metalfleet import cluster_resources, network_resources, node_resources
from .native import ACCOUNT_SETTINGS, PULUMI_TYPES, account_settings, native_resources
from .terraform import _COMPUTE, _GROUPS, _INTERFACES, _VOLUMES, PlanReader, _ResourceChange, created

__all__ = ["METALFLEET_TYPES", "metalfleet_kind", "plain", "pulumi_resources", "resources_from_export",
           "resources_from_preview"]

#: Pulumi's sentinels for values unknown during a preview (pulumi/sdk resource.UnknownValue and typed ones).
UNKNOWN_SENTINELS = frozenset({
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
})
_SIG = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
SECRET = "[secret]"

METALFLEET_TYPES: Mapping[str, str] = {
    "pulumi-python:dynamic/metalfleet:GpuNode": "GpuNode",
    "pulumi-python:dynamic/metalfleet:NodeBootstrap": "NodeBootstrap",
    "pulumi-python:dynamic/metalfleet:ClusterAcceptance": "ClusterAcceptance",
    "pulumi-python:dynamic/metalfleet:ClusterNetwork": "ClusterNetwork",
}
_OLD_DYNAMIC = "pulumi-python:dynamic:Resource"


def plain(value: Any) -> Any:
    """Inputs as plain data: unknown sentinels -> UNKNOWN, secrets -> "[secret]" (never read), and the
    CrossGuard SDK's read-only proxies unwrapped (without tripping their unknown checks)."""
    target = getattr(value, "_DictProxy__target", None)
    if target is None:
        target = getattr(value, "_ListProxy__target", None)
    if target is not None:
        value = target
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        if value.get(_SIG) == _SECRET_SIG:
            return SECRET
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if type(value).__name__ == "Secret" and hasattr(value, "value"):
        return SECRET
    return value


def metalfleet_kind(type_name: str, props: Mapping[str, Any], name: str = "") -> str | None:
    """GpuNode, NodeBootstrap, ClusterAcceptance or ClusterNetwork; None for anything else."""
    if type_name in METALFLEET_TYPES:
        return METALFLEET_TYPES[type_name]
    if type_name != _OLD_DYNAMIC:
        return None
    spec = props.get("spec")
    if not isinstance(spec, dict):
        return None
    if "provider" in props and "driver_config" in props:  # GpuNode and ClusterNetwork: provider/spec/driver_config
        # Outputs set apart the two in state; in a preview (inputs only, None values dropped) the name GpuCluster
        # gives the network ("<cluster>-network") does.
        if "resources" in props or "cluster" in props or name.endswith("-network"):
            return "ClusterNetwork"
        return "GpuNode"
    if "nodes" in props and "driver_config" in props:
        return "ClusterAcceptance"
    if "node" in props and "fingerprint" in props:
        return "NodeBootstrap"
    return None


def _metalfleet(kind: str, props: Mapping[str, Any], name: str, loc: Location, source: str,
                type_name: str) -> list[Resource]:
    raw_spec = props.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    if kind == "GpuNode":
        return node_resources(str(props.get("provider") or spec.get("provider") or "unknown"), spec, name, loc,
                              source, type_name)
    if kind == "ClusterNetwork":
        return network_resources(str(props.get("provider") or "unknown"), spec, name, loc, source, type_name)
    parts = ("ssh", "storage") if kind == "NodeBootstrap" else ("ssh",)
    return cluster_resources(spec, lambda *_: loc, source, type_name, parts, name=name)


def pulumi_resources(type_name: str, props: Any, name: str, urn: str | None = None, file: str | None = None,
                     assume: Assumptions | None = None, source: str = "pulumi") -> list[Resource]:
    """The neutral views of one Pulumi resource (``props``: its inputs, raw or as the CrossGuard SDK gives them)."""
    data = plain(props)
    if not isinstance(data, dict):
        return []
    loc = Location(file, address=urn or name)
    kind = metalfleet_kind(type_name, data, name)
    if kind is not None:
        return _metalfleet(kind, data, name, loc, source, type_name)
    tf_type = PULUMI_TYPES.get(type_name)
    if tf_type is None:
        return []
    return native_resources(tf_type, snake_keys(data), name, loc, source, assume or Assumptions())


def _name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1] if "::" in urn else urn


#: Resources read only for the links they make (:data:`.terraform.LINKS`), no view of their own.
_LINK_TYPES: Mapping[str, str] = {
    "aws:ec2/volumeAttachment:VolumeAttachment": "aws_volume_attachment",
    # pulumi-alicloud's EcsDiskAttachment and its older DiskAttachment (`pulumi import alicloud:ecs/...`)
    "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment": "alicloud_ecs_disk_attachment",
    "alicloud:ecs/diskAttachment:DiskAttachment": "alicloud_disk_attachment",
}
#: The inputs (snake_case) that name another resource, and the types it may be of: an input depending on one of
#: another type is not linked.
_TARGETS: Mapping[str, frozenset[str]] = {
    **dict.fromkeys(("instance", "instance_id", "network_interface", "network_interface_id", "port_id", "fixed_ip"),
                    _COMPUTE | _INTERFACES),
    "security_group_id": _GROUPS,
    **dict.fromkeys(("volume_id", "disk_id"), _VOLUMES),
}
#: The reference of an input known only after apply and computed from outside the document's resources (a
#: variable to the plan reader: never resolved).
_OUTSIDE = "var.pulumi"
_ADDRESS = re.compile(r"[a-z0-9]+_[a-z0-9_]+\.r[0-9]+")


def _split(value: Any) -> tuple[Any, Any]:
    """A plain value as a plan's ``after`` and ``after_unknown``: every UNKNOWN null in one, true in the other."""
    if value is UNKNOWN:
        return None, True
    if isinstance(value, dict):
        parts = {k: _split(v) for k, v in value.items()}
        return {k: a for k, (a, _) in parts.items()}, {k: u for k, (_, u) in parts.items() if u}
    if isinstance(value, list):
        items = [_split(v) for v in value]
        return [a for a, _ in items], [u for _, u in items]
    return value, False


def _references(inputs: Mapping[str, Any], unknown: Mapping[str, Any], deps: Any,
                addresses: Mapping[str, str]) -> dict[str, Any]:
    """A configuration's ``expressions`` for one resource: every input, with the one resource it depends on when
    that is of a type the input may name, else :data:`_OUTSIDE` when it is unknown, else a constant."""
    deps = {snake(k): v for k, v in deps.items() if isinstance(k, str)} if isinstance(deps, dict) else {}
    out: dict[str, Any] = {}
    for attr in inputs:
        urns = deps.get(attr)
        target = addresses.get(urns[0]) if isinstance(urns, list) and len(urns) == 1 else None
        if target is not None and target.split(".", 1)[0] in _TARGETS.get(attr, ()):
            out[attr] = {"references": [target]}
        else:
            out[attr] = {"references": [_OUTSIDE]} if attr in unknown else {"constant_value": None}
    return out


def _renamed(view: Resource, names: Mapping[str, str], urns: Mapping[str, str], file: str) -> Resource:
    """A plan reader's view as a Pulumi one: named by the resource's name, located at its URN."""
    def text(value: str) -> str:
        return _ADDRESS.sub(lambda m: names.get(m.group(0), m.group(0)), value)

    def loc(value: Location) -> Location:
        return Location(file, address=urns[value.address]) if value.address is not None and value.address in urns \
            else value

    changes: dict[str, Any] = {"source": "pulumi", "name": text(view.name), "location": loc(view.location),
                               "locations": {k: loc(v) for k, v in view.locations.items()},
                               "notes": {k: text(v) for k, v in view.notes.items()}}
    for field in view.__struct_fields__:
        value = getattr(view, field)
        if field not in changes and type(value) is str:
            changes[field] = text(value)
    return msgspec.structs.replace(view, **changes)


def _from_states(states: Iterable[Mapping[str, Any]], file: str, assume: Assumptions) -> list[Resource]:
    items = [(str(s.get("type") or ""), s.get("inputs") or {}, str(s.get("urn") or ""), s) for s in states]
    for t, inputs, _, _ in items:  # account-wide defaults first
        tf = PULUMI_TYPES.get(t)
        if tf in ACCOUNT_SETTINGS:
            account_settings(tf, snake_keys(plain(inputs)), assume)
    own: list[str | None] = []  # per item: the plan-like address its resource is read under
    data: dict[str, Any] = {}  # address -> its inputs, plain and snake_case
    for i, (t, inputs, _, _) in enumerate(items):
        tf = PULUMI_TYPES.get(t) or _LINK_TYPES.get(t)
        props = plain(inputs)
        own.append(f"{tf}.r{i}" if tf is not None and tf not in ACCOUNT_SETTINGS and isinstance(props, dict)
                   else None)
        if own[-1] is not None:
            data[f"{tf}.r{i}"] = snake_keys(props)
    addresses = {urn: a for (_, _, urn, _), a in zip(items, own, strict=True) if a is not None and urn}
    names = {a: _name(urn) for (_, _, urn, _), a in zip(items, own, strict=True) if a is not None}
    urns = {a: urn or _name(urn) for (_, _, urn, _), a in zip(items, own, strict=True) if a is not None}
    changes: list[_ResourceChange] = []
    config: list[dict[str, Any]] = []
    for (_, _, _, state), address in zip(items, own, strict=True):
        if address is None:
            continue
        after, unknown = _split(data[address])
        tf, name = address.split(".")
        changes.append(_ResourceChange(address=address, type=tf, name=name, change=created(after, unknown)))
        config.append({"address": address, "mode": "managed", "type": tf, "name": name,
                       "expressions": _references(after, unknown, state.get("propertyDependencies"), addresses)})
    views: dict[str, list[Resource]] = {}
    if changes:  # tf_dir: the document's own path, where no .tf files are found (a Pulumi program has none)
        reader = PlanReader(changes, {"root_module": {"resources": config}}, file, assume, file)
        for view in reader.views():
            views.setdefault(view.location.address or "", []).append(_renamed(view, names, urns, file))
    out: list[Resource] = []
    for (t, inputs, urn, _), address in zip(items, own, strict=True):
        if address is not None:
            out.extend(views.get(address, []))
        else:
            out.extend(pulumi_resources(t, inputs, _name(urn), urn, file, assume))
    return out


def _state(value: Any, where: str) -> Mapping[str, Any]:
    """One resource state (a step's ``newState``, an export's resource), checked for the fields read: ``type`` a
    string, ``urn`` a string if present, ``inputs`` an object if present (apitype.ResourceV3)."""
    if not isinstance(value, dict):
        raise ShapeError(f"{where} is {json_type(value)}, not a resource object")
    if not isinstance(value.get("type"), str):
        raise ShapeError(f"{where}.type is {json_type(value.get('type'))}, not a resource type name")
    for key, want in (("urn", str), ("inputs", dict)):
        v = value.get(key)
        if v is not None and not isinstance(v, want):
            raise ShapeError(f"{where}.{key} is {json_type(v)}, not {'a string' if want is str else 'an object'}")
    return value


def _array(value: Any, where: str, what: str) -> list[Any]:
    """A list the document must hold; anything else (null included: Pulumi leaves an empty list out, it never
    writes null) is a malformed document."""
    if not isinstance(value, list):
        raise ShapeError(f"{where} is {json_type(value)}, not an array of {what}")
    return value


def resources_from_preview(doc: Mapping[str, Any], file: str, assume: Assumptions) -> list[Resource]:
    """``pulumi preview --json``: every step's new state (what the stack will hold), deletes left out. A document
    whose steps are not an array of step objects is refused (:class:`.common.ShapeError`), never read as empty."""
    states: list[Mapping[str, Any]] = []
    for i, step in enumerate(_array(doc.get("steps"), "steps", "steps")):
        if not isinstance(step, dict):
            raise ShapeError(f"steps[{i}] is {json_type(step)}, not a step object")
        op = step.get("op")
        if op is not None and not isinstance(op, str):
            raise ShapeError(f"steps[{i}].op is {json_type(op)}, not a string")
        if op == "delete" or step.get("newState") is None:  # a delete (or a read of nothing) leaves no new state
            continue
        states.append(_state(step["newState"], f"steps[{i}].newState"))
    return _from_states(states, file, assume)


def resources_from_export(doc: Mapping[str, Any], file: str, assume: Assumptions) -> list[Resource]:
    """``pulumi stack export``: the resources in the deployment's state (an empty stack's deployment has none). A
    deployment that is not an object, or resources that are not an array of resource objects, is refused."""
    deployment = doc.get("deployment")
    if not isinstance(deployment, dict):
        raise ShapeError(f"deployment is {json_type(deployment)}, not an object")
    raw = _array(deployment.get("resources", []), "deployment.resources", "resources")  # an empty stack: absent
    resources = [_state(r, f"deployment.resources[{i}]") for i, r in enumerate(raw)]
    return _from_states([r for r in resources if not r.get("delete")], file, assume)
