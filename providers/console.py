"""SSH host keys from a node's console output (standard library only).

cloud-init prints the host's public keys to the console at boot, between
``-----BEGIN SSH HOST KEY KEYS-----`` and ``-----END SSH HOST KEY KEYS-----``, on every cloud (EC2
GetConsoleOutput, Alibaba GetInstanceConsoleOutput, Huawei's console log). A driver reads its provider's
console and passes the text here; the keys go into ``node.extra["host_keys"]`` for bootstrap to pin.
"""

from __future__ import annotations

import re

__all__ = ["HOST_KEYS_BEGIN", "HOST_KEYS_END", "host_keys_from_console"]

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
