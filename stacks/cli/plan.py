"""``metalfleet plan``: rank where to run by total cost (:func:`metalfleet.providers.planner.recommend`), write the
chosen cluster spec, plot cost over time."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .flags import bounded_int
from .offerings import catalog_for
from .output import add_json, dump, text_table

if TYPE_CHECKING:
    from metalfleet.providers.planner import Option, Plan

__all__ = ["add_commands", "cmd_plan", "plan_text"]


def _money(value: float, currency: str) -> str:
    return f"{value:,.2f} {currency}"


def plan_text(result: Plan, *, top: int = 10, detail: int = 3) -> str:
    """The plan as a reader wants it: assumptions, the ranking, the best options' costs and warnings, refusals."""
    req, cur = result.requirements, result.requirements.currency
    out = ["assumptions:", *[f"  - {a}" for a in result.assumptions], ""]
    if not result.options:
        out.append(result.why())
        return "\n".join(out)
    ties = {o.key for o in result.ties} if len(result.ties) > 1 else set()
    rows = []
    for rank, o in enumerate(result.options[:top], 1):
        per_gpu_hour = o.total / (o.gpus * o.run_hours) if o.gpus and o.run_hours else 0.0
        rows.append([str(rank) + (" (tie)" if o.key in ties else ""), o.provider, o.region,
                     f"{o.nodes} x {o.offering}", f"{o.gpus} x {o.entry.gpu_model}", o.billing.value,
                     _money(o.total, cur), f"{per_gpu_hour:.2f}", str(len(o.warnings))])
    out.append(f"{len(result.options)} feasible option(s), cheapest first"
               + (f" (showing {top})" if len(result.options) > top else "") + ":")
    out.append(text_table(rows, ["rank", "provider", "region", "nodes", "gpus", "billing", f"total ({cur})",
                                 "per gpu-hour", "warnings"]))
    for rank, o in enumerate(result.options[:detail], 1):
        out += ["", f"#{rank} {o.label()}: {_money(o.total, cur)}"]
        out += [f"  {line.what}: {_money(line.amount, cur)} = {line.detail}" for line in o.lines]
        out += [f"  warning: {w}" for w in o.warnings]
    if req.budget is not None:
        out += ["", f"budget: {_money(req.budget, cur)}; the best option leaves "
                    f"{_money(req.budget - result.best.total, cur)}"]
    if result.unpriced:
        out += ["", f"could not price ({len(result.unpriced)}):", *[f"  {r}" for r in result.unpriced]]
    if result.not_feasible:
        out += ["", f"not feasible ({len(result.not_feasible)}):", *[f"  {r}" for r in result.not_feasible]]
    return "\n".join(out)


def _option_dict(o: Option) -> dict[str, Any]:
    return {"provider": o.provider, "region": o.region, "offering": o.offering, "billing": o.billing.value,
            "nodes": o.nodes, "gpus": o.gpus, "gpu_model": o.entry.gpu_model, "total": round(o.total, 2),
            "billed_hours": o.billed_hours, "price": {"hourly": o.price.hourly, "per": o.price.per,
                                                       "listed": o.price.listed, "currency": o.price.currency,
                                                       "as_of": o.price.as_of.isoformat(), "source": o.price.source},
            "lines": [{"what": x.what, "amount": round(x.amount, 2), "detail": x.detail} for x in o.lines],
            "warnings": list(o.warnings), "unpriced": list(o.unpriced)}


def cmd_plan(args: argparse.Namespace) -> int:
    from metalfleet.providers.errors import InvalidSpecError
    from metalfleet.providers.planner import load_requirements, recommend, spec_yaml
    from metalfleet.providers.textfile import check_output_path

    # Where the results go is checked first: a bad --out or --plot costs nothing and leaves nothing half written.
    outputs = [(flag, path) for flag, path in (("--out", args.out), ("--plot", args.plot)) if path is not None]
    for flag, path in outputs:
        check_output_path(path, f"{flag} file")
    if args.out is not None and args.plot is not None and Path(args.out).absolute() == Path(args.plot).absolute():
        raise InvalidSpecError(f"--out and --plot name the same file {args.out}", field="plot", value=args.plot)
    req = load_requirements(args.requirements)
    result = recommend(req, catalog_for(args.catalog))
    if args.json:
        print(dump({"currency": req.currency, "assumptions": list(result.assumptions),
                    "options": [_option_dict(o) for o in result.options],
                    "unpriced": [str(r) for r in result.unpriced],
                    "rejected": [str(r) for r in result.not_feasible]}))
    else:
        print(plan_text(result, top=args.top))
    if not result.options:
        return 1
    if not 1 <= args.option <= len(result.options):
        raise InvalidSpecError(f"--option {args.option}: the plan has options 1-{len(result.options)}",
                               field="option", value=args.option)
    chosen = result.options[args.option - 1]
    from metalfleet.providers.textfile import write_text_file

    if args.out:
        write_text_file(args.out, spec_yaml(chosen, req, args.requirements), "--out file")
        print(f"\nwrote the cluster spec for #{args.option} ({chosen.label()}) to {args.out}; check it with "
              f"`metalfleet validate {args.out}`", file=sys.stderr)
        missing = [t for t in ("owner", "cost-center") if t not in req.cluster.tags]
        if missing:
            print(f"note: the spec has no {' or '.join(missing)} tag; the default policies require them (MF-TAG-001): "
                  "add them under cluster.tags in the requirements or to the spec", file=sys.stderr)
    if args.plot:
        from metalfleet.providers.costplot import cost_svg

        shown = list(result.options[:args.plot_top])
        if chosen not in shown:
            shown.append(chosen)
        write_text_file(args.plot, cost_svg(shown, req.currency, title=f"Cost over {req.duration}"), "--plot file")
        print(f"wrote the cost chart of {len(shown)} option(s) to {args.plot}", file=sys.stderr)
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("plan", help="rank where to run a job by total cost (shipped catalogue, offline) and write "
                                    "the chosen cluster spec")
    p.add_argument("requirements", help="REQUIREMENTS.yaml: gpus or nodes, gpu, fabric, regions, duration, budget, "
                                        "billing, currency and exchange_rates, storage, egress_tib")
    p.add_argument("--catalog", metavar="catalog.json", help="read this catalogue file instead of the shipped one")
    p.add_argument("--out", metavar="cluster.yaml", help="write the chosen option as a cluster spec")
    p.add_argument("--option", type=bounded_int(1), default=1,
                   help="the rank of the option to write (default 1, the cheapest)")
    p.add_argument("--plot", metavar="cost.svg", help="write cost over the run per option as an SVG chart")
    p.add_argument("--plot-top", type=bounded_int(1), default=5, help="options in the chart (default 5)")
    p.add_argument("--top", type=bounded_int(1), default=10, help="options listed (default 10)")
    add_json(p)
    p.set_defaults(func=cmd_plan)
