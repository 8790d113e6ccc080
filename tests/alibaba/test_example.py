"""`pulumi up` of examples/alibaba-ebm with the real engine, our language host, and the ECS emulator.

The project folder (Pulumi.yaml + __main__.py + cluster.yaml) and the plain `pulumi` CLI, as a pipeline runs
them. The SDK inside the dynamic providers reaches the emulator only through ALIBABA_CLOUD_ECS_ENDPOINT and the
standard ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET, with its ACS3 signatures checked. The emulator runs with
simulated hosts: every instance is a VM-mode H20 host at the instance's private IP, with the eRDMA devices of
the ERIs the emulator attached, its host key in the console. One `pulumi up` orders the nodes, bootstraps them
over SSH (the eRDMA driver among the steps) and gates them. The only changes to the example are its ssh paths
(a throwaway key, imported as the example's key pair, and a known_hosts in tmp) and ``network.ssh_ingress_cidrs``
(this controller, 127.0.0.1/32); the example's KMS key is made known to the emulator. One emulator and one stack
lifecycle for the module, to keep the suite fast.
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

from metalfleet.stacks.engine import engine_env
from metalfleet.testing.alibaba import ACCESS_KEY_ID, ACCESS_KEY_SECRET, REGION, AlibabaEmulator
from tests.emulators.alibaba_fixtures import ecs_call
from tests.stacks.projects import link_test_environment

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-alibaba"),
              pytest.mark.requires_root("the emulator's simulated hosts")]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "alibaba-ebm"
KEY_PAIR = "metalfleet-h20"  # the example's ssh.key_pair
KMS = "key-mfexampleebs00000001"  # the example's storage.kms_key_id
CONTROLLER_CIDR = "127.0.0.1/32"


@pytest.fixture(scope="module")
def ecs() -> Iterator[AlibabaEmulator]:
    with AlibabaEmulator.start(sim_hosts=True) as emu:
        yield emu


def _project(tmp_path: Path, ecs: AlibabaEmulator) -> tuple[Path, dict[str, str], Path]:
    key = tmp_path / "operator"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "e2e-operator", "-f", str(key)], check=True)
    ecs_call(ecs, "ImportKeyPair", {"KeyPairName": KEY_PAIR, "PublicKeyBody": Path(f"{key}.pub").read_text()})
    ecs.add_kms_keys(KMS)
    proj = tmp_path / "alibaba-ebm"
    shutil.copytree(EXAMPLE, proj, ignore=shutil.ignore_patterns("venv"))
    link_test_environment(proj)
    known_hosts = tmp_path / "known_hosts"
    text = (proj / "cluster.yaml").read_text()
    for field, value in (("private_key", str(key)), ("known_hosts", str(known_hosts)),
                         ("ssh_ingress_cidrs", f"[{CONTROLLER_CIDR}]")):
        text, n = re.subn(rf"^(  {field}: )\S+", rf"\g<1>{value}", text, flags=re.M)
        assert n == 1, f"examples/alibaba-ebm/cluster.yaml has no {field} line"
    (proj / "cluster.yaml").write_text(text)
    env = {**os.environ, **engine_env(), "PULUMI_HOME": str(tmp_path / "home"),
           "PULUMI_CONFIG_PASSPHRASE": "e2e-passphrase", "ALIBABA_CLOUD_ECS_ENDPOINT": ecs.url,
           "ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET}
    state = tmp_path / "state"
    state.mkdir()
    return proj, env, state


def _pulumi(proj: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["pulumi", *args], cwd=proj, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _live(ecs: AlibabaEmulator, cluster: str) -> dict[str, dict[str, Any]]:
    found = ecs_call(ecs, "DescribeInstances", {"Tag": [{"Key": "metalfleet:cluster", "Value": cluster}],
                                                "MaxResults": 100})
    return {i["InstanceId"]: {**i, "Tags": {t["TagKey"]: t["TagValue"] for t in i["Tags"]["Tag"]}}
            for i in found["Instances"]["Instance"]}


def _made_for(ecs: AlibabaEmulator, cluster: str) -> list[str]:
    groups = ecs_call(ecs, "DescribeSecurityGroups", {"Tag": [{"Key": "metalfleet:cluster", "Value": cluster}]})
    sets = ecs_call(ecs, "DescribeDeploymentSets", {"PageSize": 100})
    return ([g["SecurityGroupId"] for g in groups["SecurityGroups"]["SecurityGroup"]]
            + [d["DeploymentSetId"] for d in sets["DeploymentSets"]["DeploymentSet"]
               if d["DeploymentSetDescription"] == f"metalfleet:cluster={cluster}"])


def _check_ready(proj: Path, env: dict[str, str], ecs: AlibabaEmulator, known_hosts: Path) -> list[str]:
    out = json.loads(_pulumi(proj, env, "stack", "output", "--json").stdout)
    ids, ips = out["node_ids"], out["private_ips"]
    live = _live(ecs, "llm-h20")
    assert len(ids) == 2 and sorted(live) == sorted(ids)
    assert sorted(out["accepted_ids"]) == sorted(ids)
    table = str(out["acceptance"])
    assert "2 of 2 node(s) passed" in table, table
    for i in range(2):
        row = rf"^llm-h20-{i}\s+ecs\.ebmgn8v\.48xlarge\s+8/8\s+NV18\s+erdma 2/2\s.*\sPASS$"
        assert re.search(row, table, flags=re.M), table
    hosts = {h["instance_id"]: h for h in ecs.sim_hosts()}
    for node_id, ip in zip(ids, ips, strict=True):
        assert hosts[node_id]["address"] == ip and hosts[node_id]["profile"] == "alibaba-h20"
        state = json.loads((Path(hosts[node_id]["sandbox"]) / "state.json").read_text())
        assert "erdma" in state["modules"] and "erdma" in state["packages"]  # the eRDMA bootstrap step ran
        assert f"{ip} {' '.join(hosts[node_id]['host_key'].split()[:2])}" in known_hosts.read_text()
    assert {inst["Tags"].get("metalfleet:acceptance") for inst in live.values()} == {"passed"}
    record = {i["InstanceId"]: i for i in ecs.instances()}
    assert all(record[i]["MetadataOptions"]["HttpTokens"] == "required" for i in ids)
    return list(ids)


def test_up_bootstraps_and_accepts_then_noop_refresh_destroy(tmp_path: Path, ecs: AlibabaEmulator) -> None:
    proj, env, state = _project(tmp_path, ecs)
    _pulumi(proj, env, "login", f"file://{state}")
    _pulumi(proj, env, "stack", "init", "e2e")

    up = _pulumi(proj, env, "up", "--yes", "--skip-preview")
    assert "+ 8 created" in up.stdout, up.stdout  # stack, cluster, network, 2 nodes, 2 bootstraps, the gate
    ids = _check_ready(proj, env, ecs, tmp_path / "known_hosts")
    assert len(_made_for(ecs, "llm-h20")) == 2  # its security group and LowLatency deployment set

    _pulumi(proj, env, "preview", "--expect-no-changes")
    again = _pulumi(proj, env, "up", "--yes", "--skip-preview")
    assert "8 unchanged" in again.stdout, again.stdout
    assert sorted(_live(ecs, "llm-h20")) == sorted(ids)

    _pulumi(proj, env, "refresh", "--yes", "--skip-preview")
    _pulumi(proj, env, "preview", "--expect-no-changes")

    _pulumi(proj, env, "destroy", "--yes", "--skip-preview")
    assert _live(ecs, "llm-h20") == {}
    assert ecs.sim_hosts() == []
    assert _made_for(ecs, "llm-h20") == [], "destroy leaves nothing metalfleet made for the cluster"
    text = "\n".join(p.read_text(errors="replace") for p in state.rglob("*") if p.is_file())
    assert text and ACCESS_KEY_SECRET not in text and ACCESS_KEY_ID not in text
    assert ecs_call(ecs, "DescribeInstances", {"RegionId": REGION})["Instances"]["Instance"] == []
