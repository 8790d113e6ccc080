"""Extension (h): the emulator boots a simulated GPU host per instance, and AwsDriver pins its host key.

The driver only sees EC2: an instance with a private IP, launched with a key pair, whose console
prints its SSH host keys. SSH to that IP with the key pair's key reaches a (VM-mode) simulated host.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap import SshConnection
from metalfleet.bootstrap.inventory import Host
from metalfleet.bootstrap.parsers.efa import parse_fi_info
from metalfleet.bootstrap.ssh import SshOptions
from metalfleet.providers import NodeState, parse_spec, plan
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.errors import InvalidSpecError
from tests.emulators.ec2_server import Ec2Emulator, default_subnet_id, start_ec2_emulator
from tests.emulators.fixtures import IMAGE, REGION, ZONE, ec2_client
from tests.hosts.harness import mfshim

pytestmark = pytest.mark.requires_root("simulated hosts (namespaces, mounts, sshd)")

KEY_PAIR = "metalfleet-sim"


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sim-key") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def sim(ec2_emulator_session: Ec2Emulator, key: Path) -> Iterator[Ec2Emulator]:
    """An emulator with sim hosts (ec2_emulator_session only for its credentials in the environment)."""
    with start_ec2_emulator(sim_hosts=True) as emu:
        ec2_client(emu).import_key_pair(KeyName=KEY_PAIR, PublicKeyMaterial=Path(f"{key}.pub").read_bytes())
        yield emu


@pytest.fixture
def emu(sim: Ec2Emulator) -> Iterator[Ec2Emulator]:
    sim.reset_faults()
    yield sim
    client = ec2_client(sim)
    live = [i["InstanceId"] for r in client.describe_instances()["Reservations"] for i in r["Instances"]
            if i["State"]["Name"] != "terminated"]
    if live:
        client.terminate_instances(InstanceIds=live)


def _spec(cluster: str, **over: Any) -> Any:
    data = {"name": cluster, "provider": "aws", "region": REGION, "zone": ZONE, "offering": "p5.48xlarge",
            "count": 1, "image": IMAGE, "network": {"subnet_id": default_subnet_id(ZONE)},
            "ssh": {"key_pair": KEY_PAIR}}
    data.update(over)
    return parse_spec(data)


def _reachable(address: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def _run(address: str, keys: list[str], key: Path, known_hosts: Path, command: str) -> str:
    host = Host(name=address, address=address, user="ubuntu", key=str(key))
    opts = SshOptions(known_hosts=str(known_hosts), pinned_keys={address: keys}, use_agent=False, connect_timeout=5,
                      connect_attempts=2, connect_deadline=15)
    with SshConnection(host.endpoint(), opts) as conn:
        res = conn.run(["sh", "-c", command])
    assert res.rc == 0, res.stderr
    return str(res.text).strip()


def test_each_launch_boots_a_host_at_the_instances_private_ip(emu: Ec2Emulator, key: Path, tmp_path: Path) -> None:
    ec2 = ec2_client(emu)
    t0 = time.monotonic()
    [inst] = ec2.run_instances(ImageId=IMAGE, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1, KeyName=KEY_PAIR,
                               ClientToken="sim-boot-1", TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                   {"Key": "metalfleet:index", "Value": "3"}]}])["Instances"]
    assert time.monotonic() - t0 < 10
    iid, address = inst["InstanceId"], inst["PrivateIpAddress"]
    [host] = emu.sim_hosts()
    assert (host["instance_id"], host["address"], host["offering"], host["profile"]) == (
        iid, address, "p4d.24xlarge", "p4d")
    assert address.startswith("127.")
    described = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    assert described["PrivateIpAddress"] == address
    primary = next(n for n in described["NetworkInterfaces"] if n["Attachment"]["DeviceIndex"] == 0)
    assert primary["PrivateIpAddress"] == address
    assert ec2.describe_network_interfaces(NetworkInterfaceIds=[primary["NetworkInterfaceId"]])[
        "NetworkInterfaces"][0]["PrivateIpAddress"] == address

    console = ec2.get_console_output(InstanceId=iid)["Output"]
    block = console.split("-----BEGIN SSH HOST KEY KEYS-----")[1].split("-----END SSH HOST KEY KEYS-----")[0]
    assert block.split()[:2] == host["host_key"].split()[:2]
    assert "cloud-init" in console and "\r\n" in console

    # the key pair's key logs in as ubuntu, and the host is its own machine
    out = _run(address, [host["host_key"]], key, tmp_path / "kh", "hostname; sudo -n cat /etc/hostname")
    assert out.split() == [iid, iid]
    config = json.loads((Path(host["sandbox"]) / "config.json").read_text())
    assert config["gpu"]["count"] == 8
    # launched without an EFA interface, the instance has no EFA device (whatever its type could take)
    assert config["fabric"] == {"kind": "efa", "nics": 0, "nic_gbps": 0.0} and "fi_info" not in config["fixtures"]

    # an idempotent replay boots nothing more
    again = ec2.run_instances(ImageId=IMAGE, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1, KeyName=KEY_PAIR,
                              ClientToken="sim-boot-1", TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                  {"Key": "metalfleet:index", "Value": "3"}]}])["Instances"]
    assert [i["InstanceId"] for i in again] == [iid] and len(emu.sim_hosts()) == 1

    # stop powers it off (the disk stays), start boots it again with the same key
    ec2.stop_instances(InstanceIds=[iid])
    assert not _reachable(address) and [h["running"] for h in emu.sim_hosts()] == [False]
    ec2.start_instances(InstanceIds=[iid])
    assert _reachable(address) and [h["running"] for h in emu.sim_hosts()] == [True]
    assert _run(address, [host["host_key"]], key, tmp_path / "kh", "cat /proc/sys/kernel/random/boot_id")

    ec2.terminate_instances(InstanceIds=[iid])
    assert emu.sim_hosts() == [] and not _reachable(address)
    assert not Path(host["sandbox"]).exists()
    assert ec2.get_console_output(InstanceId=iid)["Output"] == console  # EC2 keeps a console for a while


def test_an_unknown_key_pair_is_refused_as_on_aws(emu: Ec2Emulator) -> None:
    driver = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    [spec] = plan(driver, _spec("sim-nokey", ssh={"key_pair": "nobody"}))
    with pytest.raises(InvalidSpecError) as exc:
        driver.order(spec)
    assert exc.value.code == "InvalidKeyPair.NotFound" and exc.value.field == "key_name"
    assert emu.sim_hosts() == []


def test_rules_configure_hosts_by_tags(emu: Ec2Emulator) -> None:
    emu.set_sim_host_rules([{"tags": {"metalfleet:cluster": "sim-rules", "metalfleet:index": "1"},
                             "config": {"gpu": {"count": 7}}}])
    driver = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    nodes = [driver.order(s) for s in plan(driver, _spec("sim-rules", count=2))]
    counts = {h["instance_id"]: (Path(h["sandbox"]) / "config.json").read_text().count('"count": 7')
              for h in emu.sim_hosts()}
    assert counts == {nodes[0].id: 0, nodes[1].id: 1}
    with pytest.raises(RuntimeError, match="sim-host rule"):
        emu.set_sim_host_rules([{"tag": {}}])
    emu.reset_faults()  # a reset clears the rules
    [later] = [driver.order(s) for s in plan(driver, _spec("sim-rules-2", count=2))][1:]
    sandbox = next(h["sandbox"] for h in emu.sim_hosts() if h["instance_id"] == later.id)
    assert '"count": 7' not in (Path(sandbox) / "config.json").read_text()


def test_driver_pins_the_host_key_from_the_console(emu: Ec2Emulator, key: Path, tmp_path: Path) -> None:
    driver = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    specs = plan(driver, _spec("sim-keys", count=2))
    ordered = [driver.order(s) for s in specs]
    emu.reset_faults()
    nodes = driver.wait([n.id for n in ordered], NodeState.RUNNING, timeout=30)
    assert emu.calls("GetConsoleOutput") == 2
    hosts = {h["instance_id"]: h for h in emu.sim_hosts()}
    for node in nodes:
        sim = hosts[node.id]
        assert node.private_ip == sim["address"]
        [line] = node.extra["host_keys"]
        assert line.split()[:2] == sim["host_key"].split()[:2]
        # its EFA devices are the emulator's record of what it attached: 32 EFA interfaces on 32 network
        # cards of 100 Gb/s (the type's data), which its fi_info lists
        config = json.loads((Path(sim["sandbox"]) / "config.json").read_text())
        assert config["fabric"] == {"kind": "efa", "nics": 32, "nic_gbps": 100.0}
        assert len(parse_fi_info(mfshim.fi_info_listing(config)).efa_devices) == node.extra["efa_interfaces"] == 32
        assert _run(node.private_ip, list(node.extra["host_keys"]), key, tmp_path / "kh", "hostname") == node.id
    # read once per driver; get() carries what was read
    driver.wait([n.id for n in nodes], NodeState.RUNNING, timeout=30)
    assert driver.get(nodes[0].id).extra["host_keys"] == nodes[0].extra["host_keys"]
    assert emu.calls("GetConsoleOutput") == 2
    # a fresh driver (another process) reads the console only when asked
    fresh = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    assert "host_keys" not in fresh.get(nodes[0].id).extra
    assert fresh.get(nodes[0].id, host_keys=True).extra["host_keys"] == nodes[0].extra["host_keys"]
    assert fresh.host_keys(nodes[1].id) == tuple(nodes[1].extra["host_keys"])

    for node in nodes:
        driver.release(node.id)
    assert emu.sim_hosts() == []


def test_stopping_the_emulator_stops_its_hosts(ec2_emulator_session: Ec2Emulator, key: Path) -> None:
    with start_ec2_emulator(sim_hosts=True) as other:
        ec2 = ec2_client(other)
        ec2.import_key_pair(KeyName=KEY_PAIR, PublicKeyMaterial=Path(f"{key}.pub").read_bytes())
        ec2.run_instances(ImageId=IMAGE, InstanceType="p5.48xlarge", MinCount=2, MaxCount=2, KeyName=KEY_PAIR)
        hosts = other.sim_hosts()
        assert len(hosts) == 2 and all(_reachable(h["address"]) for h in hosts)
    assert other.process.returncode == 0
    for h in hosts:
        assert not _reachable(h["address"])
        assert not Path(h["sandbox"]).parent.exists()
