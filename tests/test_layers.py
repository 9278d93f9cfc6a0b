"""The package's import arrows point one way (BRIEF: nothing imports upward; no import cycles).

Checked by reading every module's import statements (function-local and TYPE_CHECKING ones too), so a
lazy import that reaches back up a layer, or closes a circle, fails here rather than hiding until it runs.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "torch_webgpu", ROOT / "mlir_passes")
# top-level layer -> the layers it may import (besides itself and config)
_LAYERS = {
    "config": set(),   # torch_webgpu/config.py, the environment variables: a leaf that every layer may read
    "runtime": {"_native_plan"},   # the torch-free C++ recorder (csrc/native_plan/)
    "kernels": {"runtime"},
    "plan": {"runtime", "kernels", "_native_plan"},   # the runtime of the low IR: no compiler, no torch
    "device_state": {"runtime", "_C"},
    "ops": {"runtime", "kernels", "device_state", "_C"},
    "graphs": {"runtime", "device_state", "ops", "_C"},
    "device": {"runtime", "device_state", "ops", "graphs", "_C"},
    "mlir_passes": {"plan"},   # host expressions and folded grids are the plan's ABI
    "compiler": {"runtime", "kernels", "plan", "mlir_passes", "bundle"},   # compiler/export writes bundles
    "bundle": {"runtime", "kernels", "plan"},   # loads plans through plan/ alone
}
ALLOWED = {layer: below | ({"config"} if layer != "config" else set()) for layer, below in _LAYERS.items()}
EXTENSIONS = {"torch_webgpu._C", "torch_webgpu._native_plan"}   # built from csrc/: modules without sources
# Import circles that other work removes; this list may only shrink (a circle not listed fails, and so
# does a listed one that is gone: take it off).
KNOWN_CIRCLES: list[set[str]] = []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    """Module name -> source file, for every module of the packages."""
    return {_module_name(path): path for package in PACKAGES for path in package.rglob("*.py")}


def _import_nodes(path: Path) -> list[tuple[ast.stmt, bool]]:
    """Every import statement of a file, with whether it runs when the module is imported (not inside a
    function; TYPE_CHECKING blocks count as module level)."""
    found: list[tuple[ast.stmt, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, not in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text(), str(path)), False)
    return found


def _targets(module: str, path: Path, node: ast.stmt) -> list[str]:
    """The dotted names an import statement names (module, or module.attribute)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(anchor + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" for a in node.names]


def _ours(target: str) -> bool:
    return target.split(".")[0] in ("torch_webgpu", "mlir_passes")


def _imports() -> dict[str, set[str]]:
    """Module name -> the torch_webgpu / mlir_passes modules (or module.attribute) it imports."""
    found: dict[str, set[str]] = defaultdict(set)
    for name, path in _sources().items():
        for node, _ in _import_nodes(path):
            found[name].update(t for t in _targets(name, path, node) if _ours(t))
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "torch_webgpu" and len(parts) > 1 else parts[0]


def test_ops_never_import_the_device_module():
    offenders = {m: sorted(t for t in ts if _layer(t) == "device")
                 for m, ts in _imports().items() if _layer(m) == "ops"}
    assert not {m: ts for m, ts in offenders.items() if ts}, "ops/ must reach device state via device_state"


def test_layers_import_only_the_layers_below():
    upward = []
    for module, targets in _imports().items():
        layer = _layer(module)
        if layer not in ALLOWED:
            continue
        upward += [f"{module} -> {t}" for t in sorted(targets)
                   if _layer(t) != layer and _layer(t) not in ALLOWED[layer]]
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_config_is_a_leaf_of_the_standard_library():
    """torch_webgpu/config.py imports only the standard library, so every layer (the torch-free plan/ and
    bundle/ too) may read settings from it without an arrow pointing up or a circle."""
    import sys

    path = ROOT / "torch_webgpu" / "config.py"
    imported = {target.split(".")[0] for node, _ in _import_nodes(path)
                for target in _targets("torch_webgpu.config", path, node)}
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported


def test_plan_runs_without_torch():
    """plan/ never imports torch when it is imported (bundles run where torch is not installed): only
    plan/torch_tensors.py touches torch, inside the functions that make and read torch tensors."""
    offenders = []
    for name, path in _sources().items():
        if _layer(name) != "plan":
            continue
        for node, module_level in _import_nodes(path):
            if any(t.split(".")[0] == "torch" for t in _targets(name, path, node)) and (
                    module_level or path.name != "torch_tensors.py"):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, f"torch imported in plan/ outside plan/torch_tensors.py's functions: {offenders}"


def test_no_import_cycle_between_layers():
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in _imports().items():
        graph[_layer(module)].update(_layer(t) for t in targets if _layer(t) != _layer(module))
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def _module_graph() -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports (a name imported from a package resolves to the
    submodule of that name where there is one, else to the package's __init__)."""
    modules = set(_sources()) | EXTENSIONS
    graph: dict[str, set[str]] = {}
    for module, targets in _imports().items():
        edges = set()
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_no_import_circle_between_modules():
    """No two modules of torch_webgpu/ or mlir_passes/ import each other, directly or around a loop,
    except the KNOWN_CIRCLES still to be untied."""
    circles = _circles(_module_graph())
    unknown = [sorted(c) for c in circles if not any(c <= known for known in KNOWN_CIRCLES)]
    assert not unknown, "import circles:\n" + "\n".join(" <-> ".join(c) for c in unknown)
    gone = [sorted(known) for known in KNOWN_CIRCLES if not any(c & known for c in circles)]
    assert not gone, f"no longer circles, take them off KNOWN_CIRCLES: {gone}"
