"""A bundle called on webgpu tensors inside torch.webgpu.graph: its native program is captured with its
slots (the call's input and output buffers) and replays with the graph."""

import torch
from torch.testing import assert_close

import torch_webgpu


def test_bundle_call_is_captured_and_replayed(mlp, mlp_bundle):
    model, x = mlp
    bundle = torch_webgpu.load(mlp_bundle)
    static_x = x.to("webgpu")
    bundle(static_x)   # warm-up outside the capture (the executor check's first-call comparison reads back)
    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        y = bundle(static_x)
    assert g.dispatches > 0
    new = torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
    static_x.copy_(new.to("webgpu"))
    g.replay()
    with torch.no_grad():
        assert_close(y.cpu(), model(new), rtol=1e-4, atol=1e-4)
