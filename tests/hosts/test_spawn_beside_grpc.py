"""Simulated hosts start in a test worker where gRPC runs (the Pulumi engine tests' language host and providers run
in the same pytest workers), and their daemons still die with the process that started them.

A ``preexec_fn`` makes subprocess fork rather than vfork, and a fork while gRPC's threads are busy may abort in
gRPC's fork handler before the exec: the sshd of a simulated host then "exited -6" (seen in ``make test``). The
daemons get their parent-death signal from ``setpriv --pdeathsig`` instead (kit.process.dies_with_parent).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from concurrent import futures

import grpc
import pytest

from metalfleet.testing.hosts.harness import start_hosts
from metalfleet.testing.kit.process import dies_with_parent

pytestmark = pytest.mark.requires_root("simulated hosts' sshd")


def test_hosts_come_up_while_grpc_is_busy_in_this_process() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=10)
        for _ in range(3):
            fleet = start_hosts(6, "p5")
            try:
                assert all(h.proc is not None and h.proc.poll() is None for h in fleet.hosts)
            finally:
                fleet.stop()
    finally:
        channel.close()
        server.stop(None)


def test_a_daemon_started_so_ends_when_its_starter_ends() -> None:
    starter = textwrap.dedent(f"""
        import subprocess, sys
        p = subprocess.Popen({dies_with_parent(["sleep", "300"])!r})
        print(p.pid, flush=True)
        sys.stdin.read()  # until the test closes it: then this process ends
    """)
    proc = subprocess.Popen([sys.executable, "-c", starter], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    child = int(proc.stdout.readline())
    proc.stdin.close()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{child}/stat") as fh:
            if fh.read().split(") ", 1)[1].startswith("Z"):
                return  # ended, not yet reaped by init
        time.sleep(0.05)
    raise AssertionError(f"sleep {child} outlived the process that started it")
