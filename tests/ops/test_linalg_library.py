"""Eager matmuls through the kernel library: f16 storage, int32 kept exact, and operands past the
binding limit split into several launches."""

from __future__ import annotations

import json

import pytest
import torch

from torch_webgpu.kernels.matmul import Layout, MatmulProblem, split_for_binding
from torch_webgpu.runtime import get_runtime


def test_f16_mm_and_linear_in_f16_storage(webgpu):
    if "shader-f16" not in get_runtime().info.features:
        pytest.skip("adapter has no shader-f16")
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(37, 29, generator=gen).half(), torch.randn(29, 41, generator=gen).half()
    torch.testing.assert_close((a.to(webgpu) @ b.to(webgpu)).cpu(), a @ b, atol=2e-2, rtol=2e-2)
    x, w, bias = torch.randn(2, 3, 29, generator=gen).half(), torch.randn(8, 29, generator=gen).half(), \
        torch.randn(8, generator=gen).half()
    got = torch.nn.functional.linear(x.to(webgpu), w.to(webgpu), bias.to(webgpu)).cpu()
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w, bias), atol=2e-2, rtol=2e-2)


def test_int32_products_stay_exact(webgpu):
    a = torch.full((3, 5), 46341, dtype=torch.int32)  # products wrap around 2**31 like torch
    b = torch.full((5, 2), 46341, dtype=torch.int32)
    assert torch.equal((a.to(webgpu) @ b.to(webgpu)).cpu(), a @ b)


def test_operands_past_the_binding_limit_are_split(webgpu, monkeypatch):
    rt = get_runtime()
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(2, 70, 40, generator=gen), torch.randn(2, 40, 66, generator=gen)
    c = torch.randn(66, generator=gen)
    # 3000 floats: one batch of A and of B fits, the whole of A and each batch of out do not
    monkeypatch.setattr(rt, "max_storage_binding", 12000)
    before = rt.dispatches
    got = torch.baddbmm(c.to(webgpu), a.to(webgpu), b.to(webgpu), beta=0.5).cpu()
    assert rt.dispatches - before >= 4  # 2 batches x 2 row blocks
    torch.testing.assert_close(got, torch.baddbmm(c, a, b, beta=0.5))


def test_split_windows_cover_each_piece():
    p = MatmulProblem(3, 100, 90, 20, Layout(8, 2000, 20, 1), Layout(0, 1800, 90, 1), Layout(0, 9000, 90, 1))
    pieces = split_for_binding(p, 4, 8192, align=16, buffer_bytes={"a": 24032, "b": 21600, "out": 108000})
    assert len(pieces) > 3
    assert sum(q.problem.batch * q.problem.m * q.problem.n for q in pieces) == 3 * 100 * 90
    for piece in pieces:
        for role, (start, nbytes) in piece.windows.items():
            assert start % 16 == 0 and nbytes <= 8192 and getattr(piece.problem, role).offset >= 0
    with pytest.raises(ValueError, match="binding limit"):  # one K-row larger than a binding
        split_for_binding(MatmulProblem(1, 1, 1, 5000, Layout(0, 0, 5000, 1), Layout(0, 0, 1, 1),
                                        Layout(0, 0, 1, 1)), 4, 4096)


@pytest.mark.parametrize("linear", [True, False], ids=["linear", "mm"])
def test_a_cached_split_k_winner_runs_with_its_combine(webgpu, monkeypatch, tmp_path, linear):
    """The autotuner's cached choice of a split-K variant: eager F.linear / torch.mm run its slices and
    the combine pass (a scratch buffer of partial sums between them) and match torch."""
    import torch_webgpu.kernels.matmul as km
    import torch_webgpu.ops.library_launch as library
    from torch_webgpu.kernels import autotune
    from torch_webgpu.ops.library_launch import device_caps

    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", str(tmp_path))
    autotune.forget()
    gen = torch.Generator().manual_seed(2)
    m, n, k = 197, 72, 520
    x, bias = torch.randn(m, k, generator=gen), torch.randn(n, generator=gen)
    w = torch.randn(n, k, generator=gen) if linear else torch.randn(k, n, generator=gen)
    b_lay = Layout(0, 0, 1, k) if linear else Layout(0, 0, n, 1)
    p = MatmulProblem(1, m, n, k, Layout(0, 0, k, 1), b_lay, Layout(0, 0, n, 1))
    variant = "tile32x64.r2x4.k32.s4.v4"
    assert variant in km.variants(p, device_caps())
    key = autotune.tuning_key("matmul", p, device_caps())
    (tmp_path / "autotune.json").write_text(json.dumps({key: {"variant": variant, "seconds": {}}}))
    launched = []
    record = library.record

    def spy(launch, *args, **kwargs):
        launched.append(launch.name)
        record(launch, *args, **kwargs)

    monkeypatch.setattr(library, "record", spy)   # run_family's: every eager library dispatch
    try:
        if linear:
            got = torch.nn.functional.linear(x.to(webgpu), w.to(webgpu), bias.to(webgpu)).cpu()
            expected = torch.nn.functional.linear(x, w, bias)
        else:
            got, expected = (x.to(webgpu) @ w.to(webgpu)).cpu(), x @ w
    finally:
        autotune.forget()
    assert launched == [f"matmul.f32.{variant}", "matmul.f32.splitk4.combine"]
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
