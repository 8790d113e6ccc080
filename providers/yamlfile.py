"""YAML text as data: ``yaml.safe_load`` with the limits a file from anywhere needs.

Nesting depth, alias expansion ("billion laughs"), recursive aliases and duplicate mapping keys are
refused with the line and column; so is a value the YAML constructor cannot build (a 5000-digit
integer, the date 2024-13-45), which ``safe_load`` lets escape as a ``ValueError``. Every fault is a
:class:`~metalfleet.providers.textfile.BadFileError` naming the file.

Duplicate keys are refused because YAML loaders keep the last value silently: ``count: 2`` followed by
``count: 200`` (or a host listed twice in an inventory's ``hosts:`` mapping) would otherwise order or
touch what the user did not mean, the same mistake unknown keys are refused for. Keys brought in by a
``<<: *defaults`` merge may still be overridden; that is what merges are for.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .textfile import BadFileError, shorten

__all__ = ["MAX_ALIAS_NODES", "MAX_YAML_DEPTH", "parse_yaml"]

#: Nesting deeper than this is no cluster spec or inventory; the limit keeps the recursive YAML
#: composer far from Python's recursion limit.
MAX_YAML_DEPTH = 64
#: Nodes reachable through aliases, counted with repetition. A legitimate ``<<: *defaults`` on every
#: host of a large inventory stays far below; a "billion laughs" document is stopped at its first levels.
MAX_ALIAS_NODES = 100_000

_MERGE = "tag:yaml.org,2002:merge"
_STR = "tag:yaml.org,2002:str"


class _Refused(yaml.MarkedYAMLError):  # type: ignore[misc, unused-ignore]  # yaml is Any without types-PyYAML
    """Valid YAML this loader will not load (too deep, an alias bomb, a recursive alias, a key given twice)."""


class _LimitedLoader(yaml.SafeLoader):  # type: ignore[misc, unused-ignore]
    """SafeLoader that refuses deep nesting, alias bombs, recursive aliases and duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded
        self._alias_nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            node: Any = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:
                raise _Refused(None, None, f"alias *{event.anchor} refers to a node that contains it "
                               "(a recursive structure)", event.start_mark)
            self._alias_nodes += size
            if self._alias_nodes > MAX_ALIAS_NODES:
                raise _Refused(None, None, f"aliases expand to more than {MAX_ALIAS_NODES} nodes "
                               "(an alias bomb?)", event.start_mark)
            return node
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise _Refused(None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, MappingNode):
            self._check_duplicates(node)
            size = 1 + sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        elif isinstance(node, SequenceNode):
            size = 1 + sum(self._sizes[id(v)] for v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = size
        return node

    @staticmethod
    def _check_duplicates(node: MappingNode) -> None:
        """A key given twice in one mapping (merged ``<<`` keys may be overridden; that is what they are for)."""
        seen: dict[tuple[str, Any], Any] = {}
        for key_node, _value in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE:
                continue
            key = (key_node.tag, key_node.value)
            if key in seen:
                shown = key_node.value if key_node.tag == _STR else f"{key_node.value} ({key_node.tag})"
                first = f" (first given at line {seen[key].line + 1})" if seen[key] is not None else ""
                raise _Refused(None, None, f"duplicate key {shown!r}{first}", key_node.start_mark)
            seen[key] = key_node.start_mark

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError) as exc:  # int("9"*5000), date(2024, 13, 45), ...
            reason = str(exc).split(";")[0]  # drop CPython's advice (sys.set_int_max_str_digits)
            raise ConstructorError(None, None, f"cannot read value {shorten(node.value)}: {reason}",
                                   node.start_mark) from exc


def _line_col(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def parse_yaml(text: str, source: str, what: str) -> Any:
    """``text`` (the content of ``source``) as YAML data; faults are a BadFileError with line and column."""
    loader: _LimitedLoader | None = None
    try:
        loader = _LimitedLoader(text)  # the reader checks every character here
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        if exc.context and exc.problem:
            problem += f" ({exc.context})"
        if mark is None:
            raise BadFileError(f"{what} {source} is not valid YAML: {problem}", path=source) from None
        line, col = mark.line + 1, mark.column + 1
        where = f"line {line}, column {col}"
        text = f"{what} {source}, {where}: {problem}" if isinstance(exc, _Refused) else \
            f"{what} {source} is not valid YAML at {where}: {problem}"
        raise BadFileError(text, path=source, line=line, column=col) from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        offset = len(text[: exc.position].encode("utf-8"))
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise BadFileError(f"{what} {source} is not valid YAML at line {line}, column {col}: character "
                           f"U+{ord(char):04X} is not allowed (byte offset {offset})", path=source, offset=offset,
                           line=line, column=col) from None
    except yaml.YAMLError as exc:
        raise BadFileError(f"{what} {source} is not valid YAML: {' '.join(str(exc).split())}", path=source) from None
    except RecursionError:  # the depth limit should make this unreachable; never a traceback though
        raise BadFileError(f"{what} {source} is nested too deeply", path=source) from None
    finally:
        if loader is not None:
            loader.dispose()
