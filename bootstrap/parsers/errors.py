"""The one error every parser raises for input it does not understand."""

from __future__ import annotations

from metalfleet.providers.errors import MetalfleetError

__all__ = ["ParseError"]

_MAX_LINE = 200


class ParseError(MetalfleetError):  # type: ignore[misc]  # folder-mode mypy sees metalfleet.* as Any
    """Input is not what the named tool prints.

    ``tool`` names the command whose output was expected (``"ibstat"``, ``"nvidia-smi -q -x"``);
    ``line_no`` (1-based) and ``line`` point at the offending line when there is one. ``internal`` is
    True only when a parser bug was caught by the registry's safety net (an IndexError or the like
    escaping a parser); tests assert it never happens on real or garbled fixtures. ``path`` names the
    file the text came from when it came from one (see :meth:`in_file`).
    """

    def __init__(
        self,
        tool: str,
        reason: str,
        *,
        line_no: int | None = None,
        line: str | None = None,
        internal: bool = False,
        path: str | None = None,
    ) -> None:
        text = f"{tool}: {reason}"
        if line_no is not None:
            text += f" (line {line_no}"
            if line is not None:
                shown = line if len(line) <= _MAX_LINE else line[:_MAX_LINE] + "..."
                text += f": {shown!r}"
            text += ")"
        if path is not None:
            text += f" in {path}"
        super().__init__(text, code="parse_error")
        self.tool = tool
        self.reason = reason
        self.line_no = line_no
        self.line = line
        self.internal = internal
        self.path = path

    def in_file(self, path: str) -> ParseError:
        """The same error, naming the file the text was read from."""
        return ParseError(self.tool, self.reason, line_no=self.line_no, line=self.line, internal=self.internal,
                          path=path)
