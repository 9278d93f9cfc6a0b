"""Offline compilation into bundles: `export` (an nn.Module or a torch.export program -> one plan) and
`export_decoder` (a causal LM -> prefill plans per prompt bucket + one decode plan). Writes the format
that bundle/ reads; the loaders never import this package (bundles run without torch or the compiler).
"""

from __future__ import annotations

from .decoder import export_decoder
from .graph import export

__all__ = ["export", "export_decoder"]
