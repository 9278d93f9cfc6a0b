"""benchmarks/latency/clock (`python -m benchmarks latency clock`): each variant in a fresh process, the
workload timed in each that applies, the GPU clock sampled beside it; on a machine without an NVIDIA GPU
(this one) the CUDA and NVML variants say why they cannot apply and the clock says why it was not sampled."""

import json
import subprocess
import sys

from benchmarks import gpu_clock


def test_every_variant_runs_in_its_own_process(tmp_path):
    out = tmp_path / "clock.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "latency", "clock", "--workloads", "matmul",
                           "--seconds", "0.2", "--settle-s", "0", "--feed-ms", "50", "--json", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["variant"]: row for row in json.loads(out.read_text())}
    assert list(rows) == ["as-is", "unpinned", "feed", "feed-own-device", "cuda-context", "cuda-context-lean",
                          "cuda-context-first", "nvml"]
    assert len({row["pid"] for row in rows.values()}) == len(rows)
    nvidia = gpu_clock.nvidia_smi() is not None
    for name, row in rows.items():
        assert row["returncode"] == 0
        if not nvidia:
            assert row["clock"] == {"error": "not sampled: no nvidia-smi on this machine"}
        if not row["applied"]:
            assert name in ("cuda-context", "cuda-context-lean", "cuda-context-first", "nvml") and not nvidia
            assert "cannot be loaded" in row["reason"]
            assert row["workloads"] == []
            continue
        # the runtime's own clock pin (as-is) opens CUDA on NVIDIA too; every other variant runs unpinned
        assert row["libcuda_loaded"] is ((name.startswith("cuda-context") or name == "as-is") and nvidia)
        assert row["clock_pin"].startswith("clock pin: " + ("pinned" if nvidia and name == "as-is" else
                                                            "not needed" if name == "as-is" else "off"))
        [matmul] = row["workloads"]
        assert matmul["workload"] == "matmul" and matmul["unit"] == "us" and matmul["value"] > 0
        assert matmul["calls"] >= 3 and matmul["window"][1] > matmul["window"][0]
    for name in ("feed", "feed-own-device"):
        assert rows[name]["feed"]["submits"] > 0
    if nvidia:   # a GPU machine: the context's memory and NVML's reasons are read
        assert all("after" in rows[n]["cuda_context"]
                   for n in ("cuda-context", "cuda-context-lean", "cuda-context-first"))
        assert rows["nvml"]["nvml"]["readings"]
    summary = done.stdout.splitlines()
    assert any(line.startswith("as-is: matmul (webgpu-eager)") for line in summary)
