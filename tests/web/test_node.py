"""torch-webgpu.js under Node with Dawn for Node (the npm package `webgpu`, here on Mesa's lavapipe): decode
bundles generate through torch_webgpu/web/node/generate.mjs what the Python loader generates (ids, text,
seeded sampling, float16), and the module agrees with the Python package where both hold the same rule
(the error texts, the memory slots the phases share)."""

import json
import subprocess

import pytest

import torch_webgpu
from tests.language_models import reference_generate
from torch_webgpu.bundle import messages
from torch_webgpu.web import ASSETS

pytestmark = pytest.mark.slow   # exports of the tiny language models

GENERATE = ASSETS / "node" / "generate.mjs"
LONG = "The quick brown fox"
NEW_TOKENS = 12


def _generate(node: str, bundle, *args: str) -> dict:
    proc = subprocess.run([node, str(GENERATE), str(bundle), *args, "--json"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _node_eval(node: str, script: str, stdin: str = "") -> object:
    """The JSON a module script prints (run where torch-webgpu.js and its packages are; `stdin` its input)."""
    proc = subprocess.run([node, "--input-type=module", "-e", script], cwd=ASSETS, capture_output=True,
                          text=True, timeout=600, input=stdin)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind, quant", [("llama", "f32"), ("qwen2", "int4")])
def test_node_generates_what_the_python_loader_generates(kind, quant, build_web_language_model, node):
    lm = build_web_language_model(kind, quant)
    ids = lm.tokenizer(LONG)["input_ids"]
    bundle = torch_webgpu.load(lm.path)
    try:
        prompt = ("--ids", ",".join(map(str, ids)), "--max-new-tokens", str(NEW_TOKENS))
        greedy = _generate(node, lm.path, *prompt)
        want = reference_generate(lm, ids, NEW_TOKENS)[len(ids):]
        assert greedy["ids"] == want == bundle.generate(ids, NEW_TOKENS)[0, len(ids):].tolist()
        assert greedy["runtime"] == "torch-webgpu.js" and greedy["decode_tokens_per_s"] > 0
        text = _generate(node, lm.path, "--prompt", LONG, "--max-new-tokens", str(NEW_TOKENS))
        assert text["text"] == bundle.generate(LONG, NEW_TOKENS)
        sampled = _generate(node, lm.path, *prompt, "--sample", "--temperature", "1.3", "--top-k", "40",
                            "--top-p", "0.9", "--seed", "7")
        python = bundle.generate(ids, NEW_TOKENS, do_sample=True, temperature=1.3, top_k=40, top_p=0.9,
                                 seed=7)
        assert sampled["ids"] == python[0, len(ids):].tolist() != want
        chat = _generate(node, lm.path, "--prompt", "Bonjour 你好", "--chat", "--max-new-tokens",
                         str(NEW_TOKENS))
        assert chat["text"] == bundle.chat([{"role": "user", "content": "Bonjour 你好"}], NEW_TOKENS)
    finally:
        bundle.release()


def test_node_runs_an_f16_bundle_as_the_python_loader(f16_language_bundle, node):
    bundle = torch_webgpu.load(f16_language_bundle)   # lavapipe offers shader-f16
    ids = bundle.tokenizer.encode("Hello")
    try:
        got = _generate(node, f16_language_bundle, "--ids", ",".join(map(str, ids)), "--max-new-tokens", "8",
                        "--ignore-eos")
        assert got["ids"] == bundle.generate(ids, 8, stop_at_eos=False)[0, len(ids):].tolist()
    finally:
        bundle.release()


def test_the_error_texts_are_the_loaders(node):
    js = _node_eval(node, "const T = await import('./torch-webgpu.js'); "
                          "console.log(JSON.stringify(T.MESSAGES));")
    python = {name: getattr(messages, name) for name in dir(messages) if name.isupper()}
    python.pop("MISSING_PACKAGE")   # a Python package's import
    assert js == python


def test_the_phases_share_the_python_executors_memory_slots(build_web_language_model, node):
    from torch_webgpu.plan.format import Plan
    from torch_webgpu.plan.memory import assign_memory, shared_slot_sizes

    lm = build_web_language_model("llama", "f32")
    manifest = json.loads((lm.path / "manifest.json").read_text())
    phases = manifest["decoder"]["phases"]
    docs = json.dumps({name: phase["plan"] for name, phase in phases.items()})
    js = _node_eval(node, """
        const T = await import('./torch-webgpu.js');
        let text = '';
        for await (const chunk of process.stdin) text += chunk;
        const phases = JSON.parse(text);
        const out = {};
        for (const [name, doc] of Object.entries(phases)) {
          const {plan, slots} = T.assignMemory(doc);
          out[name] = {buffers: plan.buffers, main: plan.main, slots: Object.fromEntries(slots)};
        }
        out.shared = Object.fromEntries(T.sharedSlotSizes(Object.values(phases)));
        console.log(JSON.stringify(out));""", stdin=docs)
    plans = {}
    for name, phase in phases.items():
        plan = Plan.from_doc(json.loads(json.dumps(phase["plan"])), lm.path)
        assigned, report = assign_memory(plan)
        plans[name] = plan
        assert report.slots, name
        assert js[name]["slots"] == report.slots and js[name]["buffers"] == assigned.buffers, name
        assert js[name]["main"] == [n.to_json() for n in assigned.main], name
    assert js["shared"] == shared_slot_sizes(list(plans.values()))
