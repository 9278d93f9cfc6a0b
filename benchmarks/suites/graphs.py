"""Graph replay vs eager (issue 13): a small eager model captured with `torch.webgpu.graph` and replayed,
against the same model run eagerly, per call — synchronised (call + synchronize) and host CPU only
(this thread's CPU over a batch of calls, no waiting). torch CUDA's eager and `torch.cuda.graph` replay of
the same model are measured beside them where a GPU is present ("torch-cuda", "cuda-graph").

Before timing, the replay's output (after copying a new input into the static one) is compared with the
eager output on that input; a mismatch is a failure, not a figure. Backends: "webgpu-eager" (eager calls)
and "webgpu-graph" (g.replay()); the ratio of the two synchronised figures is issue 13's "graph replay
≥ 3x eager" target (benchmarks/report.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..harness import Measurement, Settings, summarize


class Block(nn.Module):
    """A pre-norm transformer block (causal scaled-dot-product attention, GELU MLP)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


def _mlp() -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(8):   # deep and narrow: per-op host cost dominates a synchronised eager call
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(64, 10))


# figure label -> (model builder, input shape)
CASES: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "MLP 9 linears 64 wide, batch 4": (_mlp, (4, 64)),
    "transformer block dim 64, 16 tokens": (lambda: Block(64, 4), (1, 16, 64)),
}


def _webgpu_graph(model: nn.Module, x: torch.Tensor) -> tuple[Callable[[], None], torch.Tensor]:
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        y = model(x)
    return g.replay, y


def _cuda_graph(model: nn.Module, x: torch.Tensor) -> tuple[Callable[[], None], torch.Tensor]:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # warm-up on a side stream, as torch.cuda.graphs' docs recommend
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x)
    return g.replay, y


DEVICES = {  # device -> (eager backend, graph backend, capture, synchronize)
    "webgpu": ("webgpu-eager", "webgpu-graph", _webgpu_graph, lambda: torch.webgpu.synchronize()),
    "cuda": ("torch-cuda", "cuda-graph", _cuda_graph, lambda: torch.cuda.synchronize()),
}


def _synced(call: Callable[[], Any], n: int, sync: Callable[[], None], repeats: int) -> list[float]:
    """Seconds per call (call + synchronize each time), per repeat of `n` calls."""
    values = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(n):
            call()
            sync()
        values.append((time.perf_counter() - start) / n)
    return values


def _host(call: Callable[[], Any], n: int, sync: Callable[[], None], repeats: int) -> list[float]:
    """This thread's CPU seconds per call over `n` unsynchronised calls (drained between repeats)."""
    values = []
    for _ in range(repeats):
        sync()
        start = time.thread_time()
        for _ in range(n):
            call()
        values.append((time.thread_time() - start) / n)
        sync()
    return values


def _measure(settings: Settings, label: str, device: str, n: int) -> list[Measurement]:
    eager_name, graph_name, capture, sync = DEVICES[device]
    make, shape = CASES[label]
    torch.manual_seed(0)
    model = make().eval().to(device)
    x = torch.randn(shape).to(device)
    new = torch.randn(shape).to(device)
    results = []
    with torch.no_grad():
        for _ in range(1 if settings.smoke else settings.warmup):
            model(x)
        replay, y = capture(model, x)
        x.copy_(new)
        replay()
        torch.testing.assert_close(y.cpu(), model(x).cpu(), rtol=1e-4, atol=1e-4)  # replay matches eager
        params = {"shape": list(shape), "calls_per_repeat": n}
        if device == "webgpu":
            from torch_webgpu.runtime import get_runtime

            rt = get_runtime()
            before = rt.dispatches
            replay()
            params["dispatches"] = rt.dispatches - before
        repeats = settings.effective_repeats
        for backend, call in ((eager_name, lambda: model(x)), (graph_name, replay)):
            results.append(summarize("graphs", f"graph: {label} per call (synchronised)", backend, "us",
                                     [t * 1e6 for t in _synced(call, n, sync, repeats)], params))
            results.append(summarize("graphs", f"graph: {label} host CPU per call", backend, "us",
                                     [t * 1e6 for t in _host(call, n, sync, repeats)], params))
    return results


def run(settings: Settings, backends: list[str]) -> list[Measurement]:
    """Eager vs graph replay, µs per call, for each case on webgpu (and CUDA where present)."""
    devices = []
    if "webgpu-eager" in backends:
        import torch_webgpu  # noqa: F401  (registers the device)

        devices.append("webgpu")
    if "torch-cuda" in backends and torch.cuda.is_available():
        devices.append("cuda")
    n = 5 if settings.smoke else 200
    results = []
    for label in list(CASES)[:1] if settings.smoke else CASES:
        for device in devices:
            try:
                results += _measure(settings, label, device, n)
            except Exception as exc:   # reported with its cause; the other figures still run
                settings.record_failure("graphs", f"graph: {label}", DEVICES[device][1], exc)
    return results
