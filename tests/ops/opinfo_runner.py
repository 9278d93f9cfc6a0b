"""Runs PyTorch OpInfo samples on the webgpu device against the CPU and counts outcomes per op.

Samples are generated on the CPU (same values on both sides), copied to webgpu, run with the CPU
fallback disabled (TORCH_WEBGPU_FALLBACK=0, so a missing kernel raises instead of silently passing),
and compared with torch.testing.assert_close. A sample the CPU itself rejects is skipped; a webgpu
exception is a clean failure (counted, never a crash).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map

# float32 tolerances: WebGPU transcendental builtins and reduction orders differ from the CPU's by a few ulp
# (other dtypes use assert_close's per-dtype defaults)
RTOL = 1e-5
ATOL = 1e-5


@dataclass
class OpResult:
    """Outcome counts of one OpInfo entry."""

    name: str
    passed: int = 0
    failed: int = 0
    raised: int = 0
    skipped: int = 0
    errors: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        """Samples that ran on both devices."""
        return self.passed + self.failed + self.raised


# (op name, dtype name) -> OpResult of this session, printed by conftest's terminal summary
RESULTS: dict[tuple[str, str], OpResult] = {}


def opinfo_name(op) -> str:
    """'name' or 'name.variant' of an OpInfo."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _to_webgpu(x):
    """x on webgpu; a partial view of a larger CPU storage keeps its storage layout (offset, strides).

    PyTorch builds OpInfo samples on the device under test; `.to()` would compact a view, and ops that
    address the storage itself (as_strided with a storage_offset) would then read other elements.
    """
    if not isinstance(x, torch.Tensor):
        return x
    if x.layout != torch.strided or not x.numel():
        return x.to("webgpu")
    whole = x.untyped_storage().nbytes() // x.element_size()
    if x.storage_offset() == 0 and whole == x.numel():
        return x.to("webgpu")
    storage = x.as_strided((whole,), (1,), 0).to("webgpu")
    return storage.as_strided(x.shape, x.stride(), x.storage_offset())


def _webgpu_kwargs(kwargs: dict) -> dict:
    """Sample kwargs with tensors moved to webgpu and a `device=` (factories) pointed at webgpu."""
    moved = tree_map(_to_webgpu, kwargs)
    if "device" in moved and torch.device(moved["device"]).type == "cpu":
        moved["device"] = "webgpu"
    return moved


def _to_cpu(x):
    return x.cpu() if isinstance(x, torch.Tensor) else x


def _compare(actual, expected) -> None:
    a_leaves, _ = tree_flatten(actual)
    e_leaves, _ = tree_flatten(expected)
    assert len(a_leaves) == len(e_leaves), "different number of outputs"
    for a, e in zip(a_leaves, e_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"expected a tensor, got {type(a)}"
            assert a.device.type == "webgpu", f"result on {a.device}, not webgpu"
            if e.dtype == torch.float32:
                torch.testing.assert_close(a.cpu(), e, rtol=RTOL, atol=ATOL, equal_nan=True)
            else:  # torch's per-dtype defaults (float16: rtol 1e-3; integers and bool: exact)
                torch.testing.assert_close(a.cpu(), e, equal_nan=True)
        elif isinstance(e, float):
            torch.testing.assert_close(a, e, rtol=RTOL, atol=ATOL, equal_nan=True)
        else:
            assert a == e, f"{a!r} != {e!r}"


def run_op(op, dtype: torch.dtype = torch.float32, max_samples: int = 16) -> OpResult:
    """Run up to `max_samples` OpInfo samples of `op` on webgpu vs CPU."""
    result = OpResult(opinfo_name(op))
    os.environ["TORCH_WEBGPU_FALLBACK"] = "0"
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))[:max_samples]
    except Exception as exc:  # noqa: BLE001 (a broken sample generator is reported, not fatal)
        result.errors[f"sample_inputs: {type(exc).__name__}"] += 1
        return result
    for sample in samples:
        args = (sample.input, *sample.args)
        try:
            expected = op(*args, **sample.kwargs)
        except Exception:  # noqa: BLE001 (the CPU rejects this sample: nothing to compare)
            result.skipped += 1
            continue
        wargs = tree_map(_to_webgpu, args)
        wkwargs = _webgpu_kwargs(sample.kwargs)
        try:
            actual = op(*wargs, **wkwargs)
        except Exception as exc:  # noqa: BLE001
            result.raised += 1
            result.errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"] += 1
            continue
        try:
            _compare(actual, expected)
            result.passed += 1
        except Exception as exc:  # noqa: BLE001
            result.failed += 1
            result.errors[f"mismatch {type(exc).__name__}: {' '.join(str(exc).split())[:160]}"] += 1
    return result


def assert_all_samples_pass(op, dtype: torch.dtype, max_samples: int) -> OpResult:
    """Run a claimed op's samples (recorded in RESULTS) and require that some ran and every one passed."""
    result = run_op(op, dtype, max_samples)
    name = opinfo_name(op)
    RESULTS[(name, str(dtype).removeprefix("torch."))] = result
    assert result.total > 0, f"{name}: no {dtype} sample ran ({result.skipped} skipped by the CPU)"
    assert result.passed == result.total, (f"{name} {dtype}: {result.passed}/{result.total} passed; "
                                           f"{dict(result.errors)}")
    return result
