"""The report's issue-12 and issue-14 targets, library-vs-IREE shares and autotuner section."""

import json
from pathlib import Path

from benchmarks.harness import DispatchProfile, Measurement
from benchmarks.report import (
    ISSUE14_TARGETS,
    autotune_table,
    full_report,
    host_overhead_table,
    library_table,
    load_results,
    targets_table,
)

LLM_RUN = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "h200-2026-12-01-llm.json"


def _m(name, backend, median, unit="ms"):
    return Measurement("models", name, backend, unit, median, median, median, 5)


def test_targets_are_ratios_within_the_run_with_pass_or_fail():
    resnet = "ResNet-18 (batch 1) latency"
    table = targets_table([_m(resnet, "webgpu-compiled", 2.0), _m(resnet, "torch-cuda", 2.2),
                           _m(resnet, "ort-webgpu", 3.0),
                           _m("matmul f32 4096^3", "webgpu-compiled", 40.0, "TFLOP/s"),
                           _m("matmul f32 4096^3", "torch-cuda", 50.0, "TFLOP/s")])
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "1.10×" in rows["ResNet-18 batch 1 compiled vs torch CUDA eager"]
    assert rows["ResNet-18 batch 1 compiled vs torch CUDA eager"].endswith("PASS |")
    assert "1.50×" in rows["ResNet-18 batch 1 compiled vs ORT WebGPU"]
    assert rows["ResNet-18 batch 1 compiled vs ORT WebGPU"].endswith("fail |")       # goal 2×
    assert rows["f32 matmul 4096³ vs torch CUDA f32 (TF32 off) compiled"].endswith("PASS |")   # 0.8×
    assert rows["BERT-base 128 tokens compiled vs torch CUDA eager"].endswith("not measured |")
    assert "2 of " in table


def test_library_share_from_profiles():
    profile = DispatchProfile("BERT", "webgpu-compiled", 3, 4.0, 5.0, "timestamp", [],
                              {"library": [2, 3.0], "iree": [1, 1.0]})
    table = library_table([profile])
    assert "| BERT | 2 / 1 / 0 | 3.000 / 1.000 / 0.000 | 75% |" in table
    assert library_table([DispatchProfile("old", "webgpu-compiled", 1, 1.0, 1.0, "timestamp")]) == ""


def test_autotune_section_tolerates_no_cache():
    assert "no cache" in autotune_table(None)
    table = autotune_table({"matmul 128x768x3072 f32": {"variant": "matmul.f32.tile64x64", "ms": 0.1}})
    assert '| matmul 128x768x3072 f32 | {"ms": 0.1, "variant": "matmul.f32.tile64x64"} |' in table


def test_autotune_choices_read_from_the_autotuners_cache_file(tmp_path, monkeypatch):
    import json
    import sys
    import types

    from benchmarks.report import autotune_choices

    cache = tmp_path / "autotune.json"
    cache.write_text(json.dumps({"matmul|m128|f32": {"variant": "simt64"}}))
    module = types.ModuleType("torch_webgpu.kernels.autotune")
    module.cache_file = lambda: cache
    monkeypatch.setitem(sys.modules, "torch_webgpu.kernels.autotune", module)
    assert autotune_choices() == {"matmul|m128|f32": {"variant": "simt64"}}
    cache.unlink()
    assert autotune_choices() is None


def test_library_matmul_rows_compare_with_torch_cudas_figure_of_the_same_name():
    name = "matmul f16 4096^3 (library)"
    table = targets_table([_m(name, "webgpu-library", 300.0, "TFLOP/s"),
                           _m(name, "torch-cuda", 600.0, "TFLOP/s")])
    label = "| f16 matmul 4096³ vs torch CUDA f16 library"
    [row] = [line for line in table.splitlines() if line.startswith(label)]
    assert "0.50×" in row and row.endswith("PASS |")


def test_host_overhead_is_fitted_per_call_and_per_dispatch():
    def host(name, backend, median, dispatches):
        return Measurement("host", f"{name} wall - GPU per call", backend, "us", median, median, median, 5,
                           {"dispatches": dispatches})

    results = [host("MLP", "plan-native", 40.0, 5), host("GPT-2", "plan-native", 340.0, 205),
               host("MLP", "plan-python", 500.0, 5), host("GPT-2", "plan-python", 4500.0, 205)]
    table = host_overhead_table(results)
    assert "| wall - GPU | plan-native | 32.5 | 1.50 | 5, 205 | PASS |" in table
    assert "| wall - GPU | plan-python | 400.0 | 20.00 | 5, 205 | fail |" in table
    assert host_overhead_table(results[:1]) == ""   # one case cannot split call from dispatch cost


def _rows(table):
    return {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines() if line.startswith("| ")}


def test_issue14_absolute_goals_and_ratios():
    decode, prefill = "Llama-3.2-1B int4 decode (KV cache 2048)", "Llama-3.2-1B int4 prefill (1024 tokens)"
    figures = [_m(f"{decode} throughput", "webgpu-compiled", 160.0, "tokens/s"),
               _m(f"{prefill} throughput", "webgpu-compiled", 2000.0, "tokens/s"),
               _m("Llama-3.2-1B f16 decode (KV cache 2048) throughput", "torch-cuda", 80.0, "tokens/s"),
               _m("Llama-3.2-1B f16 decode (KV cache 2048) throughput", "webgpu-compiled", 70.0, "tokens/s"),
               _m("Llama-3.2-1B f16 decode (KV cache 2048) throughput", "inductor-cuda", 100.0, "tokens/s"),
               _m(f"{decode} device memory", "webgpu-compiled", 1100.0, "MB")]
    rows = _rows(targets_table(figures, ISSUE14_TARGETS, "Issue 14"))
    labels = [t.label for t in ISSUE14_TARGETS]
    assert rows[labels[0]].endswith("PASS |") and "1.06× goal" in rows[labels[0]]     # 160 >= 151 tok/s
    assert rows[labels[1]].endswith("fail |")                                           # 2000 < 2176
    assert "2.00×" in rows[labels[2]] and rows[labels[2]].endswith("PASS |")           # int4 vs CUDA f16
    assert "0.70×" in rows[labels[3]] and rows[labels[3]].endswith("fail |")           # < 0.8x inductor
    assert rows[labels[4]].endswith("PASS |") and "≤ 1200 MB" in rows[labels[4]]       # memory: at most
    over = [*figures[:-1], _m(f"{decode} device memory", "webgpu-compiled", 1300.0, "MB")]
    assert _rows(targets_table(over, ISSUE14_TARGETS, "Issue 14"))[labels[4]].endswith("fail |")


def test_report_of_the_committed_llm_run_has_the_issue14_table_only():
    results, failures, profiles = load_results([LLM_RUN])
    report = full_report(results, profiles, failures, None)
    assert report.lstrip().startswith("Issue 14 targets") and "Issue 12 targets" not in report
    rows = _rows(report)
    doc = json.loads(LLM_RUN.read_text())
    figure = {(r["name"], r["backend"]): r["median"] for r in doc["results"]}
    int4 = figure[("Llama-3.2-1B int4 decode (KV cache 2048) throughput", "webgpu-compiled")]
    assert f"{int4:.4g} tokens/s" in rows[ISSUE14_TARGETS[0].label]
    assert rows[ISSUE14_TARGETS[0].label].endswith("PASS |" if int4 >= 151 else "fail |")
    cuda_f16 = figure[("Llama-3.2-1B f16 decode (KV cache 2048) throughput", "torch-cuda")]
    assert f"{int4 / cuda_f16:.2f}×" in rows[ISSUE14_TARGETS[2].label]
    memory = figure.get(("Llama-3.2-1B int4 decode (KV cache 2048) device memory", "webgpu-compiled"))
    verdict = "not measured |" if memory is None else ("PASS |" if memory <= 1200 else "fail |")
    assert rows[ISSUE14_TARGETS[4].label].endswith(verdict)


def test_issue12_runs_have_no_issue14_table():
    report = full_report([_m("ResNet-18 (batch 1) latency", "webgpu-compiled", 2.0)], [], [], None)
    assert report.lstrip().startswith("Issue 12 targets") and "Issue 14" not in report


def test_clock_table_gives_each_processes_sm_clock():
    from benchmarks.gpu_clock import parse_line, summarize
    from benchmarks.report import clock_table

    lines = ["0, P0, 345 MHz, 2619 MHz, 30 %"] * 3 + ["0, P0, 1980 MHz, 2619 MHz, 95 %"]
    webgpu = {"part": "webgpu", "backends": ["webgpu-compiled"], "cuda_context": False,
              "libcuda_loaded": False,
              "gpu_clock": summarize([parse_line(line, 0.0) for line in lines], idle_mhz=345.0)}
    cuda = {"part": "cuda", "backends": ["torch-cuda"], "libcuda_loaded": True,
            "gpu_clock": {"error": "not sampled: no nvidia-smi on this machine"}}
    table = clock_table([webgpu, cuda])
    row = "| webgpu | webgpu-compiled | none | no | 0 | 4 | 345 (345-1980) | 75% (≤ 345 MHz) | 2619 | 30% |"
    assert row in table
    assert "| cuda | torch-cuda | its backends' | yes | – | – | not sampled: no nvidia-smi" in table
    assert clock_table([]) == ""
