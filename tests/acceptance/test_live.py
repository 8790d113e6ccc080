"""Live acceptance against real sshd hosts (tests/hosts): nvidia-smi/topo/ibstat print real GPU captures,
nccl-tests and fi_info answer from each host's simulated hardware and the probes' actual arguments.

One fleet, one run: each host carries one fault (or none), and each test reads that host's verdict.
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
from metalfleet.bootstrap.acceptance.live import AcceptanceReport, format_table, probe_script, run_acceptance
from metalfleet.bootstrap.acceptance.offline import verify_dir
from metalfleet.bootstrap.acceptance.probes import AcceptanceOptions, plan_probes
from metalfleet.bootstrap.inventory import Host, Inventory, NodeTraits
from metalfleet.bootstrap.parsers import parse
from metalfleet.bootstrap.script import new_token
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.testing.hosts.harness import HostFleet

from ._sim import IB, IB_PORT_DOWN, NET_SOCKET, P5, fleet_starter, topo_link_edits

#: host -> (extra shim config, offering it is judged against)
HOSTS: dict[str, tuple[dict[str, Any], str]] = {
    "healthy": ({}, "p5.48xlarge"),
    "seven-gpus": ({"gpu": {"count": 7}}, "p5.48xlarge"),
    "no-nvlink": ({"edits": {"topo": topo_link_edits(0, 3, "SYS")}}, "p5.48xlarge"),
    "slow": ({"nccl": {"busbw_scale": 0.59}}, "p5.48xlarge"),
    "sockets": (NET_SOCKET, "p5.48xlarge"),
    "ib-healthy": (IB, "fake.8xh100"),
    "ib-port-down": ({**IB, **IB_PORT_DOWN}, "fake.8xh100"),
    "hung-nccl": ({"delays": {"all_reduce_perf": 60}}, "p5.48xlarge"),
    "healthy-2": ({}, "p5.48xlarge"),
    "gone": ({}, "p5.48xlarge"),
}
NAMES = list(HOSTS)
NCCL_TIMEOUT = 2.0

#: Every check of a healthy p5 node and its outcome. No nvlink -s capture exists for H100 SXM and no
#: storage probe runs live: those two are skipped (reported so, never counted as passed).
HEALTHY = {"gpu-count": "pass", "gpu-model": "pass", "gpu-memory": "pass", "gpu-ecc": "pass",
           "gpu-memory-health": "pass", "gpu-persistence": "pass", "gpu-fabric-state": "pass",
           "gpu-interconnect": "pass", "nvlink-links": "skip", "fabric-ports": "pass", "nccl-correctness": "pass",
           "nccl-launch": "pass", "nccl-transport": "pass", "allreduce-busbw": "pass", "storage-nvme": "skip"}
#: Each host's outcome per check: what differs from HEALTHY.
OUTCOMES: dict[str, dict[str, str]] = {
    "healthy": {}, "healthy-2": {}, "ib-healthy": {},
    "seven-gpus": {"gpu-count": "fail", "nccl-correctness": "fail", "nccl-transport": "skip",
                   "allreduce-busbw": "fail"},
    "no-nvlink": {"gpu-interconnect": "fail"},
    "slow": {"allreduce-busbw": "fail"},
    "sockets": {"nccl-transport": "fail"},
    "ib-port-down": {"fabric-ports": "fail"},
    "hung-nccl": {"nccl-correctness": "skip", "nccl-launch": "skip", "nccl-transport": "skip",
                  "allreduce-busbw": "fail"},
}


@dataclass
class Run:
    fleet: HostFleet
    report: AcceptanceReport
    save_dir: Path
    events: list[Any]

    def node(self, name: str) -> Any:
        return self.report.node(name)

    def sim(self, name: str) -> Any:
        return self.fleet.hosts[NAMES.index(name)]


def _config(i: int) -> dict[str, Any]:
    extra, _ = HOSTS[NAMES[i]]
    cfg = {**P5, **extra}
    if "fixtures" in extra:
        cfg["fixtures"] = {**P5["fixtures"], **extra["fixtures"]}
    return cfg


def _inventory(fleet: HostFleet) -> Inventory:
    hosts = []
    for sim, name in zip(fleet.hosts, NAMES, strict=True):
        offering = HOSTS[name][1]
        hosts.append(sim.host(name=name, offering=offering, provider=offering.split(".")[0] if offering.startswith(
            "fake") else "aws"))
    ssh = fleet.ssh_options(pinned_keys={h.address: [h.host_key] for h in fleet.hosts}, connect_attempts=1,
                            connect_deadline=5)
    return Inventory(tuple(hosts), ssh)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    starter = fleet_starter()
    start = next(starter)
    try:
        fleet = start(len(NAMES), _config)
        fleet.hosts[NAMES.index("gone")].stop()
        save = tmp_path_factory.mktemp("accept")
        events: list[Any] = []
        report = run_acceptance(_inventory(fleet), save_dir=save, progress=events.append,
                                options=AcceptanceOptions(nccl_timeout=NCCL_TIMEOUT), max_workers=len(NAMES))
        yield Run(fleet, report, save, events)
    finally:
        starter.close()


def failing(node: Any) -> list[str]:
    return [c.name for c in node.verdict.failures]


def reason(node: Any, check: str) -> str:
    c = node.verdict.check(check)
    assert c is not None, f"{node.host}: no {check} check in {[x.name for x in node.verdict.checks]}"
    return str(c.reason)


# -------------------------------------------------------------------------------------- healthy


def statuses(verdict: Any) -> dict[str, str]:
    return {c.name: c.status for c in verdict.checks}


def test_every_check_of_every_host_has_its_outcome(run: Run) -> None:
    for name, diff in OUTCOMES.items():
        assert statuses(run.node(name).verdict) == {**HEALTHY, **diff}, name
        assert run.node(name).passed is (not any(s == "fail" for s in diff.values())), name
    assert statuses(run.node("gone").verdict) == {"reachable": "fail"}


def test_a_healthy_host_passes_in_one_round_trip(run: Run) -> None:
    n = run.node("healthy")
    assert n.passed and n.status == "pass", n.reason
    assert n.round_trips == 1 and n.error is None
    assert reason(n, "gpu-count") == "found 8 GPUs (nvidia-smi -q)"
    assert reason(n, "gpu-interconnect") == "all 28 GPU pairs linked by NV18"
    assert reason(n, "fabric-ports") == "32 EFA devices in fi_info"
    assert reason(n, "nccl-transport").startswith("NCCL used NET/OFI")
    bw = n.verdict.check("allreduce-busbw")
    assert bw is not None and bw.expected == 480.0 and 0.97 < bw.measured / 480.0 < 1.05
    assert "baseline for intra-node nvls" in bw.reason
    assert [c.name for c in n.verdict.skipped] == ["nvlink-links", "storage-nvme"]
    assert reason(n, "nvlink-links").startswith("no evidence for nvlink-links: supply nvidia-smi nvlink -s (")
    # Every probe ran exactly once, in the one exec channel.
    calls = run.sim("healthy").invocations()
    assert calls.count(["nvidia-smi", "topo", "-m"]) == 1
    assert ["all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "8"] in calls
    assert ["nvidia-smi", "-q", "-x"] in calls and ["nvidia-smi", "-q"] in calls  # no XML capture: -q fallback
    assert ["fi_info", "-p", "efa"] in calls
    probes = {p.name: p for p in n.probes}
    assert probes["nvidia-smi"].kind == "nvidia-smi-q" and probes["all_reduce_perf"].kind == "nccl-tests"
    assert probes["fi_info"].kind == "fi-info"
    assert probes["nvlink"].kind is None and probes["nvlink"].error is not None
    # The host answered the run that was asked for: one node, 8 GPUs in one process, 8 B..16 GiB by 2x.
    log = parse("nccl-tests", (run.save_dir / "healthy" / "all_reduce_perf.txt").read_text())
    (r,) = log.runs
    assert (r.n_gpus, r.min_bytes, r.max_bytes, log.nranks, len(r.rows)) == (8, 8, 16 << 30, 8, 32)
    assert len({x.host for x in r.ranks}) == 1 and [x.device for x in r.ranks] == list(range(8))


def test_a_healthy_infiniband_host_passes(run: Run) -> None:
    n = run.node("ib-healthy")
    assert n.passed, n.reason
    assert reason(n, "fabric-ports") == "8 InfiniBand ports Active at 400 Gb/s (ibstat)"
    assert ["ibstat"] in run.sim("ib-healthy").invocations()


# --------------------------------------------------------------------------------------- faults


def test_a_host_missing_a_gpu_fails_the_count_and_the_run_that_needs_it(run: Run) -> None:
    n = run.node("seven-gpus")
    assert failing(n) == ["gpu-count", "nccl-correctness", "allreduce-busbw"]
    assert n.reason == "gpu-count: expected 8 GPUs, found 7 (nvidia-smi -q)"
    # all_reduce_perf -g 8 on 7 GPUs fails as CUDA does, and prints no result to judge
    assert "'invalid device ordinal'" in reason(n, "nccl-correctness")
    assert reason(n, "allreduce-busbw").startswith("mandatory check skipped: no all_reduce results")
    assert n.probe("all_reduce_perf").rc == 2  # type: ignore[union-attr]


@pytest.mark.parametrize(("host", "check", "why"), [
    ("no-nvlink", "gpu-interconnect", "GPU0<->GPU3 link is SYS, expected NV18"),
    ("ib-port-down", "fabric-ports", "mlx5_0 port 1 is Down"),
    ("sockets", "nccl-transport", "NCCL used NET/Socket on an RDMA fabric (efa)"),
])
def test_a_broken_host_is_refused_with_that_reason(run: Run, host: str, check: str, why: str) -> None:
    n = run.node(host)
    assert not n.passed and n.status == "fail"
    assert failing(n) == [check]
    assert reason(n, check) == why
    assert n.reason == f"{check}: {why}"


def test_a_slow_host_is_refused_with_its_fraction_of_the_baseline(run: Run) -> None:
    n = run.node("slow")
    assert failing(n) == ["allreduce-busbw"]
    c = n.verdict.check("allreduce-busbw")
    healthy = run.node("healthy").verdict.check("allreduce-busbw")
    assert c is not None and healthy is not None and c.expected == 480.0
    assert c.measured == pytest.approx(0.59 * healthy.measured, rel=0.02)  # the node's bus runs at 59%
    assert c.reason.startswith(f"all_reduce busbw {c.measured:.1f} GB/s is {c.measured / 480:.0%} of baseline 480.0 "
                               "(threshold 90%)")


def test_a_probe_past_its_timeout_is_cut_and_named(run: Run) -> None:
    n = run.node("hung-nccl")
    p = n.probe("all_reduce_perf")
    assert p is not None and p.rc == 124 and p.error == f"timed out after {NCCL_TIMEOUT:g}s"
    assert p.seconds is not None and NCCL_TIMEOUT - 0.5 < p.seconds < NCCL_TIMEOUT + 5
    assert failing(n) == ["allreduce-busbw"]
    assert reason(n, "allreduce-busbw").startswith("mandatory check skipped: no evidence for allreduce-busbw")
    assert reason(n, "allreduce-busbw").endswith(f"(NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 16G -f 2 -g 8: "
                                                 f"timed out after {NCCL_TIMEOUT:g}s)")
    assert reason(n, "nccl-correctness").endswith(f"timed out after {NCCL_TIMEOUT:g}s)")  # skipped, and why
    assert n.probe("topo") is not None and n.verdict.check("gpu-count") is not None  # the cheap reads still count


def test_an_unreachable_host_fails_while_the_others_are_judged(run: Run) -> None:
    n = run.node("gone")
    assert n.status == "unreachable" and not n.passed
    assert n.reason.startswith("unreachable: gone: cannot connect to")
    assert [c.name for c in n.verdict.checks] == ["reachable"]
    judged = [x.host for x in run.report.nodes if x.status in ("pass", "fail")]
    assert len(judged) == len(NAMES) - 1
    assert not run.report.passed
    done = [e for e in run.events if e.kind == "host-done"]
    assert {e.host for e in done} >= set(NAMES) and any(e.host == "gone" and e.status == "unreachable" for e in done)


def test_the_nodes_that_pass_alone_run_one_all_reduce_together(run: Run) -> None:
    (m,) = run.report.multi_node
    assert m.offering == "p5.48xlarge" and m.hosts == ["healthy", "healthy-2"] and m.launcher == "healthy"
    assert m.passed, m.reason
    assert statuses(m.verdict) == {"nccl-correctness": "pass", "nccl-launch": "pass", "nccl-transport": "pass",
                                   "allreduce-busbw": "pass"}
    assert "baseline for multi-node (2 hosts, 16 ranks)" in m.verdict.check("allreduce-busbw").reason  # type: ignore
    # The launcher's mpirun ran the job the hostfile describes: 16 ranks, 8 on each of the two hosts.
    log = parse("nccl-tests", (run.save_dir / "multinode-p5.48xlarge" / "all_reduce_perf-multinode.txt").read_text())
    ranks = log.runs[0].ranks
    assert log.nranks == 16 and [x.rank for x in ranks] == list(range(16))
    assert [x.host for x in ranks] == [run.sim(h).address for h in ("healthy", "healthy-2") for _ in range(8)]
    assert log.net_transport == "NET/OFI" and "NET/OFI/GDRDMA" in log.transports
    sim = run.sim("healthy")
    mpirun = [c for c in sim.invocations() if c[0] == "mpirun"]
    assert len(mpirun) == 1
    argv = mpirun[0]
    assert argv[argv.index("-np") + 1] == "16" and argv[argv.index("-N") + 1] == "8"
    assert argv[argv.index("-x") + 1] == "NCCL_DEBUG=INFO" and argv[-2:] == ["-g", "1"]
    hostfile = (sim.root / ".metalfleet" / "acceptance-hostfile").read_text()
    assert hostfile == "".join(f"{run.sim(h).address} slots=8\n" for h in ("healthy", "healthy-2"))
    assert not any(c[0] == "mpirun" for c in run.sim("healthy-2").invocations())


# -------------------------------------------------------------------------------------- reports


def test_saved_outputs_rejudge_offline_to_the_same_verdict(run: Run) -> None:
    for name in ("healthy", "seven-gpus", "no-nvlink", "slow", "sockets", "ib-port-down"):
        live = run.node(name)
        folder = run.save_dir / name
        assert (folder / ".acceptance.json").is_file()
        offline = verify_dir(folder, live.offering)
        assert offline.node == name
        assert [(c.name, c.status) for c in offline.checks] == [(c.name, c.status) for c in live.verdict.checks]
        # Reasons match too, except that live ones say which probe gave no evidence and why.
        assert [c.reason for c in offline.checks if "no evidence" not in c.reason] == \
               [c.reason for c in live.verdict.checks if "no evidence" not in c.reason]
    healthy = run.save_dir / "healthy"
    assert sorted(p.name for p in healthy.iterdir() if not p.name.startswith(".")) == [
        "all_reduce_perf.txt", "fi_info-p-efa.txt", "nvidia-smi-q.txt", "nvidia-smi-topo-m.txt"]
    assert (healthy / ".failed" / "nvlink.txt").read_text().startswith("\n--- stderr ---\nnvidia-smi nvlink -s")
    meta = json.loads((healthy / ".acceptance.json").read_text())
    assert meta["passed"] and meta["round_trips"] == 1
    assert {p["name"]: p["saved_as"] for p in meta["probes"]}["all_reduce_perf"] == "all_reduce_perf.txt"
    assert (run.save_dir / "multinode-p5.48xlarge" / "all_reduce_perf-multinode.txt").is_file()


def test_json_junit_and_markdown_of_a_live_run(run: Run, tmp_path: Path) -> None:
    doc = json.loads(run.report.to_json())
    assert doc["passed"] is False
    nodes = {n["node"]: n for n in doc["nodes"]}
    for name, diff in OUTCOMES.items():  # each check's outcome, per node, from the JSON report
        assert {c["name"]: c["status"] for c in nodes[name]["checks"]} == {**HEALTHY, **diff}, name
        assert nodes[name]["skipped"] == [c for c, s in {**HEALTHY, **diff}.items() if s == "skip"], name
    assert nodes["seven-gpus"]["failures"] == ["gpu-count", "nccl-correctness", "allreduce-busbw"]
    assert nodes["healthy"]["passed"] is True and nodes["gone"]["failures"] == ["reachable"]
    multi = next(n for k, n in nodes.items() if k.startswith("all_reduce across 2 nodes"))
    assert {c["name"]: c["status"] for c in multi["checks"]} == dict.fromkeys(
        ("nccl-correctness", "nccl-launch", "nccl-transport", "allreduce-busbw"), "pass")

    root = ET.fromstring(run.report.to_junit())
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert "slow (p5.48xlarge)" in suites
    slow = suites["slow (p5.48xlarge)"]
    failures = [(c.get("name"), c.find("failure")) for c in slow.iter("testcase") if c.find("failure") is not None]
    assert [n for n, _ in failures] == ["allreduce-busbw"]
    assert failures[0][1] is not None and failures[0][1].get("message", "").startswith("all_reduce busbw 2")
    assert int(root.get("failures", "0")) == sum(len(n.verdict.failures) for n in run.report.nodes)
    skipped = [c.get("name") for c in slow.iter("testcase") if c.find("skipped") is not None]
    assert skipped == ["nvlink-links", "storage-nvme"]
    assert int(root.get("skipped", "0")) == sum(len(v.skipped) for v in run.report.verdicts)

    md = run.report.to_markdown()
    passed = sum(1 for v in run.report.verdicts if v.passed)
    assert f"{passed} of {len(run.report.verdicts)} nodes passed." in md
    assert "## sockets (p5.48xlarge): FAIL" in md and "NCCL used NET/Socket on an RDMA fabric (efa)" in md


def test_the_acceptance_table(run: Run) -> None:
    table = format_table(run.report)
    lines = table.splitlines()
    skipped = sum(len(n.verdict.skipped) for n in run.report.nodes)
    assert lines[0].startswith(f"3 of {len(NAMES)} node(s) passed acceptance")
    assert f"({skipped} check(s) skipped, not counted as passed)" in lines[0]
    assert lines[1].split() == ["node", "offering", "GPUs", "NVLink", "fabric", "busbw", "vs", "baseline", "skipped",
                                "verdict"]
    rows = lines[3:lines.index("")]
    row = {ln.split()[0]: ln for ln in rows}
    assert row["healthy"].split()[2:6] == ["8/8", "NV18", "efa", "32/32"]
    assert row["healthy"].rstrip().endswith("PASS") and " nvlink-links,storage-nvme " in row["healthy"]
    assert "7/8" in row["seven-gpus"] and "FAIL: gpu-count: expected 8 GPUs, found 7 (nvidia-smi -q)" in row[
        "seven-gpus"]
    slow = run.node("slow").verdict.check("allreduce-busbw")
    assert slow is not None and f"{slow.measured:.1f}/480.0 GB/s (60%)" in row["slow"]
    assert "infiniband 7/8 FAIL" in row["ib-port-down"]
    assert "SYS/NV18 FAIL" in row["no-nvlink"] or "NV18/SYS FAIL" in row["no-nvlink"]
    assert "UNREACHABLE: unreachable" in row["gone"]
    # below the table: every check's status, per node
    checks = dict(ln.split(": ", 1) for ln in lines[lines.index("checks:") + 1:])
    for name, diff in OUTCOMES.items():
        assert dict(kv.split("=") for kv in checks[name].split()) == {**HEALTHY, **diff}, name


# --------------------------------------------------------------------------- plans (no SSH needed)


def _host(offering: str) -> Host:
    return Host(name="n", address="10.0.0.1", offering=offering, traits=NodeTraits())


def test_probes_follow_the_offerings_fabric() -> None:
    def names(offering: str, **kw: Any) -> list[str]:
        return [p.name for p in plan_probes(_host(offering), resolve_baseline(offering), AcceptanceOptions(**kw))]

    assert names("p5.48xlarge") == ["nvidia-smi", "topo", "nvlink", "fi_info", "all_reduce_perf"]
    assert names("fake.8xh100", dcgm_level=2) == ["nvidia-smi", "topo", "nvlink", "ibstat", "all_reduce_perf",
                                                  "dcgmi-diag"]
    assert names("ecs.ebmgn8v.48xlarge", nccl=False) == ["nvidia-smi", "topo", "nvlink", "erdma"]
    ascend = names("huawei.8x910b")
    assert ascend[:2] == ["npu-smi", "npu-smi-topo"] and ascend[-1] == "hccl-all-reduce"
    assert len([n for n in ascend if n.startswith("hccn-")]) == 8 * 3
    dcgm = plan_probes(_host("fake.8xh100"), resolve_baseline("fake.8xh100"), AcceptanceOptions(dcgm_level=1))[-1]
    assert dcgm.command() == ["timeout", "-k", "5", "1800", "dcgmi", "diag", "-r", "1"]


def test_the_probe_script_frames_every_probe_and_quotes_values() -> None:
    probes = plan_probes(_host("p5.48xlarge"), resolve_baseline("p5.48xlarge"),
                         AcceptanceOptions(nccl_binary="/opt/x y/all_reduce_perf; rm -rf /"))
    token = new_token()
    script = probe_script(probes, token)
    for i in range(len(probes)):
        assert script.count(f'printf "%s %s\\n" "$T" {i}; timeout -k 5 ') == 1
        assert script.count(f'printf "\\n%s-end %s\\n" "$T" {i}') == 1
    assert "'/opt/x y/all_reduce_perf; rm -rf /'" in script
    assert script.rstrip().endswith("exit 0")


def test_an_unknown_or_missing_offering_is_refused_before_connecting() -> None:
    with pytest.raises(InvalidSpecError, match=r"no acceptance baseline for offering 'p99\.nope'"):
        run_acceptance([_host("p99.nope")])
    with pytest.raises(InvalidSpecError, match="has no offering"):
        run_acceptance([Host(name="n", address="10.0.0.1")])
    with pytest.raises(InvalidSpecError, match="unknown baseline field"):
        run_acceptance([_host("p5.48xlarge")], overrides={"nope": 1})


def test_results_from_a_tool_that_exited_non_zero_are_not_trusted_unless_a_check_explains_it() -> None:
    from metalfleet.bootstrap.acceptance.live import ProbeResult, _judge_host

    from ._fixtures import read_fixture
    from ._sim import H100_Q, H100_TOPO
    from .test_gate import P5_NCCL

    probes = [p for p in plan_probes(_host("p5.48xlarge"), resolve_baseline("p5.48xlarge"))
              if p.name in ("nvidia-smi", "topo", "all_reduce_perf")]

    def judged(nccl_text: str, rc: int) -> Any:
        outs = [(0, read_fixture(H100_Q), ""), (0, read_fixture(H100_TOPO), ""), (rc, nccl_text, "Segmentation fault")]
        results = [ProbeResult(p.name, p.label, r, stdout=o, stderr=e)
                   for p, (r, o, e) in zip(probes, outs, strict=True)]
        return _judge_host("n", "p5.48xlarge", None, probes, results)

    nccl = read_fixture(P5_NCCL)
    assert judged(nccl, 0).passed
    v = judged(nccl, 139)
    assert [c.name for c in v.failures] == ["nccl-correctness"]
    assert v.check("nccl-correctness").reason == (  # type: ignore[union-attr]
        "NCCL_DEBUG=INFO all_reduce_perf -b 8 -e 16G -f 2 -g 8 exited 139 after printing its results "
        "(Segmentation fault); its output is not trusted")
    assert v.check("allreduce-busbw").passed  # type: ignore[union-attr]
    # A failure the gate names explains the status: no second verdict on top of it.
    wrong = judged(nccl.replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED"), 1)
    assert [c.reason for c in wrong.failures] == ["nccl-tests: out of bounds values 3 FAILED"]
