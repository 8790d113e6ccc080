"""One recursive merge for layered settings (spec overrides from config, baseline overrides from a spec)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["deep_merge"]


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, recursively: overriding one field of a section keeps its siblings.

    A mapping in ``top`` merges into a mapping at the same key of ``base``; anything else (a list, a scalar,
    a mapping over a non-mapping) replaces the value. Neither input is changed."""
    out = dict(base)
    for k, v in top.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out
