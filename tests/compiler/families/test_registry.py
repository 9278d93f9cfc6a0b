"""The registry of compiler families that partition.py walks (CPU only: no IREE, no device)."""

import importlib
import pkgutil

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from torch_webgpu.compiler import families
from torch_webgpu.compiler.families import REGISTRY, families_at
from torch_webgpu.compiler.families.family import Family
from torch_webgpu.compiler.families.matmul import LibraryOp
from torch_webgpu.compiler.families.reduce import ReduceOp
from torch_webgpu.compiler.families.rows import RowOp
from torch_webgpu.compiler.partition import Segment, partition
from torch_webgpu.kernels.launch import DeviceCaps

aten = torch.ops.aten
# Targets where two families start, in the order the registry must try them (families/__init__.py says why).
SHARED_ROOTS = {
    aten.bmm.default: ["attention", "matmul"],
    aten.mm.default: ["quant", "matmul"],
    aten.amax.default: ["rows", "reduce"],
}


def _partition(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    return partition(gm, DeviceCaps.portable())


def test_family_names_are_unique_and_every_rooted_family_matches():
    names = [f.name for f in REGISTRY]
    assert len(names) == len(set(names)), names
    for family in REGISTRY:
        assert isinstance(family, Family)
        assert (family.match is not None) == bool(family.roots), family.name
        assert family.roots or family.combine is not None, f"{family.name} neither matches nor combines"


def test_roots_are_unique_or_ordered_deliberately():
    shared = {}
    for family in REGISTRY:
        for root in family.roots:
            shared.setdefault(root, []).append(family.name)
    assert {t: ns for t, ns in shared.items() if len(ns) > 1} == SHARED_ROOTS
    for target, order in SHARED_ROOTS.items():
        assert [f.name for f in families_at(target)] == order


def test_every_family_module_is_in_the_registry():
    modules = [m.name for m in pkgutil.iter_modules(families.__path__) if m.name != "family"]
    assert sorted(modules) == sorted(f.name for f in REGISTRY)
    for name in modules:
        module = importlib.import_module(f"torch_webgpu.compiler.families.{name}")
        assert module.FAMILY in REGISTRY, f"families/{name}.py's FAMILY is not registered"


def test_a_node_no_family_takes_stays_in_an_iree_segment():
    assert families_at(aten.cumsum.default) == ()
    part = _partition(lambda x, w: (torch.cumsum(x @ w, 1),), torch.randn(4, 8), torch.randn(8, 8))
    matmul, segment = part.steps
    assert isinstance(matmul, LibraryOp) and isinstance(segment, Segment)
    assert [n.target for n in segment.nodes] == [aten.cumsum.default]
    assert _partition(lambda x: (torch.cumsum(x, 0),), torch.randn(5)) is None


@pytest.mark.parametrize(("fn", "kind"), [
    (lambda x: (torch.log_softmax(x, -1),), RowOp),   # decomposes to amax first: the row family's
    (lambda x: (torch.amax(x, -1),), ReduceOp),       # a lone amax: the row family declines it
])
def test_a_shared_root_goes_to_the_first_family_that_takes_it(fn, kind):
    x = torch.randn(4, 64)
    gm = make_fx(fn, tracing_mode="fake", decomposition_table={
        aten._log_softmax.default: torch._decomp.decomposition_table[aten._log_softmax.default]})(x)
    assert any(n.target is aten.amax.default for n in gm.graph.nodes)
    part = partition(gm, DeviceCaps.portable())
    assert [type(s) for s in part.library_ops] == [kind]
