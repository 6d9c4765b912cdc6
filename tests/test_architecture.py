"""The layering of the code (docs/architecture.md), checked on the source: one-way dependencies
between the top-level packages and the pipeline's stage packages, and no module over 700 lines."""
from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("model", "design", "processing", "estimation", "validation", "report", "config", "datasets")
#: what each package may import (besides itself, errors and paths); the HAL sits on the model layer
ALLOWED = {
    "robident_twin.model": set(),
    "hal": {"robident_twin.model"},
    "robident_twin.processing": {"robident_twin.model"},
    "robident_twin.datasets": {"robident_twin.model", "hal", "robident_twin.processing"},
    "robident_twin.estimation": {"robident_twin.model", "robident_twin.processing"},
    "robident_twin.design": {"robident_twin.model", "hal", "robident_twin.processing", "robident_twin.estimation"},
    "robident_twin.validation": {"robident_twin.model", "hal", "robident_twin.processing", "robident_twin.estimation",
                                 "robident_twin.design", "robident_twin.datasets",
                                 "robident_twin.config"},  # sweeps hash the validated config (a leaf: errors only)
    "robident_twin.report": {"robident_twin.model", "hal", "robident_twin.processing", "robident_twin.estimation",
                             "robident_twin.design", "robident_twin.validation", "robident_twin.datasets"},
}
BOTTOM = {"robident_twin.errors", "robident_twin.paths", "robident_twin.atomic", "robident_twin.progress",
          "robident_twin.typed"}  # typed: the generic config checker, so that each layer owns its schemas


def node_of(module: str) -> str | None:
    """The graph node of a module: hal, a stage package, or a top-level module of robident_twin."""
    parts = module.split(".")
    if parts[0] == "hal":
        return "hal"
    if parts[0] != "robident_twin" or len(parts) == 1:
        return None
    return "robident_twin." + parts[1]


def module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module imported by a file (module level and inside functions), relative ones resolved."""
    mod = module_of(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for t in ast.walk(tree) if isinstance(t, ast.If) and "TYPE_CHECKING" in ast.unparse(t.test)
                   for n in ast.walk(t)}
    for node in ast.walk(tree):
        if id(node) in typing_only:  # annotations only, never imported at run time
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)  # `from pkg import module`
    return out


def source_files():
    for top in ("robident_twin", "hal"):
        yield from sorted((ROOT / top).rglob("*.py"))


@lru_cache(maxsize=1)
def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in source_files():
        src = node_of(module_of(path))
        for imp in imports_of(path):
            dst = node_of(imp)
            if dst is None or dst == src or imp in BOTTOM or dst in BOTTOM:
                continue
            if (ROOT / Path(*imp.split("."))).with_suffix(".py").exists() or (ROOT / Path(*imp.split("."))).is_dir():
                graph.setdefault(src, set()).add(dst)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if state.get(m) is None:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if state.get(n) is None:
            c = visit(n)
            if c:
                return c
    return None


def test_find_cycle_detects_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_no_import_cycle_between_packages():
    cycle = find_cycle(package_graph())
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_layering(package):
    """Each package imports only the layers below it (the HAL never imports a pipeline stage)."""
    bad = sorted(d for d in package_graph().get(package, ()) if d not in ALLOWED[package])
    assert not bad, f"{package} imports {bad}; allowed: {sorted(ALLOWED[package])} (docs/architecture.md)"


def test_no_module_over_700_lines():
    long = {str(p.relative_to(ROOT)): n for p in source_files() if (n := len(p.read_text().splitlines())) > 700}
    assert not long, f"modules over 700 lines (split them by concern): {long}"
