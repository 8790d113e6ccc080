"""``metalfleet up``, ``preview``, ``refresh`` and ``destroy``: the cluster's Pulumi stack through the Automation
API (:mod:`metalfleet.stacks.automation`, which loads the Pulumi SDK only when one of these runs)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .flags import add_driver_config
from .output import add_json, dump
from .policy import add_policy_flags, spec_policy, spec_policy_lines

__all__ = ["add_commands", "cmd_stack"]


def cmd_stack(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec
    from metalfleet.providers.registry import parse_driver_config

    # before importing the Pulumi SDK: bad input is answered at once (a destroy needs no munge key)
    spec = load_spec(args.spec, check_references=args.command != "destroy")
    report = spec_policy(args) if args.command in ("up", "preview") else None
    if report is not None:  # shown, not enforced here: `--policy-pack policies/pack` enforces in the engine
        print(spec_policy_lines(report), file=sys.stderr)
    from metalfleet.stacks import automation
    from metalfleet.stacks.dynamic import UNSUBSCRIBE_ENV

    env = {UNSUBSCRIBE_ENV: "1"} if getattr(args, "unsubscribe", False) else {}
    options = automation.StackOptions(backend_url=args.backend, stack=args.stack, env=env,
                                      driver_config=parse_driver_config(args.driver_config,
                                                                        provider=spec.provider))
    fn = getattr(automation, args.command)
    result = fn(spec, options, on_output=lambda line: print(line, end="" if line.endswith("\n") else "\n"))
    if args.json:
        print(dump({"stack": result.stack, "outputs": result.outputs, "summary": result.summary}))
    return 0


def add_commands(sub: Any) -> None:
    for name in ("up", "preview", "refresh", "destroy"):
        s = sub.add_parser(name, help=f"pulumi {name} of the cluster in SPEC")
        s.add_argument("spec")
        s.add_argument("--backend", help="Pulumi backend URL (default: file://~/.metalfleet/pulumi-state)")
        s.add_argument("--stack", help="stack name (default: the cluster name)")
        add_driver_config(s)
        add_json(s, "print outputs and change summary as JSON")
        if name in ("up", "preview"):
            add_policy_flags(s)
        if name == "destroy":
            s.add_argument("--unsubscribe", action="store_true",
                           help="end subscription nodes early (as release --unsubscribe), even when the spec in "
                                "the stack's state did not set capacity.release_subscriptions")
        s.set_defaults(func=cmd_stack)
