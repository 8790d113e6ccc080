"""An output cut off before its first result row, or garbage, is a ParseError naming the tool, never an
empty result that reads as "0 GPUs" or "no nccl-tests results".

For kinds whose tool always prints at least one row when it prints its table (nccl-tests prints a row per
size or a "Test ... failure" line; nvidia-smi, npu-smi and nvme list print "No devices were found" / "No
NVMe devices detected." instead of an empty table), a header without rows is refused. Kinds whose tool
really prints no rows on a healthy machine keep accepting that: ``nvidia-smi nvlink`` prints nothing on a
GPU without NVLink, /proc/mdstat lists no arrays when there are none, ``lsblk --json`` and
``nvidia-smi -q -x`` say so explicitly (``"blockdevices": []``, ``<attached_gpus>0``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metalfleet.bootstrap.parsers import KIND_TOOLS, PARSERS, ParseError, to_jsonable

from ._fixtures import fixtures_of, read_fixture

#: kind -> the result field that lists its rows (must be non-empty whenever a parse succeeds).
ROWS: dict[str, str] = {
    "nccl-tests": "runs",
    "nvidia-smi": "gpus",
    "nvidia-smi-q": "gpus",
    "npu-smi": "npus",
    "nvme-list": "devices",
}


def _rows(kind: str, result: object) -> list[object]:
    doc = to_jsonable(result)
    if kind == "nccl-tests":
        return [row for run in doc["runs"] for row in run["rows"]] + list(doc["failures"])
    rows = doc[ROWS[kind]]
    assert isinstance(rows, list)
    return rows


def _fails_naming_tool(kind: str, text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        PARSERS[kind](text)
    assert not info.value.internal
    assert str(info.value).startswith(KIND_TOOLS[kind].split()[0])


def test_nccl_tests_header_lines_without_results_are_a_parse_error() -> None:
    _fails_naming_tool("nccl-tests", "# hello\n# this is not a result\n", "no result rows")
    head = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
            "#\n# Using devices\n#  Rank  0 Group  0 Pid  1 on node0 device  0 [0x19] NVIDIA H100 80GB HBM3\n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong\n")
    _fails_naming_tool("nccl-tests", head, "nccl-tests: no result rows")


def test_nccl_tests_failure_without_rows_is_still_evidence() -> None:
    """A run that died before its first size prints 'Test NCCL failure': that is a result (a failed one)."""
    text = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n"
            "node0: Test NCCL failure common.cu:1005 'unhandled system error'\n")
    report = PARSERS["nccl-tests"](text)
    assert report.failures and "Test NCCL failure" in report.failures[0]


@pytest.mark.parametrize(("kind", "text", "match"), [
    ("nvidia-smi-q", "\n==============NVSMI LOG==============\n\nTimestamp : Mon\nDriver Version : 550.90.07\n",
     "no 'GPU <bus id>' section"),
    ("nvidia-smi", "+---+\n| NVIDIA-SMI 550.90.07   Driver Version: 550.90.07   CUDA Version: 12.4 |\n"
                   "|=====+=====+=====|\n", "no GPU rows"),
    ("npu-smi", "+---+\n| npu-smi 24.1.rc1.b030  Version: 24.1.rc1.b030 |\n+===+===+===+\n", "no NPU rows"),
    ("nvme-list", "Node  SN  Model  Namespace  Usage  Format  FW Rev\n"
                  "----- --- ------ ---------- ------ ------- ------\n", "no device rows"),
])
def test_a_table_header_without_rows_is_a_parse_error(kind: str, text: str, match: str) -> None:
    _fails_naming_tool(kind, text, match)


def test_nvidia_smi_q_that_says_zero_gpus_is_accepted() -> None:
    report = PARSERS["nvidia-smi-q"]("==============NVSMI LOG==============\nAttached GPUs : 0\n")
    assert report.gpu_count == 0 and report.attached_gpus == 0


@pytest.mark.parametrize("kind", sorted(ROWS))
def test_every_cut_of_a_real_capture_has_rows_or_fails(kind: str) -> None:
    """Cut each fixture after each of its first lines (where the rows start) and at 20 points beyond: a
    parse that succeeds always has at least one row."""
    for rel in fixtures_of(kind):
        lines = read_fixture(rel).splitlines(keepends=True)
        assert _rows(kind, PARSERS[kind]("".join(lines))), f"{rel}: the whole capture has rows"
        n = len(lines)
        for cut in sorted(set(range(1, min(n, 60))) | set(range(1, n, max(1, n // 20)))):
            try:
                result = PARSERS[kind]("".join(lines[:cut]))
            except ParseError as exc:
                assert not exc.internal, f"{rel} cut at line {cut}: {exc}"
                continue
            assert _rows(kind, result), f"{rel} cut after line {cut} parsed with no rows"


@pytest.mark.parametrize("kind", sorted(ROWS))
@settings(max_examples=40, deadline=None, derandomize=True)
@given(text=st.text(alphabet=st.sampled_from(list("#|+-=: \t\n0123456789abcNVIDSMPUGLOy/")), max_size=200))
def test_garbage_never_parses_as_an_empty_result(kind: str, text: str) -> None:
    try:
        result = PARSERS[kind](text)
    except ParseError as exc:
        assert not exc.internal, str(exc)
        return
    assert _rows(kind, result), f"{text!r} parsed as an empty {kind} result"
