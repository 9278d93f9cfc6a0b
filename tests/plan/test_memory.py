"""Plan buffers whose live ranges do not overlap share one storage (plan/memory.py): no two
simultaneously live buffers share, the rules that keep a buffer its own storage hold, and shared plans give
the same bits as unshared ones (MLP, tiny Llama decode, a bundle round trip); load-time tuning binds the
weights in place instead of scratch copies of them."""

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn

import torch_webgpu
from torch_webgpu.bundle.loader import load_plan
from torch_webgpu.compiler.webgpu_compiler import STATS
from torch_webgpu.plan import lowering
from torch_webgpu.plan.format import ExecutableSpec, LowIRNode, LowIROp, Plan, TensorSpec
from torch_webgpu.plan.memory import ENV, assign_memory, check_assignment, live_ranges
from torch_webgpu.plan.tuning import tune_plan


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64),
                         nn.GELU(), nn.Linear(64, 16)).eval()


def _compiled(model, monkeypatch, share: bool):
    """`model` through torch.compile(backend="webgpu") with plan memory sharing on or off (a fresh
    dynamo compile; the plan comes from the compile cache the second time)."""
    torch._dynamo.reset()
    monkeypatch.setenv(ENV, "1" if share else "0")
    return torch.compile(model, backend="webgpu")


def test_mlp_buffers_share_and_results_equal_the_unshared_plan(monkeypatch):
    model = _mlp()
    xs = [torch.randn(8, 32), torch.randn(8, 32)]
    with torch.no_grad():
        unshared = _compiled(model, monkeypatch, share=False)
        want = [unshared(x) for x in xs]
        shared = _compiled(model, monkeypatch, share=True)
        first, second = shared(xs[0]), shared(xs[1])
        expected = model(xs[0])
    plan = STATS.plans[-1]
    assigned, report = assign_memory(plan)
    check_assignment(plan, assigned)
    assert report.shared >= 2 and report.after < report.before
    # each call's output is the caller's own: the second call leaves the first one's intact
    torch.testing.assert_close(first, want[0], atol=0, rtol=0)
    torch.testing.assert_close(second, want[1], atol=0, rtol=0)
    torch.testing.assert_close(first, expected, atol=1e-4, rtol=1e-4)
    # device outputs too: copies, so a later call does not clobber an output the caller holds
    with torch.no_grad():
        on_device = _compiled(copy.deepcopy(model).to("webgpu"), monkeypatch, share=True)
        held = on_device(xs[0].to("webgpu"))
        on_device(xs[1].to("webgpu"))
    torch.testing.assert_close(held.cpu(), want[0], atol=1e-6, rtol=1e-6)


def test_tiny_llama_decode_shares_and_matches(monkeypatch):
    pytest.importorskip("transformers")
    from transformers import LlamaForCausalLM

    from benchmarks.llama_decode import LlamaStaticDecode, decode_inputs, llama_1b_config

    torch.manual_seed(0)
    cfg = llama_1b_config(tiny=True)
    step = LlamaStaticDecode(LlamaForCausalLM(cfg).eval(), max_len=16).eval()
    args = decode_inputs(cfg, 16, 3)
    with torch.no_grad():
        expected = step(*args)
        want = _compiled(step, monkeypatch, share=False)(*args)
        got = _compiled(step, monkeypatch, share=True)(*args)
    plan = STATS.plans[-1]
    assigned, report = assign_memory(plan)
    check_assignment(plan, assigned)
    assert report.after < report.before
    for g, w, e in zip(got, want, expected, strict=True):
        torch.testing.assert_close(g, w, atol=0, rtol=0)
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


def test_bundle_round_trip_runs_the_shared_plan(tmp_path):
    model = _mlp()
    x = torch.randn(4, 32)
    path = torch_webgpu.export(model, [x], tmp_path / "mlp", target="webgpu-core")
    _, plan = load_plan(path)
    assert all(not name.startswith("mem") for name in plan.buffers)   # bundles keep the plan as compiled
    bundle = torch_webgpu.load(path)
    memory = bundle._compiled.memory
    assert memory is not None and memory.after < memory.before
    with torch.no_grad():
        np.testing.assert_allclose(bundle(x.numpy()), model(x).numpy(), atol=1e-4)


def _plan(buffers, main, init=()):
    spec = ExecutableSpec("k", "k.wgsl", [1, 1, 1], {0: 0, 1: 1}, read_only=[0])
    io = [TensorSpec([4], "float32", "float32")]
    return Plan(inputs=io, outputs=list(io), output_map=[0], buffers=buffers, init=list(init), main=main,
                executables={"k": spec})


def _dispatch(src, dst):
    return LowIRNode(LowIROp.DISPATCH, {"entry_point": "k", "workgroups": [1, 1, 1], "constants": [],
                                        "bindings": [[src, 0, 256], [dst, 0, 256]]})


def test_rules_keep_globals_init_buffers_state_and_dynamic_sizes():
    # in0 -> t0 -> t1 -> t2 -> t3 -> output t3: t0/t2 and t1/t3 may pair up; the others keep their storage
    main = [LowIRNode(LowIROp.ALLOCATE, {"buffer": "t0"}), _dispatch("in0", "t0"), _dispatch("t0", "t1"),
            LowIRNode(LowIROp.FREE, {"buffer": "t0"}), _dispatch("t1", "t2"), _dispatch("t2", "t3"),
            _dispatch("g0", "t4"), _dispatch("t5", "t4"), _dispatch("t6", "t4"), _dispatch("t4", "t7"),
            LowIRNode(LowIROp.COPY, {"source": "t7", "source_offset": 0, "buffer": "t3", "offset": 0,
                                     "size": 256}),
            LowIRNode(LowIROp.OUTPUT, {"index": 0, "buffer": "t3", "offset": 0, "size": 16})]
    init = [_dispatch("t6", "t6")]
    sizes = {f"t{k}": 256 for k in range(8)} | {"g0": 256, "t7": ["dim", 0, 0]}
    plan = _plan(sizes, main, init)
    assigned, report = assign_memory(plan)
    check_assignment(plan, assigned)
    assert report.kept == {"g0": "IREE global (persists across calls)", "t5": "read before written in a call",
                           "t6": "used by the init nodes", "t7": "size depends on the input shapes"}
    ranges, _ = live_ranges(plan)
    assert ranges["t3"] == (5, len(main) - 1)   # an output lives to the end of the call
    slots = {frozenset(m) for m in report.slots.values()}
    assert frozenset({"t0", "t2"}) in slots or frozenset({"t0", "t2", "t4"}) in slots
    assert not any({"t2", "t3"} <= s or {"t3", "t4"} <= s for s in slots)   # live at once: apart
    assert not any(n.op in (LowIROp.ALLOCATE, LowIROp.FREE) for n in assigned.main)
    assert set(plan.buffers) == set(sizes) and plan.main[1].args["bindings"][1][0] == "t0"   # untouched


def test_tuning_reads_weights_in_place(monkeypatch, tmp_path, rt, tuning_here):
    torch.manual_seed(0)
    model = nn.Linear(256, 128, bias=False).eval()
    _, plan = load_plan(torch_webgpu.export(model, [torch.randn(4, 256)], tmp_path / "linear",
                                            target="webgpu-core"))
    assert any("tune" in n.args for n in plan.main) and plan.num_constant_inputs
    weight = 256 * 128 * 4
    n_user = len(plan.inputs)   # lifted constants are the plan's inputs after the graph's
    resident = {f"in{n_user + j}": (rt.allocate(max(v.nbytes, 4)), 0)
                for j, v in enumerate(list(plan.constants.values())[:plan.num_constant_inputs])}
    sizes = []
    allocate = rt.allocate
    monkeypatch.setattr(rt, "allocate", lambda n, *a, **k: sizes.append(n) or allocate(n, *a, **k))
    try:
        tune_plan(plan, rt, resident=resident)
    finally:
        monkeypatch.setattr(rt, "allocate", allocate)
        for buf, _ in resident.values():
            rt.free(buf)
    assert sizes and max(sizes) < weight   # scratch for the activations only, never a weight-sized one


def test_in_buffer_copies_share_one_scratch_buffer():
    # two copies within one buffer each bounce through scratch (WebGPU refuses them): one pooled buffer
    def copy_node(src, src_offset, dst, offset):
        return LowIRNode(LowIROp.COPY, {"source": src, "source_offset": src_offset, "buffer": dst,
                                        "offset": offset, "size": 256})

    io = [TensorSpec([64], "float32", "float32")]
    plan = Plan(inputs=io, outputs=list(io), output_map=[0], buffers={"t0": 1024}, init=[],
                main=[copy_node("in0", 0, "t0", 0), copy_node("t0", 0, "t0", 256),
                      copy_node("t0", 256, "t0", 512),
                      LowIRNode(LowIROp.OUTPUT, {"index": 0, "buffer": "t0", "offset": 512, "size": 256})],
                executables={})
    compiled = lowering(plan)
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(compiled(x)[0], x)
    scratch = compiled.buffers.scratch_buffers
    assert len(scratch) == 2 and len(set(scratch.values())) == 1


def test_loading_a_tuned_plan_holds_its_weight_once(monkeypatch, tmp_path, rt, tuning_here):
    torch.manual_seed(0)
    model = nn.Linear(256, 128, bias=False).eval()
    x = torch.randn(4, 256)
    _, plan = load_plan(torch_webgpu.export(model, [x], tmp_path / "linear", target="webgpu-core"))
    sizes = []
    allocate = rt.allocate
    monkeypatch.setattr(rt, "allocate", lambda n, *a, **k: sizes.append(n) or allocate(n, *a, **k))
    try:
        compiled = lowering(plan)
    finally:
        monkeypatch.setattr(rt, "allocate", allocate)
    assert [n for n in sizes if n >= 256 * 128 * 4] == [256 * 128 * 4]   # the weight, no scratch copy
    with torch.no_grad():
        np.testing.assert_allclose(compiled(x.numpy())[0], model(x).numpy(), atol=1e-4)
