"""Liveness-based memory reuse for a plan's per-call buffers (`assign_memory`).

A composed plan gives every IREE transient ("t*") and every library output ("lib*") a storage of its own
for the plan's lifetime, although most are used by a few consecutive nodes of `main`. Here each buffer's
live range is the span of `main` nodes from its first to its last use (bindings, copies, fills, outputs);
buffers whose ranges do not overlap are renamed to one shared slot ("mem<k>", sized for its largest
member), so a plan holds about its peak of simultaneously live bytes instead of their sum.

Why this is safe: both executors run `main` in order into one command stream, and WebGPU orders storage
accesses between the commands of a pass, so a slot's next member is written only after every use of the
previous one. Outputs are copied out at their OUTPUT node (readback buffer, a new device tensor or
DeviceArray), never handed back aliasing a plan buffer; their buffers live to the end of the call anyway.
Two buffers used by one node are both live there, so they never share a slot (no new aliasing inside a
dispatch). Never shared: graph inputs and lifted constants (`in*`), IREE globals (`g*`, they persist
across calls), anything the init nodes touch, buffers whose size is an expression (dynamic shapes), and
buffers whose first use in `main` only reads them (their bytes would come from an earlier call).
ALLOCATE/FREE nodes of renamed buffers are dropped: the executors treat them as no-ops and the slot
lives with the plan; the live ranges computed here are what they meant.

TORCH_WEBGPU_PLAN_MEMORY=0 turns the assignment off (the plan runs with one storage per buffer).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from torch_webgpu.config import PLAN_MEMORY

from .format import LowIRNode, LowIROp, Plan

ENV = PLAN_MEMORY.name
SLOT_PREFIX = "mem"
_GLOBAL = re.compile(r"(.*_)?g\d+$")   # IREE globals (compiler/plan_builder.py), with a segment prefix
READ, WRITE = "r", "w"                 # a use that only reads / that may write (read-write included)


def enabled() -> bool:
    """True unless TORCH_WEBGPU_PLAN_MEMORY=0."""
    return PLAN_MEMORY.read()


@dataclass
class MemoryReport:
    """What `assign_memory` did: bytes of the plan's buffers before and after, and the slots."""

    before: int                               # bytes of all static-size plan buffers, one storage each
    after: int                                # bytes with the shared slots
    shared: int                               # buffers renamed into slots
    kept: dict[str, str] = field(default_factory=dict)   # buffer -> why it keeps its own storage
    slots: dict[str, list[str]] = field(default_factory=dict)   # slot -> its buffers

    def to_json(self) -> dict:
        """The summary recorded in plan.meta["memory"]."""
        return {"before": self.before, "after": self.after, "shared": self.shared, "slots": len(self.slots)}


def node_uses(node: LowIRNode, plan: Plan) -> list[tuple[str, str]]:
    """(buffer name, READ or WRITE) of every buffer a node touches, in binding order."""
    a = node.args
    op = node.op
    if op is LowIROp.DISPATCH:
        spec = plan.executables.get(a["entry_point"])
        read_only = set()
        if spec is not None:
            read_only = {host for wgsl, host in spec.binding_map.items() if wgsl in spec.read_only}
        uses = [(b[0], READ if i in read_only else WRITE) for i, b in enumerate(a["bindings"])]
        for variant in a.get("tune", {}).get("variants", ()):   # tunable: every variant's buffers too
            for step in (variant, *variant.get("then", ())):
                uses += [(b[0], WRITE) for b in step["bindings"]]
        return uses
    if op is LowIROp.COPY:
        return [(a["source"], READ), (a["buffer"], WRITE)]
    if op in (LowIROp.FILL, LowIROp.UPLOAD_CONSTANT):
        return [(a["buffer"], WRITE)]
    if op is LowIROp.OUTPUT:
        return [(a["buffer"], READ)] if "buffer" in a else []
    return []


def live_ranges(plan: Plan) -> tuple[dict[str, tuple[int, int]], dict[str, str]]:
    """Each buffer's (first, last) `main` index, and the kind of its first use (READ or WRITE).
    Buffers read by an OUTPUT node live to the end of the call."""
    ranges: dict[str, tuple[int, int]] = {}
    first_use: dict[str, str] = {}
    end = len(plan.main) - 1
    for i, node in enumerate(plan.main):
        for name, kind in node_uses(node, plan):
            if name not in ranges:
                ranges[name] = (i, i)
                first_use[name] = kind
            else:
                ranges[name] = (ranges[name][0], i)
            if node.op is LowIROp.OUTPUT:
                ranges[name] = (ranges[name][0], end)
    return ranges, first_use


def _init_buffers(plan: Plan) -> set[str]:
    names = set()
    for node in plan.init:
        names.update(name for name, _ in node_uses(node, plan))
        if "buffer" in node.args:
            names.add(node.args["buffer"])
    return names


def _why_kept(name: str, size: Any, ranges: dict, first_use: dict, in_init: set[str]) -> str | None:
    if not isinstance(size, int):
        return "size depends on the input shapes"
    if _GLOBAL.match(name):
        return "IREE global (persists across calls)"
    if name in in_init:
        return "used by the init nodes"
    if name not in ranges:
        return "unused by the call"
    if first_use[name] == READ:
        return "read before written in a call"
    return None


def assign_memory(plan: Plan) -> tuple[Plan, MemoryReport]:
    """`plan` with buffers of disjoint live ranges renamed into shared slots (a new Plan; the input is
    not modified), and the report. Greedy by size: each buffer, largest first, joins the smallest slot
    none of whose members is live at the same time, else opens a new slot."""
    ranges, first_use = live_ranges(plan)
    in_init = _init_buffers(plan)
    report = MemoryReport(before=sum(s for s in plan.buffers.values() if isinstance(s, int)), after=0,
                          shared=0)
    candidates = []
    for name, size in plan.buffers.items():
        why = _why_kept(name, size, ranges, first_use, in_init)
        if why is None:
            candidates.append(name)
        else:
            report.kept[name] = why
    taken = {n for n in plan.buffers} | {n for node in plan.main for n, _ in node_uses(node, plan)}
    slots: list[dict[str, Any]] = []   # {"size", "members", "ranges"}
    for name in sorted(candidates, key=lambda n: (-plan.buffers[n], ranges[n][0])):
        lo, hi = ranges[name]
        best = None
        for slot in slots:
            if any(lo <= b and a <= hi for a, b in slot["ranges"]):
                continue
            if best is None or slot["size"] < best["size"]:
                best = slot
        if best is None:
            best = {"size": 0, "members": [], "ranges": []}
            slots.append(best)
        best["size"] = max(best["size"], plan.buffers[name])
        best["members"].append(name)
        best["ranges"].append((lo, hi))
    rename: dict[str, str] = {}
    buffers = {n: s for n, s in plan.buffers.items() if n not in candidates}
    k = 0
    for slot in slots:
        while f"{SLOT_PREFIX}{k}" in taken:
            k += 1
        slot_name = f"{SLOT_PREFIX}{k}"
        k += 1
        buffers[slot_name] = slot["size"]
        report.slots[slot_name] = slot["members"]
        for member in slot["members"]:
            rename[member] = slot_name
    report.shared = len(rename)
    report.after = sum(s for s in buffers.values() if isinstance(s, int))
    main = []
    for node in plan.main:
        if node.op in (LowIROp.ALLOCATE, LowIROp.FREE) and node.args.get("buffer") in rename:
            continue
        main.append(_renamed(node, rename))
    out = copy.copy(plan)
    out.buffers = buffers
    out.main = main
    out.meta = {**plan.meta, "memory": report.to_json()}
    return out, report


def shared_slot_sizes(plans: list[Plan]) -> dict[str, int]:
    """Slot name -> bytes that serve slot of that name in each of `plans` (as `assign_memory` names them
    at load): plans whose calls never overlap can share those storages too. Slots are numbered largest
    first, so equal names pair the largest with the largest."""
    sizes: dict[str, int] = {}
    for plan in plans:
        assigned, report = assign_memory(plan)
        for name in report.slots:
            sizes[name] = max(sizes.get(name, 0), int(assigned.buffers[name]))
    return sizes


def _renamed(node: LowIRNode, rename: dict[str, str]) -> LowIRNode:
    """The node with its buffer names mapped through `rename` (tune variants included)."""
    a = node.args
    if not any(k in a for k in ("buffer", "source", "bindings")):
        return node
    a = dict(a)
    for key in ("buffer", "source"):
        if key in a:
            a[key] = rename.get(a[key], a[key])

    def renamed(bindings: list) -> list:
        return [[rename.get(b[0], b[0]), *b[1:]] for b in bindings]

    if "bindings" in a:
        a["bindings"] = renamed(a["bindings"])

    def variant(v: dict) -> dict:
        v = {**v, "bindings": renamed(v["bindings"])}
        if "then" in v:   # the dispatches after a variant's first (a split-K combine)
            v["then"] = [{**t, "bindings": renamed(t["bindings"])} for t in v["then"]]
        return v

    if "tune" in a:
        a["tune"] = {**a["tune"], "variants": [variant(v) for v in a["tune"]["variants"]]}
    return LowIRNode(node.op, a)


def check_assignment(original: Plan, assigned: Plan) -> None:
    """AssertionError unless no two buffers of `original` live at the same time share a storage of
    `assigned`, and every slot is at least as large as each of its members (a test and debugging aid)."""
    ranges, _ = live_ranges(original)
    storage: dict[str, str] = {}   # original buffer -> its storage, from the nodes side by side
    kept = [n for n in original.main if not (n.op in (LowIROp.ALLOCATE, LowIROp.FREE)
                                            and n.args.get("buffer") not in assigned.buffers)]
    if len(kept) != len(assigned.main):
        raise AssertionError(f"{len(kept)} nodes kept, the assigned plan has {len(assigned.main)}")
    for old, new in zip(kept, assigned.main, strict=True):
        for (a, _), (b, _) in zip(node_uses(old, original), node_uses(new, assigned), strict=True):
            if storage.setdefault(a, b) != b:
                raise AssertionError(f"{a} is in two storages: {storage[a]} and {b}")
    by_storage: dict[str, list[str]] = {}
    for a, b in storage.items():
        by_storage.setdefault(b, []).append(a)
        if a in original.buffers and isinstance(original.buffers[a], int):
            if assigned.buffers[b] < original.buffers[a]:
                raise AssertionError(f"{a} ({original.buffers[a]} B) in {b} of {assigned.buffers[b]} B")
    for b, members in by_storage.items():
        spans = sorted(ranges[m] for m in members)
        for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False):
            if lo <= hi:
                raise AssertionError(f"storage {b}: members live at the same time ({members})")
