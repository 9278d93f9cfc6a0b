// The chat page of `torch-webgpu serve` / `export-web` for a decode bundle: loads the bundle named by
// config.json, streams the model's replies (chat template, plain text continuation, or token ids for a
// bundle without a tokenizer) with tokens/s of prefill and decode, sampling controls and a stop button.
import TorchWebGPU from "./torch-webgpu.js";

const $ = (id) => document.getElementById(id);
const page = { lm: null, messages: [], reply: "", abort: null, stats: null, last: null };
window.torchWebGPUChat = page;   // for scripts driving the page (tests, benchmarks)

function setState(state) { document.body.dataset.state = state; }

function showError(exc) {
  const box = $("error");
  box.hidden = false;
  box.textContent = `${exc.name || "Error"}: ${exc.message || exc}`;
  box.dataset.errorName = exc.name || "Error";
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = `message ${role}`;
  const who = document.createElement("span");
  who.className = "role";
  who.textContent = role;
  const body = document.createElement("span");
  body.className = "text";
  body.textContent = text;
  div.append(who, body);
  $("messages").append(div);
  div.scrollIntoView({ block: "end" });
  return body;
}

function renderInfo(lm, loadMs) {
  const info = lm.device.adapterInfo || {};
  const tok = lm.tokenizer;
  const rows = [
    ["model", `${lm.manifest.decoder.architecture || lm.manifest.source || "?"}, vocabulary ${lm.vocabSize}`],
    ["KV cache", `max_len ${lm.maxLen} (prompt + new tokens); prefill buckets ${lm.buckets.join(", ")}`],
    ["compiled for", `${lm.manifest.target?.name ?? "?"}${lm.manifest.target?.f16 ? " (f16)" : ""}; ` +
      `${(lm.deviceBytes / 2 ** 20).toFixed(1)} MiB on the device`],
    ["tokenizer", tok ? `yes, ${tok.chatTemplate ? "with" : "no"} chat template` : "none (token ids)"],
    ["adapter", [info.vendor, info.architecture, info.description].filter((s) => s).join(" ") || "?"],
    ["load (fetch, verify, weights, pipelines)", `${loadMs.toFixed(0)} ms`],
  ];
  $("info").replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    return [dt, dd];
  }));
}

/** The generation options of the controls. */
function options() {
  const number = (id) => Number($(id).value);
  return { maxNewTokens: number("max-new-tokens"), doSample: $("do-sample").checked, temperature: number("temperature"),
           topK: number("top-k"), topP: number("top-p"), seed: BigInt($("seed").value || 0) };
}

function showStats(stats) {
  const prefill = `prefill ${stats.promptTokens} tokens in ${stats.prefillMs.toFixed(0)} ms ` +
    `(${(stats.promptTokens / (stats.prefillMs / 1000)).toFixed(1)} tokens/s)`;
  const decode = stats.newTokens > 1
    ? `decode ${stats.newTokens - 1} tokens at ${((stats.newTokens - 1) / (stats.decodeMs / 1000)).toFixed(1)} tokens/s`
    : "decode: one token";
  $("stats").textContent = `${prefill} · ${decode}`;
  $("stats").dataset.prefillTokensPerS = String(stats.promptTokens / (stats.prefillMs / 1000));
  const decodeRate = stats.newTokens > 1 ? (stats.newTokens - 1) / (stats.decodeMs / 1000) : null;
  $("stats").dataset.decodeTokensPerS = decodeRate === null ? "" : String(decodeRate);
}

/**
 * The prompt of a message in the current mode: the chat so far through the template (the oldest turns left
 * out while it is longer than the largest prefill bucket, or leaves no room in the KV cache), the text, or
 * ids. Returns {ids, messages (what the template rendered), dropped (messages left out)}.
 */
function prompt(text) {
  const lm = page.lm;
  const mode = $("mode").value;
  if (mode === "ids") {
    const ids = text.split(/[\s,]+/).filter((s) => s).map(Number);
    if (!ids.length || ids.some((v) => !Number.isInteger(v))) throw new TypeError("give token ids: 1, 15043, 29892");
    return { ids, messages: null, dropped: 0 };
  }
  if (mode === "text") return { ids: lm.tokenizer.encode(text), messages: null, dropped: 0 };
  const messages = [...page.messages, { role: "user", content: text }];
  const limit = Math.min(lm.buckets[lm.buckets.length - 1], lm.maxLen - 1);
  let dropped = 0;
  for (;;) {
    const ids = lm.tokenizer.encode(lm.tokenizer.applyChatTemplate(messages), { addSpecialTokens: false });
    const first = messages[0].role === "system" ? 1 : 0;   // a system message stays
    if (ids.length <= limit || messages.length - first <= 1) return { ids, messages, dropped };
    const n = Math.min(2, messages.length - first - 1);      // the oldest turn: a user message and its reply
    messages.splice(first, n);
    dropped += n;
  }
}

/** A chat's message and its reply go into the conversation the next prompt renders. */
function remember(mode, text) {
  if (mode === "chat") page.messages.push({ role: "user", content: text }, { role: "assistant", content: page.reply });
}

/** Generates the reply to `text` (streamed into a new bubble); resolves with the reply's text. */
page.send = async (text) => {
  const lm = page.lm;
  const mode = $("mode").value;
  $("error").hidden = true;
  setState("generating");
  for (const b of ["send", "reset"]) $(b).disabled = true;
  $("stop").disabled = false;
  page.reply = "";
  page.abort = new AbortController();
  const opts = { ...options(), signal: page.abort.signal };
  let body = null;
  try {
    const { ids, messages, dropped } = prompt(text);
    // Never past the KV cache: the reply gets what max_len leaves after the prompt.
    opts.maxNewTokens = Math.min(opts.maxNewTokens, Math.max(lm.maxLen - ids.length, 0));
    page.last = { messages, dropped, maxNewTokens: opts.maxNewTokens, promptTokens: ids.length };
    bubble("user", text);
    body = bubble("assistant", "");
    body.classList.add("streaming");
    if (mode === "ids") {
      for await (const id of lm.generateIds(ids, opts)) {
        page.reply += `${page.reply ? " " : ""}${id}`;
        body.textContent = page.reply;
      }
    } else {
      for await (const piece of lm.generate(ids, opts)) { page.reply += piece; body.textContent = page.reply; }
    }
    remember(mode, text);
    setState("done");
  } catch (exc) {
    if (exc.name === "AbortError") {
      if (body) body.textContent = `${page.reply} [stopped]`;
      remember(mode, text);
      setState("stopped");
    } else {
      showError(exc);
      setState("error");
    }
  } finally {
    if (body) body.classList.remove("streaming");
    if (lm.stats && lm.stats.newTokens) {
      page.stats = lm.stats;
      showStats(lm.stats);
      if (page.last && page.last.dropped) {
        $("stats").textContent += ` · ${page.last.dropped} older messages left out (max_len ${lm.maxLen})`;
      }
    }
    page.abort = null;
    $("stop").disabled = true;
    for (const b of ["send", "reset"]) $(b).disabled = false;
  }
  return page.reply;
};

page.stop = () => { if (page.abort) page.abort.abort(); };

async function main() {
  try {
    const config = await (await fetch("config.json", { cache: "no-store" })).json();
    $("bundle-name").textContent = config.name || "";
    const start = performance.now();
    const lm = await TorchWebGPU.load(config.bundle, { name: config.name });
    if (!(lm instanceof TorchWebGPU.LanguageModel)) {
      throw new TypeError(`${config.name} is not a decode bundle: its page is the bundle page (index.html)`);
    }
    page.lm = lm;
    renderInfo(lm, performance.now() - start);
    const mode = $("mode");
    if (!lm.tokenizer) {
      mode.value = "ids";
      for (const option of mode.options) option.disabled = option.value !== "ids";
      $("prompt").placeholder = "Token ids, e.g. 1, 15043, 29892 (this bundle has no tokenizer)";
    } else if (!lm.tokenizer.chatTemplate) {
      mode.value = "text";
      mode.querySelector("option[value=chat]").disabled = true;
    }
    $("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const text = $("prompt").value;
      if (!text.trim() || page.abort) return;
      $("prompt").value = "";
      page.send(text);
    });
    $("prompt").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
    });
    $("stop").addEventListener("click", () => page.stop());
    $("reset").addEventListener("click", () => {
      page.messages = [];
      $("messages").replaceChildren();
      $("stats").textContent = "";
    });
    for (const id of ["prompt", "send", "reset"]) $(id).disabled = false;
    setState("ready");
  } catch (exc) {
    showError(exc);
    setState("error");
  }
}

main();
