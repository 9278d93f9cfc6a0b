"""The partition of aten graphs at library ops (CPU only: no IREE, no device)."""

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torch_webgpu.compiler.families.matmul import LibraryOp
from torch_webgpu.compiler.partition import Segment, partition
from torch_webgpu.kernels.launch import DeviceCaps


def _partition(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    return partition(gm, DeviceCaps.portable())


def test_transposed_weight_bias_and_activation_are_one_library_op():
    part = _partition(lambda x, w, b: (torch.relu(x @ w.t() + b),),
                      torch.randn(4, 16), torch.randn(8, 16), torch.randn(8))
    (op,) = part.steps
    assert isinstance(op, LibraryOp) and op.activation == "relu" and op.bias is not None
    # w [8, 16] read as B [16, 8] through its strides: no transpose materialized.
    assert op.b.layout((1, 16, 8)).row_stride == 1 and op.b.layout((1, 16, 8)).col_stride == 16
    assert op.bias.layout((1, 4, 8)).row_stride == 0


def test_segments_run_before_the_library_ops_that_read_them():
    def fn(x, w1, w2):
        h = torch.softmax(x @ w1, 0)   # over the first dim: IREE's (the library's rows are the last dim)
        return (torch.layer_norm(h @ w2, [4]),)
    part = _partition(fn, torch.randn(3, 5), torch.randn(5, 6), torch.randn(6, 4))
    kinds = [type(s).__name__ for s in part.steps]
    assert kinds == ["LibraryOp", "Segment", "LibraryOp", "RowOp"]
    softmax = part.steps[1]
    assert isinstance(softmax, Segment) and softmax.inputs == [part.steps[0].final]
    assert part.steps[3].x.base is part.steps[2].final   # layer_norm reads the matmul's result


def test_residual_add_after_activation_and_scale_before_bias():
    def fn(x, w, r):
        return (torch.tanh((x @ w) * 0.5 + 1.0) + r,)
    part = _partition(fn, torch.randn(2, 3), torch.randn(3, 4), torch.randn(2, 4))
    # `+ 1.0` is a Python scalar, not a tensor: only the scale is absorbed; tanh and + r stay with IREE.
    op = part.steps[0]
    assert isinstance(op, LibraryOp) and op.alpha == 0.5


def test_graph_without_library_ops_is_not_partitioned():
    assert _partition(lambda x: (torch.relu(x) + 1,), torch.randn(3)) is None


def test_scaled_operands_fold_into_alpha_and_clones_are_read_in_place():
    def fn(x, w):
        return ((x * 0.5).clone() @ (w.t() * 4.0),)
    part = _partition(fn, torch.randn(3, 5), torch.randn(6, 5))
    (op,) = part.steps
    assert isinstance(op, LibraryOp) and op.alpha == 2.0
    assert op.a.base.op == "placeholder" and op.b.base.op == "placeholder"


def test_a_view_the_strides_cannot_express_reads_the_materialized_copy():
    def fn(q, k):   # [B, H, T, D] heads merged into one batch dim after a permute: not one stride
        qh, kh = q.permute(0, 2, 1, 3), k.permute(0, 2, 3, 1)
        return (torch.bmm(qh.clone().reshape(4, 3, 8), kh.clone().reshape(4, 8, 3)),)
    part = _partition(fn, torch.randn(2, 3, 2, 8), torch.randn(2, 3, 2, 8))
    op = part.library_ops[0]
    assert op.a.base.target is torch.ops.aten.clone.default and op.a.base in part.forced


def _f16_caps(**extra):
    return DeviceCaps(features=frozenset({"shader-f16", "subgroups", *extra.pop("features", ())}),
                      limits=dict(DeviceCaps.portable().limits), subgroup_size=32, **extra)


def test_float16_linear_computed_in_float32_by_the_decomposition_is_one_f16_library_op():
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    # The addmm decomposition casts x, W and b to f32 and the result back (relu then runs in f16): one
    # f16 matmul here, its epilogue across the cast.
    gm = make_fx(lambda x, w, b: (torch.relu(torch.nn.functional.linear(x, w, b)),),
                 decomposition_table=get_decomposition_table(), tracing_mode="fake")(
        torch.randn(4, 16, dtype=torch.float16), torch.randn(8, 16, dtype=torch.float16),
        torch.randn(8, dtype=torch.float16))
    assert any(n.target is torch.ops.prims.convert_element_type.default for n in gm.graph.nodes)
    part = partition(gm, _f16_caps())
    (op,) = part.library_ops
    assert op.dtype == "f16" and op.activation == "relu" and op.bias is not None
    assert all(o.base.meta["val"].dtype == torch.float16 for o in op.operands())
    assert op.final.meta["val"].dtype == torch.float16
    # Without shader-f16 it stays an f32 matmul of the casts.
    (op32,) = partition(gm, DeviceCaps.portable()).library_ops
    assert op32.dtype == "f32"
