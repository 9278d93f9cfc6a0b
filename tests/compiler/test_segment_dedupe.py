"""Identical IREE segments compile once (compiler/segment_dedupe.py) and every repeat still computes its
own values."""

import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from torch_webgpu.compiler.segment_dedupe import segment_signature, unique_segments
from torch_webgpu.compiler.webgpu_compiler import STATS, webgpu_backend


def _graph(fn, *shapes):
    return make_fx(fn, tracing_mode="fake")(*(torch.randn(s) for s in shapes))


def test_signature_ignores_node_names_but_not_shapes_or_ops():
    a = _graph(lambda x: torch.sin(x) * 2 + 1, (4, 8))
    b = _graph(lambda y: torch.sin(y) * 2 + 1, (4, 8))
    for node in b.graph.nodes:   # other node names, as in another segment of the graph
        node.name = f"other_{node.name}"
    wider = _graph(lambda x: torch.sin(x) * 2 + 1, (4, 16))
    other_op = _graph(lambda x: torch.cos(x) * 2 + 1, (4, 8))
    other_scalar = _graph(lambda x: torch.sin(x) * 3 + 1, (4, 8))
    assert segment_signature(a) == segment_signature(b)
    assert len({segment_signature(g) for g in (a, wider, other_op, other_scalar)}) == 4
    assert unique_segments([a, wider, b, other_op, a]) == [0, 1, 0, 3, 0]


class _Block(nn.Module):
    """A library linear, then elementwise work IREE compiles (the same segment in every block)."""

    def __init__(self, d):
        super().__init__()
        self.linear = nn.Linear(d, d)

    def forward(self, x):
        return torch.sin(self.linear(x)) * 0.5 + x


def test_repeated_blocks_compile_one_segment_and_keep_their_own_values():
    torch.manual_seed(0)
    model = nn.Sequential(*[_Block(32) for _ in range(4)]).eval()
    x = torch.randn(8, 32)
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model, backend=webgpu_backend)(x)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
    meta = STATS.plans[-1].meta
    assert meta["segments"] >= 4 and meta["iree_segments"] < meta["segments"], meta
