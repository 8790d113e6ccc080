"""ARCHITECTURE.md and providers/README.md are the map: what they name exists, every module is on it, and the
imports point the way the map draws them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("providers", "bootstrap", "stacks", "policies")
#: What each layer may import of the others (stacks/cli, the command layer, also policies).
ALLOWED = {"providers": set(), "bootstrap": {"providers"}, "policies": {"providers"},
           "stacks": {"providers", "bootstrap"}, "stacks/cli": {"providers", "bootstrap", "stacks", "policies"}}


def _named(doc: str) -> set[str]:
    """Every backticked repository path in ``doc`` (``bootstrap/runner.py``, ``bootstrap/steps/``)."""
    return {m for m in re.findall(r"`([\w./<>-]+)`", doc)
            if m.split("/")[0] in (*LAYERS, "tests") and "/" in m and "<" not in m}


def _modules(layer: str) -> list[Path]:
    return sorted(p for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


def test_every_path_the_map_names_exists() -> None:
    named = _named((ROOT / "ARCHITECTURE.md").read_text())
    assert len(named) > 100
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"ARCHITECTURE.md names what does not exist: {missing}"


def test_every_module_of_bootstrap_policies_and_stacks_is_on_the_map() -> None:
    named = _named((ROOT / "ARCHITECTURE.md").read_text())
    absent = [p.relative_to(ROOT).as_posix() for layer in ("bootstrap", "policies", "stacks") for p in _modules(layer)
              if p.relative_to(ROOT).as_posix() not in named]
    assert not absent, f"modules ARCHITECTURE.md does not name: {absent}"


def test_every_kernel_module_is_in_the_providers_readme() -> None:
    readme = (ROOT / "providers" / "README.md").read_text()
    absent = [p.name for p in sorted((ROOT / "providers").glob("*.py"))
              if p.name != "__init__.py" and f"`{p.name}`" not in readme]
    assert not absent, f"kernel modules providers/README.md does not name: {absent}"
    packages = [p.parent.name for p in sorted((ROOT / "providers").glob("*/__init__.py"))]
    assert all(f"`{name}/`" in readme for name in packages), packages


def _layer_of(path: Path) -> str:
    rel = path.relative_to(ROOT).as_posix()
    return "stacks/cli" if rel.startswith("stacks/cli/") else rel.split("/")[0]


def test_imports_point_the_way_the_map_draws() -> None:
    wrong = []
    for layer in LAYERS:
        for path in _modules(layer):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
                for name in names:
                    parts = name.split(".")
                    if parts[0] != "metalfleet" or len(parts) < 2 or parts[1] not in LAYERS:
                        continue
                    target, own = parts[1], _layer_of(path)
                    if target != own.split("/")[0] and target not in ALLOWED[own]:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[-1] == "__init__"
    return ".".join(["metalfleet", *(parts[:-1] if package else parts)]), package


def _import_time_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported (not those under ``if TYPE_CHECKING`` or in functions)."""
    out: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
            out += _import_time_imports(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            out += _import_time_imports(node.body)
    return out


def test_no_import_cycle() -> None:
    modules = {name: (path, package) for layer in LAYERS for path in _modules(layer)
               for name, package in [_module_name(path)]}
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        here = name if package else name.rsplit(".", 1)[0]
        edges = set()
        for node in _import_time_imports(ast.parse(path.read_text()).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    base = ".".join([*here.split(".")[:len(here.split(".")) - node.level + 1], *filter(None, [base])])
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
                # `from . import transport` imports the submodule; the package itself is already being imported
                targets = subs if subs and len(subs) == len(node.names) else [base, *subs]
            edges.update(t for t in targets if t in modules and t != name)
        graph[name] = edges
    cycles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = [stack.pop()]
            while component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert len(graph) > 150
    assert not cycles, f"modules that import each other: {cycles}"
