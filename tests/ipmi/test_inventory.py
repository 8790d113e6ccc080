"""The pool inventory: strict validation with field paths, offerings from the catalogue, and one reader of the
file's shape shared by the driver and the policy adapter (no BMC needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from metalfleet.policies.adapters.inventory import inventory_resources
from metalfleet.policies.model import BmcEndpoint
from metalfleet.policies.yamlpos import load_with_positions
from metalfleet.providers import InvalidSpecError, parse_spec
from metalfleet.providers.ipmi import IpmiDriver, host_entries, parse_pool

POLICY_FIXTURE = Path(__file__).parents[1] / "policies" / "fixtures" / "pool.yaml"


def _pool(**host: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "gpu-01",
                            "bmc": {"address": "10.10.0.11", "protocol": "ipmi",
                                    "credentials": {"user": "admin", "env": "POOL_BMC"}},
                            "ssh": {"address": "10.0.1.11"},
                            "hardware": {"gpu_model": "H100", "gpu_count": 8, "fabric": "infiniband"}}
    for k, v in host.items():
        base[k] = {**base[k], **v} if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return {"pool": "colo-a", "hosts": [base]}


def test_a_valid_inventory_has_hosts_offerings_zones_and_defaults() -> None:
    data = _pool(labels={"zone": "row-a"})
    data["defaults"] = {"bmc": {"cipher_suite": 17, "port": 6230}}
    data["hosts"].append({"name": "gpu-02", "bmc": {"address": "https://10.10.0.12", "protocol": "redfish",
                                                    "credentials": {"user": "root", "file": "/etc/bmc/pw"}},
                          "ssh": {"address": "10.0.1.12"}, "hardware": {"offering": "pool.8xh100-ib"}})
    pool = parse_pool(data)
    assert pool.name == "colo-a" and [h.name for h in pool.hosts] == ["gpu-01", "gpu-02"]
    assert [h.offering for h in pool.hosts] == ["pool.8xh100-ib"] * 2 and pool.offerings() == ["pool.8xh100-ib"]
    assert [h.zone for h in pool.hosts] == ["row-a", "colo-a"]
    one, two = (h.spec.bmc for h in pool.hosts)
    assert (one.cipher_suite, one.effective_port, one.interface) == (17, 6230, "lanplus")
    assert (two.scheme, two.host, two.effective_port, two.verify_tls) == ("https", "10.10.0.12", 6230, True)


@pytest.mark.parametrize(("host", "field"), [
    ({"bmc": {"port": 70000}}, "hosts.0.bmc.port"),
    ({"bmc": {"protocol": "snmp"}}, "hosts.0.bmc.protocol"),
    ({"bmc": {"cipher_suite": 0}}, "hosts.0.bmc.cipher_suite"),
    ({"bmc": {"interface": "lan"}}, "hosts.0.bmc.interface"),
    ({"bmc": {"password": "hunter2"}}, "hosts.0.bmc.password"),  # a secret in the inventory: refused
    ({"bmc": {"credentials": {"user": "admin", "env": "A", "file": "/b"}}}, "hosts.0.bmc.credentials"),
    ({"bmc": {"credentials": {"user": "admin"}}}, "hosts.0.bmc.credentials"),
    ({"ssh": {"port": 0}}, "hosts.0.ssh.port"),
    ({"hardware": {"gpu_model": "B200", "gpu_count": 8}}, "hosts.0.hardware"),
    ({"hardware": {"offering": "p5.48xlarge"}}, "hosts.0.hardware.offering"),
    ({"name": "bad name!"}, "hosts.0.name"),
    ({"rack": "r1"}, "hosts.0.rack"),
])
def test_a_bad_host_names_its_field(host: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        parse_pool(_pool(**host), "pool.yaml")
    assert info.value.field == field, str(info.value)
    assert "pool.yaml" in str(info.value)


def test_top_level_problems_name_their_field() -> None:
    for data, field in (({"hosts": _pool()["hosts"]}, "pool"), ({**_pool(), "colo": 1}, "colo"),
                        ({"pool": "p", "hosts": []}, "hosts"), ({**_pool(), "management_cidrs": ["x/99"]},
                                                                 "management_cidrs.0")):
        with pytest.raises(InvalidSpecError) as info:
            parse_pool(data)
        assert info.value.field == field
    twice = _pool()
    twice["hosts"].append(dict(twice["hosts"][0]))
    with pytest.raises(InvalidSpecError) as info:
        parse_pool(twice)
    assert info.value.field == "hosts.1.name" and "listed twice" in str(info.value)


def test_hosts_as_a_mapping_are_named_by_their_key() -> None:
    data = _pool()
    host = data["hosts"][0]
    del host["name"]
    data["hosts"] = {"gpu-07": host}
    assert [h.name for h in parse_pool(data).hosts] == ["gpu-07"]
    host["bmc"]["port"] = "x"
    with pytest.raises(InvalidSpecError) as info:
        parse_pool(data)
    assert info.value.field == "hosts.gpu-07.bmc.port"


def test_the_driver_and_the_policy_adapter_read_the_same_hosts_and_defaults() -> None:
    """One reader of the shape: the policy fixture's hosts, with the defaults merged, as both see them."""
    data, positions = load_with_positions(POLICY_FIXTURE.read_text(), str(POLICY_FIXTURE), "pool inventory")
    entries = host_entries(data)
    resources = inventory_resources(data, str(POLICY_FIXTURE), positions)
    bmcs = [r for r in resources if isinstance(r, BmcEndpoint)]
    assert [b.host for b in bmcs] == [e.name for e in entries] == ["gpu-01", "gpu-02", "gpu-03"]
    # the defaults' protocol and port reach gpu-01 in both readings
    assert entries[0].data["bmc"]["protocol"] == "ipmi" and entries[0].data["bmc"]["port"] == 623
    assert bmcs[0].protocol == "ipmi" and bmcs[2].protocol == "redfish"


def test_the_driver_refuses_what_a_pool_cannot_do_before_any_bmc_call(tmp_path: Path) -> None:
    inv = tmp_path / "pool.yaml"
    inv.write_text(yaml.safe_dump(_pool()))
    driver = IpmiDriver(inv, tmp_path / "claims.json")
    good: dict[str, Any] = {"name": "c1", "provider": "ipmi", "region": "colo-a", "offering": "pool.8xh100-ib",
                            "count": 1, "image": "ubuntu-22.04"}
    spec = parse_spec(good).node_spec(0, "pool.8xh100-ib")
    driver.validate(spec)
    for over, field in (({"region": "colo-b"}, "region"), ({"zone": "row-z"}, "zone"), ({"image": ""}, "image"),
                        ({"network": {"public_ip": True}}, "network.public_ip"),
                        ({"storage": {"data": [{"size_gib": 100}]}}, "storage.data"),
                        ({"capacity": {"reservation_id": "cr-1"}}, "capacity.reservation_id")):
        bad = parse_spec({**good, **over}).node_spec(0, "pool.8xh100-ib")
        with pytest.raises(InvalidSpecError) as info:
            driver.order(bad)
        assert info.value.field == field
    with pytest.raises(InvalidSpecError) as info:
        IpmiDriver(inv, region="colo-b")
    assert info.value.field == "region"
    assert not (tmp_path / "claims.json").exists(), "nothing was claimed"
    # credentials that cannot be read name the reference, never a value
    with pytest.raises(InvalidSpecError) as info:
        driver.bmc(driver.pool.hosts[0])
    assert info.value.field == "hosts.0.bmc.credentials.env" and "POOL_BMC" in str(info.value)


def test_importing_the_package_and_its_inventory_module_loads_no_sdk() -> None:
    code = ("import sys, metalfleet.providers.ipmi, metalfleet.providers.ipmi.inventory;"
            "print(sorted(m for m in ('pyghmi', 'requests', 'pydantic', 'tenacity') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
