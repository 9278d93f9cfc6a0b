"""Launch plans (ops/launch_cache.py): a repeated call signature replays its plan instead of re-planning,
a new signature builds a new plan, and replayed calls compute the same values as the first call."""

import pytest
import torch

from torch_webgpu.ops import launch_cache


def _builds() -> int:
    return launch_cache.stats()["builds"]


def _hits() -> int:
    return launch_cache.stats()["hits"]


def test_same_signature_replays_the_plan(webgpu):
    x_cpu, y_cpu = torch.randn(3, 5), torch.randn(3, 5)
    x, y = x_cpu.to(webgpu), y_cpu.to(webgpu)
    torch.add(x, y, alpha=2)  # plans this signature (or finds it planned by an earlier test)
    builds, hits = _builds(), _hits()
    for _ in range(3):
        out = torch.add(x, y, alpha=2)
        torch.testing.assert_close(out.cpu(), torch.add(x_cpu, y_cpu, alpha=2))
    assert _builds() == builds
    assert _hits() == hits + 3
    # new values of the same shapes: still the same plan, fresh results
    u_cpu, v_cpu = torch.randn(3, 5), torch.randn(3, 5)
    torch.testing.assert_close(torch.add(u_cpu.to(webgpu), v_cpu.to(webgpu), alpha=2).cpu(),
                               torch.add(u_cpu, v_cpu, alpha=2))
    assert _builds() == builds


def test_new_shape_strides_or_scalar_builds_a_new_plan(webgpu):
    x_cpu = torch.randn(4, 6)
    x = x_cpu.to(webgpu)
    torch.mul(x, 3.0)
    builds = _builds()
    torch.mul(x, 3.0)
    assert _builds() == builds
    cases = [
        (lambda t: torch.mul(t, 5.0), lambda t: torch.mul(t, 5.0)),  # another scalar
        (lambda t: torch.mul(t[:2], 3.0), lambda t: torch.mul(t[:2], 3.0)),  # another shape
        (lambda t: torch.mul(t.t(), 3.0), lambda t: torch.mul(t.t(), 3.0)),  # other strides
        (lambda t: torch.mul(t[1:], 3.0), lambda t: torch.mul(t[1:], 3.0)),  # another storage offset
    ]
    for on_webgpu, on_cpu in cases:
        before = _builds()
        torch.testing.assert_close(on_webgpu(x).cpu(), on_cpu(x_cpu))
        assert _builds() == before + 1
        torch.testing.assert_close(on_webgpu(x).cpu(), on_cpu(x_cpu))
        assert _builds() == before + 1


def test_plans_over_all_kernels_stay_bounded(webgpu, monkeypatch):
    # a loop over ever-new shapes (a growing KV cache) must not hold a plan per shape per kernel forever
    monkeypatch.setattr(launch_cache, "MAX_TOTAL_PLANS", launch_cache.plans_held() + 6)
    limit = launch_cache.MAX_TOTAL_PLANS
    held = [launch_cache.plans_held()]
    for n in range(1, 13):
        x_cpu = torch.randn(n, 3)
        x = x_cpu.to(webgpu)
        torch.testing.assert_close(torch.relu(x * 2.0).cpu(), torch.relu(x_cpu * 2.0))
        held.append(launch_cache.plans_held())
        assert held[-1] <= limit
    assert any(b < a for a, b in zip(held, held[1:], strict=False))   # the tables started over at least once
    torch.testing.assert_close(torch.relu(x * 2.0).cpu(), torch.relu(x_cpu * 2.0))


def test_signed_zero_scalars_get_their_own_plans(webgpu):
    x = torch.tensor([-1.0, 2.0], device=webgpu)
    plus, minus = torch.mul(x, 0.0).cpu(), torch.mul(x, -0.0).cpu()
    assert torch.signbit(plus).tolist() == [True, False]
    assert torch.signbit(minus).tolist() == [False, True]


def test_aliased_operands_get_their_own_plans(webgpu):
    a_cpu, b_cpu = torch.randn(8), torch.randn(8)
    a, b = a_cpu.to(webgpu), b_cpu.to(webgpu)
    torch.testing.assert_close(torch.sub(a, b).cpu(), a_cpu - b_cpu)
    torch.testing.assert_close(torch.sub(a, a).cpu(), torch.zeros(8))
    torch.testing.assert_close(torch.sub(a, b).cpu(), a_cpu - b_cpu)


def test_inplace_and_out_replay_into_the_given_tensor(webgpu):
    a_cpu, b_cpu = torch.randn(4, 4), torch.randn(4)
    a, b = a_cpu.to(webgpu), b_cpu.to(webgpu)
    out = torch.empty(4, 4, device=webgpu)
    for _ in range(3):
        assert a.mul_(b) is a
        a_cpu.mul_(b_cpu)
        assert torch.maximum(a, b, out=out) is out
        torch.testing.assert_close(out.cpu(), torch.maximum(a_cpu, b_cpu))
    torch.testing.assert_close(a.cpu(), a_cpu)


def test_reduction_and_matmul_replay(webgpu):
    x_cpu, w_cpu = torch.randn(5, 7), torch.randn(7, 3)
    x, w = x_cpu.to(webgpu), w_cpu.to(webgpu)
    for _ in range(2):
        torch.testing.assert_close(x.sum(1).cpu(), x_cpu.sum(1))
        torch.testing.assert_close((x @ w).cpu(), x_cpu @ w_cpu, rtol=1e-5, atol=1e-5)
        values, indices = x.max(0)
        expected = x_cpu.max(0)
        torch.testing.assert_close(values.cpu(), expected.values)
        torch.testing.assert_close(indices.cpu(), expected.indices)
    builds = _builds()
    x.sum(1), x @ w, x.max(0)
    assert _builds() == builds


def test_two_pass_reductions_replay_with_scratch_buffers(webgpu):
    # a long row is reduced into partials (a scratch buffer the call allocates and frees), then combined
    x_cpu = torch.randn(3, 1 << 17)
    x = x_cpu.to(webgpu)
    results = []
    for step in range(4):
        if step == 2:   # the first call may tune its kernels, the second then builds the plan
            stats = launch_cache.stats()
        results.append((x.sum(), x.mean(1), *x.max(1)))
    after = launch_cache.stats()
    assert after["unplanned"] == stats["unplanned"]
    assert after["hits"] - stats["hits"] == 6 and after["builds"] == stats["builds"]
    for total, mean, values, indices in results:
        torch.testing.assert_close(total.cpu(), x_cpu.sum(), rtol=1e-4, atol=1e-2)
        torch.testing.assert_close(mean.cpu(), x_cpu.mean(1), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(values.cpu(), x_cpu.max(1).values)
        torch.testing.assert_close(indices.cpu(), x_cpu.max(1).indices)
    x.add_(1.0)   # the same buffers, new contents: a replay reads them, not the first call's results
    x_cpu.add_(1.0)
    torch.testing.assert_close(x.sum().cpu(), x_cpu.sum(), rtol=1e-4, atol=1e-2)


def test_a_buffer_the_kernel_keeps_is_not_replayed_as_scratch(webgpu):
    kept: dict = {}

    @launch_cache.planned
    def add_kept(t):
        if "c" not in kept:
            kept["c"] = t * 0.0 + 1.0   # made by the first call's dispatches and kept: not its scratch
        return torch.add(t, kept["c"])

    x_cpu = torch.randn(8)
    x = x_cpu.to(webgpu)
    for step in range(3):
        torch.testing.assert_close(add_kept(x).cpu(), x_cpu + 1 + step)
        kept["c"].add_(1.0)


def _replays(call, cpu_call, dispatches: int | None = None) -> None:
    """`call()` matches `cpu_call()` on its first and repeated calls; the repeats replay a plan (of
    `dispatches` dispatches where given)."""
    from torch_webgpu.runtime import get_runtime

    def check(got, want):
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)

    check(call(), cpu_call())
    rt = get_runtime()
    builds, hits, before = _builds(), _hits(), rt.dispatches
    for _ in range(2):
        check(call(), cpu_call())
    assert _builds() == builds
    assert _hits() > hits
    if dispatches is not None:
        assert rt.dispatches - before == 2 * dispatches


def test_model_ops_replay(webgpu):
    """The ops of the benchmark CNN and transformer forwards replay plans: eval batch norm is one
    dispatch, layer norm returns views of one statistics buffer, embedding / gather / max pooling."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    x, mean, var = torch.randn(2, 4, 5, 6), torch.randn(4), torch.rand(4) + 0.5
    w, b = torch.randn(4), torch.randn(4)
    dev = [t.to(webgpu) for t in (x, mean, var, w, b)]
    _replays(lambda: F.batch_norm(*dev[:3], dev[3], dev[4], False, 0.1, 1e-5),
             lambda: F.batch_norm(x, mean, var, w, b, False, 0.1, 1e-5), dispatches=1)
    _replays(lambda: F.batch_norm(*dev[:3], None, dev[4], False, 0.1, 1e-3),
             lambda: F.batch_norm(x, mean, var, None, b, False, 0.1, 1e-3), dispatches=1)
    h = torch.randn(3, 7, 16)
    lw, lb = torch.randn(16), torch.randn(16)
    hd, lwd, lbd = h.to(webgpu), lw.to(webgpu), lb.to(webgpu)
    _replays(lambda: torch.ops.aten.native_layer_norm(hd, [16], lwd, lbd, 1e-5),
             lambda: torch.ops.aten.native_layer_norm(h, [16], lw, lb, 1e-5))
    table, ids = torch.randn(10, 8), torch.randint(0, 10, (2, 5))
    td, idd = table.to(webgpu), ids.to(webgpu)
    _replays(lambda: F.embedding(idd, td), lambda: F.embedding(ids, table), dispatches=1)
    _replays(lambda: torch.gather(td, 1, idd[:, :3] % 8), lambda: torch.gather(table, 1, ids[:, :3] % 8))
    _replays(lambda: F.max_pool2d(dev[0], 3, 2, 1, return_indices=True),
             lambda: F.max_pool2d(x, 3, 2, 1, return_indices=True), dispatches=1)


def test_a_call_that_tuned_its_kernel_is_planned_by_the_next(webgpu, tmp_path, monkeypatch):
    """The first call of a problem may time candidates (autotune: dispatches and waits of its own); that
    call is not planned, and its signature is not written off: the next call plans the winner."""
    from torch_webgpu.kernels import autotune

    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE", "1")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_MIN_FLOPS", "0")
    monkeypatch.setenv("TORCH_WEBGPU_AUTOTUNE_DIR", str(tmp_path))
    autotune.forget()
    try:
        x_cpu, w_cpu = torch.randn(37, 45), torch.randn(45, 29)
        x, w = x_cpu.to(webgpu), w_cpu.to(webgpu)
        tuned, builds = autotune.tunings(), _builds()
        torch.testing.assert_close((x @ w).cpu(), x_cpu @ w_cpu, rtol=1e-4, atol=1e-4)
        assert autotune.tunings() > tuned
        assert _builds() == builds
        hits = _hits()
        for _ in range(2):
            torch.testing.assert_close((x @ w).cpu(), x_cpu @ w_cpu, rtol=1e-4, atol=1e-4)
        assert _builds() == builds + 1
        assert _hits() == hits + 1
    finally:
        autotune.forget()


def test_calls_that_raise_are_not_planned(webgpu):
    a = torch.randn(3, device=webgpu)
    b = torch.randn(4, device=webgpu)
    builds = _builds()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="broadcast"):
            torch.add(a, b)
    assert _builds() == builds


def test_out_resized_by_the_call_is_not_planned(webgpu):
    a_cpu = torch.randn(6)
    a = a_cpu.to(webgpu)
    builds = _builds()
    out = torch.empty(0, device=webgpu)
    torch.neg(a, out=out)  # resizes `out`: replaying would skip the resize
    assert _builds() == builds
    torch.testing.assert_close(out.cpu(), -a_cpu)


def test_random_kernels_are_not_planned(webgpu):
    x = torch.empty(64, device=webgpu)
    builds = _builds()
    first = x.uniform_().cpu().clone()
    second = x.uniform_().cpu()
    assert not torch.equal(first, second)  # a replayed plan would repeat the generator's offset
    assert _builds() == builds


def test_uploads_are_not_planned(webgpu):
    builds = _builds()
    for value in (1.5, 1.5, -2.0):
        t = torch.full((3,), value).to(webgpu)
        torch.testing.assert_close(t.cpu(), torch.full((3,), value))
        scalar = torch.tensor(value).to(webgpu)
        assert scalar.item() == value
    assert _builds() == builds


def test_foreach_ops_replay_over_tensor_lists(webgpu):
    params_cpu = [torch.randn(4, 3), torch.randn(5)]
    grads_cpu = [torch.randn(4, 3), torch.randn(5)]
    params = [p.to(webgpu) for p in params_cpu]
    grads = [g.to(webgpu) for g in grads_cpu]
    builds = None
    for step in range(3):
        torch._foreach_add_(params, grads, alpha=-0.1)  # in place: returns None
        torch._foreach_add_(params_cpu, grads_cpu, alpha=-0.1)
        roots = torch._foreach_sqrt([p.abs() for p in params])
        for root, p_cpu in zip(roots, params_cpu, strict=True):
            torch.testing.assert_close(root.cpu(), p_cpu.abs().sqrt())
        if step == 0:
            builds = _builds()
    assert _builds() == builds
    for p, p_cpu in zip(params, params_cpu, strict=True):
        torch.testing.assert_close(p.cpu(), p_cpu)


_NATIVE_CASES = {
    "add": lambda a, b: torch.add(a, b, alpha=2),
    "mul_scalar": lambda a, b: a * 2.0,
    "relu": lambda a, b: torch.relu(a),
    "sum": lambda a, b: a.sum(),
    "sum_dim": lambda a, b: a.sum(1, keepdim=True),
    "softmax": lambda a, b: torch.softmax(a, -1),
    "mm": lambda a, b: a @ b,
    "aliased_sub": lambda a, b: a - a,
    "where": lambda a, b: torch.where(a > 0, a, b),
    "max_dim": lambda a, b: a.max(1),
    "transposed_add": lambda a, b: a.t() + b,
    "sliced_mul": lambda a, b: a[2:, 1:] * b[2:, 1:],
}


@pytest.mark.parametrize("name", sorted(_NATIVE_CASES))
def test_native_eager_launches_match_the_python_path(webgpu, name):
    from torch_webgpu.runtime import native_eager

    fn = _NATIVE_CASES[name]
    a_cpu, b_cpu = torch.randn(16, 16), torch.randn(16, 16)
    a, b = a_cpu.to(webgpu), b_cpu.to(webgpu)
    expected = fn(a_cpu, b_cpu)
    fn(a, b)  # builds the plan (or finds it)
    records = native_eager.STATS["records"]
    with native_eager.python_launches():
        python = [fn(a, b) for _ in range(2)]
    assert native_eager.STATS["records"] == records
    native = [fn(a, b) for _ in range(2)]
    if native_eager.native_eager_enabled(torch_webgpu_runtime()):
        assert native_eager.STATS["records"] >= records + 2
    for got in python + native:
        torch.testing.assert_close(_cpu(got), _cpu(expected))


def test_native_eager_chain_with_inplace_copies_and_freed_inputs(webgpu):
    x_cpu = torch.randn(64)
    for _ in range(2):  # the second round replays every plan
        x = x_cpu.to(webgpu)
        y = torch.relu(x * 3.0)
        y.add_(x)                # in place, replayed into y
        z = y.clone()            # a copy between replays ends the native pass
        z.mul_(2.0)
        t = (x + 1.0) * 2.0
        del x                    # freed while its dispatches are queued
        filler = torch.zeros(64, device=webgpu)  # may reuse its GPU buffer
        torch.testing.assert_close(z.cpu(), (torch.relu(x_cpu * 3.0) + x_cpu) * 2.0)
        torch.testing.assert_close(t.cpu(), (x_cpu + 1.0) * 2.0)
        assert not filler.cpu().any()


def test_replays_take_back_freed_buffers_of_their_size_without_the_runtime(webgpu):
    from torch_webgpu.runtime import get_runtime
    pool = get_runtime().pool
    x_cpu = torch.randn(300)
    x = x_cpu.to(webgpu)
    allocated = torch.webgpu.memory_allocated()   # (drains what C++ recycles to the pool)
    for _ in range(3):   # plans, then replays: ids rotate (the old y dies after the new one is made)
        y = torch.relu(x * 2.0)
    last_id, created = pool.last_id, pool.created
    for _ in range(6):
        y = torch.relu(x * 2.0)
    assert pool.last_id == last_id and pool.created == created   # no allocation reached the runtime
    torch.testing.assert_close(y.cpu(), torch.relu(x_cpu * 2.0))
    del y
    # the recycled ids are released to the pool by the statistics' drain
    assert torch.webgpu.memory_allocated() == allocated


def test_a_loop_with_scratch_and_scalars_takes_back_every_buffer_without_the_runtime(webgpu):
    """A two-pass sum (a scratch buffer per call) and three 4-byte results per iteration: once warm, every
    output and scratch buffer is a recycled id, none allocated through Python (an allocation's drain used
    to hand all recycled ids back to the pool, so the loop kept allocating through it)."""
    from torch_webgpu.runtime import get_runtime
    pool = get_runtime().pool
    a_cpu = torch.randn(1 << 18)
    a, b = a_cpu.to(webgpu), torch.randn(64).to(webgpu)
    for _ in range(4):
        s = a.sum() + 0 * b[0]
    last_id = pool.last_id
    for _ in range(8):
        s = a.sum() + 0 * b[0]
    assert pool.last_id == last_id
    torch.testing.assert_close(s.cpu(), a_cpu.sum(), rtol=1e-4, atol=1e-3)


def _eager_bind_groups_created() -> int:
    """Bind groups the native programs of every launch plan have made so far."""
    return sum(plan.native.program.info()["bind_groups_created"] for table in launch_cache._tables
               for plan in table.values()
               if plan is not None and plan.native not in (None, launch_cache._UNSEEN))


def test_a_loop_reassigning_its_result_makes_no_bind_groups_once_warm(webgpu):
    """`y = f(y_or_x)` alternates each op's output between buffers; every dispatch keeps the bind groups of
    its recent buffers, so a warm loop makes none (making them cost more than the rest of the op)."""
    from torch_webgpu.runtime import get_runtime, native_eager
    if not native_eager.native_eager_enabled(get_runtime()):
        pytest.skip("native eager launches are off")
    x_cpu = torch.randn(4096)
    x, b = x_cpu.to(webgpu), torch.randn(64).to(webgpu)
    for _ in range(10):   # the sum reads y (two buffers in turn) into one of three: six bind groups
        y = torch.relu(x)
        s = y.sum() + 0 * b[0]
    made = _eager_bind_groups_created()
    for _ in range(8):
        y = torch.relu(x)
        s = y.sum() + 0 * b[0]
    assert _eager_bind_groups_created() == made
    torch.testing.assert_close(s.cpu(), x_cpu.relu().sum(), rtol=1e-5, atol=1e-3)


def test_recording_sees_replayed_dispatches(webgpu):
    from torch_webgpu.runtime.capture import recording

    a = torch.randn(8, device=webgpu)
    torch.neg(a)
    torch.neg(a)
    with recording() as capture:
        out = torch.neg(a)
    assert len(capture) == 1  # a replay inside a recording goes through runtime.dispatch
    torch.testing.assert_close(out.cpu(), -a.cpu())


def torch_webgpu_runtime():
    from torch_webgpu.runtime import get_runtime

    return get_runtime()


def _cpu(value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    return type(value)(v.cpu() for v in value)


def test_native_plan_keys_distinguish_what_python_signatures_do(webgpu):
    if launch_cache._plan_key is None:
        pytest.skip("TORCH_WEBGPU_EAGER_LAUNCH=python or an _C without _plan_key: Python keys only")
    x, y = torch.randn(4, 4, device=webgpu), torch.randn(4, 4, device=webgpu)
    calls = [((x,), {}), ((x.t(),), {}), ((x[1:],), {}), ((x[:, :2],), {}), ((y,), {}),
             ((x.half(),), {}), ((x, 0.0), {}), ((x, -0.0), {}), ((x, 1), {}), ((x, True), {}),
             ((x, 1.0), {}), ((x, [1, 2]), {}), ((x, (1, 2)), {}), ((x, [True, 2]), {}), ((x, None), {}),
             ((x, torch.float16), {}), ((x, "mean"), {}), ((x, y), {}), ((x, x), {}), ((x, x.t()), {}),
             ((x, torch.tensor(2.0)), {}), ((x, torch.tensor(2)), {}), ((x, torch.tensor(-0.0)), {}),
             (([x, y],), {}), (([x, x],), {}), ((x,), {"alpha": 2}), ((x,), {"beta": 2}),
             ((x,), {"alpha": 2.0})]
    native, python = [], []
    for args, kwargs in calls:
        nt, ni, pt, pi = [], [], [], []
        key = launch_cache._plan_key(args, kwargs, nt, ni)
        assert key is not None, (args, kwargs)
        native.append(key)
        python.append(launch_cache._signature(args, kwargs, pt, pi))
        assert ni == pi and all(a is b for a, b in zip(nt, pt, strict=True))
    for i in range(len(calls)):
        for j in range(len(calls)):
            assert (native[i] == native[j]) == (python[i] == python[j]), (calls[i], calls[j])
    # what C++ does not know goes to Python: other devices' tensors, float subclasses, ...
    assert launch_cache._plan_key((x, torch.randn(2, 2)), {}, [], []) is None
    assert launch_cache._plan_key((x, torch.device("cpu")), {}, [], []) is None


_OPINFO_REPLAYED = ["add", "mul", "sub", "div.no_rounding_mode", "neg", "exp", "nn.functional.relu", "sum",
                    "mean", "amax", "softmax", "log_softmax", "mm", "matmul", "bmm", "addmm", "where",
                    "clamp", "maximum", "nn.functional.gelu", "cumsum", "nn.functional.silu", "abs"]


@pytest.mark.parametrize("name", _OPINFO_REPLAYED)
def test_opinfo_samples_replay_natively_bit_for_bit_as_in_python(webgpu, name):
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.utils._pytree import tree_flatten, tree_map

    from torch_webgpu.runtime import native_eager

    from .opinfo_runner import _compare, _to_webgpu, _webgpu_kwargs, opinfo_name

    op = next(o for o in op_db if opinfo_name(o) == name)
    checked, records = 0, native_eager.STATS["records"]
    for sample in list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[:8]:
        args = (sample.input, *sample.args)
        expected = op(*args, **sample.kwargs)
        wargs, wkwargs = tree_map(_to_webgpu, args), _webgpu_kwargs(sample.kwargs)
        op(*wargs, **wkwargs)  # plans the signature
        with native_eager.python_launches():
            python = op(*wargs, **wkwargs)
        native = op(*wargs, **wkwargs)
        _compare(native, expected)
        for p, n in zip(tree_flatten(python)[0], tree_flatten(native)[0], strict=True):
            if isinstance(p, torch.Tensor):
                torch.testing.assert_close(n.cpu(), p.cpu(), rtol=0, atol=0, equal_nan=True)
        checked += 1
    assert checked
    if native_eager.native_eager_enabled(torch_webgpu_runtime()):
        assert native_eager.STATS["records"] > records  # some sample replayed natively
