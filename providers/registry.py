"""Lazy driver registry: a driver's SDK is imported only when that driver is asked for.

Built-in and third-party drivers are found through the ``metalfleet.drivers`` entry-point group;
the built-in table below is the fallback for a source checkout that is not installed.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from .contract import ComputeDriver
from .errors import InvalidSpecError

__all__ = ["available_drivers", "get_driver", "parse_driver_config"]

ENTRY_POINT_GROUP = "metalfleet.drivers"

_BUILTIN: dict[str, str] = {
    "fake": "metalfleet.providers.fake:FakeDriver",
    "aws": "metalfleet.providers.aws:AwsDriver",
    "huawei": "metalfleet.providers.huawei:HuaweiDriver",
    "alibaba": "metalfleet.providers.alibaba:AlibabaDriver",
    "ipmi": "metalfleet.providers.ipmi:IpmiDriver",
}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def available_drivers() -> list[str]:
    names = set(_BUILTIN)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def get_driver(name: str, **config: Any) -> ComputeDriver:
    """Build the driver called ``name`` with ``config`` (credentials come from env unless given)."""
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name in eps:
        factory = eps[name].load()
    elif name in _BUILTIN:
        factory = _load(_BUILTIN[name])
    else:
        raise InvalidSpecError(
            f"unknown provider {name!r}; available: {', '.join(available_drivers())}",
            field="provider",
            value=name,
        )
    try:
        driver = factory(**config)
    except ImportError as exc:
        raise InvalidSpecError(
            f"provider {name!r} needs an extra that is not installed: pip install 'metalfleet[{name}]' ({exc})",
            field="provider",
            value=name,
        ) from exc
    return driver  # type: ignore[no-any-return]


def parse_driver_config(pairs: Sequence[str], flag: str = "--driver-config") -> dict[str, Any]:
    """``KEY=VALUE`` command-line items as driver settings; JSON-looking values (numbers, lists,
    objects, true/false) are decoded, anything else stays a string."""
    out: dict[str, Any] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidSpecError(f"{flag} takes KEY=VALUE, got {item!r}", field=flag.lstrip("-"), value=item)
        out[key] = json.loads(value) if value[:1] in "[{0123456789" or value in ("true", "false") else value
    return out
