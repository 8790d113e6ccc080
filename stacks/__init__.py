"""metalfleet.stacks: Pulumi dynamic providers and components that order and bootstrap nodes.

Names load lazily so that ``metalfleet offerings`` and other CLI paths work without the Pulumi SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ClusterContext", "GpuCluster", "GpuNode", "HookResult", "NodeProvider", "cluster_program", "run_from_yaml"]

_WHERE = {
    "ClusterContext": "hooks",
    "HookResult": "hooks",
    "GpuCluster": "cluster",
    "GpuNode": "node",
    "NodeProvider": "node",
    "cluster_program": "program",
    "run_from_yaml": "program",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(name)
