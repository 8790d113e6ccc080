"""The pool driver against real BMC protocols: ipmi_sim over IPMI 2.0 (pyghmi) and sushy-tools over Redfish.

Each pool host is a simulated GPU host whose machine runs only while its BMC simulator says power is on, so a
node that shows RUNNING was really powered on through its BMC (and its sshd answered)."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import requests
import yaml

from metalfleet.providers import (
    AuthError,
    CapacityError,
    NodeState,
    OrderFailed,
    ProviderError,
    TransientError,
    node_specs_for,
    order_cluster,
    release_cluster,
)
from metalfleet.providers.contract import PowerDriver, PowerState
from metalfleet.providers.ipmi import IpmiDriver
from metalfleet.testing.bmc import PSU_FAILURE_SEL, BmcPool, start_bmc_pool

from .conftest import FAST, OFFERING, POOL, CountingPolicy, cluster_spec

pytestmark = pytest.mark.requires_root("the pool's simulated GPU hosts")


def test_order_powers_hosts_on_through_their_bmcs_and_release_powers_them_off(
        driver: IpmiDriver, bmc_pool: BmcPool, cluster: str) -> None:
    assert [bmc_pool.power(h.name) for h in bmc_pool.hosts] == ["off"] * 4
    nodes = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster, count=4)), policy=FAST, timeout=60)

    by_host = {n.extra["host"]: n for n in nodes}
    assert sorted(by_host) == ["host0", "host1", "host2", "host3"]
    assert {n.extra["bmc_protocol"] for n in nodes} == {"ipmi", "redfish"}
    for h in bmc_pool.hosts:
        node = by_host[h.name]
        assert bmc_pool.power(h.name) == "on", f"{h.name}'s BMC simulator was not told to power on"
        assert node.state == NodeState.RUNNING and node.private_ip == h.address
        assert node.extra["host_keys"] == [h.vm.host_key] and driver.host_keys(node.id) == (h.vm.host_key,)
        assert node.zone == POOL and node.region == POOL and node.offering == OFFERING
    assert any("set power 1" in line for line in bmc_pool.bmc_log("host0"))  # IPMI chassis control, not a shortcut
    assert bmc_pool.redfish.calls("POST /redfish/v1/Systems/{id}/Actions/ComputerSystem.Reset") == 2

    released = release_cluster(driver, cluster, policy=FAST)
    assert sorted(released) == sorted(n.id for n in nodes)
    assert [bmc_pool.power(h.name) for h in bmc_pool.hosts] == ["off"] * 4
    assert all(driver.get(n.id).state == NodeState.TERMINATED for n in nodes)
    assert driver.list_nodes(cluster) == []
    # the hosts are the pool's again: the next cluster claims them (as new nodes)
    again = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster + "-b", count=4)), policy=FAST,
                          timeout=60)
    assert sorted(n.extra["host"] for n in again) == ["host0", "host1", "host2", "host3"]
    assert not {n.id for n in again} & {n.id for n in nodes}
    release_cluster(driver, cluster + "-b", policy=FAST)


def _simulator_power(pool: BmcPool, host: str, want: str, timeout: float = 5.0) -> bool:
    """Whether the simulator's own record of ``host`` reaches ``want``: the Redfish emulator's watcher writes its
    power log a poll (50 ms) after the change, so a loaded machine may read it a moment late."""
    deadline = time.monotonic() + timeout
    while pool.power(host) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return pool.power(host) == want


def test_power_capability_acts_and_waits_and_the_node_state_follows(driver: IpmiDriver, bmc_pool: BmcPool,
                                                                     cluster: str) -> None:
    assert isinstance(driver, PowerDriver)
    nodes = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster, count=3)), policy=FAST, timeout=60)
    try:
        by_protocol = {bmc_pool[n.extra["host"]].protocol: n for n in nodes}  # which host a node gets may vary
        for node in (by_protocol["ipmi"], by_protocol["redfish"]):
            host = node.extra["host"]
            driver.set_power(node.id, PowerState.OFF, timeout=30)
            assert driver.power_state(node.id) == PowerState.OFF and _simulator_power(bmc_pool, host, "off")
            assert driver.wait([node.id], NodeState.STOPPED, timeout=10, poll=0.05)[0].state == NodeState.STOPPED
            driver.set_power(node.id, PowerState.ON, timeout=30)
            assert _simulator_power(bmc_pool, host, "on")
            assert driver.wait([node.id], NodeState.RUNNING, timeout=20, poll=0.05)[0].state == NodeState.RUNNING
        ipmi_node = by_protocol["ipmi"]
        driver.set_boot_device(ipmi_node.id, "pxe")
        assert bmc_pool.boot_device(ipmi_node.extra["host"]) == "pxe"
    finally:
        release_cluster(driver, cluster, policy=FAST)


def test_provisioning_hook_sets_a_one_time_pxe_boot_and_power_cycles(inventory: Path, tmp_path: Path,
                                                                     bmc_pool: BmcPool, cluster: str) -> None:
    driver = IpmiDriver(inventory, tmp_path / "claims.json", poll=0.05, provision={"boot_device": "pxe"})
    for h in ("host0", "host2"):  # running before the claim: re-imaging must cycle them
        driver.bmc(driver.pool.host(h)).set_power(PowerState.ON, timeout=30)  # type: ignore[arg-type]
    spec = cluster_spec(cluster, count=3)
    patches = len(bmc_pool.redfish.requests("PATCH /redfish/v1/Systems/{id}"))  # the pool is the session's
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=60)
    try:
        assert bmc_pool.boot_device("host0") == "pxe"
        log = bmc_pool.bmc_log("host0")
        assert any("set boot pxe" in ln for ln in log), log
        assert [ln.split()[-1] for ln in log if "set power" in ln][-2:] == ["0", "1"], "power cycled after the boot set"
        redfish = next(h for h in bmc_pool.hosts if h.name == "host2")
        doc = requests.get(f"{bmc_pool.redfish.url}{redfish.system}", auth=("admin", bmc_pool.password),
                           timeout=10).json()
        assert doc["Boot"]["BootSourceOverrideTarget"] == "Pxe"
        # sushy-tools always renders BootSourceOverrideEnabled as Continuous: check what it was sent instead
        [patch] = bmc_pool.redfish.requests("PATCH /redfish/v1/Systems/{id}")[patches:]
        assert patch["params"] == {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}}
        assert all(n.state == NodeState.RUNNING for n in nodes)
        # a re-run of the order finds its claims provisioned: no second re-imaging
        before = len(bmc_pool.bmc_log("host0"))
        again = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=60)
        assert [n.id for n in again] == [n.id for n in nodes]
        assert not any("set boot" in ln for ln in bmc_pool.bmc_log("host0")[before:])
    finally:
        release_cluster(driver, cluster, policy=FAST)


def _with_password(inventory: Path, tmp_path: Path, hosts: list[str], password: str) -> Path:
    data = yaml.safe_load(inventory.read_text())
    secret = tmp_path / "wrong-password"
    secret.write_text(password + "\n")
    for h in data["hosts"]:
        if h["name"] in hosts:
            h["bmc"]["credentials"]["file"] = str(secret)
    out = tmp_path / "pool-wrong.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.mark.parametrize("host", ["host0", "host2"])
def test_a_wrong_bmc_password_is_an_auth_error_naming_the_host_never_retried(
        inventory: Path, tmp_path: Path, bmc_pool: BmcPool, cluster: str, host: str) -> None:
    wrong = "WrongPw-0xDEADBEEF"
    inv = _with_password(inventory, tmp_path, [host], wrong)
    only = yaml.safe_load(inv.read_text())
    only["hosts"] = [h for h in only["hosts"] if h["name"] == host]
    inv.write_text(yaml.safe_dump(only))
    driver = IpmiDriver(inv, tmp_path / "claims.json", poll=0.05)
    policy = CountingPolicy()
    with pytest.raises(OrderFailed) as info:
        order_cluster(driver, node_specs_for(driver, cluster_spec(cluster)), policy=policy, timeout=30)
    cause = info.value.cause
    assert isinstance(cause, AuthError) and not cause.retryable
    assert policy.retries == 0, "an auth error is never retried"
    assert f"BMC of {host}" in str(cause) and wrong not in str(info.value)
    assert bmc_pool.power(host) == "off"
    assert driver.list_nodes(cluster) == [], "the claim is returned when the order fails"
    if host == "host2":  # Redfish: the service saw exactly one refused request per call, no retry
        refused = [r for r in bmc_pool.redfish.requests() if r.get("status") == 401]
        assert refused and len(refused) <= 2, refused


def test_an_unreachable_bmc_is_retried_then_fails_with_a_clear_error(inventory: Path, tmp_path: Path,
                                                                      cluster: str) -> None:
    data = yaml.safe_load(inventory.read_text())
    dead = next(h for h in data["hosts"] if h["name"] == "host2")
    dead["bmc"]["port"] = 9  # discard: nothing listens, the connection is refused
    data["hosts"] = [dead]
    inv = tmp_path / "pool-dead.yaml"
    inv.write_text(yaml.safe_dump(data))
    driver = IpmiDriver(inv, tmp_path / "claims.json", poll=0.05)
    policy = CountingPolicy(attempts=3)
    with pytest.raises(OrderFailed) as info:
        order_cluster(driver, node_specs_for(driver, cluster_spec(cluster)), policy=policy, timeout=10)
    cause = info.value.cause
    assert isinstance(cause, TransientError)
    assert policy.retries == 2, "retried until the policy's attempts ran out"
    assert "BMC of host2 (http://127.0.0.1:9" in str(cause) and "did not answer" in str(cause)
    assert driver.list_nodes(cluster) == []


def test_an_unreachable_ipmi_bmc_is_a_transient_error_naming_it(inventory: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(inventory.read_text())
    dead = next(h for h in data["hosts"] if h["name"] == "host0")
    dead["bmc"]["port"] = 9
    data["hosts"] = [dead]
    inv = tmp_path / "pool-dead.yaml"
    inv.write_text(yaml.safe_dump(data))
    driver = IpmiDriver(inv, tmp_path / "claims.json")
    with pytest.raises(TransientError) as info:
        driver.bmc(driver.pool.host("host0")).power_state()
    assert info.value.retryable and "BMC of host0 (ipmi 127.0.0.1:9)" in str(info.value)


def test_capacity_error_names_the_pool_and_the_offering(driver: IpmiDriver, cluster: str) -> None:
    with pytest.raises(OrderFailed) as info:
        order_cluster(driver, node_specs_for(driver, cluster_spec(cluster, count=5)), policy=FAST, timeout=60)
    cause = info.value.cause
    assert isinstance(cause, CapacityError) and cause.zone == POOL and not cause.retryable
    assert f"no free host in pool {POOL}" in str(cause) and "pool.8xh100-ib (8x H100, infiniband)" in str(cause)
    assert "4 host(s) of it, 4 claimed" in str(cause)
    assert driver.list_nodes(cluster) == [], "the hosts claimed before the failure are returned"


CONCURRENT = textwrap.dedent("""
    import json, sys
    from metalfleet.providers import RetryPolicy, parse_spec, node_specs_for, order_cluster, OrderFailed
    from metalfleet.providers.ipmi import IpmiDriver
    job = json.loads(sys.argv[1])
    driver = IpmiDriver(job["inventory"], job["claims"], poll=0.05)
    print("READY", flush=True)
    sys.stdin.readline()  # both start ordering at once
    try:
        nodes = order_cluster(driver, node_specs_for(driver, parse_spec(job["spec"])), max_workers=3,
                              policy=RetryPolicy(attempts=3, base=0.01, cap=0.05), timeout=60)
        print("GOT " + json.dumps(sorted(n.extra["host"] for n in nodes)), flush=True)
    except OrderFailed as exc:
        print("FAILED " + type(exc.cause).__name__, flush=True)
""")


def test_two_concurrent_orders_in_two_processes_never_share_a_host(inventory: Path, tmp_path: Path,
                                                                    cluster: str) -> None:
    claims = tmp_path / "claims.json"
    procs = []
    for name in (cluster + "-a", cluster + "-b"):
        job = {"inventory": str(inventory), "claims": str(claims),
               "spec": cluster_spec(name, count=2).model_dump(mode="json")}
        procs.append(subprocess.Popen([sys.executable, "-c", CONCURRENT, json.dumps(job)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True))
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=120)[0].strip().splitlines()[-1] for p in procs]
    # 4 hosts, two orders of 2 at once: both succeed, on disjoint hosts (a host claimed twice would leave one
    # order with a host the other holds, and the two sets would overlap)
    assert all(o.startswith("GOT ") for o in outs), outs
    a, b = (json.loads(o.split(" ", 1)[1]) for o in outs)
    assert len(a) == len(b) == 2 and not set(a) & set(b) and sorted(a + b) == ["host0", "host1", "host2", "host3"]
    driver = IpmiDriver(inventory, claims)
    state = json.loads(claims.read_text())
    held = [n["host"] for n in state["nodes"].values() if n["state"] == "claimed"]
    assert sorted(held) == sorted(a + b)
    for name in (cluster + "-a", cluster + "-b"):
        release_cluster(driver, name, policy=FAST)


def test_the_claim_store_gives_each_host_to_one_of_many_racing_processes(tmp_path: Path) -> None:
    """Eight processes claim one of four hosts each, all at once, through the file store's lock."""
    script = textwrap.dedent("""
        import json, sys
        from metalfleet.providers.ipmi.pool import FileClaimStore, claim_host
        store = FileClaimStore(sys.argv[1])
        sys.stdin.readline()
        with store.transaction() as st:
            got = claim_host(st, key=sys.argv[2], candidates=["h0", "h1", "h2", "h3"], record={"tags": {}})
        print(json.dumps(got and got["host"]))
    """)
    path = tmp_path / "claims.json"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), f"key-{i}"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for i in range(8)]
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    hosts = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sorted(h for h in hosts if h) == ["h0", "h1", "h2", "h3"] and hosts.count(None) == 4
    state = json.loads(path.read_text())
    assert sorted(state["hosts"]) == ["h0", "h1", "h2", "h3"] and len(state["keys"]) == 4


def test_no_bmc_password_in_logs_state_errors_or_pickles(driver: IpmiDriver, bmc_pool: BmcPool, cluster: str,
                                                         tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = bmc_pool.password
    caplog.set_level(logging.DEBUG)
    nodes = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster, count=4)), policy=FAST, timeout=60)
    driver.set_tags(nodes[0].id, {"metalfleet:acceptance": "passed"})
    texts = [json.dumps([n.to_dict() for n in nodes]), json.dumps([driver.get(n.id).to_dict() for n in nodes]),
             repr(driver), repr(driver.bmc(driver.pool.host("host0"))),  # type: ignore[arg-type]
             repr(driver.bmc(driver.pool.host("host2"))), caplog.text,  # type: ignore[arg-type]
             pickle.dumps(driver).decode("latin-1"), Path(driver.claims_path).read_text(),
             (tmp_path / "pool.yaml").read_text()]
    release_cluster(driver, cluster, policy=FAST)
    texts.append(Path(driver.claims_path).read_text())
    for text in texts:
        assert secret not in text
    assert caplog.text, "the run logged nothing, so the log check proves nothing"


def test_a_failed_power_supply_in_the_sel_quarantines_the_host(tmp_path: Path, cluster: str) -> None:
    """A separate two-host IPMI pool: host0's BMC has "Power Supply #1: failure detected" in its SEL."""
    with start_bmc_pool(("ipmi", "ipmi"), emu_extra={"host0": [PSU_FAILURE_SEL]}) as pool:
        inv = pool.write_inventory(tmp_path / "pool.yaml", pool=POOL)
        driver = IpmiDriver(inv, tmp_path / "claims.json", poll=0.05)
        assert driver.bmc(driver.pool.host("host0")).critical_events() == [  # type: ignore[arg-type]
            "power supply failure detected (sensor 0x01)"]
        assert driver.bmc(driver.pool.host("host1")).critical_events() == []  # type: ignore[arg-type]

        [node] = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster)), policy=FAST, timeout=60)
        assert node.extra["host"] == "host1", "the faulty host is never handed out"
        assert driver.quarantined() == {"host0": "BMC reports: power supply failure detected (sensor 0x01)"}
        assert pool.power("host0") == "off" and pool.power("host1") == "on"
        with pytest.raises(OrderFailed) as info:
            order_cluster(driver, node_specs_for(driver, cluster_spec(cluster + "-b")), policy=FAST, timeout=60)
        assert isinstance(info.value.cause, CapacityError) and "1 claimed, 1 quarantined" in str(info.value.cause)
        release_cluster(driver, cluster, policy=FAST)
        driver.clear_quarantine("host0")
        assert driver.quarantined() == {}


def test_the_acceptance_gate_fails_a_node_whose_bmc_reports_a_critical_fault(
        bmc_pool: BmcPool, tmp_path: Path, cluster: str) -> None:
    """After the claim, host0's BMC logs "Temperature #0x30: upper critical going high" (an Add SEL Entry command
    over IPMI, sent with ipmitool, as management software logs an event): the gate quarantines that node, naming
    the fault; host1's verdict has no BMC fault in it."""
    from metalfleet.bootstrap.acceptance import accept_cluster

    inv = bmc_pool.write_inventory(tmp_path / "pool.yaml", pool=POOL, hosts=["host0", "host1"])
    driver = IpmiDriver(inv, tmp_path / "claims.json", poll=0.05)
    spec = cluster_spec(cluster, count=2, ssh={"user": "ubuntu", "private_key": str(bmc_pool.fleet.client_key),
                                               "known_hosts": str(tmp_path / "known_hosts")},
                        acceptance={"threshold": 0.9})
    nodes = order_cluster(driver, node_specs_for(driver, spec), policy=FAST, timeout=60)
    host0 = bmc_pool["host0"]
    ipmitool = ["ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", str(host0.port), "-U", "admin", "-E"]
    env = {**os.environ, "IPMI_PASSWORD": bmc_pool.password}
    try:
        # Add SEL Entry (netfn storage 0x0a, cmd 0x44): a system event record, sensor type 0x01 (temperature) number
        # 0x30, event type 0x01 (threshold), offset 0x09 (upper critical going high)
        record = [f"{b:#04x}" for b in (0, 0, 0x02, 0, 0, 0, 0, 0x20, 0, 0x04, 0x01, 0x30, 0x01, 0x59, 0xFF, 0xFF)]
        subprocess.run([*ipmitool, "raw", "0x0a", "0x44", *record], env=env, check=True, capture_output=True,
                       timeout=30)
        by_host = {n.extra["host"]: n for n in nodes}
        assert driver.critical_events(by_host["host0"].id) == [
            "temperature sensor 0x30 above its upper critical threshold"]
        outcome = accept_cluster(driver, spec, nodes, replace_failed=False, policy=FAST)
        reasons = {q.node_id: q.reason for q in outcome.quarantined}
        assert by_host["host0"].id in reasons, outcome.summary()
        assert reasons[by_host["host0"].id].startswith(
            "BMC reports a critical fault: temperature sensor 0x30 above its upper critical threshold")
        assert "BMC" not in reasons.get(by_host["host1"].id, "")
        assert driver.get(by_host["host0"].id).tags["metalfleet:acceptance"] == "quarantined"
    finally:
        subprocess.run([*ipmitool, "sel", "clear"], env=env, check=False, capture_output=True, timeout=30)
        release_cluster(driver, cluster, policy=FAST)


def test_an_ipmi_bmc_that_only_agrees_to_a_weaker_cipher_suite_than_configured_is_refused(
        bmc_pool: BmcPool, tmp_path: Path) -> None:
    """ipmi_sim negotiates RMCP+ cipher suite 3 (SHA-1) only: an inventory that asks for 17 gets a clear error."""
    inv = bmc_pool.write_inventory(tmp_path / "pool.yaml", pool=POOL, hosts=["host1"],
                                   host_fields={"host1": {"bmc": {"cipher_suite": 17}}})
    driver = IpmiDriver(inv, tmp_path / "claims.json")
    with pytest.raises(ProviderError) as info:
        driver.bmc(driver.pool.host("host1")).power_state()  # type: ignore[arg-type]
    assert "agreed only to cipher suite 3, and the inventory asks for 17" in str(info.value)
    assert not info.value.retryable
    three = IpmiDriver(bmc_pool.write_inventory(tmp_path / "pool3.yaml", pool=POOL, hosts=["host1"]),
                       tmp_path / "claims.json")
    assert three.bmc(three.pool.host("host1")).power_state() in (PowerState.ON, PowerState.OFF)  # type: ignore[arg-type]


def test_release_power_on_leaves_the_host_running_and_returns_it(inventory: Path, tmp_path: Path,
                                                                 bmc_pool: BmcPool, cluster: str) -> None:
    driver = IpmiDriver(inventory, tmp_path / "claims.json", poll=0.05, release_power="on")
    [node] = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster)), policy=FAST, timeout=60)
    host = node.extra["host"]
    release_cluster(driver, cluster, policy=FAST)
    assert bmc_pool.power(host) == "on", "release_power: on leaves the host running"
    assert driver.get(node.id).state == NodeState.TERMINATED and driver.list_nodes(cluster) == []
    [again] = order_cluster(driver, node_specs_for(driver, cluster_spec(cluster + "-b")), policy=FAST, timeout=60)
    assert again.extra["host"] == host and again.id != node.id, "the host is the pool's again"
    release_cluster(driver, cluster + "-b", policy=FAST)
