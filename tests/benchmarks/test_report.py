"""The report's issue-12 targets, library-vs-IREE shares and autotuner section."""

from benchmarks.harness import DispatchProfile, Measurement
from benchmarks.report import autotune_table, host_overhead_table, library_table, targets_table


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
