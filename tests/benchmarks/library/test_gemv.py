"""benchmarks/library/gemv.py on the raw runtime: a dense and a quantized row of its small shapes are
checked against the float64 reference and timed (the H200 run uses the full Llama-1B decode shapes)."""

from __future__ import annotations

from benchmarks.library import gemv


def test_small_rows_are_checked_and_timed():
    rows = gemv.figures(small=True, reps=1, dtypes=("f32", "i8"), only=["k8n16.u4.v4", "k8n16.u2"],
                                cases=["q/o proj"], verbose=False)
    ours = [r for r in rows if r["variant"] != "torch-cuda"]
    assert {r["dtype"] for r in ours} == {"f32", "i8g256"}
    assert all("error" not in r and r["gbps"] > 0 and r["rel_error"] < 1e-2 for r in ours), ours
    assert any("default" in line or "best" in line for line in gemv.summary(rows))
