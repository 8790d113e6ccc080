"""Pulumi project folders for tests that run the `pulumi` CLI in them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def link_test_environment(project: Path) -> Path:
    """Give a copied example the virtualenv its Pulumi.yaml names (``virtualenv: venv``).

    The examples run in ./venv, which `pulumi install` creates from requirements.txt
    (test_e2e_language_host.py does exactly that). Tests that are about something else link ./venv to
    the virtualenv running the tests, which has the same requirements installed (metalfleet[aws,pulumi],
    editable), instead of spending a minute on pip.
    """
    if sys.prefix == sys.base_prefix:
        pytest.fail("the tests must run in a virtualenv with metalfleet[aws,pulumi] installed (`make venv`)",
                    pytrace=False)
    text = (project / "Pulumi.yaml").read_text()
    assert "virtualenv: venv" in text, f"{project}/Pulumi.yaml no longer names virtualenv: venv"
    venv = project / "venv"
    if venv.is_dir() and not venv.is_symlink():  # copied along from a `pulumi install` in the repo's example
        shutil.rmtree(venv)
    venv.symlink_to(Path(sys.prefix), target_is_directory=True)
    return venv
