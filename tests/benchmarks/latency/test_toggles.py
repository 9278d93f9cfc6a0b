"""benchmarks/latency/toggles (`python -m benchmarks latency toggles SET`): each toggle set reaches the Dawn
device it names (a process each: the instance's toggles are fixed once it exists), and the eager
breakdown's rows come back tagged with it."""

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("toggles,expect", [("no-robustness", True), ("no-lazy-clear", False)])
def test_toggle_sets_reach_the_device(toggles, expect):
    run = subprocess.run([sys.executable, "-m", "benchmarks", "latency", "toggles", toggles, "--only",
                          r"f32 256\^3", "--reps", "2"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [r["case"] for r in rows] == ["matmul f32 256^3"]
    assert rows[0]["toggles"] == toggles and rows[0]["wall_us"] > 0
    assert ("disable_robustness" in rows[0]["dawn_toggles"]) is expect
