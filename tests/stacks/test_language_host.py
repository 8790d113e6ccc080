"""The language host's pure parts: the engine's arguments, runtime options, package -> plugin mapping.

The host lives beside the CLI (tools/pulumi-launchers/), not in the metalfleet package, so it is loaded
from its file. Its gRPC behaviour is tested against a running host in test_language_host_rpc.py and
through the real engine in test_e2e_language_host.py.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import grpc
import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST_FILE = ROOT / "tools" / "pulumi-launchers" / "pulumi_language_python_host.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pulumi_language_python_host", HOST_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


host = _load()
ENGINE = "127.0.0.1:40123"


@pytest.mark.parametrize("argv", [
    [ENGINE],
    ["--tracing", "http://127.0.0.1:9411/api/v1/spans", ENGINE],
    ["--tracing", "127.0.0.1:35001", ENGINE],  # a tracing address looks like an engine address: still a value
    ["-tracing=127.0.0.1:35001", ENGINE],
    ["--logtostderr", "-v=9", "--tracing", "127.0.0.1:35001", ENGINE],
    ["-root=/work/project", "--logflow", ENGINE],
    ["-root", "/work/project", "-v", "3", ENGINE],
    ["--unknown-flag=x", "--logtostderr", ENGINE],
    ["--", ENGINE],
])
def test_the_engine_address_is_never_a_flag_value(argv: list[str]) -> None:
    assert host.parse_args(argv).engine_address == ENGINE


def test_flag_values_are_kept() -> None:
    args = host.parse_args(["--logtostderr", "-v=9", "--tracing", "127.0.0.1:35001", "-root=/p",
                            "--use-executor", "/x/exec", ENGINE])
    assert (args.tracing, args.verbose, args.logtostderr, args.root, args.executor) == (
        "127.0.0.1:35001", 9, True, "/p", "/x/exec")
    assert host.parse_args(["-v", "3", ENGINE]).verbose == 3
    assert host.parse_args(["-logtostderr=false", ENGINE]).logtostderr is False


def test_no_address_and_bad_flags() -> None:
    assert host.parse_args([]).engine_address == ""
    assert host.parse_args(["--logtostderr"]).engine_address == ""
    unknown = host.parse_args(["--some-new-flag", "value", ENGINE])
    assert unknown.engine_address == ENGINE and "value" in unknown.ignored
    with pytest.raises(host.HostError, match="-tracing needs a value"):
        host.parse_args(["--tracing"])
    with pytest.raises(host.HostError, match="not a number"):
        host.parse_args(["-v=lots", ENGINE])


def test_runtime_options() -> None:
    opts = host.parse_options("/p", "/p/src", {"virtualenv": "venv", "toolchain": "pip", "typechecker": "mypy"})
    assert (opts.root, opts.program_dir, opts.virtualenv, opts.toolchain, opts.typechecker) == (
        "/p", "/p/src", "venv", "pip", "mypy")
    # plugins (not policy packs) never run in the ambient interpreter: venv by default
    assert host.parse_options("/p", "/p", {}, is_plugin=True).virtualenv == "venv"
    assert host.parse_options("/p", "/p", {}, is_plugin=False).virtualenv == ""
    assert host.parse_options("/p", "/p", {"toolchain": "uv"}, is_plugin=True).virtualenv == ""
    with pytest.raises(host.HostError, match="unsupported runtime option toolchain: 'conda'") as bad:
        host.parse_options("/p", "/p", {"toolchain": "conda"})
    assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(host.HostError, match="virtualenv must be a string"):
        host.parse_options("/p", "/p", {"virtualenv": 3})


def test_pip_toolchain_resolves_the_virtualenv_from_the_project_root(tmp_path: Path) -> None:
    tc = host.resolve_toolchain(host.parse_options(str(tmp_path), str(tmp_path / "src"), {"virtualenv": "venv"}))
    assert tc.name == "pip" and tc.venv == str(tmp_path / "venv")
    assert tc.python() == str(tmp_path / "venv" / "bin" / "python")
    env = tc.env({"PATH": "/usr/bin", "PYTHONHOME": "/x"})
    assert env["PATH"].split(":")[0] == str(tmp_path / "venv" / "bin") and "PYTHONHOME" not in env
    assert env["VIRTUAL_ENV"] == str(tmp_path / "venv")
    with pytest.raises(host.HostError, match=r"doesn't exist: run `pulumi install`"):
        tc.validate()


def test_a_lock_file_picks_the_toolchain(tmp_path: Path) -> None:
    (tmp_path / "poetry.lock").write_text("")
    with pytest.raises(host.HostError, match="Could not find `poetry` executable"):
        if host.shutil.which("poetry"):
            pytest.fail("poetry is on PATH here; this test checks the error without it")
        host.resolve_toolchain(host.parse_options(str(tmp_path), str(tmp_path), {}))


@pytest.mark.parametrize(("pep440", "semver"), [
    ("1", "1.0.0"), ("1.2", "1.2.0"), ("1.2.3", "1.2.3"), ("1.2.3.4", "1.2.3.4"),
    ("1.2.3a4", "1.2.3-alpha.4"), ("1.2.3b4", "1.2.3-beta.4"), ("1.2.3rc4", "1.2.3-rc.4"),
    ("1.2.3.post4", "1.2.3+post4"), ("1.2.3.dev5", "1.2.3+dev5"), ("1.2.3.post4.dev5", "1.2.3+post4dev5"),
    ("3.31.0a1605189729", "3.31.0-alpha.1605189729"),
])
def test_plugin_version_from_a_package_version(pep440: str, semver: str) -> None:
    assert host.plugin_version(pep440) == semver


@pytest.mark.parametrize("bad", ["", "1!2.0", "abc", "1.0-foo", "\uff11.0"])  # the last: a fullwidth digit
def test_plugin_version_refuses_what_it_cannot_translate(bad: str) -> None:
    with pytest.raises(ValueError):
        host.plugin_version(bad)


def test_package_dependency_rules() -> None:
    dep = host.package_dependency
    pkg = host.Package
    # a pulumi-* package without metadata: name and version from the package
    plain = dep(pkg("pulumi-aws", "6.83.0"))
    assert (plain.name, plain.version, plain.kind, plain.server) == ("aws", "v6.83.0", "resource", "")
    # pulumi-plugin.json wins: name, version, server, parameterization
    meta = json.dumps({"resource": True, "name": "terraform-provider", "version": "0.8.1",
                       "server": "github://api.github.com/pulumi",
                       "parameterization": {"name": "netbox", "version": "1.2.3", "value": "eyJ4IjoxfQ=="}})
    full = dep(pkg("pulumi-netbox", "1.2.3", meta))
    assert (full.name, full.version, full.server) == ("terraform-provider", "v0.8.1", "github://api.github.com/pulumi")
    assert (full.parameterization.name, full.parameterization.version, full.parameterization.value) == (
        "netbox", "1.2.3", b'{"x":1}')
    # a package of any name with a resource plugin counts; resource: false never does
    assert dep(pkg("acme-infra", "2.0", json.dumps({"resource": True, "name": "acme"}))).version == "v2.0.0"
    assert dep(pkg("pulumi-policy", "1.21.0")) is None
    assert dep(pkg("pulumi-esc-sdk", "0.12.0")) is None
    assert dep(pkg("pulumi-tools", "1.0", json.dumps({"resource": False}))) is None
    assert dep(pkg("requests", "2.32.0")) is None
    assert dep(pkg("pulumi-weird", "1!1.0")) is None  # no plugin version can be derived: skipped
    with pytest.raises(host.HostError, match=r"pulumi-plugin\.json of package pulumi-bad"):
        dep(pkg("pulumi-bad", "1.0", "{not json"))
