"""OpInfo (op_db) float32 samples of torch.fft and stft on the webgpu device against the CPU, fallback
off (tests/ops/opinfo_runner.py): every claimed op passes all of its first SAMPLES samples."""

import pytest
from torch.testing._internal.common_methods_invocations import op_db

from .opinfo_runner import RESULTS, opinfo_name, run_op

SAMPLES = 4

CLAIMED = [
    "fft.fft", "fft.fft2", "fft.fftn", "fft.hfft", "fft.hfft2", "fft.hfftn", "fft.ifft", "fft.ifft2",
    "fft.ifftn", "fft.ihfft", "fft.ihfft2", "fft.ihfftn", "fft.irfft", "fft.irfft2", "fft.irfftn", "fft.rfft",
    "fft.rfft2", "fft.rfftn", "stft",
]

_OPS = {opinfo_name(op): op for op in op_db}


@pytest.mark.parametrize("name", CLAIMED)
def test_opinfo_fft(webgpu, name):
    result = run_op(_OPS[name], max_samples=SAMPLES)
    RESULTS[(name, "float32")] = result
    assert result.total > 0, f"{name}: no sample ran ({result.skipped} skipped by the CPU)"
    assert result.passed == result.total, (f"{name}: {result.passed}/{result.total} passed; "
                                           f"{dict(result.errors)}")
