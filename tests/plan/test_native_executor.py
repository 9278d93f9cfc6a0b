"""The native plan executor (plan/native_executor.py): the default for compiled plans, bit-identical to
the Python executor (the reference) on host and device inputs, call after call; TORCH_WEBGPU_EXECUTOR
selects the Python one; a profiled call takes the Python path so every dispatch is timed."""

import copy

import pytest
import torch

from tests.compiler.models import MLP
from torch_webgpu.compiler import webgpu_compiler
from torch_webgpu.plan import native_executor
from torch_webgpu.plan.check import NativeMismatchError, assert_same_outputs


@pytest.fixture
def compiled_plans(monkeypatch):
    """Every CompiledPlan torch.compile makes during the test."""
    made = []

    def recording(plan, *args, **kwargs):
        made.append(webgpu_compiler.lowering.__wrapped__(plan, *args, **kwargs))
        return made[-1]

    recording.__wrapped__ = webgpu_compiler.lowering
    monkeypatch.setattr(webgpu_compiler, "lowering", recording)
    return made


def _mlp_and_plan(compiled_plans):
    torch.manual_seed(0)
    model = MLP().eval()
    fn = torch.compile(model, backend="webgpu")
    with torch.no_grad():
        fn(torch.randn(4, 16))
    (plan,) = compiled_plans
    return model, fn, plan


def test_native_is_default_and_bit_identical_to_python(compiled_plans):
    model, fn, plan = _mlp_and_plan(compiled_plans)
    assert plan.executor == "native"
    device_model = MLP().eval()
    device_model.load_state_dict(model.state_dict())
    device_fn = torch.compile(device_model.to("webgpu"), backend="webgpu")
    with torch.no_grad():
        for seed in range(3):   # a new input buffer each call: its bind groups are remade, the rest kept
            x = torch.randn(4, 16, generator=torch.Generator().manual_seed(seed))
            for f, arg in ((fn, x), (device_fn, x.to("webgpu"))):
                compiled = compiled_plans[0] if f is fn else compiled_plans[-1]
                compiled.executor = "native"
                native = f(arg)
                compiled.executor = "python"
                python = f(arg)
                assert_same_outputs([native], [python], "MLP")
                torch.testing.assert_close(native.cpu(), model(x), rtol=1e-4, atol=1e-4)
    for compiled in compiled_plans:
        (layout,) = compiled.layouts.values()
        programs = [p for p in layout.native.values() if p is not None]
        assert programs and all(p.program.info()["runs"] >= 3 for p in programs)


def test_python_executor_selected_by_environment(monkeypatch, compiled_plans):
    monkeypatch.setenv("TORCH_WEBGPU_EXECUTOR", "python")
    _, _, plan = _mlp_and_plan(compiled_plans)
    assert plan.executor == "python"
    assert all(not layout.native for layout in plan.layouts.values())


def test_profiled_call_times_every_dispatch_on_the_python_path(rt, compiled_plans):
    _, fn, plan = _mlp_and_plan(compiled_plans)
    (layout,) = plan.layouts.values()
    runs = layout.native[(False, ())].program.info()["runs"]
    with torch.no_grad(), rt.profile() as timings:
        fn(torch.randn(4, 16))
    assert len(timings) == plan.plan.dispatch_count
    assert layout.native[(False, ())].program.info()["runs"] == runs


def test_mismatch_is_reported():
    a = torch.zeros(3)
    with pytest.raises(NativeMismatchError, match="output 0 differs"):
        assert_same_outputs([a], [a + 1], "plan")
    assert_same_outputs([torch.tensor([float("nan")])], [torch.tensor([float("nan")])], "plan")


class _EmbedMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.lin = torch.nn.Embedding(32, 16), torch.nn.Linear(16, 8)

    def forward(self, tokens, position):
        return self.lin(torch.relu(self.emb(tokens) + position.float()))


def test_calls_with_device_outputs_never_wait_for_the_queue(rt, monkeypatch, compiled_plans):
    torch.manual_seed(0)
    model = _EmbedMLP().eval()
    reference = copy.deepcopy(model)
    fn = torch.compile(model.to("webgpu"), backend="webgpu")
    tokens, position = torch.tensor([[3, 7, 1]]), torch.tensor([2])
    with torch.no_grad():
        fn(tokens.to("webgpu"), position.to("webgpu"))   # compiles, then the first call
        rt.synchronize()
        waits = []
        monkeypatch.setattr(rt.recorder, "native_queue", None)   # every wait through _wait_idle
        monkeypatch.setattr(rt, "_wait_idle", lambda: waits.append("wait"))
        monkeypatch.setattr(rt, "_download_locked", lambda *a: waits.append("download"))
        outs = [fn(torch.tensor([[t, 5, 9]]).to("webgpu"), torch.tensor([t]).to("webgpu")) for t in range(3)]
        assert waits == []   # int64 inputs narrowed on the device, outputs stay there: nothing waited
        monkeypatch.undo()
        (plan,) = compiled_plans
        (layout,) = plan.layouts.values()
        (key,) = [k for k, program in layout.native.items() if program is not None]
        assert key[0] and len(key[1]) == 2   # device outputs; both int64 inputs narrowed by the program
        for t, out in enumerate(outs):
            torch.testing.assert_close(out.cpu(), reference(torch.tensor([[t, 5, 9]]), torch.tensor([t])),
                                       rtol=1e-4, atol=1e-4)


_ADD_ONE_INTO = """
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { dst[g.x] = src[g.x] + 1.0; }
"""


def _plan_writing_its_second_input():
    """in1 = in0 + 1, in place; the output reads in1 back."""
    from torch_webgpu.plan.format import ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec

    spec = TensorSpec([64], "float32", "float32")
    exe = ExecutableSpec("main", "add_one.wgsl", [64, 1, 1], {0: 0, 1: 1}, read_only=[0])
    main = [LowIRNode(LowIROp.DISPATCH, {"entry_point": "add_one", "workgroups": [1, 1, 1], "constants": [],
                                         "bindings": [["in0", 0, 256], ["in1", 0, 256]]}),
            LowIRNode(LowIROp.OUTPUT, {"index": 0, "buffer": "in1", "offset": 0, "size": 256})]
    return Plan([spec, spec], [spec], [0], {}, [], main, {"add_one": exe}, {"add_one.wgsl": _ADD_ONE_INTO})


def test_program_writing_an_input_runs_natively_unless_inputs_alias():
    from torch_webgpu.plan import lowering

    compiled = lowering(_plan_writing_its_second_input())
    a = torch.arange(64, dtype=torch.float32)
    checked = native_executor.STATS["checked"]
    (out,) = compiled(a.numpy(), torch.zeros(64).numpy())   # check mode: inputs restored, then compared
    torch.testing.assert_close(torch.from_numpy(out), a + 1)
    (layout,) = compiled.layouts.values()
    assert layout.native[(False, ())].writes_inputs
    assert native_executor.STATS["checked"] == checked + 1
    x, y = a.to("webgpu"), torch.zeros(64).to("webgpu")
    (out,) = compiled(x, y)
    torch.testing.assert_close(y.cpu(), a + 1)   # written in place, as the Python executor does
    torch.testing.assert_close(out.cpu(), a + 1)
    program = layout.native[(True, ())].program
    runs = program.info()["runs"]
    (out,) = compiled(x, x)   # one buffer bound read-only and written: this call takes the Python executor
    assert program.info()["runs"] == runs
    torch.testing.assert_close(out.cpu(), a + 1)
    torch.testing.assert_close(x.cpu(), a + 1)


def test_device_output_calls_split_into_submits_match_one_submit(rt, compiled_plans):
    """TORCH_WEBGPU_PLAN_SPLIT: a self-submitting run in pieces of n dispatches computes what one submit
    does, and makes one submit per piece (forced here: lavapipe's default is one submit)."""
    from torch_webgpu.runtime import extension, native_queue

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(16, 16), torch.nn.ReLU())])
    model = model.eval()
    reference = copy.deepcopy(model)
    fn = torch.compile(model.to("webgpu"), backend="webgpu")
    x = torch.randn(4, 16)
    with torch.no_grad():
        whole = fn(x.to("webgpu")).cpu()
        (plan,) = compiled_plans
        (layout,) = plan.layouts.values()
        (program,) = [p for p in layout.native.values() if p is not None]
        dispatches = program.program.dispatches
        assert dispatches >= 4
        try:
            extension.module.set_plan_split(1)
            rt.synchronize()
            before = rt.submits
            pieces = fn(x.to("webgpu"))
            submits = rt.submits - before
            pieces = pieces.cpu()
        finally:
            extension.module.set_plan_split(native_queue.plan_split_dispatches(software=True))
    assert submits >= dispatches - 1   # (a last piece under half the split joins the one before)
    assert torch.equal(pieces, whole)
    torch.testing.assert_close(pieces, reference(x), rtol=1e-4, atol=1e-4)


def test_plan_split_reads_the_environment(monkeypatch):
    from torch_webgpu.runtime import native_queue

    monkeypatch.delenv("TORCH_WEBGPU_PLAN_SPLIT", raising=False)
    assert native_queue.plan_split_dispatches() == 32
    assert native_queue.plan_split_dispatches(software=True) == 0
    monkeypatch.setenv("TORCH_WEBGPU_PLAN_SPLIT", "8")
    assert native_queue.plan_split_dispatches(software=True) == 8
    for bad in ("-1", "2.5", "many"):
        monkeypatch.setenv("TORCH_WEBGPU_PLAN_SPLIT", bad)
        with pytest.raises(ValueError, match="TORCH_WEBGPU_PLAN_SPLIT"):
            native_queue.plan_split_dispatches()


def test_device_outputs_are_written_in_place_not_copied(compiled_plans):
    """An output that only its kernel writes is bound as the output tensor itself: the program has no
    copy out, and the result matches the Python executor (which copies) and torch."""
    x = torch.randn(8, 64)
    fn = torch.compile(lambda t: torch.softmax(t, -1) * 2.0, backend="webgpu")
    first = fn(x.to("webgpu"))
    (plan,) = compiled_plans
    (layout,) = plan.layouts.values()
    (program,) = [p for p in layout.native.values() if p is not None]
    assert program.program.commands == program.program.dispatches   # no copy command
    outs = [fn(x.to("webgpu")) for _ in range(3)]
    assert len({o.untyped_storage().data_ptr() for o in [first, *outs]}) == 4   # each call its own tensor
    plan.executor = "python"
    reference = fn(x.to("webgpu"))
    for out in [first, *outs]:
        assert torch.equal(out.cpu(), reference.cpu())
        torch.testing.assert_close(out.cpu(), torch.softmax(x, -1) * 2.0)
