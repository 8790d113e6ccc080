"""Every captured fixture parses with the right parser, and the parsed values are what the file says."""

from __future__ import annotations

import json

import pytest

from metalfleet.bootstrap.parsers import PARSERS, ParseError, parse, sniff_kind, to_jsonable
from metalfleet.bootstrap.parsers.ascend import HccnIp, HccnPing, HccnPortStatus
from metalfleet.bootstrap.parsers.nvidia_smi import NvidiaSmiReport

from ._fixtures import FIXTURE_KINDS, FIXTURES, fixture_files, read_fixture


def p(rel: str):  # type: ignore[no-untyped-def]
    return PARSERS[FIXTURE_KINDS[rel]](read_fixture(rel))


# ------------------------------------------------------------------------------------ the walk


def test_every_fixture_file_has_a_parser_kind() -> None:
    files = fixture_files()
    assert len(files) >= 53, f"expected the 53 captured fixtures under {FIXTURES}, found {len(files)}"
    unmapped = [f for f in files if f not in FIXTURE_KINDS]
    assert not unmapped, f"new fixtures without a parser kind (add them to FIXTURE_KINDS): {unmapped}"
    stale = [f for f in FIXTURE_KINDS if f not in files]
    assert not stale, f"FIXTURE_KINDS names files that are gone: {stale}"
    assert all(kind in PARSERS for kind in FIXTURE_KINDS.values())


@pytest.mark.parametrize("rel", sorted(FIXTURE_KINDS))
def test_fixture_parses_and_is_json_ready(rel: str) -> None:
    result = p(rel)
    doc = to_jsonable(result)
    json.dumps(doc, allow_nan=False)  # must not raise
    assert isinstance(doc, dict)


@pytest.mark.parametrize("rel", sorted(FIXTURE_KINDS))
def test_content_sniffing_agrees_with_the_map(rel: str) -> None:
    text = read_fixture(rel)
    kind = FIXTURE_KINDS[rel]
    if not text.strip():
        assert sniff_kind(text) is None  # the empty nvlink capture says nothing about itself
        return
    assert sniff_kind(text) == kind


# ------------------------------------------------------------------------------ nvidia-smi


def test_xml_v100s_eight_gpus() -> None:
    r = p("nvidia-smi/8x-v100s-pcie-32gb-vm-q-x.xml")
    assert isinstance(r, NvidiaSmiReport)
    assert (r.driver_version, r.cuda_version, r.attached_gpus, r.gpu_count) == ("460.73.01", "11.2", 8, 8)
    assert {g.name for g in r.gpus} == {"Tesla V100S-PCIE-32GB"}
    g0 = r.gpus[0]
    assert g0.bus_id == "00000000:00:0D.0"
    assert g0.memory_total_mib == 32510 and g0.memory_used_mib == 31689
    assert g0.ecc_mode == "Enabled" and g0.ecc_volatile_uncorrected == 0 and g0.ecc_aggregate_uncorrected == 0
    assert (g0.retired_pages_single_bit, g0.retired_pages_double_bit, g0.retired_pages_pending) == (0, 0, False)
    assert g0.persistence_mode is False
    assert (g0.power_draw_w, g0.power_limit_w) == (232.8, 250.0)
    assert (g0.clock_sm_mhz, g0.max_clock_sm_mhz, g0.max_clock_mem_mhz) == (1410, 1597, 1107)
    assert g0.utilization_gpu_pct == 97.0 and g0.temperature_c == 66.0
    assert r.gpus[-1].bus_id == "00000000:00:14.0"


def test_xml_a100_mig_partial_capture_counts_attached_gpus() -> None:
    r = p("nvidia-smi/a100-sxm4-80gb-mig-q-x-one-gpu.xml")
    assert r.attached_gpus == 4 and len(r.gpus) == 1 and r.gpu_count == 4
    g = r.gpus[0]
    assert g.name == "NVIDIA A100-SXM4-80GB" and g.mig_mode == "Enabled" and g.memory_total_mib == 81920
    assert (g.power_limit_w, g.max_clock_sm_mhz, g.max_clock_mem_mhz) == (500.0, 1410, 1593)
    assert r.driver_version == "535.54.03"


def test_xml_a10g_and_v13_schema() -> None:
    a10g = p("nvidia-smi/a10g-pcie-aws-g5-q-x.xml")
    g = a10g.gpus[0]
    assert (g.name, g.remapped_rows_uncorrectable, g.remapped_rows_pending) == ("NVIDIA A10G", 0, False)
    assert g.power_limit_w == 300.0 and a10g.driver_version == "515.105.01"
    ada = p("nvidia-smi/rtx4000-sff-ada-pcie-q-x-v13-schema.xml")
    g = ada.gpus[0]
    assert (ada.driver_version, ada.cuda_version) == ("595.84", "13.2")
    assert g.name == "NVIDIA RTX 4000 SFF Ada Generation" and g.ecc_mode == "Disabled"
    assert g.ecc_volatile_uncorrected is None  # all N/A with ECC off
    assert g.power_draw_w == 8.44 and g.power_limit_w == 70.0 and g.processes == 4


def test_q_text_h100_hgx() -> None:
    r = p("nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt")
    assert (r.driver_version, r.cuda_version, r.gpu_count) == ("535.161.08", "12.2", 8)
    assert {g.name for g in r.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g.bus_id for g in r.gpus][:2] == ["00000000:19:00.0", "00000000:3B:00.0"]
    assert r.gpus[-1].bus_id == "00000000:DB:00.0"
    for g in r.gpus:
        assert g.ecc_mode == "Enabled" and g.ecc_volatile_uncorrected == 0 and g.fabric_state == "Completed"
        assert g.remapped_rows_failure is False and g.power_limit_w == 700.0 and g.memory_total_mib == 81559
    assert r.gpus[0].uuid == "GPU-ee7954ec-da95-fd7a-ddfd-c6b32cc2f8aa"


def test_q_text_a10_has_pending_row_remap() -> None:
    g = p("nvidia-smi/1x-a10-pcie-nvidia-smi-q-drv535.129.txt").gpus[0]
    assert g.name == "NVIDIA A10"
    assert (g.remapped_rows_correctable, g.remapped_rows_uncorrectable, g.remapped_rows_pending) == (0, 4, True)


def test_q_text_rtx4090_and_h800_single_gpu() -> None:
    r = p("nvidia-smi/8x-rtx4090-pcie-nvidia-smi-q.txt")
    assert r.gpu_count == 8 and all(g.ecc_mode == "Disabled" for g in r.gpus)
    assert r.gpus[0].processes == 1 and r.gpus[0].power_limit_w == 450.0
    h800 = p("nvidia-smi/h800-sxm-8gpu-nvidia-smi-q-i0.txt")
    assert (h800.attached_gpus, len(h800.gpus), h800.gpu_count) == (8, 1, 8)
    assert h800.gpus[0].name == "NVIDIA H800" and h800.gpus[0].ecc_mode == "Disabled"
    assert h800.gpus[0].power_draw_w == 74.71 and h800.gpus[0].clock_mem_mhz == 2619


def test_q_text_page_retirement_only() -> None:
    r = p("nvidia-smi/8x-a100-azure-nvidia-smi-q-d-page_retirement.txt")
    assert r.gpu_count == 8 and r.driver_version == "535.86.10"
    assert [g.bus_id for g in r.gpus] == [f"0000000{i}:00:00.0" for i in range(1, 9)]
    assert all(g.name is None and g.retired_pages_double_bit == 0 and g.retired_pages_pending is False
               for g in r.gpus)


def test_default_tables() -> None:
    h100 = p("nvidia-smi/8x-h100-sxm-default-table-drv550.txt")
    assert (h100.driver_version, h100.cuda_version, h100.gpu_count) == ("550.90.07", "12.4", 8)
    assert h100.gpus[5].bus_id == "00000000:BB:00.0" and h100.gpus[5].power_draw_w == 74.0
    assert all(g.power_limit_w == 700.0 and g.persistence_mode and g.ecc_volatile_uncorrected == 0
               for g in h100.gpus)
    pcie = p("nvidia-smi/2x-h100-pcie-nvlink-bridge-default-table-drv555.txt")
    assert [g.name for g in pcie.gpus] == ["NVIDIA H100 PCIe"] * 2
    assert pcie.gpus[1].bus_id == "00000000:D5:00.0" and pcie.gpus[1].power_limit_w == 350.0
    assert pcie.gpus[0].persistence_mode is False and pcie.gpus[0].mig_mode == "Disabled"
    h800 = p("nvidia-smi/h800-8gpu-default-table-driver525-busy.txt")
    assert h800.driver_version == "525.105.17" and h800.gpu_count == 8
    assert h800.gpus[0].ecc_mode == "Disabled" and h800.gpus[0].ecc_volatile_uncorrected is None
    assert h800.gpus[0].memory_used_mib == 65759 and h800.gpus[0].utilization_gpu_pct == 100.0
    assert [g.processes for g in h800.gpus] == [1] * 8


# ------------------------------------------------------------------------------- topology


def test_topo_a800_nv8_with_nics() -> None:
    t = p("topo/8x-a800-sxm4-nv8-4nic-mlx5.txt")
    assert t.gpus == tuple(f"GPU{i}" for i in range(8)) and t.nics == ("NIC0", "NIC1", "NIC2", "NIC3")
    assert {kind for _a, _b, kind in t.pairs("GPU")} == {"NV8"} and len(t.pairs("GPU")) == 28
    assert t.link("GPU1", "NIC0") == "PIX" and t.link("GPU7", "NIC3") == "PIX" and t.link("GPU0", "NIC2") == "SYS"
    assert t.link("NIC0", "NIC1") == "NODE"
    assert dict(t.nic_names) == {"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_2", "NIC3": "mlx5_3"}
    assert t.cpu_affinity["GPU4"] == "32-63,96-127" and t.numa_affinity["GPU4"] == "1"
    assert t.cpu_affinity["NIC0"] is None


def test_topo_h100_nv18_and_pcie_and_tabs() -> None:
    h = p("topo/8x-h100-nv18-no-nic-legend-omitted.txt")
    assert {kind for *_x, kind in h.pairs()} == {"NV18"} and h.nics == () and dict(h.nic_names) == {}
    assert h.cpu_affinity["GPU7"] == "52-103,156-207"
    v = p("topo/2x-v100-sxm2-no-nvlink-4x-cx6-roce-tabs-rocep-names.txt")
    assert v.link("GPU0", "GPU1") == "SYS" and v.link("NIC0", "NIC1") == "PIX" and v.link("GPU1", "NIC2") == "PHB"
    assert v.nic_names["NIC2"] == "rocep137s0f0"
    assert (v.cpu_affinity["GPU1"], v.numa_affinity["GPU1"]) == ("14-27,42-55", "1")
    g = p("topo/pcie-2x-gtx1080ti-desktop-phb.txt")
    assert g.pairs() == [("GPU0", "GPU1", "PHB")] and g.numa_affinity["GPU0"] is None


def test_npu_topo_hccs() -> None:
    t = p("ascend/npu-smi-info-t-topo-8x-910b3-hccs.txt")
    assert t.gpus == tuple(f"NPU{i}" for i in range(8))
    assert {k for *_x, k in t.pairs("NPU")} == {"HCCS"}
    assert t.cpu_affinity["NPU0"] == "144-167" and t.cpu_affinity["NPU7"] == "48-71"


# -------------------------------------------------------------------------------------- nvlink


def test_nvlink_status_a100_sxm() -> None:
    r = p("nvlink/8x-a100-sxm4-80gb-nvlink-status.txt")
    assert [g.index for g in r.gpus] == list(range(8))
    assert all(g.active_links == 12 and g.inactive_links == 0 for g in r.gpus)
    assert {lk.speed_gbs for g in r.gpus for lk in g.links} == {25.0}
    assert r.gpus[3].uuid == "GPU-6e4fbadc-10d9-a63a-8988-9a0d320ff1a0"
    azure = p("nvlink/a100-sxm4-80gb-azure-nvlink-s-gpu7-tabs.txt")
    assert [g.index for g in azure.gpus] == [7] and azure.gpus[0].active_links == 12


def test_nvlink_some_inactive_and_all_inactive_and_empty() -> None:
    r = p("nvlink/2x-h100-pcie-bridge-nvlink-s-some-inactive.txt")
    for g in r.gpus:
        assert (g.active_links, g.inactive_links) == (12, 6)
        assert [lk.link for lk in g.links if lk.inactive] == [4, 5, 10, 11, 16, 17]
        assert {lk.speed_gbs for lk in g.links if not lk.inactive} == {26.562}
    off = p("nvlink/2x-a100-pcie-no-nvlink-nvlink-s-all-inactive.txt")
    assert [(g.name, g.all_inactive, g.links) for g in off.gpus] == [("NVIDIA A100-PCIE-40GB", True, ())] * 2
    assert p("nvlink/a10-pcie-nvlink-status-empty.txt").gpus == ()


def test_nvlink_remote_and_throughput() -> None:
    r = p("nvlink/2x-h100-pcie-nvlink-R-remote.txt")
    lk = r.gpus[0].links[4]
    assert (lk.remote_bus_id, lk.remote_link) == ("00000000:D5:00.0", 6)
    assert r.gpus[1].links[11].remote_link == 15 and r.gpus[1].links[0].remote_bus_id == "00000000:C2:00.0"
    t = p("nvlink/h800-gpu0-nvlink-gt-d-throughput.txt")
    assert len(t.gpus[0].links) == 8
    assert (t.gpus[0].links[0].tx_kib, t.gpus[0].links[0].rx_kib) == (1390774681, 1387831436)
    assert t.gpus[0].links[7].rx_kib == 1387855953


# ---------------------------------------------------------------------------------- nccl-tests


def _row(run, size):  # type: ignore[no-untyped-def]
    return next(r for r in run.rows if r.size_bytes == size)


def test_nccl_10_node_all_reduce() -> None:
    r = p("nccl-tests/10node-80xh100-all_reduce-nccltests2.17.8-maxbytes-reduced.txt")
    (run,) = r.runs
    assert run.collective == "all_reduce_perf" and r.nccl_tests_version == "2.17.8"
    assert len(run.ranks) == 80 and run.ranks[79].host == "cnode3-011"
    assert run.ranks[0].gpu_name == "NVIDIA H100 80GB HBM3"
    assert run.avg_busbw_gbs == 265.631 and run.oob_values == 0 and run.oob_ok is True
    row = _row(run, 1073741824)
    assert (row.oop_busbw_gbs, row.ip_busbw_gbs) == (344.87, 346.56)
    assert (row.oop_algbw_gbs, row.oop_time_us) == (174.62, 6149.19)
    assert row.dtype == "double" and row.redop == "sum" and row.root == -1 and row.oop_wrong == 0
    assert run.peak_busbw_gbs == 364.07 and run.busbw_at_largest_gbs == 322.70 and len(run.rows) == 10
    assert r.net_transport is None and r.debug_lines == 0  # no NCCL_DEBUG in this log


def test_nccl_p5_efa_debug_log() -> None:
    r = p("nccl-tests/p5-2node-16xh100-efa-ofi-nccl2.22-mpirun-tagged-debug-info.txt")
    (run,) = r.runs
    assert len(run.ranks) == 16 and len(run.rows) == 32 and run.avg_busbw_gbs == 124.584
    row = _row(run, 17179869184)
    assert (row.oop_busbw_gbs, row.ip_busbw_gbs) == (487.90, 488.14)
    assert _row(run, 8).oop_time_us == 85.70  # row split by an mpirun tag mid-line
    assert r.net_transport == "NET/OFI" and r.network_plugin_name == "AWS Libfabric"
    assert (r.ofi_provider, r.ofi_nics, r.nranks) == ("efa", 32, 16)
    assert r.nvls_available and r.nvls_connected
    assert r.transports == ("NET/OFI/GDRDMA", "P2P/CUMEM")
    assert r.nccl_version == "2.22.3+cuda12.2"


def test_nccl_interleaved_one_rank_runs_over_roce() -> None:
    r = p("nccl-tests/v100-roce-2node-mpirun-without-mpi-build-4x-nranks1-busbw0-trace.txt")
    (run,) = r.runs
    assert run.concurrent_runs == 4 and len(run.ranks) == 4 and {x.rank for x in run.ranks} == {0}
    assert run.avg_busbw_gbs == 0.0 and run.peak_busbw_gbs == 0.0 and len(run.rows) == 4 * 28
    assert r.net_transport == "NET/IB" and r.nranks == 1
    assert r.ib_devices == ("mlx5_0:1/RoCE", "mlx5_2:1/RoCE", "rocep4s0f0:1/RoCE", "rocep137s0f0:1/RoCE")


def test_nccl_tagged_and_labelled_tails() -> None:
    srun = p("nccl-tests/p5-2node-efa-srun-labelled-size-table.txt").runs[0]
    assert len(srun.rows) == 32 and srun.avg_busbw_gbs is None
    assert (_row(srun, 17179869184).oop_busbw_gbs, _row(srun, 17179869184).ip_busbw_gbs) == (487.09, 487.26)
    batch = p("nccl-tests/p5-aws-batch-mpirun-tagged-table-tail.txt").runs[0]
    assert batch.avg_busbw_gbs == 156.742 and _row(batch, 8589934592).oop_busbw_gbs == 480.43
    gb = p("nccl-tests/gb200-nvl72-single-rack-72gpu-tail.txt").runs[0]
    assert gb.avg_busbw_gbs == 745.53 and _row(gb, 4294967296).oop_busbw_gbs == 839.16
    assert gb.ranks[0].rank == 71 and gb.ranks[0].gpu_name == "NVIDIA Graphics Device"


def test_nccl_old_layout_with_error_column() -> None:
    old = p("nccl-tests/4x-dgx-a100-slurm-oldformat-table.txt").runs[0]
    assert old.layout == "old" and old.avg_busbw_gbs == 113.289 and len(old.rows) == 13
    big = _row(old, 4294967296)
    assert (big.oop_busbw_gbs, big.ip_busbw_gbs, big.root, big.oop_error) == (191.05, 191.56, None, 1e-06)
    k8s = p("nccl-tests/dgx-a100-2node-8xhdr-k8s-oldformat-error-col-table.txt").runs[0]
    assert len(k8s.rows) == 30 and k8s.avg_busbw_gbs == 53.7098 and _row(k8s, 8).oop_error == 2e-07


def test_nccl_several_collectives_and_na_wrong() -> None:
    r = p("nccl-tests/2node-2xh100-alltoall-sendrecv-nccltests2.17.6.txt")
    assert [x.collective for x in r.runs] == ["alltoall_perf", "sendrecv_perf"]
    assert [x.avg_busbw_gbs for x in r.runs] == [13.4689, 13.5405]
    assert r.runs[0].rows[0].ip_wrong is None and r.runs[0].rows[0].oop_wrong == 0
    one = p("nccl-tests/1x-rtx5090-alltoall_perf-single-gpu-busbw0.txt").runs[0]
    assert one.avg_busbw_gbs == 0.0 and one.rows[0].oop_algbw_gbs == 1715.44 and one.rows[0].ip_wrong is None


# ------------------------------------------------------------------------------ RDMA fabrics


def test_ibstat_h100_ib400_plus_bluefield() -> None:
    r = p("infiniband/ibstat-h100-8x-cx7-ib400-plus-bf3-eth.txt")
    ib = [(d.name, pt) for d in r.devices for pt in d.ports if pt.link_layer == "InfiniBand"]
    assert len(ib) == 8 and {pt.rate_gbps for _n, pt in ib} == {400.0}
    assert {(pt.state, pt.physical_state) for _n, pt in ib} == {("Active", "LinkUp")}
    bond = r.devices[-1]
    assert bond.name == "mlx5_bond_0" and bond.ca_type == "MT41692" and bond.ports[0].link_layer == "Ethernet"
    assert bond.ports[0].rate_gbps == 200.0 and r.devices[2].name == "mlx5_4"


def test_ibstat_others() -> None:
    a = p("infiniband/ibstat-a100-9x-mt4126-hdr200.txt")
    assert len(a.devices) == 9 and a.devices[0].ports[0].link_layer == "Ethernet"
    assert a.devices[3].ports[0].base_lid == 1374 and a.devices[3].firmware == "28.37.1014"
    az = p("infiniband/ibstat-a100-azure-8x-cx6vf-hdr-ibpanic-error.txt")
    assert len(az.devices) == 8 and {d.ca_type for d in az.devices} == {"MT4124"}
    assert len(az.errors) == 1 and "mlx5_8" in az.errors[0]
    cx3 = p("infiniband/ibstat-connectx3-mlx4-dualport-fdr56.txt")
    assert cx3.devices[0].num_ports == 2 and [x.rate_gbps for x in cx3.devices[0].ports] == [56.0, 56.0]
    roce = p("infiniband/ibstat-h100-roce-8x-cx7-4x-cx6dx-all-eth.txt")
    rates = sorted(pt.rate_gbps or 0 for d in roce.devices for pt in d.ports)
    assert rates == [100.0] * 4 + [400.0] * 8
    assert {pt.link_layer for d in roce.devices for pt in d.ports} == {"Ethernet"}


def test_ibv_devinfo_and_erdma() -> None:
    r = p("infiniband/ibv_devinfo-2x-connectx3-mlx4-dualport-fdr.txt")
    assert [d.hca_id for d in r.devices] == ["mlx4_1", "mlx4_0"]
    d = r.devices[0]
    assert (d.transport, d.vendor_part_id) == ("InfiniBand (0)", "4099")
    assert (d.board_id, d.phys_port_cnt) == ("MT_1090120019", 2)
    assert [(x.number, x.state, x.state_code) for x in d.ports] == [(1, "PORT_ACTIVE", 4), (2, "PORT_DOWN", 1)]
    assert (d.ports[0].port_lid, d.ports[0].sm_lid, d.ports[0].active_mtu) == (22, 1, 4096)
    assert r.erdma_devices == ()
    e = p("erdma/ibv_devinfo-alibaba-h20-erdma0-first-device-only.txt")
    assert e.erdma_devices == ("erdma_0",)
    dev = e.devices[0]
    assert (dev.transport, dev.vendor_id, dev.vendor_part_id) == ("eRDMA (0)", "0x1ded", "4223")
    assert (dev.ports[0].state, dev.ports[0].link_layer, dev.ports[0].max_mtu) == ("PORT_ACTIVE", "Ethernet", 4096)


def test_ibdev2netdev_and_fi_info() -> None:
    r = p("infiniband/ibdev2netdev-connectx3-mlx4-ipoib.txt")
    assert [(e.device, e.port, e.netdev, e.state) for e in r.entries] == [
        ("mlx4_0", 1, "ib0", "Up"), ("mlx4_0", 2, "ib1", "Up")]
    f = p("efa/fi_info-efa-multi-rdmap-head-n20-truncated.txt")
    assert len(f.entries) == 4 and f.last_entry_incomplete
    assert f.efa_devices == ("rdmap79s0", "rdmap80s0", "rdmap81s0")
    assert {e.version for e in f.entries[:3]} == {"121.0"} and f.entries[0].type == "FI_EP_RDM"


# --------------------------------------------------------------------------------- dcgm / ascend


def test_dcgm_diag_all_pass() -> None:
    r = p("dcgm/p4de-8xa100-dcgmi-diag-r2-nvlinks12.txt")
    assert r.metadata["DCGM Version"] == "3.3.3" and r.metadata["Driver Version Detected"] == "535.104.12"
    assert r.metadata["GPU Device IDs Detected"].split(",") == ["20b2"] * 8
    assert len(r.tests) == 11 and r.failed == () and {t.status for t in r.tests} == {"Pass"}
    pcie = next(t for t in r.tests if t.name == "PCIe")
    assert pcie.section == "Integration" and pcie.results == ("Pass - All",)
    assert r.messages == ("Successfully ran diagnostic for group.",)


def test_npu_smi_table_and_details() -> None:
    r = p("ascend/npu-smi-info-8x-910b3-device-table.txt")
    assert r.version == "24.1.rc1.b030" and r.npu_count == 8
    assert {n.name for n in r.npus} == {"910B3"} and {n.health for n in r.npus} == {"OK"}
    assert r.npus[2].bus_id == "0000:81:00.0" and r.npus[0].power_w == 101.8 and r.npus[4].temp_c == 45.0
    assert r.npus[7].hbm_used_mb == 3315 and {n.hbm_total_mb for n in r.npus} == {65536}
    c = p("ascend/npu-smi-info-t-common-i1-910.txt")
    assert (c.npu_id, c.aicore_count, c.aicore_freq_mhz, c.hbm_usage_pct) == (1, 20, 1800, 91.0)
    assert (c.temperature_c, c.power_w) == (46.0, 130.4) and len(c.groups) == 3
    m = p("ascend/npu-smi-info-t-memory-i1-910.txt")
    assert m.hbm_capacity_mb == 32768 and m.npu_id == 1


def test_hccn_tool_outputs() -> None:
    ip = p("ascend/hccn-tool-i3-ip-g.txt")
    assert ip == HccnIp("10.20.11.24", "255.255.255.0")
    ping = p("ascend/hccn-tool-i3-ping-g.txt")
    assert isinstance(ping, HccnPing)
    assert (ping.device, ping.target, ping.transmitted, ping.received, ping.loss_pct) == (3, "10.20.11.16", 3, 3, 0.0)
    assert ping.rtt_ms == (0.137, 0.046, 0.058)
    st = p("ascend/hccn-tool-i3-status-g.txt")
    assert isinstance(st, HccnPortStatus)
    assert (st.netdev, st.speed_mbps, st.duplex, st.link_detected) == ("eth3", 200000, "Full", True)


# ------------------------------------------------------------------------------------- storage


def test_storage() -> None:
    md = p("storage/mdstat-raid0-2x-sata-md1-netdata-4010.txt")
    (arr,) = md.arrays
    assert (arr.name, arr.state, arr.level, arr.blocks, arr.degraded) == ("md1", "active", "raid0", 15627790336, False)
    assert [(m.device, m.index) for m in arr.members] == [("sdd", 1), ("sdb", 0)]
    assert "raid10" in md.personalities
    ls = p("storage/lsblk-json-8x-nvme-7t-md0-raid0.json")
    assert ls.nvme_disks == tuple(f"nvme{i}n1" for i in range(8)) and ls.raid_arrays == (("md0", "raid0"),)
    sda = next(d for d in ls.devices if d.name == "sda")
    assert sda.size == "1.7T" and [c.name for c in sda.children] == ["sda1", "sda2", "sda3"]
    nv = p("storage/nvme-list-aws-m5d-ebs-plus-1x-instance-store-old-cli.txt")
    assert [d.node for d in nv.devices] == ["/dev/nvme0n1", "/dev/nvme1n1"]
    assert nv.instance_store == ("/dev/nvme1n1",) and nv.devices[1].capacity_bytes == 300e9
    assert nv.devices[0].model == "Amazon Elastic Block Store" and nv.devices[0].serial == "vol04b63ac805c7c73a5"


# ------------------------------------------------------------------- formats without a fixture


def test_hccl_test_table_documented_format() -> None:
    # Shape from Huawei's HCCL Test docs ("data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): |
    # check_result:"); the numbers are made up for the test, there is no real capture in the fixtures.
    text = ("the minbytes is 8192, maxbytes is 1073741824, iters is 20, warmup_iters is 5\n"
            "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:\n"
            "8192              | 51.20          | 0.16000              | success\n"
            "1073741824        | 9000.00        | 119.30               | success\n")
    r = parse("hccl-test", text)
    assert [x.size_bytes for x in r.rows] == [8192, 1073741824]
    assert r.algbw_at_largest_gbs == 119.30 and r.failed_checks == 0
    with pytest.raises(ParseError, match="hccl_test"):
        parse("hccl-test", text.replace("| 119.30", "| fast"))


def test_hccn_link_and_health_one_liners() -> None:
    assert parse("hccn-tool", "link status: DOWN\n").status == "DOWN"
    assert parse("hccn-tool", "net health status: Success\n").status == "Success"


@pytest.mark.parametrize(("kind", "text", "tool"), [
    ("nvidia-smi-xml", "<foo/>", "nvidia-smi -q -x"),
    ("nvidia-smi-xml", "<nvidia_smi_log><gpu>", "nvidia-smi -q -x"),
    ("nvidia-smi-q", "hello world\n", "nvidia-smi -q"),
    ("nvidia-smi", "Mon Jan 20\n+---+\n", "nvidia-smi"),
    ("nvidia-smi-topo", "\tGPU0\tGPU1\nGPU0\t X \tNV4\n", "nvidia-smi topo -m"),
    ("nvidia-smi-topo", "\tGPU0\tGPU1\nGPU0\t X \tWARP\nGPU1\tWARP\t X \n", "nvidia-smi topo -m"),
    ("nvlink-status", "GPU 0: X (UUID: y)\n\t Link 0: fast\n", "nvidia-smi nvlink"),
    ("nccl-tests", "hello\n", "nccl-tests"),
    ("nccl-tests", "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                   "   8  2  float  sum  -1  1.0  0.00\n", "nccl-tests"),
    ("ibstat", "Port 1:\n", "ibstat"),
    ("ibv-devinfo", "transport: InfiniBand\n", "ibv_devinfo"),
    ("fi-info", "fabric: efa\n", "fi_info"),
    ("dcgm-diag", "nothing to see\n", "dcgmi diag"),
    ("npu-smi", "| not a table |\n", "npu-smi info"),
    ("hccn-tool", "something else\n", "hccn_tool"),
    ("mdstat", "md0 : active raid1 sda[0]\n", "/proc/mdstat"),
    ("lsblk-json", '{"blockdevices": [{"name": 1}]}', "lsblk --json"),
    ("lsblk-json", '{"blockdevices": [', "lsblk --json"),
    ("nvme-list", "Node SN\nnot a rule\n", "nvme list"),
    ("ibdev2netdev", "mlx5_0 -> ib0\n", "ibdev2netdev"),
])
def test_wrong_input_raises_parse_error_naming_the_tool(kind: str, text: str, tool: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(kind, text)
    assert info.value.tool == tool and str(info.value).startswith(tool) and not info.value.internal


def test_parse_error_names_line() -> None:
    with pytest.raises(ParseError) as info:
        parse("ibstat", "CA 'mlx5_0'\n\tCA type: MT4129\n\tBogus field: 1\n")
    assert info.value.line_no == 3 and info.value.line == "\tBogus field: 1"
    assert "line 3" in str(info.value) and "Bogus field" in str(info.value)


def test_unknown_kind_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no parser for kind"):
        parse("nope", "x")
