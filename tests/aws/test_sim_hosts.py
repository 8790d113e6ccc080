"""Extension (h): the emulator boots a simulated GPU host per instance, and AwsDriver pins its host key.

The driver only sees EC2: an instance with a private IP, launched with a key pair, whose console
prints its SSH host keys. SSH to that IP with the key pair's key reaches a (VM-mode) simulated host,
when the instance's security groups let the caller in (extension n): this test process connects from
127.0.0.1, so its specs set ``network.ssh_ingress_cidrs: [127.0.0.1/32]`` and its raw launches use a
group with that rule; without one, SSH to the host is dropped, as on EC2.
"""

from __future__ import annotations

import base64
import json
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalfleet.bootstrap import SshConnection
from metalfleet.bootstrap.errors import HostUnreachable
from metalfleet.bootstrap.inventory import Host
from metalfleet.bootstrap.parsers.efa import parse_fi_info
from metalfleet.bootstrap.ssh import SshOptions
from metalfleet.providers import NodeState, node_specs_for
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.errors import InvalidSpecError
from metalfleet.testing import reference
from metalfleet.testing.ec2 import Ec2Emulator, default_subnet_id, start_ec2_emulator
from metalfleet.testing.hosts.harness import mfshim
from tests.aws.ec2_wire import answered, signed_call
from tests.emulators.fixtures import IMAGE, REGION, ZONE, ec2_client
from tests.specs import cluster_spec

pytestmark = pytest.mark.requires_root("simulated hosts (namespaces, mounts, sshd)")

KEY_PAIR = "metalfleet-sim"
CONTROLLER = "127.0.0.1/32"  # where this test process connects from


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
    return cluster_spec("aws", cluster, **{
        "offering": "p5.48xlarge", "network": {"subnet_id": default_subnet_id(ZONE), "ssh_ingress_cidrs": [CONTROLLER]},
        "ssh": {"key_pair": KEY_PAIR}, **over})


def _ssh_group(ec2: Any, name: str) -> str:
    """A security group of the default VPC that lets this test process (127.0.0.1) reach port 22."""
    vpc = ec2.describe_subnets(SubnetIds=[default_subnet_id(ZONE)])["Subnets"][0]["VpcId"]
    found = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [name]}])["SecurityGroups"]
    if found:
        return str(found[0]["GroupId"])
    gid = str(ec2.create_security_group(GroupName=name, Description="ssh from the tests", VpcId=vpc)["GroupId"])
    ec2.authorize_security_group_ingress(GroupId=gid, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": CONTROLLER}]}])
    return gid


def _reachable(address: str, port: int = 22, source: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    """A TCP connection to ``address:port`` from ``source`` opens within ``timeout`` (a dropped SYN: False)."""
    try:
        with socket.create_connection((address, port), timeout=timeout, source_address=(source, 0)):
            return True
    except OSError:
        return False


def _run(address: str, keys: list[str], key: Path, known_hosts: Path, command: str, timeout: float = 5) -> str:
    host = Host(name=address, address=address, user="ubuntu", key=str(key))
    opts = SshOptions(known_hosts=str(known_hosts), pinned_keys={address: keys}, use_agent=False,
                      connect_timeout=timeout, connect_attempts=2, connect_deadline=3 * timeout)
    with SshConnection(host.endpoint(), opts) as conn:
        res = conn.run(["sh", "-c", command])
    assert res.rc == 0, res.stderr
    return str(res.text).strip()


def test_each_launch_boots_a_host_at_the_instances_private_ip(emu: Ec2Emulator, key: Path, tmp_path: Path) -> None:
    ec2 = ec2_client(emu)
    t0 = time.monotonic()
    group = _ssh_group(ec2, "sim-boot-ssh")
    [inst] = ec2.run_instances(ImageId=IMAGE, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1, KeyName=KEY_PAIR,
                               ClientToken="sim-boot-1", SecurityGroupIds=[group],
                               TagSpecifications=[{"ResourceType": "instance", "Tags": [
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
                              ClientToken="sim-boot-1", SecurityGroupIds=[group],
                              TagSpecifications=[{"ResourceType": "instance", "Tags": [
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
    [spec] = node_specs_for(driver, _spec("sim-nokey", ssh={"key_pair": "nobody"}))
    with pytest.raises(InvalidSpecError) as exc:
        driver.order(spec)
    assert exc.value.code == "InvalidKeyPair.NotFound" and exc.value.field == "key_name"
    assert emu.sim_hosts() == []


def test_rules_configure_hosts_by_tags(emu: Ec2Emulator) -> None:
    emu.set_sim_host_rules([{"tags": {"metalfleet:cluster": "sim-rules", "metalfleet:index": "1"},
                             "config": {"gpu": {"count": 7}}}])
    driver = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    nodes = [driver.order(s) for s in node_specs_for(driver, _spec("sim-rules", count=2))]
    counts = {h["instance_id"]: (Path(h["sandbox"]) / "config.json").read_text().count('"count": 7')
              for h in emu.sim_hosts()}
    assert counts == {nodes[0].id: 0, nodes[1].id: 1}
    with pytest.raises(RuntimeError, match="sim-host rule"):
        emu.set_sim_host_rules([{"tag": {}}])
    emu.reset_faults()  # a reset clears the rules
    [later] = [driver.order(s) for s in node_specs_for(driver, _spec("sim-rules-2", count=2))][1:]
    sandbox = next(h["sandbox"] for h in emu.sim_hosts() if h["instance_id"] == later.id)
    assert '"count": 7' not in (Path(sandbox) / "config.json").read_text()


def test_driver_pins_the_host_key_from_the_console(emu: Ec2Emulator, key: Path, tmp_path: Path) -> None:
    driver = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    specs = node_specs_for(driver, _spec("sim-keys", count=2))
    ordered = [driver.order(s) for s in specs]
    emu.reset_faults()
    nodes = driver.wait([n.id for n in ordered], NodeState.RUNNING, timeout=30)
    assert emu.calls("GetConsoleOutput") == 2
    # reference rule console-output-base64: the simulated console is the answer (base64, as EC2 sends it)
    assert all("console-output-base64" in r.get("rules", []) for r in emu.requests("GetConsoleOutput"))
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
    # what GetConsoleOutput answers is what ec2.yaml lists for it (botocore's GetConsoleOutputResult)
    status, body = signed_call(emu.url, "GetConsoleOutput", {"InstanceId": nodes[0].id})
    assert status == 200 and answered("GetConsoleOutput", body) == reference.load("ec2").operations[
        "GetConsoleOutput"].answers
    output = re.search(r"<output>([^<]+)<", body)
    assert output and "BEGIN SSH HOST KEY KEYS" in base64.b64decode(output[1]).decode()

    for node in nodes:
        driver.release(node.id)
    assert emu.sim_hosts() == []


def test_stopping_the_emulator_stops_its_hosts(ec2_emulator_session: Ec2Emulator, key: Path) -> None:
    with start_ec2_emulator(sim_hosts=True) as other:
        ec2 = ec2_client(other)
        ec2.import_key_pair(KeyName=KEY_PAIR, PublicKeyMaterial=Path(f"{key}.pub").read_bytes())
        ec2.run_instances(ImageId=IMAGE, InstanceType="p5.48xlarge", MinCount=2, MaxCount=2, KeyName=KEY_PAIR,
                          SecurityGroupIds=[_ssh_group(ec2, "sim-stop-ssh")])
        hosts = other.sim_hosts()
        assert len(hosts) == 2 and all(_reachable(h["address"]) for h in hosts)
    assert other.process.returncode == 0
    for h in hosts:
        assert not _reachable(h["address"])
        assert not Path(h["sandbox"]).parent.exists()


def test_ssh_reaches_a_host_only_from_where_its_security_groups_allow(emu: Ec2Emulator, key: Path,
                                                                       tmp_path: Path) -> None:
    """(n): the spec's ssh_ingress_cidrs decide whether the controller gets in; rules applied at once."""
    ec2 = ec2_client(emu)
    driver = AwsDriver(region=REGION, endpoint_url=emu.url, poll=0.02)
    # no ssh_ingress_cidrs: the cluster's own group lets in its members only
    closed = _spec("sim-sg", count=2, network={"subnet_id": default_subnet_id(ZONE)})
    specs = node_specs_for(driver, closed)
    first, second = driver.wait([driver.order(s).id for s in specs], NodeState.RUNNING, timeout=30)
    a, b = first.private_ip, second.private_ip
    assert a and b
    assert not _reachable(a, timeout=0.5)  # the SYN is dropped: a timeout, not a refusal
    with pytest.raises(HostUnreachable) as refused:
        _run(a, list(first.extra["host_keys"]), key, tmp_path / "kh", "hostname", timeout=1)
    assert "timed out" in str(refused.value)
    assert _reachable(a, source=b), "a member of the cluster's group reaches the others (its private IP)"
    assert not _reachable(a, source="127.0.0.3", timeout=0.5)

    # a rule for the controller, added behind metalfleet's back, applies at once; revoked, it is gone again
    [group] = {g["GroupId"] for r in ec2.describe_instances(InstanceIds=[first.id])["Reservations"]
               for i in r["Instances"] for n in i["NetworkInterfaces"] for g in n["Groups"]}
    ssh = [{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": CONTROLLER}]}]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=ssh)
    assert "ssh-by-security-group" in emu.requests("AuthorizeSecurityGroupIngress")[-1].get("rules", [])
    assert _run(a, list(first.extra["host_keys"]), key, tmp_path / "kh", "hostname") == first.id
    ec2.revoke_security_group_ingress(GroupId=group, IpPermissions=ssh)
    assert not _reachable(a, timeout=0.5)

    # the spec's ssh_ingress_cidrs become exactly the group's SSH rules (prepare_cluster: what a stack update runs)
    opened = node_specs_for(driver, _spec("sim-sg", count=2, network={"subnet_id": default_subnet_id(ZONE),
                                                             "ssh_ingress_cidrs": ["127.0.0.2/32"]}))[0]
    AwsDriver(region=REGION, endpoint_url=emu.url).prepare_cluster(opened)
    assert _reachable(a, source="127.0.0.2") and _reachable(b, source="127.0.0.2")
    assert not _reachable(a, timeout=0.5)
    controller = node_specs_for(driver, _spec("sim-sg", count=2))[0]  # [127.0.0.1/32]
    AwsDriver(region=REGION, endpoint_url=emu.url).prepare_cluster(controller)
    assert _run(b, list(second.extra["host_keys"]), key, tmp_path / "kh", "hostname") == second.id
    assert not _reachable(a, source="127.0.0.2", timeout=0.5)
    for node in (first, second):
        driver.release(node.id)
