"""`metalfleet offerings` as a new user runs it: offline from the shipped catalogue with no credentials at all,
and `--live` against the EC2 emulator (boto3 over HTTP, the driver's real DescribeInstanceTypes path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

from metalfleet.providers.catalog import catalog_document, load_catalog
from metalfleet.testing.ec2 import Ec2Emulator

CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]


def bare_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a machine with no cloud credentials: no AWS_*, ALIBABA_*, HUAWEI_* variables, and a
    home without ~/.aws."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("AWS_", "ALIBABA_", "ALICLOUD_", "HUAWEI", "HWCLOUD", "METALFLEET_CATALOG"))}
    keep.update(HOME=str(home), **extra)
    return keep


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False, env=env)


def test_offerings_work_offline_without_credentials(tmp_path: Path) -> None:
    env = bare_env(tmp_path)
    out = run("offerings", env=env)
    assert out.returncode == 0, out.stderr
    catalog = load_catalog()
    for entry in catalog.entries:
        assert entry.name in out.stdout, f"{entry.provider} {entry.name} missing from the listing"
    assert {line.split()[0] for line in out.stdout.splitlines()[2:] if line.strip() and " " in line} >= {
        "aws", "alibaba", "huawei", "fake"}
    assert "aws p5.48xlarge: capacity blocks 1-14 d, 21-182 d by 7 d, at most 64 nodes" in out.stdout
    age = (date.today() - date(2025, 6, 1)).days * 12 // 365
    assert f"2025-06-01 ({age} months old)" in out.stdout
    aws = run("offerings", "--provider", "aws", env=env)  # the command the issue saw fail
    assert aws.returncode == 0 and "no usable AWS credentials" not in aws.stderr, aws.stderr
    assert "p5.48xlarge" in aws.stdout and "fake.8xh100" not in aws.stdout


def test_offerings_json_is_normalised_and_dated(tmp_path: Path) -> None:
    out = run("offerings", "--provider", "aws", "--orderable", "--json", env=bare_env(tmp_path))
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [r["name"] for r in rows] == ["p5.48xlarge", "p5en.48xlarge", "p4de.24xlarge", "p4d.24xlarge"]
    p5 = rows[0]
    assert (p5["interconnect"], p5["interconnect_gbps"], p5["fabric"], p5["fabric_gbps"], p5["cores_per_gpu"],
            p5["nvme_count"], p5["bare_metal"], p5["billing_models"]) == (
        "nvswitch", 900.0, "efa", 3200.0, 12.0, 8, False, ["on_demand", "capacity_block"])
    assert p5["prices"][0]["age_days"] == (date.today() - date(2025, 6, 1)).days


def test_offerings_read_another_catalogue_file(tmp_path: Path) -> None:
    doc = catalog_document()
    doc["price_lists"][0]["regions"]["us-east-1"]["p5.48xlarge"]["on_demand"] = 42.5
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(doc))
    out = run("offerings", "--provider", "aws", "--gpu", "H100", "--json", env=bare_env(tmp_path,
                                                                                      METALFLEET_CATALOG=str(path)))
    assert json.loads(out.stdout)[0]["prices"][0]["hourly"] == 42.5
    bad = run("offerings", "--catalog", str(tmp_path / "missing.json"), env=bare_env(tmp_path))
    assert bad.returncode == 2 and "missing.json" in bad.stderr


def test_live_without_credentials_says_so_and_fails(tmp_path: Path) -> None:
    out = run("offerings", "--provider", "aws", "--live", "--region", "us-east-1", env=bare_env(tmp_path))
    assert out.returncode == 1
    assert "aws us-east-1" in out.stderr and "credentials" in out.stderr.lower()


def test_live_asks_the_provider_and_shows_what_differs(tmp_path: Path, ec2_emulator: Ec2Emulator) -> None:
    creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_ENDPOINT_URL": ec2_emulator.url}
    out = run("offerings", "--provider", "aws", "--live", env=bare_env(tmp_path, **creds))
    assert out.returncode == 0, out.stderr
    assert "aws us-east-1: 4 offering(s) live" in out.stdout
    assert "differences from the shipped catalogue: none" in out.stdout
    # a catalogue that says otherwise: the live answer (moto's EC2 data) shows the difference
    doc = catalog_document()
    p5 = next(e for e in doc["offerings"] if e["name"] == "p5.48xlarge")
    p5["vcpus"], p5["fabric_cards"], p5["cpu_cores"] = 96, 8, 48
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(doc))
    diff = run("offerings", "--provider", "aws", "--live", "--json", "--catalog", str(path),
               env=bare_env(tmp_path, **creds))
    assert diff.returncode == 0, diff.stderr
    [part] = json.loads(diff.stdout)
    assert {(d["name"], d["field"], d["shipped"], d["live"]) for d in part["differences"]} == {
        ("p5.48xlarge", "vcpus", 96, 192), ("p5.48xlarge", "fabric_cards", 8, 32), ("p5.48xlarge", "cpu_cores", 48, 96)}
    assert ec2_emulator.calls("DescribeInstanceTypes") == 2  # one per --live run: the answer came from EC2
