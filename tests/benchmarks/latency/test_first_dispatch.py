"""benchmarks/latency/first_dispatch (`python -m benchmarks latency first-dispatch`): every scenario's
submit is timed dispatch by dispatch, the matmul last, and the synchronised eager call closes the rows (a
small size on the software adapter)."""

import torch_webgpu  # noqa: F401  (registers the device)
from benchmarks.latency.first_dispatch import run


def test_each_scenario_times_its_dispatches_with_the_matmul_last():
    rows = run(reps=1, size=64)
    scenarios, wall = rows[:-1], rows[-1]
    assert [r["scenario"] for r in scenarios][:2] == ["alone", "twice"] and len(scenarios) == 8
    for row in scenarios:
        assert row["dispatches"][-1].startswith("matmul.f16.")
        assert len(row["median_us"]) == len(row["dispatches"]) and min(row["median_us"]) > 0
    assert [d.startswith("matmul.") for d in scenarios[1]["dispatches"]] == [True, True]
    assert wall["scenario"] == "synchronised eager call" and wall["wall_us"] > 0
