"""Index expressions of dynamic plans (plan/host_expr.py): folded where static, evaluated per input-shape
signature, JSON round trips included."""

import json

from torch_webgpu.plan import host_expr


def test_host_expressions_fold_and_evaluate():
    assert host_expr.fold("muli", 3, 4) == 12 and host_expr.fold("align", 13, 8) == 16
    size = host_expr.fold("align", host_expr.fold("muli", host_expr.dim(1, 0), 12), 256)
    assert size == ["align", ["muli", ["dim", 1, 0], 12], 256]
    size = json.loads(json.dumps(size))
    assert host_expr.evaluate(size, [(9,), (30, 2)]) == 512
    groups = host_expr.fold("select", host_expr.fold("cmp.slt", host_expr.dim(0, 1), 4), 1, 7)
    assert [host_expr.evaluate(groups, [(1, n)]) for n in (3, 4)] == [1, 7]
    assert host_expr.evaluate(host_expr.fold("divsi", host_expr.dim(0, 0), 2), [(-7,)]) == -3
    assert host_expr.evaluate_all({"b": [["t0", 0, size]], "n": 3}, [(1,), (2, 2)]) == {"b": [["t0", 0, 256]],
                                                                                          "n": 3}
