"""benchmarks/gpu_clock: nvidia-smi's CSV lines read into samples, their summary per GPU, and the sampler
where there is no nvidia-smi (this machine) or one (a GPU machine)."""

import subprocess
import sys
import time

from benchmarks import gpu_clock

HEADER = "index, pstate, clocks.current.sm [MHz], clocks.current.memory [MHz], utilization.gpu [%]"


def test_csv_lines_become_samples():
    assert gpu_clock.parse_line(HEADER, 0.0) is None
    sample = gpu_clock.parse_line("0, P0, 1980 MHz, 2619 MHz, 45 %\n", 1.5)
    assert sample == gpu_clock.Sample(1.5, 0, "P0", 1980.0, 2619.0, 45.0)
    assert gpu_clock.parse_line("1, P8, [N/A], 405 MHz, 0 %", 2.0).sm_mhz is None


def test_summary_counts_the_samples_at_the_idle_clock():
    idle = [gpu_clock.Sample(i * 0.25, 0, "P0", 345.0, 2619.0, 20.0) for i in range(18)]
    busy = [gpu_clock.Sample(5.0, 0, "P0", 1980.0, 2619.0, 90.0)] * 2
    summary = gpu_clock.summarize(idle + busy, idle_mhz=345.0)
    gpu = summary["gpus"]["0"]
    assert gpu["samples"] == 20 and gpu["sm_mhz_median"] == 345.0 and gpu["sm_mhz_p95"] == 1980.0
    assert gpu["at_idle_share"] == 0.9 and gpu["sm_mhz_p5"] == 345.0
    assert gpu["pstates"] == {"P0": 1.0} and gpu["util_pct_median"] == 20.0
    assert gpu_clock.summarize(busy, idle_mhz=None)["gpus"]["0"]["at_idle_share"] is None
    assert "error" in gpu_clock.summarize([], idle_mhz=345.0)


def test_sampler_says_why_it_has_no_samples_or_samples():
    with gpu_clock.Sampler(period_ms=100) as sampler:
        time.sleep(0.6)
    summary = sampler.summary(gpu_clock.idle_sm_clock())
    if gpu_clock.nvidia_smi() is None:
        assert summary == {"error": "not sampled: no nvidia-smi on this machine"}
        assert sampler.rows(0.0) == []
    else:
        assert sum(g["samples"] for g in summary["gpus"].values()) > 0


def test_a_webgpu_process_maps_no_cuda_driver():
    """An eager op and a synchronize on the webgpu device load no libcuda into the process (the harness's
    WebGPU process relies on it: a CUDA context raises the GPU's clock)."""
    code = ("import torch, torch_webgpu\n"
            "x = torch.ones(64, device='webgpu'); y = (x + x).cpu(); torch.webgpu.synchronize()\n"
            "from benchmarks.gpu_clock import cuda_driver_loaded\n"
            "print(float(y.sum()), cuda_driver_loaded(), torch.cuda.is_initialized())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["128.0", "False", "False"]
