"""Runs PyTorch OpInfo samples on the webgpu device against the CPU and counts outcomes per op.

Samples are generated on the CPU (same values on both sides), copied to webgpu, run with the CPU
fallback disabled (TORCH_WEBGPU_FALLBACK=0, so a missing kernel raises instead of silently passing),
and compared with torch.testing.assert_close. A sample the CPU itself rejects is skipped; a webgpu
exception is a clean failure (counted, never a crash).
"""

from __future__ import annotations

import copy
import os
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten, tree_map

# float32 tolerances: WebGPU transcendental builtins and reduction orders differ from the CPU's by a few ulp
# (other dtypes use assert_close's per-dtype defaults)
RTOL = 1e-5
ATOL = 1e-5
# (rtol, atol) where float32 evaluation orders cancel: elements near zero inside results of magnitude ~1
# or more (a series, a three-term recurrence, a softmax-weighted sum) differ by more than ATOL absolute
OP_TOLERANCES = {"matrix_exp": (1e-4, 5e-4), "special.hermite_polynomial_he": (1e-5, 1e-4),
                 "special.hermite_polynomial_h": (1e-5, 1e-4),
                 "nn.functional.scaled_dot_product_attention": (1e-5, 5e-5)}


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


def _compare(actual, expected, rtol: float = RTOL, atol: float = ATOL, on_cpu: bool = False) -> None:
    """Every output of the webgpu run matches the CPU's (float32 within rtol/atol); results live on
    webgpu unless the sample asked for the CPU (`on_cpu`, e.g. `to(device="cpu")`)."""
    a_leaves, _ = tree_flatten(actual)
    e_leaves, _ = tree_flatten(expected)
    assert len(a_leaves) == len(e_leaves), "different number of outputs"
    for a, e in zip(a_leaves, e_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"expected a tensor, got {type(a)}"
            assert a.device.type == "webgpu" or on_cpu, f"result on {a.device}, not webgpu"
            if e.dtype == torch.float32:
                torch.testing.assert_close(a.cpu(), e, rtol=rtol, atol=atol, equal_nan=True)
            else:  # torch's per-dtype defaults (float16: rtol 1e-3; integers and bool: exact)
                torch.testing.assert_close(a.cpu(), e, equal_nan=True)
        elif isinstance(e, float):
            torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert a == e, f"{a!r} != {e!r}"


def _compare_eigh(actual, expected, a: torch.Tensor, uplo: str = "L") -> None:
    """Eigenvectors are unique only up to sign: eigenvalues match the CPU's and A Q = Q diag(L) for the
    Hermitian matrix the op reads (its `uplo` triangle)."""
    values, vectors = (t.cpu() for t in actual)
    torch.testing.assert_close(values, expected[0], rtol=1e-4, atol=1e-4)
    tri = a.tril() if uplo.upper() == "L" else a.triu()
    full = tri + tri.mT - torch.diag_embed(torch.diagonal(a, dim1=-2, dim2=-1))
    torch.testing.assert_close(full @ vectors, vectors * values.unsqueeze(-2), rtol=1e-4, atol=1e-4)


def _compare_eig(actual, expected, a: torch.Tensor) -> None:
    """Eigenvectors are unique only up to a complex scale and eigenvalues come in no fixed order: the
    eigenvalues match the CPU's as a set and A V = V diag(w)."""
    values, vectors = (t.cpu() for t in actual)
    torch.testing.assert_close(_sorted_complex(values), _sorted_complex(expected[0]), rtol=1e-4, atol=1e-4)
    ac = a.to(vectors.dtype)
    torch.testing.assert_close(ac @ vectors, vectors * values.unsqueeze(-2), rtol=1e-4, atol=1e-4)


def _sorted_complex(w: torch.Tensor) -> torch.Tensor:
    """Complex values in a fixed order: by real part, then imaginary part."""
    return w.gather(-1, torch.sort(w.real * 1e3 + w.imag, dim=-1).indices)


def _check(name: str, actual, expected, args: tuple, kwargs: dict) -> None:
    """The comparison `name` needs: decompositions by their defining equation, others output by output."""
    if name == "linalg.eigh":
        _compare_eigh(actual, expected, args[0], kwargs.get("UPLO", args[1] if len(args) > 1 else "L"))
    elif name == "linalg.eig":
        _compare_eig(actual, expected, args[0])
    else:
        rtol, atol = OP_TOLERANCES.get(name, (RTOL, ATOL))
        _compare(actual, expected, rtol, atol, on_cpu=_asks_for_cpu(args, kwargs))


def _asks_for_cpu(args: tuple, kwargs: dict) -> bool:
    """Whether a sample names the CPU as a device (its result then rightly lives there)."""
    leaves, _ = tree_flatten((args, kwargs))
    return any(x == "cpu" or (isinstance(x, torch.device) and x.type == "cpu") for x in leaves
               if isinstance(x, str | torch.device))


def _unseeded(op, args: tuple, kwargs: dict):
    """`op(*args, **kwargs)` on the CPU from another generator state, with torch.manual_seed disabled
    (OpInfo's wrapper_set_seed reseeds to 42 before a random op)."""
    state = torch.get_rng_state()
    seed = torch.manual_seed
    torch.random.default_generator.manual_seed(12345)
    torch.manual_seed = lambda *a, **k: torch.random.default_generator
    try:
        return op(*args, **kwargs)
    finally:
        torch.manual_seed = seed
        torch.set_rng_state(state)


def _same(a, b) -> bool:
    """Whether two CPU results agree within the comparison's tolerance (NaNs equal): a sample whose
    result depends on the draws differs; a randomized algorithm that converges (pca_lowrank) does not."""
    try:
        torch.testing.assert_close(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)
        return True
    except Exception:  # noqa: BLE001 (any difference, including of structure)
        return False


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
            other_draw = _unseeded(op, copy.deepcopy(args), copy.deepcopy(sample.kwargs))
            expected = op(*args, **sample.kwargs)
        except Exception:  # noqa: BLE001 (the CPU rejects this sample: nothing to compare)
            result.skipped += 1
            continue
        if not _same(other_draw, expected):
            # its values come from the generator (dropout_p > 0 in an OpInfo wrapped in
            # wrapper_set_seed): the device's generator draws other numbers, nothing to compare
            result.skipped += 1
            continue
        try:
            wargs = tree_map(_to_webgpu, args)
            wkwargs = _webgpu_kwargs(sample.kwargs)
            actual = op(*wargs, **wkwargs)
        except Exception as exc:  # noqa: BLE001
            result.raised += 1
            result.errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"] += 1
            continue
        try:
            _check(result.name, actual, expected, args, sample.kwargs)
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
