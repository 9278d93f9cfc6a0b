"""The harness checks each GPU figure against torch CPU before timing it, and keeps to a time budget."""

import time

import torch

from benchmarks.backends import TorchBackend, available_torch_backends
from benchmarks.harness import Settings, dispatch_kind, time_figure


class _Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8))

    def forward(self, x):
        return x * self.w


def _eager():
    [backend] = available_torch_backends(["webgpu-eager"])
    return backend


def _inputs(backend):
    torch.manual_seed(0)
    return _Scale().eval().to(backend.device), (torch.randn(4, 8).to(backend.device),)


def test_a_matching_figure_is_timed():
    settings = Settings(smoke=True)
    backend = _eager()
    module, args = _inputs(backend)
    with torch.no_grad():
        times = time_figure(settings, backend, "micro", "scale", module, "scale", args)
    assert times and settings.failures == []


def test_a_wrong_output_is_not_timed():
    eager = _eager()
    wrong = TorchBackend("webgpu-eager", "webgpu", lambda fn, key="": (lambda *a: fn(*a) + 1.0),
                         eager.synchronize)
    settings = Settings(smoke=True)
    module, args = _inputs(wrong)
    with torch.no_grad():
        assert time_figure(settings, wrong, "micro", "scale", module, "scale", args) is None
    [failure] = settings.failures
    assert "differs from torch CPU" in failure.error and failure.name == "scale"


def test_figures_past_the_budget_are_listed_as_skipped():
    settings = Settings(smoke=True, deadline=time.monotonic() - 1)
    backend = _eager()
    module, args = _inputs(backend)
    assert time_figure(settings, backend, "micro", "scale", module, "scale", args) is None
    assert [f.error for f in settings.failures] == ["skipped: time budget spent"]


def test_only_measures_the_matching_figures():
    settings = Settings(smoke=True, only="f16 decode")
    assert settings.wants("Llama-3.2-1B f16 decode (KV cache 2048)") and not settings.wants("scale")
    backend = _eager()
    module, args = _inputs(backend)
    assert time_figure(settings, backend, "micro", "scale", module, "scale", args) is None
    assert settings.failures == []   # left out on purpose, not a failure


def test_dispatch_kinds():
    assert dispatch_kind("matmul.f32.tile64x64.r4x4") == "library"
    assert dispatch_kind("reduce.sum.f32.pass2") == "library"
    assert dispatch_kind("lib_matmul_f32_tile64x64_r4x4_0123456789") == "library"   # in a compiled plan
    assert dispatch_kind("main$async_dispatch_48_conv_512x7x7x512x3x3_f32") == "iree"
    assert dispatch_kind("torch-webgpu-widen-int32") == "other"


class _Sum(torch.nn.Module):
    def forward(self, a):
        return a.sum()


def test_a_full_reduction_is_checked_against_the_magnitudes_summed():
    settings = Settings(smoke=True)
    backend = _eager()
    x = (torch.randn(1 << 16) + 0.5).to(backend.device)
    assert time_figure(settings, backend, "micro", "sum", _Sum(), "sum", (x,)) is not None
    assert settings.failures == []


def test_sync_spin_rows_per_setting():
    """benchmarks.sync_spin times each spin setting of each case it is asked for (tiny MLP here)."""
    from benchmarks import sync_spin

    rows = sync_spin.run([0, 500], rounds=2, reps=2, bundles=None, only="^MLP$")
    assert [(r["case"], r["backend"], r["spin_us"]) for r in rows] == [("MLP", "webgpu-eager", 0),
                                                                       ("MLP", "webgpu-eager", 500)]
    assert all(len(r["rounds"]) == 2 and r["ms_per_call"] > 0 for r in rows)


def test_matmul_anatomy_times_each_part():
    """benchmarks.matmul_anatomy's cut-down copies of a tiled f32 kernel all compile and run (lavapipe
    has no subgroup matrices: the tensor-core variant is reported as not offered)."""
    from benchmarks import matmul_anatomy

    rows = matmul_anatomy.run(128, f16="sgmat.w2x2.f4x4.k32",
                              f32="tile64x64.r4x4.k16.l4.v4,tile128x128.r8x8.k8.l4.pl.v4", reps=1)
    parts = ["full", "no staging", "no staging or barriers", "no multiplies", "global loads only",
             "tile stores only"]
    for variant in ("tile64x64.r4x4.k16.l4.v4", "tile128x128.r8x8.k8.l4.pl.v4"):   # plain and pipelined
        f32 = [r for r in rows if r["dtype"] == "f32" and r["variant"] == variant]
        assert sorted(r["part"] for r in f32) == sorted(parts)
        assert all(r["us"] > 0 and "error" not in r for r in f32)


def test_matmul_library_top_times_the_first_variants_of_each_case():
    """matmul_library's `top` (the harness's LIBRARY_TOP): only the first N variants of each case in the
    library's order are checked and timed."""
    import torch_webgpu  # noqa: F401
    from benchmarks import matmul_library
    from torch_webgpu.kernels import DeviceCaps
    from torch_webgpu.kernels.matmul import Layout, MatmulProblem, variants
    from torch_webgpu.runtime import get_runtime

    # the CI-sized cases (smoke: the first two variants of each), cut to one by `top`
    rows = matmul_library.figures(smoke=True, reps=1, dtypes=("f32",), verbose=False, cases="^64", top=1)
    timed = [r["variant"] for r in rows if "tflops" in r and r["variant"] != "torch-cuda"]
    caps = DeviceCaps.from_runtime(get_runtime())
    square = Layout(0, 0, 64, 1)
    p = MatmulProblem(1, 64, 64, 64, square, square, square, dtype="f32")
    assert timed == variants(p, caps)[:1]
