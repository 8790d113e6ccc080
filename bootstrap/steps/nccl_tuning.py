"""NCCL / libfabric settings per fabric, each with the one-line reason it is there.

This table is the single source for ``/etc/nccl.conf``, the environment file, and the reference
``bootstrap/NCCL_TUNING.md`` (regenerate with ``python -m metalfleet.bootstrap.steps.nccl_tuning``;
a test keeps the two in sync). Every value can be overridden per cluster with
``bootstrap.overrides.nccl-config.env``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from metalfleet.providers.models import Fabric

__all__ = ["TUNING", "Tuning", "render_markdown", "tuning_for"]


@dataclass(frozen=True)
class Tuning:
    name: str
    value: str
    fabrics: tuple[Fabric, ...]
    why: str

    @property
    def nccl_conf(self) -> bool:
        """NCCL reads NCCL_* keys from /etc/nccl.conf; everything else must be in the environment."""
        return self.name.startswith("NCCL_")


_ALL = (Fabric.EFA, Fabric.INFINIBAND, Fabric.ROCE, Fabric.ERDMA, Fabric.NONE)
_RDMA_VERBS = (Fabric.INFINIBAND, Fabric.ROCE)

TUNING: tuple[Tuning, ...] = (
    Tuning("NCCL_DEBUG", "WARN", _ALL,
           "Quiet unless something is wrong; set INFO for one run when diagnosing topology or transport choice."),
    Tuning("NCCL_SOCKET_IFNAME", "^lo,docker,veth,virbr", _ALL,
           "Bootstrap/OOB traffic must not pick loopback or container bridges (a '^' list excludes by prefix)."),
    # AWS EFA
    Tuning("FI_PROVIDER", "efa", (Fabric.EFA,),
           "Force libfabric's EFA provider so a broken EFA setup fails loudly instead of falling back to TCP."),
    Tuning("FI_EFA_USE_DEVICE_RDMA", "1", (Fabric.EFA,),
           "Use EFA RDMA read/write (p4d/p5 and later) for GPUDirect; without it data bounces via host memory."),
    Tuning("FI_EFA_FORK_SAFE", "1", (Fabric.EFA,),
           "Data loaders fork; this keeps libfabric's registered memory valid in children (no silent corruption)."),
    # InfiniBand / RoCE (ConnectX)
    Tuning("NCCL_IB_HCA", "mlx5", _RDMA_VERBS,
           "Only the ConnectX HCAs carry GPU traffic (filled from ibstat: the ports on the cluster fabric)."),
    Tuning("NCCL_IB_GID_INDEX", "3", (Fabric.ROCE,),
           "RoCE v2 with an IPv4-mapped GID is index 3 in the default ConnectX GID table; InfiniBand needs none."),
    Tuning("NCCL_IB_TC", "106", (Fabric.ROCE,),
           "Traffic class of the lossless (PFC/ECN) queue most RoCE fabrics reserve; match your switch config."),
    Tuning("NCCL_IB_QPS_PER_CONNECTION", "4", (Fabric.ROCE,),
           "More queue pairs per connection spread flows over ECMP paths of a RoCE fabric."),
    # Alibaba eRDMA
    Tuning("NCCL_IB_HCA", "erdma", (Fabric.ERDMA,),
           "eRDMA devices appear as verbs devices erdma_N; NCCL's IB transport drives them."),
    Tuning("NCCL_IB_GID_INDEX", "1", (Fabric.ERDMA,),
           "eRDMA's RoCE v2 GID sits at index 1 (index 0 is the link-local one); check `show_gids` on your image."),
    # TCP only
    Tuning("NCCL_MIN_NCHANNELS", "4", (Fabric.NONE,),
           "Over TCP one channel cannot fill the NIC; at least 4 channels run transfers in parallel."),
    Tuning("NCCL_NSOCKS_PERTHREAD", "4", (Fabric.NONE,),
           "More TCP sockets per helper thread raise socket-transport throughput (threads x socks <= 64)."),
    Tuning("NCCL_SOCKET_NTHREADS", "4", (Fabric.NONE,),
           "Helper threads per connection for the socket transport; 4 x 4 sockets suits 50-100 Gbit NICs."),
)


def tuning_for(fabric: Fabric) -> list[Tuning]:
    """Entries for ``fabric``, later entries of the same name replacing earlier ones."""
    chosen: dict[str, Tuning] = {}
    for t in TUNING:
        if fabric in t.fabrics:
            chosen[t.name] = t
    return list(chosen.values())


def render_markdown() -> str:
    lines = [
        "# NCCL tuning written by `nccl-config`",
        "",
        "Generated from `bootstrap/steps/nccl_tuning.py` (`python -m metalfleet.bootstrap.steps.nccl_tuning`).",
        "NCCL_* values go to `/etc/nccl.conf` and the environment file; other variables (libfabric `FI_*`) only",
        "to the environment file `/etc/profile.d/metalfleet-nccl.sh`. Override any value per cluster:",
        "",
        "```yaml",
        "bootstrap:",
        "  overrides:",
        "    nccl-config:",
        "      env: {NCCL_IB_TC: \"41\", NCCL_DEBUG: INFO}",
        "```",
        "",
        "`NCCL_IB_HCA` on InfiniBand/RoCE is computed per node from `ibstat` (the HCAs whose ports are on",
        "the fabric's link layer); the value below is the fallback before the HCAs are visible.",
        "",
    ]
    for fabric in (Fabric.EFA, Fabric.INFINIBAND, Fabric.ROCE, Fabric.ERDMA, Fabric.NONE):
        lines += [f"## {fabric.value}", "", "| variable | value | why |", "| --- | --- | --- |"]
        for t in tuning_for(fabric):
            lines.append(f"| `{t.name}` | `{t.value}` | {t.why} |")
        lines.append("")
    lines += ["Ascend (HCCS) nodes use HCCL, not NCCL: the `hccn` step sets NPU NIC addresses instead.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    out = Path(__file__).resolve().parent.parent / "NCCL_TUNING.md"
    if len(sys.argv) > 1 and sys.argv[1] == "--stdout":
        sys.stdout.write(render_markdown())
    else:
        out.write_text(render_markdown())
        print(f"wrote {out}")
