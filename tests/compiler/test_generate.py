"""`generate()` the way transformers documents it for torch.compile (issue 14): a static KV cache on the
webgpu device, `model.forward = torch.compile(model.forward, backend="webgpu")`, one plan for prefill
and one for decode, and greedy tokens equal to the CPU's."""

import pytest
import torch
import transformers

import torch_webgpu
from torch_webgpu.compiler.webgpu_compiler import STATS

CONFIGS = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(hidden_size=64, intermediate_size=128,
                                                       num_hidden_layers=2, num_attention_heads=4,
                                                       num_key_value_heads=2)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(hidden_size=64, intermediate_size=128,
                                                       num_hidden_layers=2, num_attention_heads=4,
                                                       num_key_value_heads=2)),
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_embd=64, n_layer=2, n_head=4)),
}


def _compiled(name: str = "llama", max_new_tokens: int = 4):
    """The tiny model `name` of CONFIGS on webgpu with a static cache and a compiled forward, a prompt
    on webgpu, and the CPU's greedy continuation of it (`max_new_tokens`)."""
    model_cls, config_cls, kwargs = CONFIGS[name]
    config = getattr(transformers, config_cls)(vocab_size=256, max_position_embeddings=128, **kwargs)
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(config).eval()
    model.generation_config.pad_token_id = 0
    prompt = torch.randint(1, 256, (1, 7), generator=torch.Generator().manual_seed(1))
    cpu_greedy = model.generate(prompt, max_new_tokens=max_new_tokens, do_sample=False)
    model = model.to("webgpu")
    model.generation_config.cache_implementation = "static"
    model.forward = torch.compile(model.forward, backend="webgpu")
    return model, prompt.to("webgpu"), cpu_greedy


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_static_cache_greedy_generate_matches_cpu(name):
    model, prompt, want = _compiled(name, max_new_tokens=5)
    graphs = STATS.graphs
    got = model.generate(prompt, max_new_tokens=5, do_sample=False)
    assert got.device.type == "webgpu"
    assert got.cpu().tolist() == want.tolist()
    assert STATS.graphs - graphs <= 2          # one prefill plan, one decode plan reused per token
    again = model.generate(prompt, max_new_tokens=5, do_sample=False)
    assert again.cpu().tolist() == want.tolist() and STATS.graphs - graphs <= 2
    assert torch_webgpu.fallback_stats() == {}


@pytest.mark.slow
def test_sampled_generate_runs_on_the_device(monkeypatch):
    """do_sample with temperature/top-k/top-p: the draw (torch.multinomial) runs on the device, top_k=1
    gives the greedy tokens, and a seed repeats the sample."""
    monkeypatch.setenv("TORCH_WEBGPU_FALLBACK", "0")
    torch_webgpu.reset_fallback_stats()
    model, prompt, cpu_greedy = _compiled()
    top1 = model.generate(prompt, max_new_tokens=4, do_sample=True, top_k=1, temperature=0.7)
    assert top1.cpu().tolist() == cpu_greedy.tolist()
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        runs.append(model.generate(prompt, max_new_tokens=4, do_sample=True, top_k=50, top_p=0.9,
                                   temperature=1.5).cpu().tolist())
    assert runs[0] == runs[1] and runs[0][0][:7] == prompt.cpu().tolist()[0]
    assert torch_webgpu.fallback_stats() == {}
