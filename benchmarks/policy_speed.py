"""Policy check speed: `metalfleet policy check` vs Checkov on the same Terraform plan.

Run on demand (not part of the tests)::

    .venv/bin/python benchmarks/policy_speed.py 1000 10000 [--no-checkov] [--repeat 3]

For each size N it writes a synthetic plan (``terraform show -json`` layout, format 1.2) of N ``aws_instance``
resources (p5.48xlarge, a count block, every attribute an aws provider 5.x plan carries: ``planned_values``,
``resource_changes`` with ``after``/``after_unknown``/``after_sensitive``, ``configuration``), half of them with
IMDSv1 and none with an encrypted root volume, then times

* ``metalfleet policy check PLAN --format json --output FILE`` (the ``metalfleet`` entry point of this
  virtualenv, as a CI job runs it);
* ``checkov -f PLAN --framework terraform_plan -o json`` from Checkov ``CHECKOV_VERSION`` (pinned), which the
  benchmark installs with pip into its own virtualenv under ~/.cache/metalfleet/bench/ on first use.

Wall time is the median of ``--repeat`` runs; peak memory is the largest resident set of the tool's process
(``wait4``'s ru_maxrss), both side by side with the ratio. Targets (issue 10): 10,000 resources in under 1 s
and under 150 MiB, at least 100x faster than Checkov.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHECKOV_VERSION = "3.3.30"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "metalfleet" / "bench"
METALFLEET = Path(sys.prefix) / "bin" / "metalfleet"


# ------------------------------------------------------------------------------------------ the plan


def _values(i: int) -> dict[str, Any]:
    return {
        "ami": "ami-0123456789abcdef0", "associate_public_ip_address": False, "availability_zone": "us-east-1a",
        "capacity_reservation_specification": [], "cpu_options": [], "credit_specification": [],
        "disable_api_stop": False, "disable_api_termination": False, "ebs_block_device": [], "ebs_optimized": None,
        "enable_primary_ipv6": None, "enclave_options": [], "ephemeral_block_device": [], "get_password_data": False,
        "hibernation": None, "host_id": None, "host_resource_group_arn": None, "iam_instance_profile": None,
        "instance_initiated_shutdown_behavior": None, "instance_type": "p5.48xlarge", "ipv6_address_count": None,
        "ipv6_addresses": None, "key_name": "ops", "launch_template": [], "maintenance_options": [],
        "metadata_options": [{"http_endpoint": "enabled", "http_protocol_ipv6": "disabled",
                              "http_put_response_hop_limit": 2,
                              "http_tokens": "required" if i % 2 else "optional",
                              "instance_metadata_tags": "disabled"}],
        "monitoring": None, "network_interface": [], "placement_group": "train-pg", "placement_partition_number": None,
        "private_dns_name_options": [], "private_ip": None,
        "root_block_device": [{"delete_on_termination": True, "encrypted": None, "kms_key_id": None, "tags": None,
                               "volume_size": 500, "volume_type": "gp3"}],
        "secondary_private_ips": None, "security_groups": None, "source_dest_check": True,
        "subnet_id": "subnet-0123456789abcdef0", "tags": {"Name": f"gpu-{i}", "owner": "ml", "cost-center": "4711"},
        "tags_all": {"Name": f"gpu-{i}", "owner": "ml", "cost-center": "4711"}, "timeouts": None, "user_data": None,
        "user_data_base64": None, "user_data_replace_on_change": False, "volume_tags": {"owner": "ml",
                                                                                         "cost-center": "4711"},
        "vpc_security_group_ids": ["sg-0123456789abcdef0"]}


_UNKNOWN = {"arn": True, "capacity_reservation_specification": True, "cpu_options": True, "ebs_block_device": True,
            "id": True, "instance_lifecycle": True, "instance_state": True, "ipv6_addresses": True,
            "metadata_options": [{}], "network_interface": True, "outpost_arn": True, "password_data": True,
            "primary_network_interface_id": True, "private_dns": True, "private_ip": True, "public_dns": True,
            "public_ip": True, "root_block_device": [{"device_name": True, "iops": True, "throughput": True,
                                                      "volume_id": True}],
            "secondary_private_ips": True, "security_groups": True, "spot_instance_request_id": True, "tags": {},
            "tags_all": {}, "tenancy": True, "volume_tags": {}}


def write_plan(path: Path, n: int) -> Path:
    provider = "registry.terraform.io/hashicorp/aws"
    planned, changes = [], []
    for i in range(n):
        common = {"address": f"aws_instance.gpu[{i}]", "mode": "managed", "type": "aws_instance", "name": "gpu",
                  "index": i, "provider_name": provider}
        v = _values(i)
        planned.append({**common, "schema_version": 1, "values": v,
                        "sensitive_values": {"metadata_options": [{}], "root_block_device": [{}], "tags": {},
                                             "tags_all": {}, "vpc_security_group_ids": [False]}})
        changes.append({**common, "change": {"actions": ["create"], "before": None, "after": v,
                                             "after_unknown": _UNKNOWN, "before_sensitive": False,
                                             "after_sensitive": {"metadata_options": [{}], "root_block_device": [{}],
                                                                 "tags": {}, "tags_all": {}}}})
    plan = {
        "format_version": "1.2", "terraform_version": "1.9.5",
        "planned_values": {"root_module": {"resources": planned}}, "resource_changes": changes,
        "configuration": {"provider_config": {"aws": {"name": "aws", "full_name": provider}}, "root_module": {
            "resources": [{"address": "aws_instance.gpu", "mode": "managed", "type": "aws_instance", "name": "gpu",
                           "provider_config_key": "aws", "schema_version": 1, "count_expression": {"constant_value": n},
                           "expressions": {"ami": {"constant_value": "ami-0123456789abcdef0"},
                                           "instance_type": {"constant_value": "p5.48xlarge"}}}]}},
        "timestamp": "2026-01-01T00:00:00Z", "applyable": True, "complete": True, "errored": False}
    path.write_text(json.dumps(plan))
    return path


# ------------------------------------------------------------------------------------------ running


@dataclass
class Run:
    seconds: float
    peak_mib: float
    rc: int
    #: user + system CPU of the tool and the processes it waited for
    cpu: float = 0.0


def measure(cmd: list[str], env: dict[str, str] | None = None) -> Run:
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.PIPE, env=env)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""  # until the tool exits
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({rc}):\n{err[-2000:]}")
    return Run(seconds, usage.ru_maxrss / 1024, rc, usage.ru_utime + usage.ru_stime)


_PEAKS = """import resource, sys
from metalfleet.stacks.cli import main
rc = main(sys.argv[1:])
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stderr.write(f"peaks {peak}\\n")
"""


def summed_peak(args: list[str], env: dict[str, str]) -> float:
    """The peak resident sets of metalfleet's own process and of the processes it forked, added up (MiB): an upper
    bound of what a divided check holds at once (pages the processes share, the mapped plan among them, count
    once per process)."""
    res = subprocess.run([sys.executable, "-c", _PEAKS, *args], env=env, capture_output=True, text=True, check=False)
    line = next((ln for ln in res.stderr.splitlines() if ln.startswith("peaks ")), None)
    if line is None:
        raise SystemExit(f"metalfleet failed:\n{res.stderr[-2000:]}")
    return int(line.split()[1]) / 1024


def checkov() -> Path:
    """Checkov CHECKOV_VERSION in its own virtualenv (installed once, with pip, from the package index)."""
    home = CACHE / f"checkov-{CHECKOV_VERSION}"
    exe = home / "bin" / "checkov"
    if not exe.exists():
        print(f"installing checkov=={CHECKOV_VERSION} into {home} (once)...", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=True).create(home)
        subprocess.run([str(home / "bin" / "pip"), "install", "-q", f"checkov=={CHECKOV_VERSION}"], check=True)
    return exe


def median(runs: list[Run]) -> Run:
    return Run(statistics.median(r.seconds for r in runs), max(r.peak_mib for r in runs), runs[0].rc,
               statistics.median(r.cpu for r in runs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="*", type=int, default=[1000, 10000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-checkov", action="store_true")
    ap.add_argument("--write-plan", nargs=2, metavar=("N", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_plan:
        write_plan(Path(args.write_plan[1]), int(args.write_plan[0]))
        return 0
    CACHE.mkdir(parents=True, exist_ok=True)
    ck = None if args.no_checkov else checkov()
    rows = []
    for n in args.sizes:
        # Written by a child process: a parent grown by building the plan would inflate the tools' peak memory
        # (a forked child's resident set counts until it execs).
        plan = CACHE / f"plan-{n}.json"
        subprocess.run([sys.executable, __file__, "--write-plan", str(n), str(plan)], check=True)
        out = CACHE / f"report-{n}.json"
        cmd = [str(METALFLEET), "policy", "check", str(plan), "--format", "json", "--output", str(out)]
        # As installed (pip compiles the modules): without PYTHONDONTWRITEBYTECODE, after one untimed run that
        # writes the bytecode. --jobs 1 is the same check in one process.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        measure(cmd, env)
        # Interleaved: a shared machine's speed drifts over minutes, and both must see the same drift.
        one_runs: list[Run] = []
        runs: list[Run] = []
        for _ in range(args.repeat):
            one_runs.append(measure([*cmd, "--jobs", "1"], env))
            runs.append(measure(cmd, env))
        mf1, mf = median(one_runs), median(runs)
        mf_sum = summed_peak(cmd[1:], env)
        findings = json.loads(out.read_text())["summary"]
        row: dict[str, Any] = {"n": n, "size_mib": plan.stat().st_size / 2**20, "mf": mf, "mf1": mf1,
                               "mf_sum": mf_sum, "findings": findings}
        if ck is not None:
            env = {**os.environ, "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false", "BC_SKIP_MAPPING": "TRUE",
                   "CHECKOV_NO_OUTPUT_COLORS": "true"}
            row["ck"] = median([measure([str(ck), "-f", str(plan), "--framework", "terraform_plan", "-o", "json",
                                         "--quiet", "--compact", "--skip-download"], env)
                                for _ in range(1 if n >= 10000 else args.repeat)])
        rows.append(row)
        ck_row = row.get("ck")
        print(f"done {n}: metalfleet {mf.seconds:.2f} s {mf.peak_mib:.0f} MiB"
              + (f"; checkov {ck_row.seconds:.1f} s {ck_row.peak_mib:.0f} MiB" if ck_row else ""), flush=True)
    print(f"{'resources':>9}  {'plan':>8}  {'metalfleet':>18}  {'checkov ' + CHECKOV_VERSION:>22}  ratio")
    for r in rows:
        mf = r["mf"]
        ck_run = r.get("ck")
        ck_text = f"{ck_run.seconds:8.2f} s {ck_run.peak_mib:6.0f} MiB" if ck_run else "-"
        ratio = f"{ck_run.seconds / mf.seconds:6.0f}x" if ck_run else "-"
        print(f"{r['n']:>9}  {r['size_mib']:5.1f} MiB  {mf.seconds:6.2f} s {mf.peak_mib:6.0f} MiB  {ck_text:>22}  "
              f"{ratio}")
        one = r["mf1"]
        print(f"{'':>9}  metalfleet CPU {mf.cpu:.2f} s, peaks of all its processes added up {r['mf_sum']:.0f} MiB; "
              f"with --jobs 1: {one.seconds:.2f} s, CPU {one.cpu:.2f} s, {one.peak_mib:.0f} MiB")
        print(f"{'':>9}  metalfleet findings: {r['findings']}")
    big = [r for r in rows if r["n"] >= 10000]
    for r in big:
        ok = r["mf"].seconds < 1 and r["mf_sum"] < 150 and (not r.get("ck") or
                                                                    r["ck"].seconds / r["mf"].seconds >= 100)
        print(f"targets for {r['n']}: <1 s, <150 MiB, >=100x Checkov: {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
