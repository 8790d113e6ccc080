"""metalfleet.bootstrap: make provider nodes ready for GPU work over SSH.

Three layers, after pyinfra: facts (a command + a pure parser, :mod:`.facts`), steps (facts in,
argv commands or a no-op with a reason out, :mod:`.step` and :mod:`.steps`), and one connector
(:mod:`.ssh`, the only module that imports paramiko). :mod:`.runner` ties them together: one
connection per host, facts in one round trip, each changed step's commands in one exec channel.

For the CLI::

    from metalfleet.bootstrap import load_inventory, run_bootstrap, TerminalProgress
    report = run_bootstrap(load_inventory("hosts.yaml"), "gpu-node", dry_run=True, progress=TerminalProgress())
    print(report.format_text())
"""

from .api import bootstrap_cluster, run_bootstrap
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
from .report import HostReport, HostStatus, Report, StepResult, StepStatus
from .runner import RunOptions, run, select_hosts
from .ssh import Endpoint, SshConnection, SshOptions
from .step import Command, NoOp, RebootAction, Step, StepContext, Upload

__all__ = [
    "PROFILES",
    "Command",
    "CommandFailed",
    "CommandTimeout",
    "ConnectionLost",
    "Endpoint",
    "Fact",
    "FactValues",
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
    "Report",
    "RunOptions",
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
    "load_inventory",
    "parse_inventory",
    "profile_for_spec",
    "run",
    "run_bootstrap",
    "select_hosts",
]
