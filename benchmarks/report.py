"""Write results as JSON, a markdown table and PNG plots."""

from __future__ import annotations

import importlib
import json
import platform
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from .harness import DispatchProfile, Failure, Measurement


def write_json(results: list[Measurement], meta: dict, path: Path, failures: list[Failure],
               profiles: list[DispatchProfile] = (), autotune: dict | None = None,
               extra: dict | None = None) -> None:
    """All measurements, the figures that failed, per-dispatch profiles, the autotuner's choices (None:
    no autotuner cache), run metadata, and any `extra` top-level keys (the GPU clock's samples)."""
    path.write_text(json.dumps({"meta": meta, "results": [r.as_dict() for r in results],
                                "failures": [asdict(f) for f in failures],
                                "profiles": [asdict(p) for p in profiles],
                                "autotune": autotune, **(extra or {})}, indent=1, default=str))


def profile_table(profiles: list[DispatchProfile]) -> str:
    """Markdown: per profiled call, dispatch count, GPU time vs wall time, and the costliest kernels."""
    if not profiles:
        return ""
    rows = ["", "Where the time goes (one call, per-dispatch GPU times):", "",
            "| benchmark | backend | dispatches | GPU ms (sum) | wall ms | timer "
            "| costliest kernels (count, ms) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in profiles:
        top = "; ".join(f"{label} ({n}, {ms:.3f})" for label, n, ms in p.top[:5])
        rows.append(f"| {p.name} | {p.backend} | {p.dispatches} | {p.gpu_ms:.3f} | {p.wall_ms:.3f} | "
                    f"{p.source} | {top} |")
    return "\n".join(rows) + "\n"


def failure_table(failures: list[Failure]) -> str:
    """Markdown list of the figures that could not be measured."""
    if not failures:
        return ""
    rows = ["", "Not measured:", "", "| suite | benchmark | backend | error |", "| --- | --- | --- | --- |"]
    rows += [f"| {f.suite} | {f.name} | {f.backend} | {f.error.replace('|', '/')} |" for f in failures]
    return "\n".join(rows) + "\n"


REFERENCE_ORDER = ("torch-cuda", "torch-cpu")
def relative_speed(value: float, reference: float, unit: str) -> float:
    """How many times faster `value` is than `reference` (>1 = faster), whatever the unit's direction:
    rates (TFLOP/s, GB/s, tokens/s, ...) are higher-is-better, times (ms, us/op) lower-is-better."""
    if unit.endswith("/s"):
        return value / reference
    return reference / value


def load_results(paths: list[Path]) -> tuple[list[Measurement], list[Failure], list[DispatchProfile]]:
    """The measurements, failures and profiles of one or more results.json files (e.g. several calls)."""
    results, failures, profiles = [], [], []
    for path in paths:
        path = Path(path)
        doc = json.loads(path.read_text())
        for r in doc["results"]:
            r["params"] = {**r.get("params", {}), "run": path.parent.name}   # ratios stay within a run
            results.append(Measurement(**r))
        failures += [Failure(**f) for f in doc.get("failures", [])]
        profiles += [DispatchProfile(**p) for p in doc.get("profiles", [])]
    return results, failures, profiles


def markdown_table(results: list[Measurement]) -> str:
    """One row per figure: median [min, max] and its speed relative to torch measured in the same run."""
    rows = ["| suite | benchmark | backend | median | min | max | unit | speed vs reference |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    by_key: dict[tuple, dict[str, Measurement]] = defaultdict(dict)
    for r in results:
        by_key[(r.suite, r.name, r.params.get("run"))][r.backend] = r
    for r in results:
        group = by_key[(r.suite, r.name, r.params.get("run"))]
        ref_name = next((b for b in REFERENCE_ORDER if b in group), next(iter(group)))
        ref = group[ref_name]
        speed = relative_speed(r.median, ref.median, r.unit) if ref.median and r.median else 0.0
        rows.append(f"| {r.suite} | {r.name} | {r.backend} | {r.median:.4g} | {r.minimum:.4g} | "
                    f"{r.maximum:.4g} | {r.unit} | {speed:.2f}x {ref_name} |")
    return "\n".join(rows) + "\n"


def plot(results: list[Measurement], path: Path) -> Path | None:
    """A grouped bar chart of medians (with min/max whiskers) per benchmark; None if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    groups: dict[str, list[Measurement]] = defaultdict(list)
    for r in results:
        groups[f"{r.name} [{r.unit}]"].append(r)
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, 2.2 * len(groups)), squeeze=False)
    for ax, (title, rs) in zip(axes[:, 0], groups.items(), strict=True):
        medians = [r.median for r in rs]
        errs = [[r.median - r.minimum for r in rs], [r.maximum - r.median for r in rs]]
        ax.barh([r.backend for r in rs], medians, xerr=errs, color="tab:blue")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    shrink_png(path)
    return path


def shrink_png(path) -> None:
    """Rewrite a plot as a 256-colour PNG (a third of matplotlib's RGBA bytes): the committed results
    travel with every device call's working tree, which has a 64 MiB limit."""
    from PIL import Image

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def run_metadata(adapter_description: str) -> dict:
    """Where the numbers come from."""
    return {"host": platform.node(), "python": platform.python_version(), "adapter": adapter_description}


def library_table(profiles: list[DispatchProfile]) -> str:
    """Markdown: per profiled compiled figure, the share of GPU time in kernel-library dispatches against
    IREE's (and the runtime's own helpers), from the per-dispatch timestamps of one call."""
    rows = [p for p in profiles if p.backend == "webgpu-compiled" and p.by_kind]
    if not rows:
        return ""
    out = ["", "Kernel library vs IREE (compiled, one call, per-dispatch GPU times):", "",
           "| benchmark | dispatches library / IREE / other | GPU ms library / IREE / other "
           "| library share of GPU time |",
           "| --- | --- | --- | --- |"]
    for p in rows:
        kinds = [p.by_kind.get(k, [0, 0.0]) for k in ("library", "iree", "other")]
        total = sum(ms for _, ms in kinds)
        share = f"{100 * kinds[0][1] / total:.0f}%" if total else "–"
        out.append(f"| {p.name} | {' / '.join(str(n) for n, _ in kinds)} | "
                   f"{' / '.join(f'{ms:.3f}' for _, ms in kinds)} | {share} |")
    return "\n".join(out) + "\n"


def autotune_choices() -> dict | None:
    """The autotuner's cached choices on this machine, or None where there is no autotuner (its module,
    torch_webgpu/kernels/autotune.py, is absent) or no cache file yet.

    Read through the module's `cached_choices()` if it has one, else the JSON file its `cache_file()`
    (or `cache_path()`, `CACHE_PATH`) names."""
    try:
        autotune = importlib.import_module("torch_webgpu.kernels.autotune")
    except ImportError:
        return None
    try:
        if callable(getattr(autotune, "cached_choices", None)):
            return dict(autotune.cached_choices())
        path = next((getattr(autotune, a) for a in ("cache_file", "cache_path", "CACHE_PATH")
                     if getattr(autotune, a, None)), None)
        path = Path(path() if callable(path) else path) if path else None
        if path is None or not path.is_file():
            return None
        return json.loads(path.read_text())
    except Exception as exc:  # a broken cache must not lose the run's figures
        return {"error": f"{type(exc).__name__}: {exc}"}


def autotune_table(choices: dict | None) -> str:
    """Markdown: one row per tuned (kernel, shape class, dtype, adapter) key and the variant it chose."""
    if choices is None:
        return "\nAutotuner: no cache (no autotuner in this build, or nothing tuned).\n"
    out = ["", "Autotuner's choices (this machine's cache):", "", "| key | choice |", "| --- | --- |"]
    for key, value in choices.items():
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        out.append(f"| {str(key).replace('|', '/')} | {text.replace('|', '/')[:300]} |")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Target:
    """A goal: figure `name` (a regular expression, full match) on backend `ours` at least `goal` times as
    fast as figure `ref_name` on `ref` in the same run; `goal` None: measured at all. With `absolute`
    (a unit), `goal` is a value of our figure itself in that unit instead: at least it for a rate (a unit
    ending in /s), at most it otherwise (ms, MB); `ref` is then unused."""

    label: str
    name: str
    ours: str
    ref: str
    goal: float | None
    ref_name: str | None = None    # default: the same figure
    absolute: str | None = None


def _models(label: str, name: str) -> list[Target]:
    return [Target(f"{label} compiled vs torch CUDA eager", name, "webgpu-compiled", "torch-cuda", 1.0),
            Target(f"{label} compiled vs ORT WebGPU", name, "webgpu-compiled", "ort-webgpu", 2.0)]


def _both(label: str, name: str, goal: float) -> list[Target]:
    return [Target(f"{label} compiled", name, "webgpu-compiled", "torch-cuda", goal),
            Target(f"{label} eager", name, "webgpu-eager", "torch-cuda", goal)]


def _matmul(label: str, name: str, library_case: str, dtype: str, goal: float) -> list[Target]:
    """Compiled and eager rows (suite figures `name`), and the kernel library's best variant on the raw
    runtime (`matmul <dtype> <case> (library)`, beside torch CUDA's figure of the same name)."""
    library = re.escape(f"matmul {dtype} {library_case} (library)")
    return [*_both(label, name, goal),
            Target(f"{label} library", library, "webgpu-library", "torch-cuda", goal)]


ISSUE12_TARGETS: tuple[Target, ...] = (
    *_models("ResNet-18 batch 1", r"ResNet-18 \(batch 1\) latency"),
    *_models("BERT-base 128 tokens", r"BERT-base encoder \(128 tokens\) latency"),
    *_models("ViT-B/16 batch 1", r"ViT-B/16 \(batch 1\) latency"),
    *_models("GPT-2 small prefill 128 tokens", r"GPT-2 small prefill \(128 tokens\) latency"),
    *_matmul("f32 matmul 4096³ vs torch CUDA f32 (TF32 off)", r"matmul f32 4096\^3", "4096^3", "f32", 0.8),
    *_matmul("f32 matmul 128×768×3072 (GPT-2 prefill) vs torch CUDA f32 (TF32 off)",
             r"matmul f32 (prefill )?128x768x3072", "prefill 128x768x3072 B[K,N]", "f32", 0.5),
    *_matmul("f16 matmul 4096³ vs torch CUDA f16", r"matmul f16 4096\^3", "4096^3", "f16", 0.4),
    Target("f16 model compiled (BERT-base or GPT-2)", r"(BERT|GPT-2).*f16.* latency", "webgpu-compiled",
           "torch-cuda", None),
    *_both("sum f32 512 MiB", r"sum f32 512 MiB", 0.7),
    *_both("softmax 8192×4096", r"softmax 8192x4096", 0.7),
    *_both("layer_norm 8192×4096", r"layer_norm 8192x4096", 0.7),
    Target("ResNet-18 batch 1 eager vs torch CUDA eager", r"ResNet-18 \(batch 1\) latency", "webgpu-eager",
           "torch-cuda", 0.5),
    Target("BERT-base 128 tokens eager vs torch CUDA eager", r"BERT-base encoder \(128 tokens\) latency",
           "webgpu-eager", "torch-cuda", 0.5),
    # issue 13: an eager model captured with torch.webgpu.graph replays >= 3x faster than eager
    Target("MLP captured with torch.webgpu.graph: replay vs eager (issue 13)",
           r"graph: MLP .* per call \(synchronised\)", "webgpu-graph", "webgpu-eager", 3.0),
    Target("transformer block captured with torch.webgpu.graph: replay vs eager (issue 13)",
           r"graph: transformer block .* per call \(synchronised\)", "webgpu-graph", "webgpu-eager", 3.0),
)


# Issue 14's language-model figures (benchmarks/suites/llm.py; tiny smoke runs match too).
_LLAMA = r"Llama-3\.2-1B(-tiny)? "
_DECODE, _PREFILL = r"decode \(KV cache \d+\)", r"prefill \(\d+ tokens\)"

ISSUE14_TARGETS: tuple[Target, ...] = (
    Target("Llama-3.2-1B int4 decode ≥ 151 tokens/s (ExecuTorch WebGPU, M4 Pro)",
           f"{_LLAMA}int4 {_DECODE} throughput", "webgpu-compiled", "", 151.0, absolute="tokens/s"),
    Target("Llama-3.2-1B int4 prefill (1,024 tokens) ≥ 2,176 tokens/s (ExecuTorch WebGPU)",
           f"{_LLAMA}int4 {_PREFILL} throughput", "webgpu-compiled", "", 2176.0, absolute="tokens/s"),
    Target("int4 decode vs torch CUDA eager f16 decode", f"{_LLAMA}int4 {_DECODE} throughput",
           "webgpu-compiled", "torch-cuda", 1.0, ref_name=f"{_LLAMA}f16 {_DECODE} throughput"),
    Target("f16 decode vs inductor f16 decode", f"{_LLAMA}f16 {_DECODE} throughput", "webgpu-compiled",
           "inductor-cuda", 0.8),
    Target("int4 model device memory (decode, full KV cache) ≤ 1,200 MB",
           f"{_LLAMA}int4 {_DECODE} device memory", "webgpu-compiled", "", 1200.0, absolute="MB"),
)

ISSUE_TARGETS: tuple[tuple[str, tuple[Target, ...]], ...] = (("Issue 12", ISSUE12_TARGETS),
                                                             ("Issue 14", ISSUE14_TARGETS))


def _find(results: list[Measurement], pattern: str, backend: str) -> Measurement | None:
    return next((r for r in results if r.backend == backend and re.fullmatch(pattern, r.name)), None)


def has_figures(results: list[Measurement], targets: tuple[Target, ...]) -> bool:
    """Whether any figure a target reads (ours or its reference) is among `results`."""
    return any(_find(results, t.name, t.ours) or (t.ref and _find(results, t.ref_name or t.name, t.ref))
               for t in targets)


def _target_row(group: list[Measurement], t: Target) -> tuple[bool, str]:
    """(met, markdown row) of one target within one run's figures (a smoke run's tiny model is marked)."""
    ok, row = _target_verdict(group, t)
    ours = _find(group, t.name, t.ours)
    if ours is not None and ours.params.get("tiny"):
        row = row.removesuffix(" |") + " (tiny model, not the goal's size) |"
    return ok, row


def _target_verdict(group: list[Measurement], t: Target) -> tuple[bool, str]:
    ours = _find(group, t.name, t.ours)
    fmt = "{0.median:.4g} {0.unit}".format
    if t.absolute is not None:
        value = ours.median if ours is not None and ours.unit == t.absolute else None
        higher = t.absolute.endswith("/s")
        ok = value is not None and (value >= t.goal if higher else value <= t.goal)
        goal = f"{'≥' if higher else '≤'} {t.goal:g} {t.absolute}"
        result = "PASS" if ok else ("not measured" if value is None else "fail")
        ratio = f"{value / t.goal:.2f}× goal" if value is not None else "–"
        return ok, (f"| {t.label} | {t.ours} | (absolute) | {fmt(ours) if ours else '–'} | – | {ratio} | "
                    f"{goal} | {result} |")
    ref = _find(group, t.ref_name or t.name, t.ref)
    ratio = (relative_speed(ours.median, ref.median, ours.unit)
             if ours and ref and ours.median and ref.median and ours.unit == ref.unit else None)
    if t.goal is None:
        ok, goal = ours is not None, "runs"
    else:
        ok, goal = ratio is not None and ratio >= t.goal, f"≥ {t.goal:g}×"
    missing = ours is None or (ref is None and t.goal is not None)
    result = "PASS" if ok else ("not measured" if missing else "fail")
    return ok, (f"| {t.label} | {t.ours} | {t.ref} | {fmt(ours) if ours else '–'} | "
                f"{fmt(ref) if ref else '–'} | {f'{ratio:.2f}×' if ratio is not None else '–'} | {goal} | "
                f"{result} |")


def targets_table(results: list[Measurement], targets: tuple[Target, ...] = ISSUE12_TARGETS,
                  title: str = "Issue 12") -> str:
    """Markdown: each target as the ratio of our figure to its reference measured in the same run (or to
    its absolute goal), with pass/fail against its goal (a figure not measured fails); one table per run."""
    runs: dict = defaultdict(list)
    for r in results:
        runs[r.params.get("run")].append(r)
    out = []
    for run, group in runs.items():
        out += ["", f"{title} targets{f' ({run})' if run else ''}: ratio = how many times as fast as the "
                "reference, same run (absolute goals: our figure against the goal).", "",
                "| target | ours | reference | ours median | reference median | ratio | goal | result |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        passed = 0
        for t in targets:
            ok, row = _target_row(group, t)
            passed += ok
            out.append(row)
        out += ["", f"{passed} of {len(targets)} targets met."]
    return "\n".join(out) + "\n" if out else ""


def issue_tables(results: list[Measurement]) -> str:
    """The targets table of each issue whose figures the run has (issue 12's, issue 14's)."""
    return "".join(targets_table(results, targets, title) for title, targets in ISSUE_TARGETS
                   if has_figures(results, targets))


HOST_GOAL_PER_CALL_US, HOST_GOAL_PER_DISPATCH_US = 50.0, 1.5   # issue 13: compiled host overhead


def host_overhead_table(results: list[Measurement]) -> str:
    """Markdown: per plan executor, compiled host overhead as per-call + per-dispatch µs, fitted through
    the host_overhead suite's cases (wall − GPU where measured, else host CPU), against issue 13's goal."""
    out = []
    for metric in ("wall - GPU per call", "host CPU per call"):
        for backend in ("plan-python", "plan-native"):
            points = sorted((r.params["dispatches"], r.median) for r in results
                            if r.suite == "host" and r.backend == backend and r.name.endswith(metric)
                            and "dispatches" in r.params)
            if len(points) < 2 or points[0][0] == points[-1][0]:
                continue
            (d0, t0), (d1, t1) = points[0], points[-1]
            per_dispatch = (t1 - t0) / (d1 - d0)
            per_call = t0 - per_dispatch * d0
            ok = per_call <= HOST_GOAL_PER_CALL_US and per_dispatch <= HOST_GOAL_PER_DISPATCH_US
            if not out:
                out += ["", "Issue 13 compiled host overhead (fit through the host_overhead cases; goal "
                        f"≤ {HOST_GOAL_PER_CALL_US:g} µs per call + ≤ {HOST_GOAL_PER_DISPATCH_US:g} µs per "
                        "dispatch of wall − GPU):", "",
                        "| measure | executor | µs per call | µs per dispatch | cases (dispatches) "
                        "| result |", "| --- | --- | --- | --- | --- | --- |"]
            result = ("PASS" if ok else "fail") if metric.startswith("wall") else "(host CPU only)"
            out.append(f"| {metric.removesuffix(' per call')} | {backend} | {per_call:.1f} | "
                       f"{per_dispatch:.2f} | {', '.join(str(d) for d, _ in points)} | {result} |")
    return "\n".join(out) + "\n" if out else ""


def full_report(results: list[Measurement], profiles: list[DispatchProfile], failures: list[Failure],
                autotune: dict | None, processes: list[dict] | None = None) -> str:
    """The markdown report of a run: the issue-12 and issue-14 targets (those whose figures it has),
    issue-13 host overhead, every figure, the GPU's clock in each process, library vs IREE time, the
    autotuner's choices, where the time goes, and what was not measured."""
    return (issue_tables(results) + host_overhead_table(results) + "\n" + markdown_table(results)
            + clock_table(processes or []) + library_table(profiles)
            + autotune_table(autotune) + profile_table(profiles) + failure_table(failures))


def clock_table(processes: list[dict]) -> str:
    """Markdown: per process of the run, its backends, whether CUDA reached it, and the GPU's SM clock
    beside it (nvidia-smi every 250 ms: median, 5th-95th percentile, share of samples at the idle clock)."""
    if not processes:
        return ""
    out = ["", "The GPU's clock per process (nvidia-smi beside each; a CUDA context raises the clock, and a "
           "WebGPU user has none):", "",
           "| process | backends | CUDA context | libcuda loaded | GPU | samples | SM MHz median "
           "(p5-p95) | at idle clock | memory MHz | GPU busy |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for p in processes:
        context = ("its backends'" if p.get("part") == "cuda" else
                   "opened first (--cuda-context)" if p.get("cuda_context") else "none")
        head = (f"| {p.get('run', '') + ' ' if p.get('run') else ''}{p.get('part', '?')} | "
                f"{', '.join(p.get('backends', []))} | {context} | {_yes_no(p.get('libcuda_loaded'))} |")
        clock = p.get("gpu_clock") or {}
        if clock.get("error") or not clock.get("gpus"):
            out.append(f"{head} – | – | {clock.get('error', 'not sampled')} | – | – | – |")
            continue
        for index, g in clock["gpus"].items():
            share = g.get("at_idle_share")
            idle = "–" if share is None else f"{100 * share:.0f}% (≤ {clock['idle_sm_mhz']:.0f} MHz)"
            sm = (f"{g['sm_mhz_median']:.0f} ({g['sm_mhz_p5']:.0f}-{g['sm_mhz_p95']:.0f})"
                  if "sm_mhz_median" in g else "–")
            mem, busy = g.get("mem_mhz_median"), g.get("util_pct_median")
            mem = "–" if mem is None else f"{mem:.0f}"
            busy = "–" if busy is None else f"{busy:.0f}%"
            out.append(f"{head} {index} | {g['samples']} | {sm} | {idle} | {mem} | {busy} |")
    return "\n".join(out) + "\n"


def _yes_no(value) -> str:
    return "–" if value is None else ("yes" if value else "no")


def load_processes(paths: list[Path]) -> list[dict]:
    """The processes (with their GPU clock summaries) recorded in results.json files, each labelled with
    its file's run (the folder's name)."""
    out = []
    for path in paths:
        for process in json.loads(Path(path).read_text()).get("meta", {}).get("processes", []):
            out.append({**process, "run": Path(path).parent.name})
    return out


def load_autotune(paths: list[Path]) -> dict | None:
    """The autotuner's choices recorded in results.json files (merged; None if none recorded any)."""
    merged = None
    for path in paths:
        choices = json.loads(Path(path).read_text()).get("autotune")
        if choices is not None:
            merged = {**(merged or {}), **choices}
    return merged
