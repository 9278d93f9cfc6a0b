"""Run a library launch on raw runtime buffers holding torch CPU tensors (no webgpu tensors)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from torch_webgpu.kernels import record

NP = {"f32": np.float32, "f16": np.float16}
TORCH = {"f32": torch.float32, "f16": torch.float16}


def upload(rt, t: torch.Tensor, pad: int = 0) -> int:
    """A buffer holding `t`'s storage (its whole underlying storage, so views keep their offsets)."""
    raw = t.untyped_storage()
    data = bytes(raw) + b"\0" * pad
    data += b"\0" * (-len(data) % 4 or (4 if not data else 0))
    buf = rt.allocate(len(data))
    rt.upload(buf, data)
    return buf


def run_launch(rt, launch, operands: dict[str, torch.Tensor], out: torch.Tensor) -> torch.Tensor:
    """Record `launch` with operand tensors (roles) and return the downloaded `out` storage as a tensor
    shaped and strided like `out`."""
    return run_plan(rt, SimpleNamespace(steps=[launch], scratch={}), operands, out)


def run_plan(rt, plan, operands: dict[str, torch.Tensor], out: torch.Tensor) -> torch.Tensor:
    """`run_launch` for a plan of several dispatches (`plan.steps`) with device scratch buffers of
    `plan.scratch` (role -> bytes) between them."""
    ids = {role: upload(rt, t) for role, t in operands.items()}
    ids["out"] = upload(rt, out)
    ids.update({role: rt.allocate(max(4, -(-nbytes // 4) * 4)) for role, nbytes in plan.scratch.items()})
    for launch in plan.steps:
        record(launch, ids, rt)
    n = out.untyped_storage().nbytes()
    raw = rt.download(ids["out"], 0, n)
    for b in ids.values():
        rt.free(b)
    flat = torch.frombuffer(bytearray(raw), dtype=out.dtype)
    return torch.as_strided(flat, out.shape, out.stride(), out.storage_offset())
