"""Per-host files on the controller stay in the folder the user named, one per host, whatever the host is called.

Host names come from inventories and providers: ``..`` once made ``verify --save-dir D`` write one level above
D, and ``gpu/1`` and ``gpu_1`` shared a folder (and a bootstrap log). Runs here are the production runner and
acceptance probes against replayed hosts (no root, no sshd); the CLI case runs ``metalfleet verify`` as a user
does, refused before it connects.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from metalfleet.bootstrap import Profile, ReplayFleet, ReplayHost, RunOptions, run_bootstrap
from metalfleet.bootstrap.acceptance.live import run_acceptance
from metalfleet.bootstrap.inventory import Host, hosts_from_spec
from metalfleet.bootstrap.logs import check_host_paths, host_component, host_path
from metalfleet.bootstrap.sessions import host_folder, host_log_file
from metalfleet.bootstrap.steps import NcclConfig
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.models import Node, NodeState
from metalfleet.providers.spec import parse_spec

#: Names that used to escape the folder or share a file: each must get its own, under the folder.
HOSTILE = ["..", ".", "gpu/1", "gpu_1", "GPU_1", "../../etc", "a\\b", "-rf", ".hidden", "x+y", "ünï", "node0"]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=20, unique=True))
def test_a_host_component_is_one_safe_name_of_its_own(names: list[str]) -> None:
    parts = [host_component(n) for n in names]
    for name, part in zip(names, parts, strict=True):
        assert part not in ("", ".", "..") and "/" not in part and "\\" not in part and "\x00" not in part
        assert len(part) <= 100 and not part.startswith((".", "-"))
        assert host_component(name) == part  # stable: a re-run finds its files
    # injective, also on a case-insensitive disk
    assert len({p.casefold() for p in parts}) == len(names)


def test_plain_names_stay_readable() -> None:
    assert [host_component(n) for n in ("node0", "i-0abc12", "train-3.example.com")] == [
        "node0", "i-0abc12", "train-3.example.com"]
    assert host_component("gpu/1").startswith("gpu_1+") and host_component("gpu_1") == "gpu_1"
    assert host_component("..").startswith("host+")


def test_verify_save_dir_keeps_every_host_in_its_own_folder_under_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    save = out / "D"
    hosts = [Host(name=n, address=f"10.9.0.{i + 1}", offering="p5.48xlarge") for i, n in enumerate(HOSTILE)]
    report = run_acceptance(hosts, save_dir=save, connect=ReplayFleet([]))  # nothing answers: all unreachable
    assert {n.status for n in report.nodes} == {"unreachable"}
    assert _tree(out)[0] == "D" and all(p.startswith("D") for p in _tree(out)), _tree(out)
    folders = sorted(p for p in save.iterdir())
    assert len(folders) == len(HOSTILE) and all(p.is_dir() for p in folders)
    saved = {json.loads((p / ".acceptance.json").read_text())["host"]: p for p in folders}
    assert sorted(saved) == sorted(HOSTILE)
    assert {n.saved_to for n in report.nodes} == {str(p) for p in saved.values()}


def test_bootstrap_logs_one_file_per_host_under_the_log_folder(tmp_path: Path) -> None:
    logs = tmp_path / "out" / "logs"
    fleet = ReplayFleet([ReplayHost(n, f"10.9.1.{i + 1}") for i, n in enumerate(HOSTILE)])
    report = run_bootstrap(fleet.inventory(), Profile("files", (NcclConfig,)), options=RunOptions(connect=fleet),
                           log_dir=logs)
    assert report.ok, report.format_text()
    assert all(p.startswith("logs") for p in _tree(tmp_path / "out"))
    files = sorted(logs.iterdir())
    assert len(files) == len(HOSTILE) and all(f.suffix == ".log" for f in files)
    assert {h.log_path for h in report.hosts} == {str(f) for f in files}
    for h in report.hosts:  # each log holds its own host's run only
        text = Path(h.log_path or "").read_text()
        assert text.count("--- ") == 3 and f"connect root@{h.address}:22" in text, text


def test_a_link_out_of_the_folder_is_refused_before_any_connection(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "gpu0.log").symlink_to(outside / "gpu0.log")
    fleet = ReplayFleet([ReplayHost("gpu0", "10.9.2.1")])
    with pytest.raises(InvalidSpecError, match="outside"):
        run_bootstrap(fleet.inventory(), Profile("files", (NcclConfig,)), options=RunOptions(connect=fleet),
                      log_dir=logs)
    assert fleet["gpu0"].connects == 0 and list(outside.iterdir()) == []
    with pytest.raises(InvalidSpecError, match="outside"):
        host_path(logs, "gpu0", ".log")


def test_verify_cli_refuses_a_save_dir_link_out_naming_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    save = tmp_path / "D"
    save.mkdir()
    (save / "gpu0").symlink_to(outside, target_is_directory=True)
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "gpu0", "address": "127.0.0.1", "port": 9,
                                              "offering": "p5.48xlarge", "provider": "aws"}]}))
    out = subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", "verify", str(inv),
                          "--save-dir", str(save)], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2, out.stderr
    assert "gpu0" in out.stderr and "outside" in out.stderr and str(outside) in out.stderr
    assert list(outside.iterdir()) == []


def test_two_hosts_sharing_a_file_are_refused_naming_both(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="'a' and 'A' would share"):
        check_host_paths(tmp_path, ["a", "A"], lambda root, name: root / name.lower(), "log file")
    # the shipped naming never shares
    assert len(set(check_host_paths(tmp_path, HOSTILE, host_folder).values())) == len(HOSTILE)
    assert len(set(check_host_paths(tmp_path, HOSTILE, host_log_file).values())) == len(HOSTILE)


def test_two_nodes_of_one_name_stay_two_hosts() -> None:
    spec = parse_spec({"name": "cc", "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 2,
                       "image": "img-1"})
    nodes = [Node(id=f"n-{i}", provider="fake", region="local-1", state=NodeState.RUNNING, offering="fake.8xh100",
                  private_ip=f"10.0.0.{i}", name="cc-0", tags={"metalfleet:index": str(i)}) for i in range(2)]
    names = [h.name for h in hosts_from_spec(spec, nodes).hosts]
    assert names == ["cc-0@n-0", "cc-0@n-1"]
