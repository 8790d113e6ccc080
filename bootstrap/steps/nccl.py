"""NCCL at a pinned version, nccl-tests built from source, and the fabric's NCCL tuning files."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from metalfleet.providers.models import Fabric

from ..facts import Fact, FactValues, FileContent, FileHashes, IbStat, PackageVersions, PathsExist
from ..inventory import Host
from ..step import Action, Command, NoOp, Step, StepContext, Upload
from .common import file_state, manager, os_fact, packages_plan
from .nccl_tuning import tuning_for

__all__ = ["Nccl", "NcclConfig", "NcclTests", "nccl_ib_hca"]


def _is_nvidia(host: Host) -> bool:
    return host.traits.vendor == "nvidia"


@dataclass(frozen=True)
class NcclSettings:
    version: str = "2.21.5-1+cuda12.4"
    packages: tuple[str, ...] = ("libnccl2", "libnccl-dev")


class Nccl(Step[NcclSettings]):
    """libnccl2 + headers at one version on every node (mismatched NCCL versions hang collectives)."""

    name = "nccl"
    title = "NCCL (pinned)"
    after = ("nvidia-driver",)
    Settings = NcclSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host)

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        pk = tuple(self.settings.packages)
        return [os_fact(ctx), PackageVersions("apt", pk), PackageVersions("dnf", pk)]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        yield from packages_plan(manager(ctx, facts), facts, {p: s.version for p in s.packages}, what="NCCL")


@dataclass(frozen=True)
class NcclTestsSettings:
    version: str = "v2.13.10"
    repo: str = "https://github.com/NVIDIA/nccl-tests.git"
    prefix: str = "/opt/nccl-tests"
    mpi: bool = True
    mpi_home: str = "/usr/lib/x86_64-linux-gnu/openmpi"
    cuda_home: str = "/usr/local/cuda"
    timeout: float = 1800.0


class NcclTests(Step[NcclTestsSettings]):
    """nccl-tests at a pinned tag, built against the installed NCCL and MPI (the acceptance gate runs them)."""

    name = "nccl-tests"
    title = "nccl-tests built"
    after = ("nccl",)
    Settings = NcclTestsSettings

    #: Built into a temporary tree and moved into place, so a failed build leaves the old one intact.
    BUILD = ('set -e; rm -rf -- "$1.build"; git clone --quiet --depth 1 --branch "$2" "$3" "$1.build"; '
             'make -C "$1.build" -j"$(nproc)" MPI="$4" MPI_HOME="$5" CUDA_HOME="$6"; '
             'rm -rf -- "$1"; mv -- "$1.build" "$1"')

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host)

    def _paths(self, ctx: StepContext) -> tuple[str, str]:
        base = ctx.path(self.settings.prefix.rstrip("/"))
        return f"{base}/.metalfleet-version", f"{base}/build/all_reduce_perf"

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        marker, binary = self._paths(ctx)
        return [FileContent(marker), PathsExist((binary,))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        marker, binary = self._paths(ctx)
        built = (facts[FileContent(marker)] or "").strip()
        want = f"{s.version} mpi={int(s.mpi)}"
        if built == want and binary in facts[PathsExist((binary,))]:
            yield NoOp(f"nccl-tests {built} built")
            return
        prefix = ctx.path(s.prefix.rstrip("/"))
        yield Command(("sh", "-c", self.BUILD, "sh", prefix, s.version, s.repo, str(int(s.mpi)), s.mpi_home,
                       s.cuda_home), f"build nccl-tests {s.version} (was {built or 'none'})", timeout=s.timeout)
        yield Upload(marker, f"{want}\n".encode(), description="build marker")


def nccl_ib_hca(fabric: Fabric, ports: Sequence[Any]) -> str | None:
    """``=ca1,ca2,...``: the HCAs with an active port on the fabric's link layer at the fastest rate seen.

    The GPU fabric NICs are the fast ones; slower ports of the same link layer (a frontend CX-6 Dx
    next to 400G CX-7s, a BlueField management port) are left out. None when no such port is seen.
    """
    layer = "InfiniBand" if fabric == Fabric.INFINIBAND else "Ethernet"
    usable = [p for p in ports if p.link_layer == layer and p.state == "Active"]
    if not usable:
        return None
    top = max(p.rate for p in usable)
    cas = sorted({p.ca for p in usable if p.rate == top}, key=lambda c: (len(c), c))
    return "=" + ",".join(cas)


@dataclass(frozen=True)
class NcclConfigSettings:
    #: Computed per fabric from the tuning table; user values in ``extra``... or override ``env`` whole.
    env: dict[str, str] = field(default_factory=dict)
    conf_path: str = "/etc/nccl.conf"
    env_path: str = "/etc/profile.d/metalfleet-nccl.sh"


class NcclConfig(Step[NcclConfigSettings]):
    """/etc/nccl.conf (NCCL_* keys) and an environment file (all keys) with the fabric's tuning."""

    name = "nccl-config"
    title = "NCCL tuning files"
    Settings = NcclConfigSettings

    @classmethod
    def applies_to(cls, host: Host) -> bool:
        return _is_nvidia(host)

    def _env(self, ctx: StepContext, facts: FactValues) -> list[tuple[str, str, str]]:
        fabric = ctx.host.traits.fabric
        rows = [(t.name, t.value, t.why) for t in tuning_for(fabric)]
        if fabric in (Fabric.INFINIBAND, Fabric.ROCE):
            hca = nccl_ib_hca(fabric, facts[IbStat()])
            if hca:
                rows = [(n, hca if n == "NCCL_IB_HCA" else v, w) for n, v, w in rows]
        user = self.settings.env
        rows = [(n, user.get(n, v), "set in the cluster spec" if n in user else w) for n, v, w in rows]
        known = {n for n, _, _ in rows}
        rows += [(n, v, "set in the cluster spec") for n, v in user.items() if n not in known]
        return rows

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        s = self.settings
        facts: list[Fact[Any]] = [FileHashes((ctx.path(s.conf_path), ctx.path(s.env_path)))]
        if ctx.host.traits.fabric in (Fabric.INFINIBAND, Fabric.ROCE):
            facts.append(IbStat())
        return facts

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        rows = self._env(ctx, facts)
        fabric = ctx.host.traits.fabric.value
        conf = [f"# Written by metalfleet (nccl-config) for fabric {fabric}. NCCL reads NCCL_* keys here."]
        env = [f"# Written by metalfleet (nccl-config) for fabric {fabric}."]
        for name, value, why in rows:
            if name.startswith("NCCL_"):
                conf += [f"# {why}", f"{name}={value}"]
            env += [f"# {why}", f"export {name}={_shell_word(value)}"]
        hashes = FileHashes((ctx.path(s.conf_path), ctx.path(s.env_path)))
        yield file_state(facts, hashes, ctx.path(s.conf_path), ("\n".join(conf) + "\n").encode())
        yield file_state(facts, hashes, ctx.path(s.env_path), ("\n".join(env) + "\n").encode())


def _shell_word(value: str) -> str:
    import shlex

    return shlex.quote(value)
