"""Shared set-up for tests that drive the real Pulumi engine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from metalfleet.stacks.automation import StackOptions


@pytest.fixture(scope="session")
def pulumi_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One PULUMI_HOME per test worker: the engine keeps plugin metadata there."""
    return tmp_path_factory.mktemp("pulumi-home")


@pytest.fixture
def passphrase() -> Iterator[str]:
    old = os.environ.get("PULUMI_CONFIG_PASSPHRASE")
    os.environ["PULUMI_CONFIG_PASSPHRASE"] = "metalfleet-test-passphrase"
    yield "metalfleet-test-passphrase"
    if old is None:
        os.environ.pop("PULUMI_CONFIG_PASSPHRASE", None)
    else:
        os.environ["PULUMI_CONFIG_PASSPHRASE"] = old


def stack_options(tmp_path: Path, home: Path, **kw: object) -> StackOptions:
    return StackOptions(backend_url=f"file://{tmp_path / 'state'}", pulumi_home=str(home), **kw)  # type: ignore[arg-type]


def state_text(tmp_path: Path) -> str:
    """Everything the file backend wrote, concatenated: what a leak check must search."""
    return "\n".join(p.read_text(errors="replace") for p in (tmp_path / "state").rglob("*") if p.is_file())
