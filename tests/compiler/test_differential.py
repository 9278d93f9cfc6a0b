"""The same plan run with IREE's SPIR-V and with our WGSL gives the same results on Dawn.

Only for executables without push constants and without non-finite constants (Tint aborts the
process on IREE's -inf/NaN constants, which is why the WGSL path exists): the MLP qualifies.
"""

import torch

from torch_webgpu.compiler.fx_import import prepare_graph
from torch_webgpu.compiler.webgpu_compiler import compile_plan
from torch_webgpu.plan import lowering


def test_mlp_plan_spirv_and_wgsl_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path))  # fresh compile: keeps IREE's SPIR-V
    monkeypatch.setenv("TORCH_WEBGPU_LIBRARY", "0")   # every dispatch IREE's (the library has no SPIR-V)
    torch.manual_seed(0)
    x, w1, w2 = torch.randn(4, 16), torch.randn(16, 32), torch.randn(32, 8)

    def fn(x, w1, w2):
        return (torch.relu(x @ w1) @ w2,)

    gm = torch.fx.experimental.proxy_tensor.make_fx(fn)(x, w1, w2)
    plan = compile_plan(prepare_graph(gm), [x, w1, w2])
    assert set(plan.spirv) == set(plan.executables)
    (via_wgsl,) = lowering(plan)(x, w1, w2)
    (via_spirv,) = lowering(plan, shader_source="spirv")(x, w1, w2)
    torch.testing.assert_close(via_wgsl, via_spirv, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(via_wgsl, fn(x, w1, w2)[0], atol=1e-4, rtol=1e-4)
