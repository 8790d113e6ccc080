"""Inputs to resource views: the kind of each file is detected from its content, never its name.

- JSON with ``format_version`` and ``resource_changes``/``planned_values``: a Terraform plan;
- JSON with ``deployment``: ``pulumi stack export``; JSON with ``steps``: ``pulumi preview --json``;
- YAML (or JSON) with ``provider:``: a metalfleet cluster spec; with ``hosts:`` whose hosts have ``bmc:``: an
  IPMI/Redfish pool inventory;
- text with top-level Terraform blocks (``resource "t" "n" {``, ``variable``, ``module``, ...): Terraform
  configuration in HCL (:mod:`.hcl`), read in its folder's module; a folder is every ``*.tf`` in it, one module.

Anything else, or a file that cannot be read, is a :class:`~metalfleet.providers.textfile.BadFileError`
naming the file (the CLI exits 2 with that one line): a document of a known kind whose shape is not that
kind's (a preview whose ``steps`` is a string) is refused, never read as empty, a ``.tf`` file that does not parse
is named with the line where it fails, and Terraform's JSON configuration syntax (``.tf.json``) is named as such,
with the plan to give instead.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from metalfleet.providers.textfile import BadFileError, read_text_file

from ..config import PolicyConfig, Suppression
from ..model import Location, Resource
from ..yamlpos import load_with_positions, suppression_comments
from .common import Assumptions, ShapeError, json_type
from .terraform import PlanReader, _ResourceChange, read_plan

# The Pulumi, cluster-spec and inventory adapters load with the first input of their kind (a Terraform plan, the
# benchmark's case, needs none of them).

__all__ = ["KINDS", "LoadedInput", "OpenedInput", "assumptions", "load_input", "open_input", "spec_resources"]

#: Large enough for a 10,000-instance Terraform plan (about 5 KB per instance).
MAX_INPUT_BYTES = 512 * 1024 * 1024

KINDS = {
    "terraform-plan": "Terraform plan JSON (terraform show -json)",
    "terraform-hcl": "Terraform .tf files (HCL) or a folder of them",
    "pulumi-preview": "pulumi preview --json",
    "pulumi-export": "pulumi stack export",
    "cluster-spec": "metalfleet cluster spec",
    "pool-inventory": "IPMI/Redfish pool inventory",
}


@dataclass
class LoadedInput:
    path: str
    kind: str
    resources: list[Resource]
    suppressions: list[Suppression] = field(default_factory=list)
    #: what the input names but this check did not read (a registry module of a .tf file)
    notices: list[str] = field(default_factory=list)


def assumptions(config: PolicyConfig) -> Assumptions:
    return Assumptions(ebs_encryption_by_default=config.ebs_encryption_by_default,
                       imds_tokens_required_by_default=config.imds_tokens_required_by_default)


class _Top(msgspec.Struct):
    """The top-level keys that tell the JSON kinds apart; values are skipped, not built."""

    format_version: msgspec.Raw = msgspec.Raw(b"")
    resource_changes: msgspec.Raw = msgspec.Raw(b"")
    planned_values: msgspec.Raw = msgspec.Raw(b"")
    deployment: msgspec.Raw = msgspec.Raw(b"")
    steps: msgspec.Raw = msgspec.Raw(b"")


class _PlanTop(msgspec.Struct):
    """:class:`_Top` that also decodes what the Terraform adapter reads (``terraform.Plan``'s fields, same types),
    so a plan is scanned once. Any document this does not fit goes the general way (:class:`_Top`, then the
    adapter), which gives the same result or error as before."""

    format_version: str | msgspec.UnsetType | None = msgspec.UNSET
    terraform_version: str | None = None
    resource_changes: list[_ResourceChange] | msgspec.UnsetType = msgspec.UNSET
    planned_values: msgspec.Raw = msgspec.Raw(b"")
    configuration: dict[str, Any] | None = None
    deployment: msgspec.Raw = msgspec.Raw(b"")
    steps: msgspec.Raw = msgspec.Raw(b"")


_PLAN_TOP = msgspec.json.Decoder(_PlanTop)


#: Inputs this large are mapped rather than read: a plan of 10,000 instances is ~45 MiB, and copying it into
#: fresh memory costs more (page faults, zeroing) than parsing it from the page cache.
_MAP_FROM = 1 << 20


def _read_bytes(path: str) -> bytes | mmap.mmap:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_INPUT_BYTES:
                raise BadFileError(f"policy input {path} is too large ({size} bytes; the limit is {MAX_INPUT_BYTES})",
                                   path=path)
            if size >= _MAP_FROM:
                try:
                    return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):  # not mappable (a pipe, a special file): read it
                    pass
            return fh.read(MAX_INPUT_BYTES + 1)
    except OSError:
        read_text_file(path, "policy input")  # the same one-line message every command gives
        raise


def _json_error(path: str, data: bytes | mmap.mmap, exc: Exception) -> BadFileError:
    text = " ".join(str(exc).split())
    if b"\x00" in data[:65536]:
        nul = data.find(b"\x00")
        return BadFileError(f"policy input {path} is binary, not text: NUL byte at byte offset {nul}", path=path,
                            offset=nul)
    return BadFileError(f"policy input {path} is not valid JSON: {text}", path=path)


#: A top-level block of Terraform's native syntax, at the start of a line: what a ``.tf`` file is made of.
_HCL_BLOCK = re.compile(r'^[ \t]*(?:(?:resource|data)[ \t]+"[^"\n]*"[ \t]+"[^"\n]*"|(?:module|variable|output|provider)'
                        r'[ \t]+"[^"\n]*"|terraform|locals)[ \t]*\{', re.MULTILINE)
#: Top-level keys of Terraform's JSON configuration syntax (``.tf.json``); a cluster spec's ``provider`` is a string.
_TF_JSON_KEYS = frozenset({"resource", "data", "module", "variable", "output", "locals", "terraform", "provider",
                           "moved", "import", "check", "removed"})
_READS = ("policy check reads plans: terraform plan -out=plan.out && terraform show -json plan.out > plan.json, "
          "then check plan.json")


def _hcl_input(path: str, assume: Assumptions) -> OpenedInput:
    """A ``.tf`` file (in its folder's module) or a folder of them."""
    from .hcl import read_tf

    views, sups, not_read = read_tf(path, assume)
    return OpenedInput(path, "terraform-hcl", sups, views, notices=not_read)


def _other_json(path: str, data: bytes | mmap.mmap, text_of: Any, assume: Assumptions) -> OpenedInput:
    """JSON that is neither a plan nor Pulumi's: a cluster spec or pool inventory written as JSON (JSON is YAML), or
    an error naming what it is (Terraform's JSON configuration syntax) or that it is none of the inputs."""
    try:
        doc = msgspec.json.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise _json_error(path, data, exc) from None
    if isinstance(doc, dict):
        if doc and set(doc) <= _TF_JSON_KEYS and not isinstance(doc.get("provider", {}), str):
            raise BadFileError(f"policy input {path} is Terraform configuration in JSON syntax (.tf.json), not a plan; "
                               f"{_READS}", path=path)
        if isinstance(doc.get("provider"), str) or "hosts" in doc:
            return _yaml_input(path, text_of(), assume)
        if "format_version" in doc and "values" in doc:
            raise BadFileError(f"policy input {path} is Terraform state JSON (terraform show -json of a state), not "
                               f"a plan; {_READS}", path=path)
        keys = ", ".join(sorted(str(k) for k in doc)[:6]) or "none"
        raise BadFileError(f"policy input {path} is JSON but none of the inputs policy check reads (top-level keys: "
                           f"{keys}); it reads " + ", ".join(KINDS.values()), path=path)
    raise BadFileError(f"policy input {path} is JSON ({json_type(doc)}) but none of the inputs policy check reads "
                       "(each is a JSON or YAML object); it reads " + ", ".join(KINDS.values()), path=path)


def _yaml_input(path: str, text: str, assume: Assumptions) -> OpenedInput:
    """A cluster spec or pool inventory (YAML, or JSON as YAML), or Terraform HCL source (text that is not YAML, or
    not a mapping, with a top-level Terraform block)."""
    from .inventory import inventory_resources, is_pool_inventory

    try:
        doc, positions = load_with_positions(text, path, "policy input")
    except BadFileError:
        if _HCL_BLOCK.search(text):
            return _hcl_input(path, assume)
        raise
    if isinstance(doc, dict) and "provider" in doc:
        return OpenedInput(path, "cluster-spec", _comment_suppressions(text, path),
                           spec_resources(doc, path, positions))
    if is_pool_inventory(doc):
        return OpenedInput(path, "pool-inventory", _comment_suppressions(text, path),
                           inventory_resources(doc, path, positions))
    if not isinstance(doc, dict) and _HCL_BLOCK.search(text):
        return _hcl_input(path, assume)
    shape = "a mapping" if isinstance(doc, dict) else f"a {type(doc).__name__}"
    raise BadFileError(f"policy input {path} is YAML ({shape}) but neither a cluster spec (provider:) nor a pool "
                       "inventory (hosts: with bmc:); policy check reads " + ", ".join(KINDS.values()), path=path)


def _comment_suppressions(text: str, path: str) -> list[Suppression]:
    return [Suppression(c.rule, c.reason, c.expires, None, Location(path, c.line, c.column), (c.first, c.last),
                        c.expires_text if c.expires is None else None) for c in suppression_comments(text)]


def spec_resources(data: dict[str, Any], path: str, positions: Any) -> list[Resource]:
    """A cluster spec, validated as ``metalfleet validate`` does, as resource views located in ``path``."""
    from metalfleet.providers.spec import parse_spec

    from .metalfleet import cluster_resources

    spec = parse_spec(data, path)
    dumped = spec.model_dump(mode="json")

    def where(*p: str | int) -> Location:
        line, col = positions.get(*p) if positions is not None else (None, None)
        return Location(path, line, col, ".".join(str(x) for x in p) or None)

    return cluster_resources(dumped, where, "spec", "cluster spec")


@dataclass
class OpenedInput:
    """An input read and told apart, with its suppressions; its views are built by :meth:`views`, so processes
    that divide a large plan each build only their share (the plan's whole-plan facts are read once, here)."""

    path: str
    kind: str
    suppressions: list[Suppression]
    resources: list[Resource] | None = None
    plan: PlanReader | None = None
    notices: list[str] = field(default_factory=list)

    def views(self, part: tuple[int, int] = (0, 1)) -> list[Resource]:
        """The views of share i of n (``part``): a plan divides its resources; any other input is not divided
        (share 0 has them all, the others none)."""
        if self.plan is not None:
            return self.plan.views(part)
        return list(self.resources or ()) if part[0] == 0 else []


def load_input(path: str | Path, config: PolicyConfig | None = None, tf_dir: str | Path | None = None,
               part: tuple[int, int] = (0, 1)) -> LoadedInput:
    """Read ``path``, detect its kind and return its resource views (share ``part``, see
    :meth:`OpenedInput.views`) and in-file suppressions."""
    opened = open_input(path, config, tf_dir)
    return LoadedInput(opened.path, opened.kind, opened.views(part), opened.suppressions, opened.notices)


def open_input(path: str | Path, config: PolicyConfig | None = None,
               tf_dir: str | Path | None = None) -> OpenedInput:
    """Read ``path`` and detect its kind; a plan's views are left to :meth:`OpenedInput.views`."""
    path = str(path)
    assume = assumptions(config or PolicyConfig())
    if os.path.isdir(path):
        if any(Path(path).glob("*.tf")):
            return _hcl_input(path, assume)
        raise BadFileError(f"cannot read policy input {path}: it is a directory, not a file", path=path)
    data = _read_bytes(path)
    head = data[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith((b"{", b"[")):
        fast: _PlanTop | None = None
        if head.startswith(b"{"):
            try:
                fast = _PLAN_TOP.decode(data)
            except (msgspec.DecodeError, msgspec.ValidationError):
                fast = None
        try:
            if fast is not None and fast.format_version is not msgspec.UNSET and (
                    fast.resource_changes is not msgspec.UNSET or fast.planned_values):
                rcs = [] if fast.resource_changes is msgspec.UNSET else fast.resource_changes
                reader = PlanReader(rcs, fast.configuration, path, assume, tf_dir)
                return OpenedInput(path, "terraform-plan", reader.suppressions, plan=reader)
        except ShapeError as exc:
            raise BadFileError(f"policy input {path}: {exc}", path=path) from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _json_error(path, data, exc) from None
        fast = None  # not a plan, or not one the fast way reads: the general way below
        try:
            top = msgspec.json.decode(data, type=_Top)
        except msgspec.ValidationError:  # valid JSON, but not an object
            return _other_json(path, data, lambda: read_text_file(path, "policy input"), assume)
        except msgspec.DecodeError as exc:
            raise _json_error(path, data, exc) from None
        where = ""
        try:
            if top.format_version and (top.resource_changes or top.planned_values):
                reader = read_plan(data, path, assume, tf_dir)
                return OpenedInput(path, "terraform-plan", reader.suppressions, plan=reader)
            if top.deployment:
                from .pulumi import resources_from_export

                doc = msgspec.json.decode(data)
                where = "not a pulumi stack export this tool can read"
                return OpenedInput(path, "pulumi-export", [], resources_from_export(doc, path, assume))
            if top.steps:
                from .pulumi import resources_from_preview

                doc = msgspec.json.decode(data)
                where = "not a pulumi preview --json document this tool can read"
                return OpenedInput(path, "pulumi-preview", [], resources_from_preview(doc, path, assume))
        except ShapeError as exc:
            raise BadFileError(f"policy input {path}: {where}: {exc}" if where else f"policy input {path}: {exc}",
                               path=path) from None
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _json_error(path, data, exc) from None
        return _other_json(path, data, lambda: read_text_file(path, "policy input"), assume)
    return _yaml_input(path, read_text_file(path, "policy input"), assume)

