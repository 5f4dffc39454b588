"""The house has floors: every import inside ``ngraph_core`` points to its own floor or a lower one.

Floors, lowest first (docs/architecture.md, "The floors of the house")::

    errors, safe_json, memory_budget < ir < pattern < api, selectors < autodiff, distributed < passes
    < transformers < serialize, viz < inference, frontends, catalog, ngraph_core/__init__

The check reads the source with ``ast`` (nothing is imported), so it sees imports inside
functions and under ``TYPE_CHECKING`` too. It fails listing every upward import, every
cycle between subpackages, every import of ``neon`` and every module whose floor is not
known. Shared transformer code (``transformers/base.py``, ``transformers/kernels/``) and every other
floor import no backend package (``transformers/numpy/``, ``transformers/cupy/``): backends hand their
hooks to kernels through the kernel context. Inside each package folder (of ``ngraph_core`` and of
``neon``) it also looks for circles between the folder's modules and subpackages; each remaining one must be listed in
``FOLDER_CYCLES`` with a line saying why it stays. Run it directly for a report:
``python tests/test_layering.py``.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "ngraph_core"
ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / PACKAGE
FOLDER_ROOTS = (PACKAGE, "neon")  # the packages whose folders are checked for inner circles

# the first name under ngraph_core -> its floor; the top-level package (``__init__``) is ""
FLOORS: dict[str, int] = {
    "errors": 0,
    "safe_json": 0,  # the bounded JSON decoder every reader uses (numpy only)
    "memory_budget": 0,  # the byte budget readers and transformers check before allocating (errors only)
    "ir": 1,
    "pattern": 2,
    "api": 3,
    "selectors": 3,  # reads ir only; transformers (taps) and serialize read it
    "autodiff": 4,
    "distributed": 4,  # communicators (errors) and collective builders (ir, api); transformers' kernels call them
    "passes": 5,
    "transformers": 6,
    "serialize": 7,
    "viz": 7,
    "inference": 8,  # compiles, quantizes and deploys through transformers and serialize
    "frontends": 8,  # ONNX import/export: builds through api, evaluates with transformers, reads selectors
    "catalog": 8,  # the op x capability matrix: reads the tables of every floor (frontends' included)
    "": 8,
}
FORBIDDEN = ("neon",)  # packages that sit above all of ngraph_core

# circles between the modules of one package folder that stay, each with why:
# (folder, the circle's members) -> justification
FOLDER_CYCLES: dict[tuple[str, frozenset[str]], str] = {
    ("neon", frozenset({"callbacks", "tensorboard"})): "neon.callbacks.TensorBoard (the documented name) is a "
    "lazy re-export of neon.tensorboard, whose callback subclasses Callback",
    ("ngraph_core.inference", frozenset({"deploy", "model"})): "CompiledModel.save is a shortcut for deploy.save "
    "(imported at use) and deploy.load builds a CompiledModel: the file format's writer and reader stay in one module",
}


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to an absolute module name."""

    module: str  # the importing module, e.g. ngraph_core.passes.fold
    target: str  # the imported module, e.g. ngraph_core.transformers.kernels
    line: int

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target}"


def module_name(path: Path) -> str:
    """``ngraph_core/passes/fold.py`` -> ``ngraph_core.passes.fold`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """True when ``name`` (absolute, dotted) is a module or package of this repository."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of(path: Path) -> list[Import]:
    """Every import in ``path`` (at any depth), resolved: relative ones against the module's package."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # ``from .. import api`` imports the submodule ngraph_core.api, not ngraph_core itself
                sub = f"{base}.{alias.name}"
                found.append(Import(module, sub if is_module(sub) else base, node.lineno))
    return list(dict.fromkeys(found))  # one entry per (target, line)


def floor_key(name: str) -> str | None:
    """The subpackage (first name under ngraph_core) that ``name`` lives in; "" for the package; None outside."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    return name[len(PACKAGE) + 1:].partition(".")[0]


def all_imports() -> list[Import]:
    return [imp for path in sorted(SOURCE.rglob("*.py")) for imp in imports_of(path)]


def problems(imports: list[Import]) -> list[str]:
    """Upward imports, imports of ``neon``, modules of unknown floor, and cycles between subpackages."""
    found = []
    edges: dict[str, set[str]] = {}
    for imp in imports:
        if imp.target.split(".")[0] in FORBIDDEN:
            found.append(f"{imp}: ngraph_core never imports {imp.target.split('.')[0]}")
            continue
        src, dst = floor_key(imp.module), floor_key(imp.target)
        if dst is None:
            continue  # the standard library or a third-party package
        for key in (src, dst):
            if key not in FLOORS:
                found.append(f"{imp}: {PACKAGE}.{key} has no floor; hint: add it to FLOORS and docs/architecture.md")
        if src not in FLOORS or dst not in FLOORS:
            continue
        if FLOORS[dst] > FLOORS[src]:
            found.append(f"{imp}: upward, from floor {FLOORS[src]} ({src or PACKAGE}) "
                         f"to {FLOORS[dst]} ({dst or PACKAGE})")
        if src != dst:
            edges.setdefault(src or PACKAGE, set()).add(dst or PACKAGE)
    found += [f"cycle between subpackages: {' -> '.join(cycle)}" for cycle in cycles(edges)]
    return found


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a closed path) through each strongly connected group of more than one node."""
    found, seen = [], set()
    for start in sorted(edges):
        if start in seen:
            continue
        # a shortest path from one of start's successors back to start closes a cycle through it
        paths, visited = [[start, nxt] for nxt in sorted(edges[start])], {start}
        while paths:
            path = paths.pop(0)
            if path[-1] == start:
                found.append(path)
                seen.update(path)
                break
            if path[-1] in visited:
                continue
            visited.add(path[-1])
            paths += [path + [nxt] for nxt in sorted(edges.get(path[-1], ()))]
    return found


def strongly_connected(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected groups of more than one node (Tarjan's algorithm), in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = {stack.pop()}
            while node not in group:
                group.add(stack.pop())
            if len(group) > 1:
                found.append(frozenset(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found, key=sorted)


def folder_edges(imports: list[Import], folders: list[str]) -> dict[str, dict[str, set[str]]]:
    """folder -> {child: children it imports}: a child is a module or subpackage directly in the folder."""
    def child(folder: str, name: str) -> str | None:
        return name[len(folder) + 1:].partition(".")[0] if name.startswith(folder + ".") else None

    edges: dict[str, dict[str, set[str]]] = {}
    for imp in imports:
        for folder in folders:
            src, dst = child(folder, imp.module), child(folder, imp.target)
            if src and dst and src != dst:
                edges.setdefault(folder, {}).setdefault(src, set()).add(dst)
    return edges


def folder_cycles(imports: list[Import], folders: list[str]) -> dict[tuple[str, frozenset[str]], list[str]]:
    """(folder, members) -> one closed path through them, for every circle inside a package folder."""
    found = {}
    for folder, edges in sorted(folder_edges(imports, folders).items()):
        for group in strongly_connected(edges):
            inner = {node: edges.get(node, set()) & group for node in group}
            found[(folder, group)] = cycles(inner)[0]
    return found


def all_folders() -> list[str]:
    return sorted(module_name(path) for root in FOLDER_ROOTS for path in (ROOT / root).rglob("__init__.py"))


def all_folder_imports() -> list[Import]:
    return [imp for root in FOLDER_ROOTS for path in sorted((ROOT / root).rglob("*.py"))
            for imp in imports_of(path)]


def folder_problems(imports: list[Import], folders: list[str]) -> list[str]:
    """Circles inside a folder that ``FOLDER_CYCLES`` does not justify, and justifications of no circle."""
    found_cycles = folder_cycles(imports, folders)
    found = [f"cycle inside {folder} among {', '.join(sorted(group))}: {' -> '.join(path)}; "
             "hint: break it, or add it to FOLDER_CYCLES with a line saying why it stays"
             for (folder, group), path in found_cycles.items() if (folder, group) not in FOLDER_CYCLES]
    found += [f"FOLDER_CYCLES lists {folder} {sorted(group)}, which is no longer a circle; hint: remove it"
              for folder, group in FOLDER_CYCLES if (folder, group) not in found_cycles]
    return found


BACKENDS = ("ngraph_core.transformers.numpy", "ngraph_core.transformers.cupy")
"""The backend packages: only themselves and ``ngraph_core.transformers`` (which registers them) import them."""


def backend_problems(imports: list[Import]) -> list[str]:
    """Imports of a backend package from outside it (shared kernels, the executor, another floor)."""
    def backend(name: str) -> str | None:
        return next((b for b in BACKENDS if name == b or name.startswith(b + ".")), None)

    return [f"{imp}: only {backend(imp.target)} itself and ngraph_core.transformers import a backend; "
            "hint: hand the hook to kernels through KernelContext (transformers/kernels/context.py)"
            for imp in imports if backend(imp.target) and imp.module != "ngraph_core.transformers"
            and backend(imp.module) != backend(imp.target)]


def test_the_walker_resolves_relative_and_nested_imports():
    # the check is only as good as its resolution: spot-check the forms the package uses
    by_module: dict[str, set[str]] = {}
    for imp in all_imports():
        by_module.setdefault(imp.module, set()).add(imp.target)
    assert "ngraph_core.ir" in by_module["ngraph_core.passes.pipeline"]  # from ..ir import Op
    assert "ngraph_core.api" in by_module["ngraph_core.passes.simplify"]  # from .. import api as ng
    assert "ngraph_core.transformers" in by_module["ngraph_core"]  # from . import transformers
    assert problems([Import("ngraph_core.ir.node", "ngraph_core.passes", 1)])
    assert problems([Import("ngraph_core.api.x", "neon.layers", 1)])
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_point_down_the_floors_and_form_no_cycle():
    found = problems(all_imports())
    assert not found, "layering violations:\n  " + "\n  ".join(found)


def test_shared_code_imports_no_backend():
    assert backend_problems([Import("ngraph_core.transformers.kernels.conv", "ngraph_core.transformers.numpy.runtime",
                                    1)])
    assert not backend_problems([Import("ngraph_core.transformers.numpy.winograd",
                                        "ngraph_core.transformers.numpy.runtime", 1)])
    found = backend_problems(all_imports())
    assert not found, "backend imports from shared code:\n  " + "\n  ".join(found)


def test_the_folder_check_finds_circles_between_sibling_modules():
    imports = [Import("p.a", "p.b.x", 1), Import("p.b.x", "p.a", 2), Import("p.b.x", "p.b.y", 3),
               Import("p.b.y", "p.b.x", 4), Import("p.c", "p.a", 5)]
    assert folder_cycles(imports, ["p", "p.b"]) == {("p", frozenset({"a", "b"})): ["a", "b", "a"],
                                                      ("p.b", frozenset({"x", "y"})): ["x", "y", "x"]}
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_circle_inside_a_folder_but_the_justified_ones():
    found = folder_problems(all_folder_imports(), all_folders())
    assert not found, "circles inside folders:\n  " + "\n  ".join(found)
    assert all(reason.strip() for reason in FOLDER_CYCLES.values())


if __name__ == "__main__":
    report = problems(all_imports()) + backend_problems(all_imports()) + folder_problems(all_folder_imports(),
                                                                                          all_folders())
    print("\n".join(report) or "no layering violations")
    sys.exit(1 if report else 0)
