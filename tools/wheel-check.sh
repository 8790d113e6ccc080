#!/usr/bin/env bash
# Build the wheel, install it into a fresh venv, import every module from it, then run mypy
# against the installed package. Catches a subpackage or data file missing from the wheel.
set -euo pipefail
py="${1:-.venv/bin/python}"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(mktemp -d)
# setuptools builds through build/ and *.egg-info in the source tree and never removes a file from them: a module
# deleted or moved since the last build would still ship (and a stale egg-info shadows the editable install's
# entry points for commands run from the repo root). Start from none and leave none.
clean() { rm -rf "$root/build" "$root"/*.egg-info; }
clean
trap 'rm -rf "$out"; clean' EXIT
"$py" -m build --wheel --outdir "$out/dist" . >/dev/null
wheel=$(ls "$out"/dist/metalfleet-*.whl)
"$py" -m venv "$out/venv"
"$out/venv/bin/pip" install -q "${wheel}[aws,pulumi,testing]"
(cd "$out" && "$out/venv/bin/python" - "$root" <<'PY'
import importlib, pathlib, pkgutil, sys
root = pathlib.Path(sys.argv[1])
tops = {"providers": "providers", "stacks": "stacks", "bootstrap": "bootstrap", "policies": "policies",
        "testing": "tests/support"}
expected = {f"metalfleet.{top}." + p.relative_to(root / src).with_suffix("").as_posix().replace("/", ".")
            for top, src in tops.items() for p in (root / src).rglob("*.py")}
expected = {m.removesuffix(".__init__") for m in expected}
found = []
for top in tops:
    pkg = importlib.import_module(f"metalfleet.{top}")
    assert "site-packages" in pkg.__file__, f"{pkg.__name__} imported from {pkg.__file__}, not the wheel"
    found.append(pkg.__name__)
    for m in pkgutil.walk_packages(pkg.__path__, f"metalfleet.{top}."):
        importlib.import_module(m.name)
        found.append(m.name)
missing = sorted(expected - set(found))
assert not missing, f"modules in the source tree but not in the wheel: {missing}"
print(f"wheel-check: imported {len(found)} modules from the installed wheel")
PY
)
cd "$out" && "$root/.venv/bin/mypy" --config-file "$root/pyproject.toml" --python-executable "$out/venv/bin/python" \
  -p metalfleet.providers -p metalfleet.stacks -p metalfleet.bootstrap -p metalfleet.policies -p metalfleet.testing
