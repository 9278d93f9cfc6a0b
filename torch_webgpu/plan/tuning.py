"""Load-time autotuning of a plan's library dispatches on the device that runs it.

A plan built for a target (here, or on another machine for a bundle) carries, on each library DISPATCH
whose op has several variants, every variant under args["tune"] (compiler/plan_compose.py, add_library).
The executor that loads it picks one per dispatch before anything runs: the cached winner for (problem
class, this device, its driver), else the fastest when timed once here on scratch buffers, else the
default — the policy of kernels/autotune.py (TORCH_WEBGPU_AUTOTUNE=0: defaults; software adapters:
defaults unless TORCH_WEBGPU_AUTOTUNE=1). The plan that comes out has plain DISPATCH nodes.
"""

from __future__ import annotations

import copy
from typing import Any

from torch_webgpu.kernels import autotune
from torch_webgpu.kernels.launch import PARAMS, DeviceCaps, KernelLaunch
from torch_webgpu.runtime import BufferSlice

from .format import LowIRNode, LowIROp, Plan


def tune_plan(plan: Plan, rt: Any, resident: dict[str, tuple[int, int]] | None = None) -> Plan:
    """`plan` with every tunable DISPATCH set to this device's variant (the same object when none is).
    `resident`: buffers already on the device (name -> (buffer id, base offset)): the lifted weights,
    which variants read in place instead of a scratch copy of their size (a 525 MB LM head), and the
    plan's own buffers, which they also write in place (the executor fills them every call, and the
    init nodes run after tuning)."""
    if not any(n.op is LowIROp.DISPATCH and "tune" in n.args for n in plan.main):
        return plan
    caps = DeviceCaps.from_runtime(rt)
    here = autotune.tunes_on(caps)
    main = []
    for node in plan.main:
        tune = node.args.get("tune") if node.op is LowIROp.DISPATCH else None
        if tune is None:
            main.append(node)
            continue
        by_name = {v["variant"]: v for v in tune["variants"]}
        names = list(by_name)
        winner = names[0]
        if here:
            winner = autotune.pick(autotune.device_key(tune["key"], caps), names, int(tune["flops"]),
                                   lambda name, by_name=by_name: _time_variant(plan, rt, by_name[name],
                                                                               resident or {}),
                                   floor=autotune.PLAN_MIN_FLOPS)
        chosen = by_name[winner]
        main.append(LowIRNode(LowIROp.DISPATCH, {k: v for k, v in chosen.items()
                                                 if k not in ("variant", "then")}))
        # the variant's further dispatches (a split-K combine) right after it
        main += [LowIRNode(LowIROp.DISPATCH, then) for then in chosen.get("then", ())]
    tuned = copy.copy(plan)
    tuned.main = main
    return tuned


def _time_variant(plan: Plan, rt: Any, variant: dict[str, Any],
                  resident: dict[str, tuple[int, int]]) -> float:
    """Seconds of one run of a variant's dispatches (its own and those under "then"). Buffers in
    `resident` are bound in place (written only if they are plan buffers); every other one gets a scratch
    buffer as large as its largest binding, bound at offset 0 (so tuning holds at most a dispatch's
    windows of the graph inputs); the variant's dispatches share them."""
    steps = [variant, *variant.get("then", ())]
    extent: dict[str, int] = {}
    for args in steps:
        spec = plan.executables[args["entry_point"]]
        read_only = {host for wgsl, host in spec.binding_map.items() if wgsl in spec.read_only}
        written = {args["bindings"][host][0] for host in spec.binding_map.values() if host not in read_only}
        for name, _, size in args["bindings"]:
            if name not in resident or (name in written and name not in plan.buffers):
                extent[name] = max(extent.get(name, 0), int(size))
    scratch = {name: rt.allocate(max(4, -(-n // 4) * 4)) for name, n in extent.items()}
    try:
        launches, operands = [], {}
        for index, args in enumerate(steps):
            spec = plan.executables[args["entry_point"]]
            count = max([*spec.binding_map, -1 if spec.push_constant_binding is None
                         else spec.push_constant_binding]) + 1
            roles = [PARAMS] * count
            for slot, host_index in spec.binding_map.items():
                name, offset, size = args["bindings"][host_index]
                roles[slot] = f"s{index}b{host_index}"
                if name in scratch:
                    operands[roles[slot]] = BufferSlice(scratch[name], 0, int(size))
                else:
                    buf_id, base = resident[name]
                    operands[roles[slot]] = BufferSlice(buf_id, base + int(offset), int(size))
            launches.append(KernelLaunch(
                name=args["entry_point"], wgsl=plan.wgsl[spec.wgsl_file], grid=tuple(args["workgroups"]),
                workgroup_size=tuple(spec.workgroup_size), bindings=tuple(roles),
                params=tuple(args["constants"]), read_only=frozenset(spec.read_only),
                entry_point=spec.entry_point))
        return autotune.time_launches(rt, launches, operands)
    finally:
        for buf in scratch.values():
            rt.free(buf)
