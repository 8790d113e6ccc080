"""``metalfleet up|preview|refresh|destroy`` leave nothing in the temp directory: not on success, not on failure,
not on Ctrl-C.

The Automation API makes an ``automation-*`` workspace folder in the temp directory for every stack it opens
without a ``work_dir``, and never removes it. Each command here runs as a user runs it, with TMPDIR pointed at a
fresh folder of its own, through the real engine on the file-backed fake cloud.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-fake")]

SPEC = {"name": "tmp-clean", "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 2,
        "image": "img-1", "bootstrap": {"enabled": False}, "acceptance": {"enabled": False}}


def _env(tmp: Path, pulumi_home: Path, passphrase: str) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp), "PULUMI_HOME": str(pulumi_home), "PULUMI_CONFIG_PASSPHRASE": passphrase}


def _argv(command: str, spec: Path, state: Path, fake: Path, *config: str) -> list[str]:
    return [sys.executable, "-m", "metalfleet.stacks.cli", command, str(spec), "--backend", f"file://{state}",
            "--driver-config", f"state_path={fake}", *(a for c in config for a in ("--driver-config", c))]


def _nodes(fake: Path) -> int:
    try:
        return len(json.loads(fake.read_text() or "{}").get("nodes", {}))
    except (OSError, ValueError):
        return 0


def test_no_workspace_folder_is_left_in_the_temp_directory(tmp_path: Path, pulumi_home: Path,
                                                            passphrase: str) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = _env(tmp, pulumi_home, passphrase)

    for command in ("up", "preview", "refresh", "destroy"):
        done = subprocess.run(_argv(command, spec, tmp_path / "state", tmp_path / "fake.json"), env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"{command}: {done.stderr}{done.stdout}"
        assert sorted(tmp.rglob("*")) == [], f"{command} left {sorted(tmp.rglob('*'))}"

    # a failed up (one node of capacity for two)
    failed = subprocess.run(_argv("up", spec, tmp_path / "state-fail", tmp_path / "fake-fail.json", "capacity=1"),
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    assert failed.returncode == 1, failed.stderr + failed.stdout
    assert "capacity" in (failed.stderr + failed.stdout).lower()
    assert sorted(tmp.rglob("*")) == []


def test_ctrl_c_during_up_leaves_no_workspace_folder(tmp_path: Path, pulumi_home: Path, passphrase: str) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text(yaml.safe_dump(SPEC))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    fake = tmp_path / "fake.json"
    # nodes that never boot: up orders them, then waits
    proc = subprocess.Popen(_argv("up", spec, tmp_path / "state", fake, "boot_seconds=3600"),
                            env=_env(tmp, pulumi_home, passphrase), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _nodes(fake) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _nodes(fake) == 2 and proc.poll() is None, "up did not reach its wait"
        # the run's workspace is in TMPDIR while it runs (so the check below can see a leftover)
        assert [p.name.startswith("metalfleet-pulumi-") for p in tmp.iterdir()] == [True]
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole process group
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, out
    assert sorted(tmp.rglob("*")) == []
