"""The ``metalfleet`` command line: every subcommand, one module per command group, each a thin argparse front
over a public function of its layer (providers, bootstrap, policies, stacks); :mod:`.output` prints tables and
JSON, :mod:`.flags` holds the parser and the shared flags.

The groups are plain imports: a missing one fails here, not by dropping its command. Each group imports what its
commands need when they run, so ``metalfleet offerings`` works without the Pulumi SDK and ``metalfleet parse``
without any cloud SDK.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, Protocol

# Only the error tree at import: the spec models (pydantic), the registry and the drivers load in the commands
# that use them, so `metalfleet policy check` on a plan does not pay for them.
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError, PrerequisiteError

from . import bootstrap, catalogue, nodes, offerings, plan, policy, stack, verify
from .flags import Parser

__all__ = ["GROUPS", "CommandGroup", "build_parser", "main"]


class CommandGroup(Protocol):
    """A module of this package: it adds its subcommands, each with ``func`` set to its handler."""

    def add_commands(self, sub: Any) -> None: ...


#: The command groups, in the order ``metalfleet --help`` lists their commands.
GROUPS: tuple[CommandGroup, ...] = (offerings, nodes, stack, bootstrap, verify, policy, plan, catalogue)


def build_parser(groups: Sequence[CommandGroup] = GROUPS) -> argparse.ArgumentParser:
    p = Parser(prog="metalfleet", description="GPU cluster spec to accepted, bootstrapped nodes.")
    sub = p.add_subparsers(dest="command", required=True)
    for group in groups:
        group.add_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only `metalfleet policy`'s parser for it: a pull-request check should not pay for the other groups' choices
    # (the parsers, the baselines, the catalogue).
    parser = build_parser([policy]) if argv[:1] == ["policy"] else build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (InvalidSpecError, PrerequisiteError) as exc:  # fix the input, or install what is missing
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except MetalfleetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
