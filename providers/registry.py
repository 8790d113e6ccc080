"""Lazy provider registry: the platforms are the :class:`~metalfleet.providers.record.ProviderRecord` objects
registered in the ``metalfleet.providers`` entry-point group (the built-in ones in metalfleet's own pyproject, a
third-party one in its package's), and a driver's SDK is imported only when that driver is built.

The older ``metalfleet.drivers`` group (a name and a driver class) is still read, as a record with no rules, so a
driver package written for it keeps working; a name in both groups is the record's.
"""

from __future__ import annotations

import inspect
import math
import re
import sys
from collections.abc import Sequence
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .contract import ComputeDriver
from .errors import InvalidSpecError, MetalfleetError
from .record import ProviderRecord

__all__ = ["available_drivers", "find_record", "get_driver", "parse_driver_config", "provider_record",
           "provider_records"]

ENTRY_POINT_GROUP = "metalfleet.providers"
#: Driver-only registrations (the group before provider records).
DRIVER_GROUP = "metalfleet.drivers"


def _registered() -> dict[str, EntryPoint]:
    """Name -> entry point: the driver-only ones first, so a record of the same name replaces its driver's."""
    return _scan(tuple(sys.path))


@cache
def _scan(path: tuple[str, ...]) -> dict[str, EntryPoint]:
    """The installed entry points, read once per import path (a scan of every distribution costs milliseconds,
    and each parsed spec asks)."""
    found = {ep.name: ep for ep in entry_points(group=DRIVER_GROUP)}
    found.update((ep.name, ep) for ep in entry_points(group=ENTRY_POINT_GROUP))
    return found


def available_drivers() -> list[str]:
    return sorted(_registered())


def _unknown(name: str) -> InvalidSpecError:
    return InvalidSpecError(f"unknown provider {name!r}; available: {', '.join(available_drivers())}",
                            field="provider", value=name)


@cache
def _record(name: str, ep: EntryPoint) -> ProviderRecord:
    value = ep.load()
    if ep.group == DRIVER_GROUP:
        return ProviderRecord(name=name, driver=value)
    if not isinstance(value, ProviderRecord) or value.name != name:
        raise MetalfleetError(f"entry point {name} = {ep.value} in {ENTRY_POINT_GROUP} is not the ProviderRecord "
                              f"of provider {name!r}", provider=name)
    return value


def find_record(name: str) -> ProviderRecord | None:
    """The record of provider ``name``, or None when no such provider is registered."""
    ep = _registered().get(name)
    return _record(name, ep) if ep is not None else None


def provider_record(name: str) -> ProviderRecord:
    """The record of provider ``name``; an InvalidSpecError (``provider``) listing the others when none is."""
    record = find_record(name)
    if record is None:
        raise _unknown(name)
    return record


def provider_records() -> list[ProviderRecord]:
    """Every registered provider's record, by name."""
    return [_record(name, ep) for name, ep in sorted(_registered().items())]


def get_driver(name: str, **config: Any) -> ComputeDriver:
    """Build the driver called ``name`` with ``config`` (credentials come from env unless given)."""
    record = provider_record(name)
    try:
        driver = record.factory()(**config)
    except ImportError as exc:
        hint = f"an extra that is not installed: pip install 'metalfleet[{record.extra}]'" if record.extra \
            else "a package that is not installed"
        raise InvalidSpecError(f"provider {name!r} needs {hint} ({exc})", field="provider", value=name) from exc
    return driver  # type: ignore[no-any-return]


def _factory(name: str) -> Any:
    """The constructor of driver ``name`` (not called: no SDK is imported), or None for an unknown name."""
    record = find_record(name)
    return record.factory() if record is not None else None


def _split_union(text: str) -> list[str]:
    """``a | b[c | d]`` -> ``["a", "b[c | d]"]`` (splits on top-level ``|`` only)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[("
        depth -= ch in "])"
        if ch == "|" and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _annotation(param: inspect.Parameter) -> list[str]:
    """The parameter's type as the names of a union's members (``["float"]``, ``["str", "None"]``); [] if none."""
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        default = param.default
        if default is inspect.Parameter.empty or default is None:
            return []
        return [type(default).__name__]
    text = ann if isinstance(ann, str) else inspect.formatannotation(ann)
    text = text.replace("typing.", "").replace("collections.abc.", "")
    if text.startswith("Optional[") and text.endswith("]"):
        return [*_split_union(text[len("Optional["):-1]), "None"]
    return _split_union(text)


def _json(key: str, value: str, item: str, flag: str, kind: type) -> Any:
    from .textfile import BadFileError, parse_json

    try:
        data = parse_json(value, f"{flag} {key}", "value of")
    except BadFileError as exc:
        reason = str(exc).split(" is not valid JSON", 1)[-1].lstrip(": ")
        raise InvalidSpecError(f"{flag} {_short(item)}: {key} takes JSON, and this is not valid JSON: {reason}",
                               field=f"driver_config.{key}", value=value) from None
    if not isinstance(data, kind):
        raise InvalidSpecError(f"{flag} {_short(item)}: {key} takes a JSON {kind.__name__}",
                               field=f"driver_config.{key}", value=value)
    return data


def _short(item: str) -> str:
    from .textfile import shorten

    return shorten(item, 60)


def _convert(key: str, value: str, item: str, flag: str, param: inspect.Parameter) -> Any:
    """``value`` (the text after ``KEY=``) as the parameter's annotated (or default's) type."""
    members = _annotation(param)
    nullable = "None" in members
    members = [m for m in members if m != "None"]

    def bad(expected: str) -> InvalidSpecError:
        return InvalidSpecError(f"{flag} {_short(item)}: {key} takes {expected}, got {_short(value)}",
                                field=f"driver_config.{key}", value=value)

    if nullable and value in ("null", "none", "None"):
        return None
    if not members or members == ["Any"]:  # untyped: the old rule (JSON-looking values decoded)
        if value[:1] in "[{0123456789-" or value in ("true", "false"):
            return _json(key, value, item, flag, object)
        return value
    first = members[0]
    default = param.default
    non_negative = isinstance(default, int | float) and not isinstance(default, bool) and default >= 0
    if first == "bool":
        if value not in ("true", "false"):
            raise bad("true or false")
        return value == "true"
    if first == "int":
        if not re.fullmatch(r"[+-]?\d{1,18}", value) or (non_negative and value.startswith("-")):
            raise bad("a whole number" + (" >= 0" if non_negative else ""))
        return int(value)
    if first == "float":
        try:
            number = float(value)
        except ValueError:
            raise bad("a number") from None
        if not math.isfinite(number) or (non_negative and number < 0):
            raise bad("a finite number" + (" >= 0" if non_negative else ""))
        return number
    if first.startswith("Literal["):
        choices = [c.strip().strip("'\"") for c in first[len("Literal["):-1].split(",")]
        if value not in choices:
            raise bad("one of " + ", ".join(choices))
        return value
    if first == "str" or first.startswith(("PathLike", "os.PathLike")):
        return value
    if first.split("[")[0] in ("Mapping", "dict", "MutableMapping"):
        return _json(key, value, item, flag, dict)
    if first.split("[")[0] in ("Sequence", "list", "tuple", "Iterable"):
        return _json(key, value, item, flag, list)
    raise bad(f"a {first} object, which cannot be given on the command line")


#: Settings a caller passes itself: ``region`` comes from the spec's ``region``.
_FROM_SPEC = {"region": "the spec's region"}


def _parameters(provider: str | None) -> dict[str, list[tuple[str, inspect.Parameter]]]:
    """Setting name -> (driver, constructor parameter) of ``provider``'s driver, or of every driver when None."""
    names = [provider] if provider else available_drivers()
    out: dict[str, list[tuple[str, inspect.Parameter]]] = {}
    for name in names:
        try:
            factory = _factory(name)
            params = inspect.signature(factory).parameters.values() if factory is not None else []
        except Exception:  # a third-party driver that cannot even load says so when it is built
            continue
        for param in params:
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) or param.name == "self":
                continue
            out.setdefault(param.name, []).append((name, param))
    return out


def parse_driver_config(pairs: Sequence[str], flag: str = "--driver-config", provider: str | None = None) \
        -> dict[str, Any]:
    """``KEY=VALUE`` command-line items as driver settings, checked before any driver is built.

    Every key must be a parameter of the driver's constructor (``provider``'s; without it, of any installed
    driver), and every value converts to that parameter's annotated type (a number, true/false, one of a
    Literal's choices, JSON for a mapping or list; an untyped one as JSON when it looks like JSON, else text).
    A number whose default is >= 0 (timeouts, intervals) must be too. Anything else is an InvalidSpecError
    naming the flag, the key and the value: ``poll=1x`` would otherwise reach the driver as the text "1x", and
    ``nosuchkey=1`` end in a TypeError traceback.
    """
    known = _parameters(provider)
    if provider and not known and provider not in available_drivers():
        raise _unknown(provider)
    out: dict[str, Any] = {}
    for item in pairs:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidSpecError(f"{flag} takes KEY=VALUE, got {_short(item)}", field=flag.lstrip("-"),
                                   value=item)
        if key in _FROM_SPEC:
            raise InvalidSpecError(f"{flag} {_short(item)}: {key} comes from {_FROM_SPEC[key]}, not from {flag}",
                                   field=f"driver_config.{key}", value=value)
        if key not in known:
            who = f"the {provider} driver takes" if provider else "no installed driver takes"
            names = ", ".join(sorted(k for k in known if k not in _FROM_SPEC)) or "none"
            raise InvalidSpecError(f"{flag} {_short(item)}: {who} no setting {key!r} (settings: {names})"
                                   if provider else f"{flag} {_short(item)}: {who} a setting {key!r} "
                                   f"(settings: {names})", field=f"driver_config.{key}", value=value)
        if key in out:
            raise InvalidSpecError(f"{flag} {_short(item)}: {key} is given twice", field=f"driver_config.{key}",
                                   value=value)
        problems: list[InvalidSpecError] = []
        for _driver, param in known[key]:  # one driver, or each that takes the key: the first that accepts it
            try:
                out[key] = _convert(key, value, item, flag, param)
                break
            except InvalidSpecError as exc:
                problems.append(exc)
        else:
            raise problems[0]
    return out
