#!/usr/bin/env node
// Generate with a decode bundle under Node through torch-webgpu.js and Dawn for Node (the npm package
// `webgpu`): the same module the page runs, on a machine without a browser (a GPU machine, CI).
//
//   node torch_webgpu/web/node/generate.mjs llama.bundle --prompt "Once upon a time" --max-new-tokens 32
//   node torch_webgpu/web/node/generate.mjs llama.bundle --ids 1,15043 --max-new-tokens 64 --repeat 3 --json
//
// Prints the text as it streams (or the ids of a bundle without a tokenizer) and, on stderr, tokens/s of
// prefill and decode; --json prints one JSON object instead (the benchmarks read it).
import { parseArgs } from "node:util";

import * as TorchWebGPU from "../torch-webgpu.js";

const USAGE = `usage: generate.mjs BUNDLE (--prompt TEXT | --ids 1,2,3) [--chat] [--max-new-tokens N]
  [--sample] [--temperature T] [--top-k K] [--top-p P] [--seed S] [--ignore-eos] [--repeat R] [--json]
BUNDLE: a decode bundle directory or .zip (torch-webgpu compile --decoder, torch_webgpu.export_decoder).
--chat: the prompt is a user message, through the bundle's chat template. --repeat R: R timed generations
after one warm-up (pipelines, first uploads). TORCH_WEBGPU_DAWN_TOGGLES=0|1|fast: Dawn's instance toggles
as the Python runtime sets them (default 1: NVIDIA's shader-f16 and unquantised timestamps);
TORCH_WEBGPU_SUBGROUP_SIZE=N: the adapter's one subgroup size, as the Python runtime takes it.`;

// Dawn instance toggles, as torch_webgpu/runtime/adapter.py sets them for the Python runtime.
const TOGGLES = {
  "0": [],
  "1": ["enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia",
        "disable-dawn-features=timestamp_quantization"],
  fast: ["enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia,disable_robustness",
         "disable-dawn-features=timestamp_quantization,lazy_clear_resource_on_first_use"],
};

function fail(message) {
  process.stderr.write(`generate.mjs: ${message}\n`);
  process.exit(2);
}

function options() {
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals: true,
      options: {
        prompt: { type: "string" }, ids: { type: "string" }, chat: { type: "boolean", default: false },
        "max-new-tokens": { type: "string" }, sample: { type: "boolean", default: false },
        temperature: { type: "string", default: "1.0" }, "top-k": { type: "string", default: "0" },
        "top-p": { type: "string", default: "1.0" }, seed: { type: "string", default: "0" },
        "ignore-eos": { type: "boolean", default: false }, repeat: { type: "string", default: "0" },
        json: { type: "boolean", default: false }, help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (exc) {
    fail(`${exc.message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help) { process.stdout.write(`${USAGE}\n`); process.exit(0); }
  if (positionals.length !== 1) fail(`give one bundle\n${USAGE}`);
  if ((values.prompt === undefined) === (values.ids === undefined)) fail(`give --prompt TEXT or --ids 1,2,3\n${USAGE}`);
  const integer = (v) => parseInt(v, 10);
  const number = (name, parse = Number) => {
    const value = parse(values[name]);
    if (Number.isNaN(value)) fail(`--${name} ${values[name]} is not a number`);
    return value;
  };
  let prompt = values.prompt;
  if (values.ids !== undefined) {
    prompt = values.ids.split(",").filter((s) => s.trim()).map(Number);
    if (prompt.some((v) => !Number.isInteger(v))) fail(`--ids ${values.ids}: comma-separated token ids`);
  }
  return {
    bundle: positionals[0], prompt, chat: values.chat, json: values.json, repeat: number("repeat", integer),
    generation: {
      maxNewTokens: values["max-new-tokens"] === undefined ? null : number("max-new-tokens", integer),
      doSample: values.sample, temperature: number("temperature"), topK: number("top-k", integer), topP: number("top-p"),
      seed: BigInt(values.seed), stopAtEos: !values["ignore-eos"],
    },
  };
}

/** One generation: its ids, text (when the bundle has a tokenizer) and the model's figures. */
async function generateOnce(lm, args, write) {
  const ids = [];
  const pieces = [];
  let prompt = args.prompt;
  if (args.chat) {
    if (typeof prompt !== "string") fail("--chat takes --prompt TEXT");
    const tokenizer = lm._textTokenizer();
    const text = tokenizer.applyChatTemplate([{ role: "user", content: prompt }]);
    prompt = tokenizer.encode(text, { addSpecialTokens: false });
  }
  if (lm.tokenizer) {
    // Text streams through generate; the ids come from the same run.
    for await (const piece of lm.generate(prompt, args.generation)) { pieces.push(piece); write(piece); }
    const stats = lm.stats;
    return { text: pieces.join(""), ids: stats.ids, stats };
  }
  for await (const id of lm.generateIds(prompt, args.generation)) { ids.push(id); write(`${id} `); }
  return { ids, stats: lm.stats };
}

function rates(stats) {
  return {
    prompt_tokens: stats.promptTokens, bucket: stats.bucket, new_tokens: stats.newTokens,
    prefill_ms: stats.prefillMs, decode_ms: stats.decodeMs,
    prefill_tokens_per_s: stats.promptTokens / (stats.prefillMs / 1000),
    decode_tokens_per_s: stats.newTokens > 1 ? (stats.newTokens - 1) / (stats.decodeMs / 1000) : null,
    decode_ms_per_step: stats.newTokens > 1 ? stats.decodeMs / (stats.newTokens - 1) : null,
    decode_host_ms_per_step: stats.newTokens > 1 ? stats.decodeHostMs / (stats.newTokens - 1) : null,
  };
}

async function main() {
  const args = options();
  const toggles = TOGGLES[process.env.TORCH_WEBGPU_DAWN_TOGGLES ?? "1"];
  if (!toggles) fail(`TORCH_WEBGPU_DAWN_TOGGLES=${process.env.TORCH_WEBGPU_DAWN_TOGGLES}: expected 0, 1 or fast`);
  let webgpu;
  try {
    webgpu = await import("webgpu");
  } catch (exc) {
    fail(`the npm package webgpu (Dawn for Node) did not load (${exc.message}); run \`npm ci\` in torch_webgpu/web`);
  }
  Object.assign(globalThis, webgpu.globals);
  const gpu = webgpu.create(toggles);
  const start = performance.now();
  let lm;
  try {
    const options = { gpu, adapterOptions: { powerPreference: "high-performance" } };
    const subgroupSize = process.env.TORCH_WEBGPU_SUBGROUP_SIZE;   // as the Python runtime reads it
    if (subgroupSize) options.subgroupSize = Number(subgroupSize);
    lm = await TorchWebGPU.load(args.bundle, options);
  } catch (exc) {
    fail(`${exc.name}: ${exc.message}`);
  }
  const loadMs = performance.now() - start;
  if (!(lm instanceof TorchWebGPU.LanguageModel)) {
    fail(`${args.bundle} is not a decode bundle (compile it with --decoder)`);
  }
  const info = lm.device.adapterInfo || {};
  const adapter = [info.vendor, info.architecture, info.device, info.description].filter((s) => s).join(" ");
  const runs = [];
  let first;
  try {
    const quiet = () => {};
    first = await generateOnce(lm, args, args.json || args.repeat ? quiet : (s) => process.stdout.write(s));
    for (let r = 0; r < args.repeat; r++) runs.push(rates((await generateOnce(lm, args, quiet)).stats));
  } catch (exc) {
    fail(`${exc.name}: ${exc.message}`);
  }
  if (!runs.length) runs.push(rates(first.stats));
  const median = (key) => {
    const values = runs.map((r) => r[key]).filter((v) => v !== null).sort((a, b) => a - b);
    return values.length ? values[Math.floor(values.length / 2)] : null;
  };
  const keys = ["prefill_tokens_per_s", "decode_tokens_per_s", "prefill_ms", "decode_ms_per_step",
                "decode_host_ms_per_step"];
  const summary = Object.fromEntries(keys.map((key) => [key, median(key)]));
  if (args.json) {
    const host = `node ${process.version}`;
    process.stdout.write(JSON.stringify({ bundle: args.bundle, runtime: "torch-webgpu.js", host, adapter,
                                          load_ms: loadMs, ids: first.ids, text: first.text ?? null, runs,
                                          ...summary }) + "\n");
  } else {
    if (args.repeat) process.stdout.write(first.text ?? first.ids.join(" "));
    const decode = summary.decode_tokens_per_s === null ? "n/a" : summary.decode_tokens_per_s.toFixed(1);
    process.stderr.write(`\n[${adapter}] load ${loadMs.toFixed(0)} ms; prefill ${runs[0].prompt_tokens} tokens ` +
                         `${summary.prefill_ms.toFixed(1)} ms (${summary.prefill_tokens_per_s.toFixed(1)} tokens/s); ` +
                         `decode ${decode} tokens/s\n`);
  }
  lm.release();
}

await main();
