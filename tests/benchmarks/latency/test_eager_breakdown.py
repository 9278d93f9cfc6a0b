"""benchmarks/latency/eager_breakdown: the dense square matmuls (the software adapter's 256³) are checked
against torch CPU and split into wall, GPU and host time, one kernel each; --only picks cases by name."""

import torch_webgpu  # noqa: F401  (registers the device)
from benchmarks.latency.eager_breakdown import measure


def test_square_matmuls_are_split_into_wall_gpu_and_host_time():
    rows = measure(reps=2, only=r"\^3$")
    names = [r["case"] for r in rows]
    assert names[0] == "matmul f32 256^3" and set(names) <= {"matmul f32 256^3", "matmul f16 256^3"}
    for row in rows:
        assert row["wall_us"] > 0 and row["host_record_us"] > 0 and row["gpu_us"] > 0
        assert len(row["kernels"]) == 1 and next(iter(row["kernels"])).startswith("matmul.")
