"""Per-offering expectations (``baselines.json``), how overrides are laid over them, and their types.

The file is read as it is; :func:`resolve_baseline` lays defaults, the offering's entry and the
overrides over each other (as mappings, so an override may only name a known field) and returns a
frozen :class:`Baseline`. A value of the wrong type (an override ``gpu.count=eight``) is an
:class:`InvalidSpecError` naming the field.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, TypeVar

from metalfleet.providers.errors import InvalidSpecError

__all__ = [
    "DEFAULT_THRESHOLD",
    "AllReduceBaseline",
    "Baseline",
    "FabricBaseline",
    "FleetBaseline",
    "GpuBaseline",
    "HcclAllReduceBaseline",
    "HcclBaseline",
    "InterconnectBaseline",
    "NcclBaseline",
    "ScalingPoint",
    "StorageBaseline",
    "known_offerings",
    "load_baselines",
    "resolve_baseline",
    "set_dotted",
]

DEFAULT_THRESHOLD = 0.9


# --------------------------------------------------------------------------------------------
# Types (one field per key of baselines.json; null is None: the check that needs it is skipped)


@dataclass(frozen=True)
class GpuBaseline:
    count: int | None = None
    model: str | None = None
    name_regex: str | None = None
    min_memory_mib: int | None = None
    max_volatile_uncorrected_ecc: int = 0
    require_ecc_enabled: bool = True
    require_persistence_mode: bool = False
    source: str | None = None


@dataclass(frozen=True)
class InterconnectBaseline:
    #: "nvlink", "hccs", "pcie" or None.
    kind: str | None = None
    #: The ``nvidia-smi topo -m`` / ``npu-smi info -t topo`` link every device pair must show (NV18, HCCS...).
    topo_link: str | None = None
    links_per_gpu: int | None = None
    link_gbs: float | None = None
    source: str | None = None


@dataclass(frozen=True)
class FabricBaseline:
    #: "none", "efa", "infiniband", "roce", "erdma" or "hccs" (None reads as "none").
    kind: str | None = "none"
    ports: int | None = None
    port_gbps: int | None = None
    total_gbps: int | None = None
    #: The NCCL network plugin the fabric must use (NET/OFI, NET/IB).
    nccl_net: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class ScalingPoint:
    """The all_reduce bus bandwidth expected across ``nodes`` nodes, with where the figure comes from."""

    nodes: int
    busbw_gbs: float
    source: str | None = None
    #: No public measurement at this size: a figure reasoned from others (the source says how).
    approximate: bool = False


@dataclass(frozen=True)
class AllReduceBaseline:
    intra_node_ring_busbw_gbs: float | None = None
    intra_node_nvls_busbw_gbs: float | None = None
    #: The multi-node figure when ``multi_node_scaling`` gives none (held at every node count).
    multi_node_busbw_gbs: float | None = None
    #: Expected busbw by node count, ascending; between points interpolated in log2(nodes), past the last held.
    multi_node_scaling: tuple[ScalingPoint, ...] = ()
    algorithm_when_unknown: str = "ring"
    source: str | None = None

    def multi_node(self, nodes: int) -> tuple[float | None, str]:
        """(expected busbw across ``nodes`` nodes, how it was found): the scaling curve, else the flat figure."""
        points = sorted(self.multi_node_scaling, key=lambda p: p.nodes)
        if not points:
            if self.multi_node_busbw_gbs is None:
                return None, "no multi-node figure"
            return float(self.multi_node_busbw_gbs), "one multi-node figure for every node count"

        def tag(p: ScalingPoint) -> str:
            return " (approximate)" if p.approximate else ""

        if nodes <= points[0].nodes:
            p = points[0]
            return p.busbw_gbs, f"the {p.nodes}-node figure{tag(p)}" + (
                "" if nodes == p.nodes else ", the smallest size known")
        if nodes >= points[-1].nodes:
            p = points[-1]
            return p.busbw_gbs, f"the {p.nodes}-node figure{tag(p)}" + (
                "" if nodes == p.nodes else f", the largest size known, held at {nodes} nodes (approximate)")
        lo = max((p for p in points if p.nodes <= nodes), key=lambda p: p.nodes)
        hi = min((p for p in points if p.nodes >= nodes), key=lambda p: p.nodes)
        if lo.nodes == hi.nodes:
            return lo.busbw_gbs, f"the {lo.nodes}-node figure{tag(lo)}"
        t = (math.log2(nodes) - math.log2(lo.nodes)) / (math.log2(hi.nodes) - math.log2(lo.nodes))
        value = lo.busbw_gbs + t * (hi.busbw_gbs - lo.busbw_gbs)
        return round(value, 1), (f"between the {lo.nodes}-node ({lo.busbw_gbs:g}{tag(lo)}) and {hi.nodes}-node "
                                 f"({hi.busbw_gbs:g}{tag(hi)}) figures, in log2(nodes)")


@dataclass(frozen=True)
class NcclBaseline:
    all_reduce: AllReduceBaseline = AllReduceBaseline()
    measure_min_bytes: int = 0


@dataclass(frozen=True)
class HcclAllReduceBaseline:
    intra_node_busbw_gbs: float | None = None
    source: str | None = None


@dataclass(frozen=True)
class HcclBaseline:
    all_reduce: HcclAllReduceBaseline = HcclAllReduceBaseline()
    measure_min_bytes: int = 0
    ranks: int | None = None


@dataclass(frozen=True)
class StorageBaseline:
    nvme_count: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class FleetBaseline:
    """How a node is held against its peers (median and MAD of the fleet's figures)."""

    #: "advisory" (a warning) or "mandatory" (the node fails).
    outliers: str = "advisory"
    outlier_z: float = 3.5
    outlier_min_deficit: float = 0.05
    #: How often each localisation run repeats (a fault that fails only some runs shows as intermittent).
    localise_repeats: int = 2
    source: str | None = None


@dataclass(frozen=True)
class Baseline:
    """One offering's resolved expectations (defaults < the offering's entry < overrides)."""

    #: The canonical offering name (an alias resolves to it).
    name: str
    #: "nvidia" or "ascend".
    accelerator: str
    threshold: float
    #: The checks a node must pass (a skip of one fails the node).
    required: tuple[str, ...]
    gpu: GpuBaseline
    interconnect: InterconnectBaseline
    fabric: FabricBaseline
    nccl: NcclBaseline
    hccl: HcclBaseline
    storage: StorageBaseline
    fleet: FleetBaseline = FleetBaseline()
    provider: str | None = None
    aliases: tuple[str, ...] = ()
    notes: str | None = None
    threshold_source: str | None = None

    @property
    def ascend(self) -> bool:
        return self.accelerator == "ascend"

    def value(self, dotted: str) -> Any:
        """The value at a dotted path (``gpu.count``); None when a part is missing."""
        value: Any = self
        for key in dotted.split("."):
            value = getattr(value, key, None)
        return value


_T = TypeVar("_T")


def _check(kind: Any, value: Any, where: str) -> Any:
    """``value`` as type ``kind`` (a resolved annotation), or InvalidSpecError naming ``where``."""
    nullable = False
    if isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union:
        nullable = type(None) in typing.get_args(kind)
        if value is None and nullable:
            return None
        (kind,) = [a for a in typing.get_args(kind) if a is not type(None)]
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        if not isinstance(value, dict):
            raise InvalidSpecError(f"baseline field {where!r} must be a mapping, got {value!r}", field=where,
                                   value=value)
        return _typed(kind, value, where)
    if typing.get_origin(kind) is tuple and dataclasses.is_dataclass(typing.get_args(kind)[0]):
        item = typing.get_args(kind)[0]
        if not isinstance(value, list | tuple) or not all(isinstance(v, dict) for v in value):
            raise InvalidSpecError(f"baseline field {where!r} must be a list of mappings, got {value!r}",
                                   field=where, value=value)
        return tuple(_typed(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise InvalidSpecError(f"baseline field {where!r} must be a list of names, got {value!r}", field=where,
                                   value=value)
        return tuple(value)
    exact = {bool: isinstance(value, bool), str: isinstance(value, str),
             int: (isinstance(value, int) and not isinstance(value, bool))
             or (isinstance(value, float) and value.is_integer()),
             float: isinstance(value, int | float) and not isinstance(value, bool)}
    if not exact[kind]:
        what = f"{'an' if kind is int else 'a'} {kind.__name__}{' or null' if nullable else ''}"
        raise InvalidSpecError(f"baseline field {where!r} must be {what}, got {value!r}", field=where, value=value)
    return kind(value)


def _typed(cls: type[_T], data: dict[str, Any], path: str = "") -> _T:
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            values[f.name] = _check(hints[f.name], data[f.name], f"{path}.{f.name}" if path else f.name)
    return cls(**values)


@lru_cache(maxsize=1)
def _raw() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("baselines.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def load_baselines() -> dict[str, Any]:
    """A fresh copy of the whole baselines document (``defaults`` + ``offerings``)."""
    return copy.deepcopy(_raw())


def known_offerings() -> list[str]:
    return sorted(_raw()["offerings"])


def _canonical(name: str) -> str | None:
    offerings: dict[str, Any] = _raw()["offerings"]
    if name in offerings:
        return name
    for key, entry in offerings.items():
        if name in entry.get("aliases", []):
            return key
    return None


def _merge(base: dict[str, Any], top: dict[str, Any], path: str, strict: bool) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in top.items():
        where = f"{path}.{key}" if path else key
        if strict and key not in out:
            raise InvalidSpecError(f"unknown baseline field {where!r} in overrides", field=where, value=value)
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value, where, strict)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_baseline(offering: str, overrides: dict[str, Any] | None = None) -> Baseline:
    """Defaults, then the offering's entry, then ``overrides`` (which may only name known fields).

    The result's ``name`` is the canonical offering name. Raises InvalidSpecError for an unknown
    offering, an unknown override field, a value of the wrong type or a threshold outside (0, 1.5].
    """
    key = _canonical(offering)
    if key is None:
        known = ", ".join(known_offerings())
        raise InvalidSpecError(f"no acceptance baseline for offering {offering!r}; known: {known}",
                               field="offering", value=offering)
    doc = _raw()
    merged = _merge(doc["defaults"], doc["offerings"][key], "", strict=False)
    if overrides:
        if not isinstance(overrides, dict):
            raise InvalidSpecError("overrides must be a mapping", field="overrides", value=overrides)
        merged = _merge(merged, overrides, "", strict=True)
        ar_over = (overrides.get("nccl") or {}).get("all_reduce") or {}
        if isinstance(ar_over, dict) and "multi_node_busbw_gbs" in ar_over and "multi_node_scaling" not in ar_over:
            merged["nccl"]["all_reduce"]["multi_node_scaling"] = []  # the caller's own flat figure wins
    threshold = merged.get("threshold")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 < threshold <= 1.5:
        raise InvalidSpecError(f"threshold must be a fraction in (0, 1.5], got {threshold!r}",
                               field="threshold", value=threshold)
    if not isinstance(merged.get("required"), list):
        raise InvalidSpecError("required must be a list of check names", field="required", value=merged.get("required"))
    merged["name"] = key
    return _typed(Baseline, merged)


def set_dotted(tree: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, making the intermediate dicts."""
    keys = path.split(".")
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value
