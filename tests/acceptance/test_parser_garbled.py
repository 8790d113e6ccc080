"""Property tests: truncated or garbled real fixtures either parse or raise ParseError naming the tool.

Never an IndexError/KeyError/AttributeError/...: the registry's safety net would turn those into
``ParseError(internal=True)``, and these tests fail on that too, so a parser bug cannot hide behind it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metalfleet.bootstrap.parsers import KIND_TOOLS, PARSERS, ParseError

from ._fixtures import FIXTURE_KINDS, fixtures_of, read_fixture

KINDS = sorted(set(FIXTURE_KINDS.values()))
_TEXT_CACHE: dict[str, str] = {}


def _text(rel: str) -> str:
    if rel not in _TEXT_CACHE:
        _TEXT_CACHE[rel] = read_fixture(rel)
    return _TEXT_CACHE[rel]


@st.composite
def garbled(draw: st.DrawFn, kind: str) -> str:
    text = _text(draw(st.sampled_from(fixtures_of(kind))))
    how = draw(st.sampled_from(["truncate", "delete_lines", "bytes", "swap_chars", "dup_line", "combo"]))
    if how in ("truncate", "combo") and text:
        text = text[: draw(st.integers(0, len(text)))]
    if how in ("delete_lines", "combo"):
        lines = text.splitlines(keepends=True)
        if lines:
            drop = draw(st.sets(st.integers(0, len(lines) - 1), max_size=max(1, min(8, len(lines)))))
            text = "".join(ln for i, ln in enumerate(lines) if i not in drop)
    if how in ("bytes", "combo"):
        junk = draw(st.binary(min_size=1, max_size=24)).decode("utf-8", errors="replace")
        at = draw(st.integers(0, len(text)))
        text = text[:at] + junk + text[at:]
    if how == "swap_chars" and text:
        for _ in range(draw(st.integers(1, 6))):
            at = draw(st.integers(0, len(text) - 1))
            text = text[:at] + draw(st.sampled_from(list(" \t\n:|#-0123456789x/()[]<>"))) + text[at + 1:]
    if how == "dup_line":
        lines = text.splitlines(keepends=True)
        if lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            text = "".join(lines)
    return text


@pytest.mark.parametrize("kind", KINDS)
def test_garbled_fixture_parses_or_raises_parse_error(kind: str) -> None:
    parser = PARSERS[kind]
    tool = KIND_TOOLS[kind]

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(garbled(kind))
    def check(text: str) -> None:
        try:
            parser(text)
        except ParseError as exc:
            assert not exc.internal, f"parser bug surfaced through the safety net: {exc}"
            assert exc.tool, "ParseError must name the tool"
            assert str(exc).startswith(exc.tool)
            # The tool named is the command of this kind (allowing for the generic/specific spelling).
            assert exc.tool.split()[0] == tool.split()[0] or exc.tool.split()[0] in tool, (exc.tool, tool)

    check()


@pytest.mark.parametrize("kind", sorted(PARSERS))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(text=st.text(max_size=300))
def test_random_text_never_escapes_parse_error(kind: str, text: str) -> None:
    try:
        PARSERS[kind](text)
    except ParseError as exc:
        assert not exc.internal, str(exc)
