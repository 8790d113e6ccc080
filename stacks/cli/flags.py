"""The parser, the flags several command groups share, and the value types that refuse odd input at parse time."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metalfleet.providers import ClusterSpec

__all__ = ["Parser", "add_driver_config", "bounded_int", "driver_for", "seconds"]


class Parser(argparse.ArgumentParser):
    """argparse, except that a bad flag or value is one line on stderr (the spec reader's style), then the pointer
    to ``--help``: no usage block to scroll past in a pipeline's log. Exit 2, as argparse."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def add_driver_config(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--driver-config KEY=VALUE`` (repeatable): non-secret driver settings for the spec's provider."""
    p.add_argument("--driver-config", action="append", default=[], metavar="KEY=VALUE", help=help)


def driver_for(spec: ClusterSpec, driver_config: list[str]) -> Any:
    """The driver of the spec's provider and region, with the ``--driver-config`` settings."""
    from metalfleet.providers import get_driver
    from metalfleet.providers.registry import parse_driver_config

    return get_driver(spec.provider, region=spec.region, **parse_driver_config(driver_config, provider=spec.provider))


def seconds(raw: str) -> float:
    """A positive, finite number of seconds (argparse names the flag when this raises)."""
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {raw!r}")
    return value


def bounded_int(low: int, high: int = 1_000_000) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``low``..``high``: ``--top -3`` or ``--min-gpus 1e9`` is
    refused by the parser (exit 2, naming the flag and the value) instead of meaning something odd."""

    def parse(text: str) -> int:
        value = text.strip()
        if not value.lstrip("+-").isdigit() or not value.isascii():
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
        number = int(value)
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be {low}..{high}, got {number}")
        return number

    parse.__name__ = "whole number"  # argparse names the type in its message
    return parse
