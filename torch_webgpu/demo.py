"""`./dev.sh demo`: show the adapter and run a small model on it, checked against a CPU reference."""

from __future__ import annotations

import time

import numpy as np

from torch_webgpu.runtime import get_runtime

# y = relu(x @ w + b), one thread per output element.
LINEAR_RELU = """
struct Dims { m: u32, k: u32, n: u32, pad: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> d: Dims;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let row = g.y;
  let col = g.x;
  if (row >= d.m || col >= d.n) { return; }
  var acc = b[col];
  for (var i = 0u; i < d.k; i++) { acc += x[row * d.k + i] * w[i * d.n + col]; }
  y[row * d.n + col] = max(acc, 0.0);
}
"""


def run_runtime_mlp(batch: int = 64, width: int = 256) -> None:
    """A two-layer MLP written directly against the runtime (WGSL), vs numpy."""
    rt = get_runtime()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, width), dtype=np.float32)
    layers = [((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
               rng.standard_normal(width, dtype=np.float32) * 0.1) for _ in range(2)]
    kernel = rt.kernel(LINEAR_RELU, label="linear_relu")
    dims = rt.constant(np.array([batch, width, width, 0], dtype=np.uint32).tobytes())

    def upload(a: np.ndarray) -> int:
        buf = rt.allocate(a.nbytes)
        rt.upload(buf, a)
        return buf

    bufs = [(upload(w), upload(b)) for w, b in layers]
    act = [upload(x), rt.allocate(x.nbytes), rt.allocate(x.nbytes)]

    def forward() -> np.ndarray:
        for i, (w, b) in enumerate(bufs):
            rt.dispatch(kernel, [act[i], w, b, act[i + 1], dims], (width // 8, batch // 8))
        return rt.download_array(act[-1], np.float32, batch * width).reshape(batch, width)

    forward()  # warm-up: pipeline creation
    start = time.perf_counter()
    out = forward()
    elapsed = time.perf_counter() - start
    ref = x
    for w, b in layers:
        ref = np.maximum(ref @ w + b, 0.0)
    err = float(np.abs(out - ref).max())
    ok = np.allclose(out, ref, atol=1e-4, rtol=1e-4)
    print(f"runtime MLP {batch}x{width} (2 dispatches, 1 submit): max |diff| vs CPU = {err:.2e} "
          f"-> {'MATCH' if ok else 'MISMATCH'}; {elapsed * 1e3:.2f} ms")
    if not ok:
        raise SystemExit(1)


def run_eager_device() -> None:
    """Eager tensors on device="webgpu": the seed examples, then a small MLP, checked against CPU."""
    import torch
    from torch.testing import assert_close

    import torch_webgpu

    torch.manual_seed(0)
    print(torch.tensor([1, 2, 3], device="webgpu"))
    print(torch.randn(3, 4, device="webgpu"))
    print(torch.zeros(10, device="webgpu"), torch.ones(5, 5, device="webgpu").sum().item())
    x = torch.randn(64, 32)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    expected = model(x)
    torch_webgpu.reset_fallback_stats()
    model = model.to("webgpu")
    xw = x.to("webgpu")
    model(xw)  # warm-up: kernels compile once
    torch.webgpu.synchronize()
    start = time.perf_counter()
    got = model(xw).to("cpu")
    elapsed = time.perf_counter() - start
    assert_close(got, expected, rtol=1e-4, atol=1e-4)
    print(f"eager MLP on {torch.webgpu.get_device_name()}: matches CPU (atol 1e-4); {elapsed * 1e3:.2f} ms; "
          f"ops that fell back to the CPU: {torch_webgpu.fallback_stats() or 'none'}")


def run_compiled() -> None:
    """torch.compile through FX → torch-mlir → IREE → WGSL: a small transformer-style block vs CPU."""
    import torch
    from torch.testing import assert_close

    from torch_webgpu.compiler.webgpu_compiler import webgpu_backend

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
                                torch.nn.Linear(256, 64), torch.nn.Softmax(-1)).eval()
    x = torch.randn(32, 64)
    expected = model(x)
    compiled = torch.compile(model.to("webgpu"), backend=webgpu_backend)
    start = time.perf_counter()
    got = compiled(x.to("webgpu"))
    first = time.perf_counter() - start
    torch.webgpu.synchronize()
    start = time.perf_counter()
    got = compiled(x.to("webgpu")).to("cpu")
    steady = time.perf_counter() - start
    assert_close(got, expected, rtol=1e-4, atol=1e-4)
    print(f"torch.compile(backend=webgpu_backend) MLP+GELU+LayerNorm+softmax: matches CPU (atol 1e-4); "
          f"compile + first call {first:.2f} s, then {steady * 1e3:.2f} ms per call")


def main() -> None:
    """Print the adapter, then run each demo."""
    rt = get_runtime()
    print(rt.describe())
    run_runtime_mlp()
    run_eager_device()
    run_compiled()


if __name__ == "__main__":
    main()
