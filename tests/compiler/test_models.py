"""The must-show models, compiled with backend="webgpu", against torch on CPU (f32, atol 1e-4)."""

import pytest
import torch

from torch_webgpu.compiler.webgpu_compiler import STATS, webgpu_backend

from .models import MLP, ConvBlock, EmbeddingArgmax, GPT2Logits, SmallResNet, TransformerBlock, tiny_gpt2


def _check(model, *inputs, device="cpu"):
    torch.manual_seed(0)
    with torch.no_grad():
        expected = model(*inputs)
        if device != "cpu":
            model = model.to(device)
            inputs = tuple(x.to(device) for x in inputs)
        got = torch.compile(model, backend=webgpu_backend)(*inputs)
    if hasattr(expected, "logits"):
        expected, got = expected.logits, got.logits
    assert got.device.type == device
    torch.testing.assert_close(got.cpu(), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_mlp(rt, device):
    torch.manual_seed(0)
    before = rt.submits
    _check(MLP(), torch.randn(4, 16), device=device)
    assert rt.submits > before


def test_mlp_one_submit_per_call(rt):
    torch.manual_seed(0)
    model = MLP()
    compiled = torch.compile(model, backend="webgpu")
    x = torch.randn(4, 16)
    with torch.no_grad():
        compiled(x)
        before = rt.submits
        pipelines, bind_groups = rt.executables.pipeline_misses, rt.executables.bind_group_misses
        y = compiled(x)
    assert rt.submits - before == 1
    # pipelines and bind groups were built by the first call only
    assert (rt.executables.pipeline_misses, rt.executables.bind_group_misses) == (pipelines, bind_groups)
    torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_conv_batchnorm_relu_maxpool(device):
    torch.manual_seed(0)
    _check(ConvBlock().eval(), torch.randn(2, 3, 8, 8), device=device)


@pytest.mark.slow
def test_small_resnet_stride_2_block_and_adaptive_pool():
    # The last block's 3x3 stride-2 conv on a 2x2 map used to fail in IREE (unit-dim folding).
    torch.manual_seed(0)
    model = SmallResNet().eval()
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):   # non-trivial running statistics
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 2.0)
    _check(model, torch.randn(2, 3, 4, 4))


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_transformer_block(device):
    torch.manual_seed(0)
    _check(TransformerBlock(), torch.randn(2, 8, 32), device=device)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_embedding_argmax(device):
    torch.manual_seed(0)
    _check(EmbeddingArgmax(), torch.randint(0, 50, (2, 5)), device=device)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", "webgpu"])
def test_gpt2_tiny(device):
    torch.manual_seed(0)
    _check(tiny_gpt2(), torch.randint(0, 100, (1, 8)), device=device)


@pytest.mark.slow
def test_gpt2_without_kv_cache():
    # No KV cache: transformers passes an attention mask to SDPA, and the host program has a queue fill.
    torch.manual_seed(0)
    _check(GPT2Logits().eval(), torch.randint(0, 100, (1, 8)))


def test_cache_hit_in_process():
    torch.manual_seed(0)
    model, x = MLP(), torch.randn(4, 16)
    with torch.no_grad():
        torch.compile(model, backend="webgpu")(x)
        torch._dynamo.reset()
        calls = STATS.iree_calls
        y = torch.compile(model, backend="webgpu")(x)
    assert STATS.iree_calls == calls
    torch.testing.assert_close(y, model(x), atol=1e-4, rtol=1e-4)


def test_new_shapes_get_their_own_static_plan():
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    compiled = torch.compile(model, backend="webgpu")  # dynamo turns dims dynamic after a change
    with torch.no_grad():
        for batch in (2, 3, 5, 3):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(compiled(x), model(x), atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_transformer_block_head_dim_16_long_sequence():
    # SDPA's all--inf-row guard (all.dim over i1) used to give wrong results here; it now reduces int32.
    torch.manual_seed(0)
    _check(TransformerBlock(32, 2), torch.randn(2, 64, 32))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ResNet", "ConvNeXt", "MobileNetV2"])
def test_transformers_small_cnn(name):
    # Issue 12's compile-time CNNs (benchmarks/suites/compile_time.py), at their smoke size.
    from benchmarks.model_zoo import cnn_cases

    case = next(c for c in cnn_cases(tiny=True) if c.name.startswith(name + "-"))
    torch.manual_seed(0)
    model = case.build().eval()
    _check(model, *case.inputs(), device="webgpu")
    meta = STATS.plans[-1].meta
    assert meta["library"] and meta["iree_segments"] <= meta["segments"]
