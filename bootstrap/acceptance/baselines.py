"""Per-offering expectations (``baselines.json``) and how overrides are laid over them."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from importlib import resources
from typing import Any

from metalfleet.providers.errors import InvalidSpecError

__all__ = ["DEFAULT_THRESHOLD", "known_offerings", "load_baselines", "resolve_baseline", "set_dotted"]

DEFAULT_THRESHOLD = 0.9


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


def resolve_baseline(offering: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Defaults, then the offering's entry, then ``overrides`` (which may only name known fields).

    The result carries ``name`` (the canonical offering name). Raises InvalidSpecError for an unknown
    offering, an unknown override field or a threshold outside (0, 1.5].
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
    threshold = merged.get("threshold")
    if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0 < threshold <= 1.5:
        raise InvalidSpecError(f"threshold must be a fraction in (0, 1.5], got {threshold!r}",
                               field="threshold", value=threshold)
    if not isinstance(merged.get("required"), list):
        raise InvalidSpecError("required must be a list of check names", field="required", value=merged.get("required"))
    merged["name"] = key
    return merged


def set_dotted(tree: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, making the intermediate dicts."""
    keys = path.split(".")
    for key in keys[:-1]:
        tree = tree.setdefault(key, {})
    tree[keys[-1]] = value
