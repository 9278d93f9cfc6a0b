"""One decode bundle through each runtime: the Python loader, torch-webgpu.js under Node + Dawn, the page.

The Python loader (`torch_webgpu.load`), torch-webgpu.js under Node + Dawn for Node
(`torch_webgpu/web/node/generate.mjs`) and, with `--page`, headless Chromium (its SwiftShader adapter on a
machine without a GPU): prefill and decode tokens/s of the same bundle and prompt, greedy, end-of-sequence
ignored, and ms per decode step (the JavaScript side's host part: time recording and submitting the step's
commands, the rest being the wait for its token id).

    python -m benchmarks lm runtimes BUNDLE [--prompt-tokens 7] [--new-tokens 16] [--reps 5] [--rounds 3]
        [--page] [--no-node] [--node NODE] [--pin-clock auto|0] [--json FILE]

Prefill here: from the call to the first new token read back (the prefill plan, the sampler, 4 bytes);
decode: the tokens after it over the time after it. Python and Node alternate for `--rounds` rounds (one
load each per round, a warm-up generation, then `--reps` timed ones) and the medians are reported: on a
shared machine both see the same disturbances. No CUDA context is opened for the measurement. On an NVIDIA
GPU the Python loader's runtime pins the GPU's clock for as long as this process lives
(`TORCH_WEBGPU_PIN_CLOCK`, `runtime/clock_pin.py`); the clock is the GPU's, so Node's rounds run at it too
and the two runtimes are compared at one clock. `--pin-clock 0` measures both as a process without the
pin would (the browser's and Node's own case: NVIDIA's idle clock for bursty work).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
NODE_ENTRY = REPO / "torch_webgpu" / "web" / "node" / "generate.mjs"

# -- the runtimes ------------------------------------------------------------------------------------------


def prompt_ids(count: int, vocab_size: int) -> list[int]:
    """A fixed prompt of `count` ids (no tokenizer needed)."""
    return [(17 + 31 * k) % (vocab_size - 1) + 1 for k in range(count)]


def _rates(prompt_tokens: int, new_tokens: int, prefill_s: float, decode_s: float,
           host_ms_per_step: float | None = None) -> dict[str, Any]:
    steps = new_tokens - 1
    return {"prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "prefill_ms": prefill_s * 1e3,
            "prefill_tokens_per_s": prompt_tokens / prefill_s,
            "decode_tokens_per_s": steps / decode_s if steps else None,
            "decode_ms_per_step": decode_s * 1e3 / steps if steps else None,
            "decode_host_ms_per_step": host_ms_per_step}


def time_python(bundle_path: Path, ids: list[int], new_tokens: int, reps: int) -> dict[str, Any]:
    """The Python loader: load, one warm-up generation, `reps` timed ones (time to the first token and
    to the last, each token taken as the loader streams it)."""
    import torch_webgpu

    start = time.perf_counter()
    bundle = torch_webgpu.load(bundle_path)
    load_ms = (time.perf_counter() - start) * 1e3
    runs, first_ids = [], None

    def generate() -> tuple[list[int], float, float]:
        marks: list[float] = []
        t0 = time.perf_counter()
        try:   # a loader that streams ids (issue 41): the time of each token as it arrives
            out = bundle.generate(ids, new_tokens, stop_at_eos=False, streamer=lambda _: marks.append(
                time.perf_counter()))
        except TypeError:   # an older loader: the first token from a one-token generation
            out = bundle.generate(ids, 1, stop_at_eos=False)
            marks.append(time.perf_counter())
            t1 = time.perf_counter()
            out = bundle.generate(ids, new_tokens, stop_at_eos=False)
            marks.append(time.perf_counter() - t1 + marks[0])
        new = [int(t) for t in np.asarray(out).reshape(-1)[len(ids):]]
        return new, marks[0] - t0, marks[-1] - marks[0]

    generate()
    for _ in range(reps):
        new, prefill, decode = generate()
        first_ids = first_ids or new
        runs.append(_rates(len(ids), len(new), prefill, decode))
    info = bundle.rt.info
    bundle.release()
    return {"runtime": "python", "adapter": info.name, "load_ms": load_ms, "ids": first_ids, "runs": runs}


def time_node(bundle_path: Path, ids: list[int], new_tokens: int, reps: int, node: str = "node") -> dict:
    """torch-webgpu.js under Node + Dawn for Node: generate.mjs --json (a warm-up, then `reps` runs)."""
    cmd = [node, str(NODE_ENTRY), str(bundle_path), "--ids", ",".join(map(str, ids)), "--max-new-tokens",
           str(new_tokens), "--ignore-eos", "--repeat", str(reps), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"runtime": "torch-webgpu.js (node)", "host": out["host"], "adapter": out["adapter"],
            "load_ms": out["load_ms"], "ids": out["ids"], "runs": out["runs"]}


PAGE_JS = """
const [url, ids, newTokens, reps] = arguments;
const done = arguments[arguments.length - 1];
import("/torch-webgpu.js").then(async (T) => {
  const start = performance.now();
  const lm = await T.load(url);
  const loadMs = performance.now() - start;
  const options = {maxNewTokens: newTokens, stopAtEos: false};
  for await (const _ of lm.generateIds(ids, options)) {}   // warm-up
  const runs = [];
  let first = null;
  for (let r = 0; r < reps; r++) {
    for await (const _ of lm.generateIds(ids, options)) {}
    const s = lm.stats;
    first = first || s.ids;
    runs.push(s);
  }
  const info = lm.device.adapterInfo;
  lm.release();
  const adapter = [info.vendor, info.architecture, info.description].filter((x) => x).join(" ");
  done({loadMs, runs, ids: first, adapter});
}).catch((e) => done({error: `${e.name}: ${e.message}`}));
"""


def time_page(bundle_path: Path, ids: list[int], new_tokens: int, reps: int) -> dict[str, Any]:
    """torch-webgpu.js in headless Chromium (Selenium), the bundle served from this process."""
    import tempfile

    from torch_webgpu.cli.web import make_server, serve_in_thread
    from torch_webgpu.web import ASSETS, TEXT_LIBRARIES, text_libraries

    from ..latency.web_vs_python import chromium

    with tempfile.TemporaryDirectory(prefix="torch-webgpu-lm-bench-") as tmp:
        # a page of the server's origin (a secure context) with the chat page's import map
        imports = {package: f"/{page_path}" for package, (_, page_path) in TEXT_LIBRARIES.items()}
        page = Path(tmp, "bench.html")
        page.write_text('<!doctype html><title>lm bench</title><script type="importmap">'
                        f'{json.dumps({"imports": imports})}</script>')
        mounts = {"/": ASSETS, "/files/": bundle_path.parent, "/bench.html": page}
        mounts.update({f"/{page_path}": file for page_path, file in text_libraries().items()})
        server = make_server(mounts)
        serve_in_thread(server)
        driver = chromium()
        try:
            base = f"http://localhost:{server.server_address[1]}"
            driver.get(f"{base}/bench.html")
            out = driver.execute_async_script(PAGE_JS, f"{base}/files/{bundle_path.name}/", ids, new_tokens,
                                              reps)
        finally:
            driver.quit()
            server.shutdown()
            server.server_close()
    if "error" in out:
        raise RuntimeError(f"the page: {out['error']}")
    runs = [_rates(s["promptTokens"], s["newTokens"], s["prefillMs"] / 1e3, s["decodeMs"] / 1e3,
                   s["decodeHostMs"] / max(s["newTokens"] - 1, 1)) for s in out["runs"]]
    return {"runtime": "torch-webgpu.js (chromium)", "adapter": out["adapter"], "load_ms": out["loadMs"],
            "ids": out["ids"], "runs": runs}


def _summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over every run of one runtime's rounds."""
    runs = [run for result in results for run in result["runs"]]

    def median(key: str) -> float | None:
        values = [r[key] for r in runs if r.get(key) is not None]
        return statistics.median(values) if values else None

    keys = ("prefill_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "decode_ms_per_step",
            "decode_host_ms_per_step")
    first = results[0]
    return {"runtime": first["runtime"], "adapter": first["adapter"], "host": first.get("host"),
            "load_ms": statistics.median(r["load_ms"] for r in results), "runs": len(runs),
            "ids": first["ids"], **{k: median(k) for k in keys}}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every runtime on `args.bundle`; the Python and Node rounds alternate."""
    os.environ["TORCH_WEBGPU_PIN_CLOCK"] = args.pin_clock   # read when the runtime starts (below)
    bundle = Path(args.bundle)
    manifest = json.loads((bundle / "manifest.json").read_text())
    info = manifest["decoder"]
    ids = prompt_ids(args.prompt_tokens, int(info["vocab_size"]))
    if args.prompt_tokens + args.new_tokens > int(info["max_len"]):
        raise SystemExit(f"{args.prompt_tokens} + {args.new_tokens} tokens exceed the bundle's max_len "
                         f"{info['max_len']}")
    rounds: dict[str, list[dict]] = {"python": [], "node": []}
    for _ in range(args.rounds):
        rounds["python"].append(time_python(bundle, ids, args.new_tokens, args.reps))
        if not args.no_node:
            rounds["node"].append(time_node(bundle, ids, args.new_tokens, args.reps, args.node))
    results = {"bundle": str(bundle), "source": manifest.get("source"),
               "architecture": info.get("architecture"), "max_len": info["max_len"],
               "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "reps": args.reps,
               "rounds": args.rounds, "pin_clock": args.pin_clock, "runtimes": [_summary(rounds["python"])]}
    if rounds["node"]:
        results["runtimes"].append(_summary(rounds["node"]))
    if args.page:
        results["runtimes"].append(_summary([time_page(bundle, ids, args.new_tokens, args.reps)]))
    reference = results["runtimes"][0]["ids"]
    for r in results["runtimes"]:
        r["same_tokens_as_python"] = r["ids"] == reference
    python_decode = results["runtimes"][0]["decode_tokens_per_s"]
    for r in results["runtimes"]:
        r["decode_vs_python"] = (r["decode_tokens_per_s"] / python_decode
                                 if r["decode_tokens_per_s"] and python_decode else None)
    return results


def print_table(results: dict[str, Any]) -> None:
    """The figures as a table."""
    print(f"{results['bundle']}: prompt {results['prompt_tokens']} tokens, {results['new_tokens']} new, "
          f"medians of {results['reps']} runs x {results['rounds']} rounds")
    print(f"{'runtime':<28}{'prefill ms':>11}{'prefill tok/s':>15}{'decode tok/s':>14}{'ms/step':>9}"
          f"{'host ms/step':>14}{'vs python':>11}{'same ids':>10}   adapter")
    for r in results["runtimes"]:
        def fmt(v: float | None, width: int, digits: int = 1) -> str:
            return f"{v:>{width}.{digits}f}" if v is not None else f"{'-':>{width}}"

        print(f"{r['runtime']:<28}{fmt(r['prefill_ms'], 11)}{fmt(r['prefill_tokens_per_s'], 15)}"
              f"{fmt(r['decode_tokens_per_s'], 14)}{fmt(r['decode_ms_per_step'], 9, 2)}"
              f"{fmt(r['decode_host_ms_per_step'], 14, 2)}{fmt(r['decode_vs_python'], 11, 2)}"
              f"{str(r['same_tokens_as_python']):>10}   {r['adapter']}")


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Command line: time the bundle in each runtime, print the table, write --json."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--prompt-tokens", type=int, default=7)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--reps", type=int, default=5, help="timed generations per load")
    parser.add_argument("--rounds", type=int, default=3, help="loads per runtime, Python and Node in turn")
    parser.add_argument("--page", action="store_true", help="also headless Chromium (one round)")
    parser.add_argument("--no-node", action="store_true")
    parser.add_argument("--node", default=os.environ.get("NODE", "node"), help="the node binary")
    parser.add_argument("--pin-clock", choices=["auto", "0"], default="auto",
                        help="TORCH_WEBGPU_PIN_CLOCK for this process (0: no runtime pins the GPU's clock)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    results = measure(args)
    print_table(results)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
    sys.stdout.flush()
