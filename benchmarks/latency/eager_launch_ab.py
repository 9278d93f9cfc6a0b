"""Eager per-op cost of the native launch path against the Python one (TORCH_WEBGPU_EAGER_LAUNCH), same run.

`python -m benchmarks latency eager-launch-ab [--json FILE] [--runs N] [--rounds N]`. Each run starts one
process per path (the switch is read at import), alternating, and measures every op of the eager_per_op suite
(16×16 float32) as batches of 200 calls: host-only (no sync; the batch's sync is outside the timer) and
synchronised (the batch plus one synchronize, per op). A figure is the minimum over rounds and runs, which
on a shared machine is the least disturbed one; the ratios compare the two paths' figures of this run.
With CUDA, torch CUDA's figures of the same ops are measured in the native path's process too, after
its webgpu figures (no CUDA context before those unless `--cuda-context`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from ..json_rows import Option, rows_main

OPS = ("add", "mul_scalar", "relu", "sum", "softmax", "mm 16x16")
BATCH = 200


def _calls(torch, a, b) -> dict:
    """The measured ops on operands a, b."""
    return {"add": lambda: torch.add(a, b), "mul_scalar": lambda: a * 2.0, "relu": lambda: torch.relu(a),
            "sum": lambda: a.sum(), "softmax": lambda: torch.softmax(a, -1), "mm 16x16": lambda: a @ b}


def measure(rounds: int) -> dict:
    """{backend: {figure: {op: µs}}} for the webgpu device (and torch CUDA when present, after it)."""
    import torch

    import torch_webgpu  # noqa: F401  (registers the device)

    backends = [("webgpu-eager", "webgpu", torch.webgpu.synchronize)]
    if os.environ.get("TORCH_WEBGPU_EAGER_LAUNCH", "native") == "native":
        backends.append(("torch-cuda", "cuda", lambda: torch.cuda.synchronize()))
    out: dict = {}
    for backend, device, sync in backends:
        if device == "cuda" and not torch.cuda.is_available():   # asked only once the webgpu figures are in
            break
        a, b = torch.randn(16, 16, device=device), torch.randn(16, 16, device=device)
        figures: dict = {"host_us": {}, "synced_us": {}}
        for name, op in _calls(torch, a, b).items():
            for _ in range(20):
                op()
            sync()
            host = synced = float("inf")
            for _ in range(rounds):
                start = time.perf_counter()
                for _ in range(BATCH):
                    op()
                host = min(host, (time.perf_counter() - start) / BATCH)
                sync()
                start = time.perf_counter()
                for _ in range(BATCH):
                    op()
                sync()
                synced = min(synced, (time.perf_counter() - start) / BATCH)
            figures["host_us"][name] = round(host * 1e6, 2)
            figures["synced_us"][name] = round(synced * 1e6, 2)
        out[backend] = figures
    return out


def _child(path: str, rounds: int, cuda_context: bool) -> dict:
    env = dict(os.environ, TORCH_WEBGPU_EAGER_LAUNCH=path)
    command = [sys.executable, "-m", "benchmarks", "latency", "eager-launch-ab", "--child", str(rounds)]
    done = subprocess.run(command + (["--cuda-context"] if cuda_context else []), env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the {path} path's process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(runs: int, rounds: int, child: int | None, cuda_context: bool = False) -> dict:
    """The figures of both paths and their ratios (`child`: this is one path's process; measure only)."""
    if child is not None:
        if cuda_context:
            from ..backends import start_cuda

            start_cuda()
        figures = measure(child)
        print(json.dumps(figures))
        return figures
    best: dict = {}
    for _ in range(runs):
        for path in ("python", "native"):
            for backend, figures in _child(path, rounds, cuda_context).items():
                key = f"webgpu-eager ({path})" if backend == "webgpu-eager" else backend
                for figure, ops in figures.items():
                    slot = best.setdefault(key, {}).setdefault(figure, {})
                    for op, us in ops.items():
                        slot[op] = min(slot.get(op, us), us)
    py, nat = best["webgpu-eager (python)"], best["webgpu-eager (native)"]
    best["native speed-up"] = {f: {op: round(py[f][op] / nat[f][op], 2) for op in OPS} for f in py}
    if "torch-cuda" in best:
        cuda = best["torch-cuda"]
        best["native / torch-cuda"] = {f: {op: round(nat[f][op] / cuda[f][op], 2) for op in OPS} for f in nat}
    print(json.dumps(best, indent=1))
    return best


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: the figures of both paths and their ratios as JSON (stdout and --json)."""
    rows_main(run, __doc__, argv, prog, runs=3, rounds=30,
              child=Option(None, argparse.SUPPRESS, int))
