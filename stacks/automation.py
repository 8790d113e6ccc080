"""``metalfleet up|preview|refresh|destroy`` through the Pulumi Automation API.

A local file backend is the default (any Pulumi backend URL is accepted), so a pipeline needs no
Pulumi Cloud account. The real engine runs the program; nothing here mocks it.

Each operation runs in a workspace folder of its own (:func:`stack_workspace`), removed when it ends,
also on failure and on Ctrl-C: without one the Automation API makes an ``automation-*`` folder in the
temp directory per call and never removes it. The engine's temp directory (TMPDIR) is a folder inside
it, so what the CLI and its plugins put there goes too.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from metalfleet.providers import ClusterSpec
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

from .engine import engine_env, find_engine
from .program import cluster_program

__all__ = ["StackOptions", "StackResult", "destroy", "open_stack", "preview", "refresh", "stack_workspace", "up"]

PROJECT = "metalfleet"
Output = Callable[[str], Any]


@dataclass(frozen=True)
class StackOptions:
    """Where state lives and how the engine runs. Secrets are never fields here."""

    backend_url: str | None = None
    stack: str | None = None
    driver_config: Mapping[str, Any] = field(default_factory=dict)
    pulumi_home: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StackResult:
    stack: str
    outputs: dict[str, Any]
    summary: dict[str, int]


def default_backend() -> str:
    explicit = os.environ.get("PULUMI_BACKEND_URL")
    if explicit:
        return explicit
    path = Path.home() / ".metalfleet" / "pulumi-state"
    path.mkdir(parents=True, exist_ok=True)
    return f"file://{path}"


def _backend(url: str) -> str:
    if url.startswith("file://"):
        Path(url.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    return url


def open_stack(spec: ClusterSpec, options: StackOptions = StackOptions(), *, work_dir: str | Path) -> auto.Stack:
    """Create or select the stack for ``spec`` with an inline program, its workspace in ``work_dir`` (the
    caller's, who removes it: see :func:`stack_workspace`)."""
    if not (os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None
            or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
            or options.env.get("PULUMI_CONFIG_PASSPHRASE") is not None):
        raise InvalidSpecError(
            "PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) must be set: it encrypts "
            "secrets in the stack state", field="PULUMI_CONFIG_PASSPHRASE", value=None)
    backend = _backend(options.backend_url or default_backend())
    scratch = Path(work_dir) / "tmp"
    scratch.mkdir(exist_ok=True)
    env = engine_env({"TMPDIR": str(scratch), **options.env})
    ws = auto.LocalWorkspaceOptions(
        work_dir=str(work_dir),
        pulumi_home=options.pulumi_home,
        env_vars=env,
        project_settings=auto.ProjectSettings(name=PROJECT, runtime="python",
                                              backend=auto.ProjectBackend(url=backend)),
    )
    # The engine reads PATH from the workspace env; the Automation API itself also looks the CLI up.
    os.environ["PATH"] = env["PATH"]
    program = cluster_program(spec, options.driver_config)
    try:
        return auto.create_or_select_stack(stack_name=options.stack or spec.name, project_name=PROJECT,
                                           program=program, opts=ws)
    except auto.CommandError as exc:
        raise MetalfleetError(f"pulumi could not open stack {options.stack or spec.name}: {exc}") from exc


@contextmanager
def stack_workspace(spec: ClusterSpec, options: StackOptions = StackOptions()) -> Iterator[auto.Stack]:
    """The stack for ``spec`` (:func:`open_stack`) in a workspace folder made for this block and removed when it
    ends, however it ends (an engine failure, KeyboardInterrupt)."""
    with tempfile.TemporaryDirectory(prefix="metalfleet-pulumi-", ignore_cleanup_errors=True) as work_dir:
        yield open_stack(spec, options, work_dir=work_dir)


def _summary(changes: Mapping[Any, int] | None) -> dict[str, int]:
    return {str(k): int(v) for k, v in (changes or {}).items()}


def _outputs(stack: auto.Stack) -> dict[str, Any]:
    return {k: v.value for k, v in stack.outputs().items()}


def _engine(st: auto.Stack, verb: str, call: Callable[[], Any], on_output: Output | None = None) -> Any:
    """Run one engine operation; its failure becomes a MetalfleetError carrying the engine's output.

    The run's output starts by naming the Pulumi CLI it uses (path, version, why that one).
    """
    if on_output is not None:
        on_output(f"metalfleet: using {find_engine().describe()}\n")
    try:
        return call()
    except auto.CommandError as exc:
        raise MetalfleetError(f"pulumi {verb} failed for stack {st.name}:\n{exc}") from exc


def up(spec: ClusterSpec, options: StackOptions = StackOptions(), on_output: Output | None = None) -> StackResult:
    with stack_workspace(spec, options) as st:
        res = _engine(st, "up", lambda: st.up(on_output=on_output, color="never"), on_output)
        return StackResult(st.name, {k: v.value for k, v in res.outputs.items()},
                           _summary(res.summary.resource_changes))


def preview(spec: ClusterSpec, options: StackOptions = StackOptions(),
            on_output: Output | None = None) -> StackResult:
    with stack_workspace(spec, options) as st:
        res = _engine(st, "preview", lambda: st.preview(on_output=on_output, color="never"), on_output)
        return StackResult(st.name, {}, _summary(res.change_summary))


def refresh(spec: ClusterSpec, options: StackOptions = StackOptions(),
            on_output: Output | None = None) -> StackResult:
    with stack_workspace(spec, options) as st:
        res = _engine(st, "refresh", lambda: st.refresh(on_output=on_output, color="never"), on_output)
        return StackResult(st.name, _outputs(st), _summary(res.summary.resource_changes))


def destroy(spec: ClusterSpec, options: StackOptions = StackOptions(), on_output: Output | None = None,
            remove: bool = False) -> StackResult:
    with stack_workspace(spec, options) as st:
        res = _engine(st, "destroy", lambda: st.destroy(on_output=on_output, color="never"), on_output)
        if remove:
            st.workspace.remove_stack(st.name)
        return StackResult(st.name, {}, _summary(res.summary.resource_changes))
