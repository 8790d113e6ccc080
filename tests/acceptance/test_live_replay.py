"""Live acceptance without root or sshd: the no-root twin of test_live.py.

The same hosts, faults and expected outcome of every check as test_live.py, but each host is a replayed
one (tests/acceptance/_replay.py: the simulated hosts' hardware model, called in-process) reached
through ``run_acceptance(..., connect=fleet)``. Everything above the connector is the production code:
probe planning, the framed probe script, timeouts, the gate, the run across nodes, saving, reports.
test_live.py keeps checking the same flow over real SSH.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap.acceptance.baselines import resolve_baseline
from metalfleet.bootstrap.acceptance.live import AcceptanceReport, format_table, run_acceptance
from metalfleet.bootstrap.acceptance.offline import verify_dir
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions
from metalfleet.bootstrap.inventory import Inventory
from metalfleet.bootstrap.parsers import parse
from metalfleet.bootstrap.replay import ReplayFleet, ReplayHost

from ._replay import replayed_host
from ._sim import P5
from .test_live import HEALTHY, HOSTS, OUTCOMES

NAMES = list(HOSTS)
NCCL_TIMEOUT = 0.5
OPTIONS = AcceptanceOptions(nccl_timeout=NCCL_TIMEOUT)


@dataclass
class Run:
    fleet: ReplayFleet
    report: AcceptanceReport
    save_dir: Path
    events: list[Any]

    def node(self, name: str) -> Any:
        return self.report.node(name)

    def host(self, name: str) -> ReplayHost:
        return self.fleet[name]


def _extra(name: str) -> dict[str, Any]:
    extra, _ = HOSTS[name]
    cfg = {**P5, **extra}
    if "fixtures" in extra:
        cfg["fixtures"] = {**P5["fixtures"], **extra["fixtures"]}
    return cfg


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    hosts, nodes = [], []
    for i, name in enumerate(NAMES):
        offering = HOSTS[name][1]
        host, node = replayed_host(name, f"10.1.0.{i + 1}", offering, resolve_baseline(offering), OPTIONS,
                                   _extra(name))
        hosts.append(host)
        if name != "gone":  # nothing answers at its address
            nodes.append(node)
    fleet = ReplayFleet(nodes)
    save = tmp_path_factory.mktemp("accept")
    events: list[Any] = []
    report = run_acceptance(Inventory(tuple(hosts)), save_dir=save, progress=events.append, options=OPTIONS,
                            max_workers=len(NAMES), connect=fleet)
    yield Run(fleet, report, save, events)


def statuses(verdict: Any) -> dict[str, str]:
    return {c.name: c.status for c in verdict.checks}


def reason(node: Any, check: str) -> str:
    c = node.verdict.check(check)
    assert c is not None, f"{node.host}: no {check} check"
    return str(c.reason)


def test_every_check_of_every_host_has_its_outcome(run: Run) -> None:
    for name, diff in OUTCOMES.items():
        assert statuses(run.node(name).verdict) == {**HEALTHY, **diff}, name
        assert run.node(name).passed is (not any(s == "fail" for s in diff.values())), name
    assert statuses(run.node("gone").verdict) == {"reachable": "fail"}
    assert not run.report.passed


def test_a_healthy_host_passes_with_every_probe_in_one_channel(run: Run) -> None:
    n = run.node("healthy")
    assert n.passed and n.round_trips == 1 and n.error is None, n.reason
    assert reason(n, "gpu-count") == "found 8 GPUs (nvidia-smi -q)"
    assert reason(n, "gpu-interconnect") == "all 28 GPU pairs linked by NV18"
    assert reason(n, "fabric-ports") == "32 EFA devices in fi_info"
    assert reason(n, "nccl-transport").startswith("NCCL used NET/OFI")
    bw = n.verdict.check("allreduce-busbw")
    assert bw is not None and bw.expected == 480.0 and 0.97 < bw.measured / 480.0 < 1.05
    assert [c.name for c in n.verdict.skipped] == ["nvlink-links", "storage-nvme"]
    node = run.host("healthy")
    assert node.channels == 2  # the multi-node run's launcher: its own probes, then the run across nodes
    first, inner = node.commands()[:2]
    assert first[:4] == ["timeout", "-k", "5", "60"] and inner == first[4:]  # each probe under coreutils timeout
    assert not any(c.sudo for c in node.calls)  # probes run as the login user (AcceptanceOptions.sudo)
    probes = {p.name: p for p in n.probes}
    assert probes["nvidia-smi"].kind == "nvidia-smi-q" and probes["nvlink"].kind is None
    assert probes["nvlink"].error == "exited 1: no fixture for nvlink in this host's profile"
    log = parse("nccl-tests", (run.save_dir / "healthy" / "all_reduce_perf.txt").read_text())
    (r,) = log.runs
    assert (r.n_gpus, r.min_bytes, r.max_bytes, log.nranks, len(r.rows)) == (8, 8, 16 << 30, 8, 32)


@pytest.mark.parametrize(("host", "check", "why"), [
    ("seven-gpus", "gpu-count", "expected 8 GPUs, found 7 (nvidia-smi -q)"),
    ("no-nvlink", "gpu-interconnect", "GPU0<->GPU3 link is SYS, expected NV18"),
    ("ib-port-down", "fabric-ports", "mlx5_0 port 1 is Down"),
    ("sockets", "nccl-transport", "NCCL used NET/Socket on an RDMA fabric (efa)"),
])
def test_a_broken_host_is_refused_with_that_reason(run: Run, host: str, check: str, why: str) -> None:
    n = run.node(host)
    assert not n.passed and n.status == "fail"
    assert reason(n, check) == why and n.reason == f"{check}: {why}"


def test_a_slow_host_fails_by_its_fraction_and_a_hung_probe_is_cut_and_named(run: Run) -> None:
    c = run.node("slow").verdict.check("allreduce-busbw")
    healthy = run.node("healthy").verdict.check("allreduce-busbw")
    assert c is not None and healthy is not None and c.status == "fail"
    assert c.measured == pytest.approx(0.59 * healthy.measured, rel=0.02)
    hung = run.node("hung-nccl")
    p = hung.probe("all_reduce_perf")
    assert p is not None and p.rc == 124 and p.error == f"timed out after {NCCL_TIMEOUT:g}s"
    assert p.seconds is not None and NCCL_TIMEOUT - 0.1 < p.seconds < NCCL_TIMEOUT + 2
    assert reason(hung, "allreduce-busbw").endswith(f"(NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 16G -f 2 -g 8: "
                                                    f"timed out after {NCCL_TIMEOUT:g}s)")


def test_an_unreachable_host_fails_while_the_others_are_judged_and_progress_says_so(run: Run) -> None:
    n = run.node("gone")
    assert n.status == "unreachable" and n.reason.startswith("unreachable: gone: cannot connect to 10.1.0.10")
    done = {e.host: e for e in run.events if e.kind == "host-done"}
    assert set(NAMES) <= set(done) and done["gone"].status == "unreachable"
    assert done["healthy"].status == "pass" and done["slow"].detail.startswith("allreduce-busbw: all_reduce busbw")
    probes = [(e.step, e.status) for e in run.events if e.kind == "step-done" and e.host == "healthy"]
    assert probes == [("nvidia-smi", "ok"), ("topo", "ok"), ("nvlink", "exit 1"), ("fi_info", "ok"),
                      ("all_reduce_perf", "ok"), ("all_reduce_perf-multinode", "ok")]  # it launched the 2-node run
    assert ("all_reduce_perf", "timed out") in [(e.step, e.status) for e in run.events
                                                if e.kind == "step-done" and e.host == "hung-nccl"]


def test_the_nodes_that_pass_alone_run_one_all_reduce_together(run: Run) -> None:
    (m,) = run.report.multi_node
    assert m.offering == "p5.48xlarge" and m.hosts == ["healthy", "healthy-2"] and m.launcher == "healthy"
    assert m.passed, m.reason
    assert "baseline for multi-node (2 hosts, 16 ranks)" in m.verdict.check("allreduce-busbw").reason  # type: ignore
    log = parse("nccl-tests", (run.save_dir / "multinode-p5.48xlarge" / "all_reduce_perf-multinode.txt").read_text())
    assert log.nranks == 16 and [x.host for x in log.runs[0].ranks] == ["10.1.0.1"] * 8 + ["10.1.0.9"] * 8
    assert run.host("healthy").text("/root/.metalfleet/acceptance-hostfile") == "10.1.0.1 slots=8\n10.1.0.9 slots=8\n"
    assert run.host("healthy-2").channels == 1  # only its own probes: the launcher ran the job


def test_saved_outputs_rejudge_offline_to_the_same_verdict_and_the_reports_agree(run: Run) -> None:
    for name in ("healthy", "seven-gpus", "no-nvlink", "slow", "sockets", "ib-port-down"):
        live = run.node(name)
        offline = verify_dir(run.save_dir / name, live.offering)
        assert [(c.name, c.status) for c in offline.checks] == [(c.name, c.status) for c in live.verdict.checks]
    meta = json.loads((run.save_dir / "healthy" / ".acceptance.json").read_text())
    assert meta["passed"] and {p["name"]: p["saved_as"] for p in meta["probes"]}["nvlink"] == ".failed/nvlink.txt"
    doc = json.loads(run.report.to_json())
    nodes = {n["node"]: n for n in doc["nodes"]}
    for name, diff in OUTCOMES.items():
        assert {c["name"]: c["status"] for c in nodes[name]["checks"]} == {**HEALTHY, **diff}, name
    root = ET.fromstring(run.report.to_junit())
    assert int(root.get("failures", "0")) == sum(len(n.verdict.failures) for n in run.report.nodes)
    table = format_table(run.report)
    lines = table.splitlines()
    assert lines[0].startswith(f"3 of {len(NAMES)} node(s) passed acceptance")
    row = {ln.split()[0]: ln for ln in lines[3:lines.index("")]}
    assert row["healthy"].split()[2:6] == ["8/8", "NV18", "efa", "32/32"] and row["healthy"].endswith("PASS")
    assert "infiniband 7/8 FAIL" in row["ib-port-down"] and "UNREACHABLE: unreachable" in row["gone"]
