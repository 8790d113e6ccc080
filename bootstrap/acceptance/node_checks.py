"""Node health checks beside the GPUs: DCGM diagnostics, md RAID arrays, local NVMe disks."""

from __future__ import annotations

from .baselines import Baseline
from .evidence import Evidence
from .verdict import CheckResult, fail, listing, ok, plural, warn

__all__ = ["dcgm_checks", "storage_checks"]


def dcgm_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """dcgm-diag: fails on a failed test, warns on warnings (whatever the baseline: no value to compare with)."""
    if not ev.dcgm:
        return []
    rep = ev.dcgm[0]
    if not rep.tests:
        return [fail("dcgm-diag", f"dcgmi diag did not run: {listing(list(rep.messages))}")]
    if rep.failed:
        detail = [f"{t.name} ({'; '.join(t.results + t.details)})" for t in rep.tests if t.status == "Fail"]
        return [fail("dcgm-diag", f"dcgmi diag failed: {listing(detail)}", list(rep.failed))]
    if rep.warned:
        return [warn("dcgm-diag", f"dcgmi diag warnings: {', '.join(rep.warned)}", list(rep.warned))]
    return [ok("dcgm-diag", f"dcgmi diag: all {len(rep.tests)} tests passed")]


def storage_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """storage-raid (md arrays not degraded) and storage-nvme (local NVMe disk count)."""
    out: list[CheckResult] = []
    if ev.mdstat:
        arrays = [a for r in ev.mdstat for a in r.arrays]
        bad = [f"{a.name} is degraded ({a.status_map or a.state})" for a in arrays if a.degraded]
        syncing = [f"{a.name} {a.sync_action} at {a.sync_progress_pct}%" for a in arrays if a.sync_action]
        if bad:
            out.append(fail("storage-raid", listing(bad)))
        elif syncing:
            out.append(warn("storage-raid", listing(syncing)))
        else:
            out.append(ok("storage-raid", f"{plural(len(arrays), 'md array')}, none degraded"))
    want = b.storage.nvme_count
    if want:
        found: int | None = None
        src = ""
        if ev.nvme:
            store = ev.nvme[0].instance_store
            found = len(store) if b.provider == "aws" else len(ev.nvme[0].devices)
            src = "nvme list" + (" (instance storage)" if b.provider == "aws" else "")
        elif ev.lsblk:
            found, src = len(ev.lsblk[0].nvme_disks), "lsblk"
        if found is not None:
            out.append(ok("storage-nvme", f"{found} local NVMe disks ({src})", found, want) if found >= want else
                       fail("storage-nvme", f"expected {want} local NVMe disks, found {found} ({src})", found, want))
    return out

