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

from ..facts import Fact, FactValues, FileHashes, PackageVersions, PathsExist, RawCommand, SystemdUnits
from ..inventory import Host
from ..step import Action, Command, NoOp, Step, StepContext, Upload
from .common import file_state, manager, os_fact, packages_plan

__all__ = ["Munge", "SlurmClient", "SlurmController", "SlurmDynamicNode", "SlurmNodeDaemon"]


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


@dataclass(frozen=True)
class SlurmClientSettings:
    #: The client config metalfleet's own scontrol calls use (SLURM_CONF) on a node of a controller that is not
    #: metalfleet's: where the controller is, nothing else (the real slurm.conf is the controller's).
    text: str = ""
    path: str = "/etc/metalfleet/slurm-client.conf"
    packages: tuple[str, ...] = ("slurm-client",)


class SlurmClient(Step[SlurmClientSettings]):
    """scontrol on the node, pointed at the controller it joins (before its slurmd has fetched a config)."""

    name = "slurm-client"
    title = "Slurm client (scontrol for the controller the node joins)"
    after = ("munge",)
    Settings = SlurmClientSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return True

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        pk = tuple(s.packages)
        return [os_fact(ctx), PackageVersions("apt", pk), PackageVersions("dnf", pk), FileHashes((ctx.path(s.path),))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        if not s.text:
            raise InvalidSpecError("slurm-client needs the controller's address", field="scheduler.join.address",
                                   value=None)
        yield from packages_plan(manager(ctx, facts), facts, dict.fromkeys(s.packages), hold=False, what="Slurm client")
        yield file_state(facts, FileHashes((ctx.path(s.path),)), ctx.path(s.path), s.text.encode(), "0644",
                         "how metalfleet's scontrol reaches the controller")


@dataclass(frozen=True)
class SlurmDynamicNodeSettings:
    #: ``host:port`` of the slurmctld the node joins (configless: slurmd fetches slurm.conf and gres.conf from it).
    conf_server: str = ""
    #: Inventory host name -> the node's ``scontrol create`` tokens (:func:`metalfleet.bootstrap.slurm.create_tokens`).
    nodes: dict[str, list[str]] = field(default_factory=dict)
    #: A feature every node of this cluster carries: a node of that name without it is somebody else's.
    owner_feature: str = ""
    #: :class:`SlurmClient`'s config (SLURM_CONF of metalfleet's scontrol calls).
    client_conf_path: str = "/etc/metalfleet/slurm-client.conf"
    dropin_path: str = "/etc/systemd/system/slurmd.service.d/metalfleet.conf"
    packages: tuple[str, ...] = ("slurmd", "slurm-client")
    spool: str = "/var/spool/slurmd"
    service: str = "slurmd"


def slurmd_dropin(conf_server: str, name: str, conf: str) -> str:
    """The systemd drop-in that makes Debian's slurmd.service a configless dynamic node: no local slurm.conf (the
    unit's ConditionPathExists on it is reset), ``--conf-server`` and ``-Z --conf`` (slurmd(8)). systemd unquotes
    the double quotes of ExecStart; '%' and '$' are escaped for it."""
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$") + '"'

    return ("# Written by metalfleet: this node joins the Slurm controller at " + conf_server + " as a dynamic node\n"
            "# (configless: slurmd fetches the controller's slurm.conf and gres.conf).\n"
            "[Unit]\nConditionPathExists=\n\n[Service]\nExecStart=\n"
            f"ExecStart=/usr/sbin/slurmd -D -s --conf-server {conf_server} -Z -N {name} --conf {q(conf)}\n")


class SlurmDynamicNode(Step[SlurmDynamicNodeSettings]):
    """slurmd joining a controller that is not metalfleet's: the node's record created first with the address and
    resources the gate measured (``scontrol create ... State=FUTURE``), then slurmd started configless with
    ``-Z``; a record whose resources changed is made again, one whose address changed (a successor at a new
    address) is updated. A second run with the same node changes nothing."""

    name = "slurmd-join"
    title = "slurmd (a dynamic node of an existing Slurm controller)"
    after = ("munge", "slurm-client")
    Settings = SlurmDynamicNodeSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return True

    def _tokens(self, ctx: StepContext) -> list[str]:
        tokens = self.settings.nodes.get(ctx.host.name)
        if not tokens:
            raise InvalidSpecError(f"no Slurm definition for host {ctx.host.name}",
                                   field="bootstrap.overrides.slurmd-join.nodes", value=ctx.host.name)
        return list(tokens)

    def _record(self, ctx: StepContext) -> RawCommand:
        name = self._tokens(ctx)[0].partition("=")[2]
        # Without its client config (a first run) scontrol would look for the controller in DNS (configless SRV
        # records) and wait out the resolver: the node is simply not known yet.
        script = 'test -r "$1" || exit 3; SLURM_CONF="$1" exec scontrol --future --oneliner show node "$2"'
        return RawCommand(("sh", "-c", script, "sh", ctx.path(self.settings.client_conf_path), name))

    def _files(self, ctx: StepContext) -> dict[str, str]:
        from ..slurm import dynamic_conf

        s = self.settings
        tokens = self._tokens(ctx)
        name = tokens[0].partition("=")[2]
        return {s.dropin_path: slurmd_dropin(s.conf_server, name, dynamic_conf(tokens))}

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        return [*_daemon_facts(ctx, s.packages, s.spool, self._files(ctx), s.service), self._record(ctx)]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        from ..slurm import create_argv, delete_argv, parse_nodes, record_drift

        s = self.settings
        if not s.conf_server:
            raise InvalidSpecError("slurmd-join needs the controller's address",
                                   field="bootstrap.overrides.slurmd-join.conf_server", value=s.conf_server or None)
        tokens = self._tokens(ctx)
        name = tokens[0].partition("=")[2]
        files = self._files(ctx)
        yield from packages_plan(manager(ctx, facts), facts, dict.fromkeys(s.packages), hold=False, what="slurmd")
        yield _directory(ctx, facts, s.spool)
        hashes = FileHashes(tuple(ctx.path(p) for p in files))
        env = ("env", f"SLURM_CONF={ctx.path(s.client_conf_path)}")
        rc, out = facts[self._record(ctx)]
        record = parse_nodes(out).get(name) if rc == 0 else None
        changed = False
        if record is None:
            yield Command((*env, *create_argv(tokens)), f"create node {name} on the controller (FUTURE until slurmd "
                          "registers)")
            changed = True
        else:
            if s.owner_feature and s.owner_feature not in record.features:
                raise InvalidSpecError(
                    f"the controller at {s.conf_server} has a node {name} that is not this cluster's (its features "
                    f"{','.join(record.features) or 'none'} lack {s.owner_feature}); rename the host or remove that "
                    "node", field="scheduler.join", value=name)
            addr, res = record_drift(tokens, record)
            if res:
                yield Command(("systemctl", "stop", s.service), f"stop {s.service}: {name} is made again")
                yield Command((*env, *delete_argv(name)), f"delete {name}: " + "; ".join(res))
                yield Command((*env, *create_argv(tokens)), f"create {name} with what the gate measured")
                changed = True
            elif addr:
                want = dict(t.split("=", 1) for t in tokens)
                yield Command((*env, "scontrol", "update", f"nodename={name}", f"nodeaddr={want['NodeAddr']}",
                               f"nodehostname={want['NodeHostname']}"), f"update {name}: " + "; ".join(addr))
                changed = True
            else:
                yield NoOp(f"the controller's record of {name} is as the gate measured it")
        dropin = file_state(facts, hashes, ctx.path(s.dropin_path), files[s.dropin_path].encode(), "0644",
                            "slurmd: configless, a dynamic node")
        yield dropin
        if isinstance(dropin, Upload):
            yield Command(("systemctl", "daemon-reload"), "systemd reads the slurmd drop-in")
        yield from _service(facts, s.service, changed or isinstance(dropin, Upload))
