"""Planted secrets are found nowhere: `pulumi up`, refresh and destroy on the real engine, EC2 emulator
and simulated hosts (the set-up of test_e2e_aws), with a distinct secret value in every input path.

Planted: the stack passphrase; the environment's AWS credentials (access key id, secret access key,
session token); a secret driver setting (``metalfleet:driverConfig.profile``, the AWS profile the
driver really uses) and that profile's own keys in a credentials file; the SSH private-key path (in a
directory whose name is planted) set with ``--secret`` through ``metalfleet:spec.ssh.private_key``,
and every line of that key's material; a secret tag value (``metalfleet:spec.tags.cost-center``: a
value marked secret under an innocent key). The python-api example gets the key material itself as
``--secret privateKey``. (There is no bastion password: a bastion uses the same key.)

Searched: every command's stdout and stderr (``--diff`` displays included), the file backend's state
(with its history and backups), the project folder (stack config), PULUMI_HOME (its automatic logs,
gzip ones decompressed), the engine's verbose logs (``-v=8 --logflow``: the engine's and plugins' logs
in TMPDIR), HOME (the bootstrap host logs), and the outputs (``stack output``, ``stack export``:
acceptance tables). Positive controls prove each place was written and each secret was used where it
belongs (the profile ordered the nodes, the key logged in, the tag reached EC2, the state holds
ciphertext).

Why -v=8 and not 9: at -v=9 the engine traces every RPC property, secrets included, in plaintext (its
own secret filter does not catch them). That is the engine's, not metalfleet's: on this engine
(v3.260.0) a program that only exports ``cfg.require_secret(...)`` shows the value at -v=9 too. -v=8 is
the most verbose level that keeps them out, and it still logs every provider call and plugin message.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import string
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from metalfleet.stacks.engine import engine_env
from metalfleet.testing.ec2 import Ec2Emulator, start_ec2_emulator
from tests.emulators.fixtures import IMAGE
from tests.stacks.projects import link_test_environment
from tests.stacks.test_e2e_aws import (
    CONTROLLER_CIDR,
    KEY_PAIR,
    _copy_example,
    _instances,
    _live,
    operator_key_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("engine-aws-secrets"),
              pytest.mark.requires_root("the emulator's simulated hosts")]

ROOT = Path(__file__).resolve().parents[2]
_RNG = random.Random()
VERBOSE = ("--logflow", "-v=8")  # see the module docstring for why not 9


@pytest.fixture(scope="module")
def ec2() -> Iterator[Ec2Emulator]:
    with start_ec2_emulator(sim_hosts=True) as emu:
        yield emu


@pytest.fixture(scope="module")
def operator_key(ec2: Ec2Emulator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return operator_key_for(ec2, tmp_path_factory.mktemp("operator") / "id")


def _token(n: int, alphabet: str = string.ascii_lowercase + string.digits) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def _aws_secret_key() -> str:
    """40 characters of the base64 alphabet, as AWS secret access keys are."""
    while True:
        value = _token(40, string.ascii_letters + string.digits + "/+")
        if len(set(value)) >= 22 and any(c.isupper() for c in value) and any(c.islower() for c in value):
            return value


class Planted:
    """One distinct value per input path; names say where each was planted."""

    def __init__(self, tmp: Path, key: Path) -> None:
        self.values: dict[str, str] = {
            "passphrase": f"mf-plant-passphrase-{_token(12)}",
            "env AWS_ACCESS_KEY_ID": "AKIA" + _token(16, string.ascii_uppercase + string.digits),
            "env AWS_SECRET_ACCESS_KEY": _aws_secret_key(),
            "env AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjE" + _token(180, string.ascii_letters + string.digits),
            "driverConfig.profile": f"mf-plant-profile-{_token(12)}",
            "profile aws_access_key_id": "AKIA" + _token(16, string.ascii_uppercase + string.digits),
            "profile aws_secret_access_key": _aws_secret_key(),
            "spec.ssh.private_key (path)": f"mf-plant-keydir-{_token(12)}",
            "spec.tags.cost-center": f"mf-plant-tag-{_token(12)}",
        }
        material = key.read_text()
        body = [line for line in material.splitlines() if line and not line.startswith("-----")]
        assert body, "the key has no material lines"
        for i, line in enumerate(body):
            self.values[f"key material line {i}"] = line
        # The key the nodes accept, at a path whose folder name is planted (the path is what is secret).
        self.key_dir = tmp / self.values["spec.ssh.private_key (path)"]
        self.key_dir.mkdir(mode=0o700)
        self.key_path = self.key_dir / "id"
        shutil.copyfile(key, self.key_path)
        self.key_path.chmod(0o600)
        aws = tmp / "aws"
        aws.mkdir()
        profile = self.values["driverConfig.profile"]
        (aws / "config").write_text(f"[profile {profile}]\nregion = us-east-1\n")
        (aws / "credentials").write_text(f"[{profile}]\n"
                                         f"aws_access_key_id = {self.values['profile aws_access_key_id']}\n"
                                         f"aws_secret_access_key = {self.values['profile aws_secret_access_key']}\n")
        self.aws_dir = aws

    def found_in(self, where: str, text: str) -> list[str]:
        return [f"{name} in {where}" for name, value in self.values.items() if value in text]


class SecretProject:
    """A Pulumi project folder run with the plain CLI; keeps every command's output for the search."""

    def __init__(self, path: Path, env: dict[str, str]) -> None:
        self.path = path
        self.env = env
        self.outputs: list[tuple[str, str]] = []

    def pulumi(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["pulumi", *args], cwd=self.path, env=self.env, input=stdin, capture_output=True,
                              text=True, timeout=400, check=False)
        label = "pulumi " + " ".join(args)
        self.outputs += [(f"stdout of `{label}`", proc.stdout), (f"stderr of `{label}`", proc.stderr)]
        if check and proc.returncode != 0:
            raise AssertionError(f"{label} failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}")
        return proc


def _env(tmp: Path, ec2: Ec2Emulator, planted: Planted) -> dict[str, str]:
    dirs = {name: tmp / name for name in ("state", "pulumi-home", "home", "tmp")}
    for d in dirs.values():
        d.mkdir()
    env = {**os.environ, **engine_env()}
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "SSH_AUTH_SOCK", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        env.pop(var, None)
    env.update({
        "PULUMI_HOME": str(dirs["pulumi-home"]),
        "PULUMI_CONFIG_PASSPHRASE": planted.values["passphrase"],
        "HOME": str(dirs["home"]),  # bootstrap host logs: ~/.local/state/metalfleet/logs
        "TMPDIR": str(dirs["tmp"]),  # the engine's and plugins' verbose logs, any temporary file
        "AWS_ENDPOINT_URL": ec2.url,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": planted.values["env AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": planted.values["env AWS_SECRET_ACCESS_KEY"],
        "AWS_SESSION_TOKEN": planted.values["env AWS_SESSION_TOKEN"],
        "AWS_CONFIG_FILE": str(planted.aws_dir / "config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(planted.aws_dir / "credentials"),
    })
    return env


def _written(tmp: Path, project: SecretProject) -> dict[str, str]:
    """Every file the run could have written a secret to, by path (not the planted key or AWS files)."""
    roots = [tmp / "state", tmp / "pulumi-home", tmp / "home", tmp / "tmp", project.path]
    return {str(p): _read(p) for root in roots for p in root.rglob("*") if p.is_file()}


def _read(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode(errors="replace")


def _search(tmp: Path, project: SecretProject, planted: Planted) -> list[str]:
    places = {**_written(tmp, project), **dict(project.outputs)}
    return [leak for where, text in places.items() for leak in planted.found_in(where, text)]


@pytest.fixture
def planted(tmp_path: Path, operator_key: Path) -> Iterator[Planted]:
    yield Planted(tmp_path, operator_key)


def test_planted_secrets_reach_no_state_log_or_output(tmp_path: Path, ec2: Ec2Emulator, planted: Planted) -> None:
    cluster = "llm-p5-secrets"
    folder = _copy_example(tmp_path / "aws-p5", planted.key_path, tmp_path / "known_hosts", name=cluster)
    # The file names no key: the only way to the key is the secret config below.
    text, n = re.subn(r"^(  private_key: ).*$", r"\g<1>null", (folder / "cluster.yaml").read_text(), flags=re.M)
    assert n == 1
    (folder / "cluster.yaml").write_text(text)
    p = SecretProject(folder, _env(tmp_path, ec2, planted))
    v = planted.values
    p.pulumi("login", f"file://{tmp_path / 'state'}")
    p.pulumi("stack", "init", "e2e")
    p.pulumi("config", "set", "--secret", "--path", "metalfleet:driverConfig.profile", stdin=v["driverConfig.profile"])
    p.pulumi("config", "set", "--secret", "--path", "metalfleet:spec.ssh.private_key", stdin=str(planted.key_path))
    p.pulumi("config", "set", "--secret", "--path", "metalfleet:spec.tags.cost-center",
             stdin=v["spec.tags.cost-center"])
    p.pulumi("config", "set", "--path", "metalfleet:spec.count", "1")
    verbose = VERBOSE

    p.pulumi("preview", "--diff", *verbose)
    p.pulumi("up", "--yes", "--skip-preview", "--diff", *verbose)
    out = json.loads(p.pulumi("stack", "output", "--json").stdout)
    assert len(out["node_ids"]) == 1 and out["accepted_ids"] == out["node_ids"], out
    assert "1 of 1 node(s) passed" in str(out["acceptance"])
    (node_id,) = out["node_ids"]
    # Each secret did its job: the profile ordered the node (an unknown profile fails the up), the key
    # logged in (no agent, no key in the file), the tag reached EC2 where it belongs.
    assert _instances(ec2, cluster)[node_id]["Tags"]["cost-center"] == v["spec.tags.cost-center"]
    p.pulumi("preview", "--expect-no-changes", "--diff")
    p.pulumi("refresh", "--yes", "--skip-preview", "--diff", *verbose)
    p.pulumi("preview", "--expect-no-changes")
    state_doc = p.pulumi("stack", "export").stdout
    p.pulumi("destroy", "--yes", "--skip-preview", *verbose)
    assert _live(ec2, cluster) == []

    # Positive controls: the places searched hold what they should.
    files = _written(tmp_path, p)
    state = "\n".join(t for f, t in files.items() if f.startswith(str(tmp_path / "state")))
    assert '"ciphertext"' in state_doc and '"secrets"' in state_doc and "[secret]" in state_doc, state_doc[:3000]
    assert "llm-p5-secrets" in state and '"ciphertext"' in state
    engine_logs = [f for f in files if Path(f).name.startswith("pulumi") and f.startswith(str(tmp_path / "tmp"))]
    assert engine_logs and any("Provider[" in files[f] for f in engine_logs), sorted(files)[:40]
    host_logs = [f for f in files if f.startswith(str(tmp_path / "home" / ".local" / "state" / "metalfleet"))]
    assert host_logs and any("$ " in files[f] for f in host_logs), "no bootstrap host log was written"

    leaks = _search(tmp_path, p, planted)
    assert not leaks, "planted secrets found in plaintext:\n" + "\n".join(leaks)


def test_python_api_example_keeps_key_material_secret(tmp_path: Path, ec2: Ec2Emulator, planted: Planted) -> None:
    """examples/python-api: the key material itself set with --secret privateKey, up and destroy."""
    folder = tmp_path / "python-api"
    shutil.copytree(ROOT / "examples" / "python-api", folder)
    link_test_environment(folder)
    p = SecretProject(folder, _env(tmp_path, ec2, planted))
    p.pulumi("login", f"file://{tmp_path / 'state'}")
    p.pulumi("stack", "init", "api")
    for k, val in (("image", IMAGE), ("subnetId", "subnet-54ebca3a3af69685d"),
                   ("keyPair", KEY_PAIR), ("count", "1"), ("name", "api-secrets"),
                   ("knownHosts", str(tmp_path / "known_hosts"))):
        p.pulumi("config", "set", k, val)
    p.pulumi("config", "set", "--path", "sshIngressCidrs[0]", CONTROLLER_CIDR)
    p.pulumi("config", "set", "--secret", "privateKey", stdin=planted.key_path.read_text())
    preview = json.loads(p.pulumi("preview", "--json").stdout)
    boot = next(s for s in preview["steps"] if s["urn"].endswith("::api-secrets-0-bootstrap"))
    assert boot["newState"]["inputs"]["secrets"] == "[secret]", boot["newState"]["inputs"]
    p.pulumi("up", "--yes", "--skip-preview", "--diff", *VERBOSE)
    out = json.loads(p.pulumi("stack", "output", "--json").stdout)
    assert len(out["node_ids"]) == 1
    state_doc = p.pulumi("stack", "export").stdout
    p.pulumi("destroy", "--yes", "--skip-preview")
    assert _live(ec2, "api-secrets") == []
    leaks = _search(tmp_path, p, planted)
    assert not leaks, "planted secrets found in plaintext:\n" + "\n".join(leaks)
    # the key reached the bootstrap and the gate only through their encrypted `secrets` input
    resources = json.loads(state_doc)["deployment"]["resources"]
    gated = [r for r in resources if r["urn"].endswith(("::api-secrets-0-bootstrap", "::api-secrets-acceptance"))]
    assert len(gated) == 2
    for r in gated:
        assert r["inputs"]["spec"]["ssh"].get("private_key") is None  # (Pulumi drops null properties)
        assert "ciphertext" in r["inputs"]["secrets"] and "ciphertext" in r["outputs"]["secrets"], r["inputs"]

