"""The kernel package loads its names lazily: pure modules import no pydantic, PyYAML or cloud SDK through
it, and every public name still resolves. Each import runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import metalfleet.providers as mp

HEAVY = ("pydantic", "yaml", "boto3", "botocore", "tenacity")


def _loaded_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    loaded: list[str] = json.loads(res.stdout.splitlines()[-1])
    return loaded


@pytest.mark.parametrize("module", ["metalfleet.providers", "metalfleet.providers.errors",
                                    "metalfleet.providers.textfile", "metalfleet.providers.checks",
                                    "metalfleet.providers.tags", "metalfleet.providers.console"])
def test_pure_kernel_modules_import_no_heavy_dependency(module: str) -> None:
    assert _loaded_after(f"import {module}") == []


def test_the_spec_still_loads_pydantic_and_no_cloud_sdk() -> None:
    assert _loaded_after("from metalfleet.providers import parse_spec") == ["pydantic", "yaml"]


def test_every_public_name_resolves_from_its_module() -> None:
    assert sorted(mp._LAZY) == sorted(mp.__all__)
    for name in mp.__all__:
        module = __import__(f"metalfleet.providers{mp._LAZY[name]}", fromlist=[name])
        assert getattr(mp, name) is getattr(module, name), name
    assert set(dir(mp)) >= set(mp.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = mp.nope  # type: ignore[attr-defined]
