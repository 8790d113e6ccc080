"""Reboot when a step that needs one changed, or when the node says a reboot is required."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..facts import BootId, Fact, FactValues, PathsExist
from ..step import Action, NoOp, RebootAction, Step, StepContext

__all__ = ["RebootIfNeeded"]


@dataclass(frozen=True)
class RebootSettings:
    #: A change in any of these steps (this run) needs a reboot: new kernel modules, new driver.
    triggers: tuple[str, ...] = ("nvidia-driver", "doca-ofed", "erdma", "ascend-driver")
    command: tuple[str, ...] = ("reboot",)
    #: Seconds to wait for SSH and a new boot id.
    timeout: float = 900.0
    #: Marker files package scripts leave when they need a reboot (Debian/Ubuntu convention).
    markers: tuple[str, ...] = ("/var/run/reboot-required",)
    allowed: bool = True


class RebootIfNeeded(Step[RebootSettings]):
    """Reboot, wait for SSH to come back with a new boot id, then let later steps re-read facts."""

    name = "reboot"
    title = "reboot if needed"
    after = ("nvidia-driver", "doca-ofed", "erdma", "ascend-driver", "efa")
    Settings = RebootSettings
    is_reboot = True

    def facts(self, ctx: StepContext) -> Sequence[Fact[Any]]:
        return [BootId(ctx.path("/proc/sys/kernel/random/boot_id")),
                PathsExist(tuple(ctx.path(m) for m in self.settings.markers))]

    def actions(self, ctx: StepContext, facts: FactValues) -> Iterator[Action]:
        s = self.settings
        why = [f"{t} changed" for t in s.triggers if t in ctx.changed]
        markers = tuple(ctx.path(m) for m in s.markers)
        why += [f"{m} present" for m in sorted(facts[PathsExist(markers)])]
        if not why:
            yield NoOp("no reboot needed")
        elif not s.allowed:
            yield NoOp(f"reboot needed ({'; '.join(why)}) but overrides.reboot.allowed is false")
        else:
            yield RebootAction("; ".join(why), tuple(s.command), s.timeout)
