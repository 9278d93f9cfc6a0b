"""Grids past WebGPU's per-dimension workgroup limit: the contract between the WGSL translator
(mlir_passes/spirv_to_wgsl, which declares the override) and the plan's executors (this module, and
torch-webgpu.js the same way). Pure Python: the torch-free bundle loader imports it.

IREE distributes some dispatches along x only, with more than the 65,535 workgroups per dimension WebGPU
guarantees (a large elementwise op, GPT-2's logits). A translated shader that reads its workgroup id
declares the pipeline-overridable constant `WORKGROUP_FOLD_OVERRIDE`; the executor then dispatches an
(x', y') grid with the constant set to the logical x count, and the shader recovers its logical id
(`x + y * x'`; surplus workgroups return at once).
"""

from __future__ import annotations

WORKGROUP_FOLD_OVERRIDE = "torch_webgpu_fold_x"


def can_fold(wgsl: str) -> bool:
    """True when the shader recovers a logical workgroup id from a folded grid."""
    return f"override {WORKGROUP_FOLD_OVERRIDE}" in wgsl


def folded_grid(workgroups: tuple[int, int, int], limit: int) -> tuple[int, int, int] | None:
    """The (x', y', 1) grid covering a 1-D grid of x > `limit` workgroups, or None when it fits as is or
    is not 1-D (such grids are left to the limit check)."""
    x, y, z = (int(w) for w in workgroups)
    if x <= limit or y != 1 or z != 1:
        return None
    rows = -(-x // limit)
    if rows > limit:
        return None
    return -(-x // rows), rows, 1


def shader_grid(workgroups: tuple[int, int, int], wgsl: str, limit: int) -> tuple[int, int, int] | None:
    """The folded grid to dispatch `wgsl` with, or None to dispatch `workgroups` as they are."""
    grid = folded_grid(workgroups, limit)
    return grid if grid is not None and can_fold(wgsl) else None
