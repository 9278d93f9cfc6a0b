"""Launch plans: a repeated eager call replays the dispatches of its first call instead of re-running Python.

Every registered kernel (ops/registry.py; `planned=False` opts out) looks up its call signature: every
argument's value, and for each webgpu tensor its dtype, shape, strides, storage offset, storage size and
which other arguments share its buffer (plus the default dtype). On a miss the kernel runs normally inside
a runtime/capture.py `recording()`, which notes its dispatches; the capture becomes a plan when everything
the call did can be re-expressed through its arguments and the fresh tensors it returned: no temporaries,
no copies, fills, uploads, downloads or dispatches the recording did not see, no argument resized, no view
returned, no random numbers drawn (the generator's offset moved). Otherwise the signature is remembered
as unplannable and always runs the kernel. On a hit the plan allocates the outputs and re-records the
same kernels with the same parameter blocks and workgroup counts on the new buffer ids: the type
promotion, broadcasting, stride coalescing, parameter packing and WGSL lookup of the kernel are
skipped. A call that raises is never planned, so errors stay those of the kernel.

By default (TORCH_WEBGPU_EAGER_LAUNCH=native) the hot path leaves Python: C++ packs the plan key
(csrc/launch_plans.cpp `_plan_key`; arguments it does not know fall back to `_signature`), allocates a
replay's new outputs (`_new_outputs`) and records its dispatches (runtime/native_eager.py). `python` keeps
all of it here, the reference the tests compare with.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from .. import device_state
from ..kernels import autotune
from ..runtime import BufferSlice, get_runtime, native_eager
from ..runtime.capture import Capture, recording

F = TypeVar("F", bound=Callable)

MAX_PLANS = 1024  # per kernel; the table starts over when full (plans hold their parameter buffers)
# Over all kernels: an eager loop over ever-new shapes (a growing KV cache) would otherwise fill every
# kernel's table, and each plan holds bind groups, which lavapipe maps as a page each (vm.max_map_count).
MAX_TOTAL_PLANS = 4096
_counts = {"builds": 0, "hits": 0, "unplanned": 0}
_tables: list[dict] = []  # every planned kernel's table
_held = [0]               # entries over all tables
_PLAIN = (str, torch.dtype, torch.memory_format, torch.layout, torch.device)
_WEBGPU = torch.device("webgpu", 0)
_UNSEEN = object()
_NONE = type(None)  # result type of the in-place _foreach_* ops

try:  # the C++ hot path (csrc/launch_plans.cpp); an older build of _C lacks it
    from .._C import _new_outputs, _plan_key
except ImportError:
    _new_outputs = _plan_key = None
if native_eager.eager_launch_choice() == "python":  # the reference: keys, outputs and dispatches in Python
    _new_outputs = _plan_key = None


def stats() -> dict[str, int]:
    """How many launch plans were built, how many calls replayed one, and how many ran their kernel's
    Python with no plan to build or replay (signatures that cannot be planned), since the process started."""
    return dict(_counts)


def _signature(args: tuple, kwargs: dict, tensors: list, ids: list) -> tuple | None:
    """The plan key of a call (None if it cannot be planned); collects its webgpu tensors and buffer ids."""
    key: list[Any] = [torch.get_default_dtype(), tuple(kwargs)]
    for v in (*args, *kwargs.values()) if kwargs else args:
        t = type(v)
        if t is torch.Tensor or isinstance(v, torch.Tensor):
            if v.is_cpu:
                if v.dim() != 0:  # a host tensor's values may steer the kernel
                    return None
                x = v.item()
                key.append((v.dtype, x, math.copysign(1.0, x)) if type(x) is float else (v.dtype, x))
                continue
            if v.is_meta:
                return None
            _add_tensor(key, v, tensors, ids)
        elif t is float:
            key.append((t, v) if v else (t, v, math.copysign(1.0, v)))  # 0.0 and -0.0 pack differently
        elif t is int or t is bool:
            key.append((t, v))
        elif v is None or isinstance(v, _PLAIN):
            key.append(v)
        elif t is list or t is tuple:
            if all(type(x) is int or type(x) is bool for x in v):
                key.append((t, tuple(v), tuple(map(type, v))))
            elif not _add_tensor_list(key, v, tensors, ids):
                return None
        else:
            return None
    return tuple(key)


def _key(args: tuple, kwargs: dict, tensors: list, ids: list) -> tuple | bytes | None:
    """The plan key of a call: packed by C++ where it knows every argument's type, else `_signature`'s."""
    if _plan_key is not None:
        key = _plan_key(args, kwargs, tensors, ids)
        if key is not None:
            return key
    return _signature(args, kwargs, tensors, ids)


def _add_tensor(key: list, v: torch.Tensor, tensors: list, ids: list) -> None:
    """Key a webgpu tensor: its metadata and the first earlier argument sharing its buffer (or -1)."""
    storage = v.untyped_storage()
    bid = storage.data_ptr() >> 32
    key.append((v.dtype, v.shape, v.stride(), v.storage_offset(), storage.nbytes(),
                ids.index(bid) if bid in ids else -1))
    ids.append(bid)
    tensors.append(v)


def _add_tensor_list(key: list, values: list | tuple, tensors: list, ids: list) -> bool:
    """Key a list of webgpu tensors (the _foreach_* ops' operands); False for anything else in it."""
    key.append(len(values))
    for v in values:
        if not isinstance(v, torch.Tensor) or v.is_cpu or v.is_meta:
            return False
        _add_tensor(key, v, tensors, ids)
    return True


class _View:
    """A returned view of a buffer the call allocated (layer_norm's mean and rstd share one): the replay
    allocates the buffer (`nbytes` of `dtype`) at the first view of it and takes every view from it."""

    __slots__ = ("shape", "strides", "offset", "dtype", "nbytes", "base")

    def __init__(self, r: torch.Tensor, base: int):
        self.shape, self.strides, self.offset = tuple(r.shape), tuple(r.stride()), r.storage_offset()
        self.dtype, self.nbytes = r.dtype, r.untyped_storage().nbytes()
        self.base = base  # index of the replay's new buffer this view is of

    def spec(self) -> tuple:
        """The view's spec for C++'s _new_outputs: (shape, strides, dtype, offset, buffer bytes, base)."""
        return self.shape, self.strides, self.dtype, self.offset, self.nbytes, self.base


class Plan:
    """The dispatches of one call, with buffers named by argument slot or by new output."""

    def __init__(self, rt: Any, outputs: list, result_type: type | None, dispatches: list, bound: list,
                 temporaries: tuple[int, ...] = ()):
        self.rt = rt
        self.temporaries = temporaries  # bytes of each scratch buffer a replay allocates, then frees
        self.outputs = outputs  # per returned item: argument slot (int), (shape, strides, dtype) or None
        self.result_type = result_type  # tuple / list / NoneType, or None for a single tensor
        self.dispatches = dispatches  # (kernel, binding templates, workgroups, label)
        self.bound = bound  # per dispatch: its bindings as (slot, offset, nbytes) or Constant
        self.native: Any = _UNSEEN  # the EagerProgram, built at the first replay (None: Python path)
        self.temp_specs = (tuple(((n,), (1,), torch.uint8) for n in temporaries)
                           if _new_outputs is not None and temporaries else None)
        # Every returned item a new tensor or a view of a new buffer, as one tensor or a tuple/list: C++
        # allocates them all (a view's spec also names its offset, its buffer's bytes and which buffer).
        self.new_specs = (tuple(o if type(o) is tuple else o.spec() for o in outputs)
                          if _new_outputs is not None and outputs
                          and all(type(o) in (tuple, _View) for o in outputs) else None)

    def replay(self, tensors: list, ids: list) -> Any:
        """Allocate the outputs and record the planned dispatches on this call's buffers (extends `ids`)."""
        rt = self.rt
        program = self.native
        if program is _UNSEEN:
            program = self.native = self._native_program()
        if program is None or self.new_specs is None or not native_eager.records_natively(rt):
            return self._replay_general(tensors, ids, program)
        # The hot path: C++ allocates the outputs and scratch and records the dispatches.
        results: list = []
        recycle = native_eager.may_recycle(rt)
        _new_outputs(self.new_specs, results, ids, recycle)
        scratch: list = []   # freed when this returns; the recorded commands keep the buffers until run
        if self.temp_specs is not None:
            _new_outputs(self.temp_specs, scratch, ids, recycle)
        program.record(ids)
        return results[0] if self.result_type is None else self._returned(results)

    def _replay_general(self, tensors: list, ids: list, program: Any) -> Any:
        """`replay` where some output is an argument or None, no native program exists, or a recording,
        capture or profiler must see every dispatch."""
        results: list = []
        slots = ids  # argument buffers, then the new outputs' buffers
        rt = self.rt
        recycle = native_eager.may_recycle(rt)
        if self.new_specs is not None:
            _new_outputs(self.new_specs, results, slots, recycle)
        bases: list = []  # the new buffers that returned views are of (Python path)
        for out in () if self.new_specs is not None else self.outputs:
            if type(out) is int:
                results.append(tensors[out])
                continue
            if out is None:
                results.append(None)
                continue
            if type(out) is _View:
                if out.base == len(bases):
                    count = out.nbytes // out.dtype.itemsize
                    bases.append(torch.empty(count, dtype=out.dtype, device=_WEBGPU))
                    slots.append(bases[-1].data_ptr() >> 32)
                results.append(bases[out.base].as_strided(out.shape, out.strides, out.offset))
                continue
            shape, strides, dtype = out
            t = torch.empty_strided(shape, strides, dtype=dtype, device=_WEBGPU)
            results.append(t)
            slots.append(t.data_ptr() >> 32)
        # scratch buffers (a two-pass reduction's partials): new ones per replay, after the outputs' slots,
        # freed when it returns (commands already recorded keep them until they have run)
        if self.temp_specs is not None:
            scratch: list = []
            _new_outputs(self.temp_specs, scratch, slots, recycle)
        elif self.temporaries:
            scratch = [torch.empty(n, dtype=torch.uint8, device=_WEBGPU) for n in self.temporaries]
            slots += [t.data_ptr() >> 32 for t in scratch]
        if program is not None and native_eager.records_natively(rt):
            program.record(slots)
        else:
            self._replay_python(slots)
        return results[0] if self.result_type is None else self._returned(results)

    def _returned(self, results: list) -> Any:
        """What the call returned for a tuple, list or None result (`results`: its items)."""
        return None if self.result_type is _NONE else self.result_type(results)

    def _native_program(self) -> Any:
        """The EagerProgram of the dispatches, or None where the native recorder is off or unavailable."""
        if not native_eager.native_eager_enabled(self.rt):
            return None
        return native_eager.EagerProgram(
            self.rt, [(kernel, bound, counts) for (kernel, _, counts, _), bound in zip(self.dispatches,
                                                                                      self.bound,
                                                                                      strict=True)])

    def _replay_python(self, slots: list) -> None:
        """The reference replay: every dispatch through runtime.dispatch (and open recordings)."""
        dispatch = self.rt.dispatch   # the runtime of this call (replays check it is the current one)
        for kernel, template, counts, label in self.dispatches:
            binds = [slots[b] if type(b) is int else b if type(b) is not tuple
                     else BufferSlice(slots[b[0]], b[1], b[2]) for b in template]
            dispatch(kernel, binds, counts, label)


def _exact_nbytes(t: torch.Tensor) -> int:
    """Storage bytes torch.empty_strided allocates for t's shape and strides."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))) * t.element_size()


def _freed_during(rt: Any, buffer_id: int, first_id: int) -> bool:
    """True for a buffer allocated after `first_id` and already freed: a call's own scratch."""
    if buffer_id <= first_id:
        return False
    with rt.lock:
        rt.pool.drain_freed()
        try:
            rt.pool.get(buffer_id)
        except KeyError:
            return True
    return False


def _build(rt: Any, key: tuple, args: tuple, kwargs: dict, tensors: list, ids: list, result: Any,
           capture: Capture, dispatches_before: int, commands_before: int, first_id: int) -> Plan | None:
    """A plan reproducing this call, or None if the call did anything a plan cannot replay. Buffers the
    call allocated after pool id `first_id` and freed again become the plan's temporaries."""
    recorded = len(capture)
    if None in capture:
        return None  # uploads, fills (see runtime/capture.py unreplayable)
    if rt.dispatches - dispatches_before != recorded or rt.recorder.commands - commands_before != recorded:
        return None  # copies, clears, downloads or dispatches the recording did not see
    if _key(args, kwargs, [], []) != key or rt is not get_runtime():
        return None  # an argument was resized or swapped its storage
    result_type = None if isinstance(result, torch.Tensor) else type(result)
    if result_type not in (None, tuple, list, _NONE):
        return None
    slot_of = {}
    for i, bid in enumerate(ids):
        slot_of.setdefault(bid, i)
    view_base: dict[int, int] = {}  # buffer id of a new buffer returned as views -> its index among them
    fresh = 0  # new buffers the replay allocates, in the order it allocates them (after the arguments')
    outputs: list = []
    for r in ((result,) if result_type is None else () if result_type is _NONE else result):
        if r is None and result_type is not None:
            outputs.append(None)  # an output the caller did not ask for (output_mask)
            continue
        if not isinstance(r, torch.Tensor):
            return None
        arg = next((i for i, t in enumerate(tensors) if t is r), None)
        if arg is not None:
            outputs.append(arg)
            continue
        if r.is_cpu or r.is_meta:
            return None
        bid = r.untyped_storage().data_ptr() >> 32
        if bid in view_base:  # another view of a new buffer
            if r.dtype != outputs[view_base[bid]].dtype:
                return None
            outputs.append(_View(r, outputs[view_base[bid]].base))
            continue
        if bid != 0 and bid in slot_of:
            return None  # a view of an argument or of another output
        if r.storage_offset() != 0 or r.untyped_storage().nbytes() != _exact_nbytes(r):
            # a view of a larger new buffer (the replay allocates that buffer, then the view)
            if bid == 0 or r.untyped_storage().nbytes() % r.element_size():
                return None
            outputs.append(_View(r, len(view_base)))
            view_base[bid] = len(outputs) - 1
            slot_of[bid] = len(ids) + fresh
            fresh += 1
            continue
        if bid != 0:
            slot_of[bid] = len(ids) + fresh
        fresh += 1
        outputs.append((tuple(r.shape), tuple(r.stride()), r.dtype))
    planned, bound = [], []
    temporaries: list[int] = []
    for (kernel, bindings, counts, label), resources in zip(capture, capture.ranges, strict=True):
        template: list = []
        ranges: list = []  # the bound byte ranges: fixed by the signature, as the buffers' sizes are
        for b, resource in zip(bindings, resources, strict=True):
            if not isinstance(b, (int, BufferSlice)):
                template.append(b)  # a Constant: parameters are fixed by the signature
                ranges.append(b)
                continue
            bid = b if isinstance(b, int) else b.buffer_id
            if bid not in slot_of:
                nbytes = capture.sizes.get(bid, 0)
                if not nbytes or not _freed_during(rt, bid, first_id):
                    return None  # a buffer the call neither got nor made (a cache the kernel keeps)
                slot_of[bid] = len(ids) + fresh + len(temporaries)
                temporaries.append(nbytes)
            template.append(slot_of[bid] if isinstance(b, int) else (slot_of[bid], b.offset, b.nbytes))
            offset, nbytes = resource
            ranges.append((slot_of[bid], offset, nbytes))
        planned.append((kernel, template, counts, label))
        bound.append(ranges)
    return Plan(rt, outputs, result_type, planned, bound, tuple(temporaries))


def plans_held() -> int:
    """How many launch plans (and unplannable signatures) all kernels' tables hold now."""
    return _held[0]


def _store(plans: dict, key: Any, plan: Plan | None) -> None:
    """Put `plan` in its kernel's table, starting that table over when full and every table over when
    all of them together hold MAX_TOTAL_PLANS."""
    if key not in plans:
        if len(plans) >= MAX_PLANS:
            _held[0] -= len(plans)
            plans.clear()
        if _held[0] >= MAX_TOTAL_PLANS:
            for table in _tables:
                table.clear()
            _held[0] = 0
        _held[0] += 1
    plans[key] = plan


def _philox_offset() -> int:
    """The webgpu generator's offset: random kernels advance it, and their plans would repeat numbers."""
    return device_state.default_generators[0].get_offset()


def planned(fn: F) -> F:
    """Wrap an eager kernel so that repeated call signatures replay its launch plan."""
    plans: dict[tuple, Plan | None] = {}  # None: this signature did something a plan cannot replay
    _tables.append(plans)

    @functools.wraps(fn)
    def kernel(*args, **kwargs):
        tensors: list = []
        ids: list = []
        key = _plan_key(args, kwargs, tensors, ids) if _plan_key is not None else None
        if key is None:
            key = _signature(args, kwargs, tensors, ids)
        if key is None:
            _counts["unplanned"] += 1
            return fn(*args, **kwargs)
        plan = plans.get(key, _UNSEEN)
        if plan is None:
            _counts["unplanned"] += 1
            return fn(*args, **kwargs)
        rt = get_runtime()
        if plan is not _UNSEEN and plan.rt is rt:
            _counts["hits"] += 1
            return plan.replay(tensors, ids)
        dispatches_before, commands_before = rt.dispatches, rt.recorder.commands
        offset_before, tuned_before = _philox_offset(), autotune.tunings()
        first_id = rt.pool.last_id
        with recording() as capture:
            result = fn(*args, **kwargs)
        plan = None
        if _philox_offset() == offset_before:
            plan = _build(rt, key, args, kwargs, tensors, ids, result, capture, dispatches_before,
                          commands_before, first_id)
        if plan is None and autotune.tunings() != tuned_before:
            return result  # its timing runs are no part of the call: the next call (tuned) plans it
        _store(plans, key, plan)
        if plan is not None:
            _counts["builds"] += 1
        return result

    return kernel  # type: ignore[return-value]
