"""`python -m benchmarks run|prepare|report|check|latency|library|anatomy|lm ...`: the one entry point.

`run` measures the harness's suites across backends (benchmarks/processes.py: the WebGPU backends in a
process without a CUDA context, the CUDA references in their own); `prepare` compiles bundles for GPU
machines; `report` merges results; `check` checks prepared bundles against torch CPU; `latency`, `library`
and `anatomy` are the probe suites, whose modes print JSON rows (benchmarks/json_rows.py); `lm` times
language models' decode bundles in each runtime (Python, Node, the page) and beside a peer in the page.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from . import json_rows
from .backends import ALL_BACKENDS
from .harness import Settings
from .report import (
    autotune_choices,
    full_report,
    load_autotune,
    load_processes,
    load_results,
    plot,
    write_json,
)

SUITES = {"micro": ["tiny_dispatch", "eager_per_op", "host_overhead", "graphs", "matmul", "bandwidth",
                    "nn_ops", "compile_time"],
          "models": ["models"], "llm": ["llm"]}   # llm: not in `all` (1B-parameter models)
PROBE_SUITES = ("latency", "library", "anatomy", "lm")


def _probe_parser(sub, suite: str) -> dict[str, tuple[str, str]]:
    """The subcommand of one probe suite: its modes, listed with their one-line descriptions."""
    package = importlib.import_module(f"benchmarks.{suite}")
    modes = json_rows.modes(package)
    width = max(len(m) for m in modes)
    listing = "\n".join(f"  {mode:<{width}}  {doc}" for mode, (_, doc) in modes.items())
    doc = package.__doc__ or ""
    parser = sub.add_parser(suite, help=json_rows.headline(doc), description=doc,
                            epilog=f"modes:\n{listing}\n\n`python -m benchmarks {suite} MODE --help` lists a "
                                   "mode's options.", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=list(modes), metavar="MODE")
    parser.add_argument("options", nargs=argparse.REMAINDER, help="the mode's own options")
    return modes


def _run_parser(sub) -> argparse.ArgumentParser:
    run = sub.add_parser("run", help="run benchmark suites")
    each = SUITES["micro"] + SUITES["models"] + SUITES["llm"]
    run.add_argument("--suite", default="micro",
                     help=f"micro, models, all, or a comma-separated list of {each}")
    run.add_argument("--backends", default=",".join(ALL_BACKENDS),
                     help=f"comma-separated subset of {list(ALL_BACKENDS)} (CUDA ones run only with a GPU)")
    run.add_argument("--out", type=Path, default=Path("benchmarks/out"))
    run.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition (CI)")
    run.add_argument("--repeats", type=int, default=5)
    run.add_argument("--strict", action="store_true", help="exit non-zero if any figure failed")
    run.add_argument("--bundles", type=Path, default=None,
                     help="prepared bundles for webgpu-compiled (used even where the compiler is)")
    run.add_argument("--late-backends", default="",
                     help="backends (of --backends) run after every suite has run the others, e.g. "
                          "inductor-cuda, whose compiles would otherwise eat a timed run's budget first")
    run.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                     help="skip the figures left once SECONDS have passed (listed as not measured); results "
                          "are written after every suite, so a run stopped from outside keeps its figures")
    run.add_argument("--late-margin", type=float, default=60.0, metavar="SECONDS",
                     help="with --budget, the late backends start no figure in the last SECONDS (a compile "
                          "in flight then would overrun the budget and lose its suite's figures)")
    run.add_argument("--cuda-reserve", type=float, default=90.0, metavar="SECONDS",
                     help="with --budget, the WebGPU process stops this long before the budget's end, so "
                          "that the CUDA references (run after it, in their own process) get their turn")
    run.add_argument("--late-only", default=None, metavar="REGEX",
                     help="the late backends measure only the figures whose benchmark name matches REGEX "
                          "(e.g. one model of a suite: inductor's compiles of a 1B model cost minutes each)")
    run.add_argument("--only", default=None, metavar="REGEX",
                     help="measure only the figures whose benchmark name matches REGEX (on every backend; "
                          "--late-only replaces it for the late backends)")
    run.add_argument("--no-check", action="store_true",
                     help="do not compare GPU figures with torch CPU before timing them")
    run.add_argument("--cuda-context", action="store_true",
                     help="open a CUDA context in the WebGPU process before any figure, as every figure "
                          "before issue 42 was taken (a context raises the GPU's clock; users have none)")
    run.add_argument("--part", choices=["webgpu", "cuda"], help=argparse.SUPPRESS)   # one process of a run
    return run


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and run the chosen command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = _run_parser(sub)
    prep = sub.add_parser("prepare", help="compile the webgpu-compiled figures into bundles (GPU machines)")
    prep.add_argument("--out", type=Path, required=True)
    prep.add_argument("--smoke", action="store_true")
    prep.add_argument("--target", default="webgpu-core",
                      help="bundle target: auto, webgpu-core, or the GPU machine's adapter FILE.json "
                           "(`torch-webgpu adapter --json` there)")
    prep.add_argument("--no-iree", action="store_true", help="skip the .vmfb files for IREE's Vulkan runtime")
    prep.add_argument("--suites", default="",
                      help="comma-separated suites to bundle (default: every bundled suite; `llm`: the "
                           "Llama-3.2-1B-shaped f16/int8/int4 figures, which are not in the default)")
    rep = sub.add_parser("report", help="merge results.json files of several runs into one table and plot")
    rep.add_argument("results", type=Path, nargs="+")
    rep.add_argument("--out", type=Path, required=True, help="writes OUT.md and OUT.png")
    rep.add_argument("--one-run", metavar="LABEL", default=None,
                     help="the files are parts of one run (ratios across them); also writes OUT.json, merged")
    rep.add_argument("--autotune-here", action="store_true",
                     help="where the files recorded no autotuner choices, read this machine's cache")
    check = sub.add_parser("check", help="check prepared bundles (and .vmfb) against torch CPU")
    check.add_argument("options", nargs=argparse.REMAINDER, help="BUNDLES [--smoke]")
    modes = {suite: _probe_parser(sub, suite) for suite in PROBE_SUITES}
    args = parser.parse_args(argv)
    if args.command in PROBE_SUITES:
        module, _ = modes[args.command][args.mode]
        mode = importlib.import_module(f"benchmarks.{args.command}.{module}")
        mode.main(args.options, prog=f"python -m benchmarks {args.command} {args.mode}")
        return
    if args.command == "check":
        from .check_bundles import main as check_main

        raise SystemExit(check_main(args.options))
    if args.command == "report":
        _report(args)
        return
    if args.command == "prepare":
        from .bundled import prepare

        prepare(args.out, Settings(smoke=args.smoke), args.target, iree=not args.no_iree,
                suites=[x for x in args.suites.split(",") if x] or None)
        return
    _run(args, argv, run)


def _report(args) -> None:
    results, failures, profiles = load_results(args.results)
    autotune = load_autotune(args.results)
    if autotune is None and args.autotune_here:
        autotune = autotune_choices()
    processes = load_processes(args.results)
    if args.one_run is not None:
        for r in results:
            r.params["run"] = args.one_run
        meta = {"parts": [str(p) for p in args.results], "processes": processes}
        write_json(results, meta, args.out.with_suffix(".json"), failures, profiles, autotune)
    table = full_report(results, profiles, failures, autotune, processes)
    args.out.with_suffix(".md").write_text(table)
    plot(results, args.out.with_suffix(".png"))
    print(table)


def _run(args, argv: list[str], parser: argparse.ArgumentParser) -> None:
    from . import processes

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    late = [b.strip() for b in args.late_backends.split(",") if b.strip()]
    unknown = set(backends + late) - set(ALL_BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from {list(ALL_BACKENDS)}")
    if set(late) - set(backends):
        parser.error(f"--late-backends {sorted(set(late) - set(backends))} are not in --backends")
    each = SUITES["micro"] + SUITES["models"] + SUITES["llm"]
    names = []
    for part in args.suite.split(","):
        if part not in ("all", *SUITES, *each):
            parser.error(f"unknown suite {part!r}; choose micro, models, all or from {each}")
        names += SUITES["micro"] + SUITES["models"] if part == "all" else SUITES.get(part, [part])
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part is not None:   # one process of the run (processes.run_all started it)
        import time

        settings = Settings(smoke=args.smoke, repeats=args.repeats, bundle_dir=args.bundles,
                            check=not args.no_check, only=args.only,
                            deadline=None if args.budget is None else time.monotonic() + args.budget)
        processes.run_part(args.part, names, backends, late, settings, args.out, args.budget,
                           args.late_margin, args.late_only, args.cuda_context and args.part == "webgpu")
        return
    parts = processes.split(backends, late)
    run_meta = {"budget_s": args.budget, "backends": backends, "late_backends": late, "suites": names,
                "cuda_context": args.cuda_context}
    doc, problems = processes.run_all(argv, parts, args.out, args.budget, args.cuda_reserve, run_meta)
    failures = doc["failures"]
    if args.strict and failures:
        raise SystemExit(f"{len(failures)} figures failed (see the table)")
    if problems:
        raise SystemExit("failed suites:\n  " + "\n  ".join(problems))
