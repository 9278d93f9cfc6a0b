"""The IREE-Vulkan baseline runs the same IREE output as the WebGPU path and matches torch CPU."""

import gc
import os

import numpy as np
import torch

from benchmarks.iree_vulkan import IREEVulkanFunction, compile_vmfb


class _Embed(torch.nn.Module):
    """int64 token ids in (the 64-bit demotion at IREE's boundary), a weight as a trailing constant."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, ids):
        return self.proj(self.emb(ids))


def test_vmfb_matches_cpu(tmp_path):
    from torch_webgpu.compiler.export import graph as ex

    torch.manual_seed(0)
    model = _Embed().eval()
    ids = torch.tensor([[3, 1, 15, 0, 7]])
    target = ex.make_target("webgpu-core")
    traced = ex.trace(model, [ids])
    path = tmp_path / "embed.vmfb"
    path.write_bytes(compile_vmfb(ex.iree_input_text(traced, target), target.iree))
    threads = len(os.listdir("/proc/self/task"))
    fn = IREEVulkanFunction(path, ex.prepared_constants(traced))
    got = fn.to_numpy(fn(ids))
    with torch.no_grad():
        np.testing.assert_allclose(got, model(ids).numpy(), atol=1e-5, rtol=1e-5)
    # its device goes with it: IREE's Vulkan driver threads poll the queue while one lives (on lavapipe
    # they spun at most of a core each for the rest of the test run)
    fn.close()
    gc.collect()
    assert len(os.listdir("/proc/self/task")) <= threads
