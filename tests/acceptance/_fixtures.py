"""Where the captured fixtures live (tests/support/fixtures, provenance in its SOURCES.md) and which parser
kind each one is."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "support" / "fixtures"

#: Every fixture file -> the parser kind that must read it. A fixture missing here fails the walk test.
FIXTURE_KINDS: dict[str, str] = {
    "ascend/hccn-tool-i3-ip-g.txt": "hccn-tool",
    "ascend/hccn-tool-i3-ping-g.txt": "hccn-tool",
    "ascend/hccn-tool-i3-status-g.txt": "hccn-tool",
    "ascend/npu-smi-info-8x-910b3-device-table.txt": "npu-smi",
    "ascend/npu-smi-info-t-common-i1-910.txt": "npu-smi-detail",
    "ascend/npu-smi-info-t-memory-i1-910.txt": "npu-smi-detail",
    "ascend/npu-smi-info-t-topo-8x-910b3-hccs.txt": "npu-smi-topo",
    "dcgm/p4de-8xa100-dcgmi-diag-r2-nvlinks12.txt": "dcgm-diag",
    "efa/fi_info-efa-multi-rdmap-head-n20-truncated.txt": "fi-info",
    "erdma/ibv_devinfo-alibaba-h20-erdma0-first-device-only.txt": "erdma",
    "infiniband/ibdev2netdev-connectx3-mlx4-ipoib.txt": "ibdev2netdev",
    "infiniband/ibstat-a100-9x-mt4126-hdr200.txt": "ibstat",
    "infiniband/ibstat-a100-azure-8x-cx6vf-hdr-ibpanic-error.txt": "ibstat",
    "infiniband/ibstat-connectx3-mlx4-dualport-fdr56.txt": "ibstat",
    "infiniband/ibstat-h100-8x-cx7-ib400-plus-bf3-eth.txt": "ibstat",
    "infiniband/ibstat-h100-roce-8x-cx7-4x-cx6dx-all-eth.txt": "ibstat",
    "infiniband/ibv_devinfo-2x-connectx3-mlx4-dualport-fdr.txt": "ibv-devinfo",
    "nccl-tests/10node-80xh100-all_reduce-nccltests2.17.8-maxbytes-reduced.txt": "nccl-tests",
    "nccl-tests/1x-rtx5090-alltoall_perf-single-gpu-busbw0.txt": "nccl-tests",
    "nccl-tests/2node-2xh100-alltoall-sendrecv-nccltests2.17.6.txt": "nccl-tests",
    "nccl-tests/4x-dgx-a100-slurm-oldformat-table.txt": "nccl-tests",
    "nccl-tests/dgx-a100-2node-8xhdr-k8s-oldformat-error-col-table.txt": "nccl-tests",
    "nccl-tests/gb200-nvl72-single-rack-72gpu-tail.txt": "nccl-tests",
    "nccl-tests/p5-2node-16xh100-efa-ofi-nccl2.22-mpirun-tagged-debug-info.txt": "nccl-tests",
    "nccl-tests/p5-2node-efa-srun-labelled-size-table.txt": "nccl-tests",
    "nccl-tests/p5-aws-batch-mpirun-tagged-table-tail.txt": "nccl-tests",
    "nccl-tests/v100-roce-2node-mpirun-without-mpi-build-4x-nranks1-busbw0-trace.txt": "nccl-tests",
    "nvidia-smi/1x-a10-pcie-nvidia-smi-q-drv535.129.txt": "nvidia-smi-q",
    "nvidia-smi/2x-h100-pcie-nvlink-bridge-default-table-drv555.txt": "nvidia-smi",
    "nvidia-smi/8x-a100-azure-nvidia-smi-q-d-page_retirement.txt": "nvidia-smi-q",
    "nvidia-smi/8x-h100-sxm-default-table-drv550.txt": "nvidia-smi",
    "nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt": "nvidia-smi-q",
    "nvidia-smi/8x-rtx4090-pcie-nvidia-smi-q.txt": "nvidia-smi-q",
    "nvidia-smi/8x-v100s-pcie-32gb-vm-q-x.xml": "nvidia-smi-xml",
    "nvidia-smi/a100-sxm4-80gb-mig-q-x-one-gpu.xml": "nvidia-smi-xml",
    "nvidia-smi/a10g-pcie-aws-g5-q-x.xml": "nvidia-smi-xml",
    "nvidia-smi/h800-8gpu-default-table-driver525-busy.txt": "nvidia-smi",
    "nvidia-smi/h800-sxm-8gpu-nvidia-smi-q-i0.txt": "nvidia-smi-q",
    "nvidia-smi/rtx4000-sff-ada-pcie-q-x-v13-schema.xml": "nvidia-smi-xml",
    "nvlink/2x-a100-pcie-no-nvlink-nvlink-s-all-inactive.txt": "nvlink-status",
    "nvlink/2x-h100-pcie-bridge-nvlink-s-some-inactive.txt": "nvlink-status",
    "nvlink/2x-h100-pcie-nvlink-R-remote.txt": "nvlink-remote",
    "nvlink/8x-a100-sxm4-80gb-nvlink-status.txt": "nvlink-status",
    "nvlink/a10-pcie-nvlink-status-empty.txt": "nvlink-status",
    "nvlink/a100-sxm4-80gb-azure-nvlink-s-gpu7-tabs.txt": "nvlink-status",
    "nvlink/h800-gpu0-nvlink-gt-d-throughput.txt": "nvlink-throughput",
    "storage/lsblk-json-8x-nvme-7t-md0-raid0.json": "lsblk-json",
    "storage/mdstat-raid0-2x-sata-md1-netdata-4010.txt": "mdstat",
    "storage/nvme-list-aws-m5d-ebs-plus-1x-instance-store-old-cli.txt": "nvme-list",
    "topo/2x-v100-sxm2-no-nvlink-4x-cx6-roce-tabs-rocep-names.txt": "nvidia-smi-topo",
    "topo/8x-a800-sxm4-nv8-4nic-mlx5.txt": "nvidia-smi-topo",
    "topo/8x-h100-nv18-no-nic-legend-omitted.txt": "nvidia-smi-topo",
    "topo/pcie-2x-gtx1080ti-desktop-phb.txt": "nvidia-smi-topo",
    "cpu/lscpu-json-flat-2vcpu-amd-epyc-kvm-util-linux-2.38.1.json": "lscpu-json",
    "cpu/lscpu-json-hierarchic-2vcpu-amd-epyc-kvm-util-linux-2.38.1.json": "lscpu-json",
    "cpu/lscpu-text-flat-2vcpu-amd-epyc-kvm-util-linux-2.38.1.txt": "lscpu",
    "cpu/lscpu-text-hierarchic-2vcpu-amd-epyc-kvm-util-linux-2.38.1.txt": "lscpu",
    "cpu/proc-meminfo-24gib-kvm-debian12.txt": "meminfo",
}

#: Documentation files in the fixtures folder that are not command output.
NOT_FIXTURES = {"SOURCES.md"}
#: Folders of the fixtures folder that hold no command output (wire/: what cloud SDKs sent, for the emulators;
#: ipmi_sim/: the simulated BMCs' configuration).
NOT_OUTPUT_DIRS = {"wire", "ipmi_sim"}


def fixture_files() -> list[str]:
    """Relative paths of every file under the fixtures folder (documentation excluded)."""
    if not FIXTURES.is_dir():
        return []
    return sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.rglob("*")
                  if p.is_file() and p.name not in NOT_FIXTURES
                  and p.relative_to(FIXTURES).parts[0] not in NOT_OUTPUT_DIRS)


def read_fixture(rel: str) -> str:
    path = FIXTURES / rel
    if not path.is_file():
        pytest.fail(f"fixture {rel} is missing from {FIXTURES}", pytrace=False)
    return path.read_bytes().decode("utf-8", errors="replace")


def fixtures_of(kind: str) -> list[str]:
    return [rel for rel, k in sorted(FIXTURE_KINDS.items()) if k == kind]

