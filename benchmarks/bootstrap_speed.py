"""Bootstrap engine speed: metalfleet vs a plain paramiko thread pool (and Ansible when it installs).

Run on demand (not part of the tests; needs root for the simulated sshd hosts)::

    .venv/bin/python benchmarks/bootstrap_speed.py 8 32 64 [--no-ansible]

The same workload on every host, against real sshd test hosts (tests/hosts):
  * upload a 1 MiB file and verify its sha256 on the host,
  * render a 20-line config file,
  * run 20 small idempotent commands (mkdir -p of 20 directories),
  * read one fact (/etc/os-release).
Each tool runs it twice: a first run and a re-run (metalfleet's re-run finds everything in place
and only reads facts; the baseline script has no facts and repeats the work). Wall times are
printed as a ratio to the plain paramiko baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko

from metalfleet.bootstrap import Command, NoOp, Profile, RunOptions, Step, StepContext, Upload, run_bootstrap
from metalfleet.bootstrap.facts import Fact, FactValues, FileHashes, OsRelease, PathsExist
from metalfleet.testing.hosts.harness import HostFleet, start_hosts

ROOT = Path(__file__).resolve().parent.parent

BLOB = random.Random(7).randbytes(1 << 20)
CONFIG = "".join(f"setting_{i:02d} = value-{i * 7}\n" for i in range(20)).encode()
DIRS = [f"/opt/bench/d{i:02d}" for i in range(20)]


# --------------------------------------------------------------------------------------------
# metalfleet: one step, facts-gated


@dataclass(frozen=True)
class BenchSettings:
    pass


class BenchStep(Step[BenchSettings]):
    name = "bench"
    Settings = BenchSettings

    def _facts(self, ctx: StepContext) -> tuple[FileHashes, PathsExist, OsRelease]:
        return (FileHashes((ctx.path("/opt/bench/blob.bin"), ctx.path("/etc/bench.conf"))),
                PathsExist(tuple(ctx.path(d) for d in DIRS)), OsRelease(ctx.path("/etc/os-release")))

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return self._facts(ctx)

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Any]:
        hashes, dirs, osr = self._facts(ctx)
        assert facts[osr].get("ID")
        for path, content in ((ctx.path("/opt/bench/blob.bin"), BLOB), (ctx.path("/etc/bench.conf"), CONFIG)):
            if facts[hashes][path] == hashlib.sha256(content).hexdigest():
                yield NoOp(f"{path} up to date")
            else:
                yield Upload(path, content)
        for d in DIRS:
            if ctx.path(d) in facts[dirs]:
                yield NoOp(f"{d} exists")
            else:
                yield Command(("mkdir", "-p", ctx.path(d)))


PROFILE = Profile("bench", (BenchStep,))


def run_metalfleet(fleet: HostFleet, workers: int) -> tuple[float, Any]:
    t0 = time.perf_counter()
    report = run_bootstrap(fleet.inventory(), PROFILE, max_workers=workers,
                           options=RunOptions(log_dir=fleet.base / "logs"))
    elapsed = time.perf_counter() - t0
    if not report.ok:
        raise SystemExit(report.format_text())
    return elapsed, report


# --------------------------------------------------------------------------------------------
# baseline: what one writes with plain paramiko and a thread pool


def baseline_host(fleet: HostFleet, i: int, nodelay: bool) -> None:
    sim = fleet[i]
    client = paramiko.SSHClient()
    client.load_host_keys(str(fleet.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    sock = socket.create_connection((sim.address, sim.port), timeout=10)
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.connect(sim.address, username="mfnode", key_filename=str(fleet.client_key), allow_agent=False,
                   look_for_keys=False, sock=sock)

    def run(cmd: str) -> str:
        _, out, _ = client.exec_command(f"sudo -n {cmd}")
        text = out.read().decode()
        if out.channel.recv_exit_status() != 0:
            raise RuntimeError(f"{sim.name}: {cmd} failed")
        return text

    try:
        sftp = client.open_sftp()
        run(f"mkdir -p {shlex.quote(str(sim.file('/opt/bench')))}")
        blob = str(sim.file("/opt/bench/blob.bin"))
        sftp.putfo(__import__("io").BytesIO(BLOB), blob)
        if run(f"sha256sum {shlex.quote(blob)}").split()[0] != hashlib.sha256(BLOB).hexdigest():
            raise RuntimeError("checksum")
        sftp.putfo(__import__("io").BytesIO(CONFIG), str(sim.file("/etc/bench.conf")))
        sftp.close()
        for d in DIRS:
            run(f"mkdir -p {shlex.quote(str(sim.file(d)))}")
        assert "ID=" in run(f"cat {shlex.quote(str(sim.file('/etc/os-release')))}")
    finally:
        client.close()


def run_baseline(fleet: HostFleet, workers: int, nodelay: bool = False) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda i: baseline_host(fleet, i, nodelay), range(len(fleet))))
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------------
# Ansible (optional, in its own throwaway venv)


def ansible_venv() -> Path | None:
    venv = Path(tempfile.gettempdir()) / "mf-bench-ansible"
    exe = venv / "bin" / "ansible-playbook"
    if exe.exists():
        return venv
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "ansible-core"], check=True,
                       capture_output=True, timeout=600)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"(ansible skipped: could not install ansible-core: {exc})")
        shutil.rmtree(venv, ignore_errors=True)
        return None
    return venv if exe.exists() else None


def run_ansible(venv: Path, fleet: HostFleet, workers: int) -> float:
    work = fleet.base / "ansible"
    work.mkdir(exist_ok=True)
    (work / "blob.bin").write_bytes(BLOB)
    (work / "bench.conf").write_bytes(CONFIG)
    inv = ["[nodes]"] + [
        f"{h.name} ansible_host={h.address} ansible_user=mfnode root={h.root}" for h in fleet]
    (work / "hosts.ini").write_text("\n".join(inv) + "\n")
    tasks = [
        {"name": "blob", "copy": {"src": str(work / "blob.bin"), "dest": "{{ root }}/opt/bench/blob.bin",
                                  "checksum": hashlib.sha1(BLOB).hexdigest()}},
        {"name": "config", "copy": {"src": str(work / "bench.conf"), "dest": "{{ root }}/etc/bench.conf"}},
        *({"name": f"dir {d}", "file": {"path": f"{{{{ root }}}}{d}", "state": "directory"}} for d in DIRS),
        {"name": "fact", "command": "cat {{ root }}/etc/os-release", "changed_when": False},
    ]
    import json

    play = [{"hosts": "nodes", "gather_facts": False, "become": False, "tasks": [
        {"name": "bench dir", "file": {"path": "{{ root }}/opt/bench", "state": "directory"}}, *tasks]}]
    (work / "play.yml").write_text(json.dumps(play))
    env = {**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_PIPELINING": "True",
           "ANSIBLE_SSH_ARGS": f"-o UserKnownHostsFile={fleet.known_hosts} -o ControlMaster=auto "
                               f"-o ControlPersist=60s -o ControlPath={work}/cp-%%h",
           "ANSIBLE_PRIVATE_KEY_FILE": str(fleet.client_key), "ANSIBLE_FORKS": str(workers),
           "ANSIBLE_PYTHON_INTERPRETER": "/usr/bin/python3", "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
           "ANSIBLE_REMOTE_TMP": "/tmp/.ansible-mfnode", "ANSIBLE_NOCOLOR": "1"}
    t0 = time.perf_counter()
    res = subprocess.run([str(venv / "bin" / "ansible-playbook"), "-i", str(work / "hosts.ini"),
                          str(work / "play.yml")], env=env, capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - t0
    if res.returncode != 0:
        print(res.stdout[-3000:], res.stderr[-2000:])
        raise RuntimeError("ansible-playbook failed")
    return elapsed


# --------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sizes", nargs="*", type=int, default=[8, 32, 64])
    ap.add_argument("--no-ansible", action="store_true")
    ap.add_argument("--workers", type=int, default=0, help="thread pool size for every tool (default: hosts)")
    args = ap.parse_args()
    venv = None if args.no_ansible else ansible_venv()
    rows = []
    for n in args.sizes:
        workers = args.workers or n
        row: dict[str, float] = {}
        # Fresh hosts per tool so every first run really starts from nothing.
        with start_hosts(n, "plain") as fleet:
            row["base"] = run_baseline(fleet, workers)
            row["base_rerun"] = run_baseline(fleet, workers)
        with start_hosts(n, "plain") as fleet:
            row["base_nd"] = run_baseline(fleet, workers, nodelay=True)
        with start_hosts(n, "plain") as fleet:
            row["mf"], r1 = run_metalfleet(fleet, workers)
            row["mf_rerun"], r2 = run_metalfleet(fleet, workers)
            assert r1.changed_steps == n and r2.changed_steps == 0
            row["mf_channels"] = sum(h.round_trips for h in r1.hosts) / n
            row["mf_rerun_channels"] = sum(h.round_trips for h in r2.hosts) / n
        if venv is not None:
            with start_hosts(n, "plain") as fleet:
                try:
                    row["ansible"] = run_ansible(venv, fleet, workers)
                    row["ansible_rerun"] = run_ansible(venv, fleet, workers)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"(ansible at {n} hosts failed: {exc})")
        rows.append((n, row))
        print(f"{n} hosts done: " + ", ".join(f"{k}={v:.2f}" for k, v in row.items()), flush=True)

    print()
    print(f"{'hosts':>5} | {'paramiko':>9} | {'+nodelay':>9} | {'metalfleet':>10} {'x base':>7} | "
          f"{'re-run':>7} {'x first':>7} {'x base':>7} | {'ansible':>8} {'x base':>7} {'re-run':>7}")
    for n, r in rows:
        b = r["base"]
        ans = (f"{r['ansible']:7.2f}s {r['ansible'] / b:6.2f}x {r['ansible_rerun']:6.2f}s" if "ansible" in r
               else f"{'-':>8} {'-':>7} {'-':>7}")
        print(f"{n:>5} | {b:8.2f}s | {r['base_nd']:8.2f}s | {r['mf']:9.2f}s {r['mf'] / b:6.2f}x | "
              f"{r['mf_rerun']:6.2f}s {r['mf_rerun'] / r['mf']:6.2f}x {r['mf_rerun'] / b:6.2f}x | {ans}")
    print("\nparamiko: plain paramiko SSHClient per host in a thread pool (sftp uploads, one exec per command);"
          "\n+nodelay: the same with TCP_NODELAY on its sockets (metalfleet sets it);"
          "\nmetalfleet channels per host: first run "
          + ", ".join(f"{r['mf_channels']:.0f}" for _, r in rows) + "; re-run "
          + ", ".join(f"{r['mf_rerun_channels']:.0f}" for _, r in rows))


if __name__ == "__main__":
    main()
