"""Sibling linears of one input as one grouped gemv dispatch: a tiny Llama decode step (f32, f16, torchao
int4) matches the CPU and runs fewer dispatches than with TORCH_WEBGPU_GROUPED_GEMV=0 (q/k/v as one,
gate/up with SiLU * up as one in GLU form); linears that are not siblings (a bias, dependent, many rows)
stay one dispatch each, and a gate/up pair whose results are used elsewhere is grouped without GLU."""

from __future__ import annotations

import pytest
import torch

from benchmarks.llama_decode import LlamaStaticDecode, llama_1b_config
from torch_webgpu.compiler.webgpu_compiler import STATS, webgpu_backend
from torch_webgpu.plan.format import LowIROp


def library_kinds() -> list[str]:
    """The library variant of each library dispatch of the last compiled plan."""
    plan = STATS.plans[-1]
    library = plan.meta.get("library", {})
    return [library[n.args["entry_point"]] for n in plan.main
            if n.op is LowIROp.DISPATCH and n.args["entry_point"] in library]


def compiled(model, *args, grouped: bool, monkeypatch):
    """(result, dispatches, library kinds) of `model` compiled with grouping on or off."""
    monkeypatch.setenv("TORCH_WEBGPU_GROUPED_GEMV", "1" if grouped else "0")
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=webgpu_backend)(*args)
    return got, STATS.plans[-1].dispatch_count, library_kinds()


def _decode_step(dtype, quant=False):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    lm = transformers.LlamaForCausalLM(llama_1b_config(tiny=True)).eval()
    if quant:
        pytest.importorskip("torchao")
        from torchao.quantization import IntxWeightOnlyConfig, quantize_
        from torchao.quantization.granularity import PerGroup

        quantize_(lm, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    step = LlamaStaticDecode(lm.to(dtype), max_len=16).eval()
    cache = torch.randn(step.empty_cache().shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    return step, (torch.tensor([[5]]), torch.tensor([3]), cache)


def check_decode(monkeypatch, dtype, atol, quant=False):
    step, args = _decode_step(dtype, quant)
    with torch.no_grad():
        want = step(*args)
    got, grouped, kinds = compiled(step, *args, grouped=True, monkeypatch=monkeypatch)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.float(), w.float(), atol=atol, rtol=atol)
    _, ungrouped, plain = compiled(step, *args, grouped=False, monkeypatch=monkeypatch)
    prefix = "gqmatmul" if quant else "gmatmul"
    # per layer: q/k/v as one dispatch, silu(gate) * up as another
    assert sum(k.startswith(prefix + "3.") for k in kinds) == 2, kinds
    assert sum(k.startswith(prefix + "2glu.") for k in kinds) == 2, kinds
    assert not any(k.startswith(prefix) for k in plain), plain
    # 2 layers: 2 q/k/v and 1 gate/up dispatches fewer, and the SiLU * up elementwise one
    assert grouped <= ungrouped - 8, (grouped, ungrouped)
    return grouped, ungrouped


@pytest.mark.slow
def test_llama_decode_f32_grouped(monkeypatch):
    check_decode(monkeypatch, torch.float32, 1e-4)


@pytest.mark.slow
def test_llama_decode_f16_grouped(monkeypatch, rt):
    if "shader-f16" not in rt.info.features:
        pytest.skip("the adapter lacks shader-f16")
    check_decode(monkeypatch, torch.float16, 2e-2)


@pytest.mark.slow
def test_llama_decode_torchao_int4_grouped(monkeypatch):
    check_decode(monkeypatch, torch.float32, 1e-3, quant=True)


class Siblings(torch.nn.Module):
    """Three linears of one input, a linear with a bias, and a linear of a linear."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(64, n, bias=False) for n in (32, 48, 16))
        self.biased = torch.nn.Linear(64, 16)
        self.after = torch.nn.Linear(32, 8, bias=False)

    def forward(self, x):
        a = self.a(x)
        return a, self.b(x), self.c(x), self.biased(x), self.after(a)


def test_only_siblings_group(monkeypatch):
    torch.manual_seed(0)
    model = Siblings().eval()
    x = torch.randn(1, 64)
    got, _, kinds = compiled(model, x, grouped=True, monkeypatch=monkeypatch)
    with torch.no_grad():
        for g, w in zip(got, model(x), strict=True):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    assert sorted(k.split(".")[0] for k in kinds) == ["gmatmul3", "matmul", "matmul"], kinds


def test_many_rows_do_not_group(monkeypatch):
    torch.manual_seed(0)
    model = Siblings().eval()
    x = torch.randn(9, 64)
    _, _, kinds = compiled(model, x, grouped=True, monkeypatch=monkeypatch)
    assert not any(k.startswith("gmatmul") for k in kinds), kinds


class GatedMLP(torch.nn.Module):
    """Llama's MLP, optionally also returning the up projection (then the GLU form cannot apply)."""

    def __init__(self, expose_up: bool):
        super().__init__()
        self.gate, self.up = (torch.nn.Linear(64, 96, bias=False) for _ in range(2))
        self.down = torch.nn.Linear(96, 64, bias=False)
        self.expose_up = expose_up

    def forward(self, x):
        up = self.up(x)
        out = self.down(torch.nn.functional.silu(self.gate(x)) * up)
        return (out, up) if self.expose_up else out


@pytest.mark.parametrize("expose_up", [False, True])
def test_gated_mlp(monkeypatch, expose_up):
    torch.manual_seed(0)
    model = GatedMLP(expose_up).eval()
    x = torch.randn(2, 64)
    got, _, kinds = compiled(model, x, grouped=True, monkeypatch=monkeypatch)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), atol=1e-4, rtol=1e-4)
    want = "gmatmul2." if expose_up else "gmatmul2glu."
    assert sum(k.startswith(want) for k in kinds) == 1, kinds


@pytest.mark.parametrize("buffers", [8, 16])
def test_quantized_siblings_follow_the_binding_limit(monkeypatch, tmp_path, buffers):
    """torchao int4 q/k/v-like siblings: three in one dispatch where the target binds enough storage
    buffers (11 with zero points), else a pair and a single."""
    pytest.importorskip("torchao")
    import dataclasses

    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    from torch_webgpu.compiler import library_plan

    real = library_plan.caps_for_target

    def limited(target):
        caps = real(target)
        limits = {**caps.limits, "max-storage-buffers-per-shader-stage": buffers}
        return dataclasses.replace(caps, limits=limits)

    monkeypatch.setattr(library_plan, "caps_for_target", limited)
    monkeypatch.setenv("TORCH_WEBGPU_CACHE_DIR", str(tmp_path))   # the limit is not in the cache key
    torch.manual_seed(0)
    model = Siblings().eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    x = torch.randn(1, 64)
    got, _, kinds = compiled(model, x, grouped=True, monkeypatch=monkeypatch)
    with torch.no_grad():
        for g, w in zip(got, model(x), strict=True):
            torch.testing.assert_close(g, w, atol=1e-3, rtol=1e-3)
    grouped = [k for k in kinds if k.startswith("gqmatmul")]
    assert len(grouped) == 1, kinds
    per_weight = 3 if "z." in grouped[0] else 2   # q, scale (and zero points)
    members = 3 if 2 + 3 * per_weight <= buffers else 2
    assert grouped[0].startswith(f"gqmatmul{members}."), kinds
