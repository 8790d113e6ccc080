"""Profiles: an ordered composition of steps, resolved per host.

Order comes from the profile's list, adjusted so every step runs after the steps named in its
``after`` (when those are present on the host). A step whose ``applies_to`` says no (an EFA step on
an InfiniBand node) is left out unless an override sets ``enabled: true``; ``enabled: false``
removes any step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from metalfleet.providers.errors import InvalidSpecError
from metalfleet.providers.spec import ClusterSpec

from .inventory import Host
from .step import Step, resolve_settings

__all__ = ["PROFILES", "Profile", "get_profile", "order_steps", "profile_for_spec"]

StepClass = type[Step[Any]]


def order_steps(steps: Sequence[StepClass]) -> list[StepClass]:
    """Stable topological order: list order, except a step waits for the steps in its ``after``."""
    present = {s.name: s for s in steps}
    if len(present) != len(steps):
        dupes = sorted({s.name for s in steps if sum(1 for t in steps if t.name == s.name) > 1})
        raise InvalidSpecError(f"profile lists step(s) {dupes} twice", field="bootstrap.profile", value=dupes)
    done: list[StepClass] = []
    placed: set[str] = set()
    remaining = list(steps)
    while remaining:
        for s in remaining:
            if all(dep in placed or dep not in present for dep in s.after):
                done.append(s)
                placed.add(s.name)
                remaining.remove(s)
                break
        else:
            cycle = [s.name for s in remaining]
            raise InvalidSpecError(f"steps {cycle} depend on each other in a cycle", field="bootstrap.profile",
                                   value=cycle)
    return done


@dataclass(frozen=True)
class Profile:
    name: str
    steps: tuple[StepClass, ...]
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""

    def __post_init__(self) -> None:
        names = {s.name for s in self.steps}
        unknown = sorted(set(self.overrides) - names)
        if unknown:
            raise InvalidSpecError(f"bootstrap.overrides names step(s) {unknown} not in profile {self.name!r} "
                                   f"(steps: {sorted(names)})", field=f"bootstrap.overrides.{unknown[0]}",
                                   value=unknown[0])
        order_steps(self.steps)

    def with_overrides(self, overrides: Mapping[str, Mapping[str, Any]]) -> Profile:
        merged: dict[str, dict[str, Any]] = {k: dict(v) for k, v in self.overrides.items()}
        for step, values in overrides.items():
            merged.setdefault(step, {}).update(values)
        return Profile(self.name, self.steps, merged, self.description)

    def for_host(self, host: Host) -> list[Step[Any]]:
        """The steps for ``host``, in order, each with its resolved settings."""
        chosen = []
        for cls in order_steps(self.steps):
            ov = self.overrides.get(cls.name, {})
            enabled = ov.get("enabled")
            if enabled is False or (enabled is None and not cls.applies_to(host)):
                continue
            step = cls(resolve_settings(cls, host, ov))
            if enabled is None and not getattr(step, "wanted", True):
                continue
            chosen.append(step)
        return chosen


def _registry() -> dict[str, Profile]:
    from .steps import fabric, gpu, nccl, reboot, storage

    node = (
        gpu.NvidiaDriver, gpu.NvidiaFabricManager, gpu.AscendDriver,
        fabric.Efa, fabric.DocaOfed, fabric.Erdma,
        reboot.RebootIfNeeded,
        gpu.NvidiaPersistenced, gpu.NvidiaPeermem, gpu.AscendCann,
        fabric.AwsOfiNccl, fabric.RdmaSettings, fabric.Hccn,
        nccl.Nccl, nccl.NcclTests, nccl.NcclConfig,
        storage.HotTier, storage.WarmTier, storage.ColdTier,
    )
    return {
        "gpu-node": Profile("gpu-node", node, description="driver, fabric, NCCL and storage for the node's offering"),
        "storage": Profile("storage", (storage.HotTier, storage.WarmTier, storage.ColdTier),
                           description="storage tiers only"),
        "nccl": Profile("nccl", (nccl.Nccl, nccl.NcclTests, nccl.NcclConfig), description="NCCL and its tuning only"),
    }


class _Profiles(Mapping[str, Profile]):
    def __init__(self) -> None:
        self._data: dict[str, Profile] | None = None

    def _load(self) -> dict[str, Profile]:
        if self._data is None:
            self._data = _registry()
        return self._data

    def __getitem__(self, key: str) -> Profile:
        return self._load()[key]

    def __iter__(self) -> Any:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


PROFILES: Mapping[str, Profile] = _Profiles()


def get_profile(name: str | None = None) -> Profile:
    name = name or "gpu-node"
    try:
        return PROFILES[name]
    except KeyError:
        raise InvalidSpecError(f"unknown bootstrap profile {name!r}; known: {sorted(PROFILES)}",
                               field="bootstrap.profile", value=name) from None


def profile_for_spec(spec: ClusterSpec) -> Profile:
    """The spec's profile with its storage tiers and ``bootstrap.overrides`` applied."""
    profile = get_profile(spec.bootstrap.profile)
    storage: dict[str, dict[str, Any]] = {}
    names = {s.name for s in profile.steps}
    if spec.storage.hot and "storage-hot" in names:
        storage["storage-hot"] = {"mount": spec.storage.hot.mount, "filesystem": spec.storage.hot.filesystem}
    if spec.storage.warm and "storage-warm" in names:
        w = spec.storage.warm
        storage["storage-warm"] = {"kind": w.kind, "source": w.source, "mount": w.mount, "options": w.options}
    if spec.storage.cold and "storage-cold" in names:
        c = spec.storage.cold
        storage["storage-cold"] = {"kind": c.kind, "bucket": c.bucket, "mount": c.mount, "tool": c.tool}
    return profile.with_overrides(storage).with_overrides(spec.bootstrap.overrides)
