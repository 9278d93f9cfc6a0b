"""One KernelFamily protocol (issue 40): every family answers variants, steps and its problem key the same
way, the eager device's strided kernels included, so the eager choose-and-record loop and a compiled plan's
candidates are written once."""

from __future__ import annotations

import pytest

from torch_webgpu.kernels import attention, autotune, conv, matmul, quant_matmul, rows
from torch_webgpu.kernels.family import KernelFamily, candidates
from torch_webgpu.kernels.launch import KernelLaunch

L = matmul.Layout


def _cases():
    yield "matmul", matmul.FAMILY, matmul.MatmulProblem(1, 33, 48, 64, L(0, 0, 64, 1), L(0, 0, 48, 1),
                                                        L(0, 0, 48, 1), activation="gelu")
    yield "matmul-split", matmul.FAMILY, matmul.MatmulProblem(1, 197, 72, 1024, L(0, 0, 1024, 1),
                                                              L(0, 0, 1, 1024), L(0, 0, 72, 1))
    yield "matmul-general", matmul.FAMILY, matmul.MatmulProblem(2, 5, 7, 9, L(0, 45, 9, 1), L(0, 63, 1, 9),
                                                                L(0, 35, 7, 1), dtype="i32")
    yield "quant", quant_matmul.FAMILY, quant_matmul.QuantMatmulProblem(
        3, 64, 256, L(0, 0, 256, 1), L(0, 0, 64, 1), quant_matmul.QuantWeight("i4", 32, True))
    yield "rows", rows.FAMILY, rows.RowProblem("layer_norm", "f32", 8, 300, weight=True, stats=True)
    yield "rows-strided", rows.STRIDED_FAMILY, rows.StridedRowProblem(
        "softmax", "bf16", (3, 5, 7), 1, rows.View(2, (35, 1, 5)), rows.View(0, (35, 7, 1)))
    yield "conv", conv.FAMILY, conv.Conv2dProblem(1, 8, 9, 9, 16, 3, 3, padding=(1, 1), bias=conv.Strided1())
    yield "conv-direct", conv.DIRECT_FAMILY, conv.DirectConvProblem(
        "wgrad", (16, 4, 3, 3), conv.Strided4(0, (480, 30, 6, 1)), (2, 16, 5, 6),
        conv.Strided4(0, (960, 120, 12, 1)), (2, 8, 10, 12), (2, 2), (1, 1), (1, 1), (3, 3), 4, 8, "bf16",
        "bf16")
    yield "attention-split", attention.FAMILY, attention.AttentionProblem(1, 8, 1, 300, 64, kv_heads=2)


@pytest.mark.parametrize("name,family,problem", list(_cases()), ids=[c[0] for c in _cases()])
def test_every_family_answers_the_protocol(caps, name, family, problem):
    """variants (the default first), steps of each (launches and their scratch; the default when no
    variant is named), the problem key, and the candidates a compiled plan carries."""
    assert isinstance(family, KernelFamily)
    names = family.variants(problem, caps)
    assert names, name
    for variant in names:
        plan = family.steps(problem, caps, variant)
        assert plan.steps and all(isinstance(launch, KernelLaunch) for launch in plan.steps)
        assert all(role in plan.scratch for launch in plan.steps for role in launch.bindings
                   if role == "partials")
    assert family.steps(problem, caps) == family.steps(problem, caps, names[0])
    assert family.problem_key(problem) == autotune.problem_key(family.kernel, problem)
    carried = candidates(family, problem, caps)
    assert [n for n, _ in carried] == names[:autotune.MAX_CANDIDATES]
    with pytest.raises(ValueError, match="not one of"):
        family.steps(problem, caps, "no-such-variant")
