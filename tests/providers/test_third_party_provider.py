"""A platform is its own package plus one entry point: tinycloud (tests/providers/thirdparty), a separate package
whose pyproject registers its ProviderRecord in ``metalfleet.providers``, is installed for real into a folder of its
own, and metalfleet's ``validate``, ``order``, ``release``, ``offerings`` and the contract suite then work with it,
with no file of metalfleet changed. Each run is a fresh interpreter with that folder on PYTHONPATH."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).with_name("thirdparty")
CLI = [sys.executable, "-m", "metalfleet.stacks.cli"]
SPEC = {"name": "tiny", "provider": "tinycloud", "region": "tiny-1", "zone": "tiny-1a", "offering": "tiny.8xh100",
        "count": 2, "image": "tiny-os-1"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tinycloud installed (offline, no dependencies) into a folder of its own, built from a copy so the build
    writes nothing into the checkout."""
    root = tmp_path_factory.mktemp("thirdparty")
    shutil.copytree(PACKAGE, root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--target", str(root / "site"), str(root / "src")], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "site"


def _run(args: list[str], site: Path | None, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "METALFLEET_CATALOG")}
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, env={**environ, **env}, timeout=600,
                          check=False)


def _spec(tmp_path: Path, name: str = "spec.yaml", **over: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({**SPEC, **over}))  # JSON is YAML
    return str(path)


def test_the_entry_point_alone_registers_it(site: Path, tmp_path: Path) -> None:
    code = ("import json; from metalfleet.providers.registry import available_drivers; "
            "print(json.dumps(available_drivers()))")
    with_it = _run([sys.executable, "-c", code], site, tmp_path)
    without = _run([sys.executable, "-c", code], None, tmp_path)
    assert with_it.returncode == 0 == without.returncode, with_it.stderr + without.stderr
    assert json.loads(with_it.stdout) == sorted([*json.loads(without.stdout), "tinycloud"])


def test_validate_applies_its_record_rules(site: Path, tmp_path: Path) -> None:
    good = _run([*CLI, "validate", _spec(tmp_path), "--no-policy"], site, tmp_path)
    assert good.returncode == 0, good.stderr
    assert "valid spec — 2 x tiny.8xh100 on tinycloud tiny-1" in good.stdout
    cases: list[tuple[dict[str, object], str, str]] = [
        ({"count": 17}, "count", "tinycloud puts at most 16 nodes"),
        ({"tags": {"k" * 33: "v"}}, "tags." + "k" * 33, "longer than tinycloud's 32"),
        ({"capacity": {"billing": "monthly"}}, "capacity.billing", "tinycloud does not sell monthly nodes through "
                                                                   "metalfleet")]
    for over, field, why in cases:
        bad = _run([*CLI, "validate", _spec(tmp_path, "bad.yaml", **over), "--no-policy"], site, tmp_path)
        assert bad.returncode == 2, bad.stdout + bad.stderr
        assert f"{field}: " in bad.stderr and why in bad.stderr, bad.stderr
    unknown = _run([*CLI, "validate", _spec(tmp_path, "x.yaml", provider="nimbus"), "--no-policy"], site, tmp_path)
    assert unknown.returncode == 2 and "provider: unknown provider 'nimbus'" in unknown.stderr
    assert re.search(r"available: .*tinycloud", unknown.stderr), unknown.stderr


def test_the_policy_rules_take_what_its_record_guarantees(site: Path, tmp_path: Path) -> None:
    """MF-NET-005 (metadata tokens) passes on tinycloud's stated guarantee (its record's policy_facts); without the
    package the same spec names an unknown provider and is refused as unreadable input."""
    spec = _spec(tmp_path, tags={"owner": "ml", "cost-center": "1", "project": "p", "environment": "dev",
                                 "data-classification": "internal"})
    ran = _run([*CLI, "policy", "check", spec, "--format", "json"], site, tmp_path)
    assert ran.returncode in (0, 1), ran.stderr
    findings = json.loads(ran.stdout)["findings"]
    assert not [f for f in findings if f["rule"] == "MF-NET-005"], findings
    alone = _run([*CLI, "policy", "check", spec, "--format", "json"], None, tmp_path)
    assert alone.returncode == 2 and "provider: unknown provider 'tinycloud'" in alone.stderr, alone.stderr


def test_order_then_release(site: Path, tmp_path: Path) -> None:
    spec, state = _spec(tmp_path), f"state_path={tmp_path / 'tinycloud.json'}"
    ordered = _run([*CLI, "order", spec, "--driver-config", state, "--json"], site, tmp_path)
    assert ordered.returncode == 0, ordered.stderr
    nodes = json.loads(ordered.stdout)
    assert [(n["provider"], n["state"], n["tags"]["metalfleet:index"]) for n in nodes] == [
        ("tinycloud", "running", "0"), ("tinycloud", "running", "1")]
    released = _run([*CLI, "release", spec, "--driver-config", state], site, tmp_path)
    assert released.returncode == 0, released.stderr
    assert "released 2 node(s) of cluster tiny: " in released.stdout
    assert sorted(released.stdout.split(": ", 1)[1].split()) == sorted(n["id"] for n in nodes)


def test_offerings_list_its_catalogue(site: Path, tmp_path: Path) -> None:
    out = _run([*CLI, "offerings", "--provider", "tinycloud"], site, tmp_path)
    assert out.returncode == 0, out.stderr
    [row] = [line for line in out.stdout.splitlines() if line.startswith("tinycloud")]
    assert "tiny.8xh100" in row and "8x H100" in row and "on_demand 9.5 USD" in row


def test_the_contract_suite_passes(site: Path) -> None:
    out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                "tests/contract/test_contract.py"], site, REPO, METALFLEET_CONTRACT_PROVIDER="tinycloud")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed and int(passed.group(1)) >= 10, out.stdout[-2000:]
    assert not re.search(r"\d+ (skipped|failed|error)", out.stdout), out.stdout[-2000:]
