"""`python -m benchmarks run --suite micro|models|all --backends dawn,wgpu --out DIR [--smoke]`."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from tqdm import tqdm

from .backends import ALL_BACKENDS
from .harness import Settings
from .report import (
    failure_table,
    load_results,
    markdown_table,
    plot,
    profile_table,
    run_metadata,
    write_json,
)

SUITES = {"micro": ["tiny_dispatch", "eager_per_op", "matmul", "bandwidth", "nn_ops", "compile_time"],
          "models": ["models"]}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and run the chosen suites."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run benchmark suites")
    each = SUITES["micro"] + SUITES["models"]
    run.add_argument("--suite", default="micro",
                     help=f"micro, models, all, or a comma-separated list of {each}")
    run.add_argument("--backends", default=",".join(ALL_BACKENDS),
                     help=f"comma-separated subset of {list(ALL_BACKENDS)} (CUDA ones run only with a GPU)")
    run.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    run.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition (CI)")
    run.add_argument("--repeats", type=int, default=5)
    run.add_argument("--strict", action="store_true", help="exit non-zero if any figure failed")
    run.add_argument("--bundles", type=Path, default=None,
                     help="prepared bundles for webgpu-compiled on machines without the compiler")
    prep = sub.add_parser("prepare", help="compile the webgpu-compiled figures into bundles (GPU machines)")
    prep.add_argument("--out", type=Path, required=True)
    prep.add_argument("--smoke", action="store_true")
    prep.add_argument("--target", default="webgpu-core",
                      help="bundle target: auto, webgpu-core, or the GPU machine's adapter FILE.json "
                           "(`torch-webgpu adapter --json` there)")
    prep.add_argument("--no-iree", action="store_true", help="skip the .vmfb files for IREE's Vulkan runtime")
    rep = sub.add_parser("report", help="merge results.json files of several runs into one table and plot")
    rep.add_argument("results", type=Path, nargs="+")
    rep.add_argument("--out", type=Path, required=True, help="writes OUT.md and OUT.png")
    args = parser.parse_args(argv)
    if args.command == "report":
        results, failures, profiles = load_results(args.results)
        table = markdown_table(results) + profile_table(profiles) + failure_table(failures)
        args.out.with_suffix(".md").write_text(table)
        plot(results, args.out.with_suffix(".png"))
        print(table)
        return
    if args.command == "prepare":
        from .bundled import prepare

        prepare(args.out, Settings(smoke=args.smoke), args.target, iree=not args.no_iree)
        return

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - set(ALL_BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from {list(ALL_BACKENDS)}")
    names = []
    for part in args.suite.split(","):
        if part not in ("all", *SUITES, *each):
            parser.error(f"unknown suite {part!r}; choose micro, models, all or from {each}")
        names += each if part == "all" else SUITES.get(part, [part])
    settings = Settings(smoke=args.smoke, repeats=args.repeats, bundle_dir=args.bundles)
    results = []
    failures: list[str] = []
    for name in tqdm(names, desc="benchmarks", unit="suite"):
        module = importlib.import_module(f"benchmarks.suites.{name}")
        try:
            results.extend(module.run(settings, backends))
        except Exception as exc:  # one broken suite must not hide the others' figures
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            tqdm.write(f"suite {name} failed: {failures[-1]}")

    from torch_webgpu.runtime import get_runtime

    args.out.mkdir(parents=True, exist_ok=True)
    write_json(results, run_metadata(get_runtime().info.describe()), args.out / "results.json",
               settings.failures, settings.profiles)
    table = markdown_table(results) + profile_table(settings.profiles) + failure_table(settings.failures)
    (args.out / "results.md").write_text(table)
    plot(results, args.out / "results.png")
    print(table)
    if args.strict and settings.failures:
        raise SystemExit(f"{len(settings.failures)} figures failed (see the table)")
    if failures:
        raise SystemExit("failed suites:\n  " + "\n  ".join(failures))
