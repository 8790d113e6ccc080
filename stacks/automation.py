"""``metalfleet up|preview|refresh|destroy`` through the Pulumi Automation API.

A local file backend is the default (any Pulumi backend URL is accepted), so a pipeline needs no
Pulumi Cloud account. The real engine runs the program; nothing here mocks it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from metalfleet.providers import ClusterSpec
from metalfleet.providers.errors import InvalidSpecError, MetalfleetError

from .engine import engine_env, find_engine
from .program import cluster_program

__all__ = ["StackOptions", "StackResult", "destroy", "open_stack", "preview", "refresh", "up"]

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


def open_stack(spec: ClusterSpec, options: StackOptions = StackOptions()) -> auto.Stack:
    """Create or select the stack for ``spec`` with an inline program."""
    if not (os.environ.get("PULUMI_CONFIG_PASSPHRASE") is not None
            or os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
            or options.env.get("PULUMI_CONFIG_PASSPHRASE") is not None):
        raise InvalidSpecError(
            "PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) must be set: it encrypts "
            "secrets in the stack state", field="PULUMI_CONFIG_PASSPHRASE", value=None)
    backend = _backend(options.backend_url or default_backend())
    env = engine_env(dict(options.env))
    ws = auto.LocalWorkspaceOptions(
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
    st = open_stack(spec, options)
    res = _engine(st, "up", lambda: st.up(on_output=on_output, color="never"), on_output)
    return StackResult(st.name, {k: v.value for k, v in res.outputs.items()}, _summary(res.summary.resource_changes))


def preview(spec: ClusterSpec, options: StackOptions = StackOptions(),
            on_output: Output | None = None) -> StackResult:
    st = open_stack(spec, options)
    res = _engine(st, "preview", lambda: st.preview(on_output=on_output, color="never"), on_output)
    return StackResult(st.name, {}, _summary(res.change_summary))


def refresh(spec: ClusterSpec, options: StackOptions = StackOptions(),
            on_output: Output | None = None) -> StackResult:
    st = open_stack(spec, options)
    res = _engine(st, "refresh", lambda: st.refresh(on_output=on_output, color="never"), on_output)
    return StackResult(st.name, _outputs(st), _summary(res.summary.resource_changes))


def destroy(spec: ClusterSpec, options: StackOptions = StackOptions(), on_output: Output | None = None,
            remove: bool = False) -> StackResult:
    st = open_stack(spec, options)
    res = _engine(st, "destroy", lambda: st.destroy(on_output=on_output, color="never"), on_output)
    if remove:
        st.workspace.remove_stack(st.name)
    return StackResult(st.name, {}, _summary(res.summary.resource_changes))
