"""A VM-mode host's SSH source rules (VmHost.set_ssh_allow): dropped, not refused, from anywhere else; kept
across a reboot; the host's own address always in. The EC2 emulator drives them from security groups
(tests/aws/test_sim_hosts.py); here they are set directly."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from metalfleet.testing import usage as areas
from metalfleet.testing.hosts.vm import VmHost, boot_vm_host

pytestmark = pytest.mark.requires_root("VM-mode hosts (namespaces, mounts, sshd)")


def _connect(host: VmHost, source: str, timeout: float = 0.5) -> str:
    """'open', 'refused' or 'dropped' (no answer within ``timeout``) for a TCP connect from ``source``."""
    with socket.socket() as s:
        s.bind((source, 0))
        s.settimeout(timeout)
        try:
            s.connect((host.address, host.port))
            return "open"
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "dropped"


@pytest.fixture(scope="module")
def host() -> Iterator[VmHost]:
    h = boot_vm_host("i-sshallow", offering="p4d.24xlarge")
    try:
        yield h
    finally:
        h.stop()


def test_ssh_sources_are_filtered_as_a_security_group_does(host: VmHost) -> None:
    areas.note("sim host")
    host.set_ssh_allow(None)
    assert _connect(host, "127.0.0.1") == "open"

    host.set_ssh_allow(["127.0.0.2/32", "127.9.0.0/16"])
    t = time.monotonic()
    assert _connect(host, "127.0.0.1") == "dropped" and time.monotonic() - t >= 0.45
    assert _connect(host, "127.0.0.2") == "open" and _connect(host, "127.9.8.7") == "open"
    assert _connect(host, host.address) == "open", "a host always reaches itself"

    host.power_off()
    assert _connect(host, "127.0.0.2") == "refused", "a host that is off refuses (nothing listens)"
    host.power_on(boot=True)
    host.wait_listening()
    assert _connect(host, "127.0.0.1") == "dropped" and _connect(host, "127.0.0.2") == "open", "kept across reboot"

    host.set_ssh_allow([])
    assert _connect(host, "127.0.0.2") == "dropped"
    host.set_ssh_allow(None)
    assert _connect(host, "127.0.0.1") == "open"
