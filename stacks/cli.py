"""The ``metalfleet`` command line.

Subcommands import what they need when they run, so ``metalfleet offerings`` works without the
Pulumi SDK and ``metalfleet parse`` without any cloud SDK.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# Only the error tree at import: the spec models (pydantic), the registry and the drivers load in the commands
# that use them, so `metalfleet policy check` on a plan does not pay for them.
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError, PrerequisiteError

if TYPE_CHECKING:
    from metalfleet.providers import ClusterSpec, Node

__all__ = ["main"]


# -- helpers ---------------------------------------------------------------------------------------

def _table(rows: list[list[str]], header: list[str]) -> str:
    from metalfleet.bootstrap.tables import text_table

    return text_table(rows, header)


def _node_rows(nodes: Sequence[Node]) -> str:
    return _table([[n.name or "", n.id, n.state.value, n.zone or "", n.private_ip or "", n.offering]
                   for n in nodes], ["name", "id", "state", "zone", "private ip", "offering"])


def _progress(nodes: Sequence[Node]) -> None:
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.state.value] = counts.get(n.state.value, 0) + 1
    text = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"\r  waiting: {text}".ljust(60), end="", file=sys.stderr, flush=True)


# -- commands --------------------------------------------------------------------------------------

def cmd_offerings(args: argparse.Namespace) -> int:
    from metalfleet.stacks.offerings_cli import cmd_offerings as offerings

    return offerings(args)


def _policy_report(args: argparse.Namespace) -> Any:
    """The policy findings for the spec a command reads (metalfleet.policies); None with --no-policy."""
    if getattr(args, "no_policy", False):
        return None
    from metalfleet.policies.cli import spec_report_for

    return spec_report_for(args.spec, getattr(args, "policy_config", None))


def cmd_validate(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec

    spec = load_spec(args.spec)
    print(f"{args.spec}: valid spec — {spec.count} x {spec.offering or 'offering by requirements'} on "
          f"{spec.provider} {spec.region}")
    report = _policy_report(args)
    if report is None:
        return 0
    from metalfleet.policies.cli import summary_lines

    print("\n".join(f"policy: {line}" for line in summary_lines(report)))
    return int(report.exit_code)


def _driver_for(spec: ClusterSpec, args: argparse.Namespace) -> Any:
    from metalfleet.providers import get_driver
    from metalfleet.providers.registry import parse_driver_config

    return get_driver(spec.provider, region=spec.region,
                      **parse_driver_config(args.driver_config, provider=spec.provider))


def _seconds(raw: str) -> float:
    """A positive, finite number of seconds (argparse names the flag when this raises)."""
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {raw!r}")
    return value


def _policy_for(args: argparse.Namespace) -> Any:
    from metalfleet.providers.retry import RetryPolicy

    return RetryPolicy(deadline=args.retry_deadline) if getattr(args, "retry_deadline", None) else RetryPolicy()


def cmd_order(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec
    from metalfleet.providers.fleet import node_specs_for, order_cluster

    spec = load_spec(args.spec)
    driver = _driver_for(spec, args)
    policy = _policy_for(args)
    specs = node_specs_for(driver, spec, policy=policy)
    print(f"ordering {len(specs)} x {specs[0].offering} for cluster {spec.name} on {spec.provider}",
          file=sys.stderr)
    nodes = order_cluster(driver, specs, progress=_progress, policy=policy)
    print(file=sys.stderr)
    print(json.dumps([n.to_dict() for n in nodes], indent=2) if args.json else _node_rows(nodes))
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec
    from metalfleet.providers.fleet import release_cluster

    spec = load_spec(args.spec)
    ids = release_cluster(_driver_for(spec, args), spec.name, policy=_policy_for(args),
                          unsubscribe=args.unsubscribe or spec.capacity.release_subscriptions)
    print(f"released {len(ids)} node(s) of cluster {spec.name}: {' '.join(ids) or '-'}")
    return 0


def cmd_stack(args: argparse.Namespace) -> int:
    from metalfleet.providers import load_spec
    from metalfleet.providers.registry import parse_driver_config

    spec = load_spec(args.spec)  # before importing the Pulumi SDK: bad input is answered at once
    report = _policy_report(args) if args.command in ("up", "preview") else None
    if report is not None:  # shown, not enforced here: `--policy-pack policies/pack` enforces in the engine
        from metalfleet.policies.cli import summary_lines

        print("\n".join(f"policy: {line}" for line in summary_lines(report)), file=sys.stderr)
    from metalfleet.stacks import automation
    from metalfleet.stacks.dynamic import UNSUBSCRIBE_ENV

    env = {UNSUBSCRIBE_ENV: "1"} if getattr(args, "unsubscribe", False) else {}
    options = automation.StackOptions(backend_url=args.backend, stack=args.stack, env=env,
                                      driver_config=parse_driver_config(args.driver_config,
                                                                        provider=spec.provider))
    fn = getattr(automation, args.command)
    result = fn(spec, options, on_output=lambda line: print(line, end="" if line.endswith("\n") else "\n"))
    if args.json:
        print(json.dumps({"stack": result.stack, "outputs": result.outputs, "summary": result.summary}, indent=2))
    return 0


def cmd_bootstrap(args: argparse.Namespace) -> int:
    from metalfleet.bootstrap import TerminalProgress, live_inventory, profile_for_spec, run_bootstrap
    from metalfleet.bootstrap.inventory import load_target
    from metalfleet.providers import ClusterSpec

    target = load_target(args.target)
    if isinstance(target, ClusterSpec):
        spec = target
        inventory, _nodes = live_inventory(spec, _driver_for(spec, args))
        profile = args.profile or profile_for_spec(spec)
    else:
        inventory = target
        profile = args.profile
    progress = None if args.json else TerminalProgress(sys.stderr, verbose=args.verbose)
    report = run_bootstrap(inventory, profile, dry_run=args.dry_run, limit=args.limit, progress=progress,
                           log_dir=args.log_dir, max_fail_percentage=args.max_fail_percentage)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format_text())
    return 0 if report.ok else 1


# -- parser ----------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse, except that a bad flag or value is one line on stderr (the spec reader's style), then the pointer
    to ``--help``: no usage block to scroll past in a pipeline's log. Exit 2, as argparse."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="metalfleet", description="GPU cluster spec to accepted, bootstrapped nodes.")
    sub = p.add_subparsers(dest="command", required=True)

    o = sub.add_parser("offerings", help="list normalised GPU offerings (shipped catalogue; --live asks providers)")
    from metalfleet.stacks.offerings_cli import add_arguments

    add_arguments(o)
    o.set_defaults(func=cmd_offerings)

    v = sub.add_parser("validate", help="validate a cluster spec offline and check it against the policies "
                                        "(exit 1 on mandatory policy violations)")
    v.add_argument("spec")
    _policy_flags(v)
    v.set_defaults(func=cmd_validate)

    for name, fn, text in (("order", cmd_order, "order a cluster's nodes directly (no Pulumi)"),
                           ("release", cmd_release, "release every node of a cluster (no Pulumi)")):
        c = sub.add_parser(name, help=text)
        c.add_argument("spec")
        c.add_argument("--driver-config", action="append", default=[], metavar="KEY=VALUE",
                       help="non-secret driver setting (credentials come from the environment)")
        c.add_argument("--json", action="store_true")
        c.add_argument("--retry-deadline", type=_seconds, metavar="SECONDS",
                       help="how long each API operation rides out throttling and 5xx before giving up (default: "
                            "METALFLEET_RETRY_DEADLINE, else 600)")
        if name == "release":
            c.add_argument("--unsubscribe", action="store_true",
                           help="end subscription nodes (monthly/yearly) early: unsubscribe them, or convert and "
                                "release them, as the provider does it (default: refuse, naming each node, its "
                                "expiry and what ending it refunds; or set capacity.release_subscriptions)")
        c.set_defaults(func=fn)

    for name in ("up", "preview", "refresh", "destroy"):
        s = sub.add_parser(name, help=f"pulumi {name} of the cluster in SPEC")
        s.add_argument("spec")
        s.add_argument("--backend", help="Pulumi backend URL (default: file://~/.metalfleet/pulumi-state)")
        s.add_argument("--stack", help="stack name (default: the cluster name)")
        s.add_argument("--driver-config", action="append", default=[], metavar="KEY=VALUE")
        s.add_argument("--json", action="store_true", help="print outputs and change summary as JSON")
        if name in ("up", "preview"):
            _policy_flags(s)
        if name == "destroy":
            s.add_argument("--unsubscribe", action="store_true",
                           help="end subscription nodes early (as release --unsubscribe), even when the spec in "
                                "the stack's state did not set capacity.release_subscriptions")
        s.set_defaults(func=cmd_stack)

    b = sub.add_parser("bootstrap", help="make hosts training-ready over SSH (driver, fabric, NCCL, storage)")
    b.add_argument("target", help="an inventory YAML, or a cluster spec whose live nodes are bootstrapped")
    b.add_argument("--dry-run", action="store_true", help="read facts and print every command that would run")
    b.add_argument("--limit", action="append", help="host name/address glob or label=value (repeatable)")
    b.add_argument("--profile", help="profile name (default: from the spec, else gpu-node)")
    b.add_argument("--log-dir", help="per-host command logs go here")
    b.add_argument("--max-fail-percentage", type=float, default=None,
                   help="stop starting hosts once this share of them failed")
    b.add_argument("--driver-config", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--verbose", action="store_true")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bootstrap)

    _optional_commands(sub)
    return p


def _policy_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy-config", metavar="policy.yaml", help="policy settings and suppressions")
    p.add_argument("--no-policy", action="store_true", help="skip the policy check of the spec")


def _optional_commands(sub: Any) -> None:
    """Commands owned by other layers register themselves here."""
    import importlib

    for module in ("metalfleet.bootstrap.acceptance.cli", "metalfleet.policies.cli", "metalfleet.stacks.plan_cli"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.add_cli_commands(sub)


def _policy_parser() -> argparse.ArgumentParser:
    """Only ``metalfleet policy``: a pull-request check should not pay for importing the SSH and cloud layers."""
    from metalfleet.policies.cli import add_cli_commands

    p = _Parser(prog="metalfleet")
    add_cli_commands(p.add_subparsers(dest="command", required=True))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _policy_parser() if argv[:1] == ["policy"] else build_parser()
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


if __name__ == "__main__":
    sys.exit(main())
