"""The acceptance table: one row per node (and per run across nodes), then every check's status."""

from __future__ import annotations

from metalfleet.providers.tables import text_table

from .results import AcceptanceReport, NodeAcceptance, NodeStatus
from .verdict import CheckResult, CheckStatus, Verdict

__all__ = ["check_statuses", "format_table"]


def _mark(c: CheckResult) -> str:
    return f" {c.status.upper()}" if c.status in (CheckStatus.FAIL, CheckStatus.SKIP) else ""


def _cell_gpus(n: NodeAcceptance) -> str:
    c = n.verdict.check("gpu-count")
    if c is None or c.measured is None:
        return "-" if c is None else f"?{_mark(c)}"
    return f"{c.measured}/{c.expected}" if c.expected is not None else str(c.measured)


def _cell_nvlink(n: NodeAcceptance) -> str:
    parts = []
    topo = n.verdict.check("gpu-interconnect")
    if topo is not None:
        kinds = topo.measured if isinstance(topo.measured, list) else []
        parts.append(("/".join(kinds) or "?") + _mark(topo))
    links = n.verdict.check("nvlink-links")
    if links is not None and not links.skipped:
        parts.append(f"{links.measured} links" + _mark(links))
    return ", ".join(parts) or "-"


def _cell_fabric(n: NodeAcceptance) -> str:
    fab = n.baseline.fabric if n.baseline is not None else None
    kind = (fab.kind if fab is not None else None) or "none"
    c = n.verdict.check("fabric-ports")
    if c is None:
        return kind if kind == "none" else f"{kind} ?"
    if c.measured is None:
        return f"{kind} ?{_mark(c)}"
    count = len(c.measured) if isinstance(c.measured, list) else c.measured
    want = fab.ports if fab is not None else None
    return f"{kind} {count}/{want}" + _mark(c)


def _cell_busbw(v: Verdict) -> str:
    c = v.check("allreduce-busbw")
    if c is None:
        return "-"
    measured = c.measured.get("busbw_gbs") if isinstance(c.measured, dict) else c.measured
    if not isinstance(measured, int | float):
        return "-" + _mark(c)
    if isinstance(c.expected, int | float) and c.expected:
        return f"{measured:.1f}/{float(c.expected):.1f} GB/s ({measured / float(c.expected):.0%})"
    return f"{measured:.1f} GB/s (no baseline){_mark(c)}"


def _cell_skipped(v: Verdict) -> str:
    return ",".join(c.name for c in v.skipped) or "-"


def _first_clause(reason: str) -> str:
    """The reason up to its first "; " (the measurement; the rest is how it was taken)."""
    return reason.split("; ", 1)[0]


def check_statuses(report: AcceptanceReport) -> str:
    """One line per node (and run across nodes): ``name: check=status check=status ...``, every check judged."""
    lines = [f"{n.host}: " + " ".join(f"{c.name}={c.status}" for c in n.verdict.checks) for n in report.nodes]
    lines += [f"{len(m.hosts)} nodes ({m.offering}): " + " ".join(f"{c.name}={c.status}" for c in m.verdict.checks)
              for m in report.multi_node]
    return "\n".join(lines)


def format_table(report: AcceptanceReport) -> str:
    """One row per node: node, offering, GPUs, NVLink, fabric, busbw vs baseline, the checks that were skipped
    (not judged: no evidence or no baseline; never counted as passed), verdict + first reason; then the
    status of every check of every node."""
    rows = []
    for n in report.nodes:
        verdict = "PASS" if n.passed else \
            f"{'UNREACHABLE' if n.status == NodeStatus.UNREACHABLE else 'FAIL'}: {_first_clause(n.reason)}"
        rows.append([n.host, n.offering, _cell_gpus(n), _cell_nvlink(n), _cell_fabric(n), _cell_busbw(n.verdict),
                     _cell_skipped(n.verdict), verdict])
    for m in report.multi_node:
        verdict = "PASS" if m.passed else f"FAIL: {_first_clause(m.reason)}"
        rows.append([f"{len(m.hosts)} nodes", m.offering, "-", "-", "-", _cell_busbw(m.verdict),
                     _cell_skipped(m.verdict), verdict])
    passed = sum(1 for n in report.nodes if n.passed)
    skipped = sum(len(n.verdict.skipped) for n in report.nodes)
    head = f"{passed} of {len(report.nodes)} node(s) passed acceptance in {report.seconds:.1f}s"
    if skipped:
        head += f" ({skipped} check(s) skipped, not counted as passed)"
    if report.multi_node:
        head += "; " + "; ".join(f"all_reduce across {len(m.hosts)} nodes: {'pass' if m.passed else 'FAIL'}"
                                 for m in report.multi_node)
    table = text_table(rows, ["node", "offering", "GPUs", "NVLink", "fabric", "busbw vs baseline", "skipped",
                              "verdict"])
    out = f"{head}\n{table}\n\nchecks:\n{check_statuses(report)}"
    for offering, loc in report.localisation.items():
        lines = loc.summary_lines()
        if lines:
            out += f"\n\nlocalisation ({offering}):\n" + "\n".join(f"  {line}" for line in lines)
    return out
