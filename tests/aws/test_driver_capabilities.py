"""AwsDriver's optional capabilities on the plain emulator: set_tags (CreateTags) and host keys from the console."""

from __future__ import annotations

import pytest

from metalfleet.bootstrap.acceptance.quarantine import TaggingDriver, tag_node
from metalfleet.providers import NodeState
from metalfleet.providers.aws import AwsDriver
from metalfleet.providers.console import host_keys_from_console
from metalfleet.providers.errors import InvalidSpecError, NotFoundError
from metalfleet.testing.ec2 import Ec2Emulator

from .conftest import Specs

ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKUQkLpYDadwiv/9Mm6BMRAgFWACGPFobbSrNqnIUiOB"
ECDSA = ("ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBFq0rVKCkPRa4zJ0N8mPbMkS"
         "0Wm3f4+RxN1Uq2gVzZ4aN9mGd0zjRrPq2mX1b5I4kXtmS8fNpGQ1cqzF0y9F8iE=")


def test_set_tags_adds_and_overwrites_and_keeps_the_others(driver: AwsDriver, emulator: Ec2Emulator,
                                                           specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    node = driver.order(spec)
    assert isinstance(driver, TaggingDriver)
    emulator.reset_faults()

    driver.set_tags(node.id, {"metalfleet:acceptance": "quarantined", "team": "gpu-ops"})

    [req] = emulator.requests("CreateTags")
    assert req["params"]["ResourceId.1"] == node.id and "ResourceId.2" not in req["params"]  # the instance only
    tags = driver.get(node.id).tags
    assert tags["metalfleet:acceptance"] == "quarantined" and tags["team"] == "gpu-ops"
    assert tags["cost-center"] == "4711" and tags["Name"] == spec.name
    assert tags["metalfleet:cluster"] == specs.cluster and tags["metalfleet:key"] == spec.idempotency_key
    # what the acceptance gate calls
    assert tag_node(driver, node.id, {"metalfleet:acceptance": "passed"})
    assert driver.get(node.id).tags["metalfleet:acceptance"] == "passed"


def test_set_tags_on_an_unknown_instance_is_not_found(driver: AwsDriver, emulator: Ec2Emulator) -> None:
    with pytest.raises(NotFoundError) as exc:
        driver.set_tags("i-0123456789abcdef0", {"a": "b"})
    assert exc.value.code == "InvalidInstanceID.NotFound"
    with pytest.raises(NotFoundError):
        driver.set_tags("i-0123456789abcdef0", {})


def test_set_tags_refuses_reserved_and_oversized_tags_before_any_call(driver: AwsDriver,
                                                                      emulator: Ec2Emulator) -> None:
    for bad in ({"aws:owner": "x"}, {"k" * 129: "x"}, {"reason": "x" * 257}):
        with pytest.raises(InvalidSpecError) as exc:
            driver.set_tags("i-0123456789abcdef0", bad)
        key = next(iter(bad))
        assert exc.value.field == f"tags.{key}" and exc.value.value in (key, bad[key])
    assert emulator.calls() == 0


def test_set_tags_takes_free_text_values_as_ec2_does(driver: AwsDriver, emulator: Ec2Emulator, specs: Specs) -> None:
    """CreateTags takes any character; the gate's reason tag is free text (spec tags are held to the portable set)."""
    node = driver.order(specs.node_specs(driver)[0])
    reason = "gpu: expected 8 GPUs, found 7 (nvidia-smi); efa 32/32"
    driver.set_tags(node.id, {"metalfleet:acceptance-reason": reason})
    assert driver.get(node.id).tags["metalfleet:acceptance-reason"] == reason


def test_host_keys_from_console_output() -> None:
    boot = ("[    6.03] cloud-init[512]: Generating public/private ed25519 key pair.\r\n"
            "<14>Dec  1 00:00:06 cloud-init: -----BEGIN SSH HOST KEY FINGERPRINTS-----\r\n"
            "<14>Dec  1 00:00:06 cloud-init: 256 SHA256:cYSb6ysm77feIjggqhGNfbE2LnYt5XzHA5Lpk root@ip (ED25519)\r\n"
            "<14>Dec  1 00:00:06 cloud-init: -----END SSH HOST KEY FINGERPRINTS-----\r\n"
            "-----BEGIN SSH HOST KEY KEYS-----\r\n"
            f"{ECDSA} root@ip-10-0-1-5\r\n"
            f"{ED} root@ip-10-0-1-5\r\n"
            "-----END SSH HOST KEY KEYS-----\r\n"
            "ip-10-0-1-5 login: ")
    assert host_keys_from_console(boot) == (f"{ECDSA} root@ip-10-0-1-5", f"{ED} root@ip-10-0-1-5")
    # a console holds every boot: the last block counts; a block cut off by the buffer does not
    rebooted = boot.replace("10-0-1-5", "old") + "\n" + boot + "\n-----BEGIN SSH HOST KEY KEYS-----\nssh-ed25519 AAAA"
    assert host_keys_from_console(rebooted) == (f"{ECDSA} root@ip-10-0-1-5", f"{ED} root@ip-10-0-1-5")
    assert host_keys_from_console("-----BEGIN SSH HOST KEY KEYS-----\n[  9.1] " + ED + "\n"
                                  "-----END SSH HOST KEY KEYS-----") == (ED,)
    assert host_keys_from_console("") == ()
    assert host_keys_from_console("Linux version 5.15.0-1051-aws\nBIOS-provided physical RAM map:\n") == ()


def test_a_console_without_keys_leaves_host_keys_out(driver: AwsDriver, emulator: Ec2Emulator,
                                                     specs: Specs) -> None:
    """On AWS the console lags the boot: no keys is normal and not an error (bootstrap uses known_hosts)."""
    [spec] = specs.node_specs(driver)
    node = driver.order(spec)
    [running] = driver.wait([node.id], NodeState.RUNNING, timeout=30, poll=0.02)
    assert "host_keys" not in running.extra
    assert driver.host_keys(node.id) == ()
    assert emulator.calls("GetConsoleOutput") == 2  # not cached while empty: it may fill later


def test_an_unreadable_console_does_not_fail_the_wait(driver: AwsDriver, emulator: Ec2Emulator,
                                                      specs: Specs) -> None:
    [spec] = specs.node_specs(driver)
    node = driver.order(spec)
    emulator.set_faults(script=[{"action": "GetConsoleOutput", "code": "UnauthorizedOperation", "status": 403,
                                 "times": -1}])
    [running] = driver.wait([node.id], NodeState.RUNNING, timeout=30, poll=0.02)
    assert running.state == NodeState.RUNNING and "host_keys" not in running.extra
    assert emulator.stats()["faults"] == {"UnauthorizedOperation": 1}
