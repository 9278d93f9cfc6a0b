"""Decode bundles to measure: the tests' tiny models, and the Llama-3.2-1B-shaped one with synthetic weights.

    python -m benchmarks lm bundles tiny OUT      # tests/language_models.py's Llama and Qwen2, f32 and int4
    python -m benchmarks lm bundles synthetic-1b OUT [--quant int4|int8|f16] [--max-len 512]
    python -m benchmarks lm bundles strip BUNDLE OUT      # the bundle without weights.safetensors
    python -m benchmarks lm bundles fill BUNDLE           # its weights again, byte for byte

A bundle's weights are synthetic in `synthetic-1b` (Llama-3.2-1B's shape, `llama_decode.llama_1b_config`):
each tensor's bytes come from SHAKE-128 of its name, so `fill` writes the same weights.safetensors again on
a GPU machine from the bundle's `weights.header.json` (a bundle carries ~1 GB less: `strip`), and the
manifest's hashes still hold. Timings only: the values are not a trained model's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
WEIGHTS = "weights.safetensors"
WEIGHTS_HEADER = "weights.header.json"
SYNTHETIC_SCALE = 0.05   # synthetic floats lie in [-0.05, 0.05)

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

    from ..llama_decode import llama_1b_config

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



def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    """The subcommands (see the module's docstring)."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
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
    args = parser.parse_args(argv)
    if args.command == "synthetic-1b":
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
