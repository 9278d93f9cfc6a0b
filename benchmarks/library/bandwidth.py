"""The kernel library's bandwidth-bound kernels (row ops and full reductions) on the raw runtime, every
variant checked against torch before it is timed with GPU timestamps, beside two ceilings of what a
plain WGSL kernel reaches through Dawn on this GPU (a vec4 read and a vec4 copy), then torch CUDA's
figures (after every WebGPU row: no CUDA context exists before those).

`python -m benchmarks library bandwidth [--json FILE] [--smoke]`: GB/s per (case, variant).
"""

from __future__ import annotations

import json
import statistics

import numpy as np

from ..json_rows import rows_main
from .matmul import _import_library, cuda_event_seconds

READ_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let stride = n.x * 256u;
  var s = vec4<f32>(0.0);
  var i = g.x;
  let count = arrayLength(&x);
  for (; i + 3u * stride < count; i += 4u * stride) {
    let a = x[i]; let b = x[i + stride]; let c = x[i + 2u * stride]; let d = x[i + 3u * stride];
    s += (a + b) + (c + d);
  }
  for (; i < count; i += stride) { s += x[i]; }
  o[g.x] = dot(s, vec4<f32>(1.0));
}
"""
COPY_WGSL = """
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> o: array<vec4<f32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = g.x + g.y * n.x * 256u;
  if (i < arrayLength(&x)) { o[i] = x[i]; }
}
"""


def _gpu_seconds(rt, record, reps: int) -> float:
    """Median GPU seconds of one `record()` (its dispatches summed), from timestamps."""
    record()
    rt.synchronize()
    per_call = []
    for _ in range(reps):
        with rt.profile() as timings:
            record()
        per_call.append(sum(t.seconds for t in timings))
    return statistics.median(per_call)


def _torch_cuda(op: str, x: np.ndarray, reps: int) -> float | None:
    """Median seconds of torch CUDA's `op` ("softmax", "layer_norm", "rms_norm", "sum") of `x`."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    F, n = torch.nn.functional, x.shape[-1]
    fn = {"softmax": lambda t: t.softmax(-1), "layer_norm": lambda t: F.layer_norm(t, (n,)),
          "rms_norm": lambda t: F.rms_norm(t, (n,), eps=1e-5), "sum": lambda t: t.sum()}[op]
    t = torch.from_numpy(x).cuda()
    return cuda_event_seconds(lambda: fn(t), reps)


def figures(smoke: bool = False, reps: int = 10) -> list[dict]:
    """One row per (case, variant): GB/s and the check's max error; torch CUDA's rows last."""
    import importlib

    runtime, kernels, _ = _import_library()
    rows_k = importlib.import_module("torch_webgpu.kernels.rows")
    reduce_k = importlib.import_module("torch_webgpu.kernels.reduce")
    rt = runtime.get_runtime()
    caps = kernels.DeviceCaps.from_runtime(rt)
    out: list[dict] = []
    rng = np.random.default_rng(0)
    R, N = (64, 1024) if smoke else (8192, 4096)
    total = (1 << 20) if smoke else (128 << 20)   # elements of the full reduction (512 MiB of f32)

    def emit(row):
        print(json.dumps(row), flush=True)
        out.append(row)
    cuda_cases = []   # (case, op, host array, bytes moved): torch CUDA's pass, after every WebGPU row

    x = rng.standard_normal((R, N), dtype=np.float32)
    xb, ob = rt.allocate(x.nbytes), rt.allocate(x.nbytes)
    rt.upload(xb, x)
    def softmax(a):
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    ref = {"softmax": softmax,
           "layer_norm": lambda a: (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + 1e-5),
           "rms_norm": lambda a: a / np.sqrt((a * a).mean(1, keepdims=True) + 1e-5)}
    for op in ("softmax", "layer_norm", "rms_norm"):
        p = rows_k.RowProblem(op, "f32", R, N)
        check = min(R, 256)
        want = ref[op](x[:check].astype(np.float64))
        for variant in rows_k.variants(p, caps):
            row = {"case": f"{op} {R}x{N}", "variant": variant}
            try:
                plan = rows_k.plan_rows(p, caps, variant)
                ops = {"x": xb, "out": ob}
                rows_k.record_rows(plan, ops, rt)
                got = rt.download_array(ob, np.float32, check * N).reshape(check, N)
                row["max_error"] = float(np.abs(got - want).max())
                if not row["max_error"] < 1e-3:
                    row["error"] = "wrong result"
                else:
                    s = _gpu_seconds(rt, lambda plan=plan, ops=ops: rows_k.record_rows(plan, ops, rt), reps)
                    row.update(us=s * 1e6, gbps=2 * x.nbytes / s / 1e9)
            except Exception as exc:  # one variant failing must not stop the others
                row["error"] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
            emit(row)
        cuda_cases.append((f"{op} {R}x{N}", op, x, 2 * x.nbytes))
    rt.free(xb)
    rt.free(ob)

    y = rng.standard_normal(total, dtype=np.float32)
    yb, sb = rt.allocate(y.nbytes), rt.allocate(1 << 16)
    rt.upload(yb, y)
    p = reduce_k.ReduceProblem("sum", "f32", 1, total, x_buffer_bytes=y.nbytes)
    want = float(y.astype(np.float64).sum())
    for variant in reduce_k.variants(p, caps):
        row = {"case": f"sum {y.nbytes >> 20} MiB", "variant": variant}
        try:
            plan = reduce_k.plan_reduce(p, caps, variant)
            scratch = {r: rt.allocate(max(4, n)) for r, n in plan.scratch.items()}
            ops = {"x": yb, "out": sb, **scratch}
            reduce_k.record_plan(plan, ops, rt)
            got = float(rt.download_array(sb, np.float32, 1)[0])
            row["rel_error"] = abs(got - want) / max(1.0, abs(want))
            s = _gpu_seconds(rt, lambda plan=plan, ops=ops: reduce_k.record_plan(plan, ops, rt), reps)
            row.update(us=s * 1e6, gbps=y.nbytes / s / 1e9, dispatches=len(plan.steps))
            for b in scratch.values():
                rt.free(b)
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
        emit(row)
    cuda_cases.append((f"sum {y.nbytes >> 20} MiB", "sum", y, y.nbytes))
    # ceilings: a plain vec4 read (4 loads in flight per thread) and copy
    limit = caps.limit("max-compute-workgroups-per-dimension", 65535)
    read = rt.kernel(READ_WGSL, label="ceiling-read")
    for groups in (1056, 4224, 16896):
        ob2 = rt.allocate(groups * 256 * 4)
        s = _gpu_seconds(rt, lambda g=groups, o=ob2: rt.dispatch(read, [yb, o], (g, 1, 1)), reps)
        emit({"case": f"sum {y.nbytes >> 20} MiB", "variant": f"ceiling read vec4 x4, {groups} groups",
              "us": s * 1e6, "gbps": y.nbytes / s / 1e9})
        rt.free(ob2)
    cb = rt.allocate(y.nbytes)
    copy = rt.kernel(COPY_WGSL, label="ceiling-copy")
    groups = -(-total // 4 // 256)
    grid = (min(groups, limit), -(-groups // limit), 1)
    s = _gpu_seconds(rt, lambda: rt.dispatch(copy, [yb, cb], grid), reps)
    emit({"case": f"copy {y.nbytes >> 20} MiB", "variant": "ceiling copy vec4", "us": s * 1e6,
          "gbps": 2 * y.nbytes / s / 1e9})
    for b in (yb, sb, cb):
        rt.free(b)
    for case, op, array, moved in cuda_cases:
        cuda = _torch_cuda(op, array, reps)
        if cuda:
            emit({"case": case, "variant": "torch-cuda", "us": cuda * 1e6, "gbps": moved / cuda / 1e9})
    return out


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line."""
    rows_main(figures, __doc__, argv, prog, smoke=False, reps=10)
