"""The planner's cost-over-time chart as a standalone SVG (no plotting library: a few lines of SVG text).

One line per option: what has been paid or committed by each day of the run (:meth:`Option.cost_at`), so an
on-demand line climbs steadily, a Capacity Block or prepaid month jumps when it is bought, and a reservation
ends with the rest of its term.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

from .planner import Option

__all__ = ["cost_svg"]

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 900, 480, 90, 20, 40, 150


def _nice(top: float) -> float:
    """A round axis maximum at or above ``top``."""
    if top <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(top))
    return float(next(m * exp for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * exp >= top))


def _money(value: float) -> str:
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:g}{suffix}"
    return f"{value:g}"


def cost_svg(options: Sequence[Option], currency: str, *, title: str = "Cost over the run",
             samples: int = 400) -> str:
    """An SVG line chart of cumulative cost (y, ``currency``) over the run's days (x) for ``options``."""
    if not options:
        raise ValueError("no option to plot")
    hours = options[0].run_hours
    days = hours / 24.0
    y_max = _nice(max(o.cost_at(hours) for o in options))
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(hour: float) -> float:
        return _LEFT + plot_w * (hour / hours if hours else 0)

    def y(cost: float) -> float:
        return _TOP + plot_h * (1 - cost / y_max)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
           'font-family="sans-serif" font-size="12">',
           f"<title>{escape(title)}</title>",
           f'<rect width="{_W}" height="{_H}" fill="white"/>',
           f'<text x="{_W / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for i in range(6):  # horizontal grid and cost labels
        value = y_max * i / 5
        out.append(f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{_money(value)}</text>')
    for i in range(6):  # day labels
        hour = hours * i / 5
        out.append(f'<text x="{x(hour):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle">{days * i / 5:.0f}</text>')
    out.append(f'<text x="{_LEFT + plot_w / 2}" y="{_TOP + plot_h + 34}" text-anchor="middle">days of the run</text>')
    out.append(f'<text x="18" y="{_TOP + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {_TOP + plot_h / 2})">cumulative cost ({escape(currency)})</text>')
    out.append(f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>')
    for n, option in enumerate(options):
        colour = _COLOURS[n % len(_COLOURS)]
        points = " ".join(f"{x(h):.1f},{y(option.cost_at(h)):.1f}"
                          for h in (hours * i / samples for i in range(samples + 1)))
        out.append(f'<polyline class="option" data-total="{option.total:.2f}" fill="none" stroke="{colour}" '
                   f'stroke-width="2" points="{points}"/>')
        ly = _TOP + plot_h + 52 + 16 * n
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + 24}" y1="{ly - 4}" y2="{ly - 4}" stroke="{colour}" '
                   'stroke-width="2"/>')
        out.append(f'<text x="{_LEFT + 30}" y="{ly}">{escape(option.label())}: {option.total:,.0f} '
                   f"{escape(currency)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
