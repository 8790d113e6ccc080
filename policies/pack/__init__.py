"""The metalfleet CrossGuard policy pack folder (``pulumi preview --policy-pack <this folder>``).

``PACK_DIR`` is where it lies, also in an installed wheel:
``pulumi preview --policy-pack "$(python -c 'import metalfleet.policies.pack as p; print(p.PACK_DIR)')"``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PACK_DIR"]

PACK_DIR = Path(__file__).resolve().parent
