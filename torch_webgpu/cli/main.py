"""`torch-webgpu`: compile a PyTorch model into a bundle, run a bundle, inspect a bundle.

`run` and `inspect` need neither torch, torch-mlir nor IREE; `compile` imports them on use.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EPILOG = """\
examples:
  torch-webgpu compile models.py:MLP --input 4x16xf32 -o mlp.bundle
  torch-webgpu compile model.pt2 --target webgpu-core -o model.zip
  torch-webgpu compile models.py:MLP --input 4x16xf32 --compile-to=wgsl -o shaders/
  torch-webgpu compile models.py:tiny_llama --decoder --tokenizer tok/ -o llama.bundle
  torch-webgpu generate llama.bundle --prompt "Once upon a time"   # streams the generated text
  torch-webgpu generate llama.bundle --chat                        # a conversation on the terminal
  torch-webgpu run mlp.bundle --input @x.npy --output @y.npy
  torch-webgpu run mlp.bundle --input 4x16xf32=1 --benchmark 100
  torch-webgpu inspect mlp.bundle
  torch-webgpu adapter --json > gpu.json   # on the target machine; then compile there with --target gpu.json
  torch-webgpu serve mlp.bundle --port 8000   # the bundle in a browser page (torch-webgpu.js)
  torch-webgpu export-web mlp.bundle site/    # the same page as static files for any web host

A bundle is a directory (or one .zip file) with manifest.json, one .wgsl per executable and the weights
as constants.safetensors; `torch_webgpu.load(path)` runs it from Python without torch, and
torch-webgpu.js (shipped in torch_webgpu/web/) runs it in a browser.
"""

TYPE_HELP = ("tensor type as SHAPExELEMENT, e.g. 4x16xf32, 2x3x8x8xf32, 1x8xi64 (element types: f32, f16, "
             "i64, i32, i16, i8, ui8, i1)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torch-webgpu", description="Compile PyTorch models for WebGPU and run them without PyTorch.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser(
        "compile", help="compile a model into a bundle (or stop after a phase)",
        description="Compile FILE.py:FACTORY (FACTORY() returns an nn.Module; eval mode is applied) or a "
                    "torch.export.save'd MODEL.pt2 for fixed input shapes. Parameters and buffers are baked "
                    "into the bundle, which takes only the model's inputs.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("model", help="FILE.py:FACTORY (a callable returning an nn.Module) or MODEL.pt2")
    c.add_argument("--input", "-i", action="append", default=[], metavar="TYPE",
                   help=f"one per model input, in order: {TYPE_HELP}. Optional for .pt2 (its example "
                        "inputs are used)")
    c.add_argument("-o", "--output", metavar="PATH",
                   help="the bundle: a directory, or one file if PATH ends in .zip. With --compile-to=wgsl a "
                        "directory for the .wgsl files; with high-ir/iree-input a file (default: stdout)")
    c.add_argument("--target", type=_target_arg, default="auto",
                   help="auto: this machine's adapter limits and features; webgpu-core: the WebGPU "
                        "specification's default limits (256 invocations, 16 KiB workgroup memory, 8 storage "
                        "buffers per stage, no f16), portable to any browser; FILE.json: another machine's "
                        "adapter, saved there by `torch-webgpu adapter --json` (default: auto)")
    c.add_argument("--external-weights", action="store_true",
                   help="leave the weights out of the bundle; `run --weights` or `load(path, weights=...)` "
                        "supplies them (for models whose weights travel separately)")
    c.add_argument("--f16", action="store_true",
                   help="convert the model and float inputs to float16 (needs the shader-f16 feature)")
    c.add_argument("--dump-dir", metavar="DIR",
                   help="write every intermediate (imported and high IR, IREE input and HAL, SPIR-V, WGSL, "
                        "plan) under DIR")
    c.add_argument("--compile-to", choices=["high-ir", "iree-input", "wgsl", "bundle"], default="bundle",
                   help="stop after this phase: high-ir (our torch-dialect IR, printed), iree-input (the "
                        "MLIR module given to IREE), wgsl (the shaders), bundle (default)")
    c.add_argument("--seed", type=int, default=0,
                   help="seed for the example inputs used to trace (default 0)")
    c.add_argument("--decoder", action="store_true",
                   help="FACTORY returns a Llama-style causal LM (transformers Llama, Qwen2/3, Mistral): "
                        "write a decode bundle (prefill plans per --prompt-buckets, one decode plan, shared "
                        "weights and KV cache) for `torch-webgpu generate`; --input is not used")
    c.add_argument("--max-len", type=int, default=256, metavar="N",
                   help="with --decoder: the KV cache's length, prompt + generated tokens (default 256)")
    c.add_argument("--prompt-buckets", default="16,64", metavar="L1,L2,...",
                   help="with --decoder: prompt lengths with a prefill plan of their own; a prompt runs in "
                        "the smallest bucket that holds it (default 16,64)")
    c.add_argument("--tokenizer", metavar="DIR|FILE",
                   help="with --decoder: the model's tokenizer, a directory holding tokenizer.json [+ "
                        "tokenizer_config.json, chat_template.jinja] (what save_pretrained writes) or a "
                        "tokenizer.json file; stored in the bundle for `generate --prompt TEXT` and --chat")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=cmd_compile)

    g = sub.add_parser(
        "generate", help="generate text (or token ids) with a decode bundle (compile --decoder)",
        description="Greedy (default) or sampled decoding with a decode bundle. A bundle compiled with "
                    "--tokenizer takes text: --prompt TEXT streams the generated text to stdout; --chat "
                    "applies the chat template (one turn with --prompt, else a conversation: one user "
                    "message per line of stdin). --ids takes token ids and prints the prompt's and new ids.")
    g.add_argument("bundle", help="decode bundle directory or .zip")
    g.add_argument("--prompt", metavar="TEXT", help="the prompt text (needs a bundle with a tokenizer)")
    g.add_argument("--ids", metavar="ID,ID,...", help="the prompt as token ids; prints token ids")
    g.add_argument("--chat", action="store_true",
                   help="apply the bundle's chat template: --prompt is the user's message; without it, a "
                        "conversation over stdin (interactive on a terminal; Ctrl-D ends it)")
    g.add_argument("--system", metavar="TEXT", help="with --chat: a system message first")
    g.add_argument("--max-new-tokens", type=int, default=None, metavar="N",
                   help="at most N new tokens (default: until an end-of-sequence token or max_len)")
    g.add_argument("--sample", action="store_true",
                   help="sample (temperature, top-k, top-p) instead of greedy")
    g.add_argument("--temperature", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="0: no top-k filter")
    g.add_argument("--top-p", type=float, default=1.0, help="1.0: no top-p filter")
    g.add_argument("--seed", type=int, default=0)
    g.set_defaults(func=cmd_generate)

    r = sub.add_parser(
        "run", help="run a bundle on this machine's WebGPU adapter",
        description="Run a bundle once (or --benchmark N times) and print or save its outputs.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("bundle", help="bundle directory or .zip")
    r.add_argument("--input", "-i", action="append", default=[], metavar="VALUE",
                   help="one per model input, in order: @x.npy (numpy.save file), TYPE=v1,v2,... (e.g. "
                        "1x4xf32=1,2,3,4; one value fills the tensor) or TYPE alone (zeros)")
    r.add_argument("--output", "-o", action="append", default=[], metavar="@FILE.npy",
                   help="one per output, in order: write it to FILE.npy instead of printing it ('-' prints)")
    r.add_argument("--weights", metavar="FILE.safetensors",
                   help="the weights of a bundle compiled with --external-weights (tensor names as the "
                        "model's state_dict)")
    r.add_argument("--benchmark", type=int, default=0, metavar="N",
                   help="after one warm-up call, time N calls and print the median/min/max per call")
    r.set_defaults(func=cmd_run)

    s = sub.add_parser(
        "inspect", help="describe a bundle: signature, dispatches, WGSL sizes, weights, requirements",
        description="Print what a bundle holds and what it needs from an adapter (hashes are verified).")
    s.add_argument("bundle", help="bundle directory or .zip")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.add_argument("--check", action="store_true",
                   help="also check the requirements against this machine's adapter")
    s.set_defaults(func=cmd_inspect)

    a = sub.add_parser(
        "adapter", help="describe this machine's WebGPU adapter (its limits and features)",
        description="Print the adapter, or with --json its limits and features: the file `compile --target "
                    "FILE.json` takes, to compile on one machine for another.")
    a.add_argument("--json", action="store_true", help="print limits and features as JSON")
    a.set_defaults(func=cmd_adapter)

    w = sub.add_parser(
        "serve", help="serve a bundle and a page that runs it in the browser (torch-webgpu.js)",
        description="Start a local HTTP server with a page that shows the bundle's signature, runs it on "
                    "random or uploaded (.npy) inputs through torch-webgpu.js and shows the outputs and the "
                    "time per call; for a decode bundle, a chat page (streamed replies, tokens/s, sampling "
                    "controls). Open the printed URL in a browser with WebGPU; Ctrl-C stops.")
    w.add_argument("bundle", help="bundle directory or .zip")
    w.add_argument("--port", type=int, default=8000, help="TCP port (default 8000; 0 picks a free one)")
    w.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: WebGPU needs a secure context, which "
                        "http:// is only on localhost)")
    w.add_argument("--weights", metavar="FILE.safetensors",
                   help="the weights of a bundle compiled with --external-weights (served to the page)")
    w.add_argument("-v", "--verbose", action="store_true", help="log every request")
    w.set_defaults(func=cmd_serve)

    e = sub.add_parser(
        "export-web", help="write the bundle, torch-webgpu.js and the page as static files",
        description="Write index.html, app.js, page.css, torch-webgpu.js (+ .d.ts), config.json and a "
                    "copy of the bundle into DIR, for any static web host (served over https or localhost); "
                    "a decode bundle gets the chat page (index.html, chat.js) and, with a tokenizer, "
                    "vendor/ with the ES modules of @huggingface/tokenizers and @huggingface/jinja.")
    e.add_argument("bundle", help="bundle directory or .zip")
    e.add_argument("directory", metavar="DIR", help="output directory (created)")
    e.add_argument("--weights", metavar="FILE.safetensors",
                   help="the weights of a bundle compiled with --external-weights (copied beside it)")
    e.set_defaults(func=cmd_export_web)
    return parser


def _target_arg(value: str) -> str:
    if value in ("auto", "webgpu-core") or value.endswith(".json"):
        return value
    raise argparse.ArgumentTypeError(f"{value!r}: choose auto, webgpu-core or an adapter FILE.json")


def cmd_adapter(args: argparse.Namespace) -> int:
    """`torch-webgpu adapter`."""
    from torch_webgpu.runtime import get_runtime

    info = get_runtime().info
    if args.json:
        print(json.dumps({"adapter": info.name, "backend": info.backend, "limits": dict(info.limits),
                          "features": sorted(info.features),
                          "subgroup_matrix_configs": [list(c) for c in info.subgroup_matrix_configs]},
                         indent=1, sort_keys=True))
    else:
        print(info.describe())
    return 0


# -- compile -------------------------------------------------------------------------------------------

def _load_model(spec: str) -> Any:
    """The nn.Module of FILE.py:FACTORY, or the ExportedProgram of a .pt2 file."""
    import importlib.util
    import operator

    import torch

    if spec.endswith(".pt2"):
        if not Path(spec).exists():
            raise FileNotFoundError(f"no exported program at {spec}")
        return torch.export.load(spec)
    file, sep, factory = spec.rpartition(":")
    if not sep or not file.endswith(".py"):
        raise ValueError(f"{spec!r}: give FILE.py:FACTORY (FACTORY() returns an nn.Module) or MODEL.pt2")
    path = Path(file).resolve()
    if not path.exists():
        raise FileNotFoundError(f"no such file: {file}")
    sys.path.insert(0, str(path.parent))   # the model file may import its neighbours
    module_spec = importlib.util.spec_from_file_location(f"_torch_webgpu_model_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    try:
        make = operator.attrgetter(factory)(module)
    except AttributeError:
        raise ValueError(f"{file} has no {factory!r}") from None
    model = make()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{spec}: {factory}() returned {type(model).__name__}, not an nn.Module")
    return model.eval()


def _example_inputs(model: Any, types: Sequence[str], seed: int) -> list:
    """Tensors of the given types (random floats, zeros otherwise); a .pt2's own example inputs if none."""
    import torch

    from .values import parse_type

    if not types:
        if isinstance(model, torch.export.ExportedProgram) and model.example_inputs is not None:
            args, kwargs = model.example_inputs
            if kwargs:
                raise ValueError("the exported program takes keyword inputs; bundles take positional ones")
            return list(args)
        raise ValueError("give one --input TYPE per model input (e.g. --input 4x16xf32)")
    gen = torch.Generator().manual_seed(seed)
    out = []
    for text in types:
        tt = parse_type(text)
        dtype = getattr(torch, tt.dtype)
        if dtype.is_floating_point:
            out.append(torch.randn(tt.shape, generator=gen).to(dtype))
        else:
            out.append(torch.zeros(tt.shape, dtype=dtype))
    return out


def _write_text(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text)
        print(f"wrote {output}")


def cmd_compile(args: argparse.Namespace) -> int:
    """`torch-webgpu compile`."""
    from tqdm import tqdm

    if args.compile_to in ("bundle", "wgsl") and not args.output:
        raise ValueError(f"--compile-to={args.compile_to} needs -o PATH")
    phases = ["load model", "torch.export", "compile"] + (["write"] if args.compile_to != "high-ir" else [])
    bar = tqdm(total=len(phases), desc="torch-webgpu compile", unit="phase", file=sys.stderr,
               disable=args.quiet, bar_format="{desc}: {n_fmt}/{total_fmt} {postfix} [{elapsed}]")

    def phase(name: str) -> None:
        bar.set_postfix_str(name)

    from torch_webgpu.compiler.export import graph as ex

    start = time.perf_counter()
    if args.decoder:
        return _compile_decoder(args, bar, start)
    if args.tokenizer:
        raise ValueError("--tokenizer goes with --decoder (a decode bundle's text in and out)")
    phase("load model")
    target = ex.make_target(args.target, args.f16)
    model = _load_model(args.model)
    inputs = _example_inputs(model, args.input, args.seed)
    bar.update()
    phase("torch.export")
    traced = ex.trace(model, inputs, f16=args.f16)
    bar.update()
    if args.compile_to == "high-ir":
        phase("high IR")
        text = ex.high_ir_text(traced)
        bar.update()
        bar.close()
        _write_text(text, args.output)
        return 0
    if args.compile_to == "iree-input":
        phase("IREE input")
        text = ex.iree_input_text(traced, target)
        bar.update()
        bar.close()
        _write_text(text, args.output)
        return 0
    phase("compile: torch-mlir -> IREE -> WGSL")
    plan = ex.compile_traced(traced, target, args.dump_dir)
    bar.update()
    phase("write")
    if args.compile_to == "wgsl":
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        for name, source in plan.wgsl.items():
            (out / name).write_text(source)
        bar.update()
        bar.close()
        print(f"wrote {len(plan.wgsl)} WGSL files to {out}")
        return 0
    path = ex.write_plan_bundle(plan, traced, target, args.output, source=args.model,
                                external_weights=args.external_weights)
    bar.update()
    bar.close()
    print(f"wrote {path} ({plan.dispatch_count} dispatches, target {target.name}) "
          f"in {time.perf_counter() - start:.1f}s")
    return 0


def _compile_decoder(args: argparse.Namespace, bar: Any, start: float) -> int:
    """`torch-webgpu compile --decoder`: a decode bundle of a causal LM."""
    from torch_webgpu.compiler.export import export_decoder

    if args.compile_to != "bundle" or args.external_weights or args.input:
        raise ValueError("--decoder writes a whole decode bundle: drop --compile-to, --external-weights and "
                         "--input")
    if not args.output:
        raise ValueError("--decoder needs -o PATH")
    buckets = [int(b) for b in args.prompt_buckets.split(",") if b.strip()]
    bar.set_postfix_str("load model")
    model = _load_model(args.model)
    bar.update()
    bar.set_postfix_str("compile prefill and decode plans")
    path = export_decoder(model, args.output, max_len=args.max_len, prompt_buckets=buckets,
                          target=args.target, f16=args.f16, source=args.model, tokenizer=args.tokenizer)
    bar.update(bar.total - bar.n)
    bar.close()
    text = f", tokenizer from {args.tokenizer}" if args.tokenizer else ""
    print(f"wrote decode bundle {path} (prompt buckets {buckets}, max_len {args.max_len}{text}) in "
          f"{time.perf_counter() - start:.1f}s")
    return 0


# -- generate ------------------------------------------------------------------------------------------

def _prompt_ids(text: str) -> list[int]:
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--ids takes token ids separated by commas (e.g. 1,15043,29892), not {text!r}; "
                         "give text with --prompt") from None


def _write_piece(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


def _chat_turns(bundle: Any, args: argparse.Namespace, options: dict[str, Any]) -> None:
    """A conversation over stdin: each line a user message, each reply streamed to stdout."""
    from torch_webgpu.bundle import BundleSignatureError

    start = [{"role": "system", "content": args.system}] if args.system else []
    history = list(start)
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            try:
                line = input("> ")
            except EOFError:
                print()
                return
        else:
            line = sys.stdin.readline()
            if not line:
                return
            line = line.rstrip("\n")
        if not line.strip():
            continue
        history.append({"role": "user", "content": line})
        pieces: list[str] = []
        try:
            for piece in bundle.chat(history, args.max_new_tokens, stream=True, **options):
                pieces.append(piece)
                _write_piece(piece)
        except BundleSignatureError as exc:   # the conversation outgrew the bundle: start a new one
            print(f"torch-webgpu generate: {exc}; starting a new conversation", file=sys.stderr)
            history = list(start)
            continue
        print(flush=True)
        history.append({"role": "assistant", "content": "".join(pieces)})


def cmd_generate(args: argparse.Namespace) -> int:
    """`torch-webgpu generate`."""
    from torch_webgpu.bundle import load

    if args.prompt is not None and args.ids is not None:
        raise ValueError("give the prompt as text (--prompt) or as token ids (--ids), not --prompt and --ids")
    if args.chat and args.ids is not None:
        raise ValueError("--chat renders messages as text: give --prompt TEXT (or none: stdin), not --ids")
    if args.prompt is None and args.ids is None and not args.chat:
        raise ValueError("give --prompt TEXT, --ids ID,ID,... or --chat")
    bundle = load(args.bundle)
    if not hasattr(bundle, "generate"):
        raise ValueError(f"{args.bundle} is not a decode bundle; compile it with "
                         "`torch-webgpu compile --decoder`")
    options = dict(do_sample=args.sample, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                   seed=args.seed)
    if args.ids is not None:
        ids = bundle.generate(_prompt_ids(args.ids), args.max_new_tokens, **options)
        print(",".join(str(int(t)) for t in ids[0]))
        return 0
    if args.chat and args.prompt is None:
        bundle.text_tokenizer()   # a bundle without a tokenizer says so before reading stdin
        _chat_turns(bundle, args, options)
        return 0
    if args.chat:
        messages = ([{"role": "system", "content": args.system}] if args.system else []) + \
            [{"role": "user", "content": args.prompt}]
        bundle.chat(messages, args.max_new_tokens, streamer=_write_piece, **options)
    else:
        bundle.generate(args.prompt, args.max_new_tokens, streamer=_write_piece, **options)
    print(flush=True)
    return 0


# -- run -----------------------------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    """`torch-webgpu run`."""
    import numpy as np

    from torch_webgpu.bundle import load

    from .values import format_value, parse_value

    weights = None
    if args.weights:
        from safetensors.numpy import load_file

        weights = load_file(args.weights)
    bundle = load(args.bundle, weights=weights)
    values = [parse_value(v) for v in args.input]
    result = bundle(*values)
    outputs = [result] if bundle.manifest.get("output_structure") == "single" else list(result)
    if args.output and len(args.output) > len(outputs):
        raise ValueError(f"{len(args.output)} --output given, the bundle has {len(outputs)} outputs")
    for k, value in enumerate(outputs):
        dest = args.output[k] if k < len(args.output) else "-"
        if value is None:
            print(f"result[{k}]: None")
        elif dest == "-":
            print(f"result[{k}]: {format_value(np.asarray(value))}")
        else:
            if not dest.startswith("@") or not dest.endswith(".npy"):
                raise ValueError(f"--output {dest!r}: give @FILE.npy (or - to print)")
            np.save(dest[1:], np.asarray(value))
            print(f"result[{k}]: wrote {dest[1:]}")
    if args.benchmark > 0:
        times = []
        for _ in range(args.benchmark):
            t0 = time.perf_counter()
            bundle(*values)
            times.append(time.perf_counter() - t0)
        print(f"benchmark: {args.benchmark} calls, median {statistics.median(times) * 1e3:.3f} ms, "
              f"min {min(times) * 1e3:.3f} ms, max {max(times) * 1e3:.3f} ms per call")
    return 0


# -- inspect -------------------------------------------------------------------------------------------

def _safetensors_summary(data: bytes) -> dict[str, Any]:
    """Tensor count and payload bytes from a safetensors header (no numpy needed)."""
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    return {"tensors": len(tensors),
            "bytes": sum(v["data_offsets"][1] - v["data_offsets"][0] for v in tensors.values())}


def summarize(path: str | Path) -> dict[str, Any]:
    """What `inspect` prints, as a dict."""
    from torch_webgpu.bundle.format import read_bundle
    from torch_webgpu.bundle.loader import format_signature

    manifest, files = read_bundle(path)
    decoder = manifest.get("decoder")
    # a decode bundle: its decode plan stands for it; every phase is listed under "decoder"
    plan = decoder["phases"]["decode"]["plan"] if decoder else manifest["plan"]
    wgsl = {spec["entry_point"]: len(files[spec["wgsl_file"]])
            for spec in plan["executables"].values()}
    weights_file = "weights.safetensors" if decoder else "constants.safetensors"
    weights = _safetensors_summary(files[weights_file]) if weights_file in files \
        else {"tensors": 0, "bytes": 0}
    extra = {}
    if decoder:
        extra["decoder"] = {"max_len": decoder["max_len"], "prompt_buckets": decoder["prompt_buckets"],
                            "phases": {name: p["dispatches"] for name, p in decoder["phases"].items()},
                            "eos_token_ids": decoder["eos_token_ids"], "tokenizer": None}
        if "tokenizer" in decoder:
            config = json.loads(files[decoder["tokenizer"]["config"]])
            extra["decoder"]["tokenizer"] = {**decoder["tokenizer"],
                                             "chat_template": bool(config.get("chat_template"))}
    return {**extra,
        "path": str(path),
        "format_version": manifest["format_version"],
        "producer": manifest.get("producer", {}),
        "source": manifest.get("source", ""),
        "target": manifest.get("target", {}),
        "signature": format_signature(manifest["inputs"], manifest["outputs"]),
        "inputs": manifest["inputs"],
        "outputs": manifest["outputs"],
        "dispatches": sum(1 for n in plan["main"] if n["op"] == "dispatch"),
        "init_dispatches": sum(1 for n in plan["init"] if n["op"] == "dispatch"),
        "executables": len(wgsl),
        "wgsl_bytes": wgsl,
        "wgsl_total_bytes": sum(wgsl.values()),
        "weights": weights,
        "external_weights": len(manifest.get("external_weights", {}).get("weights", {})),
        "buffer_bytes": sum(plan["buffers"].values()),
        "requires": manifest["requires"],
    }


def cmd_inspect(args: argparse.Namespace) -> int:
    """`torch-webgpu inspect`."""
    info = summarize(args.bundle)
    if args.check:
        from torch_webgpu.bundle.requirements import unmet
        from torch_webgpu.runtime import get_runtime

        rt_info = get_runtime().info
        info["adapter"] = rt_info.name
        info["unmet"] = unmet(info["requires"], rt_info.limits, rt_info.features)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    from .values import type_string

    print(f"bundle: {info['path']} (format version {info['format_version']}, target "
          f"{info['target'].get('name', '?')}, from {info['source'] or '?'})")
    print(f"signature: {info['signature']}")
    for t in info["inputs"]:
        print(f"  input  {t['name']}: {type_string(t['shape'], t['dtype'])}")
    for t in info["outputs"]:
        print(f"  output {t['name']}: {type_string(t['shape'], t['dtype'])}")
    print(f"dispatches per call: {info['dispatches']} (+{info['init_dispatches']} once at load), "
          f"{info['executables']} executables")
    print(f"WGSL: {info['wgsl_total_bytes']} bytes")
    for name, size in info["wgsl_bytes"].items():
        print(f"  {name}: {size} bytes")
    print(f"weights: {info['weights']['bytes']} bytes in {info['weights']['tensors']} tensors; "
          f"device buffers: {info['buffer_bytes']} bytes")
    if "decoder" in info:
        dec = info["decoder"]
        print(f"decode bundle: max_len {dec['max_len']}, prompt buckets {dec['prompt_buckets']}; dispatches "
              f"per phase: {dec['phases']} (`torch-webgpu generate` runs it)")
        tok = dec["tokenizer"]
        text = (f"{tok['json']} + {tok['config']}, chat template: {'yes' if tok['chat_template'] else 'no'} "
                "(text in, text out)") if tok else "none (token ids in and out)"
        print(f"tokenizer: {text}; end-of-sequence ids {dec['eos_token_ids']}")
    if info["external_weights"]:
        print(f"external weights: {info['external_weights']} tensors, supplied at load (run --weights)")
    req = info["requires"]
    print(f"requires features: {', '.join(req['features']) or 'none'}")
    print("requires limits:")
    for name, value in req["limits"].items():
        print(f"  {name}: {value}")
    if args.check:
        verdict = "ok" if not info["unmet"] else "LACKS " + "; ".join(info["unmet"])
        print(f"this adapter ({info['adapter']}): {verdict}")
    return 0


# -- web -----------------------------------------------------------------------------------------------

def _page_of(manifest: dict, bundle: Any) -> str:
    """What the page of `bundle` shows: its signature, or a decode bundle's chat."""
    if manifest.get("kind") == "decoder":
        info = manifest["decoder"]
        text = "text (its tokenizer)" if info.get("tokenizer") else "token ids (no tokenizer)"
        return (f"the decode bundle {bundle} in a chat page: {text}, max_len {info['max_len']}, prompt "
                f"buckets {info['prompt_buckets']}")
    from torch_webgpu.bundle.loader import format_signature

    return f"{bundle} {format_signature(manifest['inputs'], manifest['outputs'])}"


def cmd_serve(args: argparse.Namespace) -> int:
    """`torch-webgpu serve`."""
    from torch_webgpu.bundle.format import read_manifest

    from .web import bundle_mounts, make_server, page_config

    bundle = Path(args.bundle)
    manifest = read_manifest(bundle)   # a corrupted bundle fails here, not only in the page
    weights = Path(args.weights) if args.weights else None
    server = make_server(bundle_mounts(bundle, weights), page_config(bundle, weights), args.host, args.port,
                         args.verbose)
    host, port = server.server_address[:2]
    print(f"serving {_page_of(manifest, bundle)}")
    print(f"open http://{'localhost' if host in ('127.0.0.1', '::1') else host}:{port}/ (Ctrl-C stops)",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def cmd_export_web(args: argparse.Namespace) -> int:
    """`torch-webgpu export-web`."""
    from .web import export_web

    out = export_web(args.bundle, args.directory, args.weights)
    print(f"wrote {out}: index.html and torch-webgpu.js with the bundle; serve the directory over https "
          "(or localhost) and open index.html")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `torch-webgpu` console script."""
    from torch_webgpu.bundle.format import BundleError
    from torch_webgpu.runtime import WebGPUError

    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        # Errors about the user's model, inputs, bundle or adapter are reported in one line; anything
        # else is a bug and keeps its traceback.
        user_errors = [BundleError, WebGPUError, ValueError, TypeError, NotImplementedError, OSError,
                       OverflowError, ImportError]
        iree = sys.modules.get("mlir_passes.iree_driver")
        if iree is not None:
            user_errors.append(iree.IREECompileError)
        if not isinstance(exc, tuple(user_errors)):
            raise
        print(f"torch-webgpu {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
