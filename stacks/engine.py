"""Find the Pulumi engine and run it offline.

Real users install the Pulumi CLI the usual way and have it on PATH. Where downloads are
impossible (this repo's CI), ``tools/build-pulumi-engine.sh`` builds the CLI from its Go modules
into a per-user cache keyed by version; we look there second.
"""

from __future__ import annotations

import os
import shutil
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from metalfleet.providers.errors import InvalidSpecError

__all__ = ["engine_env", "find_engine_dir", "sdk_version"]

LAUNCHER = "pulumi-resource-pulumi-python"


def sdk_version() -> str:
    try:
        return version("pulumi")
    except PackageNotFoundError as exc:
        raise InvalidSpecError("the Pulumi SDK is not installed: pip install 'metalfleet[pulumi]'",
                               field="pulumi", value=None) from exc


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metalfleet" / f"pulumi-v{sdk_version()}" / "bin"


def find_engine_dir() -> Path:
    """The folder holding the ``pulumi`` CLI (and, for our own build, the dynamic-provider launcher)."""
    explicit = os.environ.get("METALFLEET_PULUMI_DIR")
    candidates = [Path(explicit)] if explicit else []
    candidates.append(_cache_dir())
    on_path = shutil.which("pulumi")
    if on_path:
        candidates.append(Path(on_path).parent)
    for c in candidates:
        if (c / "pulumi").is_file() and os.access(c / "pulumi", os.X_OK):
            return c
    raise InvalidSpecError(
        "no Pulumi CLI found: install it (https://www.pulumi.com/docs/install/) or, in this repo, "
        "run `make engine`; looked in " + ", ".join(str(c) for c in candidates),
        field="pulumi", value=None)


def engine_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for an offline engine run: no update checks, no plugin downloads.

    The dynamic-provider launcher must run this interpreter (the one with metalfleet installed),
    so PULUMI_PYTHON_CMD points at it.
    """
    engine = find_engine_dir()
    path = os.environ.get("PATH", "")
    if str(engine) not in path.split(os.pathsep):
        path = f"{engine}{os.pathsep}{path}"
    env = {
        "PATH": path,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_PYTHON_CMD": sys.executable,
    }
    if extra:
        env.update(extra)
    return env
