"""Slurm on the nodes: munge with the cluster's key, slurmd with the configs metalfleet wrote from the gate's
evidence, and slurmctld on the controller host. Fact-gated like every step: packages only when missing, files
only when their sha256 differs, and a daemon restarted only when one of its files changed (a second run of the
same configs changes nothing).

The file contents come in the settings (``files``: path -> text), written by :mod:`metalfleet.bootstrap.scheduler`
from every accepted node's facts, so every node gets the same slurm.conf. The munge key comes base64-encoded
in ``munge_key_b64``; it is uploaded 0400 and never shown (an upload's text is its path, size and hash).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metalfleet.providers.errors import InvalidSpecError

from ..facts import Fact, FactValues, FileHashes, PackageVersions, PathsExist, SystemdUnits
from ..inventory import Host
from ..step import Action, Command, NoOp, Step, StepContext, Upload
from .common import file_state, manager, os_fact, packages_plan

__all__ = ["Munge", "SlurmController", "SlurmNodeDaemon"]


def _service(facts: FactValues, service: str, changed: bool) -> Iterator[Action]:
    """Restart when a file it reads changed; start when it is not running; else nothing."""
    unit = facts[SystemdUnits((service,))][service]
    if changed:
        yield Command(("systemctl", "enable", service), f"enable {service}")
        yield Command(("systemctl", "restart", service), f"restart {service}: its configuration changed")
    elif unit.is_enabled and unit.is_active:
        yield NoOp(f"{service} enabled and running")
    else:
        yield Command(("systemctl", "enable", "--now", service), f"enable and start {service}")


def _directory(ctx: StepContext, facts: FactValues, path: str) -> Action:
    if ctx.path(path) in facts[PathsExist((ctx.path(path),))]:
        return NoOp(f"{path} exists")
    return Command(("mkdir", "-p", ctx.path(path)), f"make {path}")


def _daemon(ctx: StepContext, facts: FactValues, *, packages: Sequence[str], directory: str,
            files: Mapping[str, str], executables: Sequence[str], service: str, what: str) -> Iterator[Action]:
    """A Slurm daemon's plan: its packages, its state directory, its files, then the service (restarted only
    when one of its files changed)."""
    yield from packages_plan(manager(ctx, facts), facts, dict.fromkeys(packages), hold=False, what=what)
    yield _directory(ctx, facts, directory)
    hashes = FileHashes(tuple(ctx.path(p) for p in files))
    uploads, changed = _files(ctx, facts, hashes, files, dict.fromkeys(executables, "0755"))
    yield from uploads
    yield from _service(facts, service, changed)


def _daemon_facts(ctx: StepContext, packages: Sequence[str], directory: str, files: Mapping[str, str],
                  service: str) -> list[Fact[Any]]:
    pk = tuple(packages)
    return [os_fact(ctx), PackageVersions("apt", pk), PackageVersions("dnf", pk),
            FileHashes(tuple(ctx.path(p) for p in files)), SystemdUnits((service,)), PathsExist((ctx.path(directory),))]


def _files(ctx: StepContext, facts: FactValues, hashes: FileHashes, files: Mapping[str, str],
           modes: Mapping[str, str]) -> tuple[list[Action], bool]:
    out: list[Action] = []
    for path, text in files.items():
        out.append(file_state(facts, hashes, ctx.path(path), text.encode(), modes.get(path, "0644")))
    return out, any(isinstance(a, Upload) for a in out)


@dataclass(frozen=True)
class MungeSettings:
    #: The cluster's munge key, base64 (every node and the controller must share it).
    munge_key_b64: str = ""
    package: str = "munge"
    key_path: str = "/etc/munge/munge.key"
    service: str = "munge"


class Munge(Step[MungeSettings]):
    """munge with the cluster's shared key: Slurm authenticates every message with it."""

    name = "munge"
    title = "munge (Slurm authentication)"
    Settings = MungeSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return True

    def _key(self) -> bytes:
        try:
            key = base64.b64decode(self.settings.munge_key_b64, validate=True)
        except ValueError as exc:
            raise InvalidSpecError("the munge key is not base64", field="scheduler.munge_key", value="<hidden>") \
                from exc
        if len(key) < 32:
            raise InvalidSpecError(f"the munge key has {len(key)} bytes; munge wants at least 32 (1024 is usual)",
                                   field="scheduler.munge_key", value="<hidden>")
        return key

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [os_fact(ctx), PackageVersions("apt", (s.package,)), PackageVersions("dnf", (s.package,)),
                FileHashes((ctx.path(s.key_path),)), SystemdUnits((s.service,))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        key = self._key()
        yield from packages_plan(manager(ctx, facts), facts, {s.package: None}, hold=False, what="munge")
        up = file_state(facts, FileHashes((ctx.path(s.key_path),)), ctx.path(s.key_path), key, "0400",
                        "the cluster's munge key")
        yield up
        yield from _service(facts, s.service, isinstance(up, Upload))


@dataclass(frozen=True)
class SlurmNodeSettings:
    #: path -> content: slurm.conf, gres.conf, topology.conf, the TaskProlog (the same on every node).
    files: dict[str, str] = field(default_factory=dict)
    #: Files that must be executable (the TaskProlog).
    executables: tuple[str, ...] = ("/etc/slurm/task_prolog.sh",)
    packages: tuple[str, ...] = ("slurmd", "slurm-client")
    spool: str = "/var/spool/slurmd"
    service: str = "slurmd"


class SlurmNodeDaemon(Step[SlurmNodeSettings]):
    """slurmd with the cluster's configs: the node joins the partition with what the gate measured."""

    name = "slurmd"
    title = "slurmd (Slurm compute node)"
    after = ("munge",)
    Settings = SlurmNodeSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return True

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return _daemon_facts(ctx, s.packages, s.spool, s.files, s.service)

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        if not s.files:
            raise InvalidSpecError("slurmd needs its configuration files (slurm.conf at least)",
                                   field="bootstrap.overrides.slurmd.files", value=None)
        yield from _daemon(ctx, facts, packages=s.packages, directory=s.spool, files=s.files,
                           executables=s.executables, service=s.service, what="slurmd")


@dataclass(frozen=True)
class SlurmControllerSettings:
    #: The host (inventory name) that runs slurmctld; the step is a no-op everywhere else.
    controller: str = ""
    files: dict[str, str] = field(default_factory=dict)
    #: As slurmd's: the controller host runs both, and its files must be right for both.
    executables: tuple[str, ...] = ("/etc/slurm/task_prolog.sh",)
    package: str = "slurmctld"
    state_dir: str = "/var/spool/slurmctld"
    service: str = "slurmctld"


class SlurmController(Step[SlurmControllerSettings]):
    """slurmctld on the host the spec names: the partition's controller."""

    name = "slurmctld"
    title = "slurmctld (Slurm controller)"
    after = ("munge",)
    Settings = SlurmControllerSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return True

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        if ctx.host.name != s.controller:
            return []
        return _daemon_facts(ctx, (s.package,), s.state_dir, s.files, s.service)

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        if ctx.host.name != s.controller:
            yield NoOp(f"the controller is {s.controller or 'elsewhere'}")
            return
        yield from _daemon(ctx, facts, packages=(s.package,), directory=s.state_dir, files=s.files,
                           executables=s.executables, service=s.service, what="slurmctld")
