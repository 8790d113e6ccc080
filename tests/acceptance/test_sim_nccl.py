"""The simulated hosts' nccl-tests, mpirun and fi_info answer from the simulated hardware and the arguments.

Each test runs the real shim (tests/support/hosts/shims/mfshim.py, under /usr/bin/python3 as on a host) in a
sandbox of its own: config.json (the host's hardware), state.json (what is installed), nothing replayed.
The outputs go through the product's parser and gate, as the live acceptance run's would.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap.acceptance import judge
from metalfleet.bootstrap.parsers import parse
from metalfleet.bootstrap.parsers.efa import parse_fi_info
from metalfleet.testing.hosts.harness import FIXTURES, SHIM, SYSTEM_PYTHON, _initial_state, host_config

from ._fixtures import read_fixture

GIB = 1 << 30
FULL = ["-b", "8", "-e", "16G", "-f", "2"]


class Sandbox:
    """One simulated host's sandbox, and the shim run in it."""

    def __init__(self, root: Path, profile: str, extra: dict[str, Any] | None = None, *, efa: bool = True,
                 driver: bool = True) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        cfg = host_config(profile, extra, fixtures_dir=FIXTURES)
        st = _initial_state(cfg)
        if driver:
            st["packages"]["nvidia-driver-550"] = "550.90.07-0ubuntu1"
            st["modules"].append("nvidia")
        if efa:
            st["installed"]["efa"] = "1.33.0"
            plugin = root / "opt" / "amazon" / "ofi-nccl" / "lib" / "libnccl-net.so"
            plugin.parent.mkdir(parents=True)
            plugin.write_bytes(b"")
        (root / "log").mkdir(exist_ok=True)
        (root / "config.json").write_text(json.dumps(cfg))
        (root / "state.json").write_text(json.dumps(st))
        self.program = root / "all_reduce_perf"  # what the make shim builds: an MPI build of nccl-tests
        self.program.write_text(f'#!/bin/sh\nexport MF_NCCL_MPI=1\nexec {SYSTEM_PYTHON} -IS {SHIM} mf-nccl-test '
                                'all_reduce_perf "$@"\n')
        self.program.chmod(0o755)

    def run(self, tool: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        full = {"PATH": "/usr/bin:/bin", "MF_ROOT": str(self.root), "MF_FIXTURES": str(FIXTURES), **env}
        return subprocess.run([SYSTEM_PYTHON, "-IS", str(SHIM), tool, *args], capture_output=True, text=True,
                              env=full, timeout=60, check=False)

    def mpirun(self, *args: str) -> subprocess.CompletedProcess[str]:
        """mpirun as the acceptance probe starts it (``--allow-run-as-root`` when root, as Open MPI wants)."""
        return self.run("mpirun", *(["--allow-run-as-root"] if os.geteuid() == 0 else []), *args)

    def nccl(self, *args: str, **env: str) -> Any:
        res = self.run("all_reduce_perf", *args, NCCL_DEBUG="INFO", **env)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr
        return parse("nccl-tests", res.stdout)

    def hostfile(self, *hosts: str, slots: int = 8) -> str:
        path = self.root / "hostfile"
        path.write_text("".join(f"{h} slots={slots}\n" for h in hosts))
        return str(path)


@pytest.fixture
def p5(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path, "p5")


def sizes(run: Any) -> list[int]:
    return [r.size_bytes for r in run.rows]


def test_one_p5_node_runs_eight_ranks_over_nvlink_and_passes_its_baseline(p5: Sandbox) -> None:
    rep = p5.nccl(*FULL, "-g", "8")
    (run,) = rep.runs
    assert (run.collective, run.n_threads, run.n_gpus, run.min_bytes, run.max_bytes) == (
        "all_reduce_perf", 1, 8, 8, 16 * GIB)
    assert [r.rank for r in run.ranks] == list(range(8)) and len({r.host for r in run.ranks}) == 1
    assert {r.gpu_name for r in run.ranks} == {"NVIDIA H100 80GB HBM3"} and [r.device for r in run.ranks] == \
        list(range(8))
    assert sizes(run) == [8 << i for i in range(32)]
    assert run.oob_ok and run.wrong_total == 0 and run.avg_busbw_gbs is not None
    assert (rep.net_transport, rep.ofi_provider, rep.ofi_nics, rep.nvls_connected, rep.nranks) == (
        "NET/OFI", "efa", 32, True, 8)
    v = judge("p5.48xlarge", {"nccl-tests": rep}, {"required": []})
    bw = v.check("allreduce-busbw")
    assert bw is not None and bw.status == "pass" and "baseline for intra-node nvls" in bw.reason
    assert 0.97 < bw.measured / 480.0 < 1.05  # the calibrated H100 NVLS figure (~483 GB/s)
    # the ramp: small sizes are latency-bound, bandwidth grows with the size
    bus = [r.busbw_gbs for r in run.rows]
    assert bus[0] < 0.01 and all(a <= b * 1.02 for a, b in itertools.pairwise(bus))


def test_one_gpu_is_one_device_line_and_a_device_copy(p5: Sandbox) -> None:
    rep = p5.nccl("-b", "1M", "-e", "64M", "-f", "4", "-g", "1")
    (run,) = rep.runs
    assert len(run.ranks) == 1 and run.ranks[0].device == 0 and rep.nranks == 1
    assert sizes(run) == [1 << 20, 4 << 20, 16 << 20, 64 << 20]
    assert all(r.oop_busbw_gbs == 0 and r.ip_busbw_gbs == 0 for r in run.rows)
    # out-of-place is a copy at HBM speed (tens of TB/s in-place: nothing moves)
    assert 2000 < run.rows[-1].oop_algbw_gbs < 3400 and run.rows[-1].ip_algbw_gbs > 10000
    v = judge("p5.48xlarge", {"nccl-tests": rep}, {"required": []})
    assert v.check("allreduce-busbw").reason.startswith(  # type: ignore[union-attr]
        "all_reduce busbw 0.0 GB/s: the run had a single rank")


def test_two_p5_nodes_under_mpirun_are_sixteen_ranks_over_efa(p5: Sandbox) -> None:
    hf = p5.hostfile("10.0.0.1", "10.0.0.2")
    res = p5.mpirun("-np", "16", "-N", "8", "--hostfile", hf, "-x", "NCCL_DEBUG=INFO", "--bind-to", "none",
                    str(p5.program), *FULL, "-g", "1")
    assert res.returncode == 0, res.stderr
    rep = parse("nccl-tests", res.stdout)
    (run,) = rep.runs
    assert [r.rank for r in run.ranks] == list(range(16)) and run.n_gpus == 1
    assert [(r.host, r.device) for r in run.ranks] == [(h, d) for h in ("10.0.0.1", "10.0.0.2") for d in range(8)]
    assert rep.nranks == 16 and "NET/OFI/GDRDMA" in rep.transports and rep.ofi_nics == 32
    v = judge("p5.48xlarge", {"nccl-tests": rep}, {"required": []})
    bw = v.check("allreduce-busbw")
    assert bw is not None and bw.status == "pass" and "multi-node (2 hosts, 16 ranks)" in bw.reason
    one = p5.nccl(*FULL, "-g", "8")
    # the same GPUs across two nodes: latency of the network, and a different (bus) bandwidth
    assert run.rows[0].oop_time_us > 3 * one.runs[0].rows[0].oop_time_us
    assert run.peak_busbw_gbs != one.runs[0].peak_busbw_gbs


def test_sizes_types_ops_and_options_follow_the_arguments(p5: Sandbox) -> None:
    res = p5.run("all_reduce_perf", "-b", "1K", "-e", "4K", "-i", "1024", "-d", "double", "-o", "max", "-c", "0",
                 "-n", "50", "-w", "3", "-g", "2")
    assert res.returncode == 0, res.stderr
    head = next(ln for ln in res.stdout.splitlines() if ln.startswith("# nThread"))
    assert head == ("# nThread 1 nGpus 2 minBytes 1024 maxBytes 4096 step: 1024(bytes) warmup iters: 3 iters: 50 "
                    "agg iters: 1 validation: 0 graph: 0")
    (run,) = parse("nccl-tests", res.stdout).runs
    assert sizes(run) == [1024, 2048, 3072, 4096]
    assert {(r.dtype, r.redop, r.oop_wrong) for r in run.rows} == {("double", "max", None)}
    assert [r.count for r in run.rows] == [128, 256, 384, 512]
    every = parse("nccl-tests", p5.run("all_reduce_perf", "-d", "all", "-o", "all", "-g", "2").stdout).runs[0]
    assert len(every.rows) == 10 * 6 and len({(r.dtype, r.redop) for r in every.rows}) == 60
    floor = p5.run("all_reduce_perf", "-g", "8", NCCL_TESTS_MIN_BW="100000")
    assert floor.returncode == 1 and "# Avg bus bandwidth" in floor.stdout and "FAILED" in floor.stdout
    bad = p5.run("all_reduce_perf", "-b", "8X")
    assert bad.returncode == 255 and bad.stderr.strip() == "invalid size specified for 'minbytes'"


def test_more_gpus_than_the_host_has_and_no_driver_fail_as_cuda_does(tmp_path: Path, p5: Sandbox) -> None:
    nine = p5.run("all_reduce_perf", "-g", "9")
    assert nine.returncode == 2 and "Test CUDA failure common.cu:892 'invalid device ordinal'" in nine.stdout
    assert "#  Rank" not in nine.stdout
    seven = Sandbox(tmp_path / "seven", "p5", {"gpu": {"count": 7}})
    res = seven.run("all_reduce_perf", *FULL, "-g", "8")
    assert res.returncode == 2 and parse("nccl-tests", res.stdout).failures
    assert seven.run("all_reduce_perf", *FULL, "-g", "7").returncode == 0
    bare = Sandbox(tmp_path / "bare", "p5", driver=False)
    res = bare.run("all_reduce_perf", "-g", "8")
    assert res.returncode == 2 and "CUDA driver version is insufficient" in res.stdout


def test_the_transport_is_the_one_the_hardware_and_software_give(tmp_path: Path) -> None:
    no_plugin = Sandbox(tmp_path / "a", "p5", efa=False).nccl("-g", "8")
    assert no_plugin.net_transport == "NET/Socket" and no_plugin.ofi_nics is None
    forced = Sandbox(tmp_path / "b", "p5", {"nccl": {"net": "socket"}}).nccl("-g", "8")
    assert forced.net_transport == "NET/Socket"
    tcp = Sandbox(tmp_path / "c", "p5").nccl("-g", "8", FI_PROVIDER="tcp")
    assert (tcp.net_transport, tcp.ofi_provider) == ("NET/OFI", "tcp")
    ib = Sandbox(tmp_path / "d", "h100-ib", efa=False)
    rep = ib.nccl("-g", "8")
    # the devices are the host's: the Active 400G InfiniBand ports its ibstat shows (not the BF3 Ethernet one)
    assert rep.net_transport == "NET/IB" and rep.ib_devices == tuple(f"mlx5_{i}:1/IB" for i in (0, 1, 4, 5, 6, 7, 8, 9))
    down = Sandbox(tmp_path / "g", "h100-ib", {"edits": {"ibstat": [["State: Active", "State: Down", 1]]}}, efa=False)
    assert "mlx5_0:1/IB" not in down.nccl("-g", "8").ib_devices and len(down.nccl("-g", "8").ib_devices) == 7
    assert ib.nccl("-g", "8", NCCL_IB_HCA="=mlx5_0,mlx5_1").ib_devices == ("mlx5_0:1/IB", "mlx5_1:1/IB")
    assert ib.nccl("-g", "8", NCCL_IB_DISABLE="1").net_transport == "NET/Socket"
    roce = Sandbox(tmp_path / "e", "h100-roce", efa=False).nccl("-g", "8")
    assert roce.ib_devices[0] == "mlx5_0:1/RoCE"
    h20 = Sandbox(tmp_path / "h", "alibaba-h20", efa=False)
    assert h20.nccl("-g", "8").net_transport == "NET/Socket"  # no erdma driver loaded: no device
    state = json.loads((h20.root / "state.json").read_text())
    (h20.root / "state.json").write_text(json.dumps({**state, "modules": [*state["modules"], "erdma"]}))
    erdma = h20.nccl("-g", "8")
    assert erdma.net_transport == "NET/IB" and erdma.ib_devices == ("erdma_0:1/RoCE", "erdma_1:1/RoCE")
    assert {r.gpu_name for r in erdma.runs[0].ranks} == {"NVIDIA H20"}
    nothing = Sandbox(tmp_path / "i", "p5", {"fabric": {"kind": "none"}}, efa=False).nccl("-g", "8")
    assert nothing.net_transport == "NET/Socket"
    quiet = Sandbox(tmp_path / "f", "p5").run("all_reduce_perf", "-g", "8")
    assert "NCCL INFO" not in quiet.stdout and parse("nccl-tests", quiet.stdout).net_transport is None


def test_an_a100_node_runs_ring_without_nvls_and_a_slow_node_is_slower(tmp_path: Path) -> None:
    a100 = Sandbox(tmp_path / "a", "p4d").nccl(*FULL, "-g", "8")
    assert not a100.nvls_connected and a100.ofi_nics == 4
    assert {r.gpu_name for r in a100.runs[0].ranks} == {"NVIDIA A100-SXM4-80GB"}
    v = judge("p4de.24xlarge", {"nccl-tests": a100}, {"required": []})
    assert v.check("allreduce-busbw").status == "pass"  # type: ignore[union-attr]
    assert "intra-node ring" in v.check("allreduce-busbw").reason  # type: ignore[union-attr]
    healthy = Sandbox(tmp_path / "b", "p5").nccl(*FULL, "-g", "8").runs[0].peak_busbw_gbs
    slow = Sandbox(tmp_path / "c", "p5", {"nccl": {"busbw_scale": 0.5}}).nccl(*FULL, "-g", "8").runs[0].peak_busbw_gbs
    assert slow == pytest.approx(healthy * 0.5, rel=0.02)


def test_mpirun_reads_its_command_line_as_open_mpi_does(p5: Sandbox) -> None:
    hf = p5.hostfile("a", "b")
    over = p5.mpirun("-np", "24", "--hostfile", hf, str(p5.program))
    assert over.returncode == 1 and "There are not enough slots available in the system to satisfy the 24" in \
        over.stderr
    missing = p5.mpirun("-np", "2", "--hostfile", hf, "/nowhere/all_reduce_perf")
    assert missing.returncode == 1 and "was unable to find the specified executable" in missing.stderr
    hosts = p5.mpirun("-H", "x:2,y:2", "-x", "NCCL_DEBUG=INFO", str(p5.program), "-g", "1")
    run = parse("nccl-tests", hosts.stdout).runs[0]
    assert [r.host for r in run.ranks] == ["x", "x", "y", "y"]
    # nccl-tests built without MPI but started under mpirun: four 1-rank jobs in one log
    plain = p5.root / "plain_perf"
    plain.write_text(f'#!/bin/sh\nexport MF_NCCL_MPI=0\nexec {SYSTEM_PYTHON} -IS {SHIM} mf-nccl-test '
                     'all_reduce_perf "$@"\n')
    plain.chmod(0o755)
    res = p5.mpirun("-np", "4", "-N", "2", "--hostfile", hf, str(plain), "-g", "1")
    rep = parse("nccl-tests", res.stdout)
    assert rep.runs[0].concurrent_runs == 4
    v = judge("p5.48xlarge", {"nccl-tests": rep}, {"required": []})
    assert v.check("nccl-launch").status == "fail"  # type: ignore[union-attr]
    broken = Sandbox(p5.root / "broken", "p5", {"fail": {"mpirun": "ORTE daemon died", "all_reduce_perf": "boom"}})
    assert (broken.mpirun("-np", "2", str(broken.program)).stderr, broken.run("all_reduce_perf").stderr) == (
        "ORTE daemon died\n", "boom\n")
    if os.geteuid() == 0:
        root = p5.run("mpirun", "-np", "2", "--hostfile", hf, str(p5.program))
        assert root.returncode == 1 and "attempt to run as root" in root.stderr


def test_fi_info_lists_the_hosts_efa_devices(tmp_path: Path) -> None:
    p5 = Sandbox(tmp_path / "a", "p5")
    res = p5.run("fi_info", "-p", "efa")
    assert res.returncode == 0 and len(parse_fi_info(res.stdout).efa_devices) == 32
    p4d = Sandbox(tmp_path / "b", "p4d")
    assert len(parse_fi_info(p4d.run("fi_info", "-p", "efa").stdout).efa_devices) == 4
    none = Sandbox(tmp_path / "c", "p5", {"fabric": {"kind": "efa", "nics": 0}})
    res = none.run("fi_info", "-p", "efa")
    assert res.returncode == 1 and res.stderr.strip() == "fi_getinfo: -61 (No data available)"
    missing = Sandbox(tmp_path / "d", "p5", efa=False).run("fi_info", "-p", "efa")
    assert missing.returncode == 127


@pytest.mark.parametrize(("capture", "profile", "world", "size"), [
    # (calibration capture, host profile, [(host, ranks)], size the capture's figure is read at)
    ("p5-aws-batch-mpirun-tagged-table-tail.txt", "p5", [("n", 8)], 16 * GIB),
    ("p5-2node-16xh100-efa-ofi-nccl2.22-mpirun-tagged-debug-info.txt", "p5", [("a", 8), ("b", 8)], 16 * GIB),
    ("10node-80xh100-all_reduce-nccltests2.17.8-maxbytes-reduced.txt", "h100-ib", [(f"n{i}", 8) for i in range(10)],
     2 * GIB),
])
def test_the_model_reproduces_the_captures_it_was_calibrated_on(tmp_path: Path, capture: str, profile: str,
                                                                 world: list[tuple[str, int]], size: int) -> None:
    sim = Sandbox(tmp_path, profile, efa=profile == "p5")
    if len(world) == 1:
        rep = sim.nccl("-b", str(size), "-e", str(size), "-g", str(world[0][1]))
    else:
        hf = sim.hostfile(*(h for h, _ in world))
        res = sim.mpirun("-np", str(8 * len(world)), "-N", "8", "--hostfile", hf, "-x", "NCCL_DEBUG=INFO",
                         str(sim.program), "-b", str(size), "-e", str(size), "-g", "1")
        rep = parse("nccl-tests", res.stdout)
    model = rep.runs[0].rows[0].busbw_gbs
    real = next(r for r in parse("nccl-tests", read_fixture(f"nccl-tests/{capture}")).runs[0].rows
                if r.size_bytes == size).busbw_gbs
    assert model == pytest.approx(real, rel=0.02), (capture, model, real)


def test_an_emulated_instances_efa_devices_are_what_it_attached_within_its_types_data() -> None:
    from metalfleet.testing.ec2 import efa_fabric

    p5 = [("interface", 0)] + [("efa", card) for card in range(32)]
    assert efa_fabric("p5.48xlarge", p5) == {"kind": "efa", "nics": 32, "nic_gbps": 100.0}
    # two EFA interfaces on one card are one device; cards the type does not have give none
    assert efa_fabric("p4d.24xlarge", [("efa", 0), ("efa", 0), ("efa-only", 1), ("efa", 7)])["nics"] == 2  # type: ignore
    assert efa_fabric("p4d.24xlarge", [("efa", c) for c in range(8)])["nics"] == 4  # type: ignore[index]
    assert efa_fabric("p5en.48xlarge", [("efa", c) for c in range(16)]) == {"kind": "efa", "nics": 16,
                                                                            "nic_gbps": 200.0}
    assert efa_fabric("p5.48xlarge", [("interface", 0)])["nics"] == 0  # type: ignore[index]
    assert efa_fabric("m5.large", [("efa", 0)]) is None  # no EFA on that type: the profile's fabric stands
