"""Hand-written low-IR plans that use every op the executors know (init fill, copies within one buffer,
zero and non-zero fills, a read-only binding aliasing a written one, push constants, a grid folded past
the per-dimension limit, an input returned as an output, host expressions of dynamic shapes): the page
gives what the Python executor gives, and both give what numpy says. The conformance test of the plan
contract (torch_webgpu/plan/__init__.py) for its two implementations, torch_webgpu.plan and
torch-webgpu.js."""

import struct

import numpy as np
import pytest

import torch_webgpu
from torch_webgpu.bundle.format import BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, write_bundle
from torch_webgpu.plan import lowering
from torch_webgpu.plan.format import Plan

AXPY = """
struct P { alpha: f32, n: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < p.n) { o[g.x] = p.alpha * a[g.x] + y[g.x]; }
}
"""
# Reads its workgroup id, so it declares the fold override (torch_webgpu/plan/grid.py's contract).
IOTA = """
override torch_webgpu_fold_x: u32 = 0u;
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
  let id = w.x + w.y * nw.x;
  if (torch_webgpu_fold_x != 0u && id >= torch_webgpu_fold_x) { return; }
  if (id < 64u) { o[id] = f32(id) + select(0.0, 1000.0, nw.y > 1u); }
}
"""
ALPHA = 0.5
ALPHA_BITS = struct.unpack("<I", struct.pack("<f", ALPHA))[0]


def _spec(shape, dtype="float32"):
    return {"shape": shape, "dtype": dtype, "device_dtype": dtype}


def _executables():
    return {
        "axpy": {"entry_point": "main", "wgsl_file": "axpy.wgsl", "workgroup_size": [64, 1, 1],
                 "binding_map": {"1": 0, "2": 1, "3": 2}, "push_constant_binding": 0,
                 "push_constant_count": 2, "read_only": [1, 2]},
        "iota": {"entry_point": "main", "wgsl_file": "iota.wgsl", "workgroup_size": [1, 1, 1],
                 "binding_map": {"0": 0}, "push_constant_binding": None, "push_constant_count": 0,
                 "read_only": []},
    }


def every_op_plan():
    """x: f32[64] -> (0.5 * x + 1, x[:32] ++ zeros(32), arange(64) + 1000, x)."""
    return {
        "format": 1, "inputs": [_spec([64])],
        "outputs": [_spec([64]), _spec([32 + 32]), _spec([64]), _spec([64])],
        "output_map": [0, 1, 2, 3],
        "buffers": {"g0": 256, "g1": 256, "t0": 512},
        "init": [{"op": "allocate", "buffer": "g0"},
                 {"op": "fill", "buffer": "g0", "offset": 0, "size": 256, "pattern": 0x3F800000}],   # ones
        "main": [
            {"op": "allocate", "buffer": "t0"},
            {"op": "copy", "source": "in0", "source_offset": 0, "buffer": "t0", "offset": 0, "size": 256},
            {"op": "fill", "buffer": "t0", "offset": 256, "size": 256, "pattern": 0x7FC00000},   # NaN
            {"op": "copy", "source": "t0", "source_offset": 0, "buffer": "t0", "offset": 256, "size": 128},
            {"op": "fill", "buffer": "t0", "offset": 384, "size": 128, "pattern": 0},
            {"op": "barrier"},
            # a (read-only) and o (written) are the same bytes of t0: the executors read a copy.
            {"op": "dispatch", "entry_point": "axpy", "workgroups": [1, 1, 1], "constants": [ALPHA_BITS, 64],
             "bindings": [["t0", 0, 256], ["g0", 0, 256], ["t0", 0, 256]]},
            # 70,000 workgroups along x: past the 65,535 per dimension, folded into (35000, 2, 1).
            {"op": "dispatch", "entry_point": "iota", "workgroups": [70000, 1, 1], "constants": [],
             "bindings": [["g1", 0, 256]]},
            {"op": "output", "index": 0, "buffer": "t0", "offset": 0, "size": 256},
            {"op": "output", "index": 1, "buffer": "t0", "offset": 256, "size": 256},
            {"op": "output", "index": 2, "buffer": "g1", "offset": 0, "size": 256},
            {"op": "output", "index": 3, "input": 0},
            {"op": "free", "buffer": "t0"},
        ],
        "executables": _executables(), "constant_names": [], "num_constant_inputs": 0, "meta": {},
    }


def dynamic_plan():
    """x: f32[n] -> 0.5 * x + x, every size an expression of n (a plan of torch.compile(dynamic=True))."""
    n = ["dim", 0, 0]
    nbytes = ["muli", n, 4]
    return {
        "format": 1, "inputs": [_spec([None])], "outputs": [_spec([n])], "output_map": [0],
        "buffers": {"t0": ["align", nbytes, 256]}, "init": [],
        "main": [
            {"op": "dispatch", "entry_point": "axpy", "workgroups": [["ceildivsi", n, 64], 1, 1],
             "constants": [ALPHA_BITS, n],
             "bindings": [["in0", 0, nbytes], ["in0", 0, nbytes], ["t0", 0, nbytes]]},
            {"op": "output", "index": 0, "buffer": "t0", "offset": 0, "size": nbytes},
        ],
        "executables": _executables(), "constant_names": [], "num_constant_inputs": 0, "meta": {},
    }


def write_plan(doc, path):
    """A bundle of a hand-written plan."""
    manifest = {
        "format": BUNDLE_FORMAT, "format_version": BUNDLE_FORMAT_VERSION,
        "source": "tests/web/test_low_ir.py", "target": {"name": "webgpu-core"},
        "inputs": [{"name": f"x{k}", "shape": s["shape"], "dtype": s["dtype"]}
                   for k, s in enumerate(doc["inputs"])],
        "outputs": [{"name": f"output{k}", "shape": [d if isinstance(d, int) else None for d in s["shape"]],
                     "dtype": s["dtype"]} for k, s in enumerate(doc["outputs"])],
        "output_structure": "sequence", "requires": {"features": [], "limits": {}},
        "dispatches": sum(n["op"] == "dispatch" for n in doc["main"]), "plan": doc,
    }
    return write_bundle(path, manifest, {"axpy.wgsl": AXPY.encode(), "iota.wgsl": IOTA.encode()})


def test_every_op_matches_python_and_numpy(run_in_page, web_root):
    path = write_plan(every_op_plan(), web_root / "every-op.bundle")
    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    expected = [ALPHA * x + 1, np.concatenate([x[:32], np.zeros(32, np.float32)]),
                np.arange(64, dtype=np.float32) + 1000, x]
    python = torch_webgpu.load(path)(x)
    result = run_in_page(path, [x])
    assert "error" not in result, result
    page = [np.asarray(o["data"], np.float32).reshape(o["shape"]) for o in result["outputs"]]
    for k, want in enumerate(expected):
        np.testing.assert_allclose(python[k], want, atol=1e-6, err_msg=f"Python executor, output {k}")
        np.testing.assert_allclose(page[k], want, atol=1e-6, err_msg=f"torch-webgpu.js, output {k}")


DYNAMIC_JS = """
const [url, xs, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
import("/torch-webgpu.js").then(async (T) => {
  const model = await T.load(url);
  const out = [];
  for (const x of xs) {
    const [y] = await model.run([{data: new Float32Array(x), shape: [x.length]}]);
    out.push({data: Array.from(y.data), shape: y.shape});
  }
  let error = null;
  try { await model.run([new Float32Array(3)]); } catch (e) { error = e.message; }
  model.release(); model.device.destroy();
  done({out, error});
}).catch((e) => done({error: String(e), out: null}));
"""


@pytest.mark.parametrize("sizes", [(10, 100, 10)])
def test_dynamic_shapes_match_the_python_executor(page, web_root, sizes):
    doc = dynamic_plan()
    path = write_plan(doc, web_root / "dynamic.bundle")
    plan = Plan.from_doc(doc, path)
    compiled = lowering(plan)
    xs = [np.random.default_rng(n).standard_normal(n).astype(np.float32) for n in sizes]
    url = page.current_url.replace("blank.html", f"{path.name}/")
    result = page.execute_async_script(DYNAMIC_JS, url, [x.tolist() for x in xs])
    assert result["out"] is not None, result
    assert "pass {data, shape}" in result["error"]   # a flat array cannot say which n it is
    for x, got in zip(xs, result["out"], strict=True):
        (want,) = compiled(x)
        np.testing.assert_allclose(want, ALPHA * x + x, atol=1e-6)
        assert got["shape"] == [len(x)]
        np.testing.assert_allclose(np.asarray(got["data"], np.float32), want, atol=1e-6)
