"""YAML with the line and column of every value, and suppression comments.

The data itself comes from :func:`metalfleet.providers.yamlfile.parse_yaml` (its limits, its errors); the
positions from composing the same text again with PyYAML's node tree, which keeps marks. Findings then
point at the line of the field at fault (``network.public_ip`` on line 24), which SARIF, the GitHub
annotations and the Markdown report show.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yaml.nodes import Node

# PyYAML (and metalfleet.providers.yamlfile) load when a YAML document is read, not on import: a Terraform plan
# or Pulumi JSON input never needs them (`metalfleet policy check` on a plan starts faster).

__all__ = ["Positions", "SuppressionComment", "load_with_positions", "suppression_comments"]

Path = tuple[str | int, ...]

_MERGE = "tag:yaml.org,2002:merge"


class Positions:
    """(line, column), 1-based, of the key (or sequence item) at each path; the nearest parent otherwise."""

    def __init__(self, table: dict[Path, tuple[int, int]]) -> None:
        self._table = table

    def get(self, *path: str | int) -> tuple[int | None, int | None]:
        p: Path = tuple(path)
        while p:
            if p in self._table:
                return self._table[p]
            p = p[:-1]
        return self._table.get((), (None, None))

    def __contains__(self, path: Path) -> bool:
        return path in self._table


def _walk(node: Node, path: Path, out: dict[Path, tuple[int, int]]) -> None:
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    if isinstance(node, MappingNode):
        merged: list[tuple[Node, Node]] = []
        for key, value in node.value:
            if key.tag == _MERGE:
                for m in (value.value if isinstance(value, SequenceNode) else [value]):
                    if isinstance(m, MappingNode):
                        merged.extend(m.value)
                continue
            if isinstance(key, ScalarNode):
                p = (*path, key.value)
                out[p] = (key.start_mark.line + 1, key.start_mark.column + 1)
                _walk(value, p, out)
        for key, value in merged:  # a merged key counts where it was written, unless overridden
            if isinstance(key, ScalarNode) and (*path, key.value) not in out:
                p = (*path, key.value)
                out[p] = (key.start_mark.line + 1, key.start_mark.column + 1)
                _walk(value, p, out)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            p = (*path, i)
            out[p] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, p, out)


def load_with_positions(text: str, source: str, what: str) -> tuple[Any, Positions]:
    """The document (checked by parse_yaml: limits, duplicate keys) and the positions of its values."""
    import yaml

    from metalfleet.providers.yamlfile import parse_yaml

    data = parse_yaml(text, source, what)
    table: dict[Path, tuple[int, int]] = {(): (1, 1)}
    root = yaml.compose(text, Loader=yaml.SafeLoader)  # safe: parse_yaml has checked depth and aliases
    if root is not None:
        table[()] = (root.start_mark.line + 1, root.start_mark.column + 1)
        _walk(root, (), table)
    return data, Positions(table)


# ------------------------------------------------------------------------------------------ comments

#: ``# metalfleet:suppress MF-NET-001 expires=2026-03-31 reason: lab cluster behind a VPN``
_COMMENT = re.compile(r"#\s*metalfleet:suppress\s+(?P<rule>\S+)(?P<rest>.*)$")
_EXPIRES = re.compile(r"\bexpires=(\S+)")
_REASON = re.compile(r"\breason:\s*(.*)$")


@dataclass(frozen=True)
class SuppressionComment:
    rule: str
    reason: str | None
    expires: date | None
    expires_text: str | None
    line: int
    column: int
    #: Lines (inclusive) the comment covers: the block it stands above, or its own line when trailing.
    first: int
    last: int


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str, hash_char: str = "#") -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(hash_char) and not s.startswith("//")


def _scope(lines: list[str], index: int, trailing: bool, hcl: bool) -> tuple[int, int]:
    """Lines covered by a comment on ``lines[index]`` (0-based index, result 1-based): the YAML block below it.
    For HCL only the next line is given; the Terraform adapter maps comments to resource blocks itself."""
    start = index if trailing else next((j for j in range(index + 1, len(lines)) if _content(lines[j])), index)
    if hcl:
        return start + 1, start + 1
    base = _indent(lines[start])
    end = start
    for j in range(start + 1, len(lines)):
        if not _content(lines[j]):
            continue
        stripped = lines[j].lstrip(" ")
        if _indent(lines[j]) <= base and not (stripped.startswith("- ") and _indent(lines[j]) == base
                                              and not lines[start].lstrip(" ").startswith("- ")):
            break
        end = j
    return start + 1, end + 1


def suppression_comments(text: str, *, hcl: bool = False) -> Iterator[SuppressionComment]:
    """Every ``# metalfleet:suppress RULE [expires=DATE] [reason: TEXT]`` comment in ``text``."""
    if "metalfleet:suppress" not in text:
        return
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _COMMENT.search(line)
        if not m:
            continue
        rest = m.group("rest")
        reason_m = _REASON.search(rest)
        reason = reason_m.group(1).strip() if reason_m else None
        exp_m = _EXPIRES.search(rest.split("reason:")[0])
        expires_text = exp_m.group(1) if exp_m else None
        try:
            expires = date.fromisoformat(expires_text) if expires_text else None
        except ValueError:
            expires = None
        trailing = bool(line[: m.start()].strip())
        first, last = _scope(lines, i, trailing, hcl)
        yield SuppressionComment(m.group("rule"), reason or None, expires, expires_text, i + 1, m.start() + 1,
                                 first, last)
