"""``metalfleet bootstrap SPEC`` and ``metalfleet verify SPEC`` pin each node's host keys from its console.

The live inventory is built from a fresh driver (another process than the one that ordered the nodes), so
the keys must come from the provider: on the EC2 emulator, GetConsoleOutput answers with the simulated
host's real keys (extension h). With them pinned, a fresh known_hosts connects without first-contact trust;
where the console has none, the error says so and names ``ssh.known_hosts`` and ``ssh.pin_on_first_contact``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.bootstrap import SshConnection, live_inventory
from metalfleet.providers import NodeState, RetryPolicy, node_specs_for, parse_spec
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.fleet import order_cluster
from metalfleet.testing.ec2 import Ec2Emulator, default_subnet_id, start_ec2_emulator
from tests.emulators.fixtures import (
    IMAGE,
    KMS_KEY,
    REGION,
    ZONE,
    ec2_client,
)
from tests.specs import cluster_spec_data

KEY_PAIR = "metalfleet-sim"
CONTROLLER = "127.0.0.1/32"  # where this test process connects from
FAST = RetryPolicy(base=0.01, cap=0.05, deadline=60)


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sim-key") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def sim(ec2_emulator_session: Ec2Emulator, key: Path) -> Iterator[Ec2Emulator]:
    """An emulator that boots a simulated host per instance (ec2_emulator_session: its credentials)."""
    from tests.prereq import require_root

    require_root("simulated hosts (namespaces, mounts, sshd)")
    with start_ec2_emulator(sim_hosts=True) as emu:
        ec2_client(emu).import_key_pair(KeyName=KEY_PAIR, PublicKeyMaterial=Path(f"{key}.pub").read_bytes())
        yield emu


def _sim_spec(cluster: str, key: Path, known_hosts: Path, count: int = 2) -> dict[str, Any]:
    return cluster_spec_data("aws", cluster, count, offering="p5.48xlarge",
                             network={"subnet_id": default_subnet_id(ZONE), "ssh_ingress_cidrs": [CONTROLLER]},
                             ssh={"key_pair": KEY_PAIR, "private_key": str(key), "known_hosts": str(known_hosts)})


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", *args], capture_output=True, text=True,
                          timeout=600, check=False)


def test_live_hosts_carry_the_consoles_keys_and_a_fresh_known_hosts_connects(sim: Ec2Emulator, key: Path,
                                                                             tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    doc = _sim_spec("live-keys", key, known_hosts)
    spec = parse_spec(doc)
    ordering = AwsDriver(region=REGION, endpoint_url=sim.url, poll=0.02)
    ordered = order_cluster(ordering, node_specs_for(ordering, spec))
    try:
        sims = {h["instance_id"]: h for h in sim.sim_hosts()}
        assert sorted(sims) == sorted(n.id for n in ordered)
        # another process: a fresh driver knows no keys; two throttled console reads are ridden out
        sim.reset_faults()
        sim.set_faults(script=[{"action": "GetConsoleOutput", "code": "RequestLimitExceeded", "status": 503,
                                "times": 2}])
        inv, nodes = live_inventory(spec, AwsDriver(region=REGION, endpoint_url=sim.url, poll=0.02), policy=FAST)
        assert sim.stats()["faults"].get("RequestLimitExceeded") == 2
        assert sim.calls("GetConsoleOutput") == len(nodes) + 2
        assert sorted(n.id for n in nodes) == sorted(sims)
        assert inv.ssh.trust_on_first_use is False
        for node in nodes:
            host = next(h for h in inv.hosts if h.address == node.private_ip)
            real = sims[node.id]["host_key"].split()[:2]
            assert [k.split()[:2] for k in host.host_keys] == [real]
            assert [k.split()[:2] for k in inv.ssh.pinned_keys[host.address]] == [real]
        # a fresh known_hosts, no first-contact trust: the pinned keys are what lets SSH in
        assert not known_hosts.exists()
        for node in nodes:
            host = next(h for h in inv.hosts if h.address == node.private_ip)
            with SshConnection(host.endpoint(), replace(inv.ssh, use_agent=False, connect_attempts=2)) as conn:
                res = conn.run(["hostname"])
            assert res.rc == 0 and res.text.strip() == node.id
        assert len(known_hosts.read_text().splitlines()) == len(nodes)  # pinned keys are recorded

        # the CLI, as a user runs it: another fresh known_hosts, and it connects to every node
        fresh = tmp_path / "cli_known_hosts"
        spec_file = tmp_path / "cluster.yaml"
        spec_file.write_text(yaml.safe_dump({**doc, "ssh": {**doc["ssh"], "known_hosts": str(fresh)}}))
        out = _cli("bootstrap", str(spec_file), "--dry-run", "--profile", "nccl", "--json",
                   "--driver-config", f"endpoint_url={sim.url}", "--log-dir", str(tmp_path / "logs"))
        assert out.returncode == 0, out.stderr + out.stdout
        report = json.loads(out.stdout)
        assert sorted(h["address"] for h in report["hosts"]) == sorted(n.private_ip for n in nodes)
        assert {h["status"] for h in report["hosts"]} <= {"would-change", "unchanged"}, report
        assert len(fresh.read_text().splitlines()) == len(nodes)
        fresh.unlink()
        out = _cli("verify", str(spec_file), "--no-nccl", "--no-multi-node", "--json",
                   "--driver-config", f"endpoint_url={sim.url}", "--save-dir", str(tmp_path / "saved"))
        assert out.returncode in (0, 1), out.stderr + out.stdout
        checked = [json.loads(p.read_text()) for p in (tmp_path / "saved").glob("*/.acceptance.json")]
        assert sorted(n["address"] for n in checked) == sorted(n.private_ip for n in nodes)
        # reached, probed and judged (a refused host key would be an error before any probe)
        assert {n["status"] for n in checked} <= {"pass", "fail"}, [(n["status"], n["error"]) for n in checked]
        assert len(fresh.read_text().splitlines()) == len(nodes)
    finally:
        for node in ordered:
            ordering.release(node.id)


def test_a_console_without_keys_is_an_error_naming_the_options(ec2_emulator: Ec2Emulator,
                                                               key: Path, tmp_path: Path) -> None:
    """No simulated host: EC2's console output holds no host key block (as before cloud-init printed it)."""
    subnet = default_subnet_id(ZONE)
    known_hosts = tmp_path / "known_hosts"
    doc: dict[str, Any] = {
        "name": "no-console-keys", "provider": "aws", "region": REGION, "zone": ZONE, "offering": "p4de.24xlarge",
        "count": 1, "image": IMAGE, "network": {"subnet_id": subnet}, "storage": {"kms_key_id": KMS_KEY},
        "ssh": {"known_hosts": str(known_hosts)}}
    spec = parse_spec(doc)
    driver = AwsDriver(region=REGION, endpoint_url=ec2_emulator.url, poll=0.02)
    [node] = order_cluster(driver, node_specs_for(driver, spec))
    try:
        node = driver.wait([node.id], NodeState.RUNNING, timeout=30)[0]
        ec2_emulator.reset_faults()  # counters from here
        with pytest.raises(InvalidSpecError) as err:
            live_inventory(spec, AwsDriver(region=REGION, endpoint_url=ec2_emulator.url), policy=FAST)
        text = str(err.value)
        assert node.id in text and "no SSH host keys" in text
        assert "ssh.known_hosts" in text and "ssh.pin_on_first_contact" in text and str(known_hosts) in text
        assert err.value.field == "ssh.known_hosts"

        # a console that cannot be read says why (no ec2:GetConsoleOutput permission: never retried)
        ec2_emulator.set_faults(script=[{"action": "GetConsoleOutput", "code": "UnauthorizedOperation",
                                         "status": 403, "times": 1}])
        with pytest.raises(InvalidSpecError, match="reading its console failed"):
            live_inventory(spec, AwsDriver(region=REGION, endpoint_url=ec2_emulator.url), policy=FAST)
        assert ec2_emulator.calls("GetConsoleOutput") == 2
        ec2_emulator.reset_faults()

        # either option the message names lets it through (no key pinned: SSH checks known_hosts or records)
        trusting = parse_spec({**doc, "ssh": {**doc["ssh"], "pin_on_first_contact": True}})
        inv, _ = live_inventory(trusting, AwsDriver(region=REGION, endpoint_url=ec2_emulator.url), policy=FAST)
        assert inv.ssh.trust_on_first_use and inv.ssh.pinned_keys == {}
        some_key = " ".join(Path(f"{key}.pub").read_text().split()[:2])
        known_hosts.write_text(f"{node.private_ip} {some_key}\n")
        inv, _ = live_inventory(spec, AwsDriver(region=REGION, endpoint_url=ec2_emulator.url), policy=FAST)
        assert [h.address for h in inv.hosts] == [node.private_ip] and inv.ssh.pinned_keys == {}
    finally:
        driver.release(node.id)
