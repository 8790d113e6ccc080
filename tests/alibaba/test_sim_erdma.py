"""The simulated Alibaba host's eRDMA devices come from its simulated hardware (config ``fabric``), and the
emulator gives a host the ERIs it really attached: ibv_devinfo lists them once the erdma driver is loaded."""

from __future__ import annotations

import json
from pathlib import Path

from metalfleet.bootstrap.parsers import parse
from metalfleet.testing.alibaba import erdma_fabric
from tests.acceptance.test_sim_nccl import Sandbox


def _install_erdma(host: Sandbox) -> None:
    """What the bootstrap's erdma step leaves: the package installed (its installer), then the module loaded."""
    state = json.loads((host.root / "state.json").read_text())
    state["packages"]["erdma"] = "1.4.3-1"
    (host.root / "state.json").write_text(json.dumps(state))
    assert host.run("modprobe", "erdma").returncode == 0


def test_ibv_devinfo_lists_the_fabric_erdma_devices(tmp_path: Path) -> None:
    host = Sandbox(tmp_path / "h20", "alibaba-h20", efa=False)
    before = host.run("ibv_devinfo")
    assert before.returncode == 255 and "No IB devices found" in before.stderr  # erdma module not loaded yet
    _install_erdma(host)
    out = host.run("ibv_devinfo")
    report = parse("erdma", out.stdout)
    assert [d.hca_id for d in report.devices] == ["erdma_0", "erdma_1"]
    assert all(d.is_erdma and d.ports[0].state == "PORT_ACTIVE" for d in report.devices)

    one = Sandbox(tmp_path / "one", "alibaba-h20", {"fabric": {"kind": "erdma", "nics": 1, "nic_gbps": 85}},
                  efa=False)
    _install_erdma(one)
    assert [d.hca_id for d in parse("erdma", one.run("ibv_devinfo").stdout).devices] == ["erdma_0"]


def test_the_emulator_counts_the_eris_it_attached() -> None:
    both = [("HighPerformance", 0), ("HighPerformance", 1)]
    # 160 Gbit/s of eRDMA over its 2 ERIs (the family page; 170 is the VPC bandwidth)
    assert erdma_fabric("ecs.ebmgn8v.48xlarge", both) == {"kind": "erdma", "nics": 2, "nic_gbps": 80.0}
    assert erdma_fabric("ecs.ebmgn8v.48xlarge", [("HighPerformance", 0), ("Standard", 1)])["nics"] == 1
    assert erdma_fabric("ecs.ebmgn8v.48xlarge", [("HighPerformance", 0), ("HighPerformance", 7)])["nics"] == 1
    assert erdma_fabric("ecs.ebmgn7e.32xlarge", both)["nics"] == 0  # a type without ERI
