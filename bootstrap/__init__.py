"""metalfleet.bootstrap: make provider nodes ready for GPU work over SSH.

Three layers, after pyinfra: facts (a command + a pure parser, :mod:`.facts`), steps (facts in,
argv commands or a no-op with a reason out, :mod:`.step` and :mod:`.steps`), and a connector per host
(:mod:`.connector`: the contract; :mod:`.ssh`, the only module that imports paramiko;
:mod:`.replay`, answers from data for tests). :mod:`.runner` ties them together over
:mod:`.sessions` (pool, jump hosts, fan-out): one connector per host, facts in one round trip, each
changed step's commands in one exec channel.

Names load on first use, so ``import metalfleet.bootstrap.acceptance.gate`` (or any pure module)
imports neither paramiko nor pydantic through this package. For the CLI::

    from metalfleet.bootstrap import load_inventory, run_bootstrap, TerminalProgress
    report = run_bootstrap(load_inventory("hosts.yaml"), "gpu-node", dry_run=True, progress=TerminalProgress())
    print(report.format_text())
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import bootstrap_cluster, live_inventory, run_bootstrap
    from .connector import Connect, Connector, Endpoint, ExecResult, SshOptions
    from .errors import (
        CommandFailed,
        CommandTimeout,
        ConnectionLost,
        HostKeyChanged,
        HostKeyError,
        HostKeyUnknown,
        HostUnreachable,
        RebootTimeout,
        SshAuthError,
        StepError,
        UploadVerifyFailed,
    )
    from .facts import Fact, FactValues
    from .inventory import Host, Inventory, NodeTraits, hosts_from_spec, load_inventory, parse_inventory
    from .profiles import PROFILES, Profile, get_profile, profile_for_spec
    from .progress import ProgressCallback, ProgressEvent, TerminalProgress
    from .replay import ReplayConnector, ReplayFleet, ReplayHost, Reply
    from .report import HostReport, HostStatus, Report, StepResult, StepStatus
    from .runner import RunOptions, run
    from .sessions import FanOut, SessionPool, select_hosts
    from .ssh import SshConnection
    from .step import Command, NoOp, RebootAction, Step, StepContext, Upload

#: name -> the module (relative to this package) that defines it.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("bootstrap_cluster", "live_inventory", "run_bootstrap"), ".api"),
    **dict.fromkeys(("Connect", "Connector", "Endpoint", "ExecResult", "SshOptions"), ".connector"),
    **dict.fromkeys(("CommandFailed", "CommandTimeout", "ConnectionLost", "HostKeyChanged", "HostKeyError",
                     "HostKeyUnknown", "HostUnreachable", "RebootTimeout", "SshAuthError", "StepError",
                     "UploadVerifyFailed"), ".errors"),
    **dict.fromkeys(("Fact", "FactValues"), ".facts"),
    **dict.fromkeys(("Host", "Inventory", "NodeTraits", "hosts_from_spec", "load_inventory", "parse_inventory"),
                    ".inventory"),
    **dict.fromkeys(("PROFILES", "Profile", "get_profile", "profile_for_spec"), ".profiles"),
    **dict.fromkeys(("ProgressCallback", "ProgressEvent", "TerminalProgress"), ".progress"),
    **dict.fromkeys(("ReplayConnector", "ReplayFleet", "ReplayHost", "Reply"), ".replay"),
    **dict.fromkeys(("HostReport", "HostStatus", "Report", "StepResult", "StepStatus"), ".report"),
    **dict.fromkeys(("RunOptions", "run"), ".runner"),
    **dict.fromkeys(("FanOut", "SessionPool", "select_hosts"), ".sessions"),
    "SshConnection": ".ssh",
    **dict.fromkeys(("Command", "NoOp", "RebootAction", "Step", "StepContext", "Upload"), ".step"),
}

__all__ = [
    "PROFILES",
    "Command",
    "CommandFailed",
    "CommandTimeout",
    "Connect",
    "ConnectionLost",
    "Connector",
    "Endpoint",
    "ExecResult",
    "Fact",
    "FactValues",
    "FanOut",
    "Host",
    "HostKeyChanged",
    "HostKeyError",
    "HostKeyUnknown",
    "HostReport",
    "HostStatus",
    "HostUnreachable",
    "Inventory",
    "NoOp",
    "NodeTraits",
    "Profile",
    "ProgressCallback",
    "ProgressEvent",
    "RebootAction",
    "RebootTimeout",
    "ReplayConnector",
    "ReplayFleet",
    "ReplayHost",
    "Reply",
    "Report",
    "RunOptions",
    "SessionPool",
    "SshAuthError",
    "SshConnection",
    "SshOptions",
    "Step",
    "StepContext",
    "StepError",
    "StepResult",
    "StepStatus",
    "TerminalProgress",
    "Upload",
    "UploadVerifyFailed",
    "bootstrap_cluster",
    "get_profile",
    "hosts_from_spec",
    "live_inventory",
    "load_inventory",
    "parse_inventory",
    "profile_for_spec",
    "run",
    "run_bootstrap",
    "select_hosts",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
