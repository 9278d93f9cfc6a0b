"""Sweep every OpInfo (op_db) entry on the webgpu device with the CPU fallback off and count the outcomes.

Covered: every entry that supports float32 on the CPU, minus `_`-private entries, random-sampling ops
(their values cannot match the CPU's generator), ops returning uninitialized memory (empty*) and CUDA
jiterator entries (no CPU sample, so no reference); the
exclusions, and the entries that lack float32 on the CPU (float64/complex/integer-only), are printed.
Each entry runs in-process through tests/ops/opinfo_runner.run_op; entries run in chunks, each chunk in a
subprocess, so a process abort (a crash) is recorded against the entry that was running and the sweep
goes on with the next one.

    /work/wt/py tools/opinfo_sweep.py [--samples 6] [--chunk 40] [--timeout 900] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# values drawn from a generator (the device's differs from the CPU's) or fixed by a seeded CPU draw
RANDOM = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "normal.in_place", "normal.number_mean", "rand_like", "randint", "randint_like", "randn", "randn_like",
    "uniform", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "nn.functional.rrelu",
}
# results are uninitialized memory: nothing to compare
UNINITIALIZED = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}
# CUDA jiterator entries: op_db lists float32 for the CPU, but their sample generators yield no CPU sample,
# so there is no CPU reference to compare with (they ran as 'no samples')
NO_CPU_REFERENCE_PREFIX = "jiterator_"


def _entries():
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from opinfo_runner import opinfo_name

    covered, excluded = [], {"private": [], "random": [], "uninitialized": [], "no float32 on cpu": [],
                             "no cpu reference (cuda jiterator)": []}
    for op in op_db:
        name = opinfo_name(op)
        if not op.supports_dtype(torch.float32, "cpu"):
            excluded["no float32 on cpu"].append(name)
        elif op.name.startswith("_"):
            excluded["private"].append(name)
        elif name in RANDOM:
            excluded["random"].append(name)
        elif name in UNINITIALIZED:
            excluded["uninitialized"].append(name)
        elif name.startswith(NO_CPU_REFERENCE_PREFIX):
            excluded["no cpu reference (cuda jiterator)"].append(name)
        else:
            covered.append(name)
    return covered, excluded


def _worker(names: list[str], samples: int) -> None:
    """Run the named entries in this process; one JSON line per entry ('start' first, then the result)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import torch_webgpu  # noqa: F401 (registers the device)

    sys.path.insert(0, str(ROOT / "tests" / "ops"))
    from opinfo_runner import opinfo_name, run_op

    ops = {opinfo_name(op): op for op in op_db}
    for name in names:
        print(json.dumps({"start": name}), flush=True)
        r = run_op(ops[name], torch.float32, samples)
        top = r.errors.most_common(1)[0][0] if r.errors else ""
        print(json.dumps({"name": name, "passed": r.passed, "failed": r.failed, "raised": r.raised,
                          "skipped": r.skipped, "error": top[:200]}), flush=True)


def _run_chunk(names: list[str], samples: int, timeout: int) -> list[dict]:
    """Run names in a subprocess; an entry whose run ended the process is recorded as a crash."""
    results: list[dict] = []
    todo = list(names)
    while todo:
        cmd = [sys.executable, __file__, "--worker", "--samples", str(samples), "--only", *todo]
        env = dict(os.environ, TORCH_WEBGPU_FALLBACK="0")
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
            out, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            code = "timeout"
        started = None
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if "start" in rec:
                started = rec["start"]
            else:
                results.append(rec)
                todo.remove(rec["name"])
                started = None
        if code == 0 and not todo:
            break
        if started is None:  # died before (or between) entries: blame the next one
            started = todo[0]
        results.append({"name": started, "crash": str(code)})
        todo.remove(started)
    return results


def _outcome(rec: dict) -> str:
    if "crash" in rec:
        return "crash"
    if rec["passed"] + rec["failed"] + rec["raised"] == 0:
        return "no samples"
    if rec["failed"]:
        return "fail"
    if rec["raised"]:
        return "raise"
    return "pass"


def main() -> None:
    """Parse arguments; sweep in chunks (or, with --worker, run the given entries here)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=6, help="samples per entry (default 6)")
    ap.add_argument("--chunk", type=int, default=40, help="entries per subprocess (default 40)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per chunk before it counts as hung")
    ap.add_argument("--only", nargs="*", help="entries to run (default: every covered entry)")
    ap.add_argument("--json", type=Path, help="also write the per-entry records here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.only, args.samples)
        return
    covered, excluded = _entries()
    for why, names in excluded.items():
        print(f"excluded ({why}, {len(names)}): {', '.join(sorted(names))}")
    names = args.only or covered
    records: list[dict] = []
    for start in range(0, len(names), args.chunk):
        records += _run_chunk(names[start:start + args.chunk], args.samples, args.timeout)
        done = {_outcome(r) for r in records}
        print(f"... {len(records)}/{len(names)} entries", {k: sum(_outcome(r) == k for r in records)
                                                           for k in sorted(done)}, flush=True)
    by = {}
    for rec in records:
        by.setdefault(_outcome(rec), []).append(rec)
    for kind in ("fail", "raise", "no samples", "crash"):
        for rec in sorted(by.get(kind, []), key=lambda r: r["name"]):
            print(f"{kind:10s} {rec['name']:50s} {rec.get('error', rec.get('crash', ''))}")
    n = len(records)
    npass = len(by.get("pass", []))
    print(f"\n{n} entries: {npass} pass fully ({npass / max(n, 1):.1%}), {len(by.get('fail', []))} fail "
          f"(a mismatch), {len(by.get('raise', []))} raise, {len(by.get('no samples', []))} without a sample "
          f"the CPU accepts, {len(by.get('crash', []))} crashes")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
