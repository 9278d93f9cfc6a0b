"""Device memory of a plan or bundle by kind, measured on the CPU (nothing touches a device).

`python -m benchmarks anatomy plan-memory <dir>... [--json FILE]`: for each bundle directory
(manifest.json) or saved plan (plan.json) it reports, in MB: the plan's per-call buffers with one storage
each and after plan/memory.py assign_memory (the executor's default), the
executor's read-only copies of aliased bindings and bounced in-buffer copies, the weights (as stored;
external weights as the manifest names them, with bit-identical ties only knowable from the module), the
inputs and outputs of a call, and the largest scratch the load-time tuning of one variant allocates
(before: every bound buffer's whole extent; now: windows of the graph inputs only, plan buffers and
weights are bound in place).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from torch_webgpu.plan.format import LowIROp, Plan
from torch_webgpu.plan.memory import assign_memory, check_assignment
from torch_webgpu.runtime.buffers import align_up, bucket_size

from ..json_rows import Option, rows_main

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


def capacity(sizes: Any, exact: bool = False) -> int:
    """Bytes the runtime pool counts for allocations of `sizes` (each rounded up to its bucket, or to 256
    for exact ones, as compiled plans now allocate): what torch_webgpu.device.max_memory_allocated, the
    benchmarks' device-memory figure, adds up."""
    if exact:
        return sum(align_up(max(int(n), 4), 256) for n in sizes)
    return sum(bucket_size(max(int(n), 4)) for n in sizes)


def executor_scratch(plan: Plan) -> tuple[int, int]:
    """Bytes of the executor's scratch buffers — read-only copies of a buffer a dispatch also writes, and
    the bounce of a copy within one buffer (plan/buffers.py, PlanBuffers.scratch): (one per node, pooled
    now)."""
    per_node: list[int] = []
    pooled: dict[int, int] = {}   # binding slot -> largest copy (the pool holds about that much)
    for node in plan.main:
        a = node.args
        needs: list[tuple[int, int]] = []
        if node.op is LowIROp.COPY and a["source"] == a["buffer"]:
            needs.append((0, -(-int(a["size"]) // 4) * 4))
        elif node.op is LowIROp.DISPATCH:
            spec = plan.executables[a["entry_point"]]
            read_only = {h for w, h in spec.binding_map.items() if w in spec.read_only}
            written = {a["bindings"][h][0] for h in spec.binding_map.values() if h not in read_only}
            needs += [(w, -(-int(a["bindings"][h][2]) // 4) * 4) for w, h in spec.binding_map.items()
                      if h in read_only and a["bindings"][h][0] in written]
        for slot, size in needs:
            per_node.append(size)
            pooled[slot] = max(pooled.get(slot, 0), size)
    return capacity(per_node), capacity(pooled.values(), exact=True)


def _packed_nbytes(spec: dict) -> int:
    """Bytes of an external weight as the device holds it (quant_matmul.pack_constant)."""
    n = _nbytes(spec["shape"], spec["dtype"])
    how = spec.get("pack", {}).get("pack")
    if how == "i4":
        return n // 2
    if how == "bytes":
        return -(-n // 4) * 4
    return n


def tuning_scratch(plan: Plan) -> tuple[int, int]:
    """The largest scratch one variant's timing allocates: (before, now) — see plan/tuning.py."""
    graph_inputs = {f"in{k}" for k in range(len(plan.inputs))}
    before = now = 0
    for node in plan.main:
        for variant in node.args.get("tune", {}).get("variants", ()):
            whole: dict[str, int] = {}
            window: dict[str, int] = {}
            bindings = [b for step in (variant, *variant.get("then", ())) for b in step["bindings"]]
            for name, offset, size in bindings:
                whole[name] = max(whole.get(name, 0), int(offset) + int(size))
                if name in graph_inputs:   # plan buffers and weights are bound in place now
                    window[name] = max(window.get(name, 0), int(size))
            before = max(before, sum(whole.values()))
            now = max(now, sum(window.values()))
    return before, now


def report(directory: Path) -> dict[str, Any]:
    """The memory figures of one directory (bytes)."""
    plan, manifest = load_any(directory)
    assigned, memory = assign_memory(plan)
    check_assignment(plan, assigned)
    weights = [np.asarray(v).nbytes for v in plan.constants.values()]
    duplicates = []   # large weights of one shape and dtype (an LM head tied to its embedding)
    if manifest is not None and "external_weights" in manifest:
        specs = list(manifest["external_weights"]["weights"].values())
        weights += [_packed_nbytes(s) for s in specs]
        seen: set[tuple] = set()
        for s in specs:
            key = (tuple(s["shape"]), s["dtype"], json.dumps(s.get("pack")))
            if key in seen and _packed_nbytes(s) >= 64 << 20:
                duplicates.append(_packed_nbytes(s))
            seen.add(key)
    io = capacity(_nbytes(t.shape, t.device_dtype) for t in (*plan.inputs, *plan.outputs)
                  if None not in t.shape)
    buffers_before = capacity(s for s in plan.buffers.values() if isinstance(s, int))
    buffers_after = capacity((s for s in assigned.buffers.values() if isinstance(s, int)), exact=True)
    tied_before = capacity(weights) - capacity(duplicates)
    tied_now = capacity(weights, exact=True) - capacity(duplicates, exact=True)
    tune_before, tune_now = tuning_scratch(plan)
    scratch_before, scratch_now = executor_scratch(assigned)
    return {"name": directory.name, "buffers_before": buffers_before, "buffers_after": buffers_after,
            "buffers": len(plan.buffers), "shared": memory.shared, "slots": len(memory.slots),
            "kept": len(memory.kept), "executor_scratch_before": scratch_before,
            "executor_scratch_now": scratch_now, "weights": capacity(weights),
            "weights_if_tied_before": tied_before, "weights_if_tied_now": tied_now, "inputs_outputs": io,
            "tuning_scratch_before": tune_before, "tuning_scratch_now": tune_now,
            # the benchmark's figure (tied weights; tuning no longer adds: it ran before the weights)
            "total_before": tied_before + buffers_before + scratch_before + io,
            "total_now": tied_now + buffers_after + scratch_now + io + tune_now}


def run(dirs: list[Path]) -> list[dict]:
    """The figures of each directory (bytes), each also printed as MB lines."""
    rows = [report(d) for d in dirs]
    for r in rows:
        mb = {k: v / MB for k, v in r.items() if isinstance(v, int)}
        print(f"{r['name']} (MB as the runtime pool counts them, buckets included):\n"
              f"  plan buffers {mb['buffers_before']:.3f} -> {mb['buffers_after']:.3f} ({r['shared']} of "
              f"{r['buffers']} buffers in {r['slots']} slots, {r['kept']} kept)\n"
              f"  executor scratch {mb['executor_scratch_before']:.3f} -> {mb['executor_scratch_now']:.3f}; "
              f"tuning scratch {mb['tuning_scratch_before']:.3f} -> {mb['tuning_scratch_now']:.3f}\n"
              f"  weights {mb['weights']:.3f} as stored; with the large weights of one shape tied "
              f"{mb['weights_if_tied_before']:.3f} -> {mb['weights_if_tied_now']:.3f} (exact-size buffers); "
              f"inputs+outputs {mb['inputs_outputs']:.3f}\n"
              f"  total (tied) {mb['total_before']:.3f} -> {mb['total_now']:.3f}")
    return rows


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Print MB figures per directory (and with --json FILE write them, in bytes)."""
    rows_main(run, __doc__, argv, prog, cuda_context=False,
              dirs=Option(None, "bundle directories (manifest.json) or saved plans (plan.json)", Path,
                          positional=True, nargs="+"))
