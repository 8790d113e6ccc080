"""Terraform configuration read directly: ``.tf`` files in HCL (parsed by python-hcl2), so a pull request is
checked on the files it changes, without ``terraform plan``.

Each resource block becomes what a plan would hold for it, and the plan reader (:class:`.terraform.PlanReader`)
reads that, so the native readers, the provider defaults, the links between resources and the .tf locations and
suppression comments are the plan's own:

- a literal is the value; an attribute left out is absent, so the provider default applies (and is noted);
- any expression (a reference, ``local.x``, a function call, an interpolated string, a ``dynamic`` block) is
  unknown, failing closed as a plan's unknowns do; its references go to a plan-like ``configuration`` section, so
  a rule resource, an EIP association or a volume attachment that names ``aws_security_group.web.id`` is linked
  to that resource as in a plan. ``var.x`` is the variable's literal default (a module's: the call's literal
  argument), as a plan without ``-var`` or ``.tfvars`` would have it; each view value it decides says so in the
  resource's notes, since the value given at plan time may differ. A variable without a literal default is unknown;
- a block with ``count``/``for_each`` is one resource, ``type.name[*]`` (``count`` = N literal: a group of N;
  0: none);
- a ``module`` with a local ``source`` (``./x``) is read from that folder; any other source (the registry, git, a
  URL) is not read, and the input says so (:attr:`TfModule.not_read`).

A file given alone is read with the other ``.tf`` files of its folder (the module it belongs to: its variables, the
resources it refers to) and gives only its own resources; a folder gives all of its files' resources.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from metalfleet.providers.textfile import BadFileError, read_text_file

from ..config import Suppression
from ..model import UNKNOWN, Resource
from .common import Assumptions
from .terraform import PlanReader, _ResourceChange, created

__all__ = ["TfModule", "read_tf"]


#: Meta-arguments: Terraform's, not the resource's attributes (never in a plan's ``after``).
_META = frozenset({"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection"})
#: A traversal: ``aws_instance.gpu[0].id``, ``var.x``, ``module.sg.id`` (a function name has no ``.`` or ``[``).
_TRAVERSAL = re.compile(r"(?<![\w.\]\"])([A-Za-z_][\w-]*)((?:\.[A-Za-z_][\w-]*|\.\*|\[[^\[\]]*\])+)")
#: A quoted string in an expression with no interpolation in it: its dots are not references.
_PLAIN_STRING = re.compile(r'"(?:[^"\\$%]|\\.)*"')
_VAR = re.compile(r"var\.([A-Za-z_][\w-]*)")
_LOCAL_SOURCE = ("./", "../")


@dataclass
class _Resource:
    type: str
    name: str
    body: dict[str, Any]
    file: str


@dataclass
class TfModule:
    """The ``.tf`` files of one module, parsed, with the modules they call; ``prefix`` is the module's address
    (``module.net.``, "" for the root)."""

    folder: Path
    prefix: str
    files: list[str] = field(default_factory=list)
    resources: list[_Resource] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    #: module name -> (the call's arguments, the module read or None, the file of the call)
    calls: dict[str, tuple[dict[str, Any], TfModule | None, str]] = field(default_factory=dict)
    #: the module calls not read, each with why ("module.vpc (source terraform-aws-modules/vpc/aws: ...)")
    not_read: list[str] = field(default_factory=list)


def _parse(path: str) -> dict[str, Any]:
    """One file, parsed; a syntax error is an unreadable input naming the file and line."""
    import hcl2
    from hcl2.utils import SerializationOptions
    from lark.exceptions import LarkError

    text = read_text_file(path, "policy input")
    try:
        doc = hcl2.loads(text, serialization_options=SerializationOptions(with_comments=False,
                                                                          preserve_heredocs=False))
    except LarkError as exc:  # lark's own message spans lines and names its tokens: the place and its line instead
        line, column = getattr(exc, "line", None), getattr(exc, "column", None)
        lines = text.splitlines()
        if not (isinstance(line, int) and 0 < line <= len(lines)):
            raise BadFileError(f"policy input {path} is not valid Terraform HCL ({type(exc).__name__})",
                               path=path) from None
        col = column if isinstance(column, int) and column > 0 else None
        shown = lines[line - 1].strip()[:80]
        raise BadFileError(f"policy input {path} is not valid Terraform HCL at line {line}"
                           f"{f', column {col}' if col else ''}: {shown!r}", path=path, line=line,
                           column=col) from None
    except (ValueError, TypeError) as exc:  # python-hcl2 rejects some shapes after parsing (duplicate blocks)
        raise BadFileError(f"policy input {path} is not valid Terraform HCL: {' '.join(str(exc).split())}",
                           path=path) from None
    return doc if isinstance(doc, dict) else {}


def _label(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == '"' else key


def _labelled(blocks: Any, depth: int) -> list[tuple[list[str], dict[str, Any]]]:
    """``resource "t" "n" {...}`` as python-hcl2 gives it (lists of label-keyed dicts) -> ([t, n], body)."""
    out: list[tuple[list[str], dict[str, Any]]] = []
    for item in blocks if isinstance(blocks, list) else [blocks]:
        stack: list[tuple[list[str], Any]] = [([], item)]
        while stack:
            labels, node = stack.pop()
            if len(labels) == depth:
                if isinstance(node, dict):
                    out.append((labels, node))
                continue
            if isinstance(node, dict):
                stack.extend(([*labels, _label(k)], v) for k, v in node.items() if not k.startswith("__"))
    return out


def _literal(value: Any) -> tuple[bool, Any]:
    """(True, the value) for an HCL literal (quoted string without interpolation, number, bool, null, and lists
    and objects of them); (False, None) for anything that needs evaluating."""
    if isinstance(value, str):
        if len(value) >= 2 and value[0] == value[-1] == '"':
            inner = value[1:-1]
            if re.search(r"(?<![$%])[$%]\{", inner.replace("$${", "").replace("%%{", "")):
                return False, None
            try:
                text = json.loads(f'"{inner}"')
            except ValueError:
                return False, None
            return True, text.replace("$${", "${").replace("%%{", "%{")
        return False, None
    if isinstance(value, list):
        items = [_literal(v) for v in value]
        return (True, [v for _, v in items]) if all(ok for ok, _ in items) else (False, None)
    if isinstance(value, dict):
        if value.get("__is_block__"):
            return False, None
        pairs = {k: _literal(v) for k, v in value.items() if not k.startswith("__")}
        if all(ok for ok, _ in pairs.values()) and all(_literal_key(k) is not None for k in pairs):
            return True, {_literal_key(k): v for k, (_, v) in pairs.items()}
        return False, None
    return True, value


def _literal_key(key: str) -> str | None:
    if key.startswith("${"):
        return None
    ok, text = _literal(key) if key.startswith('"') else (True, key)
    return text if ok and isinstance(text, str) else None


def _references(value: Any) -> list[str]:
    """The references in an expression, as a plan's configuration lists them: each traversal and the resource (or
    variable, module output) it starts with; an index that is itself an expression (``[count.index]``) adds its
    own references."""
    text = json.dumps(value) if not isinstance(value, str) else value
    text = _PLAIN_STRING.sub('""', text.replace('\\"', '"'))
    refs: list[str] = []

    def add(ref: str) -> None:
        if ref not in refs:
            refs.append(ref)

    pending = [text]
    while pending:
        chunk = pending.pop()
        for m in _TRAVERSAL.finditer(chunk):
            head, rest = m.group(1), m.group(2)
            if head in ("true", "false", "null"):
                continue
            steps = re.findall(r"\.\*|\.[A-Za-z_][\w-]*|\[[^\[\]]*\]", rest)
            for step in steps:
                if step.startswith("[") and step not in ("[*]",) and not re.fullmatch(r'\[(\d+|"[^"]*")\]', step):
                    pending.append(step[1:-1])
            clean = [s for s in steps if s.startswith(".") or re.fullmatch(r'\[(\d+|"[^"]*")\]', s)]
            add(head + "".join(clean))
            names = [s for s in clean if s.startswith(".")]
            if head in ("var", "local", "count", "each", "path", "terraform", "self", "data") or not names:
                continue
            if head == "module":
                add(f"module{steps[0]}")
                continue
            # a resource: aws_instance.gpu[0].id -> aws_instance.gpu[0], aws_instance.gpu
            first = clean.index(names[0])
            own = head + names[0]
            if first + 1 < len(clean) and clean[first + 1].startswith("["):
                add(own + clean[first + 1])
            add(own)
    return refs


@dataclass
class _Built:
    after: dict[str, Any]
    unknown: dict[str, Any]
    expressions: dict[str, Any]
    #: the variables whose defaults decided a value of this resource
    defaults: set[str]


def _convert(value: Any, scope: dict[str, Any], used: set[str]) -> tuple[bool, Any, Any]:
    """(known, the value, its after_unknown mark) of one attribute value in ``scope`` (variable -> literal
    value or UNKNOWN). ``var.x`` alone is the variable's value; any other expression is unknown."""
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        m = _VAR.fullmatch(value[2:-1].strip())
        if m and scope.get(m.group(1), UNKNOWN) is not UNKNOWN:
            used.add(m.group(1))
            return True, scope[m.group(1)], False
        return False, None, True
    if isinstance(value, list) and value and all(isinstance(v, dict) and v.get("__is_block__") for v in value):
        items = [_block(v, scope, used) for v in value]
        return True, [a for a, _ in items], [u for _, u in items]
    if isinstance(value, list):
        items3 = [_convert(v, scope, used) for v in value]
        return True, [v for _, v, _ in items3], [u for _, _, u in items3]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        marks: dict[str, Any] = {}
        for k, v in value.items():
            if k.startswith("__"):
                continue
            key = _literal_key(k)
            if key is None:
                return False, None, True
            _, val, mark = _convert(v, scope, used)
            out[key] = val
            marks[key] = mark
        return True, out, marks
    ok, lit = _literal(value)
    return (True, lit, False) if ok else (False, None, True)


def _block(body: dict[str, Any], scope: dict[str, Any], used: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A nested block's attributes and after_unknown marks; a ``dynamic "x"`` block makes ``x`` unknown."""
    after: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for key, value in body.items():
        if key.startswith("__"):
            continue
        if key == "dynamic":
            for labels, _ in _labelled(value, 1):
                after.pop(labels[0], None)
                unknown[labels[0]] = True
            continue
        if key in unknown and unknown[key] is True:
            continue
        known, val, mark = _convert(value, scope, used)
        if known and val is None:  # null: as if not set
            continue
        if known:
            after[key] = val
            if mark:
                unknown[key] = mark
        else:
            unknown[key] = True
    return after, unknown


def _resource(res: _Resource, scope: dict[str, Any]) -> _Built:
    used: set[str] = set()
    body = {k: v for k, v in res.body.items() if k not in _META}
    after, unknown = _block(body, scope, used)
    expressions: dict[str, Any] = {}
    for key, value in body.items():
        if key.startswith("__"):
            continue
        if key == "dynamic":
            for labels, inner in _labelled(value, 1):
                expressions[labels[0]] = {"references": _references(inner.get("for_each"))}
            continue
        if value is None:
            continue
        refs = _references(value)
        expressions[key] = {"references": refs} if refs else {"constant_value": after.get(key)}
    for meta in ("count", "for_each"):
        if meta in res.body:
            expressions[meta] = {"references": _references(res.body[meta])}
    return _Built(after, unknown, expressions, used)


def _scope(module: TfModule, arguments: dict[str, Any], parent: dict[str, Any]) -> dict[str, Any]:
    """Each variable's value: the call's argument when it is a literal (or a parent variable's known value), else
    the declared literal default when the call leaves it out; UNKNOWN otherwise."""
    out: dict[str, Any] = {}
    for name, default in module.variables.items():
        if name in arguments:
            known, value, _ = _convert(arguments[name], parent, set())
            out[name] = value if known else UNKNOWN
        else:
            out[name] = default
    return out


def _files_of(folder: Path) -> list[str]:
    try:
        return [str(f) for f in sorted(folder.glob("*.tf")) if f.is_file()]
    except OSError:
        return []


def _read_module(folder: Path, prefix: str, files: list[str], given: str, depth: int = 0) -> TfModule:
    """The module in ``files`` (the .tf files of ``folder``), with the local modules it calls; ``given``: the input
    named on the command line (a fault in another file of its module is reported as that input's)."""
    module = TfModule(folder, prefix, files)
    seen: dict[str, str] = {}
    for path in files:
        try:
            doc = _parse(path)
        except BadFileError as exc:
            if Path(path).resolve() == Path(given).resolve():
                raise
            raise BadFileError(f"policy input {given}: {str(exc).removeprefix('policy input ')} (a file of the "
                               "module it is read in)", path=given) from None
        for labels, body in _labelled(doc.get("resource") or [], 2):
            address = f"{prefix}{labels[0]}.{labels[1]}"
            if address in seen:
                raise BadFileError(f"policy input {given}: resource {address} is declared twice ({seen[address]} "
                                   f"and {path}); terraform refuses such a module", path=given)
            seen[address] = path
            module.resources.append(_Resource(labels[0], labels[1], body, path))
        for labels, body in _labelled(doc.get("variable") or [], 1):
            ok, default = _literal(body["default"]) if "default" in body else (False, None)
            module.variables[labels[0]] = default if ok and default is not None else UNKNOWN
        for labels, body in _labelled(doc.get("module") or [], 1):
            name = labels[0]
            ok, source = _literal(body.get("source"))
            sub: TfModule | None = None
            source_text = source if ok and isinstance(source, str) else str(body.get("source"))
            if not (ok and isinstance(source, str) and source.startswith(_LOCAL_SOURCE)):
                module.not_read.append(f"{prefix}module.{name} (source {source_text}: not a local folder, so not "
                                       "read; check a plan of it to judge its resources)")
            elif not (folder / source).is_dir() or not _files_of(folder / source) or depth >= 16:
                module.not_read.append(f"{prefix}module.{name} (source {source_text}: no .tf files at "
                                       f"{folder / source})")
            else:
                sub = _read_module(folder / source, f"{prefix}module.{name}.", _files_of(folder / source), given,
                                   depth + 1)
                module.not_read.extend(sub.not_read)
            module.calls[name] = ({k: v for k, v in body.items() if not k.startswith("__")}, sub, path)
    return module


def _count(res: _Resource, scope: dict[str, Any]) -> int | None:
    """How many instances a block has: 1 without count/for_each; a literal count's value; None (unknown, read as
    one group ``[*]``) otherwise."""
    if "count" in res.body:
        known, value, _ = _convert(res.body["count"], scope, set())
        return value if known and isinstance(value, int) and not isinstance(value, bool) else None
    if "for_each" in res.body:
        known, value, _ = _convert(res.body["for_each"], scope, set())
        return len(value) if known and isinstance(value, (list, dict)) else None
    return 1


@dataclass
class _Owner:
    """What made one plan-like change: its block, the file that puts it in the check (its own, or the root file
    calling its module), its variables' values and the variables whose defaults it used."""

    res: _Resource
    file: str
    scope: dict[str, Any]
    defaults: set[str]


def _plan_of(module: TfModule, scope: dict[str, Any], changes: list[_ResourceChange], counts: dict[str, int],
             owners: dict[str, _Owner], origin: str | None = None) -> dict[str, Any]:
    """The module's resources appended to ``changes`` (plan-like) and its configuration section returned (the
    shape the plan reader reads from ``root_module``); ``origin``: the root file whose call reads this module."""
    config_resources: list[dict[str, Any]] = []
    for res in module.resources:
        n = _count(res, scope)
        if n == 0:
            continue
        built = _resource(res, scope)
        address = f"{module.prefix}{res.type}.{res.name}"
        grouped = "count" in res.body or "for_each" in res.body
        changes.append(_ResourceChange(address=f"{address}[*]" if grouped else address, type=res.type,
                                       module_address=module.prefix.rstrip(".") or None, name=res.name,
                                       change=created(built.after, built.unknown)))
        if n is not None and n > 1:
            counts[address] = n
        owners[changes[-1].address] = _Owner(res, origin or res.file, scope, built.defaults)
        config_resources.append({"address": f"{res.type}.{res.name}", "mode": "managed", "type": res.type,
                                 "name": res.name, "expressions": built.expressions})
    calls: dict[str, Any] = {}
    for name, (body, sub, file) in module.calls.items():
        exprs = {k: {"references": _references(v)} for k, v in body.items() if k != "source"}
        call: dict[str, Any] = {"source": _literal(body.get("source"))[1], "expressions": exprs}
        if sub is not None:
            call["module"] = _plan_of(sub, _scope(sub, body, scope), changes, counts, owners, origin or file)
        calls[name] = call
    return {"resources": config_resources, "module_calls": calls}


def _change(rc: _ResourceChange, built: _Built) -> _ResourceChange:
    return msgspec.structs.replace(rc, change=created(built.after, built.unknown))


def read_tf(path: str | Path, assume: Assumptions) -> tuple[list[Resource], list[Suppression], list[str]]:
    """The views of ``path`` (a ``.tf`` file, read in its folder's module, or a folder), the suppression comments
    in its blocks, and the modules not read."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    siblings = _files_of(folder)
    own = siblings if path.is_dir() else [str(path)]
    mine = {Path(f).resolve() for f in own}
    module = _read_module(folder, "", own + [f for f in siblings if Path(f).resolve() not in mine], str(path))
    changes: list[_ResourceChange] = []
    counts: dict[str, int] = {}
    owners: dict[str, _Owner] = {}
    root = _plan_of(module, dict(module.variables), changes, counts, owners)
    reader = PlanReader(changes, {"root_module": root}, str(path), assume, folder)
    kept = [(rc, base) for rc, base in zip(reader.changes, reader.bases, strict=True)
            if Path(owners[rc.address].file).resolve() in mine]
    reader.changes, reader.bases = [rc for rc, _ in kept], [b for _, b in kept]
    reader.counts.update(counts)
    files = {Path(f).resolve() for f in own} | {Path(o.res.file).resolve() for a, o in owners.items()
                                                if Path(o.file).resolve() in mine}
    sups = [s for s in reader.suppressions if s.origin.file and Path(s.origin.file).resolve() in files]
    return _noted(reader, owners), sups, module.not_read


def _noted(reader: PlanReader, owners: dict[str, _Owner]) -> list[Resource]:
    """The reader's views; where a variable's default decided a value, that value's note says so (found by
    reading the resource again with those variables unknown and comparing)."""
    views = reader.views()
    again: dict[str, list[Resource]] = {}
    for rc, base in zip(reader.changes, reader.bases, strict=True):
        owner = owners[rc.address]
        if not owner.defaults:
            continue
        blind = _resource(owner.res, {**owner.scope, **dict.fromkeys(owner.defaults, UNKNOWN)})
        saved = reader.changes, reader.bases
        reader.changes, reader.bases = [_change(rc, blind)], [base]
        try:
            again[rc.address] = reader.views()
        finally:
            reader.changes, reader.bases = saved
    if not again:
        return views
    out: list[Resource] = []
    seen: dict[tuple[str, str], int] = {}
    for view in views:
        address = view.location.address or ""
        others = again.get(address)
        key = (address, view.name)
        i = seen[key] = seen.get(key, -1) + 1
        twins = [o for o in others or () if o.name == view.name and type(o) is type(view)]
        if i >= len(twins):
            out.append(view)
            continue
        names = ", ".join(f"var.{v}" for v in sorted(owners[address].defaults))
        why = (f"from the default of {names} in the module's variable blocks; a value given at plan time (-var, "
               ".tfvars, TF_VAR_) may differ")
        notes = dict(view.notes)
        theirs = msgspec.structs.asdict(twins[i])
        for attr, value in msgspec.structs.asdict(view).items():
            if attr not in ("notes", "locations", "location", "name") and theirs.get(attr) != value:
                notes[attr] = f"{notes[attr]}; {why}" if notes.get(attr) else why
        out.append(msgspec.structs.replace(view, notes=notes))
    return out
