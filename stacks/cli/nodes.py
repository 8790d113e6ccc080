"""``metalfleet validate``, ``order`` and ``release``: a cluster spec checked offline, and its nodes ordered or
released directly through the provider's driver (:mod:`metalfleet.providers.fleet`; no Pulumi)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .flags import add_driver_config, driver_for, seconds
from .output import add_json, dump, node_table, order_progress
from .policy import add_policy_flags, spec_policy, spec_policy_lines

__all__ = ["add_commands", "cmd_order", "cmd_release", "cmd_validate"]


def cmd_validate(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec

    spec = load_spec(args.spec)
    print(f"{args.spec}: valid spec — {spec.count} x {spec.offering or 'offering by requirements'} on "
          f"{spec.provider} {spec.region}")
    report = spec_policy(args)
    if report is None:
        return 0
    print(spec_policy_lines(report))
    return int(report.exit_code)


def _retry_policy(args: argparse.Namespace) -> Any:
    from metalfleet.providers.retry import RetryPolicy

    return RetryPolicy(deadline=args.retry_deadline) if getattr(args, "retry_deadline", None) else RetryPolicy()


def cmd_order(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec
    from metalfleet.providers.fleet import node_specs_for, order_cluster

    spec = load_spec(args.spec)
    driver = driver_for(spec, args.driver_config)
    policy = _retry_policy(args)
    specs = node_specs_for(driver, spec, policy=policy)
    print(f"ordering {len(specs)} x {specs[0].offering} for cluster {spec.name} on {spec.provider}",
          file=sys.stderr)
    nodes = order_cluster(driver, specs, progress=order_progress, policy=policy)
    print(file=sys.stderr)
    print(dump([n.to_dict() for n in nodes]) if args.json else node_table(nodes))
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec
    from metalfleet.providers.fleet import release_cluster

    spec = load_spec(args.spec, check_references=False)  # releasing needs no munge key
    ids = release_cluster(driver_for(spec, args.driver_config), spec.name, policy=_retry_policy(args),
                          unsubscribe=args.unsubscribe or spec.capacity.release_subscriptions)
    print(f"released {len(ids)} node(s) of cluster {spec.name}: {' '.join(ids) or '-'}")
    return 0


def add_commands(sub: Any) -> None:
    v = sub.add_parser("validate", help="validate a cluster spec offline and check it against the policies "
                                        "(exit 1 on mandatory policy violations)")
    v.add_argument("spec")
    add_policy_flags(v)
    v.set_defaults(func=cmd_validate)

    for name, fn, text in (("order", cmd_order, "order a cluster's nodes directly (no Pulumi)"),
                           ("release", cmd_release, "release every node of a cluster (no Pulumi)")):
        c = sub.add_parser(name, help=text)
        c.add_argument("spec")
        add_driver_config(c, "non-secret driver setting (credentials come from the environment)")
        add_json(c)
        c.add_argument("--retry-deadline", type=seconds, metavar="SECONDS",
                       help="how long each API operation rides out throttling and 5xx before giving up (default: "
                            "METALFLEET_RETRY_DEADLINE, else 600)")
        if name == "release":
            c.add_argument("--unsubscribe", action="store_true",
                           help="end subscription nodes (monthly/yearly) early: unsubscribe them, or convert and "
                                "release them, as the provider does it (default: refuse, naming each node, its "
                                "expiry and what ending it refunds; or set capacity.release_subscriptions)")
        c.set_defaults(func=fn)
