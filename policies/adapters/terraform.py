"""Terraform plans (``terraform show -json plan.out``) for the aws, alicloud and huaweicloud providers.

Read from ``resource_changes``: each change's ``after`` with ``after_unknown`` laid over it (a value known only
after apply is UNKNOWN), deletions left out. The ``configuration`` section gives references between
resources that the plan cannot resolve yet (an EIP bound to ``aws_instance.gpu``, an instance in
``aws_subnet.private``) and ``count`` groups. A plan has no line numbers; when the configuration's .tf files lie
beside the plan (or in the folder ``--tf-dir`` names), each resource is located at its ``resource`` block, and
``# metalfleet:suppress`` comments in a block apply to it.

The plan is decoded with msgspec against a schema that names only what is read (``planned_values`` and
``prior_state`` are skipped, each change's ``after`` kept as raw bytes), then one change at a time is decoded,
turned into views and dropped, so a 10,000-instance plan takes a fraction of a second and little memory.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Mapping
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

__all__ = ["PlanError", "PlanReader", "read_plan"]


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


_NESTED = (dict, list)


def _overlay(after: Any, unknown: Any) -> Any:
    """``after`` with every value ``after_unknown`` marks replaced by UNKNOWN. ``after`` is changed in place: it
    was just decoded for this one change and nothing else holds it."""
    if unknown is True:
        return UNKNOWN
    if not unknown:  # None (pruned) / {} / [] / false: nothing unknown below
        return after
    if isinstance(unknown, dict):
        out = after if isinstance(after, dict) else {}
        for k, u in unknown.items():
            if u is True:
                out[k] = UNKNOWN
            elif u and isinstance(u, _NESTED):
                out[k] = _overlay(out.get(k), u)
        return out
    if isinstance(unknown, list):
        items = after if isinstance(after, list) else []
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


_JSON = msgspec.json.Decoder()


def _decode_after(raw: msgspec.Raw) -> dict[str, Any]:
    """One change's ``after`` as a dict (every attribute: a plan lists its schema's attributes; the builders read
    a few, and decoding all of them generically costs less than skipping the rest)."""
    value = _JSON.decode(raw)
    return value if isinstance(value, dict) else {}


def _prune(unknown: Any) -> Any:
    """An ``after_unknown`` value without the entries that mark nothing unknown ({}, [], [{}], false); None when
    nothing is left. The overlay then touches only what is unknown."""
    if unknown is True:
        return True
    if isinstance(unknown, dict):
        kept = {k: p for k, v in unknown.items() if (p := _prune(v)) is not None}
        return kept or None
    if isinstance(unknown, list):
        items = [_prune(v) for v in unknown]
        return items if any(i is not None for i in items) else None
    return None


def _unknown_for(rc: _ResourceChange, unknowns: dict[tuple[str, bytes], Any]) -> Any:
    """The change's ``after_unknown``, decoded and pruned once per distinct text and type (the instances of one
    ``count`` block share one), limited to the attributes the type's builder reads (:data:`.native.FIELDS`)."""
    assert rc.change is not None
    key = (rc.type, bytes(rc.change.after_unknown))
    if key in unknowns:
        return unknowns[key]
    names = FIELDS.get(rc.type, ())
    value = _JSON.decode(rc.change.after_unknown)
    if value is True:  # the whole object known only after apply
        pruned: Any = dict.fromkeys(names, True)
    elif isinstance(value, dict):
        pruned = _prune({k: v for k, v in value.items() if k in names})
    else:
        pruned = None
    unknowns[key] = pruned
    return pruned


def _props(rc: _ResourceChange, unknowns: dict[tuple[str, bytes], Any]) -> dict[str, Any]:
    """The planned attributes of one change, values known only after apply as UNKNOWN."""
    assert rc.change is not None
    after = _decode_after(rc.change.after)
    unknown = _unknown_for(rc, unknowns)
    return _overlay(after, unknown) if unknown else after


def read_plan(data: bytes | mmap.mmap, file: str, assume: Assumptions, tf_dir: str | Path | None = None) -> PlanReader:
    """A plan decoded and its whole-plan facts read; :meth:`PlanReader.views` builds the views."""
    try:
        plan = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise PlanError(f"not a Terraform plan this tool can read: {exc}") from None
    return PlanReader(plan.resource_changes, plan.configuration, file, assume, tf_dir)


class PlanReader:
    """A decoded plan, read in two steps: what holds for the whole plan (account defaults and subnets it sets,
    its configuration's references, the .tf blocks and their suppression comments) when made, then the views of
    any share of its resources (:meth:`views`), one change at a time, so processes can divide a large plan."""

    def __init__(self, resource_changes: list[_ResourceChange], configuration: dict[str, Any] | None, file: str,
                 assume: Assumptions, tf_dir: str | Path | None = None) -> None:
        self.file, self.assume = file, assume
        self.config: dict[str, _ConfigResource] = {}
        root_dir = Path(tf_dir) if tf_dir is not None else Path(file).resolve().parent
        if isinstance(configuration, dict):
            _walk_config(configuration.get("root_module") or {}, "", ".", self.config)
        wanted = [rc for rc in resource_changes
                  if rc.mode == "managed" and rc.change is not None and rc.change.actions != ["delete"]
                  and (rc.type in NATIVE or rc.type in ACCOUNT_SETTINGS or rc.type == "aws_subnet")]
        self.unknowns: dict[tuple[str, bytes], Any] = {}
        self.subnets: dict[str, Maybe[bool]] = {}
        for rc in wanted:  # first pass: what changes the defaults of the rest
            if rc.type in ACCOUNT_SETTINGS:
                account_settings(rc.type, _props(rc, self.unknowns), assume)
            elif rc.type == "aws_subnet":
                v = maybe_bool(_props(rc, self.unknowns).get("map_public_ip_on_launch"))
                self.subnets[_base(rc.address)] = False if v is None else v  # default false (aws_subnet docs)
        self.blocks: dict[str, _Block] = {}
        self.suppressions: list[Suppression] = []
        dirs = {c.module_dir for c in self.config.values() if c.module_dir} | {"."}
        block_sups: list[tuple[str, Suppression]] = []
        for d in sorted(dirs):
            found, found_sups = _tf_blocks(root_dir / d)
            prefix = "" if d == "." else next((c.address.rsplit(".", 2)[0] + "." for c in self.config.values()
                                               if c.module_dir == d), "")
            self.blocks.update({f"{prefix}{k}": v for k, v in found.items()})
            block_sups.extend((f"{prefix}{k}", s) for k, s in found_sups)
        for owner, s in block_sups:
            self.suppressions.append(dc_replace(s, resource=owner))
        self.changes = [rc for rc in wanted if rc.type not in ACCOUNT_SETTINGS and rc.type != "aws_subnet"]
        self.bases = [_base(rc.address) for rc in self.changes]
        self.counts: dict[str, int] = {}
        for base in self.bases:
            self.counts[base] = self.counts.get(base, 0) + 1
        #: per configuration block: the resources its reference attributes point at, and its subnet's setting
        self.links: dict[str, tuple[list[tuple[str, str]], Maybe[bool] | None]] = {}

    def views(self, part: tuple[int, int] = (0, 1)) -> list[Resource]:
        """The views of the i-th of n equal runs of the plan's resources (``part`` (i, n); all by default)."""
        index, parts = part
        lo, hi = len(self.changes) * index // parts, len(self.changes) * (index + 1) // parts
        file, blocks, config, links, counts = self.file, self.blocks, self.config, self.links, self.counts
        out: list[Resource] = []
        for rc, base in zip(self.changes[lo:hi], self.bases[lo:hi], strict=True):  # one at a time: only views stay
            props = _props(rc, self.unknowns)
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
                    link = links[base] = (targets, self.subnets[_base(sn)] if sn is not None and _base(sn) in
                                          self.subnets else None)
                for attr, target in link[0]:
                    if props.get(attr) in (UNKNOWN, None, ""):
                        props[attr] = target
                subnet = link[1]
            out.extend(native_resources(rc.type, props, rc.address, loc, "terraform", self.assume, subnet,
                                        counts.get(base, 1)))
        return out
