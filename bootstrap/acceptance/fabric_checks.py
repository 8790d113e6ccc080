"""Scale-out fabric checks: InfiniBand / RoCE ports (ibstat, ibv_devinfo), EFA devices (fi_info, or what
aws-ofi-nccl found), eRDMA devices, and the Ascend NPU NICs (hccn_tool)."""

from __future__ import annotations

from ..parsers.ascend import HccnLink, HccnNetHealth, HccnPing, HccnPortStatus
from .baselines import Baseline, FabricBaseline
from .evidence import Evidence
from .verdict import CheckResult, fail, listing, ok

__all__ = ["fabric_checks"]


def fabric_checks(b: Baseline, ev: Evidence) -> list[CheckResult]:
    """fabric-ports for the offering's fabric (and npu-nic on Ascend); nothing without a port count."""
    fab = b.fabric
    kind = fab.kind
    want = fab.ports
    rate = fab.port_gbps
    if kind in (None, "none") or want is None:
        return []
    if b.ascend:
        return _ascend_nics(fab, want, ev)
    if kind == "efa":
        return _efa(want, ev)
    if kind == "erdma":
        return _erdma(want, ev)
    layer = "InfiniBand" if kind == "infiniband" else "Ethernet"
    if ev.ibstat:
        rep = ev.ibstat[0]
        ports = [(d.name, pt) for d in rep.devices for pt in d.ports if pt.link_layer == layer]
        problems = [f"ibstat error: {e}" for e in rep.errors]
        if kind == "roce":
            # Front-end / storage NICs are Ethernet too: the fabric ports are the ones at the fabric rate.
            ports = [(n, pt) for n, pt in ports if rate is None or (pt.rate_gbps or 0) >= rate]
        for name, pt in ports:
            if pt.state != "Active":
                problems.append(f"{name} port {pt.number} is {pt.state}")
            elif pt.physical_state not in (None, "LinkUp"):
                problems.append(f"{name} port {pt.number} physical state is {pt.physical_state}")
            if kind == "infiniband" and rate is not None and pt.rate_gbps != rate:
                problems.append(f"{name} port {pt.number} rate is {pt.rate_gbps:g} Gb/s, expected {rate}")
        up = sum(1 for _n, pt in ports if pt.state == "Active")
        if len(ports) < want:
            at = f" at >= {rate} Gb/s" if kind == "roce" else ""
            problems.insert(0, f"found {len(ports)} {layer} ports{at}, expected {want}")
        expected = f"{want} x {rate} Gb/s {layer}"
        if problems:
            return [fail("fabric-ports", listing(problems), up, expected)]
        return [ok("fabric-ports", f"{len(ports)} {layer} ports Active at {rate} Gb/s (ibstat)", up, expected)]
    if ev.ibv:
        rep2 = ev.ibv[0]
        vports = [(d.hca_id, pt) for d in rep2.devices for pt in d.ports if pt.link_layer == layer]
        problems = [f"{n} port {pt.number} is {pt.state}" for n, pt in vports if pt.state != "PORT_ACTIVE"]
        if len(vports) < want:
            problems.insert(0, f"found {len(vports)} {layer} ports, expected {want}")
        active = sum(1 for _n, pt in vports if pt.state == "PORT_ACTIVE")
        note = " (ibv_devinfo shows no link rate; rate not checked)"
        if problems:
            return [fail("fabric-ports", listing(problems) + note, active, want)]
        return [ok("fabric-ports", f"{len(vports)} {layer} ports PORT_ACTIVE{note}", active, want)]
    return []


def _efa(want: int, ev: Evidence) -> list[CheckResult]:
    if ev.fi:
        rep = ev.fi[0]
        n = len(rep.efa_devices)
        cut = " (fi_info output ends mid-entry: it was cut)" if rep.last_entry_incomplete else ""
        if n != want:
            return [fail("fabric-ports", f"expected {want} EFA devices, fi_info shows {n}{cut}", n, want)]
        return [ok("fabric-ports", f"{n} EFA devices in fi_info{cut}", n, want)]
    nics = next((r.ofi_nics for r in ev.nccl if r.ofi_nics is not None), None)
    if nics is not None:
        prov = next((r.ofi_provider for r in ev.nccl if r.ofi_provider), None)
        if prov != "efa":
            return [fail("fabric-ports", f"aws-ofi-nccl selected provider {prov!r}, expected 'efa'", nics, want)]
        if nics != want:
            return [fail("fabric-ports", f"expected {want} EFA devices, aws-ofi-nccl found {nics}", nics, want)]
        return [ok("fabric-ports", f"aws-ofi-nccl found {nics} EFA NICs", nics, want)]
    return []


def _erdma(want: int, ev: Evidence) -> list[CheckResult]:
    if not ev.ibv:
        return []
    devs = [d for r in ev.ibv for d in r.devices if d.is_erdma]
    problems = [f"{d.hca_id} port {pt.number} is {pt.state}" for d in devs for pt in d.ports
                if pt.state != "PORT_ACTIVE"]
    if len(devs) < want:
        problems.insert(0, f"expected {want} eRDMA devices, found {len(devs)}")
    names = [d.hca_id for d in devs]
    if problems:
        return [fail("fabric-ports", listing(problems), names, want)]
    return [ok("fabric-ports", f"{len(devs)} eRDMA devices, ports PORT_ACTIVE", names, want)]


def _ascend_nics(fab: FabricBaseline, want: int, ev: Evidence) -> list[CheckResult]:
    out: list[CheckResult] = []
    rate = fab.port_gbps
    statuses = [h for h in ev.hccn if isinstance(h, HccnPortStatus)]
    if statuses:
        problems: list[str] = []
        if len(statuses) < want:
            problems.append(f"hccn_tool status for {len(statuses)} of {want} NPU NICs")
        for s in statuses:
            if s.link_detected is not True:
                problems.append(f"{s.netdev} link not detected")
            if rate is not None and s.speed_mbps != rate * 1000:
                problems.append(f"{s.netdev} speed is {s.speed_mbps} Mb/s, expected {rate * 1000}")
        up = sum(1 for s in statuses if s.link_detected)
        out.append(fail("fabric-ports", listing(problems), up, f"{want} x {rate} Gb/s") if problems else
                   ok("fabric-ports", f"{len(statuses)} NPU NICs up at {rate} Gb/s", up, f"{want} x {rate} Gb/s"))
    nic: list[str] = []
    seen = False
    for h in ev.hccn:
        if isinstance(h, HccnLink):
            seen = True
            if h.status.upper() != "UP":
                nic.append(f"NPU NIC link status is {h.status}")
        elif isinstance(h, HccnNetHealth):
            seen = True
            if h.status.lower() != "success":
                nic.append(f"NPU NIC net health is {h.status}")
        elif isinstance(h, HccnPing):
            seen = True
            if h.loss_pct > 0 or h.received < h.transmitted:
                nic.append(f"ping from NPU {h.device} to {h.target} lost {h.loss_pct:g}% "
                           f"({h.received}/{h.transmitted} received)")
    if seen:
        out.append(fail("npu-nic", listing(nic)) if nic else ok("npu-nic", "NPU NIC link, health and ping OK"))
    return out

