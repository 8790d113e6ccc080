"""Find the Pulumi engine and run it offline.

Real users install the Pulumi CLI the usual way and have it on PATH; that one is used. Where
downloads are impossible (this repo's CI), ``tools/build-pulumi-engine.sh`` builds the CLI from its
Go modules into a per-user cache keyed by version, with our own launchers (language host, executor,
dynamic-provider plugin) beside it: the fallback. ``METALFLEET_PULUMI_DIR`` names a folder that wins
over both. Whichever is chosen is reported (:func:`find_engine`'s ``describe``), so a run says which
engine it used.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from metalfleet.providers.errors import InvalidSpecError, PrerequisiteError

__all__ = ["Engine", "engine_env", "find_engine", "find_engine_dir", "is_self_built", "sdk_version"]

log = logging.getLogger(__name__)

LAUNCHER = "pulumi-resource-pulumi-python"
#: Our language host, installed beside a self-built CLI (a release ships a Go binary instead).
SELF_BUILT_MARKER = "pulumi_language_python_host.py"
EXPLICIT = "METALFLEET_PULUMI_DIR"


@dataclass(frozen=True)
class Engine:
    """The Pulumi CLI a run uses: its folder, its version, and why it was chosen."""

    dir: Path
    version: str
    source: str  # "METALFLEET_PULUMI_DIR", "PATH" or "self-built"

    @property
    def cli(self) -> Path:
        return self.dir / "pulumi"

    def describe(self) -> str:
        why = {"METALFLEET_PULUMI_DIR": f"from {EXPLICIT}",
               "PATH": "found on PATH",
               "self-built": "self-built fallback: no Pulumi CLI on PATH"}[self.source]
        return f"Pulumi CLI {self.cli} ({self.version}, {why})"


def sdk_version() -> str:
    try:
        return version("pulumi")
    except PackageNotFoundError as exc:
        raise PrerequisiteError("the Pulumi SDK is not installed: pip install 'metalfleet[pulumi]'",
                                tool="pulumi") from exc


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metalfleet" / f"pulumi-v{sdk_version()}" / "bin"


def _has_cli(d: Path) -> bool:
    return (d / "pulumi").is_file() and os.access(d / "pulumi", os.X_OK)


def is_self_built(d: Path) -> bool:
    """A folder where tools/build-pulumi-engine.sh put a CLI with our launchers (not a Pulumi release)."""
    return (d / SELF_BUILT_MARKER).is_file()


@lru_cache(maxsize=16)
def _cli_version(cli: str, mtime_ns: int) -> str:
    try:
        proc = subprocess.run([cli, "version"], capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PrerequisiteError(f"the Pulumi CLI {cli} does not run: {exc}", tool="pulumi") from exc
    out = proc.stdout.strip()
    if proc.returncode != 0 or not out:
        raise PrerequisiteError(f"the Pulumi CLI {cli} does not run: `pulumi version` exited {proc.returncode}: "
                                f"{proc.stderr.strip()[:300]}", tool="pulumi")
    return out.splitlines()[0]


def _engine(d: Path, source: str) -> Engine:
    cli = d / "pulumi"
    return Engine(d, _cli_version(str(cli), cli.stat().st_mtime_ns), source)


def _official_on_path() -> Path | None:
    """The first folder on PATH with a ``pulumi`` that is not one of our self-built engines."""
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry:
            continue
        d = Path(entry)
        if _has_cli(d) and not is_self_built(d):
            return d
    return None


_announced: set[Engine] = set()


def find_engine() -> Engine:
    """``METALFLEET_PULUMI_DIR`` if set; else an official Pulumi CLI on PATH; else the self-built one."""
    explicit = os.environ.get(EXPLICIT)
    if explicit:
        d = Path(explicit).expanduser()
        if not _has_cli(d):
            raise InvalidSpecError(f"{EXPLICIT}={explicit} holds no executable `pulumi`: point it at the folder "
                                   "of a Pulumi CLI, or unset it", field=EXPLICIT, value=explicit)
        engine = _engine(d, "METALFLEET_PULUMI_DIR")
    elif (official := _official_on_path()) is not None:
        engine = _engine(official, "PATH")
    elif _has_cli(_cache_dir()):
        engine = _engine(_cache_dir(), "self-built")
    else:
        raise PrerequisiteError(
            "no Pulumi CLI found: install it (https://www.pulumi.com/docs/install/) or, in this repo, "
            f"run `make engine`; looked on PATH and in {_cache_dir()}", tool="pulumi")
    if engine not in _announced:
        _announced.add(engine)
        log.info("metalfleet uses %s", engine.describe())
    return engine


def find_engine_dir() -> Path:
    """The folder holding the ``pulumi`` CLI (and its launchers: a release's, or ours for a self-built one)."""
    return find_engine().dir


def engine_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an offline engine run: no update checks, no plugin downloads.

    The engine's folder comes first on PATH (its language host and plugin launchers are found there).
    The dynamic-provider launcher and, for a self-built engine, the language host must run this
    interpreter (the one with metalfleet installed), so PULUMI_PYTHON_CMD points at it.
    """
    engine = find_engine_dir()
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != engine]
    env = {
        "PATH": os.pathsep.join([str(engine), *rest]),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_PYTHON_CMD": sys.executable,
    }
    if extra:
        env.update(extra)
    return env
