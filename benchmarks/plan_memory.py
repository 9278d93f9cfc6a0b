"""Device memory of a plan or bundle, measured on the CPU: `python -m benchmarks.plan_memory <dir>...`.

For each bundle directory (manifest.json) or saved plan (plan.json) it reports, in MB: the plan's
per-call buffers with one storage each and after plan_memory.assign_memory (the executor's default), the
executor's read-only copies of aliased bindings and bounced in-buffer copies, the weights (as stored;
external weights as the manifest names them, with bit-identical ties only knowable from the module), the
inputs and outputs of a call, and the largest scratch the load-time tuning of one variant allocates
(before: every bound buffer's whole extent; now: windows of the buffers a variant writes or that are
graph inputs). Nothing touches a device.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from torch_webgpu.compiler.low_ir import LowIROp, Plan
from torch_webgpu.compiler.plan_memory import assign_memory, check_assignment

MB = 1e6
_ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
             "uint8": 1, "bool": 1, "float64": 8}


def load_any(directory: Path) -> tuple[Plan, dict[str, Any] | None]:
    """The plan of a bundle or saved-plan directory (weights not bound), and the manifest if any."""
    if (directory / "plan.json").exists():
        return Plan.load(directory), None
    manifest = json.loads((directory / "manifest.json").read_text())
    if manifest.get("kind") == "decoder":
        raise SystemExit(f"{directory}: a decode bundle; pass one of its phases' plans")
    return Plan.from_doc(manifest["plan"], directory), manifest


def _nbytes(shape: list, dtype: str) -> int:
    return math.prod(int(d) for d in shape) * _ITEMSIZE.get(dtype, 4)


def executor_scratch(plan: Plan) -> int:
    """Bytes of the executor's per-node scratch buffers: read-only copies of a buffer a dispatch also
    writes, and the bounce of a copy within one buffer (lowering.CompiledPlan.scratch)."""
    total = 0
    for node in plan.main:
        a = node.args
        if node.op is LowIROp.COPY and a["source"] == a["buffer"]:
            total += -(-int(a["size"]) // 4) * 4
        elif node.op is LowIROp.DISPATCH:
            spec = plan.executables[a["entry_point"]]
            read_only = {h for w, h in spec.binding_map.items() if w in spec.read_only}
            written = {a["bindings"][h][0] for h in spec.binding_map.values() if h not in read_only}
            total += sum(-(-int(b[2]) // 4) * 4 for h, b in enumerate(a["bindings"])
                         if h in read_only and b[0] in written)
    return total


def tuning_scratch(plan: Plan) -> tuple[int, int]:
    """The largest scratch one variant's timing allocates: (before, now) — see plan_tuning._time_variant."""
    graph_inputs = {f"in{k}" for k in range(len(plan.inputs))}
    before = now = 0
    for node in plan.main:
        for variant in node.args.get("tune", {}).get("variants", ()):
            spec = plan.executables[variant["entry_point"]]
            read_only = {h for w, h in spec.binding_map.items() if w in spec.read_only}
            written = {variant["bindings"][h][0] for h in spec.binding_map.values() if h not in read_only}
            whole: dict[str, int] = {}
            window: dict[str, int] = {}
            for name, offset, size in variant["bindings"]:
                whole[name] = max(whole.get(name, 0), int(offset) + int(size))
                if name in written or name in graph_inputs:
                    window[name] = max(window.get(name, 0), int(size))
            before = max(before, sum(whole.values()))
            now = max(now, sum(window.values()))
    return before, now


def report(directory: Path) -> dict[str, Any]:
    """The memory figures of one directory (bytes)."""
    plan, manifest = load_any(directory)
    assigned, memory = assign_memory(plan)
    check_assignment(plan, assigned)
    if manifest is not None and "external_weights" in manifest:
        specs = manifest["external_weights"]["weights"].values()
        weights = sum(_nbytes(s["shape"], s["dtype"]) for s in specs)
        by_shape: dict[tuple, list[int]] = {}
        for s in specs:
            by_shape.setdefault((tuple(s["shape"]), s["dtype"]), []).append(_nbytes(s["shape"], s["dtype"]))
        tie_candidates = sum(sum(v[1:]) for v in by_shape.values() if v[0] >= 1 << 20)
        weights += sum(np.asarray(v).nbytes for v in plan.constants.values())
    else:
        weights = sum(np.asarray(v).nbytes for v in plan.constants.values())
        tie_candidates = 0
    io = sum(_nbytes(t.shape, t.device_dtype) for t in (*plan.inputs, *plan.outputs) if None not in t.shape)
    tune_before, tune_now = tuning_scratch(plan)
    return {"name": directory.name, "buffers_before": memory.before, "buffers_after": memory.after,
            "buffers": len(plan.buffers), "shared": memory.shared, "slots": len(memory.slots),
            "kept": len(memory.kept), "executor_scratch": executor_scratch(assigned), "weights": weights,
            "weights_same_shape_as_another": tie_candidates, "inputs_outputs": io,
            "tuning_scratch_before": tune_before, "tuning_scratch_now": tune_now}


def main(argv: list[str] | None = None) -> None:
    """Print one line of MB figures per directory (and JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (bytes)")
    args = parser.parse_args(argv)
    rows = [report(d) for d in args.dirs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    for r in rows:
        print(f"{r['name']}: plan buffers {r['buffers_before'] / MB:.1f} -> {r['buffers_after'] / MB:.1f} MB "
              f"({r['shared']} of {r['buffers']} buffers in {r['slots']} slots, {r['kept']} kept); "
              f"executor scratch {r['executor_scratch'] / MB:.1f} MB; weights {r['weights'] / MB:.1f} MB "
              f"({r['weights_same_shape_as_another'] / MB:.1f} MB the shape of another: tied if the module "
              f"ties them); inputs+outputs {r['inputs_outputs'] / MB:.1f} MB; tuning scratch "
              f"{r['tuning_scratch_before'] / MB:.1f} -> {r['tuning_scratch_now'] / MB:.1f} MB")


if __name__ == "__main__":
    main()
