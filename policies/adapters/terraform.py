"""Terraform plans (``terraform show -json plan.out``) for the aws, alicloud and huaweicloud providers.

Read from ``resource_changes``: each change's ``after`` with ``after_unknown`` laid over it (a value known only
after apply is UNKNOWN), deletions left out. The ``configuration`` section gives references between
resources that the plan cannot resolve yet (an EIP bound to ``aws_instance.gpu``, an instance in
``aws_subnet.private``) and ``count`` groups. A plan has no line numbers; when the configuration's .tf files lie
beside the plan (or in the folder ``--tf-dir`` names), each resource is located at its ``resource`` block, and
``# metalfleet:suppress`` comments in a block apply to it.

The plan is decoded with msgspec against a schema that names only what is read, so a 10,000-instance plan
is parsed in a fraction of a second without building ``planned_values`` or ``prior_state`` at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any

import msgspec

from ..config import Suppression
from ..model import UNKNOWN, Location, Maybe, Resource
from ..yamlpos import suppression_comments
from .common import Assumptions, maybe_bool
from .native import ACCOUNT_SETTINGS, FIELDS, NATIVE, account_settings, native_resources

__all__ = ["PlanError", "decoded_plan_resources", "is_plan", "plan_resources"]


class PlanError(ValueError):
    """The document is JSON but not a Terraform plan this adapter can read."""


class _Change(msgspec.Struct):
    actions: list[str] = []
    after: msgspec.Raw = msgspec.Raw(b"null")
    after_unknown: msgspec.Raw = msgspec.Raw(b"null")


class _ResourceChange(msgspec.Struct):
    address: str
    type: str
    mode: str = "managed"
    module_address: str | None = None
    name: str = ""
    change: _Change | None = None


class _Plan(msgspec.Struct):
    format_version: str | None = None
    terraform_version: str | None = None
    resource_changes: list[_ResourceChange] = []
    configuration: dict[str, Any] | None = None


_DECODER = msgspec.json.Decoder(_Plan)


def is_plan(doc: Mapping[str, Any]) -> bool:
    return "format_version" in doc and ("resource_changes" in doc or "planned_values" in doc)


_NESTED = (dict, list)


def _overlay(after: Any, unknown: Any) -> Any:
    """``after`` with every value ``after_unknown`` marks replaced by UNKNOWN."""
    if unknown is True:
        return UNKNOWN
    if not unknown:  # {} / [] / false: nothing unknown below
        return after
    if isinstance(unknown, dict):
        out = dict(after) if isinstance(after, dict) else {}
        for k, u in unknown.items():
            if u is True:
                out[k] = UNKNOWN
            elif u and isinstance(u, _NESTED):
                out[k] = _overlay(out.get(k), u)
        return out
    if isinstance(unknown, list):
        items = list(after) if isinstance(after, list) else []
        for i, u in enumerate(unknown):
            if i < len(items):
                if u:  # {} / [] / false leave the item as it is
                    items[i] = _overlay(items[i], u)
            elif u is True:
                items.append(UNKNOWN)
            elif isinstance(u, dict) and u:
                items.append(_overlay({}, u))
        return items
    return after


# ------------------------------------------------------------------------------------------ configuration


@dataclass
class _ConfigResource:
    address: str  # module-qualified config address, without index: module.x.aws_instance.gpu
    references: dict[str, list[str]]  # attribute -> referenced addresses (module-qualified)
    module_dir: str | None  # a local module's source folder, relative to the root module


def _refs(expr: Any) -> list[str]:
    if isinstance(expr, dict):
        refs = expr.get("references")
        if isinstance(refs, list):
            return [str(r) for r in refs]
    return []


def _walk_config(module: Mapping[str, Any], prefix: str, folder: str | None,
                 out: dict[str, _ConfigResource]) -> None:
    for r in module.get("resources") or []:
        if not isinstance(r, dict) or r.get("mode", "managed") != "managed":
            continue
        addr = f"{prefix}{r.get('address')}"
        raw = r.get("expressions")
        exprs: dict[str, Any] = raw if isinstance(raw, dict) else {}
        refs = {k: [f"{prefix}{x}" for x in _refs(v)] for k, v in exprs.items()}
        out[addr] = _ConfigResource(addr, refs, folder)
    for name, call in (module.get("module_calls") or {}).items():
        if not isinstance(call, dict):
            continue
        source = str(call.get("source") or "")
        sub = None
        if source.startswith(("./", "../")) and folder is not None:
            sub = str(Path(folder) / source)
        _walk_config(call.get("module") or {}, f"{prefix}module.{name}.", sub, out)


_INDEX = re.compile(r"\[[^\]]*\]")


def _base(address: str) -> str:
    """``module.a["x"].aws_instance.gpu[3]`` -> ``module.a.aws_instance.gpu`` (the configuration's address)."""
    return _INDEX.sub("", address)


def _target(refs: list[str]) -> str | None:
    """The resource a reference list points at (``aws_instance.gpu[0].id`` -> ``aws_instance.gpu[0]``)."""
    for ref in refs:
        parts = ref.split(".")
        for i in range(len(parts) - 1):
            if re.fullmatch(r"[a-z0-9]+_[a-z0-9_]+", parts[i]) and not parts[i].startswith("module"):
                return ".".join(parts[: i + 2])
    return None


# ------------------------------------------------------------------------------------------ .tf locations


_RESOURCE = re.compile(r'^\s*resource\s+"([^"]+)"\s+"([^"]+)"\s*\{')


@dataclass
class _Block:
    file: str
    line: int
    end: int


def _tf_blocks(folder: Path) -> tuple[dict[str, _Block], list[tuple[str, Suppression]]]:
    """Resource blocks (``type.name`` -> file and lines) in the .tf files of ``folder``, and the suppression
    comments inside (or right above) each block."""
    blocks: dict[str, _Block] = {}
    sups: list[tuple[str, Suppression]] = []
    try:
        files = sorted(folder.glob("*.tf"))
    except OSError:
        return blocks, sups
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines = text.splitlines()
        starts: list[tuple[str, int, int]] = []
        for i, line in enumerate(lines):
            m = _RESOURCE.match(line)
            if not m:
                continue
            depth, end = 0, len(lines)
            for j in range(i, len(lines)):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0:
                    end = j + 1
                    break
            key = f"{m.group(1)}.{m.group(2)}"
            blocks.setdefault(key, _Block(str(f), i + 1, end))
            starts.append((key, i + 1, end))
        for c in suppression_comments(text, hcl=True):
            owner = next((k for k, a, b in starts if a <= c.line <= b or a == c.first), None)
            if owner is not None:
                sups.append((owner, Suppression(c.rule, c.reason, c.expires, None, Location(str(f), c.line, c.column),
                                                bad_expiry=c.expires_text if c.expires is None else None)))
    return blocks, sups


# ------------------------------------------------------------------------------------------ the plan


_DECODERS: dict[str, tuple[msgspec.json.Decoder[Any], tuple[str, ...]]] = {}


def _decoder(tf_type: str) -> tuple[msgspec.json.Decoder[Any], tuple[str, ...]]:
    """A decoder that builds only the attributes the type's builder reads (:data:`.native.FIELDS`)."""
    found = _DECODERS.get(tf_type)
    if found is None:
        names = FIELDS[tf_type]
        struct = msgspec.defstruct(f"Plan_{tf_type}", [(n, Any, msgspec.UNSET) for n in names])
        found = _DECODERS[tf_type] = (msgspec.json.Decoder(struct), names)
    return found


_ASTUPLE = msgspec.structs.astuple
_UNSET = msgspec.UNSET


def _decode(raw: msgspec.Raw, tf_type: str) -> dict[str, Any]:
    decoder, names = _decoder(tf_type)
    first = bytes(memoryview(raw)[:1])
    if first == b"t":  # after_unknown: true, the whole object known only after apply
        return dict.fromkeys(names, True)
    if first != b"{":
        return {}
    values = _ASTUPLE(decoder.decode(raw))
    if _UNSET not in values:  # a plan lists every attribute of its schema: the usual case
        return dict(zip(names, values, strict=True))
    return {n: v for n, v in zip(names, values, strict=True) if v is not _UNSET}


def _props(rc: _ResourceChange, unknowns: dict[tuple[str, bytes], dict[str, Any]]) -> dict[str, Any]:
    """The planned attributes of one change that its builder reads, unknown values as UNKNOWN.

    ``unknowns`` caches decoded ``after_unknown`` objects by their text: the instances of one ``count`` block
    share one (it is only read, never changed)."""
    assert rc.change is not None
    after = _decode(rc.change.after, rc.type)
    key = (rc.type, bytes(rc.change.after_unknown))
    unknown = unknowns.get(key)
    if unknown is None:
        unknown = unknowns[key] = _decode(rc.change.after_unknown, rc.type)
    return _overlay(after, unknown) if unknown else after


@dataclass
class PlanResult:
    resources: list[Resource]
    suppressions: list[Suppression]


def plan_resources(data: bytes, file: str, assume: Assumptions, tf_dir: str | Path | None = None) -> PlanResult:
    """Neutral views of every managed resource the plan leaves in place or creates."""
    try:
        plan = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise PlanError(f"not a Terraform plan this tool can read: {exc}") from None
    return decoded_plan_resources(plan.resource_changes, plan.configuration, file, assume, tf_dir)


def decoded_plan_resources(resource_changes: list[_ResourceChange], configuration: dict[str, Any] | None, file: str,
                           assume: Assumptions, tf_dir: str | Path | None = None) -> PlanResult:
    """:func:`plan_resources` of a plan already decoded (the input loader decodes the plan and tells its kind in
    one pass)."""
    config: dict[str, _ConfigResource] = {}
    root_dir = Path(tf_dir) if tf_dir is not None else Path(file).resolve().parent
    if isinstance(configuration, dict):
        _walk_config(configuration.get("root_module") or {}, "", ".", config)
    wanted = [rc for rc in resource_changes
              if rc.mode == "managed" and rc.change is not None and rc.change.actions != ["delete"]
              and (rc.type in NATIVE or rc.type in ACCOUNT_SETTINGS or rc.type == "aws_subnet")]
    unknowns: dict[tuple[str, bytes], dict[str, Any]] = {}
    subnets: dict[str, Maybe[bool]] = {}
    for rc in wanted:  # first pass: what changes the defaults of the rest
        if rc.type in ACCOUNT_SETTINGS:
            account_settings(rc.type, _props(rc, unknowns), assume)
        elif rc.type == "aws_subnet":
            v = maybe_bool(_props(rc, unknowns).get("map_public_ip_on_launch"))
            subnets[_base(rc.address)] = False if v is None else v  # default false (aws_subnet docs)
    blocks: dict[str, _Block] = {}
    sups: list[Suppression] = []
    dirs = {c.module_dir for c in config.values() if c.module_dir} | {"."}
    block_sups: list[tuple[str, Suppression]] = []
    for d in sorted(dirs):
        found, found_sups = _tf_blocks(root_dir / d)
        prefix = "" if d == "." else next((c.address.rsplit(".", 2)[0] + "." for c in config.values()
                                           if c.module_dir == d), "")
        blocks.update({f"{prefix}{k}": v for k, v in found.items()})
        block_sups.extend((f"{prefix}{k}", s) for k, s in found_sups)
    for owner, s in block_sups:
        sups.append(dc_replace(s, resource=owner))
    bases = [_base(rc.address) for rc in wanted]
    counts: dict[str, int] = {}
    for base in bases:
        counts[base] = counts.get(base, 0) + 1
    #: per configuration block: the resources its reference attributes point at, and its subnet's setting
    links: dict[str, tuple[list[tuple[str, str]], Maybe[bool] | None]] = {}
    out: list[Resource] = []
    for rc, base in zip(wanted, bases, strict=True):  # second pass: one at a time: only the views stay in memory
        if rc.type in ACCOUNT_SETTINGS or rc.type == "aws_subnet":
            continue
        props = _props(rc, unknowns)
        b = blocks.get(base)
        loc = Location(b.file if b else file, b.line if b else None, 1 if b else None, rc.address)
        subnet: Maybe[bool] | None = None
        cfg = config.get(base)
        if cfg is not None:
            link = links.get(base)
            if link is None:
                targets = [(attr, target) for attr in ("instance", "instance_id", "network_interface")
                           if (target := _target(cfg.references.get(attr, [])))]
                sn = _target(cfg.references.get("subnet_id", []))
                link = links[base] = (targets, subnets[_base(sn)] if sn is not None and _base(sn) in subnets
                                      else None)
            for attr, target in link[0]:
                if props.get(attr) in (UNKNOWN, None, ""):
                    props[attr] = target
            subnet = link[1]
        out.extend(native_resources(rc.type, props, rc.address, loc, "terraform", assume, subnet,
                                    counts.get(base, 1)))
    return PlanResult(out, sups)


def iter_plan_types(data: bytes) -> Iterator[str]:  # used by tests to check the synthetic plans
    for rc in _DECODER.decode(data).resource_changes:
        yield rc.type
