"""`pulumi up` of examples/huawei-bms (two Ascend 910B servers) with the real engine, our language host, and the
BMS/BSS emulator with simulated hosts: ordered monthly over HTTP with signatures checked (each BSS order followed
until it is paid), bootstrapped over SSH (Ascend driver, CANN, HCCN, the NVMe RAID) and gated; a second `up`
changes nothing; refresh keeps it; destroy without the opt-in ends nothing, and with it (`metalfleet destroy
--unsubscribe` sets its variable) unsubscribes every server and leaves nothing. The only changes to the example
are its ssh paths (a throwaway key, registered in the emulator as the example's key pair, and a known_hosts file in
tmp) and the driver's BMS and BSS endpoints (stack config, as a user points it at other endpoints); the keys and
ids come from the environment, as in production."""

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

from metalfleet.stacks.dynamic import UNSUBSCRIBE_ENV
from metalfleet.stacks.engine import engine_env
from metalfleet.testing.huawei import DOMAIN_ID, PROJECT_ID, TEST_AK, TEST_SK, USER_ID, HuaweiEmulator
from tests.stacks.projects import link_test_environment

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-huawei"),
              pytest.mark.requires_root("the emulator's simulated hosts")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "huawei-bms"
KEY_PAIR = "metalfleet-ascend"  # the example's ssh.key_pair


@pytest.fixture(scope="module")
def bms() -> Iterator[HuaweiEmulator]:
    with HuaweiEmulator.start(sim_hosts=True) as emu:
        yield emu


class Project:
    def __init__(self, path: Path, env: dict[str, str], state: Path, known_hosts: Path) -> None:
        self.path, self.env, self.state, self.known_hosts = path, env, state, known_hosts

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["pulumi", *args], cwd=self.path, env=self.env, capture_output=True, text=True,
                              timeout=300, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def outputs(self) -> dict[str, Any]:
        return json.loads(self.pulumi("stack", "output", "--json").stdout)  # type: ignore[no-any-return]


def _project(tmp_path: Path, bms: HuaweiEmulator) -> Project:
    key = tmp_path / "operator" / KEY_PAIR
    key.parent.mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e-operator", "-f", str(key)], check=True)
    bms.add_keypair(KEY_PAIR, Path(f"{key}.pub").read_text().strip())
    known_hosts = tmp_path / "known_hosts"
    dest = tmp_path / "huawei-bms"
    shutil.copytree(EXAMPLE, dest)
    link_test_environment(dest)
    text = (dest / "cluster.yaml").read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts))):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        assert n == 1, f"examples/huawei-bms/cluster.yaml has no {field} line"
    (dest / "cluster.yaml").write_text(text)
    env = {**os.environ, **engine_env(), "PULUMI_HOME": str(tmp_path / "home"),
           "PULUMI_CONFIG_PASSPHRASE": "e2e-passphrase", "HUAWEICLOUD_SDK_AK": TEST_AK,
           "HUAWEICLOUD_SDK_SK": TEST_SK, "HUAWEICLOUD_SDK_PROJECT_ID": PROJECT_ID,
           "HUAWEICLOUD_SDK_DOMAIN_ID": DOMAIN_ID, "METALFLEET_HUAWEI_USER_ID": USER_ID}
    env.pop(UNSUBSCRIBE_ENV, None)
    p = Project(dest, env, tmp_path / "state", known_hosts)
    p.state.mkdir()
    p.pulumi("login", f"file://{p.state}")
    p.pulumi("stack", "init", "e2e")
    p.pulumi("config", "set", "--path", "metalfleet:driverConfig.endpoint", bms.url)
    p.pulumi("config", "set", "--path", "metalfleet:driverConfig.bss_endpoint", bms.url)
    p.pulumi("config", "set", "--path", "metalfleet:driverConfig.poll", "0.2")
    return p


def _live(bms: HuaweiEmulator, cluster: str) -> list[str]:
    return sorted({h["instance_id"] for h in bms.sim_hosts()} & set(_servers(bms, cluster)))


def _servers(bms: HuaweiEmulator, cluster: str) -> dict[str, dict[str, str]]:
    """The cluster's live servers as the emulator lists them (through the driver's own read path)."""
    from metalfleet.providers.huawei import HuaweiDriver

    driver = HuaweiDriver(region="cn-southwest-2", project_id=PROJECT_ID, endpoint=bms.url, bss_endpoint=bms.url,
                          ak=TEST_AK, sk=TEST_SK, domain_id=DOMAIN_ID, user_id=USER_ID)
    return {n.id: dict(n.tags) for n in driver.list_nodes(cluster)}


def test_up_bootstraps_and_accepts_then_noop_refresh_destroy(tmp_path: Path, bms: HuaweiEmulator) -> None:
    from metalfleet.providers import load_spec

    project = _project(tmp_path, bms)
    spec = load_spec(project.path / "cluster.yaml")
    up = project.pulumi("up", "--yes", "--skip-preview", check=False)
    assert up.returncode == 0, up.stdout + up.stderr
    out = project.outputs()
    ids, ips = out["node_ids"], out["private_ips"]
    assert len(ids) == spec.count and sorted(_servers(bms, spec.name)) == sorted(ids)
    assert sorted(out["accepted_ids"]) == sorted(ids)
    table = str(out["acceptance"])
    assert f"{spec.count} of {spec.count} node(s) passed" in table, table
    hosts = {h["instance_id"]: h for h in bms.sim_hosts()}
    known = project.known_hosts.read_text()
    for node_id, ip in zip(ids, ips, strict=True):
        assert hosts[node_id]["address"] == ip and hosts[node_id]["profile"] == "ascend-910b"
        state = json.loads((Path(hosts[node_id]["sandbox"]) / "state.json").read_text())
        assert state["installed"].get("ascend-driver") and len(state["hccn"]) == 8, state
        assert f"{ip} {' '.join(hosts[node_id]['host_key'].split()[:2])}" in known  # pinned at first contact
    assert {t.get("metalfleet:acceptance") for t in _servers(bms, spec.name).values()} == {"passed"}

    project.pulumi("preview", "--expect-no-changes")
    again = project.pulumi("up", "--yes", "--skip-preview")
    assert "unchanged" in again.stdout and "created" not in again.stdout, again.stdout
    project.pulumi("refresh", "--yes", "--skip-preview")
    project.pulumi("preview", "--expect-no-changes")

    refused = project.pulumi("destroy", "--yes", "--skip-preview", check=False)
    assert refused.returncode != 0 and "--unsubscribe" in refused.stdout + refused.stderr
    assert sorted(_servers(bms, spec.name)) == sorted(ids), "a refused destroy ends nothing"
    project.env[UNSUBSCRIBE_ENV] = "1"  # what `metalfleet destroy --unsubscribe` sets for the engine
    project.pulumi("destroy", "--yes", "--skip-preview")
    assert _servers(bms, spec.name) == {}
    assert bms.sim_hosts() == [] and bms.billing()["resources"] == {}
    state = "\n".join(p.read_text(errors="replace") for p in project.state.rglob("*") if p.is_file())
    assert state and TEST_SK not in state
