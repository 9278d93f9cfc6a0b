"""benchmarks/processes: a run's WebGPU backends in one process and its CUDA references in another, merged
into one results.json and report with each process's GPU clock."""

import json
import subprocess
import sys

from benchmarks.processes import Part, split


def test_cuda_backends_get_a_process_of_their_own():
    parts = split(["dawn", "webgpu-eager", "torch-cuda", "ort-webgpu", "inductor-cuda", "torch-cpu"],
                  late=["inductor-cuda"])
    assert parts == [Part("webgpu", ["dawn", "webgpu-eager", "ort-webgpu", "torch-cpu"], []),
                     Part("cuda", ["torch-cuda", "inductor-cuda"], ["inductor-cuda"])]
    assert [p.name for p in split(["torch-cpu"], [])] == ["webgpu"]


def test_a_run_with_a_cuda_backend_runs_two_processes_and_merges_them(tmp_path):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "--suite", "eager_per_op", "--smoke", "--out", str(out),
         "--backends", "torch-cpu,webgpu-eager,torch-cuda"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "results.json").read_text())
    processes = doc["meta"]["processes"]
    assert [(p["part"], p["backends"]) for p in processes] == [("webgpu", ["torch-cpu", "webgpu-eager"]),
                                                               ("cuda", ["torch-cuda"])]
    webgpu = processes[0]
    assert webgpu["cuda_context"] is False and webgpu["libcuda_loaded"] is False
    assert webgpu["torch_cuda_initialized"] is False
    assert all("gpu_clock" in p and p["gpu_clock"]["returncode"] == 0 for p in processes)
    backends = {r["backend"] for r in doc["results"]}
    assert {"torch-cpu", "webgpu-eager"} <= backends
    # each figure's rows stay together in the merged order
    names = [r["name"] for r in doc["results"]]
    assert names[:2] == [names[0]] * 2
    assert "The GPU's clock per process" in (out / "results.md").read_text()
    assert sorted(p.name for p in (out / "parts").iterdir()) == ["cuda.json", "webgpu.json"]
