"""IREE's inlined constant tensors (`util.buffer.constant` in the host program) become plan uploads."""

import pytest
import torch

from torch_webgpu.plan.format import LowIROp, Plan

from .models import GPT2Logits


def _arange_offset(x):
    # IREE folds the arange into a constant buffer imported by the host program (util.buffer.constant).
    return x + torch.arange(8).float() * 0.5


def test_graph_with_inlined_constant_matches_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_WEBGPU_DUMP_DIR", str(tmp_path))
    x = torch.randn(8, 8)
    torch.testing.assert_close(torch.compile(_arange_offset, backend="webgpu")(x), _arange_offset(x))
    (plan_dir,) = tmp_path.glob("graph_*/plan")
    plan = Plan.load(plan_dir)
    uploads = [n for n in [*plan.init, *plan.main] if n.op is LowIROp.UPLOAD_CONSTANT]
    assert [n.args["constant"] for n in uploads] == ["_host_const_0"], "the arange should be inlined"
    assert plan.num_constant_inputs == 0 and len(plan.inputs) == 1   # inlined constants are not inputs
    assert plan.constants["_host_const_0"][:32].view("float32").tolist() == [i * 0.5 for i in range(8)]


@pytest.mark.slow
def test_gpt2_export_round_trip_matches_cpu(tmp_path):
    import torch_webgpu

    from .models import tiny_gpt2

    torch.manual_seed(0)
    model = GPT2Logits(tiny_gpt2()).eval()
    x = torch.randint(0, 100, (1, 8))
    path = torch_webgpu.export(model, [x], tmp_path / "gpt2")
    model.eval()   # export restores the wrapper's mode
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(torch_webgpu.load(path)(x), expected, atol=1e-4, rtol=1e-4)
