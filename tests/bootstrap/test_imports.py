"""What importing bootstrap pulls in: the package loads its names lazily, the acceptance core and the engine
above the connector import no SSH library, no Pulumi and no cloud SDK. Each import runs in a fresh
interpreter (this test process has imported everything already)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import metalfleet.bootstrap as mb

HEAVY = ("paramiko", "pulumi", "boto3", "botocore")


def _loaded_after(statement: str) -> list[str]:
    """The HEAVY modules ``statement`` leaves in sys.modules, in a fresh interpreter."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    loaded: list[str] = json.loads(res.stdout.splitlines()[-1])
    return loaded


@pytest.mark.parametrize("module", [
    # the acceptance core: parsers, baselines, gate (and its check modules), reports and table, offline judging
    "metalfleet.bootstrap.acceptance.gate", "metalfleet.bootstrap.acceptance.table",
    "metalfleet.bootstrap.acceptance.offline", "metalfleet.bootstrap.acceptance",
    # the package, the session layer and the replaying connector (with the connector contract and scripts),
    # and the engine above the connector: the bootstrap runner and the live acceptance probes.
    "metalfleet.bootstrap", "metalfleet.bootstrap.sessions", "metalfleet.bootstrap.replay",
    "metalfleet.bootstrap.runner", "metalfleet.bootstrap.acceptance.live", "metalfleet.bootstrap.inventory",
])
def test_the_core_and_the_session_layer_import_without_paramiko_pulumi_or_a_cloud_sdk(module: str) -> None:
    assert _loaded_after(f"import {module}") == []


def test_paramiko_loads_with_the_ssh_connector_only() -> None:
    assert _loaded_after("import metalfleet.bootstrap.ssh") == ["paramiko"]
    assert _loaded_after("from metalfleet.bootstrap import SshConnection") == ["paramiko"]
    # An SSH pool loads it; a pool over replayed hosts does not.
    assert _loaded_after("from metalfleet.bootstrap.sessions import SessionPool\nSessionPool()") == ["paramiko"]
    assert _loaded_after("from metalfleet.bootstrap.sessions import SessionPool\n"
                         "from metalfleet.bootstrap.replay import ReplayFleet\n"
                         "SessionPool(connect=ReplayFleet([]))") == []


def test_every_public_name_resolves_from_its_module() -> None:
    code = ("import metalfleet.bootstrap as mb\n"
            "missing = [n for n in mb.__all__ if getattr(mb, n, None) is None]\n"
            "assert not missing, missing\n"
            "assert sorted(mb._LAZY) == sorted(mb.__all__)\n"
            "assert set(dir(mb)) >= set(mb.__all__)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    for name in mb.__all__:
        module = __import__(f"metalfleet.bootstrap{mb._LAZY[name]}", fromlist=[name])
        assert getattr(mb, name) is getattr(module, name), name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mb.nope  # type: ignore[attr-defined]
