// The page of `torch-webgpu serve` / `export-web`: loads the bundle named by config.json, shows its
// signature, runs it on random or uploaded (.npy) inputs and shows the outputs and the time per call.
import TorchWebGPU from "./torch-webgpu.js";

const $ = (id) => document.getElementById(id);
const page = { model: null, inputs: [], lastOutputs: null, times: [] };
window.torchWebGPUPage = page;   // for scripts driving the page (tests, benchmarks)

function setState(state) { document.body.dataset.state = state; }

function showError(exc) {
  const box = $("error");
  box.hidden = false;
  box.textContent = `${exc.name || "Error"}: ${exc.message || exc}`;
  box.dataset.errorName = exc.name || "Error";
  setState("error");
}

const SHORT = { float32: "f32", float16: "f16", int64: "i64", int32: "i32", int16: "i16", int8: "i8",
                uint8: "ui8", bool: "i1" };
const typeString = (t) => [...t.shape.map((d) => (d === null ? "?" : d)), SHORT[t.dtype] || t.dtype].join("x");

function gaussian() {
  const u = 1 - Math.random(), v = Math.random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/** A random input for `spec`: standard normal floats, zeros for integers, random bools. */
function randomInput(spec) {
  const n = spec.shape.reduce((a, d) => a * (d === null ? 1 : d), 1);
  const shape = spec.shape.map((d) => (d === null ? 1 : d));
  switch (spec.dtype) {
    case "float32": return { data: Float32Array.from({ length: n }, gaussian), shape, dtype: spec.dtype };
    case "float16": {
      const data = typeof Float16Array !== "undefined" ? Float16Array.from({ length: n }, gaussian) : new Uint16Array(n);
      return { data, shape, dtype: spec.dtype };
    }
    case "int64": return { data: new BigInt64Array(n), shape, dtype: spec.dtype };
    case "bool": return { data: Uint8Array.from({ length: n }, () => (Math.random() < 0.5 ? 1 : 0)), shape, dtype: "bool" };
    default: {
      const Cls = { int32: Int32Array, int16: Int16Array, int8: Int8Array, uint8: Uint8Array }[spec.dtype];
      return { data: new Cls(n), shape, dtype: spec.dtype };
    }
  }
}

/** An image file as an input of shape [1, 3, H, W] or [3, H, W] (float32, RGB in [0, 1], resized to W x H). */
async function imageInput(spec, file) {
  const shape = spec.shape;
  const chw = shape.length === 4 && shape[0] === 1 ? shape.slice(1) : shape;
  if (spec.dtype !== "float32" || chw.length !== 3 || chw[0] !== 3 || chw.includes(null)) {
    throw new TypeError(`input ${spec.name} is ${typeString(spec)}: an image fills float32 inputs of shape ` +
                        "[1, 3, H, W] or [3, H, W]; give a .npy file instead");
  }
  const [, h, w] = chw;
  const bitmap = await createImageBitmap(file, { resizeWidth: w, resizeHeight: h, resizeQuality: "high",
                                                 colorSpaceConversion: "none", premultiplyAlpha: "none" });
  const canvas = new OffscreenCanvas(w, h);
  const context = canvas.getContext("2d");
  context.drawImage(bitmap, 0, 0);
  const rgba = context.getImageData(0, 0, w, h).data;
  const data = new Float32Array(3 * h * w);
  for (let c = 0; c < 3; c++) {
    for (let i = 0; i < h * w; i++) data[c * h * w + i] = rgba[4 * i + c] / 255;
  }
  return { data, shape: shape.slice(), dtype: "float32" };
}

function describe(value) {
  const v = Array.from(value.data, Number);
  const finite = v.filter(Number.isFinite);
  const mean = finite.reduce((a, b) => a + b, 0) / Math.max(finite.length, 1);
  const fmt = (x) => (Number.isInteger(x) ? String(x) : x.toPrecision(5));
  const head = v.slice(0, 24).map(fmt).join(", ") + (v.length > 24 ? `, … (${v.length} values)` : "");
  const stats = finite.length ? `min ${fmt(Math.min(...finite))}  max ${fmt(Math.max(...finite))}  mean ${fmt(mean)}` : "";
  return `${typeString(value)}  ${stats}\n[${head}]`;
}

function renderInfo(model, loadMs) {
  const m = model.manifest;
  const info = model.device.adapterInfo || {};
  const rows = [
    ["signature", model.signature],
    ["source", m.source || "?"],
    ["target", `${m.target?.name ?? "?"}${m.target?.f16 ? " (f16)" : ""}`],
    ["dispatches per call", String(m.dispatches)],
    ["requires features", (m.requires.features || []).join(", ") || "none"],
    ["producer", Object.entries(m.producer || {}).map(([k, v]) => `${k} ${v}`).join(", ")],
    ["adapter", [info.vendor, info.architecture, info.description].filter((s) => s).join(" ") || "?"],
    ["load (fetch, verify, pipelines)", `${loadMs.toFixed(1)} ms`],
  ];
  $("info").replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    if (k === "signature") dd.id = "signature";
    return [dt, dd];
  }));
}

function renderInputs(model) {
  const body = $("inputs").querySelector("tbody");
  body.replaceChildren(...model.inputs.map((spec, k) => {
    const tr = document.createElement("tr");
    const name = document.createElement("td"); name.textContent = spec.name; name.className = "mono";
    const type = document.createElement("td"); type.textContent = typeString(spec); type.className = "mono";
    const value = document.createElement("td");
    const file = document.createElement("input");
    file.type = "file"; file.accept = ".npy,image/*"; file.id = `input-file-${k}`;
    const note = document.createElement("span"); note.className = "hint"; note.id = `input-note-${k}`;
    note.textContent = " random";
    file.addEventListener("change", async () => {
      if (!file.files.length) return;
      try {
        const chosen = file.files[0];
        page.inputs[k] = chosen.type.startsWith("image/") ? await imageInput(spec, chosen)
          : TorchWebGPU.parseNpy(await chosen.arrayBuffer());
        note.textContent = ` ${file.files[0].name}: ${typeString(page.inputs[k])}`;
      } catch (exc) {
        showError(exc);
      }
    });
    value.append(file, note);
    tr.append(name, type, value);
    return tr;
  }));
}

function renderOutputs(outputs) {
  $("outputs").replaceChildren(...outputs.map((out, k) => {
    const div = document.createElement("div"); div.className = "output";
    const title = document.createElement("strong");
    title.textContent = model().outputs[k]?.name || `output${k}`;
    const pre = document.createElement("pre"); pre.id = `output-${k}`;
    pre.textContent = out === null ? "None" : typeof out !== "object" ? String(out) : describe(out);
    div.append(title, pre);
    return div;
  }));
}

const model = () => page.model;

async function runOnce() {
  $("error").hidden = true;
  const start = performance.now();
  const outputs = await model().run(page.inputs);
  const ms = performance.now() - start;
  page.lastOutputs = outputs;
  renderOutputs(outputs);
  return ms;
}

async function guarded(action) {
  for (const b of ["run", "bench", "reroll"]) $(b).disabled = true;
  try {
    await action();
    setState("ran");
  } catch (exc) {
    showError(exc);
  } finally {
    for (const b of ["run", "bench", "reroll"]) $(b).disabled = false;
  }
}

page.run = () => guarded(async () => {
  const ms = await runOnce();
  $("timing").textContent = `one call: ${ms.toFixed(2)} ms (upload, ${model().manifest.dispatches} dispatches, readback)`;
});

page.bench = (calls = 20) => guarded(async () => {
  await runOnce();   // warm-up
  const times = [];
  for (let i = 0; i < calls; i++) {
    const start = performance.now();
    await model().run(page.inputs);
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  page.times = times;
  const median = times[Math.floor(times.length / 2)];
  $("timing").textContent = `per call over ${calls} calls: median ${median.toFixed(2)} ms, ` +
    `min ${times[0].toFixed(2)} ms, max ${times[times.length - 1].toFixed(2)} ms`;
  $("timing").dataset.medianMs = String(median);
});

async function main() {
  try {
    const config = await (await fetch("config.json", { cache: "no-store" })).json();
    $("bundle-name").textContent = config.name || "";
    const start = performance.now();
    const options = {};
    if (config.weights) {   // a bundle with external weights: the server has them beside it
      const response = await fetch(config.weights, { cache: "no-store" });
      if (!response.ok) throw new Error(`${config.weights}: HTTP ${response.status}`);
      options.weights = await response.arrayBuffer();
    }
    page.model = await TorchWebGPU.load(config.bundle, { ...options, name: config.name });
    renderInfo(page.model, performance.now() - start);
    renderInputs(page.model);
    page.inputs = page.model.inputs.map(randomInput);
    $("run").addEventListener("click", () => page.run());
    $("bench").addEventListener("click", () => page.bench());
    $("reroll").addEventListener("click", () => {
      page.inputs = page.model.inputs.map(randomInput);
      page.model.inputs.forEach((_, k) => { $(`input-note-${k}`).textContent = " random"; $(`input-file-${k}`).value = ""; });
      page.run();
    });
    for (const b of ["run", "bench", "reroll"]) $(b).disabled = false;
    setState("ready");
    if (new URLSearchParams(location.search).has("run")) await page.run();
  } catch (exc) {
    showError(exc);
  }
}

main();
