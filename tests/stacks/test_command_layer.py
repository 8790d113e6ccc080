"""The command layer: every ``metalfleet`` subcommand lives in :mod:`metalfleet.stacks.cli`, one module per group,
imported plainly (a missing group fails loudly instead of dropping its commands), and the layers below know
nothing of argparse."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import metalfleet.bootstrap
import metalfleet.policies
import metalfleet.providers
import metalfleet.stacks.cli as cli

COMMANDS = ["offerings", "validate", "order", "release", "up", "preview", "refresh", "destroy", "bootstrap",
            "parse", "verify", "policy", "plan", "catalogue"]
#: group module -> the subcommands it adds.
GROUP_COMMANDS = {"offerings": ["offerings"], "nodes": ["validate", "order", "release"],
                  "stack": ["up", "preview", "refresh", "destroy"], "bootstrap": ["bootstrap"],
                  "verify": ["parse", "verify"], "policy": ["policy"], "plan": ["plan"], "catalogue": ["catalogue"]}
#: modules of the package that are not command groups.
SUPPORT = {"__init__", "__main__", "flags", "output"}
PACKAGE = Path(cli.__file__).parent


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(action.choices)


def test_help_lists_every_subcommand() -> None:
    res = subprocess.run([sys.executable, "-m", "metalfleet.stacks.cli", "--help"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    listed = re.search(r"\{([a-z,]+)\}", res.stdout)
    assert listed is not None, res.stdout
    assert listed.group(1).split(",") == COMMANDS
    for name in COMMANDS:
        assert re.search(rf"^    {name}\s", res.stdout, re.M), f"{name} has no help line"


def test_every_module_of_the_package_is_a_registered_group_or_support() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    assert modules - SUPPORT == set(GROUP_COMMANDS)
    assert [g.__name__.rsplit(".", 1)[1] for g in cli.GROUPS] == list(GROUP_COMMANDS)
    for group in cli.GROUPS:
        assert _subcommands(cli.build_parser([group])) == GROUP_COMMANDS[group.__name__.rsplit(".", 1)[1]]
    assert _subcommands(cli.build_parser()) == COMMANDS


def test_a_missing_group_module_is_an_import_error_not_a_dropped_command() -> None:
    code = ("import sys\nsys.modules['metalfleet.stacks.cli.plan'] = None\n"
            "try:\n    import metalfleet.stacks.cli\nexcept ImportError as exc:\n    print('ImportError', exc.name)\n"
            "else:\n    print('imported')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.stdout.split() == ["ImportError", "metalfleet.stacks.cli.plan"], res.stdout + res.stderr


def test_no_module_of_the_command_layer_uses_importlib() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "importlib" not in text and "__import__" not in text, path.name


@pytest.mark.parametrize("package", [metalfleet.providers, metalfleet.bootstrap, metalfleet.policies],
                         ids=lambda p: p.__name__)
def test_the_layers_below_do_not_import_argparse(package: ModuleType) -> None:
    assert package.__file__ is not None
    root = Path(package.__file__).parent
    sources = sorted(root.rglob("*.py"))
    assert sources
    found = [str(p.relative_to(root)) for p in sources
             if re.search(r"^\s*(import argparse|from argparse import)", p.read_text(encoding="utf-8"), re.M)]
    assert found == []
