"""`metalfleet bootstrap INVENTORY` as a user runs it, against real sshd test hosts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from metalfleet.testing.hosts.harness import HostFleet, start_hosts

pytestmark = pytest.mark.requires_root("simulated hosts (sshd, the mfnode user)")


@pytest.fixture(scope="module")
def fleet() -> Iterator[HostFleet]:
    with start_hosts(2, "p5", config={"reboot_down_seconds": 1.0}) as f:
        yield f


def _inventory(fleet: HostFleet, path: Path) -> Path:
    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": "mfnode", "key": str(fleet.client_key),
              "provider": "aws", "offering": "p5.48xlarge", "fs_root": str(h.root), "host_keys": [h.host_key]}
             for h in fleet]
    path.write_text(yaml.safe_dump({"hosts": hosts, "known_hosts": str(fleet.known_hosts)}))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_dry_run_then_run_then_noop(fleet: HostFleet, tmp_path: Path) -> None:
    inv = _inventory(fleet, tmp_path / "hosts.yaml")
    dry = _cli("bootstrap", str(inv), "--dry-run", "--profile", "nccl", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["dry_run"] is True
    planned_cmds = {h["host"]: [c for s in h["steps"] for c in s["commands"]] for h in planned["hosts"]}
    assert all(planned_cmds.values()), "a fresh host must have work planned"

    real = _cli("bootstrap", str(inv), "--profile", "nccl", "--json")
    assert real.returncode == 0, real.stderr
    done = json.loads(real.stdout)
    done_cmds = {h["host"]: [c for s in h["steps"] for c in s["commands"]] for h in done["hosts"]}
    assert done_cmds == planned_cmds, "the dry run must show exactly what the real run does"

    again = json.loads(_cli("bootstrap", str(inv), "--profile", "nccl", "--json").stdout)
    assert {h["status"] for h in again["hosts"]} == {"unchanged"}


def test_limit_selects_one_host(fleet: HostFleet, tmp_path: Path) -> None:
    inv = _inventory(fleet, tmp_path / "hosts.yaml")
    out = _cli("bootstrap", str(inv), "--dry-run", "--limit", fleet[1].name, "--json")
    assert out.returncode == 0, out.stderr
    assert [h["host"] for h in json.loads(out.stdout)["hosts"]] == [fleet[1].name]


def test_bad_inventory_is_refused_naming_the_field(tmp_path: Path) -> None:
    inv = tmp_path / "bad.yaml"
    inv.write_text("hosts:\n  - name: a\n    adress: 127.0.0.9\n")
    out = _cli("bootstrap", str(inv))
    assert out.returncode == 2
    assert "adress" in out.stderr
