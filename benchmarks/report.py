"""Write results as JSON, a markdown table and PNG plots."""

from __future__ import annotations

import json
import platform
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

from .harness import DispatchProfile, Failure, Measurement


def write_json(results: list[Measurement], meta: dict, path: Path, failures: list[Failure],
               profiles: list[DispatchProfile] = ()) -> None:
    """All measurements, the figures that failed, per-dispatch profiles, and run metadata."""
    path.write_text(json.dumps({"meta": meta, "results": [r.as_dict() for r in results],
                                "failures": [asdict(f) for f in failures],
                                "profiles": [asdict(p) for p in profiles]}, indent=1))


def profile_table(profiles: list[DispatchProfile]) -> str:
    """Markdown: per profiled call, dispatch count, GPU time vs wall time, and the costliest kernels."""
    if not profiles:
        return ""
    rows = ["", "Where the time goes (one call, per-dispatch GPU times):", "",
            "| benchmark | backend | dispatches | GPU ms (sum) | wall ms | timer "
            "| costliest kernels (count, ms) |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in profiles:
        top = "; ".join(f"{label} ({n}, {ms:.3f})" for label, n, ms in p.top)
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
    return path


def run_metadata(adapter_description: str) -> dict:
    """Where the numbers come from."""
    return {"host": platform.node(), "python": platform.python_version(), "adapter": adapter_description}
