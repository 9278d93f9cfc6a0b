"""One decode bundle through each runtime on this machine: the Python loader (`torch_webgpu.load`), and
torch-webgpu.js under Node + Dawn for Node (`torch_webgpu/web/node/generate.mjs`) and in headless Chromium
(`--page`; its SwiftShader adapter on a machine without a GPU): prefill and decode tokens/s of the same
bundle and prompt, greedy, end-of-sequence ignored, and ms per decode step (the page's host part: time
recording and submitting the step's commands, the rest being the wait for its token id).

    python -m benchmarks.lm_runtimes measure BUNDLE [--prompt-tokens 7] [--new-tokens 16] [--reps 5]
        [--rounds 3] [--page] [--no-node] [--node NODE] [--json FILE]
    python -m benchmarks.lm_runtimes tiny OUT      # tests/language_models.py's Llama and Qwen2, f32 and int4
    python -m benchmarks.lm_runtimes synthetic-1b OUT [--quant int4|int8|f16] [--max-len 512]
    python -m benchmarks.lm_runtimes strip BUNDLE OUT      # the bundle without weights.safetensors
    python -m benchmarks.lm_runtimes fill BUNDLE           # its weights again, byte for byte

Prefill here: from the call to the first new token read back (the prefill plan, the sampler, 4 bytes);
decode: the tokens after it over the time after it. Python and Node alternate for `--rounds` rounds (one
load each per round, a warm-up generation, then `--reps` timed ones) and the medians are reported: on a
shared machine both see the same disturbances. Where CUDA is available this process holds a CUDA context
throughout (benchmarks.backends.start_cuda: the GPU keeps its fast clock for the Node process too).

A bundle's weights are synthetic in `synthetic-1b` (Llama-3.2-1B's shape, `llama_decode.llama_1b_config`):
each tensor's bytes come from SHAKE-128 of its name, so `fill` writes the same weights.safetensors again on
a GPU machine from the bundle's `weights.header.json` (a bundle carries ~1 GB less: `strip`), and the
manifest's hashes still hold. Timings only: the values are not a trained model's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
NODE_ENTRY = REPO / "torch_webgpu" / "web" / "node" / "generate.mjs"
WEIGHTS = "weights.safetensors"
WEIGHTS_HEADER = "weights.header.json"
SYNTHETIC_SCALE = 0.05   # synthetic floats lie in [-0.05, 0.05)

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

    from .web_vs_python import chromium

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
    from .backends import start_cuda

    start_cuda()
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
               "rounds": args.rounds, "runtimes": [_summary(rounds["python"])]}
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


# -- synthetic weights -------------------------------------------------------------------------------------

_NUMPY = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "U32": np.uint32, "I16": np.int16,
          "U16": np.uint16, "I8": np.int8, "U8": np.uint8, "I64": np.int64, "BOOL": np.bool_}


def synthetic_tensor(name: str, dtype: str, shape: list[int]) -> np.ndarray:
    """A tensor whose bytes depend only on its name, dtype and shape (SHAKE-128): floats uniform in
    [-SYNTHETIC_SCALE, SYNTHETIC_SCALE), integers (packed int4/int8 words) any bit pattern, bools 0/1."""
    count = int(np.prod(shape, dtype=np.int64))
    kind = np.dtype(_NUMPY[dtype])
    seed = hashlib.shake_128(f"torch-webgpu synthetic {name} {dtype} {list(shape)}".encode())
    if dtype in ("F32", "F16"):
        words = np.frombuffer(seed.digest(4 * count), dtype="<u4")
        unit = (words >> np.uint32(8)).astype(np.float64) * 2.0 ** -24   # [0, 1)
        return ((unit - 0.5) * (2 * SYNTHETIC_SCALE)).astype(kind).reshape(shape)
    if dtype == "BOOL":
        return (np.frombuffer(seed.digest(count), dtype=np.uint8) & 1).astype(np.bool_).reshape(shape)
    return np.frombuffer(seed.digest(kind.itemsize * count), dtype=kind.newbyteorder("<")).reshape(shape)


def _header(data: bytes) -> dict[str, Any]:
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + length])


def synthetic_weights(header: dict[str, Any]) -> bytes:
    """weights.safetensors with every tensor of `header` synthetic (same names, dtypes, shapes)."""
    from safetensors.numpy import save

    tensors = {name: synthetic_tensor(name, spec["dtype"], spec["shape"])
               for name, spec in header.items() if name != "__metadata__"}
    return save(tensors)


def _reseal(bundle: Path, files: dict[str, bytes]) -> None:
    from torch_webgpu.bundle.format import MANIFEST, SELF_HASH_KEY, seal

    manifest = json.loads((bundle / MANIFEST).read_text())
    manifest.pop(SELF_HASH_KEY, None)
    (bundle / MANIFEST).write_text(json.dumps(seal(manifest, files), indent=1))


def make_synthetic(bundle: Path) -> None:
    """Replace a decode bundle's weights with synthetic ones (re-sealing it) and write weights.header.json."""
    from torch_webgpu.bundle.format import read_bundle

    manifest, files = read_bundle(bundle)
    header = _header(files[WEIGHTS])
    header.pop("__metadata__", None)
    files[WEIGHTS] = synthetic_weights(header)
    (bundle / WEIGHTS).write_bytes(files[WEIGHTS])
    (bundle / WEIGHTS_HEADER).write_text(json.dumps(header, indent=1, sort_keys=True))
    _reseal(bundle, files)
    read_bundle(bundle)   # every hash holds


def fill(bundle: Path) -> None:
    """Write a stripped bundle's synthetic weights.safetensors again from its weights.header.json; the
    manifest's hash of it must hold (numpy and safetensors write the same bytes everywhere)."""
    from torch_webgpu.bundle.format import read_bundle

    header = json.loads((bundle / WEIGHTS_HEADER).read_text())
    (bundle / WEIGHTS).write_bytes(synthetic_weights(header))
    read_bundle(bundle)   # BundleIntegrityError if the bytes differ from what was sealed


def strip(bundle: Path, out: Path) -> None:
    """A copy of a synthetic-weight bundle without weights.safetensors (fill writes it back)."""
    if not (bundle / WEIGHTS_HEADER).is_file():
        raise SystemExit(f"{bundle} has no {WEIGHTS_HEADER}: only a synthetic-1b bundle can be stripped")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(bundle, out, ignore=shutil.ignore_patterns(WEIGHTS))
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {out}: {size / 2**20:.1f} MiB without its {WEIGHTS} "
          f"({(bundle / WEIGHTS).stat().st_size / 2**20:.0f} MiB)")


def synthetic_1b(out: Path, quant: str, max_len: int, buckets: list[int], target: str) -> Path:
    """The Llama-3.2-1B-shaped decode bundle (random init, then synthetic weights) for `target` (an
    adapter file: the GPU's limits, subgroup size and features): `quant` int4/int8 (torchao weight-only,
    group 32; token table and tied LM head quantized too, as ExecuTorch's recipes) or f16."""
    import torch
    from transformers import LlamaForCausalLM

    import torch_webgpu

    from .llama_decode import llama_1b_config

    torch.manual_seed(0)
    with torch.device("meta"):
        model = LlamaForCausalLM(llama_1b_config())
    model = model.to_empty(device="cpu").eval()
    for p in model.parameters():   # the values do not matter (synthetic ones replace them): cheap, finite
        if p.dim() > 1:
            torch.nn.init.uniform_(p, -SYNTHETIC_SCALE, SYNTHETIC_SCALE)
        else:
            torch.nn.init.ones_(p)
    model.tie_weights()
    model.generation_config.pad_token_id = 0
    if quant == "f16":
        model = model.half()
    else:
        from torchao.quantization import IntxWeightOnlyConfig, quantize_
        from torchao.quantization.granularity import PerGroup

        bits = torch.int4 if quant == "int4" else torch.int8
        quantize_(model, IntxWeightOnlyConfig(weight_dtype=bits, granularity=PerGroup(32)),
                  filter_fn=lambda m, fqn: isinstance(m, (torch.nn.Linear, torch.nn.Embedding)))
    path = torch_webgpu.export_decoder(model, out, max_len=max_len, prompt_buckets=buckets, target=target,
                                       f16=quant == "f16", source=f"benchmarks:llama-1b-{quant}")
    make_synthetic(Path(path))
    return Path(path)


def main() -> None:
    """The subcommands (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time one decode bundle through each runtime")
    m.add_argument("bundle", type=Path)
    m.add_argument("--prompt-tokens", type=int, default=7)
    m.add_argument("--new-tokens", type=int, default=16)
    m.add_argument("--reps", type=int, default=5, help="timed generations per load")
    m.add_argument("--rounds", type=int, default=3, help="loads per runtime, Python and Node alternating")
    m.add_argument("--page", action="store_true", help="also headless Chromium (one round)")
    m.add_argument("--no-node", action="store_true")
    m.add_argument("--node", default=os.environ.get("NODE", "node"), help="the node binary")
    m.add_argument("--json", type=Path, help="write the results here")
    s = sub.add_parser("synthetic-1b", help="export the Llama-3.2-1B-shaped decode bundle, synthetic weights")
    s.add_argument("out", type=Path)
    s.add_argument("--quant", choices=["int4", "int8", "f16"], default="int4")
    s.add_argument("--max-len", type=int, default=512)
    s.add_argument("--prompt-buckets", default="16,128")
    s.add_argument("--target", default=str(REPO / "benchmarks" / "targets" / "h200-dawn.json"),
                   help="the adapter file to compile for (default: the H200's under Dawn; H100s take it too)")
    t = sub.add_parser("tiny", help="export tests/language_models.py's tiny models (f32, int4) as bundles")
    t.add_argument("out", type=Path)
    st = sub.add_parser("strip", help="copy a synthetic bundle without its weights")
    st.add_argument("bundle", type=Path)
    st.add_argument("out", type=Path)
    f = sub.add_parser("fill", help="write a stripped bundle's synthetic weights again")
    f.add_argument("bundle", type=Path)
    args = parser.parse_args()
    if args.command == "measure":
        results = measure(args)
        print_table(results)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(results, indent=1))
    elif args.command == "synthetic-1b":
        buckets = [int(b) for b in args.prompt_buckets.split(",")]
        print(f"wrote {synthetic_1b(args.out, args.quant, args.max_len, buckets, args.target)}")
    elif args.command == "tiny":
        from tests.language_models import KINDS, QUANTS, build_language_model

        for kind in KINDS:
            for quant in QUANTS:
                print(f"wrote {build_language_model(kind, quant, args.out).path}")
    elif args.command == "strip":
        strip(args.bundle, args.out)
    else:
        fill(args.bundle)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
