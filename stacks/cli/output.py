"""The one place for what commands print: the text table (:func:`metalfleet.providers.tables.text_table`), the JSON
dump, the ``--json`` switch, the node table and report files."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.tables import text_table

if TYPE_CHECKING:
    from metalfleet.providers import Node

__all__ = ["add_json", "dump", "node_table", "order_progress", "text_table", "write_report"]


def dump(doc: Any, *, default: Callable[[Any], Any] | None = None, allow_nan: bool = True) -> str:
    """``doc`` as indented JSON (``default`` and ``allow_nan`` as :func:`json.dumps`)."""
    return json.dumps(doc, indent=2, default=default, allow_nan=allow_nan)


def add_json(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """The ``--json`` switch: machine-readable output instead of the text."""
    p.add_argument("--json", action="store_true", help=help)


def node_table(nodes: Sequence[Node]) -> str:
    table: str = text_table([[n.name or "", n.id, n.state.value, n.zone or "", n.private_ip or "", n.offering]
                             for n in nodes], ["name", "id", "state", "zone", "private ip", "offering"])
    return table


def order_progress(nodes: Sequence[Node]) -> None:
    """One rewritten stderr line counting the nodes per state while an order waits."""
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.state.value] = counts.get(n.state.value, 0) + 1
    text = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"\r  waiting: {text}".ljust(60), end="", file=sys.stderr, flush=True)


def write_report(path: str, text: str, what: str) -> None:
    """Write a report; a folder that does not exist or cannot be written is an error naming the path."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidSpecError(f"cannot write {what} {path}: {exc.strerror or exc}", field="path",
                               value=path) from exc
