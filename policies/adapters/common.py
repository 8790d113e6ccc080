"""Helpers the adapters share: reading nested provider data that may hold UNKNOWN, key styles, GPU types."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model import UNKNOWN, Maybe, Unknown

__all__ = ["Assumptions", "ShapeError", "block", "blocks", "gpu_type", "json_type", "maybe_bool", "maybe_int",
           "maybe_str", "snake_keys", "tags_of"]


class ShapeError(ValueError):
    """The document is JSON of a kind told apart, but its shape is not that kind's (``steps`` a string): the input
    is unreadable (the CLI exits 2 with this one line), never read as empty."""


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for one-line messages ("a string", "an array")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


@dataclass
class Assumptions:
    """Account-level settings that change provider defaults: from the policy config or from the input itself
    (a plan that also turns on EBS default encryption)."""

    ebs_encryption_by_default: bool = False
    imds_tokens_required_by_default: bool = False
    #: Terraform: subnet address -> map_public_ip_on_launch, for instances that name no public-IP setting.
    subnet_public: dict[str, Maybe[bool]] = field(default_factory=dict)


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
#: Values under these keys are maps the user wrote (tag keys keep their spelling).
_MAPS = frozenset({"tags", "tags_all", "volume_tags", "labels", "metadata", "default_tags"})


def snake(key: str) -> str:
    return _CAMEL.sub(r"_\1", key).lower()


def snake_keys(value: Any, _in_map: bool = False) -> Any:
    """Pulumi's camelCase property names as Terraform's snake_case ones; user maps (tags) left as written."""
    if isinstance(value, dict):
        if _in_map:
            return dict(value)
        out = {}
        for k, v in value.items():
            key = snake(k) if isinstance(k, str) else k
            out[key] = snake_keys(v, key in _MAPS)
        return out
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def block(d: Any, *keys: str) -> Any:
    """A nested block: Terraform keeps blocks as lists of one object, Pulumi as the object. None if absent,
    UNKNOWN if unknown."""
    if not isinstance(d, dict):
        return None
    for key in keys:
        if key in d:
            v = d[key]
            if v is UNKNOWN:
                return UNKNOWN
            if isinstance(v, list):
                return v[0] if v else None
            return v
    return None


def blocks(d: Any, *keys: str) -> Any:
    """A repeated block as a list (either spelling: ``ebs_block_device`` / ``ebs_block_devices``)."""
    if not isinstance(d, dict):
        return []
    for key in keys:
        if key in d:
            v = d[key]
            if v is UNKNOWN:
                return UNKNOWN
            if v is None:
                return []
            return list(v) if isinstance(v, list) else [v]
    return []


def maybe_bool(v: Any) -> Maybe[bool] | None:
    """true/false (also Terraform's "true"/"false" strings in launch templates); None if absent."""
    if v is True or v is False:
        return v
    if v is None or v == "":
        return None
    if isinstance(v, Unknown):
        return Unknown.UNKNOWN
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    if isinstance(v, int | float):
        return bool(v)
    return UNKNOWN


def maybe_int(v: Any) -> Maybe[int] | None:
    if isinstance(v, Unknown):
        return Unknown.UNKNOWN
    if v is None or v == "":
        return None
    try:
        return int(str(v)) if isinstance(v, str) else int(v)
    except (TypeError, ValueError):
        return UNKNOWN


def maybe_str(v: Any) -> Maybe[str] | None:
    if type(v) is str:
        return v or None
    if isinstance(v, Unknown):
        return Unknown.UNKNOWN
    if v is None or v == "":
        return None
    return str(v)


def tags_of(d: Any, *keys: str) -> Maybe[Mapping[str, str]]:
    """The first tag map present (``tags_all`` includes a provider's default tags); {} if none."""
    for key in keys:
        if isinstance(d, dict) and key in d:
            v = d[key]
            if v is UNKNOWN:
                continue  # tags_all is computed at plan time: fall back to tags
            if v is None:
                continue
            if isinstance(v, dict):
                for x in v.values():
                    if type(x) is not str:
                        break
                else:
                    return v  # the usual case: already a map of strings
                return {str(k): ("" if x is UNKNOWN else str(x)) for k, x in v.items()}
            if isinstance(v, list):  # [{key:, value:}] forms
                return {str(i.get("key")): str(i.get("value")) for i in v if isinstance(i, dict)}
    return {}


# ------------------------------------------------------------------------------------------ GPU types

_GPU = {
    # EC2 accelerated computing: P (NVIDIA training), G (graphics/inference), Trn/Inf (Trainium/Inferentia),
    # DL1/DL2q (Gaudi/Qualcomm).
    "aws": re.compile(r"^(p\d|g\d|gr\d|trn\d|inf\d|dl\d)"),
    # ECS GPU families: gn*/ebmgn* (GPU compute, bare metal), sgn/vgn (virtualised GPU), gi* (inference).
    "alibaba": re.compile(r"^ecs\.(ebm)?(gn|sgn|vgn|gi|ga)\d"),
    # Huawei Cloud GPU/Ascend flavors: p*/pi*/g* (NVIDIA), ai*/kat*/kai* (Ascend); BMS flavors start physical.
    "huawei": re.compile(r"^(physical\.)?(p\d|pi\d|g\d|ai\d|kat\d|kai\d|ki\d)"),
}
_NOT_GPU = {
    "aws": re.compile(r"^(t\d|m\d|c\d|r\d|x\d|x1|z\d|i\d|im\d|is\d|d\d|h\d|a1|u-|u\d|mac|hpc\d|vt\d)"),
    "alibaba": re.compile(r"^ecs\.(ebm)?(g|c|r|hf|hfc|hfg|hfr|s|t|n|e|u|i|d|re)\d"),
    "huawei": re.compile(r"^(physical\.)?(s\d|c\d|m\d|e\d|h\d|d\d|i\d|ir\d|kc\d|ac\d|x\d)"),
}


_GPU_TYPES: dict[tuple[str, str], Maybe[bool]] = {}


def gpu_type(platform: str, instance_type: Any) -> Maybe[bool]:
    """True for a known accelerator family, False for a known general-purpose one, UNKNOWN otherwise (so a
    rule scoped to GPU nodes still judges a node it cannot place)."""
    if not isinstance(instance_type, str) or not instance_type:
        return UNKNOWN
    key = (platform, instance_type)
    found = _GPU_TYPES.get(key)
    if found is None:
        found = _GPU_TYPES[key] = _gpu_type(platform, instance_type)
    return found


def _gpu_type(platform: str, instance_type: str) -> Maybe[bool]:
    t = instance_type.lower()
    gpu, not_gpu = _GPU.get(platform), _NOT_GPU.get(platform)
    if gpu is not None and gpu.match(t):
        return True
    if not_gpu is not None and not_gpu.match(t):
        return False
    return UNKNOWN
