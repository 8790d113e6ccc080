"""The language host as the engine sees it: started by its launcher with the engine's flags, then spoken to
over gRPC (the LanguageRuntime protocol). The environment is a real virtualenv with real (tiny,
hand-built) wheels installed by pip; the full engine path is in test_e2e_language_host.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import language_pb2, language_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "tools" / "pulumi-launchers" / "pulumi-language-python"


def build_wheel(dest: Path, dist: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()) -> Path:
    """A minimal pure-Python wheel: what a package index would serve, without a build backend."""
    norm = dist.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    contents = {**files, f"{info}/METADATA": meta,
                f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: metalfleet-tests\nRoot-Is-Purelib: true\n"
                                 "Tag: py3-none-any\n"}
    path = dest / f"{norm}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in contents.items():
            z.writestr(name, text)
        z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*contents, f"{info}/RECORD"]))
    return path


def make_env_with_packages(where: Path) -> Path:
    """A virtualenv (no pip in it) with three packages installed by pip from local wheels."""
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    wheels = where / "wheels"
    wheels.mkdir()
    plugin = {"resource": True, "name": "mfdemo", "version": "1.2.3", "server": "https://plugins.example.invalid"}
    built = [
        build_wheel(wheels, "pulumi-mfdemo", "0.9.0",
                    {"pulumi_mfdemo/__init__.py": "", "pulumi_mfdemo/pulumi-plugin.json": json.dumps(plugin)},
                    requires=("mf-helper>=1",)),
        build_wheel(wheels, "mf-helper", "1.0.0", {"mf_helper/__init__.py": ""}),
        build_wheel(wheels, "pulumi-noplugin", "2.0.0a1",
                    {"pulumi_noplugin/__init__.py": "",
                     "pulumi_noplugin/pulumi-plugin.json": json.dumps({"resource": False})}),
        build_wheel(wheels, "pulumi-bare", "4.1", {"pulumi_bare/__init__.py": ""}),
    ]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", *map(str, built)], check=True)
    return venv


class Host:
    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = language_pb2_grpc.LanguageRuntimeStub(self.channel)


@pytest.fixture(scope="module")
def engine_address() -> Iterator[str]:
    """A gRPC server standing where the engine would (the host watches that it stays reachable)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0)


@pytest.fixture(scope="module")
def host(engine_address: str) -> Iterator[Host]:
    """Started as the engine starts it: flags (tracing, logging) first, the engine's address last."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not any(Path(p, t).exists() for t in ("uv", "poetry"))]  # neither uv nor poetry here
    env = {**os.environ, "PATH": os.pathsep.join(path), "METALFLEET_LANGHOST_PYTHON": sys.executable}
    proc = subprocess.Popen([str(LAUNCHER), "--logtostderr", "-v=5", "--tracing", "127.0.0.1:9", engine_address],
                            stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"the host printed {line!r} instead of its port"
    yield Host(proc, int(line))
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_env_with_packages(tmp_path_factory.mktemp("langhost-env"))


def info(root: Path, **options: Any) -> language_pb2.ProgramInfo:
    opts = struct_pb2.Struct()
    opts.update(options)
    return language_pb2.ProgramInfo(root_directory=str(root), program_directory=str(root), entry_point=".",
                                    options=opts)


def test_required_packages_and_plugins_come_from_the_installed_pulumi_packages(host: Host, venv: Path,
                                                                              tmp_path: Path) -> None:
    program = info(tmp_path, virtualenv=str(venv))
    packages = host.stub.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(info=program)).packages
    got = {(p.name, p.version, p.kind, p.server) for p in packages}
    # pulumi-mfdemo: from its pulumi-plugin.json; pulumi-bare: name and version from the package;
    # pulumi-noplugin says resource: false; mf-helper is not a Pulumi package.
    assert got == {("mfdemo", "v1.2.3", "resource", "https://plugins.example.invalid"),
                   ("bare", "v4.1.0", "resource", "")}
    plugins = host.stub.GetRequiredPlugins(language_pb2.GetRequiredPluginsRequest(info=program)).plugins
    assert {(p.name, p.version, p.kind, p.server) for p in plugins} == got


def test_program_dependencies_are_the_environments_packages(host: Host, venv: Path, tmp_path: Path) -> None:
    program = info(tmp_path, virtualenv=str(venv))
    direct = host.stub.GetProgramDependencies(
        language_pb2.GetProgramDependenciesRequest(info=program, transitiveDependencies=False)).dependencies
    every = host.stub.GetProgramDependencies(
        language_pb2.GetProgramDependenciesRequest(info=program, transitiveDependencies=True)).dependencies
    assert {(d.name, d.version) for d in every} == {("pulumi-mfdemo", "0.9.0"), ("mf-helper", "1.0.0"),
                                                    ("pulumi-noplugin", "2.0.0a1"), ("pulumi-bare", "4.1")}
    assert {d.name for d in direct} == {"pulumi-mfdemo", "pulumi-noplugin", "pulumi-bare"}  # mf-helper is required


def test_about_names_the_programs_interpreter(host: Host, venv: Path, tmp_path: Path) -> None:
    about = host.stub.About(language_pb2.AboutRequest(info=info(tmp_path, virtualenv=str(venv))))
    assert about.executable == str(venv / "bin" / "python")
    assert about.version == ".".join(map(str, sys.version_info[:3]))
    assert about.metadata["toolchain"] == "Pip"


def test_a_missing_virtualenv_says_to_run_pulumi_install(host: Host, tmp_path: Path) -> None:
    with pytest.raises(grpc.RpcError) as err:
        host.stub.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(info=info(tmp_path, virtualenv="venv")))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"{tmp_path / 'venv'}' doesn't exist: run `pulumi install` in {tmp_path}" in err.value.details()


def test_a_bad_runtime_option_is_named(host: Host, tmp_path: Path) -> None:
    with pytest.raises(grpc.RpcError) as err:
        host.stub.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(info=info(tmp_path, toolchain="conda")))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unsupported runtime option toolchain: 'conda'" in err.value.details()


@pytest.mark.parametrize("tool", ["uv", "poetry"])
def test_install_with_a_missing_toolchain_names_the_tool(host: Host, tmp_path: Path, tool: str) -> None:
    (tmp_path / "requirements.txt").write_text("pulumi\n")
    stream = host.stub.InstallDependencies(language_pb2.InstallDependenciesRequest(
        info=info(tmp_path, toolchain=tool)))
    out = b""
    with pytest.raises(grpc.RpcError) as err:
        for msg in stream:
            out += msg.stdout
    assert out.startswith(b"Installing dependencies...")
    assert f"Could not find `{tool}` executable" in err.value.details()
    assert f"toolchain: {tool}" in err.value.details()
    assert not (tmp_path / ".venv").exists() and not (tmp_path / "venv").exists()


def test_run_plugin_streams_output_and_the_exit_code(host: Host, venv: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "__main__.py").write_text(
        "import os, sys\n"
        "print('args', sys.argv[1:], flush=True)\n"
        "print('interpreter', sys.prefix, flush=True)\n"
        "print('env', os.environ.get('MF_FROM_ENGINE'), file=sys.stderr, flush=True)\n"
        "sys.exit(3)\n")
    stream = host.stub.RunPlugin(language_pb2.RunPluginRequest(
        info=info(plugin, virtualenv=str(venv)), pwd=str(tmp_path), args=["--flag", "value"],
        env=["MF_FROM_ENGINE=yes"], kind="resource", name="demo"))
    stdout, stderr, codes = b"", b"", []
    for msg in stream:
        which = msg.WhichOneof("output")
        if which == "stdout":
            stdout += msg.stdout
        elif which == "stderr":
            stderr += msg.stderr
        else:
            codes.append(msg.exitcode)
    assert stdout.decode().splitlines() == ["args ['--flag', 'value']", f"interpreter {venv}"]
    assert stderr.decode().strip() == "env yes"
    assert codes == [3], "the exit code is the last message"
