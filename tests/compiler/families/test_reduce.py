"""Compiled plans run sum / mean / amax / amin (over everything or a run of adjacent dims) as the kernel
library's multi-pass reductions: several DISPATCH nodes with the partial states in a plan buffer."""

import dataclasses

import pytest
import torch

from torch_webgpu.compiler import library_plan
from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan.format import LowIROp

from .test_rows import compiled_kinds

REDUCTIONS = {
    "sum": lambda x: x.sum(), "sum_last": lambda x: x.sum(-1),
    "mean_keepdim": lambda x: x.mean(-1, keepdim=True),
    "amax_last": lambda x: x.amax(-1), "amin": lambda x: x.amin(), "mean": lambda x: x.mean(),
}


@pytest.mark.parametrize("shape", [(37,), (5, 13), (3, 7, 300)], ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_is_a_library_dispatch(name, shape):
    torch.manual_seed(0)
    kinds = compiled_kinds(REDUCTIONS[name], torch.randn(shape))
    op = name.split("_")[0]
    assert kinds and all(k.startswith(f"reduce.{op}.f32.") for k in kinds), kinds


def test_inner_dims_and_keepdim():
    # a run of middle dims (x seen as [outer, length, inner]) and several dims with keepdim
    torch.manual_seed(1)
    x = torch.randn(3, 4, 5, 6)
    kinds = compiled_kinds(lambda x: (x.sum((1, 2)), x.amax((2, 3), keepdim=True), x.mean(0)), x)
    assert len(kinds) >= 3 and all(k.startswith("reduce.") for k in kinds), kinds


def test_large_full_sum_takes_two_passes_through_a_plan_buffer():
    torch.manual_seed(2)
    kinds = compiled_kinds(lambda x: x.sum(), torch.randn(100003), tol=1e-3)
    assert len(kinds) == 2 and kinds[0].endswith(".pass1") and ".combine." in kinds[1], kinds
    assert any(name.endswith("_partials") for name in STATS.plans[-1].buffers)


def test_x_beyond_one_binding_is_reduced_through_windows(monkeypatch):
    """A tensor larger than the target's max binding: pass 1 runs once per window of x."""
    real = library_plan.caps_for_target

    def small_bindings(target):
        caps = real(target)
        return dataclasses.replace(caps, limits={**caps.limits, "max-storage-buffer-binding-size": 1 << 18})

    monkeypatch.setattr(library_plan, "caps_for_target", small_bindings)
    torch.manual_seed(3)
    kinds = compiled_kinds(lambda x: x.mean(), torch.randn(3, 70001), tol=1e-4)
    assert sum(k.endswith(".pass1") for k in kinds) > 1 and ".combine." in kinds[-1], kinds
    windows = [n.args["bindings"][0] for n in STATS.plans[-1].main if n.op is LowIROp.DISPATCH]
    assert len({tuple(w) for w in windows[:-1]}) == len(windows) - 1   # each pass-1 launch its own range


@pytest.mark.parametrize("shape", [(5, 13), (4, 20000)], ids=str)
def test_float16_reductions_accumulate_in_f32(shape):
    torch.manual_seed(4)
    x = torch.randn(shape).half()
    kinds = compiled_kinds(lambda x: (x.sum(), x.amax(-1), x.mean(-1)), x, tol=1e-2)
    assert sum(k == "narrow.f32_f16" for k in kinds) == 3 and all(
        k.startswith("reduce.") for k in kinds if k != "narrow.f32_f16"), kinds


def test_other_reductions_stay_with_iree():
    # dims that are not one run, and a sum into another dtype
    torch.manual_seed(5)
    kinds = compiled_kinds(lambda x: (x.sum((0, 2)), x.sum(-1, dtype=torch.float16)), torch.randn(3, 4, 5),
                           tol=1e-2)
    assert not any(k.startswith("reduce.") for k in kinds), kinds
