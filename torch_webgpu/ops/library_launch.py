"""Eager use of the kernel library (torch_webgpu/kernels): the runtime's caps, recording a launch with
webgpu tensors bound by role, and `run_family`, the one choose-and-record loop of every family."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ..kernels import DeviceCaps, KernelLaunch, autotune, record
from ..kernels.family import KernelFamily
from ..kernels.launch import LaunchPlan
from .tensor_buffers import buffer_id, new_empty, runtime

WGSL_DTYPES = {torch.float32: "f32", torch.float16: "f16"}


_caps: dict[int, DeviceCaps] = {}


def device_caps() -> DeviceCaps:
    """What library variants the eager device may use (its adapter's features and limits; cached per
    runtime)."""
    rt = runtime()
    caps = _caps.get(id(rt))
    if caps is None:
        caps = _caps[id(rt)] = DeviceCaps.from_runtime(rt)
    return caps


def library_dtype(*tensors: torch.Tensor | None) -> str | None:
    """The library storage type shared by every given tensor ("f32"/"f16"), or None when the library
    cannot run them (another dtype, mixed dtypes, f16 without `shader-f16`)."""
    dtypes = {t.dtype for t in tensors if t is not None}
    if len(dtypes) != 1:
        return None
    name = WGSL_DTYPES.get(dtypes.pop())
    if name == "f16" and not device_caps().shader_f16:
        return None
    return name


def record_launch(launch: KernelLaunch, tensors: Mapping[str, torch.Tensor]) -> None:
    """Record `launch` with each role's tensor bound as its whole buffer (offsets travel in params)."""
    record(launch, {role: buffer_id(t) for role, t in tensors.items()}, runtime())


def run_family(family: KernelFamily, problem: Any, operands: Mapping[str, Any], like: torch.Tensor,
               tune: bool = True) -> None:
    """Record `problem` on the eager device through `family`: its variant is the autotuner's (the cached
    winner, or the fastest when timed here; `tune` False: the default), its dispatches bound with
    `operands[role]` (buffer ids or BufferSlices) and a new device buffer per scratch role of the plan,
    held by webgpu tensors (on `like`'s device) while the plan is recorded (the allocator orders any later
    reuse of their buffers after these dispatches)."""
    caps = device_caps()
    names = family.variants(problem, caps)

    def measure(name: str) -> float:
        plan = family.steps(problem, caps, name)
        bound, _held = _with_scratch(plan, operands, like)
        return autotune.time_launches(runtime(), plan.steps, bound)

    variant = autotune.choose(family.kernel, problem, caps, names, measure) if tune and names else None
    plan = family.steps(problem, caps, variant)
    bound, _held = _with_scratch(plan, operands, like)
    for launch in plan.steps:
        record(launch, bound, runtime())


def _with_scratch(plan: LaunchPlan, operands: Mapping[str, Any],
                  like: torch.Tensor) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """`operands` with a new device buffer per scratch role of `plan`, and the tensors that hold them."""
    held = {role: new_empty((-(-nbytes // 4),), torch.int32, like) for role, nbytes in plan.scratch.items()}
    return {**operands, **{role: buffer_id(t) for role, t in held.items()}}, list(held.values())
