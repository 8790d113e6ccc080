"""The acceptance gate on real fixtures (and on real fixtures with one thing broken)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from metalfleet.bootstrap.acceptance import CHECK_NAMES, judge, known_offerings, load_baselines, resolve_baseline
from metalfleet.bootstrap.parsers import parse
from metalfleet.providers.errors import InvalidSpecError

from ._fixtures import read_fixture

H100_TABLE = "nvidia-smi/8x-h100-sxm-default-table-drv550.txt"
H100_TOPO = "topo/8x-h100-nv18-no-nic-legend-omitted.txt"
P5_NCCL = "nccl-tests/p5-2node-16xh100-efa-ofi-nccl2.22-mpirun-tagged-debug-info.txt"


def f(kind: str, rel: str) -> Any:
    return parse(kind, read_fixture(rel))


def p5_facts() -> dict[str, Any]:
    return {"nvidia-smi": f("nvidia-smi", H100_TABLE), "nvidia-smi-topo": f("nvidia-smi-topo", H100_TOPO),
            "nccl-tests": f("nccl-tests", P5_NCCL)}


def reason(verdict: Any, name: str) -> str:
    c = verdict.check(name)
    assert c is not None, f"no {name} check in {[x.name for x in verdict.checks]}"
    return str(c.reason)


def status(verdict: Any, name: str) -> str:
    c = verdict.check(name)
    assert c is not None, f"no {name} check"
    return str(c.status)


# ----------------------------------------------------------------------------- a healthy p5


def test_p5_with_real_evidence_passes() -> None:
    v = judge("p5.48xlarge", p5_facts(), node="p5-a")
    assert v.passed, [(c.name, c.reason) for c in v.failures]
    assert v.node == "p5-a" and v.offering == "p5.48xlarge" and v.threshold == 0.9
    assert reason(v, "gpu-count") == "found 8 GPUs (nvidia-smi)"
    assert reason(v, "gpu-interconnect") == "all 28 GPU pairs linked by NV18"
    assert reason(v, "fabric-ports") == "aws-ofi-nccl found 32 EFA NICs"
    assert reason(v, "nccl-transport").startswith("NCCL used NET/OFI")
    bw = v.check("allreduce-busbw")
    assert bw is not None and bw.measured == 488.14 and bw.expected == 487.0
    assert bw.reason.startswith("all_reduce busbw 488.1 GB/s is 100% of baseline 487.0 (threshold 90%)")
    assert "baseline for multi-node (2 hosts, 16 ranks)" in bw.reason


# ------------------------------------------------------------------- the same p5, one thing broken


def test_missing_gpu_block_fails_the_count() -> None:
    text = read_fixture(H100_TABLE)
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|   7  NVIDIA"))
    del lines[start - 1:start + 3]  # the "+---" rule above GPU 7 and its three rows
    facts = p5_facts() | {"nvidia-smi": parse("nvidia-smi", "\n".join(lines))}
    v = judge("p5.48xlarge", facts)
    assert not v.passed
    assert reason(v, "gpu-count") == "expected 8 GPUs, found 7 (nvidia-smi)"
    assert [c.name for c in v.failures] == ["gpu-count"]


def test_a_pcie_path_between_two_gpus_fails_the_topology() -> None:
    rows = read_fixture(H100_TOPO).splitlines()
    for i in (1, 4):  # GPU0 row and GPU3 row: make the GPU0<->GPU3 cell PIX on both sides
        cells = rows[i].split()
        cells[4 if i == 1 else 1] = "PIX"
        rows[i] = "\t".join(cells[:1] + cells[1:9]) + "\t" + "\t".join(cells[9:])
    rows[0] = "\t" + "\t".join(rows[0].split()[:8]) + "\tCPU Affinity\tNUMA Affinity"
    v = judge("p5.48xlarge", p5_facts() | {"nvidia-smi-topo": parse("nvidia-smi-topo", "\n".join(rows))})
    assert reason(v, "gpu-interconnect") == "GPU0<->GPU3 link is PIX, expected NV18"
    assert not v.passed


def test_nccl_over_sockets_on_efa_fails() -> None:
    text = read_fixture(P5_NCCL).replace("Using network AWS Libfabric", "Using network Socket")
    v = judge("p5.48xlarge", p5_facts() | {"nccl-tests": parse("nccl-tests", text)})
    assert reason(v, "nccl-transport") == "NCCL used NET/Socket on an RDMA fabric (efa)"
    assert not v.passed


def test_low_busbw_names_the_fraction_of_the_baseline() -> None:
    facts = p5_facts() | {"nccl-tests": f("nccl-tests",
                                          "nccl-tests/10node-80xh100-all_reduce-nccltests2.17.8-maxbytes-reduced.txt")}
    # Judged against the p5 curve at 10 nodes (between its 8- and 16-node figures), the run passes ...
    scaled = judge("p5.48xlarge", facts)
    assert reason(scaled, "allreduce-busbw").startswith(
        "all_reduce busbw 364.1 GB/s is 102% of baseline 355.3 (threshold 90%); baseline for multi-node (10 hosts, "
        "80 ranks), between the 8-node (355) and 16-node (356) figures, in log2(nodes)")
    # ... and against a flat figure of the caller's (which replaces the curve) it falls short, by how much.
    flat = {"nccl": {"all_reduce": {"multi_node_busbw_gbs": 480.0}}}
    v = judge("p5.48xlarge", facts, flat)
    assert reason(v, "allreduce-busbw").startswith(
        "all_reduce busbw 364.1 GB/s is 76% of baseline 480.0 (threshold 90%); "
        "baseline for multi-node (10 hosts, 80 ranks), one multi-node figure for every node count")
    assert not v.passed
    assert status(judge("p5.48xlarge", facts, {**flat, "threshold": 0.75}), "allreduce-busbw") == "pass"
    # This log has no NCCL_DEBUG lines, so nothing shows the EFA devices: a mandatory check without evidence
    # was skipped, and that fails the node.
    assert status(v, "fabric-ports") == "fail"
    assert reason(v, "fabric-ports").startswith("mandatory check skipped: no evidence for fabric-ports")
    # ... and the transport is not verified: skipped (optional), reported as such, not as passed.
    assert status(v, "nccl-transport") == "skip" and not v.check("nccl-transport").passed  # type: ignore[union-attr]


def test_a100_ring_baseline_and_threshold_override() -> None:
    facts = {"nccl-tests": f("nccl-tests", "nccl-tests/4x-dgx-a100-slurm-oldformat-table.txt")}
    v = judge("p4de.24xlarge", facts, {"required": []})
    bw = v.check("allreduce-busbw")
    assert bw is not None and bw.status == "fail" and bw.measured == 191.56 and bw.expected == 230.0
    assert bw.reason.startswith("all_reduce busbw 191.6 GB/s is 83% of baseline 230.0 (threshold 90%); "
                                "baseline for intra-node ring")
    assert "collective name not in the log; taken as all_reduce" in bw.reason
    assert judge("p4de.24xlarge", facts, {"required": [], "threshold": 0.8}).passed


def test_single_rank_runs_interleaved_in_one_log_fail() -> None:
    facts = {"nccl-tests": f("nccl-tests",
                             "nccl-tests/v100-roce-2node-mpirun-without-mpi-build-4x-nranks1-busbw0-trace.txt")}
    v = judge("fake.8xa100", facts, {"required": []})
    assert reason(v, "nccl-launch").startswith("4 nccl-tests runs wrote into one log at once (each with 1 rank)")
    assert reason(v, "allreduce-busbw") == ("all_reduce busbw 0.0 GB/s cannot be judged: 4 runs interleave in the "
                                            "log, each with a single rank (busbw 0 by definition)")
    assert status(v, "nccl-transport") == "pass"  # NET/IB over RoCE is right for a RoCE fabric
    assert not v.passed


def test_a_one_rank_all_reduce_is_not_a_bandwidth_measurement() -> None:
    text = read_fixture("nccl-tests/1x-rtx5090-alltoall_perf-single-gpu-busbw0.txt").replace(" none ", "  sum ")
    v = judge("p5.48xlarge", {"nccl-tests": parse("nccl-tests", text)}, {"required": []})
    assert reason(v, "allreduce-busbw") == ("all_reduce busbw 0.0 GB/s: the run had a single rank, so bus bandwidth "
                                            "is 0 by definition; not a bandwidth measurement")


def test_alltoall_is_not_taken_for_all_reduce() -> None:
    facts = {"nccl-tests": f("nccl-tests", "nccl-tests/1x-rtx5090-alltoall_perf-single-gpu-busbw0.txt")}
    v = judge("p5.48xlarge", facts, {"required": []})
    assert status(v, "allreduce-busbw") == "skip" and v.passed
    assert reason(v, "allreduce-busbw") == "no all_reduce results in the nccl-tests log"


# -------------------------------------------------------------------------------- GPU health


def test_row_remap_pending_and_wrong_gpu() -> None:
    v = judge("p5.48xlarge", {"nvidia-smi-q": f("nvidia-smi-q", "nvidia-smi/1x-a10-pcie-nvidia-smi-q-drv535.129.txt")},
              {"required": []})
    assert reason(v, "gpu-memory-health") == ("GPU0 has a row remap pending (reset the GPU); "
                                              "GPU0 remapped 4 rows after uncorrectable errors")
    assert reason(v, "gpu-model") == "GPU0 is 'NVIDIA A10', expected a name matching 'H100 80GB HBM3' (H100)"
    assert reason(v, "gpu-count") == "expected 8 GPUs, found 1 (nvidia-smi -q)"
    assert reason(v, "gpu-memory") == "GPU0 has 23028 MiB, expected at least 80000 MiB"


def test_ecc_disabled_fails_and_partial_capture_is_explained() -> None:
    v = judge("p5.48xlarge", {"nvidia-smi-q": f("nvidia-smi-q", "nvidia-smi/h800-sxm-8gpu-nvidia-smi-q-i0.txt")},
              {"required": []})
    assert reason(v, "gpu-ecc") == "ECC is Disabled on GPU0"
    assert reason(v, "gpu-count") == "found 8 GPUs (nvidia-smi -q); the output lists only 1 GPU section"
    assert reason(v, "gpu-model").startswith("GPU0 is 'NVIDIA H800'")


def test_volatile_uncorrected_ecc_errors_fail() -> None:
    text = read_fixture("nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt")
    first = text.index("DRAM Uncorrectable")
    line_end = text.index("\n", first)
    text = text[:first] + text[first:line_end].replace(": 0", ": 3") + text[line_end:]
    v = judge("p5.48xlarge", {"nvidia-smi-q": parse("nvidia-smi-q", text)}, {"required": []})
    assert reason(v, "gpu-ecc") == "GPU0 has 3 volatile uncorrected ECC errors (limit 0)"
    assert status(v, "gpu-fabric-state") == "pass"


def test_nvlink_inactive_links_fail() -> None:
    facts = {"nvlink-status": f("nvlink-status", "nvlink/2x-h100-pcie-bridge-nvlink-s-some-inactive.txt")}
    v = judge("p5.48xlarge", facts, {"required": []})
    r = reason(v, "nvlink-links")
    assert r.startswith("nvlink status lists 2 GPUs, expected 8; GPU0 link 4 is inactive; GPU0 link 5 is inactive")
    good = judge("p4de.24xlarge", {"nvlink-status": f("nvlink-status", "nvlink/8x-a100-sxm4-80gb-nvlink-status.txt")},
                 {"required": []})
    assert reason(good, "nvlink-links") == "8 GPUs x 12 NVLinks at 25.0 GB/s" and good.passed


def test_dcgm_pass_and_fail() -> None:
    text = read_fixture("dcgm/p4de-8xa100-dcgmi-diag-r2-nvlinks12.txt")
    assert judge("p4de.24xlarge", {"dcgm-diag": parse("dcgm-diag", text)}, {"required": []}).passed
    broken = text.replace("| GPU Memory                | Pass - All       ",
                          "| GPU Memory                | Fail - GPU: 3    ")
    v = judge("p4de.24xlarge", {"dcgm-diag": parse("dcgm-diag", broken)}, {"required": []})
    assert reason(v, "dcgm-diag") == "dcgmi diag failed: GPU Memory (Fail - GPU: 3)"


# --------------------------------------------------------------------------------- fabrics


def test_ib_port_down_and_rate() -> None:
    text = read_fixture("infiniband/ibstat-a100-9x-mt4126-hdr200.txt")
    block = text.index("CA 'mlx5_2'")
    down = text[:block] + text[block:].replace("State: Active", "State: Down", 1)
    v = judge("fake.8xh100", {"ibstat": parse("ibstat", down)}, {"required": [], "fabric": {"port_gbps": 200}})
    assert reason(v, "fabric-ports") == "mlx5_2 port 1 is Down"
    v400 = judge("fake.8xh100", {"ibstat": parse("ibstat", text)}, {"required": []})
    assert reason(v400, "fabric-ports").startswith("mlx5_1 port 1 rate is 200 Gb/s, expected 400")
    ok = judge("fake.8xh100", {"ibstat": f("ibstat", "infiniband/ibstat-h100-8x-cx7-ib400-plus-bf3-eth.txt")},
               {"required": []})
    assert reason(ok, "fabric-ports") == "8 InfiniBand ports Active at 400 Gb/s (ibstat)" and ok.passed


def test_ibpanic_and_missing_ports() -> None:
    v = judge("fake.8xh100", {"ibstat": f("ibstat", "infiniband/ibstat-connectx3-mlx4-dualport-fdr56.txt")},
              {"required": []})
    assert reason(v, "fabric-ports").startswith("found 2 InfiniBand ports, expected 8")
    az = judge("fake.8xh100", {"ibstat": f("ibstat", "infiniband/ibstat-a100-azure-8x-cx6vf-hdr-ibpanic-error.txt")},
               {"required": [], "fabric": {"port_gbps": 200}})
    assert reason(az, "fabric-ports") == ("ibstat error: ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: "
                                          "No such file or directory")


def test_roce_ports_and_ibv_devinfo() -> None:
    v = judge("fake.8xa100", {"ibstat": f("ibstat", "infiniband/ibstat-h100-roce-8x-cx7-4x-cx6dx-all-eth.txt")},
              {"required": []})
    assert status(v, "fabric-ports") == "pass" and "12 Ethernet ports" in reason(v, "fabric-ports")
    devinfo = f("ibv-devinfo", "infiniband/ibv_devinfo-2x-connectx3-mlx4-dualport-fdr.txt")
    ib = judge("fake.8xh100", {"ibv-devinfo": devinfo}, {"required": []})
    assert reason(ib, "fabric-ports").startswith("found 4 InfiniBand ports, expected 8; mlx4_1 port 2 is PORT_DOWN")


def test_efa_device_count_from_fi_info() -> None:
    fi = f("fi-info", "efa/fi_info-efa-multi-rdmap-head-n20-truncated.txt")
    v = judge("p5.48xlarge", p5_facts() | {"fi-info": fi})
    assert reason(v, "fabric-ports") == ("expected 32 EFA devices, fi_info shows 3 "
                                         "(fi_info output ends mid-entry: it was cut)")


def test_erdma_alias_and_null_baseline_is_skipped() -> None:
    facts = {"erdma": f("erdma", "erdma/ibv_devinfo-alibaba-h20-erdma0-first-device-only.txt"),
             "nccl-tests": f("nccl-tests", "nccl-tests/p5-aws-batch-mpirun-tagged-table-tail.txt")}
    v = judge("ebmgn8v", facts, {"required": []})
    assert v.offering == "ecs.ebmgn8v.48xlarge"
    assert reason(v, "fabric-ports") == "expected 2 eRDMA devices, found 1"
    bw = v.check("allreduce-busbw")
    assert bw is not None and bw.status == "skip" and not bw.passed and bw.measured == 483.35
    assert "no intra-node ring baseline for ecs.ebmgn8v.48xlarge" in bw.reason
    # By default all_reduce bandwidth is mandatory: skipped for want of a baseline, it fails the node.
    strict = judge("ebmgn8v", facts)
    c = strict.check("allreduce-busbw")
    assert c is not None and c.status == "fail" and c.mandatory and not strict.passed
    assert c.reason.startswith("mandatory check skipped: all_reduce busbw 483.4 GB/s; no intra-node ring baseline")
    with_base = judge("ebmgn8v", facts, {"required": [], "nccl": {"all_reduce": {"intra_node_ring_busbw_gbs": 400}}})
    assert status(with_base, "allreduce-busbw") == "pass"


# ---------------------------------------------------------------------------------- Ascend


HCCL_TABLE = ("data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\n"
              "8192              | 60.00          | 0.13653              | success\n"
              "1073741824        | 9000.00        | {bw}               | success\n")


def ascend_facts(bw: str = "100.00") -> dict[str, Any]:
    return {"npu-smi": f("npu-smi", "ascend/npu-smi-info-8x-910b3-device-table.txt"),
            "npu-smi-topo": f("npu-smi-topo", "ascend/npu-smi-info-t-topo-8x-910b3-hccs.txt"),
            "hccn-tool": [f("hccn-tool", "ascend/hccn-tool-i3-status-g.txt"),
                          f("hccn-tool", "ascend/hccn-tool-i3-ping-g.txt")],
            "hccl-test": parse("hccl-test", HCCL_TABLE.format(bw=bw))}


def test_ascend_node_and_hccl_normalisation() -> None:
    v = judge("huawei.8x910b", ascend_facts(), {"fabric": {"ports": 1}, "required": ["gpu-count"]})
    assert reason(v, "gpu-count") == "found 8 NPUs (npu-smi info)"
    assert reason(v, "gpu-interconnect") == "all 28 NPU pairs linked by HCCS"
    assert reason(v, "npu-health") == "all 8 NPUs report health OK"
    assert reason(v, "fabric-ports") == "1 NPU NICs up at 200 Gb/s"
    bw = v.check("allreduce-busbw")
    assert bw is not None and bw.status == "fail"  # 175 GB/s is 89% of the (approximate) 196 GB/s baseline
    assert bw.expected == 196.0
    assert bw.measured["busbw_gbs"] == 175.0 and bw.measured["algbw_gbs"] == 100.0 and bw.measured["ranks"] == 8
    assert "busbw = algbw x 2(n-1)/n = algbw x 1.75 (n=8) = 175.0 GB/s" in bw.reason
    over = {"fabric": {"ports": 1}, "hccl": {"all_reduce": {"intra_node_busbw_gbs": 200.0}}}
    ok = judge("huawei.8x910b", ascend_facts(), over)
    assert reason(ok, "allreduce-busbw").startswith("all_reduce busbw 175.0 GB/s is 88% of baseline 200.0 "
                                                    "(threshold 90%); hccl_test reports algorithm bandwidth")
    assert not ok.passed
    assert judge("huawei.8x910b", ascend_facts("120.00"), over).passed  # 120 x 1.75 = 210 >= 180


def test_ascend_one_nic_of_eight_and_ping_loss() -> None:
    facts = ascend_facts()
    v = judge("huawei.8x910b", facts)
    assert reason(v, "fabric-ports") == "hccn_tool status for 1 of 8 NPU NICs"
    lossy = read_fixture("ascend/hccn-tool-i3-ping-g.txt").replace("3 received, 0.00%", "2 received, 33.33%")
    facts["hccn-tool"] = [parse("hccn-tool", lossy)]
    v2 = judge("huawei.8x910b", facts, {"required": []})
    assert reason(v2, "npu-nic") == "ping from NPU 3 to 10.20.11.16 lost 33.33% (2/3 received)"


# ------------------------------------------------------------------------- evidence & storage


def test_required_check_without_evidence_fails() -> None:
    v = judge("p5.48xlarge", {"nvidia-smi": f("nvidia-smi", H100_TABLE)})
    assert not v.passed
    assert reason(v, "allreduce-busbw") == "mandatory check skipped: no evidence for allreduce-busbw: supply an " \
                                           "all_reduce_perf log (hccl_test all_reduce_test on Ascend)"
    assert {c.name for c in v.failures} == {"gpu-interconnect", "fabric-ports", "allreduce-busbw"}
    assert all(c.mandatory for c in v.failures)
    only_count = judge("p5.48xlarge", {"nvidia-smi": f("nvidia-smi", H100_TABLE)}, {"required": ["gpu-count"]})
    assert only_count.passed
    # The checks nobody handed evidence for are still reported: skipped, never passed.
    skipped = {c.name: c for c in only_count.skipped}
    assert {"gpu-interconnect", "fabric-ports", "nccl-correctness", "allreduce-busbw", "storage-nvme"} <= set(skipped)
    assert skipped["allreduce-busbw"].reason.startswith("no evidence for allreduce-busbw")
    assert not any(c.passed for c in only_count.skipped)
    assert [c.name for c in only_count.checks if c.status == "pass"] == [
        c.name for c in only_count.checks if c.passed and c.status != "warn"]


def test_storage_checks() -> None:
    v = judge("p5.48xlarge", {"lsblk-json": f("lsblk-json", "storage/lsblk-json-8x-nvme-7t-md0-raid0.json"),
                              "mdstat": f("mdstat", "storage/mdstat-raid0-2x-sata-md1-netdata-4010.txt")},
              {"required": []})
    assert reason(v, "storage-nvme") == "8 local NVMe disks (lsblk)" and reason(v, "storage-raid") == \
        "1 md array, none degraded"
    nv = judge("p5.48xlarge", {"nvme-list": f("nvme-list",
                                              "storage/nvme-list-aws-m5d-ebs-plus-1x-instance-store-old-cli.txt")},
               {"required": []})
    assert reason(nv, "storage-nvme") == "expected 8 local NVMe disks, found 1 (nvme list (instance storage))"
    degraded = parse("mdstat", "Personalities : [raid1]\nmd0 : active raid1 sdb[1](F) sda[0]\n"
                               "      976630464 blocks super 1.2 [2/1] [U_]\n\nunused devices: <none>\n")
    d = judge("p5.48xlarge", {"mdstat": degraded}, {"required": []})
    assert reason(d, "storage-raid") == "md0 is degraded (U_)"


# ---------------------------------------------------------------------------------- baselines


def test_baselines_cover_the_offerings_with_sources() -> None:
    names = set(known_offerings())
    assert {"p5.48xlarge", "p5en.48xlarge", "p4de.24xlarge", "p4d.24xlarge", "fake.8xh100", "fake.8xa100",
            "ecs.ebmgn8v.48xlarge", "huawei.8x910b"} <= names
    doc = load_baselines()
    assert doc["defaults"]["threshold"] == 0.9
    for name, entry in doc["offerings"].items():
        for section in ("gpu", "interconnect", "fabric"):
            assert entry[section].get("source"), f"{name}.{section} has no source"
        perf = entry.get("nccl", entry.get("hccl"))
        assert perf and perf["all_reduce"].get("source"), f"{name} has no bandwidth source"
    b = resolve_baseline("p5.48xlarge")
    assert (b.gpu.count, b.interconnect.topo_link, b.fabric.ports) == (8, "NV18", 32)
    assert b.nccl.all_reduce.intra_node_nvls_busbw_gbs == 480.0
    assert b.nccl.all_reduce.intra_node_ring_busbw_gbs == 370.0
    assert resolve_baseline("p4d.24xlarge").interconnect.topo_link == "NV12"
    assert resolve_baseline("p5en.48xlarge").fabric.ports == 16
    assert dataclasses.asdict(resolve_baseline("fake.8xh100").fabric) | {"source": None} == {
        "kind": "infiniband", "ports": 8, "port_gbps": 400, "total_gbps": 3200, "nccl_net": "NET/IB", "source": None}


def test_bad_offering_and_overrides_are_invalid_spec_errors() -> None:
    with pytest.raises(InvalidSpecError, match=re.escape("no acceptance baseline for offering 'p9.huge'")):
        judge("p9.huge", {})
    with pytest.raises(InvalidSpecError, match=re.escape("unknown baseline field 'nccl.all_reduce.busbw'")):
        judge("p5.48xlarge", {}, {"nccl": {"all_reduce": {"busbw": 1}}})
    with pytest.raises(InvalidSpecError, match="threshold"):
        judge("p5.48xlarge", {}, {"threshold": 0})
    with pytest.raises(InvalidSpecError, match="unknown check 'gpu-magic'"):
        judge("p5.48xlarge", {}, {"required": ["gpu-magic"]})
    with pytest.raises(InvalidSpecError, match="not a parser result"):
        judge("p5.48xlarge", {"nvidia-smi": "raw text"})


def test_every_check_is_registered_once_with_what_the_gate_needs() -> None:
    from metalfleet.bootstrap.acceptance.checks import CHECKS
    from metalfleet.providers.checks import ACCEPTANCE_CHECKS

    # The kernel validates a spec's check names against its own list: the registry is that list, in its order.
    assert CHECK_NAMES == ACCEPTANCE_CHECKS == tuple(c.name for c in CHECKS)
    for c in CHECKS:
        assert c.about and c.hint, c.name
        part: Any = resolve_baseline("p5.48xlarge")
        for key in c.baseline_field.split(".") if c.baseline_field else ():  # a field of every baseline
            assert key in {x.name for x in dataclasses.fields(part)}, (c.name, c.baseline_field)
            part = getattr(part, key)


def test_statuses_print_and_serialise_as_their_values() -> None:
    import json

    from metalfleet.bootstrap.acceptance import CheckStatus
    from metalfleet.bootstrap.acceptance.report import to_json
    from metalfleet.bootstrap.acceptance.results import NodeStatus

    v = judge("p5.48xlarge", {}, {"required": ["gpu-count"]}, node="n1")
    c = v.check("gpu-count")
    assert c is not None and c.status is CheckStatus.FAIL
    assert (str(c.status), f"{c.status}", f"{c.status:>6}", c.status.upper()) == ("fail", "fail", "  fail", "FAIL")
    assert json.loads(to_json([v]))["nodes"][0]["checks"][0]["status"] == "fail"
    assert json.dumps({"status": NodeStatus.UNREACHABLE}) == '{"status": "unreachable"}'
    assert f"{NodeStatus.PASS}={NodeStatus.ERROR}" == "pass=error"


def test_one_rdma_fabric_set_for_the_gate_and_the_catalogue() -> None:
    from metalfleet.bootstrap.acceptance.gate import applicable_checks
    from metalfleet.providers.browse import catalogue_rows
    from metalfleet.providers.catalog import load_catalog
    from metalfleet.providers.checks import RDMA_FABRICS
    from metalfleet.providers.models import Fabric

    assert RDMA_FABRICS.issubset(f.value for f in Fabric) and Fabric.NONE not in RDMA_FABRICS
    # The Huawei offering scales out over its NPUs' own RoCE ports (HCCL); HCCS is its intra-server link.
    rows = {r.name: r for r in catalogue_rows(load_catalog())}
    assert rows["physical.kat2e.48xlarge.8.313t"].rdma and rows["p5.48xlarge"].rdma
    assert not rows["ecs.ebmgn7.26xlarge"].rdma  # fabric none
    assert "nccl-transport" in applicable_checks(resolve_baseline("p5.48xlarge"))
    assert "nccl-transport" not in applicable_checks(resolve_baseline("p5.48xlarge", {"fabric": {"kind": "none"}}))
    # Ascend nodes run HCCL, not NCCL: no NCCL transport to check, whatever the fabric.
    assert "nccl-transport" not in applicable_checks(resolve_baseline("huawei.8x910b"))


# ------------------------------------------------------------------------- no circular evidence

_URL = re.compile(r"https?://\S+?(?=[;,)\s]|$)")
_BLOB = re.compile(r"https://github\.com/(?P<repo>[^/]+/[^/]+)/blob/[^/]+/(?P<path>[^\s;,)]+)")
#: Files that feed the gate or the simulated hosts a capture (parser-only tests are not listed).
_GATE_AND_SIM = ("tests/acceptance/test_gate.py", "tests/acceptance/test_live.py", "tests/acceptance/test_live_cli.py",
                 "tests/acceptance/test_quarantine.py", "tests/acceptance/test_report_offline_cli.py",
                 "tests/acceptance/test_sim_nccl.py", "tests/acceptance/_sim.py", "tests/support/hosts/harness.py",
                 "tests/support/hosts/shims/mfshim.py", "tests/acceptance/test_live_replay.py",
                 "tests/acceptance/_replay.py",
                 "tests/bootstrap/test_engine_replay.py")


def _sources(tree: Any, path: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(tree, dict):
        for k, v in tree.items():
            where = f"{path}.{k}" if path else k
            if k in ("source", "threshold_source") and isinstance(v, str):
                out.append((where, v))
            else:
                out += _sources(v, where)
    return out


def _fixture_origins() -> dict[str, tuple[str, str]]:
    """fixture path -> (repository, file) of the public document it was copied from (its SOURCES.md)."""
    from ._fixtures import FIXTURES

    text = (FIXTURES / "SOURCES.md").read_text()
    out = {}
    for block in re.split(r"^### ", text, flags=re.M)[1:]:
        rel = re.match(r"`tests/support/fixtures/([^`]+)`", block)
        repo = re.search(r"^- Source: (\S+)", block, re.M)
        loc = re.search(r"^- Location: (\S+?)@", block, re.M)
        if rel and repo and loc:
            out[rel.group(1)] = (repo.group(1), loc.group(1))
    return out


def test_baselines_cite_public_sources_and_never_a_capture_the_tests_replay() -> None:
    doc = load_baselines()
    sources = _sources(doc)
    assert len(sources) > 30
    for where, text in sources:
        local = re.search(r"(?<![\w./-])tests/", text)
        assert "fixture" not in text.lower() and not local, f"{where} cites a test capture: {text}"
    # Every figure a check compares with has a public source (a URL) or says it is approximate.
    for name, entry in doc["offerings"].items():
        for section in ("gpu", "interconnect", "fabric"):
            src = entry[section]["source"]
            assert _URL.search(src) or "approximate" in src or "providers/fake.py" in src, f"{name}.{section}: {src}"
        perf = entry.get("nccl", entry.get("hccl"))["all_reduce"]
        figures = {k: v for k, v in perf.items() if k.endswith("_gbs") and v is not None}
        if figures:
            assert _URL.search(perf["source"]) or "approximate" in perf["source"], f"{name}: {perf['source']}"
    # A capture copied from a document that a baseline cites is never fed to the gate or the simulated hosts:
    # a check against it would compare a figure with itself.
    cited = {(m.group("repo"), m.group("path")) for _w, text in sources for m in _BLOB.finditer(text)}
    copies = sorted(rel for rel, origin in _fixture_origins().items() if origin in cited)
    assert any("2node-efa-srun" in rel for rel in copies), copies  # the README p5's multi-node figure cites
    from ._fixtures import REPO_ROOT

    for f in _GATE_AND_SIM:
        text = (REPO_ROOT / f).read_text()
        used = [rel for rel in copies if rel in text or rel.rsplit("/", 1)[-1] in text]
        assert not used, f"{f} uses {used}, a copy of a baseline's source"


def test_the_spec_names_the_mandatory_checks() -> None:
    from metalfleet.bootstrap.acceptance.quarantine import spec_overrides
    from metalfleet.providers.spec import parse_spec

    base = {"name": "gate", "provider": "fake", "region": "r", "offering": "p5.48xlarge", "count": 1, "image": "i"}
    facts = {"nvidia-smi": f("nvidia-smi", H100_TABLE)}
    default = judge("p5.48xlarge", facts, spec_overrides(parse_spec(base)))
    assert {c.name for c in default.checks if c.mandatory} == set(resolve_baseline("p5.48xlarge").required)
    assert not default.passed  # no topology, fabric or bandwidth evidence: mandatory checks skipped
    only = judge("p5.48xlarge", facts, spec_overrides(parse_spec({**base, "acceptance": {"mandatory": ["gpu-count"]}})))
    assert only.passed and [c.name for c in only.checks if c.mandatory] == ["gpu-count"]
    assert status(only, "allreduce-busbw") == "skip"
    none = judge("p5.48xlarge", {}, spec_overrides(parse_spec({**base, "acceptance": {"mandatory": []}})))
    assert none.passed and none.checks and all(c.status == "skip" for c in none.checks)
    for bad, value in ((["gpu-count", "gpu-magic"], "gpu-magic"), (["gpu-count", "gpu-count"], "gpu-count")):
        with pytest.raises(InvalidSpecError) as exc:
            parse_spec({**base, "acceptance": {"mandatory": bad}})
        assert exc.value.field == "acceptance.mandatory" and exc.value.value == bad and repr(value) in str(exc.value)
    with pytest.raises(InvalidSpecError) as old:
        parse_spec({**base, "acceptance": {"checks": ["gpu-count"]}})
    assert old.value.field == "acceptance.checks"


def test_a_run_across_nodes_is_judged_on_the_nccl_checks_only() -> None:
    from metalfleet.bootstrap.acceptance.checks import NCCL_CHECKS

    v = judge("p5.48xlarge", {"nccl-tests": f("nccl-tests", P5_NCCL)}, scope=NCCL_CHECKS)
    assert [c.name for c in v.checks] == list(NCCL_CHECKS) and v.passed
    assert [c.name for c in v.checks if c.mandatory] == ["allreduce-busbw"]
    nothing = judge("fake.8xa100", {"nccl-tests": f("nccl-tests", P5_NCCL)}, scope=NCCL_CHECKS)
    bw = nothing.check("allreduce-busbw")
    assert bw is not None and bw.status == "fail" and not nothing.passed  # no multi-node baseline for it
    assert bw.reason.startswith("mandatory check skipped: all_reduce busbw 488.1 GB/s; no multi-node")
