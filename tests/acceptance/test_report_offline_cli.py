"""Reports (JSON, JUnit, Markdown), offline parse/verify helpers and the argparse subcommands."""

from __future__ import annotations

import argparse
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap.acceptance import judge
from metalfleet.bootstrap.acceptance.offline import kind_for_path, parse_file, verify_dir
from metalfleet.bootstrap.acceptance.report import to_json, to_junit, to_markdown
from metalfleet.bootstrap.parsers import ParseError, parse
from metalfleet.stacks.cli.verify import add_commands as add_cli_commands

from ._fixtures import FIXTURE_KINDS, FIXTURES, read_fixture

P5_FILES = {  # conventional names -> fixture
    "nvidia-smi.txt": "nvidia-smi/8x-h100-sxm-default-table-drv550.txt",
    "topo.txt": "topo/8x-h100-nv18-no-nic-legend-omitted.txt",
    "nccl-all_reduce.txt": "nccl-tests/p5-2node-16xh100-efa-ofi-nccl2.22-mpirun-tagged-debug-info.txt",
}


def node_dir(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    d = tmp_path / name
    d.mkdir()
    for target, rel in files.items():
        shutil.copyfile(FIXTURES / rel, d / target)
    return d


def two_verdicts() -> list[Any]:
    good = judge("p5.48xlarge", {k: parse(kind_for_path(n) or "", read_fixture(v)) for n, v in P5_FILES.items()
                                 for k in [kind_for_path(n) or ""]}, node="good-node")
    bad = judge("p5.48xlarge", {"nvidia-smi-q": parse("nvidia-smi-q",
                                                      read_fixture("nvidia-smi/1x-a10-pcie-nvidia-smi-q-drv535.129.txt"))},
                node="bad|node")
    assert good.passed and not bad.passed
    return [good, bad]


# ------------------------------------------------------------------------------------ reports


def test_junit_report_parses_and_counts_failures() -> None:
    verdicts = two_verdicts()
    root = ET.fromstring(to_junit(verdicts))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["good-node (p5.48xlarge)", "bad|node (p5.48xlarge)"]
    cases = root.findall("testsuite/testcase")
    assert len(cases) == sum(len(v.checks) for v in verdicts) == int(root.get("tests", "-1"))
    failures = root.findall("testsuite/testcase/failure")
    n_fail = sum(1 for v in verdicts for c in v.checks if c.status == "fail")
    assert len(failures) == n_fail == int(root.get("failures", "-1")) > 0
    assert suites[0].get("failures") == "0" and int(suites[1].get("failures", "0")) == n_fail
    model = next(c for c in suites[1].findall("testcase") if c.get("name") == "gpu-model")
    fail = model.find("failure")
    assert fail is not None and fail.get("message") == "GPU0 is 'NVIDIA A10', expected a name matching " \
                                                      "'H100 80GB HBM3' (H100)"
    assert "measured: [\"NVIDIA A10\"]" in (fail.text or "")
    assert {c.get("classname") for c in suites[0].findall("testcase")} == {"acceptance.good-node"}
    # A skipped check is a JUnit <skipped/>, never a passed test case; a mandatory one carries a property.
    skips = root.findall("testsuite/testcase/skipped")
    n_skip = sum(1 for v in verdicts for c in v.checks if c.status == "skip")
    assert len(skips) == n_skip == int(root.get("skipped", "-1")) > 0
    nvlink = next(c for c in suites[0].findall("testcase") if c.get("name") == "nvlink-links")
    skipped = nvlink.find("skipped")
    assert skipped is not None and skipped.get("message", "").startswith("no evidence for nvlink-links")
    assert nvlink.find("system-out") is None and nvlink.find("failure") is None
    count = next(c for c in suites[0].findall("testcase") if c.get("name") == "gpu-count")
    assert [(p.get("name"), p.get("value")) for p in count.iter("property")] == [("mandatory", "true")]


def test_json_and_markdown_reports() -> None:
    verdicts = two_verdicts()
    doc = json.loads(to_json(verdicts))
    assert doc["passed"] is False and [n["node"] for n in doc["nodes"]] == ["good-node", "bad|node"]
    assert doc["nodes"][0]["passed"] is True and doc["nodes"][1]["failures"][0] == "gpu-count"
    bw = next(c for c in doc["nodes"][0]["checks"] if c["name"] == "allreduce-busbw")
    assert bw["measured"] == 488.14 and bw["expected"] == 487.0 and bw["status"] == "pass" and bw["mandatory"]
    good = doc["nodes"][0]
    statuses = {c["name"]: c["status"] for c in good["checks"]}
    assert good["skipped"] == [n for n, s in statuses.items() if s == "skip"] and "nvlink-links" in good["skipped"]
    assert all(not c["passed"] for c in good["checks"] if c["status"] == "skip")
    assert good["mandatory"] == ["gpu-count", "gpu-model", "gpu-interconnect", "fabric-ports", "allreduce-busbw"]
    md = to_markdown(verdicts)
    n_skip = sum(len(v.skipped) for v in verdicts)
    assert md.startswith(f"# Node acceptance\n\n1 of 2 nodes passed. {n_skip} check(s) were skipped (not judged; "
                         "not counted as passed).")
    assert f"## good-node (p5.48xlarge): PASS ({len(verdicts[0].skipped)} skipped)" in md
    assert "## bad|node (p5.48xlarge): FAIL" in md
    assert md.count("| check | status | mandatory | measured | expected | reason |") == 2
    row = next(ln for ln in md.splitlines() if ln.startswith("| gpu-count | FAIL"))
    assert row == "| gpu-count | FAIL | yes | 1 | 8 | expected 8 GPUs, found 1 (nvidia-smi -q) |"
    assert "| nvlink-links | SKIP | no |" in md
    # every table row has exactly 7 unescaped pipes, even when a reason contains '|'
    for ln in md.splitlines():
        if ln.startswith("| ") and not ln.startswith("|---"):
            assert ln.replace("\\|", "").count("|") == 7, ln


# ------------------------------------------------------------------------------------ offline


@pytest.mark.parametrize("rel", sorted(FIXTURE_KINDS))
def test_kind_for_path_maps_every_fixture(rel: str) -> None:
    assert kind_for_path(FIXTURES / rel) == FIXTURE_KINDS[rel]


@pytest.mark.parametrize(("name", "kind"), [
    ("nvidia-smi-q-x.xml", "nvidia-smi-xml"), ("nvidia-smi-q.txt", "nvidia-smi-q"), ("nvidia-smi.txt", "nvidia-smi"),
    ("topo.txt", "nvidia-smi-topo"), ("nvlink-s.txt", "nvlink-status"), ("nccl-all_reduce.txt", "nccl-tests"),
    ("all_reduce_perf.log", "nccl-tests"), ("ibstat.txt", "ibstat"), ("ibv_devinfo.txt", "ibv-devinfo"),
    ("fi_info.txt", "fi-info"), ("dcgmi-diag.txt", "dcgm-diag"), ("npu-smi-info.txt", "npu-smi"),
    ("npu-smi-topo.txt", "npu-smi-topo"), ("npu-smi-info-t-common-i0.txt", "npu-smi-detail"),
    ("hccn-i0-link.txt", "hccn-tool"), ("hccl-all_reduce.txt", "hccl-test"), ("mdstat.txt", "mdstat"),
    ("lsblk.json", "lsblk-json"), ("nvme-list.txt", "nvme-list"), ("ibdev2netdev.txt", "ibdev2netdev"),
])
def test_documented_file_names(name: str, kind: str, tmp_path: Path) -> None:
    (tmp_path / name).write_text("")
    assert kind_for_path(tmp_path / name) == kind


def test_unknown_name_falls_back_to_content(tmp_path: Path) -> None:
    path = tmp_path / "capture-01.log"
    shutil.copyfile(FIXTURES / "infiniband/ibstat-a100-9x-mt4126-hdr200.txt", path)
    assert kind_for_path(path) == "ibstat"
    assert parse_file("auto", path)["devices"][0]["name"] == "mlx5_0"
    (tmp_path / "notes.txt").write_text("nothing to see here\n")
    with pytest.raises(ParseError, match=r"cannot tell what command produced notes\.txt"):
        parse_file("auto", tmp_path / "notes.txt")


def test_parse_file_returns_json_ready_data() -> None:
    doc = parse_file("nvidia-smi-xml", FIXTURES / "nvidia-smi/8x-v100s-pcie-32gb-vm-q-x.xml")
    assert doc["gpu_count"] == 8 and doc["gpus"][0]["name"] == "Tesla V100S-PCIE-32GB"
    json.dumps(doc, allow_nan=False)


def test_verify_dir_judges_a_node_folder(tmp_path: Path) -> None:
    d = node_dir(tmp_path, "p5-node-7", P5_FILES)
    (d / "README.md").write_text("how this was captured\n")  # not evidence: ignored
    v = verify_dir(d, "p5.48xlarge")
    assert v.passed and v.node == "p5-node-7"
    assert v.evidence == ("nccl-all_reduce.txt=nccl-tests", "nvidia-smi.txt=nvidia-smi", "topo.txt=nvidia-smi-topo")
    low = verify_dir(d, "p5.48xlarge", {"nccl": {"all_reduce": {"multi_node_busbw_gbs": 600.0}}})
    assert not low.passed and [c.name for c in low.failures] == ["allreduce-busbw"]


def test_verify_dir_raises_parse_error_for_a_broken_capture(tmp_path: Path) -> None:
    d = node_dir(tmp_path, "n", P5_FILES)
    (d / "ibstat.txt").write_text("CA 'mlx5_0'\n\tWhat: is this\n")
    with pytest.raises(ParseError, match="ibstat"):
        verify_dir(d, "p5.48xlarge")


# ----------------------------------------------------------------------------------------- CLI


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="metalfleet")
    add_cli_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    rc = args.func(args)
    assert isinstance(rc, int)
    return rc


def test_cli_parse(capsys: pytest.CaptureFixture[str]) -> None:
    f = str(FIXTURES / "topo/8x-a800-sxm4-nv8-4nic-mlx5.txt")
    assert run_cli(["parse", "nvidia-smi-topo", f, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nic_names"]["NIC3"] == "mlx5_3" and doc["links"][0][1] == "NV8"
    assert run_cli(["parse", "auto", f]) == 0
    assert "devices: 12 item(s)" in capsys.readouterr().out
    assert run_cli(["parse", "ibstat", f]) == 2
    assert "parse error: ibstat:" in capsys.readouterr().err
    assert run_cli(["parse", "ibstat", "/nonexistent/file"]) == 2
    with pytest.raises(SystemExit) as info:
        run_cli(["parse", "no-such-kind", f])
    assert info.value.code == 2


def test_cli_verify_pass_fail_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = node_dir(tmp_path, "p5-a", P5_FILES)
    junit, md = tmp_path / "r.xml", tmp_path / "r.md"
    rc = run_cli(["verify", "--from-dir", str(d), "--offering", "p5.48xlarge", "--junit", str(junit),
                  "--markdown", str(md)])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.startswith("p5-a (p5.48xlarge): PASS, ") and "check(s) skipped (not judged)" in out.splitlines()[0]
    assert "PASS  allreduce-busbw (mandatory): " in out and "SKIP  nvlink-links: no evidence" in out
    assert ET.parse(junit).getroot().get("failures") == "0" and "## p5-a (p5.48xlarge): PASS" in md.read_text()
    rc = run_cli(["verify", "--from-dir", str(d), "--offering", "p5.48xlarge", "--json",
                  "--override", "nccl.all_reduce.multi_node_busbw_gbs=600"])
    assert rc == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["nodes"][0]["failures"] == ["allreduce-busbw"]
    assert run_cli(["verify", "--from-dir", str(d), "--offering", "p5.48xlarge", "--threshold", "1.5"]) == 1
    capsys.readouterr()
    assert run_cli(["verify", "--from-dir", str(d), "--offering", "p99.nope"]) == 2
    assert "no acceptance baseline" in capsys.readouterr().err
    assert run_cli(["verify", "--from-dir", str(tmp_path / "missing"), "--offering", "p5.48xlarge"]) == 2
    assert run_cli(["verify", "--from-dir", str(d), "--offering", "p5.48xlarge", "--override", "bogus"]) == 2
