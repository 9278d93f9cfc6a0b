"""The compute pipelines of a plan's entry points, and its DISPATCH nodes prepared for them: the kernel, the
host buffer range behind each WGSL binding, the push-constant uniform and the grid (folded past the
device's per-dimension limit where the shader allows it: grid.py)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from .format import LowIRNode, LowIROp, Plan
from .grid import WORKGROUP_FOLD_OVERRIDE, shader_grid


class PreparedDispatch(NamedTuple):
    """A resolved DISPATCH node, ready for either executor."""

    kernel: Any
    slots: list[Any]          # per WGSL binding: (plan buffer name, offset, size), None for the uniform
    uniform: Any              # the push constants' uniform buffer (runtime Constant), or None
    read_only: frozenset[int]  # WGSL bindings the shader only reads
    grid: tuple[int, ...]


class Pipelines:
    """One kernel per entry point the plan dispatches (not the variants tuning passed over); `shader_source`
    "spirv" runs IREE's own SPIR-V instead of the WGSL (a debug and differential path only)."""

    def __init__(self, plan: Plan, rt: Any, shader_source: str = "wgsl"):
        self.plan = plan
        self.rt = rt
        self.shader_source = shader_source
        used = {n.args["entry_point"] for n in (*plan.init, *plan.main) if n.op is LowIROp.DISPATCH}
        self.kernels = {name: self._kernel(name) for name in plan.executables if name in used}

    def _kernel(self, entry: str) -> Any:
        spec = self.plan.executables[entry]
        if self.shader_source == "spirv":
            # Debug/differential path only: IREE's own SPIR-V (no push constants on WebGPU).
            if spec.push_constant_count:
                raise NotImplementedError(f"{entry}: IREE SPIR-V with push constants cannot run on WebGPU")
            # '$' is not a valid identifier for Dawn's SPIR-V reader: rename in place (same length).
            safe = entry.replace("$", "_")
            spirv = self.plan.spirv[entry].replace(entry.encode() + b"\0", safe.encode() + b"\0")
            return self.rt.kernel_from_spirv(spirv, safe, label=entry)
        return self.rt.kernel(self.plan.wgsl[spec.wgsl_file], spec.entry_point, label=entry)

    def _grid(self, entry: str, workgroups: Sequence[int]) -> tuple[Any, tuple[int, ...]]:
        """The kernel and grid of a dispatch: a 1-D grid past the device's per-dimension limit is folded
        into x and y when the shader supports it (grid.py)."""
        workgroups = tuple(int(w) for w in workgroups)
        limit = int(self.rt.info.limits.get("max-compute-workgroups-per-dimension", 65535))
        spec = self.plan.executables[entry]
        folded = shader_grid(workgroups, self.plan.wgsl[spec.wgsl_file], limit)
        if folded is None or self.shader_source != "wgsl":
            return self.kernels[entry], workgroups
        kernel = self.rt.kernel(self.plan.wgsl[spec.wgsl_file], spec.entry_point, label=entry,
                                constants={WORKGROUP_FOLD_OVERRIDE: workgroups[0]})
        return kernel, folded

    def prepare(self, node: LowIRNode) -> PreparedDispatch:
        """Kernel, binding slots, push-constant uniform, read-only slots and grid of a resolved dispatch."""
        spec = self.plan.executables[node.args["entry_point"]]
        host = node.args["bindings"]
        kernel, grid = self._grid(node.args["entry_point"], node.args["workgroups"])
        if self.shader_source == "spirv":
            return PreparedDispatch(kernel, [tuple(b) for b in host], None, frozenset(), grid)
        count = max([*spec.binding_map, -1, spec.push_constant_binding or -1]) + 1
        slots: list[Any] = [None] * count
        for wgsl_binding, host_index in spec.binding_map.items():
            slots[wgsl_binding] = tuple(host[host_index])
        uniform = None
        consts = node.args["constants"]
        if spec.push_constant_binding is not None:
            # Push constants (dynamic dims among them) reach the shader through a uniform buffer.
            words = list(consts) + [0] * (-len(consts) % 4 or (4 if not consts else 0))
            uniform = self.rt.constant(struct.pack(f"<{len(words)}I", *words))
        elif consts:
            raise ValueError(f"{spec.entry_point}: host passes {len(consts)} push constants, shader has none")
        missing = [i for i, s in enumerate(slots) if s is None and i != spec.push_constant_binding]
        if missing:
            raise ValueError(f"{spec.entry_point}: WGSL bindings {missing} have no host buffer")
        return PreparedDispatch(kernel, slots, uniform, frozenset(spec.read_only), grid)
