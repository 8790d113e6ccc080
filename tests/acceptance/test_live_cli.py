"""``metalfleet verify INVENTORY|SPEC`` against sshd hosts: exit codes, table, reports, saved outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.bootstrap.acceptance.quarantine import ACCEPTANCE_TAG, REASON_TAG, load_quarantine
from metalfleet.providers.fake import FakeDriver
from metalfleet.providers.fleet import node_specs_for, order_cluster
from metalfleet.providers.spec import parse_spec
from metalfleet.stacks.cli import main
from metalfleet.testing.hosts.harness import HostFleet

from ._sim import IB, P5, fleet_starter

REPO = Path(__file__).resolve().parents[2]
SEVEN_REASON = "gpu-count: expected 8 GPUs, found 7 (nvidia-smi -q)"
#: A node with 7 of 8 GPUs: the count fails, and all_reduce_perf -g 8 fails on the missing device.
SEVEN_FAILS = ["gpu-count", "nccl-correctness", "allreduce-busbw"]


@pytest.fixture
def start() -> Iterator[Callable[..., HostFleet]]:
    yield from fleet_starter()


def write_inventory(fleet: HostFleet, path: Path) -> Path:
    doc = {"defaults": {"user": "mfnode", "key": str(fleet.client_key), "provider": "aws",
                        "offering": "p5.48xlarge"},
           "known_hosts": str(fleet.known_hosts),
           "hosts": [{"name": h.name, "address": h.address, "fs_root": str(h.root)} for h in fleet.hosts]}
    path.write_text(yaml.safe_dump(doc))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", "verify", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def test_verify_inventory_exit_codes_table_reports_and_saved_outputs(start: Any, tmp_path: Path) -> None:
    fleet = start(2, lambda i: {**P5, "gpu": {"count": 7}} if i == 1 else P5)
    inv = write_inventory(fleet, tmp_path / "hosts.yaml")
    junit, md, save, qfile = tmp_path / "r.xml", tmp_path / "r.md", tmp_path / "saved", tmp_path / "q.yaml"

    res = cli(str(inv), "--junit", str(junit), "--markdown", str(md), "--save-dir", str(save),
              "--quarantine-file", str(qfile))
    assert res.returncode == 1, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("1 of 2 node(s) passed acceptance")
    rows = {ln.split()[0]: ln for ln in lines[3:lines.index("")]}
    assert rows["node0"].rstrip().endswith("PASS") and rows["node1"].rstrip().endswith(f"FAIL: {SEVEN_REASON}")
    checks = dict(ln.split(": ", 1) for ln in lines[lines.index("checks:") + 1:])
    node1 = dict(kv.split("=") for kv in checks["node1"].split())
    assert [c for c, s in node1.items() if s == "fail"] == SEVEN_FAILS
    assert "node1" in res.stderr and "== fail" in res.stderr  # progress, one line per host, on stderr
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().iter("testsuite")}
    assert suites["node1 (p5.48xlarge)"].get("failures") == str(len(SEVEN_FAILS))
    assert suites["node0 (p5.48xlarge)"].get("failures") == "0"
    assert suites["node0 (p5.48xlarge)"].get("skipped") == "2"  # nvlink-links, storage-nvme: not judged
    assert "1 of 2 nodes passed." in md.read_text()
    assert (save / "node1" / "nvidia-smi-q.txt").is_file() and (save / "node0" / "all_reduce_perf.txt").is_file()
    assert list(load_quarantine(qfile)) == ["node1"]

    # The saved folder re-judges offline with the same result.
    assert main(["verify", "--from-dir", str(save / "node1"), "--offering", "p5.48xlarge"]) == 1
    assert main(["verify", "--from-dir", str(save / "node0"), "--offering", "p5.48xlarge"]) == 0

    ok = cli(str(inv), "--limit", "node0", "--json", "--quarantine-file", str(qfile))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["passed"] is True and [n["node"] for n in doc["nodes"]] == ["node0"]
    outcome = {c["name"]: c["status"] for c in doc["nodes"][0]["checks"]}
    assert [c for c, s in outcome.items() if s != "pass"] == ["nvlink-links", "storage-nvme"]
    assert {outcome[c] for c in ("fabric-ports", "nccl-transport", "allreduce-busbw")} == {"pass"}
    assert list(load_quarantine(qfile)) == ["node1"]  # a host not checked this time stays listed

    bad = cli(str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2 and "cannot read" in bad.stderr


def test_verify_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "a", "address": "127.0.0.1", "offering": "p5.48xlarge",
                                              "provider": "aws"}]}))
    assert main(["verify"]) == 2
    assert "needs INVENTORY|SPEC" in capsys.readouterr().err
    assert main(["verify", str(inv), "--from-dir", str(tmp_path)]) == 2
    assert main(["verify", "--from-dir", str(tmp_path)]) == 2
    assert "--from-dir needs --offering" in capsys.readouterr().err
    assert main(["verify", str(inv), "--limit", "nothing-*"]) == 2
    assert "matches no host" in capsys.readouterr().err
    assert main(["verify", str(inv), "--offering", "p99.nope"]) == 2
    assert "no acceptance baseline" in capsys.readouterr().err
    other = tmp_path / "other.yaml"
    other.write_text("just: text\n")
    assert main(["verify", str(other)]) == 2
    assert "neither an inventory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["verify", str(inv), "--dcgm", "3"])
    assert info.value.code == 2


def test_verify_spec_checks_the_providers_live_nodes_and_tags_failures(start: Any, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fleet = start(2, lambda i: {**IB, "gpu": {"count": 7}} if i == 1 else IB)
    state = tmp_path / "cloud.json"
    doc = {"name": "acc", "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 2,
           "image": "img-1", "acceptance": {"threshold": 0.8},
           "ssh": {"user": "mfnode", "private_key": str(fleet.client_key), "known_hosts": str(fleet.known_hosts)}}
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(yaml.safe_dump(doc))
    spec = parse_spec(doc)
    driver = FakeDriver(state_path=state, addresses=[h.address for h in fleet.hosts])
    n0, n1 = order_cluster(driver, node_specs_for(driver, spec))

    rc = main(["verify", str(spec_file), "--driver-config", f"state_path={state}", "--tag-failed", "--json"])
    assert rc == 1
    out = json.loads(capsys.readouterr().out)
    nodes = {n["node"]: n for n in out["nodes"] if n["node"].startswith("acc-")}
    assert nodes["acc-0"]["passed"] and nodes["acc-1"]["failures"] == SEVEN_FAILS
    outcome = {c["name"]: c["status"] for c in nodes["acc-0"]["checks"]}
    assert [c for c, s in outcome.items() if s != "pass"] == ["nvlink-links", "storage-nvme"]
    assert outcome["nccl-transport"] == outcome["fabric-ports"] == "pass"  # NET/IB on 8 Active 400G ports
    assert nodes["acc-0"]["threshold"] == 0.8  # the spec's acceptance.threshold
    tags = FakeDriver(state_path=state).get(n1.id).tags
    assert tags[ACCEPTANCE_TAG] == "quarantined" and tags[REASON_TAG] == SEVEN_REASON
    assert ACCEPTANCE_TAG not in FakeDriver(state_path=state).get(n0.id).tags

    assert main(["verify", str(spec_file), "--driver-config", f"state_path={state}", "--limit", "acc-0"]) == 0
    assert "1 of 1 node(s) passed" in capsys.readouterr().out

    empty = tmp_path / "empty.json"
    assert main(["verify", str(spec_file), "--driver-config", f"state_path={empty}"]) == 2
    assert "no running node" in capsys.readouterr().err
