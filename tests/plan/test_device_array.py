"""Torch-free device residency of a compiled plan (plan.DeviceArray, run_resident, constant_buffers):
outputs kept on the device feed the next call zero-copy, and two plans can share their weight buffers."""

import numpy as np
import pytest
import torch

import torch_webgpu
from torch_webgpu.bundle.loader import load_plan
from torch_webgpu.plan import DeviceArray, lowering


class _Step(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, x, h):
        y = self.proj(x)
        return torch.tanh(y + h), y.sum()


@pytest.fixture(scope="module")
def step_plan(tmp_path_factory):
    torch.manual_seed(0)
    model = _Step().eval()
    x, h = torch.randn(4, 16), torch.zeros(4, 8)
    path = torch_webgpu.export(model, [x, h], tmp_path_factory.mktemp("resident") / "step",
                               target="webgpu-core")
    return model, x, load_plan(path)[1]


def test_resident_outputs_chain_without_host_copies(step_plan):
    model, x, plan = step_plan
    compiled = lowering(plan)
    h = np.zeros((4, 8), np.float32)
    want = torch.zeros(4, 8)
    for _ in range(3):
        out, total = compiled.run_resident([x.numpy(), h], resident=(0,))
        assert isinstance(out, DeviceArray) and out.shape == (4, 8) and out.dtype == "float32"
        assert isinstance(total, np.ndarray)     # not resident: read back
        with torch.no_grad():
            want, want_total = model(x, want)
        np.testing.assert_allclose(out.numpy(), want.numpy(), atol=1e-5)
        np.testing.assert_allclose(total, want_total.numpy(), atol=1e-4)
        h = out                                  # the next call binds the device buffer itself
    with pytest.raises(TypeError, match="device array of int32"):
        wrong = DeviceArray(compiled.rt, compiled.rt.allocate(128), (4, 8), "int32")
        compiled.run_resident([x.numpy(), wrong])


def test_plans_share_constant_buffers(step_plan):
    model, x, plan = step_plan
    first = lowering(plan)
    n_user = len(plan.inputs)
    lifted = list(plan.constants)[:plan.num_constant_inputs]
    shared = {name: first.buffers.static[f"in{n_user + j}"][0] for j, name in enumerate(lifted)}
    second = lowering(plan, constant_buffers=shared)
    assert shared and not set(shared.values()) & set(second.buffers.owned)   # bound, not allocated again
    h = np.zeros((4, 8), np.float32)
    np.testing.assert_array_equal(first.run_resident([x.numpy(), h])[0],
                                  second.run_resident([x.numpy(), h])[0])


def test_all_resident_calls_run_natively(step_plan):
    """Every output kept on the device: the native executor records the call (checked bit for bit against
    the Python executor by the session's TORCH_WEBGPU_EXECUTOR=check)."""
    model, x, plan = step_plan
    compiled = lowering(plan)
    h = np.zeros((4, 8), np.float32)
    want = torch.zeros(4, 8)
    for _ in range(3):
        out, total = compiled.run_resident([x.numpy(), h], resident=(0, 1))
        with torch.no_grad():
            want, want_total = model(x, want)
        np.testing.assert_allclose(out.numpy(), want.numpy(), atol=1e-5)
        np.testing.assert_allclose(total.numpy(), want_total.numpy(), atol=1e-4)
        h = out
    if compiled.executor == "native":
        [layout] = compiled.layouts.values()
        assert any(program is not None for program in layout.native.values()), compiled.native_unsupported


class _Tied(torch.nn.Module):
    """Two linears sharing one 64 KiB weight, as an LM head tied to its embedding."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(256, 64, bias=False)
        self.second = torch.nn.Linear(256, 64, bias=False)
        self.second.weight = self.first.weight

    def forward(self, x, y):
        return self.first(x) + self.second(y)


def test_tied_weights_share_one_buffer(tmp_path):
    torch.manual_seed(0)
    model = _Tied().eval()
    x, y = torch.randn(2, 256), torch.randn(2, 256)
    _, plan = load_plan(torch_webgpu.export(model, [x, y], tmp_path / "tied", target="webgpu-core"))
    compiled = lowering(plan)
    n_user = len(plan.inputs)
    lifted = list(plan.constants.values())[:plan.num_constant_inputs]
    big = [j for j, v in enumerate(lifted) if v.nbytes >= 1 << 16]
    buffers = {compiled.buffers.static[f"in{n_user + j}"][0] for j in big}
    assert len(big) == 2 and len(buffers) == 1     # the plan takes the weight twice, the device holds it once
    with torch.no_grad():
        np.testing.assert_allclose(compiled.run_resident([x.numpy(), y.numpy()])[0], model(x, y).numpy(),
                                   atol=1e-4)
