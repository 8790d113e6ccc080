"""Plain-text tables for terminal output: the one table printer of metalfleet (the command line's listings, the
acceptance table). Standard library only."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["text_table"]


def text_table(rows: Sequence[Sequence[object]], header: Sequence[str]) -> str:
    """Left-aligned columns two spaces apart, a rule of dashes under the header, no trailing spaces."""
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(cells[0]), line(["-" * w for w in widths]), *[line(r) for r in cells[1:]]])
