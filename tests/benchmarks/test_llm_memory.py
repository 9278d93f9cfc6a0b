"""The llm suite's device-memory figure: what the webgpu pool allocates past the baseline, tensors and a
compiled plan's (bundle's) own buffers alike."""

import torch

import torch_webgpu
from benchmarks.suites.llm import MB, memory_baseline, memory_used
from tests.compiler.models import MLP


def test_tensors_count_and_cpu_has_no_figure():
    assert memory_baseline("cpu") is None and memory_used("cpu", None) is None
    start = memory_baseline("webgpu")
    x = torch.empty(2_000_000, device="webgpu")          # 8 MB
    del x
    used = memory_used("webgpu", start)
    assert 8.0 <= used < 9.0                            # the peak counts it after it is gone


def test_a_loaded_bundles_buffers_count(tmp_path):
    torch.manual_seed(0)
    model = MLP().eval()
    path = torch_webgpu.export(model, [torch.randn(4, 16)], tmp_path / "mlp", target="webgpu-core")
    start = memory_baseline("webgpu")
    bundle = torch_webgpu.load(path)
    owned = bundle._compiled.buffers.owned
    plan_bytes = sum(bundle.rt.buffer(b).nbytes for b in owned)
    assert owned and memory_used("webgpu", start) * MB >= plan_bytes
    bundle.release()
