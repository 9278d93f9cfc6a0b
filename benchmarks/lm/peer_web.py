"""The same tiny language model in the same headless Chromium through torch-webgpu.js (its decode bundle) and
through the peer, transformers.js 4 (`@huggingface/transformers` on onnxruntime-web's WebGPU EP, the model
exported to ONNX by ONNX Runtime GenAI's model builder): tokens/s of prefill and decode side by side, and
whether each gives transformers' CPU tokens.

    python -m benchmarks lm peer-web [--kind llama] [--new-tokens 12] [--reps 5] [--rounds 3] [--out DIR]
        [--json FILE]

Benchmark-only installs, into DIR (default benchmarks/out/lm-peer; never package dependencies):
`npm install --no-save @huggingface/transformers@4.3.2` (it brings onnxruntime-web) and
`pip install --no-deps --target DIR/genai-site onnxruntime-genai==0.18.0` (the model builder; it runs on the
onnxruntime-webgpu the venv has). The model is tests/language_models.py's (random weights, a BPE tokenizer
trained in process); the builder writes `model.onnx` with GroupQueryAttention for `-e webgpu -p fp32`, whose
KV-cache head dimension is made concrete here (transformers.js sizes the empty cache from the graph's input
shapes, where a symbolic dimension counts as 0). Both sides: greedy, end-of-sequence ignored; per round a
load, one warm-up generation, then `--reps` timed ones, the two alternating for `--rounds` rounds (medians of
every run); prefill = the call to the first new token, decode = the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TRANSFORMERS_JS = "@huggingface/transformers@4.3.2"
GENAI = "onnxruntime-genai==0.18.0"
PROMPT = "The quick brown fox"
# the page's import map for transformers.js's web build (onnxruntime-common is the ORT bundle's own copy,
# so that the tensors transformers.js makes are the classes ORT checks against)
PEER_IMPORTS = {
    "@huggingface/transformers": "/peer/node_modules/@huggingface/transformers/dist/transformers.web.js",
    "onnxruntime-web/webgpu": "/peer/node_modules/onnxruntime-web/dist/ort.webgpu.bundle.min.mjs",
    "onnxruntime-common": "/peer/node_modules/onnxruntime-web/dist/ort.webgpu.bundle.min.mjs",
}
PEER_JS = """
const [model, ids, newTokens, reps] = arguments;
const done = arguments[arguments.length - 1];
(async () => {
  const { AutoModelForCausalLM, env, Tensor } = await import("@huggingface/transformers");
  env.allowRemoteModels = false; env.allowLocalModels = true; env.localModelPath = "/peer/models/";
  env.backends.onnx.wasm.wasmPaths = "/peer/node_modules/onnxruntime-web/dist/";
  const t0 = performance.now();
  const lm = await AutoModelForCausalLM.from_pretrained(model, { device: "webgpu", dtype: "fp32" });
  const loadMs = performance.now() - t0;
  const input_ids = new Tensor("int64", BigInt64Array.from(ids.map(BigInt)), [1, ids.length]);
  const attention_mask = new Tensor("int64", new BigInt64Array(ids.length).fill(1n), [1, ids.length]);
  const runs = [];
  let out;
  for (let r = 0; r <= reps; r++) {   // run 0: the warm-up
    const marks = [];   // the streamer gets the prompt first, then each new token
    const start = performance.now();
    const streamer = { put() { marks.push(performance.now()); }, end() {} };
    out = await lm.generate({ input_ids, attention_mask, max_new_tokens: newTokens, min_new_tokens: newTokens,
                              do_sample: false, streamer });
    if (r) runs.push({ prefillMs: marks[1] - start, decodeMs: marks[marks.length - 1] - marks[1],
                       newTokens: marks.length - 1 });
  }
  await lm.dispose();
  done({ loadMs, runs, ids: Array.from(out.data, Number).slice(ids.length) });
})().catch((e) => done({ error: `${e.name}: ${e.message}` }));
"""


def install_peer(out: Path) -> tuple[Path, Path]:
    """(node_modules holding transformers.js, the site of onnxruntime-genai), installed into `out` once."""
    peer = out / "peer"
    if not (peer / "node_modules" / "@huggingface" / "transformers").is_dir():
        peer.mkdir(parents=True, exist_ok=True)
        (peer / "package.json").write_text('{"name": "torch-webgpu-lm-peer", "private": true}')
        subprocess.run(["npm", "install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund",
                        TRANSFORMERS_JS], cwd=peer, check=True)
    genai = out / "genai-site"
    if not (genai / "onnxruntime_genai").is_dir():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(genai),
                        GENAI], check=True)
    return peer, genai


def export_onnx(lm: Any, genai: Path, out: Path) -> Path:
    """The model as transformers.js reads it: out/models/<name>/{config, tokenizer, onnx/model.onnx}."""
    import onnx

    name = f"tiny-{lm.kind}"
    model_dir = out / "peer" / "models" / name
    with tempfile.TemporaryDirectory(prefix="torch-webgpu-peer-") as tmp:
        checkpoint, built = Path(tmp, "checkpoint"), Path(tmp, "onnx")
        lm.model.save_pretrained(checkpoint)
        lm.tokenizer.save_pretrained(checkpoint)
        env = {**os.environ, "PYTHONPATH": f"{genai}{os.pathsep}{REPO}"}
        subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(checkpoint), "-o",
                        str(built), "-p", "fp32", "-e", "webgpu", "-c", str(Path(tmp, "cache"))], check=True,
                       env=env, capture_output=True)
        graph = onnx.load(str(built / "model.onnx"))
        head_dim = lm.model.config.hidden_size // lm.model.config.num_attention_heads
        for value in (*graph.graph.input, *graph.graph.output):
            for dim in value.type.tensor_type.shape.dim:
                if dim.dim_param == "kv_cache_dim":
                    dim.ClearField("dim_param")
                    dim.dim_value = head_dim
        if model_dir.exists():
            shutil.rmtree(model_dir)
        (model_dir / "onnx").mkdir(parents=True)
        onnx.save(graph, str(model_dir / "onnx" / "model.onnx"))   # the weights inside (a small model)
        for file in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(checkpoint / file, model_dir / file)
    return model_dir


def _merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One runtime's rounds as one result: every timed run, the median load, the first round's ids (every
    round's must be the same)."""
    ids = rounds[0]["ids"]
    if any(r["ids"] != ids for r in rounds):
        raise SystemExit("a runtime gave different tokens in different rounds")
    return {**rounds[0], "runs": [run for r in rounds for run in r["runs"]],
            "loadMs": statistics.median(r["loadMs"] for r in rounds), "firstLoadMs": rounds[0]["loadMs"]}


def _rates(prompt_tokens: int, runs: list[dict[str, float]]) -> dict[str, Any]:
    prefill = statistics.median(r["prefillMs"] for r in runs)
    decode = statistics.median((r["newTokens"] - 1) / (r["decodeMs"] / 1e3) for r in runs)
    return {"prefill_ms": prefill, "prefill_tokens_per_s": prompt_tokens / (prefill / 1e3),
            "decode_tokens_per_s": decode, "decode_ms_per_step": 1e3 / decode}


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """Export, install, time both in one Chromium, print and write the figures."""
    import torch

    from tests.language_models import build_language_model
    from torch_webgpu.cli.web import make_server, serve_in_thread
    from torch_webgpu.web import ASSETS, TEXT_LIBRARIES, text_libraries

    from ..latency.web_vs_python import chromium
    from .runtimes import PAGE_JS

    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=["llama", "qwen2"], default="llama")
    parser.add_argument("--new-tokens", type=int, default=12)
    parser.add_argument("--reps", type=int, default=5, help="timed generations per load")
    parser.add_argument("--rounds", type=int, default=3, help="loads per runtime, alternating")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out" / "lm-peer")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    out = args.out.resolve()
    peer, genai = install_peer(out)
    lm = build_language_model(args.kind, "f32", out / "bundles")
    model_dir = export_onnx(lm, genai, out)
    ids = lm.tokenizer(PROMPT)["input_ids"]
    with torch.no_grad():
        mask = torch.ones(1, len(ids), dtype=torch.long)
        reference = lm.model.generate(torch.tensor([ids]), attention_mask=mask, do_sample=False,
                                      max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens)
    reference = reference[0, len(ids):].tolist()
    imports = {package: f"/{page_path}" for package, (_, page_path) in TEXT_LIBRARIES.items()}
    imports.update(PEER_IMPORTS)
    page = out / "bench.html"
    page.write_text('<!doctype html><title>lm peer</title><script type="importmap">'
                    f'{json.dumps({"imports": imports})}</script>')
    mounts = {"/": ASSETS, "/files/": lm.path.parent, "/peer/": peer, "/bench.html": page}
    mounts.update({f"/{page_path}": file for page_path, file in text_libraries().items()})
    server = make_server(mounts)
    serve_in_thread(server)
    driver = chromium()
    try:
        base = f"http://localhost:{server.server_address[1]}"
        driver.get(f"{base}/bench.html")
        rounds: dict[str, list[dict]] = {"ours": [], "theirs": []}
        for _ in range(args.rounds):   # alternating: both see the machine's load alike
            rounds["ours"].append(driver.execute_async_script(PAGE_JS, f"{base}/files/{lm.path.name}/", ids,
                                                              args.new_tokens, args.reps))
            rounds["theirs"].append(driver.execute_async_script(PEER_JS, model_dir.name, ids, args.new_tokens,
                                                                args.reps))
        version = driver.capabilities.get("browserVersion")
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
    for name, results in (("torch-webgpu.js", rounds["ours"]), ("transformers.js", rounds["theirs"])):
        for result in results:
            if "error" in result:
                raise SystemExit(f"{name}: {result['error']}")
    ours, theirs = (_merged(rounds[k]) for k in ("ours", "theirs"))
    rows = [{"runtime": "torch-webgpu.js (decode bundle)", "load_ms": ours["loadMs"],
             "first_load_ms": ours["firstLoadMs"],
             "adapter": ours["adapter"], "same_tokens_as_transformers_cpu": ours["ids"] == reference,
             **_rates(len(ids), ours["runs"])},
            {"runtime": f"transformers.js {TRANSFORMERS_JS.split('@')[-1]} (onnxruntime-web WebGPU EP)",
             "load_ms": theirs["loadMs"], "first_load_ms": theirs["firstLoadMs"], "adapter": ours["adapter"],
             "same_tokens_as_transformers_cpu": theirs["ids"] == reference,
             **_rates(len(ids), theirs["runs"])}]
    model = f"tests/language_models.py {args.kind} f32 (hidden 64, 2 layers, vocab {len(lm.tokenizer)})"
    results = {"model": model, "chromium": version, "prompt_tokens": len(ids), "new_tokens": args.new_tokens,
               "reps": args.reps, "rounds": args.rounds, "reference_ids": reference, "runtimes": rows}
    print(f"{results['model']} in Chromium {version}: prompt {len(ids)} tokens, {args.new_tokens} new, "
          f"medians of {args.reps} runs x {args.rounds} rounds")
    print(f"{'runtime':<58}{'load ms':>9}{'prefill ms':>11}{'decode tok/s':>14}{'ms/step':>9}  same tokens")
    for r in rows:
        print(f"{r['runtime']:<58}{r['load_ms']:>9.0f}{r['prefill_ms']:>11.1f}"
              f"{r['decode_tokens_per_s']:>14.1f}{r['decode_ms_per_step']:>9.2f}  "
              f"{r['same_tokens_as_transformers_cpu']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))

