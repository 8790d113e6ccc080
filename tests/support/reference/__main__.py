"""Write (or, with --check, compare) the page of every reference table: ``python -m metalfleet.testing.reference``."""

from __future__ import annotations

import argparse
import sys

from metalfleet.testing.reference import NAMES, load, page_path, problems, render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m metalfleet.testing.reference", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is stale or a table breaks its rules")
    args = parser.parse_args(argv)
    bad = 0
    for name in NAMES:
        ref = load(name)
        for problem in problems(ref):
            print(f"{name}.yaml: {problem}", file=sys.stderr)
            bad += 1
        page, text = page_path(name), render(ref)
        if args.check:
            if not page.exists() or page.read_text(encoding="utf-8") != text:
                print(f"{page}: stale (run python -m metalfleet.testing.reference)", file=sys.stderr)
                bad += 1
        else:
            page.write_text(text, encoding="utf-8")
            print(f"wrote {page}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
