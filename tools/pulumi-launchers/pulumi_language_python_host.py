"""A Python language host for the Pulumi engine (the LanguageRuntime gRPC service).

Why: no Pulumi CLI release can be downloaded where this repo's tests run, and the module proxy does
not serve the Go language host, so the self-built CLI needs one. It behaves like Pulumi's own
Python host (written from its documented behaviour, not its code):

- ``runtime.options`` from Pulumi.yaml / PulumiPolicy.yaml choose the environment: ``virtualenv``
  (a folder relative to the project root), ``toolchain`` (pip, uv or poetry; auto-detected from a
  ``uv.lock`` / ``poetry.lock`` when absent) and ``typechecker`` (mypy or pyright, run first);
- ``InstallDependencies`` (``pulumi install``) creates the virtualenv and installs the project's
  requirements, streaming the tools' stdout and stderr back to the engine;
- ``GetRequiredPackages`` / ``GetRequiredPlugins`` report the plugins of the ``pulumi-*`` packages
  installed in the program's environment (their ``pulumi-plugin.json``), ``GetProgramDependencies``
  lists that environment's packages;
- ``Run`` starts the executor (pulumi-language-python-exec) in the program's interpreter;
- ``RunPlugin`` runs Python plugins and policy packs (``pulumi preview --policy-pack DIR``), streaming
  their stdout, stderr and exit code; a policy pack is fronted by a small Analyzer proxy that
  learns the stack's configuration from the engine before it starts the pack, as Pulumi's host does.

The host process itself needs an interpreter with the Pulumi SDK (grpcio and the protos); the
launcher beside this file picks one. Programs and plugins run in their own environments.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format
from pulumi.runtime.proto import analyzer_pb2, language_pb2, language_pb2_grpc, plugin_pb2

#: The executor, installed beside this file (as a CLI release ships it beside its language host).
DEFAULT_EXECUTOR = str(Path(__file__).resolve().with_name("pulumi-language-python-exec"))
#: Exit code the executor uses once it has already reported the error to the engine.
BAIL_EXIT = 32
#: Packages named pulumi-* that are known to have no plugin.
PACKAGES_WITHOUT_PLUGINS = frozenset({"pulumi-policy", "pulumi-esc-sdk"})
TOOLCHAINS = ("pip", "uv", "poetry")
TYPECHECKERS = ("mypy", "pyright")
#: How long the engine may be unreachable before the host shuts itself down (the engine went away).
ENGINE_GONE_AFTER_S = 300.0
GRPC_OPTIONS = [("grpc.max_receive_message_length", 400 * 1024 * 1024),
                ("grpc.max_send_message_length", 400 * 1024 * 1024)]


class HostError(Exception):
    """A failure the engine shows to the user as is; ``code`` is the gRPC status it travels with."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.FAILED_PRECONDITION) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------------------------------------------------------
# Command line

@dataclass
class HostArgs:
    engine_address: str = ""
    tracing: str = ""
    root: str = ""
    executor: str = ""
    logtostderr: bool = False
    logflow: bool = False
    verbose: int = 0
    version: bool = False
    ignored: list[str] = field(default_factory=list)


#: Flags that take a value (``-flag=v``, ``--flag=v``, ``-flag v`` or ``--flag v``), as Go's flag package parses them.
_VALUE_FLAGS = {"tracing": "tracing", "root": "root", "use-executor": "executor", "v": "verbose"}
_BOOL_FLAGS = {"logtostderr": "logtostderr", "logflow": "logflow", "version": "version"}
_ADDRESS = re.compile(r"^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):\d{1,5}$")


def parse_args(argv: Sequence[str]) -> HostArgs:
    """The engine's arguments: flags (``--tracing URL``, ``-root=DIR``, ``--logtostderr``, ``-v=N``) then the
    engine's address. A flag's value is never taken for the address; an unknown flag is ignored (with its
    ``=value``), and the address is the first positional argument that has the form host:port.
    """
    out = HostArgs()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positional.extend(argv[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, has_value, value = arg.lstrip("-").partition("=")
        if name in _VALUE_FLAGS:
            if not has_value:
                if i >= len(argv):
                    raise HostError(f"flag -{name} needs a value", grpc.StatusCode.INVALID_ARGUMENT)
                value = argv[i]
                i += 1
            attr = _VALUE_FLAGS[name]
            if attr == "verbose":
                try:
                    out.verbose = int(value)
                except ValueError as exc:
                    raise HostError(f"flag -v: {value!r} is not a number", grpc.StatusCode.INVALID_ARGUMENT) from exc
            else:
                setattr(out, attr, value)
        elif name in _BOOL_FLAGS:
            setattr(out, _BOOL_FLAGS[name], (value.lower() not in ("false", "0")) if has_value else True)
        else:
            out.ignored.append(arg)
    for arg in positional:
        if _ADDRESS.match(arg) and not out.engine_address:
            out.engine_address = arg
        else:
            out.ignored.append(arg)
    return out


# ---------------------------------------------------------------------------------------------------------------
# Runtime options and toolchains

@dataclass(frozen=True)
class PythonOptions:
    root: str
    program_dir: str
    virtualenv: str = ""
    toolchain: str = ""  # "" is auto: uv.lock -> uv, poetry.lock -> poetry, else pip
    typechecker: str = ""


def parse_options(root: str, program_dir: str, options: Mapping[str, Any], is_plugin: bool = False) -> PythonOptions:
    """``runtime.options`` as the engine sends them. A plugin (not a policy pack) defaults to ``virtualenv: venv``."""
    root = root or program_dir
    program_dir = program_dir or root
    values: dict[str, str] = {}
    for key, allowed in (("virtualenv", None), ("toolchain", TOOLCHAINS), ("typechecker", TYPECHECKERS)):
        if key not in options or options[key] is None:
            continue
        value = options[key]
        if not isinstance(value, str):
            raise HostError(f"runtime option {key} must be a string, got {value!r}", grpc.StatusCode.INVALID_ARGUMENT)
        if allowed is not None and value not in allowed:
            raise HostError(f"unsupported runtime option {key}: {value!r} (expected one of {', '.join(allowed)})",
                            grpc.StatusCode.INVALID_ARGUMENT)
        values[key] = value
    if is_plugin and values.get("toolchain", "pip") == "pip" and not values.get("virtualenv"):
        values["virtualenv"] = "venv"
    return PythonOptions(root=root, program_dir=program_dir, **values)


def _searchup(start: str, name: str) -> Path | None:
    here = Path(start).resolve()
    for d in (here, *here.parents):
        if (d / name).exists():
            return d
    return None


def _ambient_python() -> str:
    """PULUMI_PYTHON_CMD, else python3, else python, as Pulumi's host runs a program that has no virtualenv."""
    explicit = os.environ.get("PULUMI_PYTHON_CMD")
    names = [explicit] if explicit else ["python3", "python"]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise HostError(f"could not find {' or '.join(repr(n) for n in names)} on PATH: install Python 3 "
                    "or set PULUMI_PYTHON_CMD to an interpreter")


def activate(env: Mapping[str, str], venv: str) -> dict[str, str]:
    """``env`` with ``venv`` activated: its bin first on PATH, VIRTUAL_ENV set, PYTHONHOME dropped."""
    out = {k: v for k, v in env.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    out["PATH"] = os.pathsep.join(p for p in (str(Path(venv) / "bin"), env.get("PATH", "")) if p)
    out["VIRTUAL_ENV"] = venv
    return out


def is_virtualenv(path: str) -> bool:
    return (Path(path) / "bin" / "python").is_file()


def _run_output(argv: Sequence[str], cwd: str | None = None, env: Mapping[str, str] | None = None) -> str:
    try:
        proc = subprocess.run(list(argv), cwd=cwd, env=dict(env) if env is not None else None,
                              capture_output=True, text=True, check=False)
    except OSError as exc:
        raise HostError(f"could not run {argv[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise HostError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


Emit = Callable[[str, bytes], None]
"""Where a toolchain step writes its output: ``emit("stdout"|"stderr", data)``."""


class Toolchain:
    """One way of managing a program's Python environment."""

    name = "pip"

    def __init__(self, opts: PythonOptions) -> None:
        self.opts = opts
        self._venv = ""

    @property
    def venv(self) -> str:
        """Absolute path of the virtualenv; "" for the ambient interpreter."""
        return self._venv

    # --- the environment
    def python(self) -> str:
        return str(Path(self.venv) / "bin" / "python") if self.venv else _ambient_python()

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        base = os.environ if base is None else base
        return activate(base, self.venv) if self.venv else dict(base)

    def validate(self) -> None:
        """The environment is there to run in; else a clear error saying how to create it."""
        if self.venv and not is_virtualenv(self.venv):
            state = "doesn't exist" if not Path(self.venv).exists() else "doesn't appear to be a virtual environment"
            raise HostError(
                f"The 'virtualenv' option in {_project_file(self.opts.root)} is set to {self.opts.virtualenv!r}, "
                f"but {self.venv!r} "
                f"{state}: run `pulumi install` in {self.opts.root} to create it and install the project's "
                f"dependencies (or by hand: python3 -m venv {self.venv} && {self.venv}/bin/python -m pip install "
                f"-r requirements.txt)")

    def version(self) -> str:
        return ""

    # --- installing
    def install(self, cwd: str, emit: Emit, runner: ProcessRunner) -> None:
        raise NotImplementedError


class Pip(Toolchain):
    """pip and venv: ``python -m venv``, then ``pip install -r requirements.txt`` in the program's folder."""

    name = "pip"

    def __init__(self, opts: PythonOptions) -> None:
        super().__init__(opts)
        if opts.virtualenv:
            self._venv = str(Path(opts.root, opts.virtualenv).resolve())

    def version(self) -> str:
        out = _run_output([self.python(), "-m", "pip", "--version"], env=self.env())
        m = re.match(r"pip\s+(\S+)", out)
        return m.group(1) if m else ""

    def install(self, cwd: str, emit: Emit, runner: ProcessRunner) -> None:
        if self.venv:
            target = Path(self.venv)
            if target.exists() and not target.is_dir():
                raise HostError(f"the 'virtualenv' option in Pulumi.yaml is set to {self.opts.virtualenv!r}, "
                                f"but {self.venv} is not a directory")
            emit("stdout", b"Creating virtual environment...\n")
            runner.check([_ambient_python(), "-m", "venv", self.venv], cwd, dict(os.environ), emit,
                          f"creating virtual environment at {self.venv}")
            emit("stdout", b"Finished creating virtual environment\n")
        env = self.env()
        emit("stdout", b"Updating pip, setuptools, and wheel in virtual environment...\n")
        runner.check([self.python(), "-m", "pip", "install", "--upgrade", "pip", "setuptools", "wheel"], cwd, env,
                     emit, "updating pip, setuptools, and wheel")
        emit("stdout", b"Finished updating\n")
        if not (Path(cwd) / "requirements.txt").is_file():
            return
        emit("stdout", b"Installing dependencies in virtual environment...\n")
        runner.check([self.python(), "-m", "pip", "install", "-r", "requirements.txt"], cwd, env, emit,
                     "installing dependencies")
        emit("stdout", b"Finished installing dependencies\n")


def _require_tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise HostError(f"Could not find `{name}` executable: the Pulumi.yaml runtime option `toolchain: {name}` "
                        f"needs it. Install {name} and make sure it is on PATH, or set `toolchain: pip`.")
    return found


class Uv(Toolchain):
    """uv: the virtualenv (default ``.venv`` beside uv.lock / pyproject.toml) is kept in sync with ``uv sync``."""

    name = "uv"

    def __init__(self, opts: PythonOptions) -> None:
        super().__init__(opts)
        self.uv = _require_tool("uv")
        venv = opts.virtualenv
        if not venv:
            anchor = _searchup(opts.root, "uv.lock") or _searchup(opts.root, "pyproject.toml") or Path(opts.root)
            venv = os.environ.get("UV_PROJECT_ENVIRONMENT") or ".venv"
            venv = str(anchor / venv) if not os.path.isabs(venv) else venv
        self._venv = str(Path(opts.root, venv).resolve())

    def _uv_env(self) -> dict[str, str]:
        return {**os.environ, "UV_PROJECT_ENVIRONMENT": self.venv}

    def version(self) -> str:
        out = _run_output([self.uv, "--version"])
        m = re.match(r"uv\s+(\S+)", out)
        return m.group(1) if m else ""

    def validate(self) -> None:
        if not is_virtualenv(self.venv):
            raise HostError(f"{self.venv!r} is not a virtualenv: run `pulumi install` in {self.opts.root} "
                            "(uv sync) to create it")

    def install(self, cwd: str, emit: Emit, runner: ProcessRunner) -> None:
        env = self._uv_env()
        if _searchup(cwd, "uv.lock") is None:
            pyproject = _searchup(cwd, "pyproject.toml")
            if pyproject is None or not _has_project_table(pyproject / "pyproject.toml"):
                target = pyproject or Path(cwd)
                args = [self.uv, "init", "--bare", "--no-package", "--no-pin-python"]
                name = _project_name(cwd)
                if name:
                    args += ["--name", name]
                if pyproject is None:
                    runner.check(args, str(target), env, emit, "initializing the uv project")
                else:
                    raise HostError(f"{target / 'pyproject.toml'} has no [project] table: add one "
                                    "(uv needs it to track the dependencies)")
                reqs = Path(cwd) / "requirements.txt"
                if reqs.is_file():
                    runner.check([self.uv, "add", "--no-sync", "-r", str(reqs)], str(target), env, emit,
                                 "adding requirements.txt to pyproject.toml")
                    reqs.unlink()
                    emit("stdout", b"Deleted requirements.txt, dependencies for this project are tracked in "
                                   b"pyproject.toml\n")
        runner.check([self.uv, "sync"], cwd, env, emit, "installing dependencies")

    def sync_before_run(self) -> None:
        """As `uv run` would: bring the virtualenv up to date (inexactly) before the program runs."""
        if _searchup(self.opts.root, "pyproject.toml") is not None:
            _run_output([self.uv, "sync", "--inexact"], cwd=self.opts.root, env=self._uv_env())


class Poetry(Toolchain):
    """poetry: ``poetry install`` in the project; the virtualenv is the one poetry made for it."""

    name = "poetry"

    def __init__(self, opts: PythonOptions) -> None:
        super().__init__(opts)
        self.poetry = _require_tool("poetry")

    @property
    def venv(self) -> str:
        """The virtualenv poetry made for the project (asked lazily: `poetry env info` is slow)."""
        if not self._venv:
            try:
                self._venv = _run_output([self.poetry, "env", "info", "--path", "--no-ansi"],
                                         cwd=self.opts.program_dir).strip()
            except HostError:
                return ""
        return self._venv

    def version(self) -> str:
        out = _run_output([self.poetry, "--version", "--no-ansi", "--no-plugins"])
        m = re.search(r"version\s+([0-9][^\s)]*)", out)
        return m.group(1) if m else ""

    def validate(self) -> None:
        if not self.venv or not is_virtualenv(self.venv):
            raise HostError(f"poetry has no virtualenv for {self.opts.program_dir}: run `pulumi install` "
                            "(poetry install) to create it")

    def install(self, cwd: str, emit: Emit, runner: ProcessRunner) -> None:
        if _searchup(cwd, "pyproject.toml") is None:
            raise HostError(f"`toolchain: poetry` needs a pyproject.toml in {cwd} (found none): create one with "
                            "`poetry init` and add the packages of requirements.txt with `poetry add`, "
                            "or set `toolchain: pip`")
        runner.check([self.poetry, "install", "--no-ansi"], cwd, dict(os.environ), emit, "poetry install")
        self._venv = ""


def _project_file(root: str) -> str:
    """Pulumi.yaml, or the policy pack's / plugin's project file when that is what ``root`` holds."""
    for name in ("Pulumi.yaml", "Pulumi.yml", "PulumiPolicy.yaml", "PulumiPolicy.yml", "PulumiPlugin.yaml",
                 "PulumiPlugin.yml"):
        if (Path(root) / name).is_file():
            return name
    return "Pulumi.yaml"


def _has_project_table(pyproject: Path) -> bool:
    return re.search(r"^\[project\]\s*$", pyproject.read_text(errors="replace"), flags=re.M) is not None


def _project_name(cwd: str) -> str:
    for name in ("Pulumi.yaml", "Pulumi.yml", "PulumiPolicy.yaml", "PulumiPolicy.yml"):
        path = Path(cwd) / name
        if path.is_file():
            m = re.search(r"^name:\s*['\"]?([^'\"\s#]+)", path.read_text(errors="replace"), flags=re.M)
            if m:
                return m.group(1)
    return ""


def resolve_toolchain(opts: PythonOptions) -> Toolchain:
    chosen = opts.toolchain
    if not chosen:
        if _searchup(opts.program_dir, "uv.lock") is not None:
            chosen = "uv"
        elif _searchup(opts.program_dir, "poetry.lock") is not None:
            chosen = "poetry"
        else:
            chosen = "pip"
    return {"pip": Pip, "uv": Uv, "poetry": Poetry}[chosen](opts)


# ---------------------------------------------------------------------------------------------------------------
# Packages in an environment and their plugins

#: Run in the program's interpreter (stdlib only): its distributions, what they require, and their
#: pulumi-plugin.json (from the wheel's file list, else the top-level package the name maps to).
_LIST_SCRIPT = r"""
import importlib.metadata as md, importlib.util, json, os, re, sys
sys.path[:] = [p for p in sys.path if p not in ("", os.getcwd())]
out = []
for dist in md.distributions():
    name = dist.metadata["Name"]
    if not name:
        continue
    requires = []
    for req in dist.requires or []:
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if m:
            requires.append(m.group(1))
    plugin = None
    for f in dist.files or []:
        parts = f.parts
        if len(parts) == 2 and parts[1] == "pulumi-plugin.json":
            path = str(dist.locate_file(f))
            if os.path.isfile(path):
                plugin = path
                break
    if plugin is None:
        try:
            spec = importlib.util.find_spec(name.replace("-", "_"))
        except Exception:
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec else []:
            path = os.path.join(str(loc), "pulumi-plugin.json")
            if os.path.isfile(path):
                plugin = path
                break
    data = None
    if plugin:
        with open(plugin, encoding="utf-8") as fh:
            data = fh.read()
    out.append({"name": name, "version": dist.version, "requires": requires, "plugin": data})
print(json.dumps({"executable": sys.executable, "version": sys.version.split()[0], "packages": out}))
"""


def normalize_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Package:
    name: str  # normalized (PEP 503)
    version: str
    plugin_json: str | None = None


def environment_info(tc: Toolchain) -> dict[str, Any]:
    """The program's interpreter, its version, and every installed distribution."""
    out = _run_output([tc.python(), "-c", _LIST_SCRIPT], cwd=tc.opts.root, env=tc.env())
    return json.loads(out)  # type: ignore[no-any-return]


def list_packages(tc: Toolchain, transitive: bool = True) -> list[Package]:
    """Installed packages; without ``transitive``, only those no other installed package requires (pip's
    ``--not-required``)."""
    raw = environment_info(tc)["packages"]
    required = {normalize_name(r) for p in raw for r in p["requires"]}
    seen: dict[str, Package] = {}
    for p in raw:
        name = normalize_name(p["name"])
        if name in seen or (not transitive and name in required):
            continue
        seen[name] = Package(name, p["version"], p["plugin"])
    return sorted(seen.values(), key=lambda p: p.name)


def plugin_version(package_version: str) -> str:
    """A PEP 440 package version as the plugin's semver: 1.0 -> 1.0.0, 1.2.3a4 -> 1.2.3-alpha.4, 1.2.3rc1 ->
    1.2.3-rc.1, 1.2.3.post4 -> 1.2.3+post4, 1.2.3.post4.dev5 -> 1.2.3+post4dev5. Epochs are refused."""
    if not package_version or not package_version.isascii():
        raise ValueError(f"cannot parse version {package_version!r}")
    m = re.fullmatch(r"(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?", package_version)
    if not m:
        raise ValueError(f"unsupported version {package_version!r}")
    segments = m.group(1).split(".")
    segments += ["0"] * (3 - len(segments))
    out = ".".join(segments)
    if m.group(2):
        out += "-" + {"a": "alpha", "b": "beta", "rc": "rc"}[m.group(2)] + "." + m.group(3)
    if m.group(4) is not None:
        out += "+post" + m.group(4)
    if m.group(5) is not None:
        out += ("dev" if m.group(4) is not None else "+dev") + m.group(5)
    return out


def _parameterization(raw: Any) -> plugin_pb2.PackageParameterization | None:
    if not isinstance(raw, dict):
        return None
    value = raw.get("value") or ""
    return plugin_pb2.PackageParameterization(name=raw.get("name", ""), version=raw.get("version", ""),
                                              value=base64.b64decode(value) if value else b"")


def package_dependency(pkg: Package) -> plugin_pb2.PackageDependency | None:
    """The plugin a ``pulumi-*`` package (or one with a pulumi-plugin.json) needs; None when it has none."""
    if pkg.name in PACKAGES_WITHOUT_PLUGINS:
        return None
    meta: dict[str, Any] = {}
    if pkg.plugin_json is not None:
        try:
            meta = json.loads(pkg.plugin_json)
        except json.JSONDecodeError as exc:
            raise HostError(f"pulumi-plugin.json of package {pkg.name} is not valid JSON: {exc}",
                            grpc.StatusCode.INTERNAL) from exc
        if not meta.get("resource"):
            return None
    elif not pkg.name.startswith("pulumi-"):
        return None
    name = meta.get("name") or pkg.name.removeprefix("pulumi-")
    version = meta.get("version") or ""
    if not version:
        try:
            version = plugin_version(pkg.version)
        except ValueError:
            return None  # the plugin version cannot be derived (as Pulumi's host, skip it)
    if not version.startswith("v"):
        version = "v" + version
    dep = plugin_pb2.PackageDependency(name=name, kind="resource", version=version, server=meta.get("server", ""))
    param = _parameterization(meta.get("parameterization"))
    if param is not None:
        dep.parameterization.CopyFrom(param)
    ext = _parameterization(meta.get("extensionParameterization"))
    if ext is not None:
        dep.extension.CopyFrom(ext)
    return dep


# ---------------------------------------------------------------------------------------------------------------
# Child processes and their output

class ProcessRunner:
    """Starts child processes, tracks them (Cancel and a cancelled RPC stop them) and streams their output."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stopping: set[int] = set()
        self.cancelled = threading.Event()

    def start(self, argv: Sequence[str], cwd: str | None, env: Mapping[str, str], pipe: bool = True,
              ) -> subprocess.Popen[bytes]:
        if self.cancelled.is_set():
            raise HostError("the language host was cancelled", grpc.StatusCode.CANCELLED)
        out = subprocess.PIPE if pipe else None
        try:
            proc = subprocess.Popen(list(argv), cwd=cwd or None, env=dict(env), stdout=out, stderr=out,
                                    stdin=subprocess.DEVNULL)
        except OSError as exc:
            raise HostError(f"could not run {argv[0]}: {exc}") from exc
        with self._lock:
            self._procs.add(proc)
        return proc

    def forget(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)
            self._stopping.discard(proc.pid)

    def stop(self, proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
        """SIGINT (once), then SIGKILL after ``grace_s``: the child may flush and report first."""
        with self._lock:
            if proc.poll() is not None or proc.pid in self._stopping:
                return
            self._stopping.add(proc.pid)
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except ProcessLookupError:
            pass

    def cancel_all(self) -> None:
        self.cancelled.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            threading.Thread(target=self.stop, args=(proc,), daemon=True).start()

    @staticmethod
    def pump(streams: Mapping[str, Any], sink: queue.Queue[tuple[str, bytes | None]]) -> list[threading.Thread]:
        """Copy each pipe to ``sink`` as (stream, chunk); (stream, None) marks its end."""
        def copy(kind: str, pipe: Any) -> None:
            try:
                while True:
                    chunk = os.read(pipe.fileno(), 65536)
                    if not chunk:
                        break
                    sink.put((kind, chunk))
            except OSError:
                pass
            finally:
                sink.put((kind, None))

        threads = [threading.Thread(target=copy, args=(k, p), daemon=True) for k, p in streams.items()]
        for t in threads:
            t.start()
        return threads

    def stream(self, argv: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> Iterator[tuple[str, bytes]]:
        """Run ``argv``; yields (stdout|stderr, chunk) as they come, then ("exit", code as ASCII)."""
        proc = self.start(argv, cwd, env)
        sink: queue.Queue[tuple[str, bytes | None]] = queue.Queue()
        try:
            self.pump({"stdout": proc.stdout, "stderr": proc.stderr}, sink)
            open_streams = 2
            while open_streams:
                kind, chunk = sink.get()
                if chunk is None:
                    open_streams -= 1
                else:
                    yield kind, chunk
            yield "exit", str(proc.wait()).encode()
        finally:
            self.stop(proc)
            self.forget(proc)

    def check(self, argv: Sequence[str], cwd: str | None, env: Mapping[str, str], emit: Emit, what: str) -> None:
        """Run one install step, its output streamed through ``emit``; a failure names the step and the command."""
        tail = b""
        code = 0
        for kind, chunk in self.stream(argv, cwd, env):
            if kind == "exit":
                code = int(chunk)
                continue
            if kind == "stderr":
                tail = (tail + chunk)[-4000:]
            emit(kind, chunk)
        if code != 0:
            detail = tail.decode(errors="replace").strip()
            raise HostError(f"{what} via `{' '.join(argv)}` failed (exit {code})" + (f": {detail}" if detail else ""))


class _Emitter:
    """Collects (stream, data) from install steps running on a worker thread for a streaming RPC to yield."""

    def __init__(self) -> None:
        self.q: queue.Queue[tuple[str, Any]] = queue.Queue()

    def __call__(self, kind: str, data: bytes) -> None:
        self.q.put((kind, data))

    def run(self, work: Callable[[], None]) -> Iterator[tuple[str, bytes]]:
        def target() -> None:
            try:
                work()
            except BaseException as exc:  # handed to the RPC thread, which reports it
                self.q.put(("error", exc))
            else:
                self.q.put(("done", None))

        threading.Thread(target=target, daemon=True).start()
        while True:
            kind, data = self.q.get()
            if kind == "done":
                return
            if kind == "error":
                raise data
            yield kind, data


# ---------------------------------------------------------------------------------------------------------------
# Policy packs: an Analyzer proxy that learns the stack's configuration before the pack starts

class PolicyProxy(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Serves the Analyzer service on its own port while the policy pack starts.

    The engine talks to the port it reads first from RunPlugin's stdout. Handshake and ConfigureStack are
    answered here: the configuration becomes the pack's PULUMI_PROJECT/STACK/ORGANIZATION/DRY_RUN/CONFIG
    environment, which Python policy packs read. Every other call waits for the pack and is forwarded to it
    as raw bytes. A call before ConfigureStack starts the pack without configuration.
    """

    SERVICE = "/pulumirpc.Analyzer/"

    def __init__(self) -> None:
        self._config_lock = threading.Lock()
        self._config_set = threading.Event()
        self.config: analyzer_pb2.AnalyzerStackConfigureRequest | None = None
        self._ready = threading.Event()
        self._channel: grpc.Channel | None = None
        self._error = ""
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=GRPC_OPTIONS)
        self._server.add_generic_rpc_handlers((self,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    def _set_config(self, config: analyzer_pb2.AnalyzerStackConfigureRequest | None) -> None:
        with self._config_lock:
            if not self._config_set.is_set():
                self.config = config
                self._config_set.set()

    def await_config(self, alive: Callable[[], bool]) -> analyzer_pb2.AnalyzerStackConfigureRequest | None:
        while not self._config_set.wait(0.2):
            if not alive():
                raise HostError("the engine went away before configuring the policy pack", grpc.StatusCode.CANCELLED)
        return self.config

    def attach(self, channel: grpc.Channel) -> None:
        self._channel = channel
        self._ready.set()

    def fail(self, message: str) -> None:
        self._error = message
        self._ready.set()

    def stop(self) -> None:
        self.fail(self._error or "the policy pack exited")
        self._server.stop(0)

    def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler | None:
        method = str(handler_call_details.method)
        if not method.startswith(self.SERVICE):
            return None
        name = method[len(self.SERVICE):]
        if name == "Handshake":
            return grpc.unary_unary_rpc_method_handler(
                lambda req, ctx: analyzer_pb2.AnalyzerHandshakeResponse(),
                request_deserializer=analyzer_pb2.AnalyzerHandshakeRequest.FromString,
                response_serializer=analyzer_pb2.AnalyzerHandshakeResponse.SerializeToString)
        if name == "ConfigureStack":
            def configure(req: analyzer_pb2.AnalyzerStackConfigureRequest, ctx: Any) -> Any:
                self._set_config(req)
                return analyzer_pb2.AnalyzerStackConfigureResponse()

            return grpc.unary_unary_rpc_method_handler(
                configure, request_deserializer=analyzer_pb2.AnalyzerStackConfigureRequest.FromString,
                response_serializer=analyzer_pb2.AnalyzerStackConfigureResponse.SerializeToString)
        return grpc.unary_unary_rpc_method_handler(lambda raw, ctx: self._forward(method, raw, ctx))

    def _forward(self, method: str, raw: bytes, ctx: Any) -> bytes:
        self._set_config(None)
        while not self._ready.wait(0.2):
            if not ctx.is_active():
                ctx.abort(grpc.StatusCode.CANCELLED, "cancelled while the policy pack was starting")
        if self._channel is None or self._error:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, f"policy pack not started: {self._error or 'no connection'}")
        assert self._channel is not None
        remaining = ctx.time_remaining()  # without a deadline, a huge number that a client call would overflow on
        try:
            return self._channel.unary_unary(method)(  # type: ignore[no-any-return]
                raw, timeout=remaining if remaining < 86400 else None)
        except grpc.RpcError as exc:
            ctx.abort(exc.code(), exc.details() or str(exc))
            raise  # unreachable: abort raises


def _policy_env(config: analyzer_pb2.AnalyzerStackConfigureRequest | None) -> dict[str, str]:
    if config is None:
        return {}
    env = {"PULUMI_ORGANIZATION": config.organization, "PULUMI_PROJECT": config.project,
           "PULUMI_STACK": config.stack, "PULUMI_DRY_RUN": "true" if config.dry_run else "false"}
    if config.config:
        env["PULUMI_CONFIG"] = json.dumps(dict(config.config))
    return {k: v for k, v in env.items() if v}


def _env_list(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out


# ---------------------------------------------------------------------------------------------------------------
# The service

def _options_of(info: Any) -> dict[str, Any]:
    return json_format.MessageToDict(info.options) if info.HasField("options") else {}


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    def __init__(self, engine_address: str, executor: str = DEFAULT_EXECUTOR, tracing: str = "") -> None:
        self.engine_address = engine_address
        self.executor = executor
        self.tracing = tracing
        self.runner = ProcessRunner()

    # --- helpers
    @staticmethod
    def _fail(context: Any, exc: HostError) -> None:
        context.abort(exc.code, str(exc))

    def _toolchain(self, info: Any, is_plugin: bool = False) -> Toolchain:
        opts = parse_options(info.root_directory, info.program_directory, _options_of(info), is_plugin)
        return resolve_toolchain(opts)

    # --- handshake and information
    def Handshake(self, request: Any, context: Any) -> Any:
        self.engine_address = request.engine_address or self.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        from pulumi._version import _VERSION

        return plugin_pb2.PluginInfo(version=_VERSION)

    def About(self, request: Any, context: Any) -> Any:
        try:
            if request.HasField("info"):
                tc = self._toolchain(request.info)
            else:
                tc = resolve_toolchain(PythonOptions(root=os.getcwd(), program_dir=os.getcwd(), toolchain="pip"))
            found = json.loads(_run_output([tc.python(), "-c", "import sys, json; print(json.dumps("
                                            "[sys.executable, sys.version.split()[0]]))"], env=tc.env()))
            try:
                tool_version = tc.version()
            except HostError:
                tool_version = ""
        except HostError as exc:
            self._fail(context, exc)
        return language_pb2.AboutResponse(
            executable=found[0], version=found[1],
            metadata={"toolchain": tc.name.capitalize(), "toolchainVersion": tool_version,
                      "typechecker": (tc.opts.typechecker or "none").capitalize()})

    def RuntimeOptionsPrompts(self, request: Any, context: Any) -> Any:
        opts = _options_of(request.info) if request.HasField("info") else {}
        value = language_pb2.RuntimeOptionPrompt.RuntimeOptionValue
        prompts = []
        if "toolchain" not in opts:
            pip = value(stringValue="pip", displayName="pip")
            choices = [pip] + [value(stringValue=t, displayName=t) for t in ("poetry", "uv") if shutil.which(t)]
            prompts.append(language_pb2.RuntimeOptionPrompt(
                key="toolchain", description="The toolchain to use for installing dependencies and running the program",
                choices=choices, default=pip))
        elif opts.get("toolchain") == "pip" and "virtualenv" not in opts:
            venv = value(stringValue="venv")
            prompts.append(language_pb2.RuntimeOptionPrompt(key="virtualenv", description="The virtualenv to use",
                                                            choices=[venv], default=venv))
        return language_pb2.RuntimeOptionsResponse(prompts=prompts)

    def Template(self, request: Any, context: Any) -> Any:
        return language_pb2.TemplateResponse()

    def Cancel(self, request: Any, context: Any) -> Any:
        self.runner.cancel_all()
        return empty_pb2.Empty()

    # --- dependencies
    def InstallDependencies(self, request: Any, context: Any) -> Iterator[Any]:
        info = request.info
        cwd = info.program_directory or request.directory
        emitter = _Emitter()

        def work() -> None:
            tc = self._toolchain(info, is_plugin=request.is_plugin)
            if request.is_plugin and isinstance(tc, Pip) and _is_buildable(cwd):
                tc.install(cwd, emitter, self.runner)
                self.runner.check([tc.python(), "-m", "pip", "install", cwd], cwd, tc.env(), emitter,
                                  "installing the plugin package")
                return
            tc.install(cwd, emitter, self.runner)

        yield language_pb2.InstallDependenciesResponse(stdout=b"Installing dependencies...\n\n")
        try:
            for kind, data in emitter.run(work):
                yield language_pb2.InstallDependenciesResponse(**{kind: data})
        except HostError as exc:
            self._fail(context, exc)
        yield language_pb2.InstallDependenciesResponse(stdout=b"Finished installing dependencies\n\n")

    def _packages(self, info: Any, transitive: bool = True) -> list[Package]:
        tc = self._toolchain(info)
        tc.validate()
        return list_packages(tc, transitive)

    def GetRequiredPackages(self, request: Any, context: Any) -> Any:
        try:
            deps = [d for d in (package_dependency(p) for p in self._packages(request.info)) if d is not None]
        except HostError as exc:
            self._fail(context, exc)
        return language_pb2.GetRequiredPackagesResponse(packages=deps)

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:
        try:
            deps = [d for d in (package_dependency(p) for p in self._packages(request.info)) if d is not None]
        except HostError as exc:
            self._fail(context, exc)
        return language_pb2.GetRequiredPluginsResponse(plugins=[
            plugin_pb2.PluginDependency(name=d.name, kind=d.kind, version=d.version, server=d.server) for d in deps])

    def GetProgramDependencies(self, request: Any, context: Any) -> Any:
        try:
            pkgs = self._packages(request.info, transitive=request.transitiveDependencies)
        except HostError as exc:
            self._fail(context, exc)
        return language_pb2.GetProgramDependenciesResponse(
            dependencies=[language_pb2.DependencyInfo(name=p.name, version=p.version) for p in pkgs])

    # --- programs
    def _executor_args(self, request: Any, program: str) -> list[str]:
        info = request.info
        args: list[str] = []
        for flag, value in (("monitor", request.monitor_address), ("engine", self.engine_address),
                            ("project", request.project), ("root_directory", info.root_directory),
                            ("stack", request.stack), ("pwd", request.pwd),
                            ("dry_run", "true" if request.dryRun else "false"),
                            ("parallel", str(request.parallel)), ("tracing", self.tracing),
                            ("organization", request.organization)):
            if value:
                args += [f"--{flag}", value]
        return [*args, program, *request.args]

    def Run(self, request: Any, context: Any) -> Any:
        if request.attach_debugger:
            return language_pb2.RunResponse(error="this language host (metalfleet's, for a self-built Pulumi CLI) "
                                                  "cannot attach a debugger: run with an official Pulumi CLI")
        info = request.info
        program_dir = info.program_directory or request.pwd
        entry = info.entry_point or request.program or "."
        program = program_dir if entry == "." else str(Path(program_dir, entry))
        try:
            tc = self._toolchain(info)
            tc.validate()
            if isinstance(tc, Uv):
                tc.sync_before_run()
            env = tc.env()
            env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
            env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
            if tc.opts.typechecker:
                self._typecheck(tc, program_dir)
            proc = self.runner.start([tc.python(), "-u", self.executor, *self._executor_args(request, program)],
                                     None, env, pipe=False)
        except HostError as exc:
            self._fail(context, exc)
        context.add_callback(lambda: self.runner.stop(proc))
        try:
            code = proc.wait()
        finally:
            self.runner.forget(proc)
            sys.stdout.flush()
            sys.stderr.flush()
        if code == 0:
            return language_pb2.RunResponse()
        if code == BAIL_EXIT:
            return language_pb2.RunResponse(bail=True)
        if code < 0:
            return language_pb2.RunResponse(error=f"program exited unexpectedly: killed by signal {-code}")
        return language_pb2.RunResponse(error=f"program exited with non-zero exit code: {code}")

    def _typecheck(self, tc: Toolchain, program_dir: str) -> None:
        checker = tc.opts.typechecker
        names = {p.name for p in list_packages(tc)}
        if checker not in names:
            raise HostError(f"The typechecker option is set to {checker}, but {checker} is not installed in "
                            f"{tc.venv or tc.python()}: add it to requirements.txt and run `pulumi install`")
        args = [tc.python(), "-m", checker]
        if checker == "mypy" and tc.venv:
            args += ["--exclude", os.path.relpath(tc.venv, program_dir)]
        proc = subprocess.run([*args, program_dir], cwd=program_dir, env=tc.env(), capture_output=True, text=True,
                              check=False)
        sys.stdout.write(proc.stdout)
        sys.stdout.flush()
        if proc.returncode != 0:
            raise HostError(f"{checker} failed (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")

    # --- plugins and policy packs
    def RunPlugin(self, request: Any, context: Any) -> Iterator[Any]:
        info = request.info
        analyzer = request.kind == "analyzer"
        proxy: PolicyProxy | None = None
        proc: subprocess.Popen[bytes] | None = None
        try:
            tc = self._toolchain(info, is_plugin=not analyzer)
            tc.validate()
            root = info.root_directory or info.program_directory
            env = tc.env()
            if analyzer:
                argv = [tc.python(), "-u", "-m", "pulumi.policy", *request.args, info.program_directory]
                cwd = info.program_directory
                proxy = PolicyProxy()
                context.add_callback(lambda: proxy.fail("the engine closed the policy pack") if proxy else None)
                yield language_pb2.RunPluginResponse(stdout=f"{proxy.port}\n".encode())
                env.update(_policy_env(proxy.await_config(context.is_active)))
            else:
                if (Path(root) / "__main__.py").is_file() or not _is_buildable(root):
                    argv = [tc.python(), "-u", info.program_directory, *request.args]
                else:
                    argv = [tc.python(), "-u", "-m", "pulumi.run.plugin", _pyproject_name(root), *request.args]
                cwd = request.pwd or info.program_directory
            env.update(_env_list(request.env))
            proc = self.runner.start(argv, cwd, env)
        except HostError as exc:
            if proxy is not None:
                proxy.stop()
            self._fail(context, exc)
        assert proc is not None
        context.add_callback(lambda: self.runner.stop(proc))
        sink: queue.Queue[tuple[str, bytes | None]] = queue.Queue()
        try:
            self.runner.pump({"stderr": proc.stderr}, sink)
            if proxy is not None:
                yield from self._attach_policy_pack(proc, proxy, sink)
            self.runner.pump({"stdout": proc.stdout}, sink)
            open_streams = 2
            while open_streams:
                kind, chunk = sink.get()
                if chunk is None:
                    open_streams -= 1
                elif kind == "stdout":
                    yield language_pb2.RunPluginResponse(stdout=chunk)
                else:
                    yield language_pb2.RunPluginResponse(stderr=chunk)
            code = proc.wait()
            yield language_pb2.RunPluginResponse(exitcode=code if code >= 0 else 128 - code)
        finally:
            if proxy is not None:
                proxy.stop()
            self.runner.stop(proc)
            self.runner.forget(proc)

    @staticmethod
    def _attach_policy_pack(proc: subprocess.Popen[bytes], proxy: PolicyProxy,
                            sink: queue.Queue[tuple[str, bytes | None]]) -> Iterator[Any]:
        """Read the pack's port (its first line of stdout), connect, pass it the stack configuration."""
        assert proc.stdout is not None
        line = _read_line(proc.stdout.fileno())
        try:
            port = int(line.strip())
        except ValueError:
            proxy.fail(f"could not read the policy pack's port from its output: {line[:200]!r}")
            if line:
                yield language_pb2.RunPluginResponse(stdout=line)
            return
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=GRPC_OPTIONS)
        if proxy.config is not None:
            try:
                grpc.channel_ready_future(channel).result(timeout=60)
                channel.unary_unary("/pulumirpc.Analyzer/ConfigureStack")(proxy.config.SerializeToString(),
                                                                           timeout=60)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                    proxy.fail(f"policy pack configuration failed: {exc}")
                    return
            except grpc.FutureTimeoutError:
                proxy.fail(f"the policy pack did not answer on port {port}")
                return
        proxy.attach(channel)


def _read_line(fd: int, limit: int = 4096) -> bytes:
    """One line from ``fd``, read byte by byte so that nothing after it is taken from the pipe."""
    out = b""
    while len(out) < limit:
        b = os.read(fd, 1)
        if not b:
            break
        out += b
        if b == b"\n":
            break
    return out


def _is_buildable(directory: str) -> bool:
    path = Path(directory) / "pyproject.toml"
    return path.is_file() and re.search(r"^\[(build-system|project)\]", path.read_text(errors="replace"),
                                        flags=re.M) is not None


def _pyproject_name(directory: str) -> str:
    m = re.search(r"^\[project\][^\[]*?^name\s*=\s*['\"]([^'\"]+)", (Path(directory) / "pyproject.toml").read_text(),
                  flags=re.M | re.S)
    if not m:
        raise HostError(f"plugin in {directory} provides neither __main__.py nor a [project] name in pyproject.toml")
    return m.group(1)


# ---------------------------------------------------------------------------------------------------------------
# Entry point

def _watch_engine(address: str, stop: Callable[[], None], gone_after_s: float = ENGINE_GONE_AFTER_S) -> None:
    """Stop serving once the engine has been unreachable for ``gone_after_s`` (it died without closing us)."""
    channel = grpc.insecure_channel(address)
    last_seen = time.monotonic()
    while True:
        try:
            grpc.channel_ready_future(channel).result(timeout=5)
            last_seen = time.monotonic()
            time.sleep(5)
        except grpc.FutureTimeoutError:
            if time.monotonic() - last_seen > gone_after_s:
                stop()
                return


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_args(argv)
    except HostError as exc:
        print(f"pulumi-language-python: {exc}", file=sys.stderr)
        return 2
    if args.version:
        from pulumi._version import _VERSION

        print(_VERSION)
        return 0
    host = LanguageHost(args.engine_address, args.executor or DEFAULT_EXECUTOR, args.tracing)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=GRPC_OPTIONS)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(host, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)

    def shutdown(*_: Any) -> None:
        host.runner.cancel_all()
        server.stop(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, shutdown)
    if args.engine_address:
        threading.Thread(target=_watch_engine, args=(args.engine_address, shutdown), daemon=True).start()
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
