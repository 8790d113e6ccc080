"""Built-in steps. Each module holds the steps of one concern; profiles compose them.

================  ==========================================================================
module            steps
================  ==========================================================================
``gpu``           nvidia-driver, nvidia-fabricmanager, nvidia-persistenced, nvidia-peermem,
                  ascend-driver, ascend-cann
``fabric``        efa, aws-ofi-nccl, doca-ofed, rdma-settings, erdma, hccn
``reboot``        reboot (only when a step asked for it or the node says a reboot is required)
``nccl``          nccl, nccl-tests, nccl-config (tuning table: :mod:`.nccl_tuning`)
``storage``       storage-hot (NVMe RAID0), storage-warm (parallel FS), storage-cold (object store)
================  ==========================================================================
"""

from .common import ensure_line, installer_command, package_install
from .fabric import AwsOfiNccl, DocaOfed, Efa, Erdma, Hccn, RdmaSettings
from .gpu import AscendCann, AscendDriver, NvidiaDriver, NvidiaFabricManager, NvidiaPeermem, NvidiaPersistenced
from .nccl import Nccl, NcclConfig, NcclTests
from .reboot import RebootIfNeeded
from .storage import ColdTier, HotTier, WarmTier

ALL_STEPS = (
    NvidiaDriver, NvidiaFabricManager, NvidiaPersistenced, NvidiaPeermem, AscendDriver, AscendCann,
    Efa, AwsOfiNccl, DocaOfed, RdmaSettings, Erdma, Hccn, RebootIfNeeded, Nccl, NcclTests, NcclConfig,
    HotTier, WarmTier, ColdTier,
)

__all__ = [
    "ALL_STEPS",
    "AscendCann",
    "AscendDriver",
    "AwsOfiNccl",
    "ColdTier",
    "DocaOfed",
    "Efa",
    "Erdma",
    "Hccn",
    "HotTier",
    "Nccl",
    "NcclConfig",
    "NcclTests",
    "NvidiaDriver",
    "NvidiaFabricManager",
    "NvidiaPeermem",
    "NvidiaPersistenced",
    "RdmaSettings",
    "RebootIfNeeded",
    "WarmTier",
    "ensure_line",
    "installer_command",
    "package_install",
]
