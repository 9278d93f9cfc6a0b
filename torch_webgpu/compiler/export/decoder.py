"""`export_decoder(lm, path, max_len=..., prompt_buckets=..., tokenizer=...)`: one decode-ready bundle of a
causal LM — a prefill plan per prompt-length bucket and one decode plan (compiler/export/decoder_model.py),
their model weights stored once and uploaded once at load (the plans bind the same buffers), the KV cache
handed from plan to plan on the device, what `generate` needs (vocabulary, end-of-sequence ids, max_len),
the device sampler's WGSL and, given a tokenizer, its tokenizer.json + tokenizer_config.json
(compiler/export/tokenizer.py) for text in and text out.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from torch_webgpu.bundle.format import BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, write_bundle
from torch_webgpu.bundle.requirements import check_requirements, plan_requirements
from torch_webgpu.kernels.sampling import sample_wgsl
from torch_webgpu.plan.buffers import same_constant

from .decoder_model import DecodeStep, PrefillStep, cache_shape, check_decoder
from .graph import _constant_weight_names, _versions, compile_traced, make_target, trace
from .tokenizer import TOKENIZER_CONFIG, TOKENIZER_JSON, bundle_tokenizer

DECODER_KIND = "decoder"
WEIGHTS_FILE = "weights.safetensors"
SAMPLER_FILE = "sampler.wgsl"
_WGSL_SCALARS = {"float32": "f32", "float16": "f16"}


def _phases(lm: torch.nn.Module, max_len: int, buckets: Sequence[int]) -> list[tuple[str, Any, list]]:
    """(name, module, example inputs) of every phase."""
    dtype = next(lm.parameters()).dtype
    phases: list[tuple[str, Any, list]] = []
    for length in buckets:
        ids = torch.zeros(1, length, dtype=torch.int64)
        phases.append((f"prefill-{length}", PrefillStep(lm, max_len, length),
                       [ids, torch.tensor([length - 1])]))
    cache = torch.zeros(cache_shape(lm.config, max_len), dtype=dtype)
    phases.append(("decode", DecodeStep(lm, max_len),
                   [torch.zeros(1, 1, dtype=torch.int64), torch.tensor([0]), cache]))
    return phases


def _eos_ids(lm: torch.nn.Module, tokenizer: Any = None) -> list[int]:
    """The generation config's end-of-sequence ids, else the model config's, else the tokenizer's
    eos_token (bundle/tokenizer.py's BundleTokenizer)."""
    gen = getattr(lm, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    eos = getattr(lm.config, "eos_token_id", None) if eos is None else eos
    if eos is None and tokenizer is not None:
        eos = tokenizer.eos_token_id
    return [] if eos is None else [int(e) for e in ([eos] if isinstance(eos, int) else eos)]


def _plan_files(plan: Any, phase: str) -> tuple[dict, dict[str, bytes]]:
    """The plan's document and its WGSL files, named `<phase>.<file>` (one bundle holds every phase)."""
    constants, plan.constants = plan.constants, {}
    try:
        with tempfile.TemporaryDirectory(prefix="torch-webgpu-decoder-") as tmp:
            plan.save(tmp)
            doc = json.loads(Path(tmp, "plan.json").read_text())
            files = {f"{phase}.{p.name}": p.read_bytes() for p in Path(tmp).iterdir() if p.suffix == ".wgsl"}
    finally:
        plan.constants = constants
    for spec in doc["executables"].values():
        spec["wgsl_file"] = f"{phase}.{spec['wgsl_file']}"
    doc["constant_names"] = []   # the constants live in weights.safetensors (see the phase's "constants")
    return doc, files


def export_decoder(lm: torch.nn.Module, path: str | os.PathLike, *, max_len: int,
                   prompt_buckets: Sequence[int] = (16,), target: str = "auto", f16: bool = False,
                   source: str = "", tokenizer: Any = None) -> Path:
    """Compile a Llama-style causal LM into a decode bundle at `path` (directory or .zip): prompts up
    to max(prompt_buckets) tokens, prompt + generated tokens up to `max_len`. Load it with
    `torch_webgpu.load(path)` and call its `generate(prompt_ids, max_new_tokens)` (no torch needed).

    `tokenizer` (a transformers fast tokenizer, a `tokenizers.Tokenizer`, or a directory holding
    tokenizer.json [+ tokenizer_config.json] or the tokenizer.json file) travels in the bundle, so that
    `generate("text")` and `chat(messages)` take and give text."""
    buckets = sorted({int(b) for b in prompt_buckets})
    if not buckets or buckets[0] <= 0 or buckets[-1] > max_len:
        raise ValueError(f"prompt_buckets {list(prompt_buckets)} must be positive lengths <= max_len "
                         f"{max_len}")
    check_decoder(lm, max_len)
    lm = lm.eval()
    text_files, text_tokenizer = bundle_tokenizer(tokenizer, int(lm.config.vocab_size)) \
        if tokenizer is not None else ({}, None)
    tgt = make_target(target, f16)
    weights: dict[str, np.ndarray] = {}
    stored: dict[tuple, list] = {}   # (shape, dtype) -> [(array, key)] of the model weights stored
    phases: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    requires: dict[str, Any] = {"features": [], "limits": {}}
    for name, module, inputs in _phases(lm, max_len, buckets):
        traced = trace(module, inputs, f16=f16)
        plan = compile_traced(traced, tgt)
        needs = plan_requirements(plan, tgt.iree.workgroup_memory_bytes, tgt.iree.offset_alignment,
                                  tgt.iree.subgroup_size)
        check_requirements(needs, tgt.limits, tgt.features, what=f"target {tgt.name}")
        requires["features"] = sorted(set(requires["features"]) | set(needs.get("features", [])))
        for key, value in needs.get("limits", {}).items():
            requires["limits"][key] = max(requires["limits"].get(key, value), value)
        model_names = {f"_const_{k}": n for k, n in enumerate(_constant_weight_names(traced))}
        packs = plan.meta.get("packed_constants", {})
        constants = []
        for const, value in plan.constants.items():
            value = np.ascontiguousarray(value)
            model_name = model_names.get(const)
            key = f"{name}:{const}"
            if model_name is not None:
                # one copy of a model weight for every phase (packed quantized weights by their packing)
                key = model_name + (f"|{json.dumps(packs[const], sort_keys=True)}" if const in packs else "")
                held = weights.get(key)
                if held is not None and (held.dtype != value.dtype or held.shape != value.shape
                                         or not np.array_equal(held, value)):
                    key = f"{name}:{const}"   # the compiler prepared it differently for this phase
                if key not in weights:
                    # tied weights (the embedding and the LM head) are stored once
                    key = same_constant(stored, value) or key
            if key not in weights:
                weights[key] = value
                stored.setdefault((tuple(value.shape), value.dtype.str), []).append((value, key))
            constants.append([const, key, model_name is not None])
        doc, wgsl = _plan_files(plan, name)
        files.update(wgsl)
        phases[name] = {
            "inputs": [{"name": f"input{k}", "shape": list(s.shape), "dtype": s.dtype}
                       for k, s in enumerate(plan.inputs)],
            "outputs": [{"name": f"output{k}", "shape": list(s.shape), "dtype": s.dtype}
                        for k, s in enumerate(plan.outputs)],
            "dispatches": plan.dispatch_count, "plan": doc, "constants": constants,
        }
    from safetensors.numpy import save

    files[WEIGHTS_FILE] = save(weights)
    cfg = lm.config
    decode = phases["decode"]
    # The device sampler (kernels/sampling.py) for the logits' dtype, so that a runtime without the
    # kernel library (torch-webgpu.js) draws the same tokens from the same seed.
    scores = _WGSL_SCALARS[decode["outputs"][0]["dtype"]]
    files[SAMPLER_FILE] = sample_wgsl(scores).encode()
    files.update(text_files)
    manifest = {
        "format": BUNDLE_FORMAT, "format_version": BUNDLE_FORMAT_VERSION, "kind": DECODER_KIND,
        "producer": _versions(), "source": source or type(lm).__name__,
        "target": {"name": tgt.name, "key": tgt.iree.key(), "f16": tgt.f16},
        # the decode step's signature stands for the bundle in `torch-webgpu inspect`
        "inputs": [{**spec, "name": n} for spec, n in zip(decode["inputs"], ("token", "position", "cache"),
                                                          strict=True)],
        "outputs": decode["outputs"], "output_structure": "sequence", "requires": requires,
        "dispatches": decode["dispatches"],
        "decoder": {
            "max_len": max_len, "prompt_buckets": buckets, "vocab_size": int(cfg.vocab_size),
            "eos_token_ids": _eos_ids(lm, text_tokenizer), "cache_shape": list(cache_shape(cfg, max_len)),
            "architecture": type(lm).__name__, "config": json.loads(cfg.to_json_string()),
            "phases": phases, "sampler": {"wgsl": SAMPLER_FILE, "dtype": scores},
        },
    }
    if text_files:
        manifest["decoder"]["tokenizer"] = {"json": TOKENIZER_JSON, "config": TOKENIZER_CONFIG}
    return write_bundle(path, manifest, files)
