"""Compiled plans run softmax / log_softmax (last dim), layer_norm (with its affine) and rms_norm
(transformers' LlamaRMSNorm pattern, f16 casts included) as kernel-library rows dispatches."""

import pytest
import torch

from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan.format import LowIROp

F = torch.nn.functional


def compiled_kinds(fn, *inputs, tol=1e-4):
    """Compile `fn`, check it against CPU; the library variant (or "iree") of each dispatch of a call."""
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend="webgpu")(*inputs)
        expected = fn(*inputs)
    torch.testing.assert_close(got, expected, atol=tol, rtol=tol)
    plan = STATS.plans[-1]
    library = plan.meta.get("library", {})
    return [library.get(n.args["entry_point"], "iree") for n in plan.main if n.op is LowIROp.DISPATCH]


class RMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm / Qwen2RMSNorm."""

    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n))
        self.variance_epsilon = 1e-6

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


SHAPES = [(5, 13), (3, 7, 20), (37,), (6, 1000)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_is_one_rows_dispatch(op, shape):
    torch.manual_seed(0)
    fn = {"softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, -1)}[op]
    kinds = compiled_kinds(fn, torch.randn(shape) * 3)
    assert len(kinds) == 1 and kinds[0].startswith(f"rows.{op}.f32."), kinds


@pytest.mark.parametrize("affine", ["weight_bias", "weight", "none"])
@pytest.mark.parametrize("shape", [(5, 13), (2, 9, 24)], ids=str)
def test_layer_norm_is_one_rows_dispatch(shape, affine):
    torch.manual_seed(1)
    norm = torch.nn.LayerNorm(shape[-1], elementwise_affine=affine != "none", bias=affine == "weight_bias")
    if affine != "none":
        torch.nn.init.normal_(norm.weight)
    if affine == "weight_bias":
        torch.nn.init.normal_(norm.bias)
    kinds = compiled_kinds(norm, torch.randn(shape) + 2)
    assert len(kinds) == 1 and kinds[0].startswith("rows.layer_norm.f32."), kinds


@pytest.mark.parametrize("n", [16, 15])
def test_rms_norm_pattern_is_one_rows_dispatch(n):
    torch.manual_seed(2)
    kinds = compiled_kinds(RMSNorm(n), torch.randn(3, 5, n))
    assert len(kinds) == 1 and kinds[0].startswith("rows.rms_norm.f32."), kinds


def test_few_very_long_rows_take_two_passes_through_a_plan_buffer():
    torch.manual_seed(7)
    kinds = compiled_kinds(lambda x: torch.softmax(x, -1), torch.randn(2, 70000) * 3)
    assert kinds == ["rows.softmax.f32.stats", "rows.softmax.f32.apply"], kinds
    assert any(name.endswith("_partials") for name in STATS.plans[-1].buffers)


def test_torch_rms_norm_is_one_rows_dispatch():
    torch.manual_seed(2)
    w = torch.randn(24)
    for fn in (lambda x: F.rms_norm(x, (24,), w, 1e-5), lambda x: F.rms_norm(x, (24,), eps=1e-5)):
        kinds = compiled_kinds(fn, torch.randn(6, 24))
        assert len(kinds) == 1 and kinds[0].startswith("rows.rms_norm.f32."), kinds


@pytest.mark.parametrize("n", [16, 15])
def test_float16_rows_read_and_store_half(n):
    """f16 inputs widened around the op are read as f16; f16 results of vec4 rows are stored by the
    rows kernel, others through f32 scratch and a narrowing dispatch."""
    torch.manual_seed(3)
    x = torch.randn(4, n).half()
    norm = torch.nn.LayerNorm(n).half()
    torch.nn.init.normal_(norm.weight)
    cases = [(RMSNorm(n).half(), "rms_norm"), (norm, "layer_norm"),
             (lambda t: torch.softmax(t, -1), "softmax"), (lambda t: torch.log_softmax(t, -1), "log_softmax")]
    for fn, op in cases:
        kinds = compiled_kinds(fn, x, tol=1e-2)
        assert kinds[0].startswith(f"rows.{op}.f16."), (op, kinds)
        assert kinds[1:] == ([] if n % 4 == 0 else ["narrow.f32_f16"]), (op, kinds)


def test_rows_read_through_strides_and_feed_iree():
    # the rows of a column slice are `row_stride` apart; what follows the op is IREE's
    torch.manual_seed(4)
    kinds = compiled_kinds(lambda x: torch.softmax(x[:, 3:19], -1).sum(0) + 1, torch.randn(6, 24))
    assert sum(k.startswith("rows.softmax.") for k in kinds) == 1


def test_rows_dispatch_carries_its_variants_for_tuning():
    compiled_kinds(lambda x: torch.softmax(x, -1), torch.randn(8, 4096))
    (node,) = [n for n in STATS.plans[-1].main if n.op is LowIROp.DISPATCH]
    tune = node.args["tune"]
    assert tune["key"].startswith("rows|softmax.") and len(tune["variants"]) > 1


def test_other_dims_and_used_statistics_stay_with_iree():
    torch.manual_seed(5)
    kinds = compiled_kinds(lambda x: torch.softmax(x, 0), torch.randn(5, 7))
    assert not any(k.startswith("rows.") for k in kinds)
    # the statistics are outputs too: the pattern's nodes are needed elsewhere
    kinds = compiled_kinds(lambda x: torch.ops.aten.native_layer_norm(x, [7], None, None, 1e-5),
                           torch.randn(5, 7))
    assert not any(k.startswith("rows.") for k in kinds)


def test_layer_norm_training_step_matches_eager_cpu():
    torch.manual_seed(6)
    norm, x = torch.nn.LayerNorm(12), torch.randn(4, 12, requires_grad=True)
    torch._dynamo.reset()
    out = torch.compile(norm, backend="webgpu")(x)
    out.square().sum().backward()
    grad = x.grad.clone()
    x.grad = None
    norm(x).square().sum().backward()
    torch.testing.assert_close(grad, x.grad, atol=1e-4, rtol=1e-4)


def _tiny_model(name):
    import transformers

    from ..models import tiny_gpt2
    from ..test_language_models import _model

    if name == "gpt2":
        return tiny_gpt2().eval(), 5   # ln_1, ln_2 per block (2 blocks), ln_f
    if name == "llama":
        return _model("llama"), 5      # two RMSNorms per layer (2 layers), the final one
    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, vocab_size=100)
    return transformers.BertModel(config).eval(), 5   # embeddings, two per layer


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_tiny_models_run_their_norms_as_rows_dispatches(name):
    model, norms = _tiny_model(name)
    ids = torch.randint(0, 100, (1, 12), generator=torch.Generator().manual_seed(1))

    def run(ids):
        out = model(ids)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state
    kinds = compiled_kinds(run, ids)
    op = "rms_norm" if name == "llama" else "layer_norm"
    assert sum(k.startswith(f"rows.{op}.f32.") for k in kinds) == norms, kinds
