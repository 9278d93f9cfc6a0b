"""Decode bundles (torch_webgpu.export_decoder): prefill plans per prompt bucket and one decode plan sharing
weights and the KV cache on the device; the bundle's own generate gives CPU greedy tokens without torch."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import torch_webgpu
from torch_webgpu.bundle import BundleFormatError, BundleSignatureError
from torch_webgpu.bundle.loader import load_plan

from .test_bundle import BLOCKER, REPO

MAX_LEN = 24
pytestmark = pytest.mark.slow   # the fixture compiles three plans


def _tiny_llama():
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                      max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    model.generation_config.pad_token_id = 0
    return model


@pytest.fixture(scope="module")
def llama():
    return _tiny_llama()


@pytest.fixture(scope="module")
def decoder_bundle(llama, tmp_path_factory):
    """The tiny Llama as a decode bundle: prompt buckets of 4 and 8 tokens, a 24-slot KV cache."""
    return torch_webgpu.export_decoder(llama, tmp_path_factory.mktemp("decoder") / "llama", max_len=MAX_LEN,
                                       prompt_buckets=(4, 8), target="webgpu-core")


def _prompt(length, seed=1):
    return torch.randint(1, 256, (1, length), generator=torch.Generator().manual_seed(seed))


def test_manifest_shares_weights_between_phases(llama, decoder_bundle):
    manifest = json.loads((Path(decoder_bundle) / "manifest.json").read_text())
    info = manifest["decoder"]
    assert manifest["kind"] == "decoder" and sorted(info["phases"]) == ["decode", "prefill-4", "prefill-8"]
    assert info["max_len"] == MAX_LEN and info["vocab_size"] == 256 and info["eos_token_ids"] == [2]
    weight_keys = [{key for _, key, is_weight in phase["constants"] if is_weight}
                   for phase in info["phases"].values()]
    assert weight_keys[0] == weight_keys[1] == weight_keys[2]       # every phase binds the same weights
    names = set(dict(llama.named_parameters()))
    assert weight_keys[0] <= {f"lm.{n}" for n in names}
    stored = Path(decoder_bundle, "weights.safetensors").stat().st_size
    params = sum(p.numel() * p.element_size() for p in llama.parameters())
    assert stored < 1.2 * params                                    # stored once, not once per phase
    with pytest.raises(BundleFormatError, match="generate"):
        load_plan(decoder_bundle)


def test_one_device_buffer_per_weight(decoder_bundle):
    bundle = torch_webgpu.load(decoder_bundle)
    decode, prefill = bundle.plans["decode"], bundle.plans["prefill-8"]
    n_user = len(decode.plan.inputs)
    bound = {decode.buffers.static[f"in{n_user + j}"][0] for j in range(decode.plan.num_constant_inputs)}
    shared = set(bundle.weight_buffers.values())
    assert shared and shared <= bound
    n_user = len(prefill.plan.inputs)
    assert shared <= {prefill.buffers.static[f"in{n_user + j}"][0]
                      for j in range(prefill.plan.num_constant_inputs)}
    weights = sum(bundle.rt.buffer(b).nbytes for b in shared)
    assert weights < bundle.device_bytes
    bundle.release()


def test_phases_share_their_per_call_buffers(decoder_bundle):
    bundle = torch_webgpu.load(decoder_bundle)
    assert bundle.slot_buffers
    for compiled in bundle.plans.values():   # each phase binds the bundle's slots, none of its own
        slots = {name: compiled.buffers.static[name][0] for name in compiled.memory.slots}
        assert slots and all(bundle.slot_buffers[name] == buf for name, buf in slots.items())
        assert not set(slots.values()) & set(compiled.buffers.owned)
    bundle.release()


@pytest.mark.parametrize("length", [3, 7])
def test_greedy_matches_cpu_generate(llama, decoder_bundle, length):
    prompt = _prompt(length)
    want = llama.generate(prompt, max_new_tokens=8, do_sample=False)
    got = torch_webgpu.load(decoder_bundle).generate(prompt[0].numpy(), 8)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()


def test_sampled_generate(llama, decoder_bundle):
    bundle = torch_webgpu.load(decoder_bundle)
    prompt = _prompt(5)[0].numpy()
    greedy = bundle.generate(prompt, 6)
    assert bundle.generate(prompt, 6, do_sample=True, top_k=1, temperature=0.6).tolist() == greedy.tolist()
    a = bundle.generate(prompt, 6, do_sample=True, top_k=40, top_p=0.95, temperature=2.0, seed=11)
    assert a.tolist() == bundle.generate(prompt, 6, do_sample=True, top_k=40, top_p=0.95, temperature=2.0,
                                         seed=11).tolist()
    samples = {tuple(bundle.generate(prompt, 6, do_sample=True, temperature=2.0, seed=s)[0])
               for s in range(4)}
    assert len(samples) > 1 and all(s[:5] == tuple(prompt) for s in samples)


def test_bad_generate_calls_are_named(decoder_bundle):
    bundle = torch_webgpu.load(decoder_bundle)
    with pytest.raises(BundleSignatureError, match="largest prefill bucket"):
        bundle.generate(list(range(1, 10)), 2)
    with pytest.raises(BundleSignatureError, match="max_len 24"):
        bundle.generate([1, 2, 3], 22)
    with pytest.raises(BundleSignatureError, match=r"\[0, 256\)"):
        bundle.generate([1, 300], 2)


def test_unsupported_models_are_refused(tmp_path):
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=64)
    gpt2 = transformers.GPT2LMHeadModel(config)
    with pytest.raises(NotImplementedError, match="Llama-style causal LMs"):
        torch_webgpu.export_decoder(gpt2, tmp_path / "g", max_len=16)
    with pytest.raises(ValueError, match="prompt_buckets"):
        torch_webgpu.export_decoder(_tiny_llama(), tmp_path / "l", max_len=16, prompt_buckets=(32,))


def test_generate_without_torch(llama, decoder_bundle, tmp_path):
    prompt = _prompt(6, seed=4)
    want = llama.generate(prompt, max_new_tokens=7, do_sample=False)
    script = BLOCKER + textwrap.dedent(f"""
        import json
        import torch_webgpu
        bundle = torch_webgpu.load({str(decoder_bundle)!r})
        greedy = bundle.generate({prompt[0].tolist()!r}, 7)
        sampled = bundle.generate({prompt[0].tolist()!r}, 7, do_sample=True, top_k=10, top_p=0.9, seed=2)
        loaded = sorted({{m.split(".")[0] for m, v in sys.modules.items() if v is not None}} & BLOCKED)
        assert not loaded, loaded
        print(json.dumps([greedy.tolist(), sampled.tolist()]))
    """)
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path}, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    greedy, sampled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert greedy == want.tolist()
    assert sampled[0][:6] == prompt[0].tolist() and len(sampled[0]) <= 13


def test_int4_decoder_bundle_matches_torchao_cpu(tmp_path):
    """torchao int4 (group 32) linears: the packed weights are stored and uploaded once for both phases,
    and greedy decoding gives torchao's CPU tokens."""
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    model = _tiny_llama()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
              filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn != "lm_head")
    prompt = _prompt(7)
    want = model.generate(prompt, max_new_tokens=6, do_sample=False)
    bundle = torch_webgpu.load(torch_webgpu.export_decoder(model, tmp_path / "int4", max_len=16,
                                                           prompt_buckets=(8,)))
    phases = bundle.manifest["decoder"]["phases"]
    shared = [{key for _, key, is_weight in p["constants"] if is_weight} for p in phases.values()]
    assert shared[0] == shared[1] and len(bundle.weight_buffers) == len(shared[0])
    assert any("|" in key for key in shared[0])      # packed int4 weights, keyed by their packing
    assert bundle.generate(prompt[0].numpy(), 6).tolist() == want.tolist()


def test_quantized_table_and_head_decoder_bundle_matches_torchao_cpu(tmp_path):
    """The ExecuTorch recipe (int4 group 32 token table, linears and LM head) on a tied model: the table
    is stored packed, once for the table and the (bit-identical) head, gathered by quant_embedding in
    both phases, and greedy decoding gives torchao's CPU tokens."""
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=2048,
                                      max_position_embeddings=128, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    model.generation_config.pad_token_id = 0
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
              filter_fn=lambda m, fqn: isinstance(m, (torch.nn.Linear, torch.nn.Embedding)))
    prompt = torch.randint(1, 2048, (1, 7), generator=torch.Generator().manual_seed(1))
    want = model.generate(prompt, max_new_tokens=6, do_sample=False)
    path = torch_webgpu.export_decoder(model, tmp_path / "int4", max_len=16, prompt_buckets=(8,))
    bundle = torch_webgpu.load(path)
    table = 'lm.model.embed_tokens.parametrizations.weight.original0|{"pack": "i4", "shape": [2048, 64]}'
    for phase in bundle.manifest["decoder"]["phases"].values():
        keys = [key for _, key, is_weight in phase["constants"] if is_weight]
        assert keys.count(table) == 2, keys   # the table's packed words serve the head too
    assert len({p.name.split(".")[0] for p in Path(path).rglob("*qembedding*.wgsl")}) == 2   # both phases
    assert bundle.generate(prompt[0].numpy(), 6).tolist() == want.tolist()


def test_export_web_writes_the_chat_page_of_a_decode_bundle(decoder_bundle, tmp_path, capsys):
    from torch_webgpu.cli.main import main
    from torch_webgpu.web import ASSETS

    site = tmp_path / "site"
    assert main(["export-web", str(decoder_bundle), str(site)]) == 0, capsys.readouterr().err
    assert (site / "index.html").read_bytes() == (ASSETS / "chat.html").read_bytes()
    assert (site / "chat.js").is_file() and (site / "bundle" / "manifest.json").is_file()
    assert not (site / "vendor").exists()   # no tokenizer: the page needs no npm package
    capsys.readouterr()
    assert main(["inspect", str(decoder_bundle)]) == 0
    assert "decode bundle: max_len 24, prompt buckets [4, 8]" in capsys.readouterr().out
