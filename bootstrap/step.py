"""Steps: read facts, then yield commands (argv), uploads, or a no-op with a reason.

A step never executes anything. The engine gathers the facts every step asks for, calls
:meth:`Step.actions`, and sends what it yields to the host in one batch. A step that yields only
:class:`NoOp` (or nothing) is unchanged, and its host gets no exec channel for it: that is what
makes the second run cheap.

Settings: each step has a frozen dataclass of settings. Their values come, in order, from the
dataclass defaults, from :meth:`Step.host_defaults` (provider/offering traits: fabric, NVSwitch,
vendor), and from ``ClusterSpec.bootstrap.overrides[step_name]``. An unknown override key is an
:class:`InvalidSpecError` naming ``bootstrap.overrides.<step>.<key>``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.spec import validation_error

from .facts import Fact, FactValues
from .inventory import Host

__all__ = [
    "Action",
    "Command",
    "NoOp",
    "RebootAction",
    "Step",
    "StepContext",
    "Upload",
    "resolve_settings",
]


@dataclass(frozen=True)
class Command:
    """One command as an argv list; ``timeout`` in seconds (None: the step's budget)."""

    argv: tuple[str, ...]
    description: str = ""
    timeout: float | None = None
    ok_codes: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(str(a) for a in self.argv))

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Upload:
    """Make ``path`` hold exactly ``content`` (sha256-checked on the host before it replaces the file)."""

    path: str
    content: bytes
    mode: str = "0644"
    description: str = ""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def text(self) -> str:
        return f"upload {self.path} ({len(self.content)} bytes, sha256 {self.sha256[:12]}, mode {self.mode})"


@dataclass(frozen=True)
class NoOp:
    reason: str

    @property
    def text(self) -> str:
        return f"# no-op: {self.reason}"


@dataclass(frozen=True)
class RebootAction:
    """Reboot, wait for SSH to come back with a new boot id, then re-read facts."""

    reason: str
    argv: tuple[str, ...] = ("reboot",)
    timeout: float = 900.0

    @property
    def text(self) -> str:
        return f"{shlex.join(self.argv)}  # then wait for SSH and a new boot id"


Action = Command | Upload | NoOp | RebootAction


@dataclass(frozen=True)
class StepContext:
    """What a step may look at besides its facts."""

    host: Host
    #: Steps that changed earlier in this run (in a dry run: that would change).
    changed: frozenset[str] = frozenset()
    dry_run: bool = False

    def path(self, p: str) -> str:
        return self.host.path(p)


S = TypeVar("S")


class Step(ABC, Generic[S]):
    """Base class: subclasses set ``name``, ``Settings`` and implement ``facts`` and ``actions``."""

    #: Unique name; the key under ``bootstrap.overrides``.
    name: ClassVar[str]
    title: ClassVar[str] = ""
    #: Steps that must come before this one when both are in a profile.
    after: ClassVar[tuple[str, ...]] = ()
    Settings: ClassVar[type[Any]]
    #: Whether this step reboots (and so ends a phase: facts are re-read after it).
    is_reboot: ClassVar[bool] = False

    def __init__(self, settings: S) -> None:
        self.settings = settings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        """Whether the step belongs on this host at all (an EFA step on an InfiniBand node does not)."""
        return True

    @classmethod
    def host_defaults(cls, host: Host) -> dict[str, Any]:
        """Settings that depend on the host's provider/offering traits."""
        return {}

    @abstractmethod
    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        """Every fact :meth:`actions` reads."""

    @abstractmethod
    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        """Yield commands/uploads that bring the host to the desired state, or NoOps saying why not."""

    def __repr__(self) -> str:
        return f"<step {self.name}>"


def resolve_settings(step: type[Step[Any]], host: Host, overrides: Mapping[str, Any] | None) -> Any:
    """The step's settings for ``host``: defaults < host traits < overrides (validated)."""
    cls = step.Settings
    known = {f.name for f in dataclasses.fields(cls)}
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - known - {"enabled"})
    if unknown:
        raise InvalidSpecError(
            f"bootstrap.overrides.{step.name}: unknown setting(s) {unknown}; known: {sorted(known)}",
            field=f"bootstrap.overrides.{step.name}.{unknown[0]}", value=overrides[unknown[0]])
    merged = {**step.host_defaults(host), **{k: v for k, v in overrides.items() if k != "enabled"}}
    try:
        return TypeAdapter(cls).validate_python(merged)
    except ValidationError as exc:
        raise validation_error(exc, f"invalid settings for bootstrap step {step.name}",
                               prefix=f"bootstrap.overrides.{step.name}.") from None
