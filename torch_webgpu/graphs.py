"""`torch.webgpu` graphs, like `torch.cuda.graphs`: capture eager webgpu work once, replay it cheaply.

    g = torch.webgpu.WebGPUGraph()
    with torch.webgpu.graph(g):
        y = model(x)          # runs once, and every dispatch/copy/clear it records is captured
    x.copy_(new_input)        # static inputs: new data goes into the captured tensors
    g.replay()                # re-records the captured commands on the same buffers (y is updated)

Replay skips everything eager does per op in Python (dispatcher, type promotion, launch-plan lookup,
output allocation, bind-group lookup): with the native executor the whole capture is one prepared
program recorded and submitted by one C call. As with CUDA graphs the inputs and outputs are static,
shapes are frozen, and work a replay cannot repeat is refused during capture with GraphCaptureError:
uploads of host data, readbacks (`.cpu()`, `.item()`, printing, the CPU fallback, ops with
data-dependent output shapes), waits (`torch.webgpu.synchronize()`), and random number generation
(a replay would repeat the captured numbers). Memory the captured commands touch — temporaries freed
during capture, outputs, parameters — stays reserved for the graph until `reset()` (its private pool).
Warm the model up (run it once or twice) before capturing so one-time work (kernel compilation, lazy
buffers) happens outside the capture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import _C
from .device_state import default_generators, runtime
from .runtime import GraphCaptureError, runtime_initialized
from .runtime.capture import CapturedCommands, CommandCapture, recording

__all__ = ["GraphCaptureError", "WebGPUGraph", "graph", "is_current_stream_capturing",
           "make_graphed_callables"]


def is_current_stream_capturing() -> bool:
    """True while a torch.webgpu.graph capture is open (webgpu has one queue: the "current stream")."""
    return runtime_initialized() and runtime().capture is not None


class WebGPUGraph:
    """A captured sequence of webgpu commands that `replay()` re-records on the same buffers."""

    def __init__(self) -> None:
        self._capture: CommandCapture | None = None
        self._recording: Any = None
        self._captured: CapturedCommands | None = None
        self._fallbacks: dict[str, int] = {}
        self._philox_offset = 0

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        """Start capturing the webgpu work recorded from now on into this graph. webgpu has one queue, so
        every mode acts as "global": work recorded by other threads is captured (or refused) too."""
        if pool is not None:
            raise NotImplementedError("torch.webgpu graphs do not share memory pools yet: each graph keeps "
                                      "its own buffers; pass pool=None")
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(f"capture_error_mode={capture_error_mode!r}: expected 'global', 'thread_local' "
                             f"or 'relaxed'")
        if self._captured is not None or self._capture is not None:
            raise GraphCaptureError("this WebGPUGraph already holds a capture; call g.reset() before "
                                    "capturing again")
        capture = CommandCapture(runtime())
        self._fallbacks = _C._fallback_counts()
        self._philox_offset = default_generators[0].get_offset()
        capture.start()
        self._capture = capture
        # An open launch recording keeps eager launch-plan replays on the Python path, which goes through
        # Runtime.dispatch (a native replay would be refused by the capture's completeness check).
        self._recording = recording()
        self._recording.__enter__()

    def _close_recording(self) -> None:
        rec, self._recording = self._recording, None
        if rec is not None:
            rec.__exit__(None, None, None)

    def capture_end(self) -> None:
        """End the capture and prepare the replay (raises GraphCaptureError if capture was refused)."""
        capture, self._capture = self._capture, None
        if capture is None:
            raise GraphCaptureError("capture_end() without capture_begin()")
        self._close_recording()
        fallback = _new_fallback(self._fallbacks)
        random = default_generators[0].get_offset() != self._philox_offset
        captured = capture.stop()
        if fallback or random:
            captured.release()
            if fallback:
                raise _fallback_error(fallback)
            raise GraphCaptureError(
                "torch.webgpu.graph capture drew random numbers (dropout, randn, rand_like, ...): every "
                "replay would repeat the captured numbers; capture in eval mode / without random ops, or "
                "generate the noise outside the graph into a static input tensor")
        self._captured = captured

    def abort_capture(self, cause: BaseException | None = None) -> BaseException | None:
        """End a capture that raised: discard it; returns the error to raise instead of `cause` (a CPU
        fallback named as such), or None to keep `cause`."""
        capture, self._capture = self._capture, None
        self._close_recording()
        fallback = _new_fallback(self._fallbacks)
        if capture is not None:
            rt = capture.rt
            with rt.lock:
                if rt.capture is capture:
                    rt.capture = None
            capture.release()
        if fallback and isinstance(cause, GraphCaptureError):
            return _fallback_error(fallback)
        return None

    def replay(self) -> None:
        """Re-run the captured work on the captured buffers (asynchronous, like any eager op)."""
        if self._captured is None:
            raise GraphCaptureError("replay() of a WebGPUGraph that holds no capture: capture one with "
                                    "`with torch.webgpu.graph(g): ...` first")
        self._captured.replay()

    def reset(self) -> None:
        """Drop the capture and give its pinned memory back to the pool (the graph can capture again)."""
        if self._capture is not None:
            self.abort_capture()
        captured, self._captured = self._captured, None
        if captured is not None:
            captured.release()

    @property
    def dispatches(self) -> int:
        """How many dispatches one replay records."""
        return self._captured.dispatches if self._captured is not None else 0

    @property
    def native(self) -> bool:
        """True when replay goes through the native executor (False: recorded from Python)."""
        return self._captured is not None and self._captured.native

    def __del__(self) -> None:
        try:
            self.reset()
        except Exception:   # interpreter shutdown: the runtime may be gone already
            pass


def _new_fallback(before: dict[str, int]) -> list[str]:
    """Ops that ran through the CPU fallback since `before` was taken."""
    now = _C._fallback_counts()
    return sorted(op for op, count in now.items() if count != before.get(op, 0))


def _fallback_error(ops: list[str]) -> GraphCaptureError:
    return GraphCaptureError(
        f"torch.webgpu.graph capture ran {', '.join(repr(o) for o in ops)} through the CPU fallback (no "
        f"webgpu kernel): it copies through the host, which a replay cannot repeat; run that part outside "
        f"the graph or use an op with a webgpu kernel")


class graph:  # noqa: N801 (mirrors torch.cuda.graph)
    """Context manager capturing the webgpu work inside it into `webgpu_graph` (see module docstring)."""

    def __init__(self, webgpu_graph: WebGPUGraph, pool: Any = None, stream: Any = None,
                 capture_error_mode: str = "global"):
        if stream is not None:
            raise NotImplementedError("webgpu has one queue; pass stream=None")
        self.webgpu_graph = webgpu_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        if is_current_stream_capturing():
            raise GraphCaptureError("a torch.webgpu.graph capture is already open on this device; end it "
                                    "before starting another (captures do not nest)")
        # As torch.cuda.graph does: finish earlier work first, so nothing pending leaks into the capture.
        runtime().synchronize()
        self.webgpu_graph.capture_begin(self.pool, self.capture_error_mode)

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            replacement = self.webgpu_graph.abort_capture(exc)
            if replacement is not None:
                raise replacement from exc
            return
        self.webgpu_graph.capture_end()


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _needs_grad(args: tuple, module: Any) -> bool:
    params = list(module.parameters()) if isinstance(module, torch.nn.Module) else []
    return torch.is_grad_enabled() and any(t.requires_grad for t in (*_tensors(args), *params))


_FORWARD_ONLY = ("torch.webgpu.make_graphed_callables graphs the forward pass only (no backward graph yet); "
                 "call it and the graphed callable under torch.no_grad() / torch.inference_mode(), or make "
                 "the inputs and parameters not require grad")


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool: Any = None) -> Any:
    """Graphed versions of callables (functions or modules), forward only: each is warmed up
    `num_warmup_iters` times on its sample args, captured, and replaced by a callable that copies its
    arguments into the static inputs, replays, and returns the static outputs (overwritten next call)."""
    single = not isinstance(callables, tuple)
    funcs = (callables,) if single else callables
    all_args = (sample_args,) if single else sample_args
    if len(funcs) != len(all_args):
        raise ValueError(f"{len(funcs)} callables but {len(all_args)} sample_args tuples")
    graphed = []
    for fn, args in zip(funcs, all_args, strict=True):
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        if any(not isinstance(a, torch.Tensor) or a.device.type != "webgpu" for a in args):
            raise TypeError("make_graphed_callables: every sample arg must be a webgpu tensor (the static "
                            "inputs)")
        if _needs_grad(args, fn):
            raise NotImplementedError(_FORWARD_ONLY)
        for _ in range(num_warmup_iters):
            fn(*args)
        g = WebGPUGraph()
        with graph(g, pool=pool):
            outputs = fn(*args)
        graphed.append(_graphed(fn, g, args, outputs))
        if isinstance(fn, torch.nn.Module):
            fn.forward = graphed[-1]
    result = tuple(fn if isinstance(fn, torch.nn.Module) else run
                   for fn, run in zip(funcs, graphed, strict=True))
    return result[0] if single else result


def _graphed(fn: Any, g: WebGPUGraph, static_inputs: tuple, static_outputs: Any) -> Callable:
    """The replaying callable of one graphed function."""

    def run(*args: Any) -> Any:
        if len(args) != len(static_inputs):
            raise TypeError(f"graphed callable takes {len(static_inputs)} tensors, got {len(args)}")
        if _needs_grad(args, fn):
            raise NotImplementedError(_FORWARD_ONLY)
        for static, new in zip(static_inputs, args, strict=True):
            if new is static:
                continue
            if not isinstance(new, torch.Tensor) or new.shape != static.shape or new.dtype != static.dtype:
                raise ValueError(f"graphed callable: argument {getattr(new, 'shape', new)} does not match "
                                 f"the captured input {tuple(static.shape)} {static.dtype} (shapes are "
                                 f"frozen)")
            static.copy_(new)
        g.replay()
        return static_outputs

    run.graph = g  # type: ignore[attr-defined]
    return run
