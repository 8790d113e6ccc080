"""What metalfleet's dynamic resources share: a type of their own, and the options every one of them takes.

Each resource class is declared ``class X(Resource, module=MODULE, name="X")``, so its type is
``pulumi-python:dynamic/metalfleet:X`` and policy packs, ``pulumi stack`` and previews tell a node from its
bootstrap. Stacks made before stored every one as ``pulumi-python:dynamic:Resource``; the alias to that
type lets such a stack's next ``up`` move each resource to its own type without replacing it.
"""

from __future__ import annotations

import os
from typing import Any

import pulumi

from .secrets import SECRETS

__all__ = ["LEGACY_TYPE", "MODULE", "UNSUBSCRIBE_ENV", "resource_options", "unsubscribe"]

#: The module part of every metalfleet dynamic resource's type.
MODULE = "metalfleet"
#: The type every dynamic resource had before it had its own.
LEGACY_TYPE = "pulumi-python:dynamic:Resource"
#: Set to 1 in the engine's environment (``metalfleet destroy --unsubscribe``): a delete may end subscriptions
#: early even when the spec in state did not opt in (``capacity.release_subscriptions``).
UNSUBSCRIBE_ENV = "METALFLEET_RELEASE_SUBSCRIPTIONS"


def unsubscribe(spec_opt_in: Any) -> bool:
    """Whether a delete may end a subscription: the spec in state opted in, or the command did."""
    return bool(spec_opt_in) or os.environ.get(UNSUBSCRIBE_ENV) == "1"


def resource_options(opts: pulumi.ResourceOptions | None, **extra: Any) -> pulumi.ResourceOptions:
    """``opts`` and ``extra`` plus what every metalfleet resource takes: its ``secrets`` output stored
    encrypted, and the alias to :data:`LEGACY_TYPE`."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(
        additional_secret_outputs=[SECRETS], aliases=[pulumi.Alias(type_=LEGACY_TYPE)], **extra))
