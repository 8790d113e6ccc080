"""Simulated GPU hosts for the live acceptance tests: what each one's shims print, and its faults.

nvidia-smi, topo and ibstat print real captures from tests/support/fixtures, a fault being one documented
change to them (the shim's ``edits`` and ``gpu.count``); nccl-tests and fi_info answer from the
host's simulated hardware and the actual arguments (tests/support/hosts/shims/mfshim.py), a fault being a
change to that hardware (``nccl.busbw_scale``, ``nccl.net``). A run across nodes answers from every member's
hardware and the fleet's world file, so the fabric has faults of its own: a slow rail
(``fabric.nic_scale``), a link that drops every k-th job (``fabric.flap``), a switch that slows groups of its
nodes (``HostFleet.set_switches``); the mfshim docstring lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from metalfleet.bootstrap.inventory import Inventory
from metalfleet.testing.hosts.harness import HostFleet, SimHost, start_hosts

from ..prereq import require_root
from ._fixtures import read_fixture

H100_Q = "nvidia-smi/8x-h100-sxm-nvidia-smi-q-drv535.161.txt"
H100_TOPO = "topo/8x-h100-nv18-no-nic-legend-omitted.txt"
IB_STAT = "infiniband/ibstat-h100-8x-cx7-ib400-plus-bf3-eth.txt"

#: What a bootstrapped node has: the driver package (the nvidia module is loaded by ``make_ready``).
_DRIVER = {"preinstalled": {"nvidia-driver-550": "550.90.07-0ubuntu1"}}

#: A healthy p5.48xlarge: 8x H100 -q, NV18 topology, 32 EFA devices of 100 Gb/s (the profile's
#: ``fabric``: fi_info lists them, nccl-tests runs over them through aws-ofi-nccl). No nvlink -s
#: capture exists for H100 SXM, so that probe fails (no fixture) and nvlink-links is skipped.
P5 = {**_DRIVER, "fixtures": {"nvidia-smi-q": H100_Q, "topo": H100_TOPO}}

#: A healthy fake.8xh100 (InfiniBand 8 x 400G): the same GPUs, 8 Active 400G IB ports (plus a BF3
#: Ethernet port the gate ignores); nccl-tests runs over NET/IB.
IB = {**_DRIVER, "fixtures": {"nvidia-smi-q": H100_Q, "topo": H100_TOPO, "ibstat": IB_STAT},
      "fabric": {"kind": "infiniband", "nics": 8, "nic_gbps": 400}}


def topo_link_edits(a: int = 0, b: int = 3, link: str = "SYS") -> list[list[str]]:
    """Shim edits that make GPU<a><->GPU<b> a ``link`` path in the NV18 capture (both cells)."""
    rows = read_fixture(H100_TOPO).splitlines()

    def cell(row: int, col: int) -> list[str]:
        line = rows[row + 1]
        cells = line.split()
        start = 0
        for i in range(col + 2):  # the row label, then columns 0..col
            start = line.index(cells[i], start) + (len(cells[i]) if i < col + 1 else 0)
        return [line[:start + 4], line[:start] + link.ljust(4)]

    return [cell(a, b), cell(b, a)]


#: One Down port on the first CA (mlx5_0).
IB_PORT_DOWN = {"edits": {"ibstat": [["State: Active", "State: Down", 1],
                                     ["Physical state: LinkUp", "Physical state: Polling", 1]]}}
#: NCCL finds no working RDMA path and falls back to sockets ("Using network Socket").
NET_SOCKET = {"nccl": {"net": "socket"}}


def make_ready(hosts: Sequence[SimHost]) -> None:
    """What a finished bootstrap leaves for the probes: the nvidia module loaded and, on an EFA host, the
    EFA installer's software (fi_info, the efa module, the aws-ofi-nccl plugin NCCL needs for NET/OFI)."""
    for sim in hosts:
        efa = (sim.config().get("fabric") or {}).get("kind") == "efa"
        with sim.edit_state() as st:
            for module in ("nvidia", *(("efa",) if efa else ())):
                if module not in st["modules"]:
                    st["modules"].append(module)
            if efa:
                st["installed"]["efa"] = "1.33.0"
        if efa:
            plugin = sim.file("/opt/amazon/ofi-nccl/lib/libnccl-net.so")
            plugin.parent.mkdir(parents=True, exist_ok=True)
            plugin.write_bytes(b"")


def inventory(fleet: HostFleet, hosts: Sequence[SimHost] | None = None, **overrides: Any) -> Inventory:
    """The fleet's hosts with short connect retries (an unreachable host must not stall a test)."""
    chosen = list(hosts if hosts is not None else fleet.hosts)
    inv = fleet.inventory(hosts=chosen, **overrides)
    ssh = fleet.ssh_options(pinned_keys={h.address: [h.host_key] for h in chosen}, connect_attempts=1,
                            connect_deadline=5)
    return Inventory(inv.hosts, ssh)


def requires_sim() -> None:
    require_root("simulated hosts (a real sshd per host on 127.x addresses, logging in as user mfnode)")


def fleet_starter() -> Iterator[Callable[..., HostFleet]]:
    """start(n, config, profile="p5") -> a ready HostFleet; all stopped at the end."""
    requires_sim()
    fleets: list[HostFleet] = []

    def start(n: int, config: Any, profile: str = "p5") -> HostFleet:
        fleet = start_hosts(n, profile, config=config)
        fleets.append(fleet)
        make_ready(fleet.hosts)
        return fleet

    try:
        yield start
    finally:
        for f in fleets:
            f.stop()


def table_statuses(table: str) -> dict[str, dict[str, str]]:
    """node -> {check: status} from the "checks:" part of an acceptance table (``format_table``; the stacks'
    ``acceptance`` output), for every table in ``table`` (one per acceptance round)."""
    out: dict[str, dict[str, str]] = {}
    section = False
    for line in table.splitlines():
        if line == "checks:":
            section = True
        elif not line.strip():
            section = False
        elif section:
            node, _, rest = line.partition(": ")
            out[node] = dict(kv.split("=", 1) for kv in rest.split())
    return out
