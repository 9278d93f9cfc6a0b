"""The fast call of a static plan on the native executor (plan/fast_call.py): taken from the call after
the first, bit-identical to the Python executor, a new output tensor per call, and any call it does not
fit (non-contiguous or unaligned views, host inputs, other dtypes, the Python executor, profiling) goes
through the general path and gets the same results."""

import numpy as np
import pytest
import torch

import torch_webgpu
from tests.compiler.models import MLP
from torch_webgpu.plan.check import assert_same_outputs


@pytest.fixture
def mlp_bundle(tmp_path):
    """(model, its loaded bundle, a counter of calls that took the general path)."""
    torch.manual_seed(0)
    model = MLP().eval()
    with torch.no_grad():
        path = torch_webgpu.export(model, [torch.randn(4, 16)], tmp_path / "mlp")
    bundle = torch_webgpu.load(path)
    general = []
    binder = bundle._compiled.binder
    bind = binder.bind
    binder.bind = lambda *a, **k: general.append(1) or bind(*a, **k)
    return model, bundle, general


def _inputs(n):
    return [torch.randn(4, 16, generator=torch.Generator().manual_seed(s)) for s in range(n)]


def test_steady_calls_are_fast_and_bit_identical_to_python(mlp_bundle):
    model, bundle, general = mlp_bundle
    xs = _inputs(4)
    outs = [bundle(x.to("webgpu")) for x in xs]
    assert bundle._compiled.fast_call is not None
    assert len(general) == 1   # only the first call
    assert len({o.data_ptr() for o in outs}) == len(outs)   # each call its own output
    bundle._compiled.executor = "python"
    for x, out in zip(xs, outs, strict=True):
        assert out.device.type == "webgpu" and out.shape == (4, 8)
        assert_same_outputs([out], [bundle(x.to("webgpu"))], "MLP")
        torch.testing.assert_close(out.cpu(), model(x).detach(), rtol=1e-4, atol=1e-4)
    assert len(general) == 1 + len(xs)


def _unaligned(x):
    flat = torch.cat([torch.zeros(1), x.reshape(-1)]).to("webgpu")
    return flat[1:].view(4, 16)   # contiguous, 4 bytes into its buffer


@pytest.mark.parametrize("make, what", [
    (lambda x: x.to("webgpu")[:, :], "contiguous view (still fast)"),
    (lambda x: x.t().contiguous().to("webgpu").t(), "non-contiguous"),
    (_unaligned, "unaligned view"),
    (lambda x: x, "cpu tensor"),
    (lambda x: x.numpy(), "numpy array"),
], ids=["slice", "non-contiguous", "unaligned", "cpu", "numpy"])
def test_other_inputs_take_the_general_path(mlp_bundle, make, what):
    model, bundle, general = mlp_bundle
    warm, x = _inputs(2)
    bundle(warm.to("webgpu"))
    value = make(x)
    if what == "non-contiguous":
        assert not value.is_contiguous()
    out = bundle(value)
    expected = model(x).detach()
    if isinstance(value, np.ndarray):
        assert isinstance(out, np.ndarray)
        out = torch.from_numpy(out)
    else:
        assert out.device == value.device
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-4)
    fast = what.endswith("(still fast)")
    assert len(general) == (1 if fast else 2), what
    # and the next plain call is fast again
    again = bundle(x.to("webgpu"))
    torch.testing.assert_close(again.cpu(), expected, rtol=1e-4, atol=1e-4)
    assert len(general) == (1 if fast else 2), what


def test_other_dtype_on_the_plan_takes_the_general_path(mlp_bundle):
    model, bundle, general = mlp_bundle
    warm, x = _inputs(2)
    compiled = bundle._compiled
    compiled(warm.to("webgpu"))
    (out,) = compiled(x.half().to("webgpu"))   # the plan's dtype is float32: converted on the way in
    assert len(general) == 2
    torch.testing.assert_close(out.cpu(), model(x.half().float()).detach(), rtol=1e-4, atol=1e-4)


def test_profiled_calls_time_every_dispatch(mlp_bundle):
    _, bundle, general = mlp_bundle
    warm, x = _inputs(2)
    bundle(warm.to("webgpu"))
    rt = bundle._compiled.rt
    with rt.profile() as timings:
        bundle(x.to("webgpu"))
    assert len(timings) == bundle._compiled.plan.dispatch_count > 0
    assert len(general) == 2


def test_a_wrong_shape_still_raises(mlp_bundle):
    _, bundle, _ = mlp_bundle
    warm, _ = _inputs(2)
    bundle(warm.to("webgpu"))
    with pytest.raises(ValueError, match="shape"):
        bundle._compiled(torch.randn(5, 16).to("webgpu"))


@pytest.mark.parametrize("make, message", [
    (lambda: torch.randn(5, 16), r"input 0 \(x\) is float32\[5, 16\], expected float32\[4, 16\]"),
    (lambda: torch.randn(4, 16).half(), r"input 0 \(x\) is float16\[4, 16\]"),
    (lambda: torch.arange(64).reshape(4, 16), r"input 0 \(x\) is int64\[4, 16\]"),
], ids=["shape", "float16", "int64"])
def test_a_warm_bundle_still_refuses_what_its_signature_does_not_take(mlp_bundle, make, message):
    """The bundle skips its signature check when the fast call takes the arguments: only what fits the
    plan exactly, so anything else still gets the signature's error."""
    from torch_webgpu.bundle import BundleSignatureError
    _, bundle, _ = mlp_bundle
    warm, x = _inputs(2)
    bundle(warm.to("webgpu"))
    bundle(x.to("webgpu"))
    with pytest.raises(BundleSignatureError, match=message):
        bundle(make().to("webgpu"))


class _Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.proj = torch.nn.Embedding(50, 8), torch.nn.Linear(8, 4)

    def forward(self, ids):
        return self.proj(self.embed(ids))


def test_int64_inputs_narrowed_by_the_program_stay_fast(tmp_path):
    torch.manual_seed(0)
    model = _Embed().eval()
    ids = [torch.randint(0, 50, (2, 3), generator=torch.Generator().manual_seed(s)) for s in range(3)]
    with torch.no_grad():
        bundle = torch_webgpu.load(torch_webgpu.export(model, [ids[0]], tmp_path / "embed"))
        outs = [bundle(i.to("webgpu")) for i in ids]
        assert bundle._compiled.fast_call.narrowed == (0,)   # the ids: narrowed by the program's first one
        for i, out in zip(ids, outs, strict=True):
            torch.testing.assert_close(out.cpu(), model(i), rtol=1e-4, atol=1e-4)
        # a value beyond int32 is reported at the next wait, as on the general path
        bundle(torch.full((2, 3), 1 << 40).to("webgpu"))
        with pytest.raises(OverflowError, match="int32"):
            torch.webgpu.synchronize()
