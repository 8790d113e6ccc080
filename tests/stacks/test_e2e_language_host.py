"""The language host through the real engine: `pulumi install`, `pulumi up` and a policy pack.

The project is examples/aws-p5 as shipped (Pulumi.yaml with ``virtualenv: venv``, requirements.txt with
``-e ../..[aws,pulumi]``, __main__.py), inside a copy of this repo's package so that the relative path
in requirements.txt resolves as it does in a clone; only cluster.yaml is swapped for one on the
file-backed fake cloud. `pulumi install` builds ./venv with pip (the packages come from PyPI).

Nothing here may quietly run in the tests' own interpreter: PULUMI_PYTHON_CMD is a bare Python with no
packages at all, so the program, its dynamic providers and the policy pack work only if each really runs
in the environment its runtime options name. (The language host itself, ours, needs the Pulumi SDK:
METALFLEET_LANGHOST_PYTHON gives it the tests' interpreter, as a user's activated virtualenv would.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from metalfleet.providers import parse_spec
from metalfleet.providers.fake import FakeDriver
from metalfleet.stacks import automation
from metalfleet.stacks.engine import engine_env, find_engine

from .conftest import stack_options

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-langhost")]

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "lh-e2e"


def _pulumi(path: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["pulumi", *args], cwd=path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"pulumi {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@dataclass
class Project:
    path: Path
    env: dict[str, str]
    fake_state: Path
    before_install: subprocess.CompletedProcess[str]  # a `pulumi preview` before `pulumi install`
    install: subprocess.CompletedProcess[str]

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _pulumi(self.path, self.env, *args, check=check)

    @property
    def venv(self) -> Path:
        return self.path / "venv"


def _copy_package(dest: Path) -> None:
    """The files that make this repo's package (pyproject's package-dir folders), as a clone has them."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in sorted(set(meta["tool"]["setuptools"]["package-dir"].values())):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _bare_python(where: Path) -> Path:
    """An interpreter with no third-party package at all (not even pip)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import pulumi"], capture_output=True, check=False)
    assert probe.returncode != 0, "the bare interpreter must not see the Pulumi SDK"
    return python


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    work = tmp_path_factory.mktemp("langhost-e2e")
    clone = work / "clone"
    clone.mkdir()
    _copy_package(clone)
    path = clone / "examples" / "aws-p5"
    shutil.copytree(ROOT / "examples" / "aws-p5", path, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    (path / "cluster.yaml").write_text(yaml.safe_dump({
        "name": CLUSTER, "provider": "fake", "region": "local-1", "offering": "fake.8xh100", "count": 2,
        "image": "img-1", "bootstrap": {"enabled": False}, "acceptance": {"enabled": False}}))
    env = {**os.environ, **engine_env()}
    env.update({
        "PULUMI_HOME": str(work / "home"),
        "PULUMI_CONFIG_PASSPHRASE": "langhost-e2e",
        "PULUMI_PYTHON_CMD": str(_bare_python(work / "bare")),
        "METALFLEET_LANGHOST_PYTHON": sys.executable,
    })
    env.pop("VIRTUAL_ENV", None)
    state = work / "state"
    state.mkdir()
    fake_state = work / "fake.json"
    _pulumi(path, env, "login", f"file://{state}")
    _pulumi(path, env, "stack", "init", "e2e")
    _pulumi(path, env, "config", "set", "--path", "metalfleet:driverConfig.state_path", str(fake_state))
    before = _pulumi(path, env, "preview", check=False)
    return Project(path, env, fake_state, before, _pulumi(path, env, "install"))


def test_install_creates_the_virtualenv_and_up_runs_in_it(project: Project, tmp_path: Path) -> None:
    # Before `pulumi install`, the engine stops at once and says what to do.
    assert project.before_install.returncode != 0
    before = project.before_install.stdout + project.before_install.stderr
    assert "The 'virtualenv' option in Pulumi.yaml is set to 'venv'" in before
    assert f"run `pulumi install` in {project.path}" in before, before

    # `pulumi install`: the venv is created and requirements.txt installed, pip's own output streamed back.
    out = project.install.stdout + project.install.stderr
    for line in ("Creating virtual environment...", "Installing dependencies in virtual environment...",
                 "Successfully installed", "Finished installing dependencies"):
        assert line in out, out
    python = project.venv / "bin" / "python"
    assert python.is_file() and not project.venv.is_symlink()
    probe = subprocess.run([str(python), "-c", "import importlib.metadata as md, metalfleet.stacks, boto3; "
                            "print(metalfleet.stacks.__file__); print(md.version('pulumi'))"],
                           capture_output=True, text=True, check=False, env=project.env)
    assert probe.returncode == 0, probe.stderr
    stacks_file, sdk = probe.stdout.split()
    clone = project.path.parents[1]
    assert Path(stacks_file).is_relative_to(clone), "requirements.txt's ../.. is the repository root (editable)"
    assert sdk == "3.260.0"

    # `pulumi up`: the program and its dynamic providers run in ./venv (the bare PULUMI_PYTHON_CMD has nothing).
    up = project.pulumi("up", "--yes", "--skip-preview")
    assert "+ 4 created" in up.stdout, up.stdout  # stack, cluster, 2 nodes
    ids = json.loads(project.pulumi("stack", "output", "--json").stdout)["node_ids"]
    fake = FakeDriver(state_path=project.fake_state)
    assert sorted(n.id for n in fake.list_nodes(CLUSTER)) == sorted(ids) and len(ids) == 2

    # The engine passes `--tracing ADDR` before its own address; the host must not take ADDR for the engine's.
    trace = tmp_path / "up.trace"
    project.pulumi("preview", "--expect-no-changes", "--tracing", f"file://{trace}")
    assert trace.stat().st_size > 0

    about = json.loads(project.pulumi("about", "--json").stdout)
    assert about["runtime"]["executable"] == str(python)
    assert about["runtime"]["toolchain"] == "Pip"
    assert {"metalfleet", "boto3", "pulumi"} <= {d["name"] for d in about["dependencies"]}

    project.pulumi("destroy", "--yes", "--skip-preview")
    assert fake.list_nodes(CLUSTER) == []


POLICY = '''\
import pulumi
from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy

ALLOWED = ("p5.48xlarge", "p5e.48xlarge")


def offering_allowed(args, report_violation):
    if args.resource_type != "pulumi-python:dynamic/metalfleet:GpuNode":
        return
    offering = (args.props.get("spec") or {}).get("offering")
    if offering is not None and offering not in ALLOWED:
        report_violation(f"stack {pulumi.get_stack()}: node {args.name} asks for offering {offering}, "
                         "which is not on the allow list")


PolicyPack(name="metalfleet-offerings", enforcement_level=EnforcementLevel.MANDATORY, policies=[
    ResourceValidationPolicy(name="offering-allowlist", description="GPU nodes use an allowed offering",
                             validate=offering_allowed),
])
'''


def test_a_policy_pack_blocks_the_preview(project: Project, tmp_path: Path) -> None:
    """`pulumi preview --policy-pack DIR`: the engine starts the pack through the host's RunPlugin."""
    pack = tmp_path / "policy"
    pack.mkdir()
    # The pack's environment: the tests' virtualenv, where the dev extra installed pulumi-policy.
    (pack / "PulumiPolicy.yaml").write_text(yaml.safe_dump({
        "description": "metalfleet offerings", "runtime": {"name": "python", "options": {"virtualenv": sys.prefix}}}))
    (pack / "__main__.py").write_text(POLICY)

    proc = project.pulumi("preview", "--policy-pack", str(pack), check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "metalfleet-offerings" in out and "[mandatory]  offering-allowlist" in out, out
    for i in range(2):  # the violation names the stack: the host passed the engine's stack configuration on
        assert f"stack e2e: node {CLUSTER}-{i} asks for offering fake.8xh100, which is not on the allow list" in out
    assert FakeDriver(state_path=project.fake_state).list_nodes(CLUSTER) == []

    # A pack whose environment is missing fails with the same clear error as a program's.
    (pack / "PulumiPolicy.yaml").write_text(yaml.safe_dump({
        "runtime": {"name": "python", "options": {"virtualenv": "venv"}}}))
    missing = project.pulumi("preview", "--policy-pack", str(pack), check=False)
    assert missing.returncode != 0
    assert ("The 'virtualenv' option in PulumiPolicy.yaml is set to 'venv'" in missing.stdout + missing.stderr
            and f"run `pulumi install` in {pack}" in missing.stdout + missing.stderr), missing.stdout + missing.stderr


def test_metalfleet_says_which_engine_it_uses(tmp_path: Path, pulumi_home: Path, passphrase: str) -> None:
    spec = parse_spec({"name": "lh-engine", "provider": "fake", "region": "local-1", "offering": "fake.8xh100",
                       "count": 1, "image": "img-1", "bootstrap": {"enabled": False},
                       "acceptance": {"enabled": False}})
    lines: list[str] = []
    opts = stack_options(tmp_path, pulumi_home, driver_config={"state_path": str(tmp_path / "fake.json")})
    automation.preview(spec, opts, on_output=lines.append)
    engine = find_engine()
    version = subprocess.run([str(engine.cli), "version"], capture_output=True, text=True, check=True).stdout.strip()
    assert lines[0].startswith(f"metalfleet: using Pulumi CLI {engine.cli} ({version}, "), lines[0]
