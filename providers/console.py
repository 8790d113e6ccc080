"""SSH host keys from a node's console output (standard library only).

cloud-init prints the host's public keys to the console at boot, between
``-----BEGIN SSH HOST KEY KEYS-----`` and ``-----END SSH HOST KEY KEYS-----``, on every cloud (EC2
GetConsoleOutput, Alibaba GetInstanceConsoleOutput, Huawei's console log). A driver reads its provider's
console and passes the text here; the keys go into ``node.extra["host_keys"]`` for bootstrap to pin.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from .errors import MetalfleetError

if TYPE_CHECKING:
    from .models import Node

__all__ = ["HOST_KEYS_BEGIN", "HOST_KEYS_END", "host_keys_from_console", "with_host_keys"]

HOST_KEYS_BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
HOST_KEYS_END = "-----END SSH HOST KEY KEYS-----"
_KEY_LINE = re.compile(r"(?:ssh-(?:ed25519|rsa|dss)|ecdsa-sha2-nistp(?:256|384|521)|sk-[A-Za-z0-9@.-]+)"
                       r"[ \t]+[A-Za-z0-9+/]+={0,3}(?:[ \t]+\S+)?")


def host_keys_from_console(text: str) -> tuple[str, ...]:
    """The key lines cloud-init printed between ``-----BEGIN/END SSH HOST KEY KEYS-----`` (the last
    complete block: a console holds every boot's output); () when there is none (yet)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.replace("\r", "\n").split("\n"):
        if HOST_KEYS_BEGIN in line:
            current = []
        elif HOST_KEYS_END in line:
            if current is not None:
                blocks.append(current)
            current = None
        elif current is not None:
            match = _KEY_LINE.search(line)
            if match:
                current.append(match.group(0).strip())
    keys = next((b for b in reversed(blocks) if b), [])
    return tuple(dict.fromkeys(keys))


def with_host_keys(nodes: Sequence[Node], known: Mapping[str, tuple[str, ...]],
                   read: Callable[[str], tuple[str, ...]]) -> list[Node]:
    """``nodes`` with ``extra["host_keys"]`` where the console has them. Best effort: ``read`` (a driver's
    console read, which adds what it finds to ``known``) is called for each node not in ``known`` yet, in
    parallel; a node whose console is empty or cannot be read (throttled, no permission) comes back as is."""
    def keys_of(node: Node) -> tuple[str, ...]:
        try:
            return read(node.id)
        except MetalfleetError:
            return ()

    todo = [n for n in nodes if n.id not in known]
    if len(todo) > 1:
        with ThreadPoolExecutor(max_workers=min(16, len(todo))) as pool:
            list(pool.map(keys_of, todo))
    elif todo:
        keys_of(todo[0])
    return [dataclasses.replace(n, extra={**n.extra, "host_keys": list(known[n.id])})
            if n.id in known else n for n in nodes]
