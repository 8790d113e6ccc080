"""`pulumi up` of examples/onprem-ipmi with the real engine, against a simulated pool of real BMC protocols.

The pool has one host behind ipmi_sim (IPMI 2.0) and one behind the sushy-tools Redfish emulator; each is a
VM-mode simulated GPU host whose machine runs only while its BMC says power is on. So one `pulumi up` claims
the hosts, powers them on through their BMCs (the stack's dynamic providers read the BMC password from the
environment variable the inventory names), bootstraps them over SSH with the inventory's host keys pinned and
gates them; a second `up` changes nothing, `refresh` finds them as they are, and `destroy` powers them off and
returns them to the pool. The only changes to the example: its pool.yaml is the simulated pool's inventory (same
shape, credentials by the same environment variable), and its ssh paths point at a throwaway key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.stacks.engine import engine_env
from metalfleet.testing.bmc import BmcPool, start_bmc_pool
from tests.stacks.projects import link_test_environment

from .conftest import require_bmc_tools

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-ipmi"),
              pytest.mark.requires_root("the pool's simulated GPU hosts")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "onprem-ipmi"
PASSWORD_ENV = "COLO_A_BMC_PASSWORD"  # the example's pool.yaml credentials reference


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("operator") / "colo-a"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e-operator", "-f", str(path)],
                   check=True)
    return path


@pytest.fixture(scope="module")
def pool(key: Path) -> Iterator[BmcPool]:
    require_bmc_tools()
    with start_bmc_pool(("ipmi", "redfish"), authorized_keys=[Path(f"{key}.pub").read_text()]) as p:
        yield p


class Project:
    def __init__(self, path: Path, env: dict[str, str], state: Path) -> None:
        self.path, self.env, self.state = path, env, state
        self.printed: list[str] = []

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["pulumi", *args], cwd=self.path, env=self.env, capture_output=True, text=True,
                              timeout=300, check=False)
        self.printed += [proc.stdout, proc.stderr]
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def outputs(self) -> dict[str, Any]:
        return json.loads(self.pulumi("stack", "output", "--json").stdout)  # type: ignore[no-any-return]


def _project(tmp_path: Path, pool: BmcPool, key: Path) -> Project:
    proj = tmp_path / "onprem-ipmi"
    shutil.copytree(EXAMPLE, proj, ignore=shutil.ignore_patterns("venv", "*.claims.json*"))
    link_test_environment(proj)
    example_pool = yaml.safe_load((EXAMPLE / "pool.yaml").read_text())
    inventory = pool.inventory(pool=example_pool["pool"])
    for host in inventory["hosts"]:  # the example's credentials reference: the password in the environment
        host["bmc"]["credentials"] = {"user": "admin", "env": PASSWORD_ENV}
    (proj / "pool.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    text = (proj / "cluster.yaml").read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(tmp_path / "known_hosts"))):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        assert n == 1, f"examples/onprem-ipmi/cluster.yaml has no {field} line"
    (proj / "cluster.yaml").write_text(text)
    env = {**os.environ, **engine_env(), "PULUMI_HOME": str(tmp_path / "home"),
           "PULUMI_CONFIG_PASSPHRASE": "e2e-passphrase", PASSWORD_ENV: pool.password}
    p = Project(proj, env, tmp_path / "state")
    p.state.mkdir()
    p.pulumi("login", f"file://{p.state}")
    p.pulumi("stack", "init", "e2e")
    return p


def _claims(project: Project) -> dict[str, Any]:
    return json.loads((project.path / "pool.claims.json").read_text())  # type: ignore[no-any-return]


def _bootstrapped(pool: BmcPool, host: str) -> bool:
    """The simulated host's own record (its shims' state): the bootstrap installed packages and rebooted it."""
    state = json.loads((Path(pool[host].vm.root) / "state.json").read_text())
    return bool(state["boots"] >= 1 and state["packages"] and state["md"])


def test_example_up_noop_refresh_destroy_on_a_bmc_pool(tmp_path: Path, pool: BmcPool, key: Path) -> None:
    from metalfleet.providers import load_spec

    project = _project(tmp_path, pool, key)
    spec = load_spec(project.path / "cluster.yaml")
    assert (spec.provider, spec.region, spec.count) == ("ipmi", "colo-a", 2)
    assert spec.bootstrap.enabled and spec.acceptance.enabled and not spec.ssh.pin_on_first_contact
    assert [pool.power(h.name) for h in pool.hosts] == ["off", "off"]

    up = project.pulumi("up", "--yes", "--skip-preview")
    out = project.outputs()
    ids = out["node_ids"]
    assert len(ids) == 2 and sorted(out["accepted_ids"]) == sorted(ids), up.stdout
    table = str(out["acceptance"])
    assert "2 of 2 node(s) passed" in table, table
    for i in range(2):
        assert re.search(rf"^{spec.name}-{i}\s+pool\.8xh100-ib\s+8/8\s.*\sPASS$", table, flags=re.M), table
    claims = _claims(project)
    held = {n["host"]: n for n in claims["nodes"].values() if n["state"] == "claimed"}
    assert sorted(held) == ["host0", "host1"] and sorted(n["id"] for n in held.values()) == sorted(ids)
    assert {n["tags"].get("metalfleet:acceptance") for n in held.values()} == {"passed"}
    for h in pool.hosts:  # powered on through its own BMC (IPMI chassis control / Redfish reset), then bootstrapped
        assert pool.power(h.name) == "on" and any("set power 1" in ln for ln in pool.bmc_log(h.name))
        assert _bootstrapped(pool, h.name), h.name
    assert sorted(out["private_ips"]) == sorted(h.address for h in pool.hosts)
    # the host keys were the inventory's: known_hosts started empty and pinning on first contact is off
    known = (tmp_path / "known_hosts").read_text()
    for h in pool.hosts:
        assert f"{h.address} {' '.join(h.vm.host_key.split()[:2])}" in known

    # A second `up` changes nothing: preview with --expect-no-changes fails on any diff.
    project.pulumi("preview", "--expect-no-changes")
    again = project.pulumi("up", "--yes", "--skip-preview")
    assert "unchanged" in again.stdout and "created" not in again.stdout, again.stdout
    assert _claims(project) == claims, "a second up claims nothing"

    project.pulumi("refresh", "--yes", "--skip-preview")
    project.pulumi("preview", "--expect-no-changes")

    project.pulumi("destroy", "--yes", "--skip-preview")
    assert [pool.power(h.name) for h in pool.hosts] == ["off", "off"], "destroy powers the hosts off"
    after = _claims(project)
    assert after["hosts"] == {} and {n["state"] for n in after["nodes"].values()} == {"released"}

    state = "\n".join(p.read_text(errors="replace") for p in project.state.rglob("*") if p.is_file())
    assert state, "the file backend wrote no state"
    for text in (state, *project.printed, json.dumps(after)):
        assert pool.password not in text, "the BMC password reached state or the engine's output"
