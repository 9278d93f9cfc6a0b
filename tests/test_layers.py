"""The package's import arrows point one way (BRIEF: nothing imports upward; no import cycles).

Checked by reading every module's import statements (function-local ones too), so a lazy import that
reaches back up a layer fails here rather than hiding until it runs.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "torch_webgpu"
# top-level layer -> the layers it may import (besides itself)
ALLOWED = {
    "runtime": {"_native_plan"},   # the torch-free C++ recorder (csrc/native_plan/)
    "kernels": {"runtime"},
    "device_state": {"runtime", "_C"},
    "ops": {"runtime", "kernels", "device_state", "_C"},
    "graphs": {"runtime", "device_state", "ops", "_C"},
    "device": {"runtime", "device_state", "ops", "graphs", "_C"},
    "compiler": {"runtime", "kernels", "mlir_passes", "bundle"},   # compiler/export writes bundles
    "bundle": {"runtime", "kernels", "compiler"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Module name -> the torch_webgpu / mlir_passes modules (or module.attribute) it imports."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            found[name].update(t for t in targets if t.split(".")[0] in ("torch_webgpu", "mlir_passes"))
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
