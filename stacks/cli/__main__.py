"""``python -m metalfleet.stacks.cli``: the ``metalfleet`` command (importing this module runs nothing)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
