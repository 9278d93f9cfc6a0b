"""Eager kernels are recorded into the runtime's open command encoder: nothing is submitted until a value
is read back, and the result read then is right."""

import torch

import torch_webgpu
from torch_webgpu.runtime import get_runtime


def test_op_chain_records_without_submitting(webgpu, monkeypatch):
    x_cpu = torch.randn(8, 16)
    w_cpu = torch.randn(16, 4)
    x, w = x_cpu.to(webgpu), w_cpu.to(webgpu)
    rt = get_runtime()
    monkeypatch.setattr(rt.recorder, "flush_after", None)  # no submit for age (a slow first call)
    torch.webgpu.synchronize()
    submits, dispatches = rt.submits, rt.dispatches
    y = torch.softmax(torch.relu(x @ w) * 2 + 1, dim=-1).sum(0)
    assert rt.dispatches > dispatches  # kernels were recorded
    assert rt.submits == submits  # ... but nothing was submitted yet
    expected = torch.softmax(torch.relu(x_cpu @ w_cpu) * 2 + 1, dim=-1).sum(0)
    torch.testing.assert_close(y.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert rt.submits > submits  # reading the value submitted the recorded work
    assert torch_webgpu.fallback_stats() == {}


def test_inplace_and_out_variants(webgpu):
    a_cpu, b_cpu = torch.randn(5, 7), torch.randn(7)
    a, b = a_cpu.to(webgpu), b_cpu.to(webgpu)
    a.add_(b, alpha=0.5)
    a_cpu.add_(b_cpu, alpha=0.5)
    out = torch.empty(5, 7, device=webgpu)
    torch.mul(a, b, out=out)
    torch.testing.assert_close(out.cpu(), a_cpu * b_cpu)
    t = a.t()  # a strided (transposed) output written in place
    t.clamp_(-0.5, 0.5)
    torch.testing.assert_close(a.cpu(), a_cpu.t().clamp(-0.5, 0.5).t())
