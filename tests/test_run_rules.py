"""The run-wide rules in tests/conftest.py, checked on a throwaway test file in a child pytest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SAMPLE = '''
import os
import pytest

def test_passes():
    assert True

def test_skips():
    pytest.skip("no widget here")

@pytest.mark.requires_root("widgets")
def test_needs_root():
    assert True
'''


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "METALFLEET_ALLOW"))}
    child_env.update(env)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), "-o", "markers=requires_root(what): x", str(tmp_path)],
                          cwd=REPO, env=child_env, capture_output=True, text=True, timeout=120)


def test_a_skip_fails_the_run_and_is_named(tmp_path: Path) -> None:
    res = _run(tmp_path)
    assert res.returncode == pytest.ExitCode.TESTS_FAILED, res.stdout + res.stderr
    assert "1 test(s) skipped; a skip is a failure here" in res.stdout
    assert "skipped: test_sample.py::test_skips" in res.stdout
    assert "tests run per area - unit: 3, emulator: 0, sim host: 0, engine e2e: 0" in res.stdout


def test_skips_allowed_only_when_asked(tmp_path: Path) -> None:
    res = _run(tmp_path, METALFLEET_ALLOW_SKIPS="1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "a skip is a failure here" not in res.stdout



GROUPED = '''
import pytest

pytestmark = pytest.mark.xdist_group("one")

def test_a():
    pass

def test_b():
    pass

def test_c():
    pass

def test_d():
    pass
'''


def test_xdist_groups_keep_their_tests_on_one_worker(tmp_path: Path) -> None:
    """``make test`` runs ``--dist loadgroup``: tests that share a fleet or an engine (xdist_group) must land on one
    worker. A pytest whose node ids pytest-xdist cannot tag drops every group silently (pytest 9.2 with xdist 3.8)."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-n", "2", "--dist", "loadgroup", "-p",
                          "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    passed = [line for line in res.stdout.splitlines() if " PASSED " in line]
    assert len({line.split("]")[0] for line in passed}) == 1, res.stdout  # one worker ran them all
    assert len(passed) == 4 and all(line.endswith("@one ") or line.endswith("@one") for line in passed), res.stdout
