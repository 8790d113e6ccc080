"""The secret guard: what may be stored in plain stack state, and how secret values stay secret.

Dynamic providers receive resolved inputs and Pulumi stores every input and output in state. A value
stays encrypted there (with the stack's secrets provider) only if it reaches the resource as a secret
``Output``; a secret merged into a plain dict is stored in plaintext. So every resource here takes its
plain inputs (``spec``, ``driver_config``) with secret values cut out and replaced by :data:`MARK`,
plus one ``secrets`` input that is ``Output.secret`` and an ``additional_secret_outputs`` entry. The
provider puts the values back (:func:`reveal`) only in memory, and scrubs them from what it returns
and from the errors it raises (:func:`guarded`).

The rule, applied at program time to every plain value a resource would store, whatever its key:

1. Driver-config keys that name a credential (``secret``, ``password``, ``token``, ``access_key``,
   ``credential``, ``private_key``) are refused, secret or not: cloud credentials come from the
   environment or the provider's credential chain, never from resource inputs.
2. Values shaped like cloud credentials are refused, secret or not, for the same reason: an AWS access
   key id (``AKIA``/``ASIA`` + 16), an AWS secret access key (a 40-character run of the base64 alphabet
   with upper and lower case and at least 22 distinct characters: random keys nearly always have them,
   paths and words rarely do), an AWS session token (its ``IQoJb3JpZ2lu``/``FwoGZXIvYXdz`` prefixes).
3. A private-key block (PEM ``-----BEGIN ... PRIVATE KEY-----``, OpenSSH, PuTTY) is refused in plain
   inputs; marked secret (rule 4) it is accepted and kept secret (ssh key material is a real input).
4. A value the user marked secret is kept secret wherever it appears: every string leaf of a Pulumi
   config value set with ``pulumi config set --secret`` (an object's leaves too, as the engine marks the
   whole key), and values passed as secret (``secret_driver_config``, ``secret_spec``). A plain string
   that equals a marked value, or contains one of at least :data:`MIN_SUBSTRING` characters, is moved
   whole into the secret input. Shorter marked values match only whole strings, so a secret ``"1"``
   does not swallow every string with a 1 in it. Numbers and booleans are never matched.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import tempfile
import traceback
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pulumi

from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

__all__ = [
    "MARK", "MIN_SUBSTRING", "SECRETS", "SECRET_SPEC_FIELDS", "check_driver_config", "credential_kind", "guarded",
    "marked_values", "private_key_file", "refuse_credentials", "reveal", "scrub", "scrub_outputs", "secret_input",
    "secret_values", "split",
]

#: What a plain input holds where a secret value was cut out.
MARK = "[secret]"
#: The resource input (and output) that holds a resource's secret values.
SECRETS = "secrets"
#: Marked values at least this long are also found inside longer strings.
MIN_SUBSTRING = 6
#: Spec fields that may be given as secret Outputs: read only at apply time (by bootstrap and acceptance),
#: never while planning, so the program does not need their value.
SECRET_SPEC_FIELDS = ("ssh.private_key", "ssh.bastion", "ssh.user", "ssh.known_hosts")

_SECRET_WORDS = ("secret", "password", "token", "access_key", "credential", "private_key")
_B64 = "A-Za-z0-9/+"
_AWS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
_AWS_SECRET_KEY = re.compile(rf"(?<![{_B64}])[{_B64}]{{40}}(?![{_B64}=])")
_AWS_SESSION_TOKEN = re.compile(rf"(?:IQoJb3JpZ2lu|FwoGZXIvYXdz|FQoGZXIvYXdz)[{_B64}=]{{20,}}")
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d")

#: One secret value: the input it belongs to (``spec`` or ``driver_config``), its path there, the value.
Entry = tuple[str, tuple[str | int, ...], Any]


def _looks_like_aws_secret_key(token: str) -> bool:
    return (any(c.isupper() for c in token) and any(c.islower() for c in token) and len(set(token)) >= 22)


def credential_kind(value: str) -> str | None:
    """What ``value`` looks like when it holds a credential or private key (rules 2 and 3), else None."""
    if _PRIVATE_KEY.search(value):
        return "a private key"
    if _AWS_KEY_ID.search(value):
        return "an AWS access key id"
    if _AWS_SESSION_TOKEN.search(value):
        return "an AWS session token"
    if any(_looks_like_aws_secret_key(m.group(0)) for m in _AWS_SECRET_KEY.finditer(value)):
        return "an AWS secret access key"
    return None


def _dotted(where: str, path: Sequence[str | int]) -> str:
    return ".".join([where, *(str(p) for p in path)])


def _walk(data: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(data, Mapping):
        for k, v in data.items():
            yield from _walk(v, (*path, str(k)))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            yield from _walk(v, (*path, i))
    else:
        yield path, data


def _leaves(value: Any) -> Iterator[str]:
    for _, leaf in _walk(value):
        if isinstance(leaf, str) and leaf:
            yield leaf


def marked_values(extra: Iterable[Any] = ()) -> frozenset[str]:
    """Every string the user marked secret: Pulumi config secrets (rule 4) and the leaves of ``extra``."""
    from pulumi.runtime import config as runtime_config

    found: set[str] = set(_leaves(list(extra)))
    config: dict[str, Any] = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    for key, raw in config.items():
        if not (runtime_config.is_config_secret(key) or key in secret_keys) or raw is None:
            continue
        found.add(str(raw))
        if isinstance(raw, str) and raw[:1] in "{[":
            with contextlib.suppress(ValueError):
                found.update(_leaves(json.loads(raw)))
    found.discard("")
    return frozenset(found)


def _is_marked(value: str, marked: frozenset[str]) -> bool:
    return value in marked or any(len(m) >= MIN_SUBSTRING and m in value for m in marked)


def refuse_credentials(where: str, data: Any, *, allow_private_keys: bool = False) -> None:
    """Rules 2 and 3: raise InvalidSpecError naming the first field whose value holds a credential.

    The message names the field and what the value looks like, never the value."""
    for path, leaf in _walk(data):
        if not isinstance(leaf, str):
            continue
        kind = credential_kind(leaf)
        if kind is None or (allow_private_keys and kind == "a private key"):
            continue
        field = _dotted(where, path)
        if kind == "a private key":
            hint = ("pass it as a secret (`pulumi config set --secret`, or GpuCluster(secret_spec=...) with "
                    "pulumi.Output.secret) so it is stored encrypted")
        else:
            hint = "cloud credentials come from the environment or the provider's credential chain"
        raise InvalidSpecError(f"{field}: the value looks like {kind} and would be stored in the stack state "
                               f"in plaintext; {hint}", field=field, value="***")


def check_driver_config(config: Mapping[str, Any], secret: Mapping[str, Any] | None = None) -> None:
    """Rule 1 on the keys of plain and secret driver config, rule 2 on every value (rule 3 on plain ones)."""
    for key in (*config, *(secret or {})):
        if any(w in str(key).lower() for w in _SECRET_WORDS):
            raise InvalidSpecError(
                f"driver_config.{key}: credentials must not be resource inputs (they would be stored in "
                "state); set them in the environment or the provider's credential chain",
                field=f"driver_config.{key}", value="***")
    refuse_credentials("driver_config", dict(config))
    refuse_credentials("driver_config", dict(secret or {}), allow_private_keys=True)


def _set(data: Any, path: Sequence[str | int], value: Any) -> Any:
    """``data`` with ``value`` at ``path`` (modified in place where it can be; missing dicts are made)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int) and isinstance(data, list) and head < len(data):
        data[head] = _set(data[head], rest, value)
        return data
    container = data if isinstance(data, dict) else {}
    container[str(head)] = _set(container.get(str(head)), rest, value)
    return container


def split(where: str, data: Mapping[str, Any], marked: frozenset[str]) -> tuple[dict[str, Any], list[Entry]]:
    """Rule 4, then rules 2 and 3: ``data`` with marked values cut out (replaced by :data:`MARK`) and the
    entries cut out. Credentials left in the plain part are refused; among the secret entries only
    private keys are allowed."""
    plain: dict[str, Any] = copy.deepcopy(dict(data))
    entries: list[Entry] = []
    for path, leaf in list(_walk(plain)):
        if isinstance(leaf, str) and _is_marked(leaf, marked):
            entries.append((where, path, leaf))
            _set(plain, path, MARK)
    refuse_credentials(where, plain)
    refuse_credentials(where, [e[2] for e in entries], allow_private_keys=True)
    return plain, entries


def secret_input(entries: Sequence[Entry], given: Mapping[str, pulumi.Input[Any]] | None = None,
                 where: str = "spec") -> pulumi.Output[list[list[Any]]]:
    """The ``secrets`` input: the entries cut out by :func:`split` and ``given`` (dotted path under
    ``where`` -> a value or Output, e.g. ``cfg.require_secret``), as one ``Output.secret`` list of
    ``[where, path, value]``; given values win over entries at the same path."""
    fixed = [[w, list(p), v] for w, p, v in entries]
    keys = list((given or {}).keys())
    outs = [pulumi.Output.from_input((given or {})[k]) for k in keys]

    def build(values: list[Any]) -> list[list[Any]]:
        extra = [[where, k.split("."), v] for k, v in zip(keys, values, strict=True) if v is not None]
        taken = {(w, tuple(p)) for w, p, _ in extra}
        return [e for e in fixed if (e[0], tuple(e[1])) not in taken] + extra

    return pulumi.Output.secret(pulumi.Output.all(*outs).apply(build))


def reveal(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` with its secret values put back where :func:`split` took them (a deep copy)."""
    out = dict(props)
    copied: set[str] = set()
    for where, path, value in props.get(SECRETS) or []:
        if where not in copied:
            out[where] = copy.deepcopy(out.get(where)) if out.get(where) is not None else {}
            copied.add(where)
        out[where] = _set(out[where], list(path), value)
    return out


def secret_values(props: Mapping[str, Any]) -> list[str]:
    """The strings to keep out of anything returned or raised: each secret value, and each long line of a
    multi-line one (key material)."""
    found: set[str] = set()
    for _, _, value in props.get(SECRETS) or []:
        for leaf in _leaves(value):
            found.add(leaf)
            found.update(line.strip() for line in leaf.splitlines() if len(line.strip()) >= 16)
    return sorted(found, key=len, reverse=True)


def scrub(data: Any, values: Sequence[str]) -> Any:
    """``data`` with ``values`` in its strings replaced by :data:`MARK`: values of at least
    :data:`MIN_SUBSTRING` characters wherever they occur, shorter ones only as a whole string (so a
    secret ``"1"`` does not mangle every IP address in a hostfile)."""
    if not values:
        return data
    if isinstance(data, str):
        if data in values:
            return MARK
        for v in values:
            if len(v) >= MIN_SUBSTRING:
                data = data.replace(v, MARK)
        return data
    if isinstance(data, Mapping):
        return {k: scrub(v, values) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [scrub(v, values) for v in data]
    return data


def scrub_outputs(outs: Mapping[str, Any], props: Mapping[str, Any]) -> dict[str, Any]:
    """A provider's outputs with secret values scrubbed from every plain property; ``secrets`` passes
    through (it is an ``additional_secret_outputs`` property, stored encrypted)."""
    values = secret_values(props)
    return {k: (v if k == SECRETS else scrub(v, values)) for k, v in outs.items()}


@contextlib.contextmanager
def guarded(props: Mapping[str, Any]) -> Iterator[None]:
    """Re-raise an error whose text (message, causes, traceback) holds a secret value as a MetalfleetError
    with the value scrubbed and no chained causes: the engine prints and logs what a provider raises.
    (Values shorter than :data:`MIN_SUBSTRING` cannot be told apart from ordinary text and are not looked for.)"""
    try:
        yield
    except Exception as exc:
        values = secret_values(props)
        text = "".join(traceback.format_exception(exc))
        if any(len(v) >= MIN_SUBSTRING and v in text for v in values):
            raise MetalfleetError(scrub(f"{type(exc).__name__}: {exc}", values)) from None
        raise


@contextlib.contextmanager
def private_key_file(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``spec`` (a revealed spec dict) with ``ssh.private_key`` given as key material written to a private
    temporary file for the duration, so SSH reads it as a path; a path is passed through as is."""
    ssh = spec.get("ssh") or {}
    material = ssh.get("private_key")
    if not (isinstance(material, str) and _PRIVATE_KEY.search(material)):
        yield spec
        return
    folder = tempfile.mkdtemp(prefix="metalfleet-key-")
    try:
        path = os.path.join(folder, "id")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(material if material.endswith("\n") else material + "\n")
        yield {**spec, "ssh": {**ssh, "private_key": path}}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
