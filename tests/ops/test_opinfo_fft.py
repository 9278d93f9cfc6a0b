"""OpInfo (op_db) float32 samples of torch.fft, stft and the complex64 constructors on the webgpu device
against the CPU, fallback off (tests/ops/opinfo_runner.py): every claimed op passes all of its first
SAMPLES samples."""

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

from .opinfo_runner import assert_all_samples_pass, opinfo_name

SAMPLES = 4

CLAIMED = [
    "fft.fft", "fft.fft2", "fft.fftn", "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ifft", "fft.ifft2",
    "fft.ifftn", "fft.ihfft", "fft.ihfft2", "fft.ihfftn", "fft.irfft", "fft.irfft2", "fft.irfftn", "fft.rfft",
    "fft.rfft2", "fft.rfftn", "stft",
    # complex64 construction and inspection (ops/complex.py); polar passes too but needs torch.cos, whose
    # shader main currently fails to build (cos_ defined by both codegen/wgsl_math.py and wgsl_special.py)
    "angle", "complex", "view_as_complex",
]

# float16 where torch CPU has it (its fft and complex32 are CUDA-only)
CLAIMED_FLOAT16 = ["angle"]

_OPS = {opinfo_name(op): op for op in op_db}


@pytest.mark.parametrize("name", CLAIMED)
def test_opinfo_fft(webgpu, name):
    assert_all_samples_pass(_OPS[name], torch.float32, SAMPLES)


@pytest.mark.parametrize("name", CLAIMED_FLOAT16)
def test_opinfo_float16(webgpu, name):
    assert_all_samples_pass(_OPS[name], torch.float16, SAMPLES)
