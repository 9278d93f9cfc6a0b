// torch-webgpu.js: runs torch-webgpu bundles (manifest.json + one .wgsl per executable + safetensors
// weights) in a browser or any JavaScript host with WebGPU (Node: the npm package `webgpu`). Decode bundles
// (language models) generate text; their tokenizer and chat template run on @huggingface/tokenizers and
// @huggingface/jinja, imported only for a bundle that has a tokenizer.
//
// The bundle's low-IR plan is this module's only contract with the compiler: it executes the plan's
// nodes (allocate, free, upload, dispatch, copy, fill, barrier, output) exactly as the Python executor
// (torch_webgpu/plan/) does, and checks bundles as the Python loader
// (torch_webgpu/bundle/) does, with the same error messages.
//
//   import * as TorchWebGPU from "./torch-webgpu.js";
//   const model = await TorchWebGPU.load("mlp.bundle/");
//   const [y] = await model.run([new Float32Array(64)]);   // y = {data, shape, dtype}
//
//   const lm = await TorchWebGPU.load("llama.bundle/");     // a decode bundle: a LanguageModel
//   for await (const piece of lm.generate("Once upon a time", {maxNewTokens: 32})) show(piece);

export const BUNDLE_FORMAT = "torch-webgpu-bundle";
export const BUNDLE_FORMAT_VERSION = 1;
export const PLAN_FORMAT_VERSION = 1;
export const VERSION = "0.1.0";
const MANIFEST = "manifest.json";
const SELF_HASH_KEY = "manifest_sha256";
const ALIGN = 256;          // readback offsets of the outputs of one call
const SCALAR = "index";     // device dtype of a host scalar input (a symbolic int): no buffer
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const WORKGROUP_FOLD_OVERRIDE = "torch_webgpu_fold_x";

// -- errors (the Python loader's classes, torch_webgpu/bundle/format.py) --------------------------------

/** A bundle that cannot be read or run. */
export class BundleError extends Error {
  constructor(message) { super(message); this.name = "BundleError"; }
}
/** Not a bundle, or a format version this torch-webgpu cannot read. */
export class BundleFormatError extends BundleError {
  constructor(message) { super(message); this.name = "BundleFormatError"; }
}
/** A file of the bundle (or its manifest) does not match its recorded sha256: corrupted or edited. */
export class BundleIntegrityError extends BundleError {
  constructor(message) { super(message); this.name = "BundleIntegrityError"; }
}
/** The adapter lacks a feature or limit the bundle requires. */
export class BundleRequirementError extends BundleError {
  constructor(message) { super(message); this.name = "BundleRequirementError"; }
}
/** Inputs that do not match the bundle's signature (count, shape or dtype). */
export class BundleSignatureError extends BundleError {
  constructor(message) { super(message); this.name = "BundleSignatureError"; }
}

// -- dtypes ---------------------------------------------------------------------------------------------

const ITEMSIZE = { float32: 4, float16: 2, int32: 4, int16: 2, int8: 1, uint8: 1, bool: 1, int64: 8,
                   uint32: 4, uint16: 2, float64: 8 };
const HAS_F16 = typeof Float16Array !== "undefined";

function typedArrayClass(dtype) {
  switch (dtype) {
    case "float32": return Float32Array;
    case "float16": return HAS_F16 ? Float16Array : Uint16Array;
    case "int32": return Int32Array;
    case "int16": return Int16Array;
    case "int8": return Int8Array;
    case "uint8": case "bool": return Uint8Array;
    case "int64": return BigInt64Array;
    case "uint32": return Uint32Array;
    case "uint16": return Uint16Array;
    case "float64": return Float64Array;
    default: throw new BundleFormatError(`dtype ${dtype} has no typed array`);
  }
}

/** The dtypes a typed array may stand for (Uint8Array: uint8 or bool; Uint16Array: raw float16 bits). */
function typedArrayDtypes(data) {
  if (data instanceof Float32Array) return ["float32"];
  if (HAS_F16 && data instanceof Float16Array) return ["float16"];
  if (data instanceof Int32Array) return ["int32"];
  if (data instanceof BigInt64Array) return ["int64"];
  if (data instanceof Uint8Array) return ["uint8", "bool"];
  if (data instanceof Int8Array) return ["int8"];
  if (data instanceof Int16Array) return ["int16"];
  if (data instanceof Uint16Array) return ["float16", "uint16"];
  if (data instanceof Uint32Array) return ["uint32"];
  if (data instanceof Float64Array) return ["float64"];
  if (data instanceof BigUint64Array) return ["uint64"];
  return null;
}

function product(shape) {
  let n = 1;
  for (const d of shape) n *= Number(d);
  return n;
}

const alignUp = (n, a) => Math.ceil(n / a) * a;

// Python's repr of a shape list: [4, 16], [] and None for a dynamic dim.
const shapeText = (shape) => `[${shape.map((d) => (d === null ? "None" : String(d))).join(", ")}]`;

/** `(x: float32[4, 16]) -> (float32[4, 8])`, as torch_webgpu.bundle.loader.format_signature. */
export function formatSignature(inputs, outputs) {
  const ins = inputs.map((t) => `${t.name}: ${t.dtype}${shapeText(t.shape)}`).join(", ");
  const outs = outputs.map((t) => `${t.dtype}${shapeText(t.shape)}`).join(", ");
  return `(${ins}) -> (${outs})`;
}

// -- sha256 and the manifest's canonical form --------------------------------------------------------------

async function sha256Hex(bytes) {
  let subtle = globalThis.crypto && globalThis.crypto.subtle;
  if (!subtle && isNode()) subtle = (await import("node:crypto")).webcrypto.subtle;   // Node 18: not global
  if (!subtle) {
    throw new BundleError("crypto.subtle is unavailable (pages must be a secure context: https or " +
                          "localhost); it is needed to verify the bundle's sha256 hashes");
  }
  const digest = new Uint8Array(await subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

// Python's json.dumps(ensure_ascii=True) escaping of a string.
function pyString(s) {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c === 0x08) out += "\\b";
    else if (c === 0x0c) out += "\\f";
    else if (c < 0x20 || c > 0x7e) out += "\\u" + c.toString(16).padStart(4, "0");
    else out += s[i];
  }
  return out + '"';
}

function compareCodePoints(a, b) {
  const x = Array.from(a), y = Array.from(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d) return d;
  }
  return x.length - y.length;
}

/**
 * The manifest text as Python's `json.dumps(body, sort_keys=True, separators=(",", ":"))` writes it
 * without its self-hash key: the bytes the manifest's sha256 covers. Numbers keep their literal text
 * (JSON.parse would turn Python's `1.0` into `1`).
 */
export function canonicalManifest(text) {
  let i = 0;
  const ws = () => { while (i < text.length && " \t\n\r".includes(text[i])) i++; };
  const fail = (what) => { throw new SyntaxError(`${what} at position ${i}`); };
  function string() {
    const start = i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    if (i >= text.length) fail("unterminated string");
    i++;
    return JSON.parse(text.slice(start, i));
  }
  function value() {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const entries = [];
      ws();
      if (text[i] === "}") { i++; return { entries }; }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a key");
        const key = string();
        ws();
        if (text[i++] !== ":") fail("expected ':'");
        entries.push([key, value()]);
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i++] !== "}") fail("expected ',' or '}'");
        return { entries };
      }
    }
    if (c === "[") {
      i++;
      const items = [];
      ws();
      if (text[i] === "]") { i++; return { items }; }
      for (;;) {
        items.push(value());
        ws();
        if (text[i] === ",") { i++; continue; }
        if (text[i++] !== "]") fail("expected ',' or ']'");
        return { items };
      }
    }
    if (c === '"') return { str: string() };
    const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null|NaN|-?Infinity)/.exec(text.slice(i, i + 400));
    if (!m) fail("unexpected token");
    i += m[0].length;
    return { raw: m[0] };
  }
  function dump(v) {
    if (v.entries) {
      const seen = new Map(v.entries);   // a repeated key: the last one wins, as in Python
      const keys = [...seen.keys()].sort(compareCodePoints);
      return "{" + keys.map((k) => pyString(k) + ":" + dump(seen.get(k))).join(",") + "}";
    }
    if (v.items) return "[" + v.items.map(dump).join(",") + "]";
    if (v.str !== undefined) return pyString(v.str);
    return v.raw;
  }
  const root = value();
  ws();
  if (i !== text.length) fail("extra data");
  if (root.entries) root.entries = root.entries.filter(([k]) => k !== SELF_HASH_KEY);
  return dump(root);
}

// -- safetensors -----------------------------------------------------------------------------------------

const SAFETENSORS_DTYPES = { F32: "float32", F16: "float16", I32: "int32", I16: "int16", I8: "int8",
                             U8: "uint8", BOOL: "bool", I64: "int64", F64: "float64", U32: "uint32",
                             U16: "uint16" };

/**
 * The tensors of a safetensors file: name -> {dtype, shape, bytes} (`bytes` is a view into `buffer`).
 * The format: an 8-byte little-endian header length, a JSON header, then the raw data.
 */
export function parseSafetensors(buffer, where = "safetensors") {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  if (bytes.byteLength < 8) throw new BundleFormatError(`${where}: too short for a safetensors file`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const headerLength = Number(view.getBigUint64(0, true));
  if (8 + headerLength > bytes.byteLength) {
    throw new BundleFormatError(`${where}: header of ${headerLength} bytes runs past the file's end`);
  }
  let header;
  try {
    header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
  } catch (exc) {
    throw new BundleFormatError(`${where}: the safetensors header is not valid JSON (${exc.message})`);
  }
  const start = 8 + headerLength;
  const tensors = new Map();
  for (const [name, info] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    const dtype = SAFETENSORS_DTYPES[info.dtype];
    if (!dtype) throw new BundleFormatError(`${where}: tensor ${name} has dtype ${info.dtype}, not supported`);
    const [begin, end] = info.data_offsets;
    const expected = product(info.shape) * ITEMSIZE[dtype];
    if (end - begin !== expected || start + end > bytes.byteLength || begin < 0) {
      throw new BundleFormatError(`${where}: tensor ${name} (${dtype}${shapeText(info.shape)}) has ` +
                                  `data_offsets [${begin}, ${end}], inconsistent with its shape or the file`);
    }
    tensors.set(name, { dtype, shape: info.shape, bytes: bytes.subarray(start + begin, start + end) });
  }
  return tensors;
}

/** A typed array of a tensor's bytes (copied to an aligned buffer when the view is not aligned). */
export function tensorData(tensor) {
  const Cls = typedArrayClass(tensor.dtype);
  const b = tensor.bytes;
  if (b.byteOffset % Cls.BYTES_PER_ELEMENT === 0) {
    return new Cls(b.buffer, b.byteOffset, b.byteLength / Cls.BYTES_PER_ELEMENT);
  }
  return new Cls(b.slice().buffer);
}

// -- host index expressions (torch_webgpu/plan/host_expr.py) -------------------------------------------

const floorDiv = (a, b) => Math.floor(a / b);
const ceilDiv = (a, b) => -Math.floor(-a / b);
const truncDiv = (a, b) => Math.trunc(a / b);
const big = (f) => (a, b) => Number(f(BigInt(a), BigInt(b)));
const BINARY = {
  addi: (a, b) => a + b, subi: (a, b) => a - b, muli: (a, b) => a * b,
  divui: floorDiv, divsi: truncDiv, floordivsi: floorDiv, ceildivui: ceilDiv, ceildivsi: ceilDiv,
  remui: (a, b) => a - b * floorDiv(a, b), remsi: (a, b) => a - b * truncDiv(a, b),
  minsi: Math.min, minui: Math.min, maxsi: Math.max, maxui: Math.max,
  andi: big((a, b) => a & b), ori: big((a, b) => a | b), xori: big((a, b) => a ^ b),
  shli: big((a, b) => a << b), shrui: big((a, b) => a >> b), shrsi: big((a, b) => a >> b),
  align: (a, b) => ceilDiv(a, b) * b,
};
const UNARY = {
  index_castui: (a) => a, index_cast: (a) => a, extui: (a) => a, extsi: (a) => a,
  trunci: (a) => Number(BigInt.asUintN(32, BigInt(a))),
};
const COMPARE = {
  eq: (a, b) => a === b, ne: (a, b) => a !== b, slt: (a, b) => a < b, sle: (a, b) => a <= b,
  sgt: (a, b) => a > b, sge: (a, b) => a >= b, ult: (a, b) => a < b, ule: (a, b) => a <= b,
  ugt: (a, b) => a > b, uge: (a, b) => a >= b,
};

function supportedOp(op) {
  return op in BINARY || op in UNARY || op === "select" || (op.startsWith("cmp.") && op.slice(4) in COMPARE);
}

const isExpression = (v) => Array.isArray(v) && v.length > 0 && typeof v[0] === "string" &&
  (v[0] === "dim" || supportedOp(v[0]));

/** The value of a host index expression (an int, or `["dim", input, axis]`, `["muli", a, b]`, ...). */
export function evaluate(value, shapes) {
  if (typeof value === "number") return value;
  if (!isExpression(value)) throw new BundleFormatError(`unknown host index expression ${JSON.stringify(value)}`);
  const [op, ...operands] = value;
  if (op === "dim") return Number(shapes[operands[0]][operands[1]]);
  const args = operands.map((a) => evaluate(a, shapes));
  if (op in BINARY) return BINARY[op](args[0], args[1]);
  if (op in UNARY) return UNARY[op](args[0]);
  if (op === "select") return args[0] ? args[1] : args[2];
  return COMPARE[op.slice(4)](args[0], args[1]) ? 1 : 0;
}

/** A JSON-like value with every host expression in it evaluated. */
export function evaluateAll(obj, shapes) {
  if (isExpression(obj)) return evaluate(obj, shapes);
  if (Array.isArray(obj)) return obj.map((v) => evaluateAll(v, shapes));
  if (obj !== null && typeof obj === "object") {
    return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, evaluateAll(v, shapes)]));
  }
  return obj;
}

function containsExpression(obj) {
  if (isExpression(obj)) return true;
  if (Array.isArray(obj)) return obj.some(containsExpression);
  if (obj !== null && typeof obj === "object") return Object.values(obj).some(containsExpression);
  return false;
}

// -- requirements (torch_webgpu/bundle/requirements.py) ------------------------------------------------

const camel = (name) => name.replace(/-([a-z0-9])/g, (_, c) => c.toUpperCase());

/** The adapter's (or device's) limits under the bundle's names: `max-buffer-size`, `subgroup-min-size`. */
export function limitsOf(gpu, info) {
  const out = {};
  for (const key in gpu.limits) {
    const value = gpu.limits[key];
    if (typeof value === "number") out[key.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())] = value;
  }
  info = info || gpu.info || gpu.adapterInfo;
  if (info && info.subgroupMinSize) {
    out["subgroup-min-size"] = info.subgroupMinSize;
    out["subgroup-max-size"] = info.subgroupMaxSize;
  }
  return out;
}

/** One line per requirement `limits`/`features` do not meet (empty: all met), as the Python `unmet`. */
export function unmet(requires, limits, features) {
  const problems = [];
  const have = new Set(features);
  const offered = [...have].sort().join(", ") || "none";
  for (const feature of requires.features || []) {
    if (!have.has(feature)) problems.push(`feature '${feature}' (the adapter offers: ${offered})`);
  }
  for (const [name, need] of Object.entries(requires.limits || {})) {
    if (!(name in limits)) {
      problems.push(`limit '${name}' (the adapter does not report it)`);
      continue;
    }
    const got = Number(limits[name]);
    if (name.startsWith("subgroup-")) {
      if (got !== need) {
        problems.push(`subgroup size ${need} (the adapter's ${name} is ${got}; compile with --target auto on it)`);
      }
    } else if (name.startsWith("min-")) {
      // Alignments: the device's must be at most, and divide, what the plan was laid out for.
      if (got > need || need % got) problems.push(`limit '${name}' = ${need} (the adapter requires ${got})`);
    } else if (got < need) {
      problems.push(`limit '${name}' >= ${need} (the adapter grants ${got})`);
    }
  }
  return problems;
}

/** Throws BundleRequirementError naming every feature or limit that `limits`/`features` lack. */
export function checkRequirements(requires, limits, features, what = "this adapter") {
  const problems = unmet(requires, limits, features);
  if (problems.length) {
    throw new BundleRequirementError(`the bundle needs what ${what} lacks: ` + problems.join("; "));
  }
}

function adapterName(info) {
  if (!info) return "unknown";
  return [info.vendor, info.architecture, info.device, info.description].filter((s) => s).join(" ") || "unknown";
}

// -- reading a bundle: a directory URL, a .zip URL or bytes ---------------------------------------------

async function fetchBytes(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (exc) {
    return { error: `cannot fetch ${url}: ${exc.message}` };
  }
  if (!response.ok) return { status: response.status, error: `${url}: HTTP ${response.status}` };
  return { bytes: new Uint8Array(await response.arrayBuffer()) };
}

async function inflateRaw(bytes) {
  if (typeof DecompressionStream === "undefined") {
    throw new BundleFormatError("this JavaScript host has no DecompressionStream to read a deflated .zip bundle; " +
                                "serve the bundle as a directory");
  }
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** The members of a .zip file (stored or deflated; no zip64): name -> bytes. */
export async function readZip(buffer, where = "zip") {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let end = -1;
  for (let i = bytes.byteLength - 22; i >= Math.max(0, bytes.byteLength - 22 - 65535); i--) {
    if (view.getUint32(i, true) === 0x06054b50) { end = i; break; }
  }
  if (end < 0) throw new BundleFormatError(`${where}: neither a bundle directory nor a .zip bundle`);
  const count = view.getUint16(end + 10, true);
  let p = view.getUint32(end + 16, true);
  const members = new Map();
  const decoder = new TextDecoder();
  for (let k = 0; k < count; k++) {
    if (view.getUint32(p, true) !== 0x02014b50) throw new BundleFormatError(`${where}: broken zip directory`);
    const method = view.getUint16(p + 10, true);
    const size = view.getUint32(p + 20, true);
    const nameLength = view.getUint16(p + 28, true);
    const extraLength = view.getUint16(p + 30, true);
    const commentLength = view.getUint16(p + 32, true);
    const local = view.getUint32(p + 42, true);
    const name = decoder.decode(bytes.subarray(p + 46, p + 46 + nameLength));
    p += 46 + nameLength + extraLength + commentLength;
    if (name.endsWith("/")) continue;
    const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true);
    const data = bytes.subarray(start, start + size);
    if (method !== 0 && method !== 8) throw new BundleFormatError(`${where}: ${name} uses zip compression method ${method}`);
    members.set(name, { method, data });
  }
  const out = new Map();
  for (const [name, v] of members) out.set(name, v.method === 8 ? await inflateRaw(v.data) : v.data);
  return out;
}

/** How to read a bundle's files: `where` names it in errors, `member(name)` gives bytes or null. */
async function openSource(source) {
  if (isNode() && (typeof source === "string" || source instanceof URL) && !/^https?:/i.test(String(source))) {
    return fileSource(source);
  }
  if (typeof source === "string" || source instanceof URL) {
    let url = String(source);
    const base = typeof location !== "undefined" ? location.href : undefined;
    try { url = new URL(url, base).href; } catch (_) { /* a relative URL without a page: fetch decides */ }
    if (/\.zip(\?|#|$)/i.test(url)) {
      const got = await fetchBytes(url);
      if (got.error) {
        if (got.status === 404) throw new BundleError(`no bundle at ${url}`);
        throw new BundleError(got.error);
      }
      return zipSource(url, got.bytes);
    }
    const dir = url.endsWith("/") ? url : url + "/";
    const where = url.replace(/\/+$/, "");
    return {
      where,
      name: url.replace(/\/+$/, "").split("/").pop(),
      async member(name) {
        const got = await fetchBytes(new URL(name, dir).href);
        if (got.status === 404) return null;
        if (got.error) throw new BundleError(got.error);
        return got.bytes;
      },
      missingManifest: `${where}: no ${MANIFEST}; not a torch-webgpu bundle`,
    };
  }
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    return zipSource(source.name || "bundle.zip", new Uint8Array(await source.arrayBuffer()));
  }
  if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const bytes = source instanceof ArrayBuffer ? new Uint8Array(source)
      : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return zipSource("bundle.zip", bytes);
  }
  if (source instanceof Map) {
    return { where: "bundle", name: "bundle", async member(name) { return source.get(name) || null; },
             missingManifest: `bundle: no ${MANIFEST}; not a torch-webgpu bundle` };
  }
  throw new TypeError("load() takes a bundle URL (a directory or .zip), a .zip File/Blob/ArrayBuffer, " +
                      "or a Map of file name -> bytes");
}

const isNode = () => typeof process !== "undefined" && Boolean(process.versions && process.versions.node);

/** A bundle directory or .zip on the local file system (Node: its fetch reads no file:// URLs). */
async function fileSource(source) {
  const [fs, path, url] = await Promise.all([import("node:fs/promises"), import("node:path"), import("node:url")]);
  // Errors name the path as given, as the Python loader's do.
  const given = source instanceof URL || String(source).startsWith("file:") ? url.fileURLToPath(source)
    : String(source);
  const where = given.length > 1 ? given.replace(/\/+$/, "") : given;
  const dir = path.resolve(where);
  let stat;
  try {
    stat = await fs.stat(dir);
  } catch (exc) {
    throw new BundleError(`no bundle at ${where}`);
  }
  if (stat.isFile()) return zipSource(where, new Uint8Array(await fs.readFile(dir)));
  return {
    where,
    name: path.basename(dir),
    async member(name) {
      try {
        return new Uint8Array(await fs.readFile(path.join(dir, name)));
      } catch (exc) {
        if (exc.code === "ENOENT") return null;
        throw new BundleError(`${path.join(where, name)}: ${exc.message}`);
      }
    },
    missingManifest: `${where}: no ${MANIFEST}; not a torch-webgpu bundle`,
  };
}

async function zipSource(where, bytes) {
  const members = await readZip(bytes, where);
  return { where, name: where.split("/").pop(), async member(name) { return members.get(name) || null; },
           missingManifest: `${where}: no ${MANIFEST} in the zip; not a torch-webgpu bundle` };
}

/** BundleFormatError unless `manifest` is a bundle manifest of a version this module reads. */
export function checkFormat(manifest, where = "bundle") {
  const repr = (v) => (v === undefined || v === null ? "None" : typeof v === "string" ? `'${v}'` : String(v));
  if (manifest.format !== BUNDLE_FORMAT) {
    throw new BundleFormatError(`${where}: format ${repr(manifest.format)} is not '${BUNDLE_FORMAT}'`);
  }
  if (manifest.format_version !== BUNDLE_FORMAT_VERSION) {
    throw new BundleFormatError(
      `${where}: bundle format version ${repr(manifest.format_version)} is not supported (this torch-webgpu ` +
      `reads version ${BUNDLE_FORMAT_VERSION}); re-export the model with this torch-webgpu, or use the version ` +
      "that wrote it");
  }
}

/** The verified manifest and files of a bundle (format version and every sha256 checked). */
export async function readBundle(source) {
  const src = await openSource(source);
  const where = src.where;
  const raw = await src.member(MANIFEST);
  if (raw === null) throw new BundleFormatError(src.missingManifest);
  const text = new TextDecoder().decode(raw);
  let manifest;
  try {
    manifest = JSON.parse(text);
  } catch (exc) {
    throw new BundleIntegrityError(`${where}: ${MANIFEST} is not valid JSON (${exc.message}); the bundle is corrupted`);
  }
  if (manifest === null || typeof manifest !== "object" || Array.isArray(manifest)) {
    throw new BundleFormatError(`${where}: ${MANIFEST} is not a JSON object`);
  }
  checkFormat(manifest, where);
  const recorded = manifest[SELF_HASH_KEY];
  const actual = await sha256Hex(new TextEncoder().encode(canonicalManifest(text)));
  if (recorded !== actual) {
    throw new BundleIntegrityError(`${where}: ${MANIFEST} hash mismatch (recorded ${recorded}); the manifest ` +
                                   "was edited or corrupted after export — re-export the bundle");
  }
  const names = Object.keys(manifest.files || {});
  for (const name of names) {
    if (name.includes("/") || name.includes("\\") || name === ".." || name === ".") {
      throw new BundleFormatError(`${where}: file name '${name}' is not a plain name`);
    }
  }
  const contents = await Promise.all(names.map((name) => src.member(name)));
  const files = new Map();
  for (let k = 0; k < names.length; k++) {
    const name = names[k], data = contents[k], digest = manifest.files[name];
    if (data === null) throw new BundleIntegrityError(`${where}: ${name} is missing from the bundle`);
    const got = await sha256Hex(data);
    if (got !== digest) {
      throw new BundleIntegrityError(`${where}: ${name} hash mismatch (sha256 ${got.slice(0, 16)}…, manifest ` +
                                     `says ${digest.slice(0, 16)}…); the file was edited or corrupted — re-export`);
    }
    files.set(name, data);
  }
  return { manifest, files, where, name: src.name };
}

// -- the plan ---------------------------------------------------------------------------------------------

/** The plan of a manifest with its WGSL and constants (Plan.from_doc of torch_webgpu/plan/format.py). */
function planFromDoc(doc, files, where) {
  if (doc.format !== PLAN_FORMAT_VERSION) {
    throw new BundleFormatError(`${where}: plan format ${doc.format} is not ${PLAN_FORMAT_VERSION}; recompile`);
  }
  const wgsl = new Map();
  for (const spec of Object.values(doc.executables)) {
    const bytes = files.get(spec.wgsl_file);
    if (!bytes) throw new BundleFormatError(`${where}: ${spec.wgsl_file} is not among the bundle's files`);
    wgsl.set(spec.wgsl_file, new TextDecoder().decode(bytes));
  }
  const constants = new Map();
  if (doc.constant_names.length) {
    const file = files.get("constants.safetensors");
    if (!file) throw new BundleFormatError(`${where}: constants.safetensors is not among the bundle's files`);
    const tensors = parseSafetensors(file, `${where}: constants.safetensors`);
    for (const name of doc.constant_names) {
      if (!tensors.has(name)) throw new BundleFormatError(`${where}: constant ${name} is not in constants.safetensors`);
      constants.set(name, tensors.get(name));
    }
  }
  return { ...doc, wgsl, constants };
}

function asTensor(value, name) {
  if (value && value.bytes instanceof Uint8Array && value.dtype) return value;   // parseSafetensors' form
  const data = ArrayBuffer.isView(value) ? value : value && value.data;
  const dtypes = data ? typedArrayDtypes(data) : null;
  if (!dtypes) throw new BundleSignatureError(`weight '${name}' is not a typed array or {data, shape, dtype}`);
  const shape = value.shape || [data.length];
  const dtype = value.dtype || dtypes[0];
  return { dtype, shape, bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** Puts the caller's weights into the plan's constants, in the order the compiled graph takes them. */
function bindExternalWeights(name, plan, external, weights) {
  const specs = external.weights;
  if (weights === undefined || weights === null) {
    throw new BundleSignatureError(
      `${name} was exported with external weights (${Object.keys(specs).length} tensors); pass them: ` +
      "load(url, {weights}) with a safetensors file (ArrayBuffer) or an object of name -> {data, shape, dtype}");
  }
  if (weights instanceof ArrayBuffer || ArrayBuffer.isView(weights)) weights = parseSafetensors(weights, "weights");
  const get = (key) => (weights instanceof Map ? weights.get(key) : weights[key]);
  const bound = new Map();
  for (const [constName, spec] of Object.entries(specs)) {
    const given = get(spec.name);
    if (given === undefined) {
      throw new BundleSignatureError(`${name} needs the weight '${spec.name}', missing in \`weights\``);
    }
    let tensor = asTensor(given, spec.name);
    if (spec.dtype === "int32" && tensor.dtype === "int64") {
      // The plan holds 64-bit integer weights as int32 (WebGPU has no 64-bit ints), range-checked.
      const wide = tensorData(tensor);
      const narrow = new Int32Array(wide.length);
      for (let i = 0; i < wide.length; i++) {
        if (wide[i] < BigInt(INT32_MIN) || wide[i] > BigInt(INT32_MAX)) {
          throw new BundleSignatureError(`weight '${spec.name}' has int64 values beyond int32`);
        }
        narrow[i] = Number(wide[i]);
      }
      tensor = { dtype: "int32", shape: tensor.shape, bytes: new Uint8Array(narrow.buffer) };
    }
    if (shapeText(tensor.shape) !== shapeText(spec.shape) || tensor.dtype !== spec.dtype) {
      throw new BundleSignatureError(
        `weight '${spec.name}' is ${tensor.dtype}${shapeText(tensor.shape)}, the bundle was compiled for ` +
        `${spec.dtype}${shapeText(spec.shape)}`);
    }
    bound.set(constName, tensor);
  }
  const constants = new Map();
  for (const constName of external.order) constants.set(constName, bound.get(constName) || plan.constants.get(constName));
  plan.constants = constants;
}

// -- per-call buffers sharing storage by liveness (torch_webgpu/compiler/plan_memory.py) ---------------------

const SLOT_PREFIX = "mem";
const GLOBAL_BUFFER = /^(.*_)?g\d+$/;   // IREE globals (they persist across calls), with a segment prefix

/** [buffer name, "r" | "w"] of every buffer a node touches, in binding order (plan_memory.node_uses). */
function nodeUses(node, plan) {
  switch (node.op) {
    case "dispatch": {
      const spec = plan.executables[node.entry_point];
      const readOnly = new Set();
      if (spec) {
        const wgslReadOnly = new Set(spec.read_only || []);
        for (const [wgsl, host] of Object.entries(spec.binding_map)) {
          if (wgslReadOnly.has(Number(wgsl))) readOnly.add(host);
        }
      }
      const uses = node.bindings.map((b, i) => [b[0], readOnly.has(i) ? "r" : "w"]);
      for (const variant of (node.tune && node.tune.variants) || []) {   // tunable: every variant's buffers too
        for (const step of [variant, ...(variant.then || [])]) for (const b of step.bindings) uses.push([b[0], "w"]);
      }
      return uses;
    }
    case "copy": return [[node.source, "r"], [node.buffer, "w"]];
    case "fill": case "upload": return [[node.buffer, "w"]];
    case "output": return "buffer" in node ? [[node.buffer, "r"]] : [];
    default: return [];
  }
}

/** The plan with buffers of disjoint live ranges renamed into shared slots `mem<k>`, and the slots
 *  (slot -> its buffers): plan_memory.assign_memory, name for name, so that the phases of a decode bundle
 *  can share them as the Python loader does. */
export function assignMemory(plan) {
  const ranges = new Map(), firstUse = new Map();
  const end = plan.main.length - 1;
  plan.main.forEach((node, i) => {
    for (const [name, kind] of nodeUses(node, plan)) {
      if (!ranges.has(name)) { ranges.set(name, [i, i]); firstUse.set(name, kind); } else ranges.get(name)[1] = i;
      if (node.op === "output") ranges.get(name)[1] = end;   // outputs live to the end of the call
    }
  });
  const inInit = new Set();
  for (const node of plan.init) {
    for (const [name] of nodeUses(node, plan)) inInit.add(name);
    if ("buffer" in node) inInit.add(node.buffer);
  }
  const candidates = Object.entries(plan.buffers).filter(([name, size]) =>
    typeof size === "number" && !GLOBAL_BUFFER.test(name) && !inInit.has(name) && ranges.has(name) &&
    firstUse.get(name) !== "r").map(([name]) => name);
  const taken = new Set(Object.keys(plan.buffers));
  for (const node of plan.main) for (const [name] of nodeUses(node, plan)) taken.add(name);
  const slots = [];
  // largest first, then by first use (Python's sort on (-size, first use) is stable too)
  const order = candidates.slice().sort((a, b) => (plan.buffers[b] - plan.buffers[a]) ||
                                                  (ranges.get(a)[0] - ranges.get(b)[0]));
  for (const name of order) {
    const [lo, hi] = ranges.get(name);
    let best = null;
    for (const slot of slots) {
      if (slot.ranges.some(([a, b]) => lo <= b && a <= hi)) continue;
      if (best === null || slot.size < best.size) best = slot;
    }
    if (best === null) { best = { size: 0, members: [], ranges: [] }; slots.push(best); }
    best.size = Math.max(best.size, plan.buffers[name]);
    best.members.push(name);
    best.ranges.push([lo, hi]);
  }
  const rename = new Map();
  const isCandidate = new Set(candidates);
  const buffers = Object.fromEntries(Object.entries(plan.buffers).filter(([name]) => !isCandidate.has(name)));
  const report = new Map();
  let k = 0;
  for (const slot of slots) {
    while (taken.has(`${SLOT_PREFIX}${k}`)) k++;
    const slotName = `${SLOT_PREFIX}${k++}`;
    buffers[slotName] = slot.size;
    report.set(slotName, slot.members);
    for (const member of slot.members) rename.set(member, slotName);
  }
  const renamed = (b) => [rename.get(b[0]) ?? b[0], ...b.slice(1)];
  const main = [];
  for (const node of plan.main) {
    if ((node.op === "allocate" || node.op === "free") && rename.has(node.buffer)) continue;
    if (!("buffer" in node || "source" in node || "bindings" in node)) { main.push(node); continue; }
    const out = { ...node };
    for (const key of ["buffer", "source"]) if (key in out) out[key] = rename.get(out[key]) ?? out[key];
    if ("bindings" in out) out.bindings = out.bindings.map(renamed);
    if (out.tune) {
      out.tune = { ...out.tune, variants: out.tune.variants.map((v) => ({
        ...v, bindings: v.bindings.map(renamed),
        ...(v.then ? { then: v.then.map((t) => ({ ...t, bindings: t.bindings.map(renamed) })) } : {}),
      })) };
    }
    main.push(out);
  }
  return { plan: { ...plan, buffers, main }, slots: report };
}

/** Slot name -> bytes that serve the slot of that name in each of `plans` (plan_memory.shared_slot_sizes):
 *  plans whose calls never overlap (the phases of a decode bundle) share those storages. */
export function sharedSlotSizes(plans) {
  const sizes = new Map();
  for (const plan of plans) {
    const { plan: assigned, slots } = assignMemory(plan);
    for (const name of slots.keys()) sizes.set(name, Math.max(sizes.get(name) || 0, assigned.buffers[name]));
  }
  return sizes;
}

// -- WebGPU helpers ------------------------------------------------------------------------------------

// Fill a u32 word range with one 32-bit pattern (clearBuffer only writes zeros).
const FILL_U32_WGSL = `
struct Params { offset_words: u32, count_words: u32, value: u32, row_words: u32 }
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * p.row_words;
  if (i < p.count_words) { dst[p.offset_words + i] = p.value; }
}`;
const FILL_WORKGROUP = 256;

/** The (x', y', 1) grid covering a 1-D grid past `limit` workgroups (torch_webgpu/plan/grid.py). */
function foldedGrid(workgroups, limit) {
  const [x, y, z] = workgroups;
  if (x <= limit || y !== 1 || z !== 1) return null;
  const rows = Math.ceil(x / limit);
  if (rows > limit) return null;
  return [Math.ceil(x / rows), rows, 1];
}

function shaderGrid(workgroups, wgsl, limit) {
  const grid = foldedGrid(workgroups, limit);
  return grid !== null && wgsl.includes(`override ${WORKGROUP_FOLD_OVERRIDE}`) ? grid : null;
}

/** Records a call's commands into one encoder, keeping one compute pass open across dispatches. */
class Recorder {
  constructor(device) {
    this.device = device;
    this.encoder = device.createCommandEncoder({ label: "torch-webgpu" });
    this.pass = null;
    this.pipeline = null;
  }

  computePass() {
    if (!this.pass) { this.pass = this.encoder.beginComputePass(); this.pipeline = null; }
    return this.pass;
  }

  endPass() {
    if (this.pass) { this.pass.end(); this.pass = null; }
  }

  dispatch(pipeline, bindGroup, grid) {
    const pass = this.computePass();
    if (pipeline !== this.pipeline) { pass.setPipeline(pipeline); this.pipeline = pipeline; }
    pass.setBindGroup(0, bindGroup);
    pass.dispatchWorkgroups(grid[0], grid[1], grid[2]);
  }

  copy(src, srcOffset, dst, dstOffset, size) {
    this.endPass();
    this.encoder.copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  clear(buffer, offset, size) {
    this.endPass();
    this.encoder.clearBuffer(buffer, offset, size);
  }

  /** Submits what was recorded; the next command starts a new encoder. */
  submit() {
    this.endPass();
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = this.device.createCommandEncoder({ label: "torch-webgpu" });
  }
}

/** A Recorder's interface that keeps the commands instead of encoding them: a plan's call resolved once
 *  (pipelines, bind groups, copies), replayed into a Recorder on every call. */
class CommandList {
  constructor() { this.commands = []; }
  dispatch(pipeline, group, grid) { this.commands.push({ pipeline, group, grid }); }
  copy(src, srcOffset, dst, dstOffset, size) { this.commands.push({ src, srcOffset, dst, dstOffset, size }); }
  clear(buffer, offset, size) { this.commands.push({ clear: true, buffer, offset, size }); }
  submit() { throw new BundleFormatError("a plan's per-call nodes upload constants; only its init nodes may"); }
}

// -- the model --------------------------------------------------------------------------------------------

/**
 * Load a bundle: fetch and verify it (format version, sha256 of every file and of the manifest), check
 * the adapter's features and limits, create the device (unless `options.device`), upload the weights and
 * build the pipelines. `source`: a bundle directory URL, a .zip URL, a .zip File/Blob/ArrayBuffer or a Map
 * of file name -> bytes. `options.weights`: the weights of a bundle exported with external weights.
 */
export async function load(source, options = {}) {
  const { manifest, files, where, name } = await readBundle(source);
  if (manifest.kind === DECODER_KIND) return loadLanguageModel(manifest, files, where, options);
  for (const key of ["inputs", "outputs", "requires", "plan"]) {
    if (!(key in manifest)) throw new BundleFormatError(`${where}: manifest has no '${key}'`);
  }
  const plan = planFromDoc(manifest.plan, files, where);
  if ("external_weights" in manifest) bindExternalWeights(name, plan, manifest.external_weights, options.weights);
  const device = await openDevice(manifest.requires, options);
  const model = new Model(manifest, plan, device, where);
  if (options.name) model.name = options.name;
  model._ownsDevice = !options.device;
  model._tuning = tuningPolicy(options, device);
  try {
    await model._build();
  } catch (exc) {
    model.release();
    throw exc;
  }
  return model;
}

/** `options.device` after checking it meets `requires`, else a new device of an adapter that does (from
 *  `options.gpu` or navigator.gpu): BundleRequirementError naming whatever is missing. */
async function openDevice(requires, options) {
  const device = options.device;
  if (device) {
    const what = `this device (${adapterName(device.adapterInfo)})`;
    checkRequirements(requires, subgroupSizes(limitsOf(device, device.adapterInfo), options), device.features, what);
    return device;
  }
  const gpu = options.gpu || (typeof navigator !== "undefined" ? navigator.gpu : undefined);
  if (!gpu) {
    throw new BundleRequirementError("WebGPU is unavailable here (no navigator.gpu): use a browser with WebGPU " +
                                     "on a secure context (https or localhost), or pass {device}");
  }
  const adapter = await gpu.requestAdapter(options.adapterOptions);
  if (!adapter) throw new BundleRequirementError("navigator.gpu.requestAdapter() found no WebGPU adapter");
  const limits = subgroupSizes(limitsOf(adapter, adapter.info), options);
  checkRequirements(requires, limits, adapter.features, `this adapter (${adapterName(adapter.info)})`);
  return adapter.requestDevice(deviceDescriptor(requires, limits));
}

/** `limits` with the subgroup size `options.subgroupSize` declares (the Python runtime's
 *  TORCH_WEBGPU_SUBGROUP_SIZE): 0 hides it, N is the one size (Dawn reports NVIDIA's as 4…128, though
 *  every pipeline gets 32). */
function subgroupSizes(limits, options) {
  const size = options.subgroupSize;
  if (size === undefined || size === null) return limits;
  if (!Number.isInteger(size) || size < 0) throw new TypeError(`subgroupSize ${size}: expected 0 or a subgroup size`);
  const out = { ...limits };
  delete out["subgroup-min-size"];
  delete out["subgroup-max-size"];
  if (size) { out["subgroup-min-size"] = size; out["subgroup-max-size"] = size; }
  return out;
}

const AUTOTUNE_MIN_FLOPS = 2 ** 20;   // smaller problems keep the default (PLAN_MIN_FLOPS, kernels/autotune.py)
const AUTOTUNE_MAX_CANDIDATES = 6;
const AUTOTUNE_STORAGE_KEY = "torch-webgpu-autotune";

/** A Map-like cache of tuning winners kept in localStorage (in memory where there is none). */
function winnerCache() {
  const storage = typeof localStorage !== "undefined" ? localStorage : null;
  let entries = {};
  try { entries = JSON.parse((storage && storage.getItem(AUTOTUNE_STORAGE_KEY)) || "{}"); } catch (_) { entries = {}; }
  return {
    get: (key) => entries[key] || null,
    set(key, value) {
      entries[key] = value;
      try { if (storage) storage.setItem(AUTOTUNE_STORAGE_KEY, JSON.stringify(entries)); } catch (_) { /* full */ }
    },
  };
}

/** Whether and how a model times its library variants: options.autotune true/false, or by default on
 *  hardware adapters only (software ones, SwiftShader among them, keep the defaults: their timings say
 *  nothing about a GPU and their compiles cost seconds). */
function tuningPolicy(options, device) {
  const info = device.adapterInfo || {};
  const name = [info.vendor, info.architecture, info.device, info.description].join(" ");
  const software = Boolean(info.isFallbackAdapter) || /swiftshader|llvmpipe|lavapipe|software/i.test(name);
  const setting = options.autotune === undefined ? "auto" : options.autotune;
  return {
    enabled: setting === true || (setting === "auto" && !software),
    minFlops: options.autotuneMinFlops ?? AUTOTUNE_MIN_FLOPS,
    maxCandidates: options.autotuneCandidates ?? AUTOTUNE_MAX_CANDIDATES,
    cache: options.autotuneCache === undefined ? winnerCache() : options.autotuneCache,
    deviceKey: `${name.trim()}|${info.description || ""}`,
  };
}

/** The features and limits to request: the bundle's, so a device never has less than the plan needs. */
function deviceDescriptor(requires, adapterLimits) {
  const requiredLimits = {};
  for (const [name, need] of Object.entries(requires.limits || {})) {
    if (name.startsWith("subgroup-") || !(name in adapterLimits)) continue;
    // max-*: at least what the plan uses; min-* alignments: the adapter's own (the finest it allows).
    requiredLimits[camel(name)] = name.startsWith("min-") ? adapterLimits[name] : need;
  }
  return { requiredFeatures: [...(requires.features || [])], requiredLimits, label: "torch-webgpu" };
}

/** A loaded bundle: `await model.run(inputs)`. */
export class Model {
  constructor(manifest, plan, device, where) {
    this.manifest = manifest;
    this.plan = plan;
    this.device = device;
    this.where = where;
    this.name = where.replace(/\/+$/, "").split("/").pop();
    this.calls = 0;
    this._owned = [];
    this._pipelines = new Map();
    this._uniforms = new Map();
    this._scratch = new Map();
    this._layouts = new Map();
    this._queue = Promise.resolve();
    this._limit = device.limits.maxComputeWorkgroupsPerDimension;
    this._align = device.limits.minStorageBufferOffsetAlignment;
    this._fill = null;
    /** Entry point -> {variant, how: "default" | "cached" | "timed", timings?} of each tunable dispatch. */
    this.variants = {};
  }

  /** Name, shape and dtype of every input. */
  get inputs() { return this.manifest.inputs; }
  /** Shape and dtype of every output. */
  get outputs() { return this.manifest.outputs; }
  /** The expected call signature, e.g. `(x: float32[4, 16]) -> (float32[4, 8])`. */
  get signature() { return formatSignature(this.inputs, this.outputs); }

  _buffer(size, label = "torch-webgpu") {
    const buffer = this.device.createBuffer({
      size: alignUp(Math.max(Number(size), 4), 4), label,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
    this._owned.push(buffer);
    return buffer;
  }

  async _pipeline(entry, workgroups) {
    const spec = this.plan.executables[entry];
    const source = this.plan.wgsl.get(spec.wgsl_file);
    const folded = shaderGrid(workgroups, source, this._limit);
    const key = folded ? `${entry}#${workgroups[0]}` : entry;
    if (!this._pipelines.has(key)) {
      const compute = { module: this._module(spec.wgsl_file, source), entryPoint: spec.entry_point };
      if (folded) compute.constants = { [WORKGROUP_FOLD_OVERRIDE]: workgroups[0] };
      this._pipelines.set(key, this.device.createComputePipelineAsync({ layout: "auto", compute, label: entry })
        .catch(async (exc) => {
          const messages = await this._shaderMessages(spec.wgsl_file);
          throw new BundleError(`${this.where}: executable ${entry} (${spec.wgsl_file}) does not build on this ` +
                                `device: ${exc.message}${messages}`);
        }));
    }
    return { pipeline: await this._pipelines.get(key), grid: folded || workgroups };
  }

  _module(file, source) {
    this._modules = this._modules || new Map();
    if (!this._modules.has(file)) this._modules.set(file, this.device.createShaderModule({ code: source, label: file }));
    return this._modules.get(file);
  }

  async _shaderMessages(file) {
    try {
      const info = await this._modules.get(file).getCompilationInfo();
      return info.messages.map((m) => `\n  ${file}:${m.lineNum}:${m.linePos}: ${m.type}: ${m.message}`).join("");
    } catch (_) {
      return "";
    }
  }

  _uniform(words) {
    const key = words.join(",");
    if (!this._uniforms.has(key)) {
      const buffer = this.device.createBuffer({ size: words.length * 4, usage: GPUBufferUsage.UNIFORM,
                                                mappedAtCreation: true, label: "torch-webgpu-params" });
      new Uint32Array(buffer.getMappedRange()).set(words.map((w) => w >>> 0));
      buffer.unmap();
      this._owned.push(buffer);
      this._uniforms.set(key, buffer);
    }
    return this._uniforms.get(key);
  }

  _scratchBuffer(key, nbytes) {
    if (!this._scratch.has(key)) this._scratch.set(key, this._buffer(alignUp(nbytes, 4), "torch-webgpu-scratch"));
    return this._scratch.get(key);
  }

  /** Pipelines, uniforms and bindings of a resolved dispatch node (CompiledPlan.prepare_dispatch). */
  async _prepareDispatch(node) {
    const entry = node.entry_point;
    const spec = this.plan.executables[entry];
    if (!spec) throw new BundleFormatError(`${this.where}: dispatch of unknown executable ${entry}`);
    const workgroups = node.workgroups.map(Number);
    while (workgroups.length < 3) workgroups.push(1);
    const { pipeline, grid } = await this._pipeline(entry, workgroups);
    const wgslBindings = Object.keys(spec.binding_map).map(Number);
    const pc = spec.push_constant_binding;
    const count = Math.max(-1, ...wgslBindings, pc === null || pc === undefined ? -1 : pc) + 1;
    const slots = new Array(count).fill(null);
    for (const [wgslBinding, hostIndex] of Object.entries(spec.binding_map)) {
      slots[Number(wgslBinding)] = node.bindings[hostIndex];
    }
    let uniform = null;
    const consts = node.constants || [];
    if (pc !== null && pc !== undefined) {
      // Push constants (dynamic dims among them) reach the shader through a uniform buffer.
      const pad = (-consts.length % 4 + 4) % 4 || (consts.length ? 0 : 4);
      uniform = this._uniform([...consts, ...new Array(pad).fill(0)]);
    } else if (consts.length) {
      throw new BundleFormatError(`${spec.entry_point}: host passes ${consts.length} push constants, shader has none`);
    }
    const missing = slots.map((s, i) => (s === null && i !== pc ? i : -1)).filter((i) => i >= 0);
    if (missing.length) {
      throw new BundleFormatError(`${spec.entry_point}: WGSL bindings [${missing.join(", ")}] have no host buffer`);
    }
    for (const c of grid) {
      if (c > this._limit) {
        throw new BundleRequirementError(`kernel '${entry}': workgroup count (${grid.join(", ")}) exceeds the ` +
                                         `device's max-compute-workgroups-per-dimension (${this._limit})`);
      }
    }
    return { entry, pipeline, grid, slots, uniform, readOnly: new Set(spec.read_only || []), bindGroups: new Map() };
  }

  /**
   * `nodes` with every library dispatch that carries its variants ("tune") set to one: the cached
   * winner for this device, else the fastest when timed once here, else the default (the policy of
   * the Python executor, torch_webgpu/plan/tuning.py). Variants not chosen are never built.
   */
  async _chooseVariants(nodes) {
    const out = [];
    for (const node of nodes) {
      if (node.op !== "dispatch" || !node.tune) { out.push(node); continue; }
      const { tune, ...defaults } = node;
      const variants = new Map(tune.variants.map((v) => [v.variant, v]));
      const names = [...variants.keys()];
      const choice = await this._pick(tune, names, (name) => this._timeVariant(variants.get(name)));
      const { variant: _, then = [], ...args } = variants.get(choice.variant) || { ...defaults, variant: names[0] };
      this.variants[args.entry_point] = choice;
      out.push({ ...args, op: "dispatch" });
      for (const step of then) out.push({ ...step, op: "dispatch" });   // e.g. a split-K matmul's combine
    }
    return out;
  }

  async _pick(tune, names, measure) {
    const policy = this._tuning;
    const key = `${tune.key}|${policy.deviceKey}`;
    const cache = policy.cache;
    if (!policy.enabled) return { variant: names[0], how: "default" };   // even with a cached winner
    const hit = cache ? cache.get(key) : null;
    if (hit && names.includes(hit)) return { variant: hit, how: "cached" };
    if (names.length === 1 || tune.flops < policy.minFlops) return { variant: names[0], how: "default" };
    const timings = {};
    for (const name of names.slice(0, policy.maxCandidates)) {
      try {
        timings[name] = await measure(name);
      } catch (_) {
        timings[name] = Infinity;   // a candidate this device cannot build or run is not a winner
      }
    }
    const winner = Object.keys(timings).reduce((a, b) => (timings[b] < timings[a] ? b : a));
    if (timings[winner] === Infinity) return { variant: names[0], how: "default" };
    if (cache) cache.set(key, winner);
    return { variant: winner, how: "timed", timings };
  }

  /** Milliseconds of one run of a variant's dispatches (its own, then those under "then"; best of 3 after
   * a warm-up), on scratch buffers they share. */
  async _timeVariant(variant) {
    const { then = [], ...args } = variant;
    const steps = [args, ...then];
    const extent = new Map();
    for (const step of steps) {
      for (const [name, offset, size] of step.bindings) extent.set(name, Math.max(extent.get(name) || 0, offset + size));
    }
    const scratch = new Map([...extent].map(([name, n]) => [name, [this.device.createBuffer({
      size: alignUp(Math.max(n, 4), 4), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    }), 0]]));
    try {
      const prepared = new Map();
      for (const step of steps) prepared.set(step, await this._prepareDispatch({ ...step, op: "dispatch" }));
      const state = { buffers: scratch, phase: "tune", dispatchIndex: args.entry_point };
      let best = Infinity;
      for (let rep = 0; rep < 4; rep++) {
        await withErrorScope(this.device, `variant ${args.entry_point}`, async () => {
          const start = performance.now();
          state.recorder = new Recorder(this.device);
          for (const step of steps) runDispatch(this, { ...state, dispatches: prepared }, step);
          state.recorder.submit();
          await this.device.queue.onSubmittedWorkDone();
          if (rep) best = Math.min(best, performance.now() - start);   // rep 0: the warm-up
        });
      }
      return best;
    } finally {
      for (const [buffer] of scratch.values()) buffer.destroy();
    }
  }

  /** Prepares every dispatch of `nodes` into `into` (node -> prepared); pipelines build concurrently. */
  async _prepareAll(nodes, into) {
    const dispatches = nodes.filter((node) => node.op === "dispatch");
    const prepared = await Promise.all(dispatches.map((node) => this._prepareDispatch(node)));
    dispatches.forEach((node, k) => into.set(node, prepared[k]));
  }

  /**
   * Buffers, weights, variants, pipelines and the init nodes. `shared.constants`: lifted constants already on
   * the device (weights that another plan binds too), by constant name: bound, never uploaded again;
   * `shared.slots`: buffers for the plan's memory slots (sharedSlotSizes), shared by plans whose calls never
   * overlap (the phases of a decode bundle); the caller owns both.
   */
  async _build(shared = {}) {
    const constantBuffers = shared.constants || new Map();
    const slotBuffers = shared.slots || new Map();
    // Per-call buffers of disjoint live ranges share storage, as in the Python executor.
    const { plan, slots } = assignMemory(this.plan);
    this.plan = plan;
    this.memory = slots;
    await withErrorScope(this.device, `${this.where}: WebGPU rejected the bundle's setup`, async () => {
      this._static = new Map();
      for (const [name, size] of Object.entries(plan.buffers)) {
        if (typeof size !== "number") continue;
        const given = slots.has(name) ? slotBuffers.get(name) : undefined;
        this._static.set(name, [given && given.size >= size ? given : this._buffer(size, name), 0]);
      }
      const nUser = plan.inputs.length;
      const uploaded = new Set(plan.init.filter((n) => n.op === "upload").map((n) => n.constant));
      const lifted = [...plan.constants.entries()].slice(0, plan.num_constant_inputs);
      this._constantShapes = lifted.map(([, t]) => t.shape);
      lifted.forEach(([name, tensor], j) => {
        let buffer = constantBuffers.get(name);
        if (!buffer) {
          buffer = this._buffer(tensor.bytes.byteLength, name);
          // Filled by the plan's upload init nodes (plans saved before those existed: here).
          if (!uploaded.has(name)) this._write(buffer, 0, tensor.bytes);
        }
        this._static.set(`in${nUser + j}`, [buffer, 0]);
      });
      this.dynamic = plan.inputs.some((spec) => spec.shape.some((d) => d === null));
      if (containsExpression(plan.init)) throw new BundleFormatError("a plan's init nodes cannot depend on the input shapes");
      const init = plan.init.filter((n) => !(n.op === "upload" && constantBuffers.has(n.constant)));
      const initDispatches = new Map();
      await this._prepareAll(init, initDispatches);
      plan.main = await this._chooseVariants(plan.main);
      if (!this.dynamic) await this._layout(plan.inputs.map((spec) => spec.shape));
      const recorder = new Recorder(this.device);
      const state = { recorder, buffers: new Map(this._static), dispatches: initDispatches, results: null,
                      phase: "init" };
      init.forEach((node, index) => { state.dispatchIndex = index; this._execute(state, node); });
      recorder.submit();
    });
  }

  /** Writes host bytes into a buffer (4-byte multiples, as WebGPU wants). */
  _write(buffer, offset, bytes) {
    if (!bytes.byteLength) return;
    let data = bytes;
    if (bytes.byteLength % 4) {
      data = new Uint8Array(alignUp(bytes.byteLength, 4));
      data.set(bytes);
    }
    this.device.queue.writeBuffer(buffer, offset, data.buffer, data.byteOffset, data.byteLength);
  }

  /** The buffers, resolved nodes and readback layout of one input-shape signature (plans: _Layout). */
  async _layout(userShapes) {
    const key = JSON.stringify(userShapes);
    if (this._layouts.has(key)) return this._layouts.get(key);
    const plan = this.plan;
    const shapes = [...userShapes, ...this._constantShapes];
    const layout = { key, shapes, owned: [], buffers: new Map(), hostInputs: new Map(), dispatches: new Map() };
    const own = (size, label) => { const b = this._buffer(size, label); layout.owned.push(b); return b; };
    layout.main = plan.main.map((n) => evaluateAll(n, shapes));
    layout.outputs = plan.outputs.map((o) => ({ ...o, shape: o.shape.map((d) => evaluate(d, shapes)) }));
    for (const [name, size] of Object.entries(plan.buffers)) {
      if (typeof size !== "number") layout.buffers.set(name, [own(evaluate(size, shapes), name), 0]);
    }
    plan.inputs.forEach((spec, k) => {
      if (spec.device_dtype === SCALAR) return;
      layout.hostInputs.set(`in${k}`, [own(product(shapes[k]) * ITEMSIZE[spec.device_dtype], `in${k}`), 0]);
    });
    await this._prepareAll(layout.main, layout.dispatches);
    // One readback buffer holds every host-bound output of a call.
    layout.readbackOffsets = new Map();
    let total = 0;
    for (const node of layout.main) {
      if (node.op === "output" && "buffer" in node) {
        layout.readbackOffsets.set(node.index, total);
        total += alignUp(node.size, ALIGN);
      }
    }
    layout.readbackSize = Math.max(total, 4);
    layout.readback = this.device.createBuffer({ size: alignUp(layout.readbackSize, 4), label: "torch-webgpu-readback",
                                                 usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    this._owned.push(layout.readback);
    layout.owned.push(layout.readback);
    if (this._layouts.size >= 8) {
      // Dynamic plans keep buffers for 8 input-shape signatures; the oldest goes.
      const [oldKey, old] = this._layouts.entries().next().value;
      this._layouts.delete(oldKey);
      for (const b of old.owned) { b.destroy(); this._owned.splice(this._owned.indexOf(b), 1); }
    }
    this._layouts.set(key, layout);
    return layout;
  }

  // -- the low-IR ops (python_executor.SHADER_TO_FUNC) --
  _execute(state, node) {
    const run = OPS[node.op];
    if (!run) {
      throw new BundleFormatError(`${this.where}: low-IR op '${node.op}' is unknown to torch-webgpu.js ${VERSION}; ` +
                                  "use the torch-webgpu.js of the torch-webgpu that wrote the bundle");
    }
    run(this, state, node);
  }

  _location(state, name) {
    const found = state.buffers.get(name);
    if (!found) throw new BundleFormatError(`${this.where}: the plan uses buffer '${name}', which it never allocates`);
    return found;
  }

  _bindGroup(state, d) {
    // Resolve every slot to (buffer, offset, size); a read-only view of a buffer that the same dispatch
    // also writes reads a copy taken just before (WebGPU forbids a writable buffer in two bindings).
    const resolved = d.slots.map((slot) => {
      if (slot === null) return null;
      const [name, offset, size] = slot;
      const [buffer, base] = this._location(state, name);
      return [buffer, base + offset, alignUp(Math.max(size, 4), 4)];
    });
    const writable = new Set(resolved.filter((r, i) => r && !d.readOnly.has(i)).map((r) => r[0]));
    const copies = [];
    resolved.forEach((r, i) => {
      if (r && d.readOnly.has(i) && writable.has(r[0])) {
        const scratch = this._scratchBuffer(`${state.phase}#${state.dispatchIndex}#${i}#${r[2]}`, r[2]);
        copies.push([r[0], r[1], scratch, r[2]]);
        resolved[i] = [scratch, 0, r[2]];
      }
    });
    const key = resolved.map((r) => (r ? `${bufferId(r[0])}:${r[1]}:${r[2]}` : "u")).join("|");
    let group = d.bindGroups.get(key);
    if (!group) {
      const entries = resolved.map((r, i) => ({
        binding: i, resource: r ? { buffer: r[0], offset: r[1], size: r[2] } : { buffer: d.uniform },
      }));
      group = this.device.createBindGroup({ layout: d.pipeline.getBindGroupLayout(0), entries, label: d.entry });
      if (d.bindGroups.size > 16) d.bindGroups.clear();
      d.bindGroups.set(key, group);
    }
    return { group, copies };
  }

  /**
   * Run the model. `inputs`: an array (in the signature's order) or an object by input name of typed
   * arrays (shape taken from the signature), `{data, shape, dtype?}`, GPUBuffers or `{buffer, shape?,
   * offset?}` (zero-copy; contents in the device dtype: int64 and bool as int32 words) and, for host
   * scalar inputs, numbers. Returns one `{data, shape, dtype}` per output (int64 as BigInt64Array, bool as
   * Uint8Array, float16 as Float16Array where the host has it, else raw Uint16Array bits), or with
   * `{output: "gpu"}` one `{buffer, shape, dtype, deviceDtype}` per output in new GPUBuffers the caller owns.
   */
  run(inputs, options = {}) {
    const result = this._queue.then(() => this._run(inputs, options));
    this._queue = result.catch(() => {});
    return result;
  }

  _args(inputs) {
    if (Array.isArray(inputs)) return inputs;
    if (inputs !== null && typeof inputs === "object" && !ArrayBuffer.isView(inputs) && !isGPUBuffer(inputs) &&
        !("data" in inputs) && !("buffer" in inputs)) {
      const missing = this.inputs.filter((spec) => !(spec.name in inputs)).map((spec) => spec.name);
      if (missing.length) {
        throw new BundleSignatureError(`${this.name} needs the inputs ${missing.join(", ")}; expected ${this.signature}`);
      }
      return this.inputs.map((spec) => inputs[spec.name]);
    }
    return [inputs];
  }

  /** Each input as {kind: "host"|"gpu"|"scalar", shape, ...} after the signature checks (Bundle._check). */
  _check(args) {
    const sig = this.signature;
    if (args.length !== this.inputs.length) {
      throw new BundleSignatureError(`${this.name} takes ${this.inputs.length} inputs, got ${args.length}; expected ${sig}`);
    }
    return args.map((value, k) => {
      const spec = this.inputs[k];
      const planSpec = this.plan.inputs[k];
      const label = `input ${k} (${spec.name})`;
      if (planSpec.device_dtype === SCALAR) {
        if (typeof value !== "number" && typeof value !== "bigint") {
          throw new BundleSignatureError(`${label} is a host scalar: pass a number; expected ${sig}`);
        }
        return { kind: "scalar", shape: [Number(value)], output: value };
      }
      const matches = (shape) => shape.length === spec.shape.length &&
        shape.every((d, i) => spec.shape[i] === null || spec.shape[i] === d);
      const mismatch = (dtype, shape) => new BundleSignatureError(
        `${label} is ${dtype}${shapeText(shape)}, expected ${spec.dtype}${shapeText(spec.shape)}; ` +
        `the bundle's signature is ${sig}`);
      const gpuBuffer = isGPUBuffer(value) ? value : value && isGPUBuffer(value.buffer) ? value.buffer : null;
      if (gpuBuffer) {
        const shape = (value.shape || spec.shape).map(Number);
        const dtype = value.dtype || spec.dtype;
        if (!matches(shape) || dtype !== spec.dtype) throw mismatch(dtype, shape);
        const offset = value.offset || 0;
        const nbytes = product(shape) * ITEMSIZE[planSpec.device_dtype];
        if (!(gpuBuffer.usage & GPUBufferUsage.STORAGE) || offset % this._align || offset + nbytes > gpuBuffer.size) {
          throw new BundleSignatureError(
            `${label}: a GPUBuffer input needs STORAGE usage, an offset that is a multiple of ${this._align} ` +
            `and ${nbytes} bytes from it (${planSpec.device_dtype} words); got usage ${gpuBuffer.usage}, offset ` +
            `${offset}, size ${gpuBuffer.size}`);
        }
        return { kind: "gpu", shape, buffer: gpuBuffer, offset,
                 output: { buffer: gpuBuffer, shape, dtype, deviceDtype: planSpec.device_dtype } };
      }
      const data = ArrayBuffer.isView(value) ? value : value && value.data;
      const dtypes = data && ArrayBuffer.isView(data) ? typedArrayDtypes(data) : null;
      if (!dtypes) {
        const type = value === null ? "null" : Array.isArray(value) ? "Array"
          : typeof value === "object" ? (value.constructor && value.constructor.name) || "object" : typeof value;
        throw new BundleSignatureError(`${label} is a ${type}, not a typed array, {data, shape}, or GPUBuffer; ` +
                                       `expected ${sig}`);
      }
      const dtype = value.dtype || (dtypes.includes(spec.dtype) ? spec.dtype : dtypes[0]);
      let shape = value.shape ? value.shape.map(Number) : null;
      if (!shape) {
        if (spec.shape.some((d) => d === null)) {
          throw new BundleSignatureError(`${label} has a dynamic shape ${shapeText(spec.shape)}: pass {data, shape}`);
        }
        shape = data.length === product(spec.shape) ? spec.shape.slice() : [data.length];
      }
      if (!matches(shape) || !dtypes.includes(dtype) || dtype !== spec.dtype) throw mismatch(dtype, shape);
      if (data.length !== product(shape)) {
        throw new BundleSignatureError(`${label}: ${data.length} elements for shape ${shapeText(shape)} ` +
                                       `(${product(shape)}); expected ${sig}`);
      }
      return { kind: "host", shape, data, output: { data, shape, dtype } };
    });
  }

  _deviceBytes(k, data) {
    // Host values in the device dtype: int64 demoted to int32 (range-checked), bool as int32, float64 as
    // float32.
    const spec = this.plan.inputs[k];
    if (spec.device_dtype === "int32" && data instanceof BigInt64Array) {
      const out = new Int32Array(data.length);
      for (let i = 0; i < data.length; i++) {
        const v = data[i];
        if (v < BigInt(INT32_MIN) || v > BigInt(INT32_MAX)) {
          throw new RangeError(`input ${k}: int64 values outside int32 range cannot reach WebGPU shaders ` +
                               "(they have no 64-bit integers)");
        }
        out[i] = Number(v);
      }
      return new Uint8Array(out.buffer);
    }
    if (spec.device_dtype === "int32" && data instanceof Uint8Array) {
      return new Uint8Array(Int32Array.from(data, (v) => (v ? 1 : 0)).buffer);
    }
    if (spec.device_dtype === "float32" && data instanceof Float64Array) {
      return new Uint8Array(Float32Array.from(data).buffer);   // float64 is demoted, as IREE does
    }
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  }

  async _run(inputs, options) {
    const checked = this._check(this._args(inputs));
    const layout = await this._layout(checked.map((c) => c.shape));
    const device = this.device;
    const toGPU = options.output === "gpu";
    const buffers = new Map([...this._static, ...layout.buffers]);
    const state = { recorder: null, buffers, dispatches: layout.dispatches, layout, results: new Map(), toGPU,
                    phase: layout.key };
    let raw = null;
    await withErrorScope(device, `${this.where}: WebGPU rejected the call`, async () => {
      checked.forEach((c, k) => {
        const name = `in${k}`;
        if (c.kind === "scalar") return;
        if (c.kind === "gpu") { buffers.set(name, [c.buffer, c.offset]); return; }
        const [buffer] = layout.hostInputs.get(name);
        this._write(buffer, 0, this._deviceBytes(k, c.data));
        buffers.set(name, layout.hostInputs.get(name));
      });
      state.recorder = new Recorder(device);
      layout.main.forEach((node, index) => { state.dispatchIndex = index; this._execute(state, node); });
      state.recorder.submit();
      const host = [...state.results.values()].filter((r) => r.kind === "host");
      if (host.length) {
        // The call's one readback: every host output lies in one buffer.
        const end = alignUp(Math.max(...host.map((r) => r.offset + r.nbytes), 4), 4);
        await layout.readback.mapAsync(GPUMapMode.READ, 0, end);
        raw = new Uint8Array(layout.readback.getMappedRange(0, end).slice(0));
        layout.readback.unmap();
      }
    });
    const outputs = layout.outputs.map((spec, i) => {
      const r = state.results.get(i);
      if (!r) throw new BundleFormatError(`${this.where}: the plan never writes output ${i}`);
      if (r.kind === "input") return checked[r.input].output;   // the plan returns an input as it is
      if (r.kind === "gpu") return r.value;
      return { data: fromDevice(raw, r.offset, spec), shape: spec.shape, dtype: spec.dtype };
    });
    this.calls += 1;
    return this.plan.output_map.map((entry) => mapOutput(entry, outputs, checked));
  }

  /**
   * Records one call of a static plan into `recorder`, nothing read back (the phases of a decode bundle):
   * `inputs[k]` is a GPUBuffer (bound zero-copy; contents in the device dtype) or a typed array in the device
   * dtype (written to the input's own buffer), output k is copied into the GPUBuffer `into[k]`. Checks
   * nothing: the caller builds the inputs from the plan's own signature.
   */
  _recordInto(recorder, inputs, into) {
    const layout = this._layouts.values().next().value;
    inputs.forEach((value, k) => {
      if (isGPUBuffer(value)) return;
      const [buffer] = layout.hostInputs.get(`in${k}`);
      this._write(buffer, 0, new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
    });
    // The commands of a call depend only on which buffers it binds: resolved once per binding, replayed.
    const key = [...inputs.map((v) => (isGPUBuffer(v) ? bufferId(v) : "host")), ...into.map(bufferId)].join(",");
    this._programs = this._programs || new Map();
    let program = this._programs.get(key);
    if (!program) {
      const buffers = new Map([...this._static, ...layout.buffers]);
      inputs.forEach((value, k) => {
        buffers.set(`in${k}`, isGPUBuffer(value) ? [value, 0] : layout.hostInputs.get(`in${k}`));
      });
      const capture = new CommandList();
      const state = { recorder: capture, buffers, dispatches: layout.dispatches, layout, results: new Map(), into,
                      phase: layout.key };
      layout.main.forEach((node, index) => { state.dispatchIndex = index; this._execute(state, node); });
      program = capture.commands;
      if (this._programs.size >= 4) this._programs.delete(this._programs.keys().next().value);
      this._programs.set(key, program);
    }
    for (const c of program) {
      if (c.pipeline) recorder.dispatch(c.pipeline, c.group, c.grid);
      else if (c.clear) recorder.clear(c.buffer, c.offset, c.size);
      else recorder.copy(c.src, c.srcOffset, c.dst, c.dstOffset, c.size);
    }
    this.calls += 1;
  }

  /** Destroy the model's buffers, and its device if `load` created it (a device passed in stays). */
  release() {
    for (const buffer of this._owned) buffer.destroy();
    this._owned = [];
    this._layouts.clear();
    if (this._ownsDevice) this.device.destroy();
  }
}

/** Runs `action` inside validation and out-of-memory error scopes; a WebGPU error raised in them becomes a
 *  BundleError, in preference to what it made `action` throw (a failed mapAsync) unless that is a
 *  BundleError of ours (it says more: a shader's file and line). */
async function withErrorScope(device, what, action) {
  device.pushErrorScope("validation");
  device.pushErrorScope("out-of-memory");
  let failure = null;
  try {
    await action();
  } catch (exc) {
    failure = exc;
  }
  const oom = await device.popErrorScope();
  const invalid = await device.popErrorScope();
  if (failure instanceof BundleError) throw failure;
  if (oom) throw new BundleError(`${what}: out of device memory: ${oom.message}`);
  if (invalid) throw new BundleError(`${what}: ${invalid.message}`);
  if (failure) throw failure;
}

let nextBufferId = 1;
const bufferIds = new WeakMap();
function bufferId(buffer) {
  if (!bufferIds.has(buffer)) bufferIds.set(buffer, nextBufferId++);
  return bufferIds.get(buffer);
}

function isGPUBuffer(value) {
  return typeof GPUBuffer !== "undefined" && value instanceof GPUBuffer;
}

/** An output's typed array from the readback bytes: device dtype -> the model's dtype. */
function fromDevice(raw, offset, spec) {
  const n = product(spec.shape);
  const DeviceCls = spec.device_dtype === "float16" ? Uint16Array : typedArrayClass(spec.device_dtype);
  const words = new DeviceCls(raw.buffer.slice(offset, offset + n * DeviceCls.BYTES_PER_ELEMENT));
  if (spec.dtype === "int64") return BigInt64Array.from(words, (v) => BigInt(v));
  if (spec.dtype === "bool") return Uint8Array.from(words, (v) => (v ? 1 : 0));
  if (spec.dtype === "float64") return Float64Array.from(words);
  if (spec.dtype === "float16" && HAS_F16) return new Float16Array(words.buffer);
  return words;
}

/** One graph output: a plan output, null, or a size (["const", v] or ["dim", input, axis]). */
function mapOutput(entry, outputs, checked) {
  if (entry === null) return null;
  if (typeof entry === "number") return outputs[entry];
  if (entry[0] === "const") return entry[1];
  return checked[entry[1]].shape[entry[2]];
}

function runUpload(model, state, node) {
  const [buffer, base] = model._location(state, node.buffer);
  const tensor = model.plan.constants.get(node.constant);
  if (!tensor) throw new BundleFormatError(`${model.where}: the plan uploads constant ${node.constant}, not in the bundle`);
  // Program order: a queue write lands before commands not yet submitted, so submit those first.
  state.recorder.submit();
  model._write(buffer, base, tensor.bytes);
}

function runDispatch(model, state, node) {
  const d = state.dispatches.get(node);
  if (d.grid.some((c) => c === 0)) return;
  const { group, copies } = model._bindGroup(state, d);
  for (const [src, offset, scratch, size] of copies) state.recorder.copy(src, offset, scratch, 0, size);
  state.recorder.dispatch(d.pipeline, group, d.grid);
}

function runFill(model, state, node) {
  const [buffer, base] = model._location(state, node.buffer);
  const offset = base + node.offset, size = node.size;
  if (offset % 4 || size % 4) throw new BundleFormatError(`fill range must be 4-byte aligned, got offset=${offset} nbytes=${size}`);
  if (!size) return;
  const pattern = node.pattern >>> 0;
  if (pattern === 0) { state.recorder.clear(buffer, offset, size); return; }
  if (!model._fill) {
    const module = model.device.createShaderModule({ code: FILL_U32_WGSL, label: "torch-webgpu-fill" });
    model._fill = model.device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
  }
  const words = size / 4;
  const rows = Math.ceil(words / FILL_WORKGROUP);
  const gridX = Math.min(rows, model._limit);
  const params = model._uniform([offset / 4, words, pattern, gridX * FILL_WORKGROUP]);
  const group = model.device.createBindGroup({
    layout: model._fill.getBindGroupLayout(0),
    entries: [{ binding: 0, resource: { buffer, offset: 0, size: offset + size } }, { binding: 1, resource: { buffer: params } }],
  });
  state.recorder.dispatch(model._fill, group, [gridX, Math.ceil(rows / gridX), 1]);
}

function runCopy(model, state, node) {
  let [src, sbase] = model._location(state, node.source);
  const [dst, dbase] = model._location(state, node.buffer);
  let sourceOffset = node.source_offset;
  if (!node.size) return;
  if (src === dst) {
    // WebGPU refuses a copy within one buffer (IREE emits them inside transient buffers): bounce.
    const scratch = model._scratchBuffer(`${state.phase}#${state.dispatchIndex}#copy#${node.size}`, node.size);
    state.recorder.copy(src, sbase + sourceOffset, scratch, 0, node.size);
    src = scratch; sbase = 0; sourceOffset = 0;
  }
  state.recorder.copy(src, sbase + sourceOffset, dst, dbase + node.offset, node.size);
}

function runOutput(model, state, node) {
  if ("input" in node) { state.results.set(node.index, { kind: "input", input: node.input }); return; }
  const layout = state.layout;
  const spec = layout.outputs[node.index];
  const nbytes = product(spec.shape) * ITEMSIZE[spec.device_dtype];
  if (nbytes !== node.size && !(nbytes === 0 && node.size <= 4)) {
    throw new BundleFormatError(`output ${node.index}: ${node.size} bytes on device, expected ${nbytes} for ` +
                                `${spec.device_dtype}${shapeText(spec.shape)}`);
  }
  const [src, base] = model._location(state, node.buffer);
  const size = alignUp(node.size, 4);
  if (state.into) {   // a decode bundle's phase: into the caller's buffer (a KV cache, the logits)
    if (size) state.recorder.copy(src, base + node.offset, state.into[node.index], 0, size);
    state.results.set(node.index, { kind: "gpu", value: state.into[node.index] });
    return;
  }
  if (state.toGPU) {
    const buffer = model.device.createBuffer({
      size: Math.max(size, 4), label: `output${node.index}`,
      usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
    });
    if (size) state.recorder.copy(src, base + node.offset, buffer, 0, size);
    state.results.set(node.index, { kind: "gpu",
      value: { buffer, shape: spec.shape, dtype: spec.dtype, deviceDtype: spec.device_dtype } });
    return;
  }
  const offset = layout.readbackOffsets.get(node.index);
  if (size) state.recorder.copy(src, base + node.offset, layout.readback, offset, size);
  state.results.set(node.index, { kind: "host", offset, nbytes });
}

const nothing = () => {};   // allocate, free, barrier: buffers live with the model; WebGPU orders dispatches

// Each low-IR op and the function that executes it (python_executor.SHADER_TO_FUNC).
const OPS = {
  allocate: nothing, free: nothing, barrier: nothing,
  upload: runUpload, dispatch: runDispatch, fill: runFill, copy: runCopy, output: runOutput,
};


// -- decode bundles: language models (torch_webgpu/bundle/decoder.py) -------------------------------------

const DECODER_KIND = "decoder";
const WEIGHTS_FILE = "weights.safetensors";
const SAMPLE_GREEDY = 0, SAMPLE_LOGITS = 1;   // kernels/sampling.py MODES
const FIXED_ONE = 2 ** 31;                    // top-p masses in fixed point (kernels/sampling.py)
const SAMPLER_PARAM_WORDS = 16;
const SCORE_BYTES = { f32: 4, f16: 2 };
const REPLACEMENT = "\uFFFD";                 // what a decoder writes for an incomplete UTF-8 sequence

/** The u32 bit pattern of an f32 (kernels/launch.f32_word). */
function f32Word(value) {
  return new Uint32Array(new Float32Array([value]).buffer)[0];
}

/** top_p as the fixed-point mass the sampler's radix select reaches (kernels/sampling.top_p_target). */
function topPTarget(topP) {
  return topP >= 1 ? FIXED_ONE : Math.ceil(topP * FIXED_ONE);
}

/** The sampler's 16 parameter words (kernels/sampling.sample_launch) for one row of `n` scores: greedy, or
 *  temperature / top-k / top-p sampling with Philox state `rng` (seed lo, seed hi, step, 0). */
export function samplerParams(n, { doSample = false, temperature = 1.0, topK = 0, topP = 1.0 } = {},
                              rng = [0, 0, 0, 0]) {
  if (doSample) {
    if (!(temperature > 0) || !Number.isFinite(temperature)) {
      throw new RangeError(`sampling: temperature must be a positive float, got ${temperature}`);
    }
    if (topK < 0 || !(topP >= 0 && topP <= 1)) {
      throw new RangeError(`sampling: top_k must be >= 0 and top_p in [0, 1], got ${topK}, ${topP}`);
    }
  }
  const mode = doSample ? SAMPLE_LOGITS : SAMPLE_GREEDY;
  const words = [n, n, 0, 0, mode, topK, topPTarget(topP), f32Word(1.0 / temperature), ...rng, 1, 1, 1, 0];
  return Uint32Array.from(words, (w) => Number(BigInt.asUintN(32, BigInt(Math.trunc(w)))));
}

/** Philox state of step `step` for `seed` (a number or BigInt), as the Python loader derives it. */
function samplerRng(seed, step) {
  const s = BigInt(seed);
  return [Number(s & 0xFFFFFFFFn), Number((s >> 32n) & 0xFFFFFFFFn), step, 0];
}

// The error texts of decode bundles a user can cause, verbatim from torch_webgpu/bundle/messages.py (same
// placeholders: {bundle} is the bundle's name), so that both runtimes say the same thing.
export const MESSAGES = {
  EMPTY_PROMPT: "{bundle}: generate needs a non-empty prompt and max_new_tokens >= 0",
  PROMPT_IDS_RANGE: "{bundle}: prompt ids must lie in [0, {vocab_size})",
  PROMPT_OVER_BUCKET: "{bundle}: a prompt of {length} tokens is longer than the largest prefill bucket " +
                      "({largest}); re-export with a larger prompt_buckets entry",
  PROMPT_OVER_MAX_LEN: "{bundle}: {length} prompt + {new_tokens} new tokens exceed the bundle's max_len " +
                       "{max_len} (its KV cache); re-export with a larger max_len",
  GENERATION_RUNNING: "{bundle}: a generation is still running on this bundle; finish (or close) its stream " +
                      "before starting another",
  NO_TOKENIZER: "{bundle} was exported without a tokenizer, so it takes token ids, not text; re-export it " +
                "with a tokenizer (export_decoder(..., tokenizer=tok) or torch-webgpu compile --decoder " +
                "--tokenizer DIR), or give token ids",
  NO_CHAT_TEMPLATE: "{bundle}: the tokenizer has no chat template ({file} has no \"chat_template\"); " +
                    "generate from plain text, or re-export with a tokenizer that has one",
  CHAT_TEMPLATE_REFUSED: "{bundle}: the chat template refused the messages: {reason}",
  TOKENIZER_UNREADABLE: "{bundle}: {file} cannot be read as a Hugging Face tokenizer ({reason}); re-export " +
                        "the bundle with a fast tokenizer",
  TOKENIZER_CONFIG_UNREADABLE: "{bundle}: {file} is not a JSON object of tokenizer settings ({reason}); " +
                               "re-export the bundle",
};

/** A MESSAGES text with its {placeholders} filled (Python's str.format of the same text). */
function message(name, values) {
  return MESSAGES[name].replace(/\{(\w+)\}/g, (_, key) => String(values[key]));
}

/** A module of the page or of node_modules: `@huggingface/tokenizers` or `@huggingface/jinja`. */
async function importText(specifier, what) {
  try {
    return await import(specifier);
  } catch (exc) {
    throw new BundleError(
      `${what} needs the npm package ${specifier}, which did not load (${exc.message}): install it with ` +
      "`npm ci` in torch_webgpu/web (the set-up does), or give the page an import map for it " +
      "(`torch-webgpu serve` and `export-web` write one)");
  }
}

/** A token's text in a tokenizer_config.json entry: a string or an AddedToken object ({content}). */
function tokenText(value) {
  if (value && typeof value === "object") value = value.content;
  return typeof value === "string" ? value : null;
}

// transformers' named special tokens: the chat template sees each one the tokenizer has as a variable.
const SPECIAL_TOKEN_NAMES = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                             "mask_token"];
const REASONING_FIELDS = ["reasoning_content", "thinking", "reasoning"];
// The spaces transformers 5 cleans up when decoding with a non-BPE model that asks for it.
const CLEAN_UP = [[" .", "."], [" ?", "?"], [" !", "!"], [" ,", ","], [" ' ", "'"], [" n't", "n't"], [" 'm", "'m"],
                  [" 's", "'s"], [" 've", "'ve"], [" 're", "'re"]];

function namedTemplates(value) {
  if (typeof value === "string") return { default: value };
  if (Array.isArray(value)) {   // tokenizer_config.json's named templates: [{name, template}]
    const named = value.filter((t) => t && typeof t === "object" && "name" in t);
    return Object.fromEntries(named.map((t) => [t.name, t.template]));
  }
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === "string"));
  }
  return {};
}

/** The messages as plain objects without null values, reasoning under every name templates read. */
function chatMessages(conversation, where) {
  if (!Array.isArray(conversation) || !conversation.length) {
    throw new BundleSignatureError(`${where}: a chat is a non-empty list of messages ({'role': 'user', 'content': ` +
                                   `'...'}), not ${JSON.stringify(conversation ?? null).slice(0, 80)}`);
  }
  return conversation.map((m) => {
    if (m === null || typeof m !== "object" || Array.isArray(m)) {
      throw new BundleSignatureError(`${where}: chat messages are dicts with 'role' and 'content', not ${typeof m}`);
    }
    let out = Object.fromEntries(Object.entries(m).filter(([, v]) => v !== null && v !== undefined));
    const key = REASONING_FIELDS.find((k) => k in out);
    if (key !== undefined) out = { thinking: out[key], ...out, reasoning_content: out[key] };
    return out;
  });
}

/**
 * A decode bundle's tokenizer (tokenizer.json + tokenizer_config.json through @huggingface/tokenizers)
 * and chat template (@huggingface/jinja), as the Python loader's BundleTokenizer (bundle/tokenizer.py)
 * reads them: the same ids, text and rendered templates.
 */
export class TextTokenizer {
  constructor(tokenizers, jinja, tokenizerBytes, configBytes, where, files) {
    this.where = where;
    this.files = files;
    this._jinja = jinja;
    this._compiled = new Map();
    const decoder = new TextDecoder("utf-8", { fatal: true });
    try {
      this.config = JSON.parse(decoder.decode(configBytes));
      if (this.config === null || typeof this.config !== "object" || Array.isArray(this.config)) {
        throw new Error("not a JSON object");
      }
    } catch (exc) {
      throw new BundleFormatError(message("TOKENIZER_CONFIG_UNREADABLE",
        { bundle: where, file: files[1], reason: String(exc.message).slice(0, 200) }));
    }
    try {
      const json = JSON.parse(decoder.decode(tokenizerBytes));
      this._modelType = json.model.type;
      /** The `@huggingface/tokenizers` Tokenizer underneath. */
      this.raw = new tokenizers.Tokenizer(json, this.config);
    } catch (exc) {
      throw new BundleFormatError(message("TOKENIZER_UNREADABLE",
        { bundle: where, file: files[0], reason: String(exc.message || exc.name).split("\n")[0].slice(0, 200) }));
    }
    /** The special tokens the tokenizer has, by name (bos_token, eos_token, ...). */
    this.specialTokensMap = {};
    for (const name of SPECIAL_TOKEN_NAMES) {
      const text = tokenText(this.config[name]);
      if (text !== null) this.specialTokensMap[name] = text;
    }
    /** The chat templates by name ("default": tokenizer_config.json's "chat_template" when a string). */
    this.chatTemplates = namedTemplates(this.config.chat_template);
  }

  /** The default chat template (null without one). */
  get chatTemplate() { return this.chatTemplates.default ?? null; }
  /** The number of token ids, added tokens included. */
  get vocabSize() { return this.raw.get_vocab(true).size; }
  get bosToken() { return this.specialTokensMap.bos_token ?? null; }
  get eosToken() { return this.specialTokensMap.eos_token ?? null; }
  /** The id of `token`, or null if it is not in the vocabulary. */
  tokenToId(token) { return this.raw.token_to_id(token) ?? null; }

  /** Token ids of `text`; `addSpecialTokens` (default true): the post-processor's, e.g. a bos token first. */
  encode(text, { addSpecialTokens = true } = {}) {
    if (typeof text !== "string") {
      throw new BundleSignatureError(`${this.where}: encode takes a str, not ${typeof text}`);
    }
    return this.raw.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  /** The text of `ids` (as transformers' fast tokenizers decode it; special tokens kept unless
   *  skipSpecialTokens). */
  decode(ids, { skipSpecialTokens = false } = {}) {
    let text = this.raw.decode(Array.from(ids, Number), { skip_special_tokens: skipSpecialTokens,
                                                            clean_up_tokenization_spaces: false });
    if (this.config.clean_up_tokenization_spaces && this._modelType !== "BPE") {
      for (const [before, after] of CLEAN_UP) text = text.split(before).join(after);
    }
    return text;
  }

  _template(chatTemplate, tools) {
    const named = this.chatTemplates;
    if (chatTemplate !== null && chatTemplate !== undefined) return named[chatTemplate] ?? chatTemplate;
    if (tools !== null && tools !== undefined && "tool_use" in named) return named.tool_use;
    if ("default" in named) return named.default;
    if (!Object.keys(named).length) {
      throw new BundleSignatureError(message("NO_CHAT_TEMPLATE", { bundle: this.where, file: this.files[1] }));
    }
    throw new BundleSignatureError(`${this.where}: the tokenizer has several chat templates and no default; pass ` +
                                   `chatTemplate: NAME, one of ${Object.keys(named).sort().join(", ")}`);
  }

  /**
   * The chat rendered as text, as transformers' `apply_chat_template(..., tokenize=False)` renders it (the
   * special tokens and `variables` are template variables): encode it with addSpecialTokens false.
   */
  applyChatTemplate(messages, { addGenerationPrompt = true, tools = null, documents = null, chatTemplate = null,
                                ...variables } = {}) {
    const source = this._template(chatTemplate, tools);
    const chat = chatMessages(messages, this.where);
    let compiled = this._compiled.get(source);
    if (!compiled) { compiled = new this._jinja.Template(source); this._compiled.set(source, compiled); }
    try {
      return compiled.render({ ...this.specialTokensMap, ...variables, messages: chat, tools, documents,
                               add_generation_prompt: addGenerationPrompt });
    } catch (exc) {
      throw new BundleSignatureError(message("CHAT_TEMPLATE_REFUSED", { bundle: this.where, reason: exc.message }));
    }
  }
}

/** Text pieces of a growing token sequence (bundle/tokenizer.py's TextStream): `push(id)` gives the new
 *  text, held back while the decoded tail is an incomplete character; `finish()` the rest. The pieces add
 *  up to the decoded sequence. */
export class TextStream {
  constructor(tokenizer, skipSpecialTokens = true) {
    this.tokenizer = tokenizer;
    this.skipSpecialTokens = skipSpecialTokens;
    this.ids = [];
    this.text = "";
  }

  push(token) {
    this.ids.push(Number(token));
    const text = this.tokenizer.decode(this.ids, { skipSpecialTokens: this.skipSpecialTokens });
    if (text.endsWith(REPLACEMENT) || !text.startsWith(this.text)) return "";
    const piece = text.slice(this.text.length);
    this.text = text;
    return piece;
  }

  finish() {
    const text = this.tokenizer.decode(this.ids, { skipSpecialTokens: this.skipSpecialTokens });
    if (!text.startsWith(this.text)) {
      throw new BundleError(`${this.tokenizer.where}: the tokenizer's decoder changed text it had given out; ` +
                            "streamed pieces would not add up to the text");
    }
    const piece = text.slice(this.text.length);
    this.text = text;
    return piece;
  }
}

async function loadTokenizer(manifest, files, where, name, options) {
  const entry = manifest.decoder.tokenizer;
  if (!entry) return null;
  const names = [entry.json, entry.config];
  const missing = names.filter((n) => !files.has(n));
  if (missing.length) {
    const listed = missing.map((n) => `'${n}'`).join(", ");
    throw new BundleFormatError(`${name}: the manifest's tokenizer names [${listed}], which the bundle does not ` +
                                "list; re-export it");
  }
  const [tokenizers, jinja] = await Promise.all([
    options.tokenizers || importText("@huggingface/tokenizers", `${name}: the bundle's tokenizer`),
    options.jinja || importText("@huggingface/jinja", `${name}: the bundle's chat template`),
  ]);
  return new TextTokenizer(tokenizers, jinja, files.get(names[0]), files.get(names[1]), name, names);
}

async function loadLanguageModel(manifest, files, where, options) {
  const info = manifest.decoder;
  for (const key of ["requires", "decoder"]) {
    if (!(key in manifest)) throw new BundleFormatError(`${where}: manifest has no '${key}'`);
  }
  if (!info.sampler) {
    throw new BundleFormatError(`${where}: the decode bundle has no sampler (decoder.sampler); it was written by ` +
                                "an older torch-webgpu: re-export it");
  }
  const name = options.name || where.replace(/\/+$/, "").split("/").pop();
  const tokenizer = await loadTokenizer(manifest, files, where, name, options);
  const device = await openDevice(manifest.requires, options);
  const lm = new LanguageModel(manifest, device, where, tokenizer);
  lm.name = name;
  lm._ownsDevice = !options.device;
  try {
    await lm._build(files, options);
  } catch (exc) {
    lm.release();
    throw exc;
  }
  return lm;
}

/**
 * A loaded decode bundle: `generate` (text), `generateIds` (token ids) and `chat` stream what the model
 * writes. The prefill plan of the prompt's bucket fills the KV cache, then the decode plan runs once per
 * token; the weights are uploaded once and bound by every plan, the cache and the logits stay on the device
 * (handed from plan to plan), the device sampler picks each token there, and one 4-byte id is read back per
 * step.
 */
export class LanguageModel {
  constructor(manifest, device, where, tokenizer) {
    const info = manifest.decoder;
    this.manifest = manifest;
    this.device = device;
    this.where = where;
    this.name = where.replace(/\/+$/, "").split("/").pop();
    /** The bundle's tokenizer (encode, decode, applyChatTemplate), or null for a bundle without one. */
    this.tokenizer = tokenizer;
    this.maxLen = Number(info.max_len);
    this.buckets = info.prompt_buckets.map(Number);
    this.vocabSize = Number(info.vocab_size);
    this.eosTokenIds = info.eos_token_ids.map(Number);
    /** The last generation: prompt and new token counts, milliseconds of prefill (to the first new token)
     *  and decode (from there to the last), of host time recording and submitting them (prefillHostMs,
     *  decodeHostMs), and the new ids. */
    this.stats = null;
    this.plans = new Map();
    this.weightBuffers = new Map();
    this.slotBuffers = new Map();
    this._owned = [];
    this._running = false;
  }

  _buffer(size, label, usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST) {
    const buffer = this.device.createBuffer({ size: alignUp(Math.max(Number(size), 4), 4), usage, label });
    this._owned.push(buffer);
    return buffer;
  }

  async _build(files, options) {
    const info = this.manifest.decoder;
    const where = this.where;
    const weights = parseSafetensors(files.get(WEIGHTS_FILE) || new Uint8Array(0), `${where}: ${WEIGHTS_FILE}`);
    const docs = new Map(Object.entries(info.phases).map(([name, phase]) => [name,
                                                                             planFromDoc(phase.plan, files, where)]));
    for (const bucket of this.buckets) {
      if (!docs.has(`prefill-${bucket}`)) throw new BundleFormatError(`${where}: no prefill-${bucket} phase`);
    }
    if (!docs.has("decode")) throw new BundleFormatError(`${where}: the decode bundle has no decode phase`);
    await withErrorScope(this.device, `${where}: WebGPU rejected the bundle's setup`, async () => {
      // The phases run one at a time (their outputs are copied out): their per-call buffers share storage.
      for (const [slot, size] of sharedSlotSizes([...docs.values()])) {
        this.slotBuffers.set(slot, this._buffer(size, slot));
      }
    });
    const tuning = tuningPolicy(options, this.device);
    for (const [name, phase] of Object.entries(info.phases)) {
      const plan = docs.get(name);
      const tensor = (key) => {
        const t = weights.get(key);
        if (!t) throw new BundleFormatError(`${where}: weight ${key} of phase ${name} is not in ${WEIGHTS_FILE}`);
        return t;
      };
      plan.constants = new Map(phase.constants.map(([constName, key]) => [constName, tensor(key)]));
      const shared = new Map();
      await withErrorScope(this.device, `${where}: WebGPU rejected the bundle's weights`, async () => {
        for (const [constName, key, isWeight] of phase.constants.slice(0, plan.num_constant_inputs)) {
          if (isWeight) shared.set(constName, this._weightBuffer(key, tensor(key)));
        }
      });
      const phaseManifest = { inputs: phase.inputs, outputs: phase.outputs, requires: this.manifest.requires,
                              dispatches: phase.dispatches };
      const model = new Model(phaseManifest, plan, this.device, `${where} (${name})`);
      model._tuning = tuning;
      this.plans.set(name, model);
      await model._build({ constants: shared, slots: this.slotBuffers });
      plan.constants = new Map();   // uploaded: the host copies can go
    }
    const decode = this.plans.get("decode");
    const [logits, cache] = decode.outputs;
    const scores = info.sampler.dtype;
    if (!(scores in SCORE_BYTES)) throw new BundleFormatError(`${where}: sampler dtype ${scores} is not f32 or f16`);
    await withErrorScope(this.device, `${where}: WebGPU rejected the bundle's sampler`, async () => {
      this._logits = this._buffer(product(logits.shape) * SCORE_BYTES[scores], "torch-webgpu-logits");
      const cacheBytes = product(cache.shape) * ITEMSIZE[decode.plan.outputs[1].device_dtype];
      this._caches = [0, 1].map((k) => this._buffer(cacheBytes, `torch-webgpu-kv-cache-${k}`));
      this._token = this._buffer(4, "torch-webgpu-token");
      this._params = this._buffer(SAMPLER_PARAM_WORDS * 4, "torch-webgpu-sampler-params",
                                  GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      this._readback = this._buffer(4, "torch-webgpu-token-readback",
                                    GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
      const source = new TextDecoder().decode(files.get(info.sampler.wgsl) || new Uint8Array(0));
      if (!source) throw new BundleFormatError(`${where}: ${info.sampler.wgsl} is not among the bundle's files`);
      const module = this.device.createShaderModule({ code: source, label: info.sampler.wgsl });
      this._sampler = await this.device.createComputePipelineAsync({
        layout: "auto", compute: { module, entryPoint: "main" }, label: "torch-webgpu-sampler" });
      this._samplerGroup = this.device.createBindGroup({
        layout: this._sampler.getBindGroupLayout(0), label: "torch-webgpu-sampler",
        entries: [this._params, this._logits, this._token].map((buffer, binding) => ({ binding,
                                                                               resource: { buffer } })),
      });
    });
  }

  _weightBuffer(key, tensor) {
    if (!this.weightBuffers.has(key)) {
      const buffer = this._buffer(tensor.bytes.byteLength, key);
      let bytes = tensor.bytes;
      if (bytes.byteLength % 4) { bytes = new Uint8Array(alignUp(bytes.byteLength, 4)); bytes.set(tensor.bytes); }
      this.device.queue.writeBuffer(buffer, 0, bytes.buffer, bytes.byteOffset, bytes.byteLength);
      this.weightBuffers.set(key, buffer);
    }
    return this.weightBuffers.get(key);
  }

  /** Bytes of the device buffers the model holds: weights, the phases' own buffers, shared slots, the KV
   *  caches, logits and sampler state. */
  get deviceBytes() {
    const owned = new Set(this._owned);
    for (const model of this.plans.values()) for (const b of model._owned) owned.add(b);
    let total = 0;
    for (const b of owned) total += b.size;
    return total;
  }

  _bucket(length) {
    for (const bucket of this.buckets) if (length <= bucket) return bucket;
    throw new BundleSignatureError(message("PROMPT_OVER_BUCKET", { bundle: this.name, length,
                                                                   largest: this.buckets[this.buckets.length - 1] }));
  }

  _textTokenizer() {
    if (this.tokenizer === null) throw new BundleSignatureError(message("NO_TOKENIZER", { bundle: this.name }));
    return this.tokenizer;
  }

  /** Token ids of a prompt: text (encoded by the bundle's tokenizer, its special tokens added) or ids. */
  _promptIds(prompt) {
    if (typeof prompt === "string") return this._textTokenizer().encode(prompt);
    if (Array.isArray(prompt) || ArrayBuffer.isView(prompt)) return Array.from(prompt, Number);
    throw new TypeError(`${this.name}: a prompt is text (a string) or token ids (an array or typed array)`);
  }

  /** The number of new tokens to generate (BundleSignatureError for a prompt that cannot run): the Python
   *  loader's checks, in its order. */
  _checkPrompt(ids, maxNewTokens) {
    const length = ids.length;
    if (maxNewTokens === null || maxNewTokens === undefined) maxNewTokens = Math.max(this.maxLen - length, 0);
    if (length === 0 || !(maxNewTokens >= 0)) {
      throw new BundleSignatureError(message("EMPTY_PROMPT", { bundle: this.name }));
    }
    if (ids.some((t) => !Number.isInteger(t) || t < 0 || t >= this.vocabSize)) {
      throw new BundleSignatureError(message("PROMPT_IDS_RANGE", { bundle: this.name, vocab_size: this.vocabSize }));
    }
    if (length + maxNewTokens > this.maxLen) {
      throw new BundleSignatureError(message("PROMPT_OVER_MAX_LEN",
        { bundle: this.name, length, new_tokens: maxNewTokens, max_len: this.maxLen }));
    }
    this._bucket(length);
    return maxNewTokens;
  }

  /**
   * The new token ids of `prompt` (text or ids), streamed as each is read back: greedy, or with `doSample`
   * sampled on the device with `temperature`, `topK` and `topP` (transformers' order; a `seed` draws the
   * same tokens as in the Python loader). Up to `maxNewTokens` (default: until the KV cache is full) or an
   * end-of-sequence id (unless `stopAtEos` is false); `signal` (an AbortSignal) stops it between tokens
   * with the signal's reason. One generation runs at a time on a model.
   */
  async *generateIds(prompt, options = {}) {
    const ids = this._promptIds(prompt);
    yield* this._tokens(ids, this._checkPrompt(ids, options.maxNewTokens), options);
  }

  async *_tokens(ids, maxNewTokens, { doSample = false, temperature = 1.0, topK = 0, topP = 1.0, seed = 0,
                                      stopAtEos = true, signal = null } = {}) {
    samplerParams(this.vocabSize, { doSample, temperature, topK, topP });   // its errors before any work
    if (signal) signal.throwIfAborted();
    const length = ids.length;
    const bucket = this._bucket(length);
    const stats = { promptTokens: length, bucket, newTokens: 0, prefillMs: 0, decodeMs: 0, prefillHostMs: 0,
                    decodeHostMs: 0, ids: [] };
    if (maxNewTokens === 0) { this.stats = stats; return; }
    if (this._running) throw new BundleSignatureError(message("GENERATION_RUNNING", { bundle: this.name }));
    this._running = true;
    this.stats = stats;
    const device = this.device;
    const eos = new Set(this.eosTokenIds);
    const padded = new Int32Array(bucket);
    padded.set(ids);
    const start = performance.now();
    let firstAt = start;
    device.pushErrorScope("validation");
    device.pushErrorScope("out-of-memory");
    let failure = null;
    try {
      let recorder = new Recorder(device);
      this.plans.get(`prefill-${bucket}`)._recordInto(recorder, [padded, Int32Array.of(length - 1)],
                                                      [this._logits, this._caches[0]]);
      let cache = 0;
      let recordFrom = start;
      for (let step = 0; step < maxNewTokens; step++) {
        const params = samplerParams(this.vocabSize, { doSample, temperature, topK, topP }, samplerRng(seed, step));
        device.queue.writeBuffer(this._params, 0, params);
        recorder.dispatch(this._sampler, this._samplerGroup, [1, 1, 1]);
        recorder.copy(this._token, 0, this._readback, 0, 4);
        const last = step === maxNewTokens - 1;
        if (!last) {
          // The next step's decode (its token the sampler's, on the device) in a submit of its own: the id is
          // read back while it runs, and the host records the next step meanwhile.
          recorder.submit();
          const inputs = [this._token, Int32Array.of(length + step), this._caches[cache]];
          this.plans.get("decode")._recordInto(recorder, inputs, [this._logits, this._caches[1 - cache]]);
          cache = 1 - cache;
        }
        recorder.submit();
        // host time recording and submitting (not waiting): the first submit holds the prefill
        stats[step === 0 ? "prefillHostMs" : "decodeHostMs"] += performance.now() - recordFrom;
        await this._readback.mapAsync(GPUMapMode.READ, 0, 4);
        const token = new Int32Array(this._readback.getMappedRange(0, 4))[0];
        this._readback.unmap();
        const now = performance.now();
        if (step === 0) { firstAt = now; stats.prefillMs = now - start; } else stats.decodeMs = now - firstAt;
        stats.newTokens = step + 1;
        stats.ids.push(token);
        yield token;
        if ((stopAtEos && eos.has(token)) || last) break;
        if (signal) signal.throwIfAborted();
        recordFrom = performance.now();
        recorder = new Recorder(device);
      }
    } catch (exc) {
      failure = exc;
    } finally {
      this._running = false;
      const oom = await device.popErrorScope();
      const invalid = await device.popErrorScope();
      if (failure === null || !(failure instanceof BundleError)) {
        if (oom) failure = new BundleError(`${this.where}: generate ran out of device memory: ${oom.message}`);
        else if (invalid) failure = new BundleError(`${this.where}: WebGPU rejected a step: ${invalid.message}`);
      }
    }
    if (failure) throw failure;
  }

  /**
   * The text the model writes after `prompt` (text, encoded with the tokenizer's special tokens, or token
   * ids), streamed in pieces as tokens arrive: the continuation only, decoded without special tokens (unless
   * `skipSpecialTokens` is false); a character split across tokens comes whole, with its last token, and the
   * pieces add up to the decoded text. Options as generateIds.
   */
  async *generate(prompt, options = {}) {
    if (this.tokenizer === null && typeof prompt !== "string") {
      throw new BundleSignatureError(`${this.name} was exported without a tokenizer, so it gives token ids, not ` +
                                     "text: use generateIds(ids)");
    }
    const tokenizer = this._textTokenizer();
    const ids = this._promptIds(prompt);
    yield* this._pieces(tokenizer, ids, options);
  }

  async *_pieces(tokenizer, ids, options) {
    const text = new TextStream(tokenizer, options.skipSpecialTokens ?? true);
    for await (const token of this._tokens(ids, this._checkPrompt(ids, options.maxNewTokens), options)) {
      const piece = text.push(token);
      if (piece) yield piece;
    }
    const rest = text.finish();
    if (rest) yield rest;
  }

  /**
   * The assistant's reply to `messages` ([{role: "user", content: "..."}, ...]): the bundle's chat template
   * rendered with a generation prompt (`options.templateVariables`: more template variables, e.g. tools),
   * then generate of its tokens (no special tokens added: the template has them), streamed as text.
   */
  async *chat(messages, options = {}) {
    const tokenizer = this._textTokenizer();
    const variables = options.templateVariables || {};
    const text = tokenizer.applyChatTemplate(messages, { addGenerationPrompt: true, ...variables });
    yield* this._pieces(tokenizer, tokenizer.encode(text, { addSpecialTokens: false }), options);
  }

  /** Destroy the model's buffers, and its device if `load` created it (a device passed in stays). */
  release() {
    for (const model of this.plans.values()) model.release();
    for (const buffer of this._owned) buffer.destroy();
    this._owned = [];
    this.plans.clear();
    if (this._ownsDevice) this.device.destroy();
  }
}

// -- .npy files ------------------------------------------------------------------------------------------

const NPY_DTYPES = { "<f4": "float32", "<f2": "float16", "<i4": "int32", "<i8": "int64", "<i2": "int16",
                     "|i1": "int8", "|u1": "uint8", "|b1": "bool", "<u4": "uint32", "<u2": "uint16",
                     "<f8": "float64" };

/** A `numpy.save` file (C order, little-endian) as `{data, shape, dtype}`. */
export function parseNpy(buffer) {
  const bytes = buffer instanceof Uint8Array ? buffer : new Uint8Array(buffer);
  const magic = String.fromCharCode(...bytes.subarray(1, 6));
  if (bytes[0] !== 0x93 || magic !== "NUMPY") throw new TypeError("not a .npy file (numpy.save writes them)");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const major = bytes[6];
  const headerLength = major === 1 ? view.getUint16(8, true) : view.getUint32(8, true);
  const start = (major === 1 ? 10 : 12) + headerLength;
  const header = new TextDecoder().decode(bytes.subarray(major === 1 ? 10 : 12, start));
  const descr = /'descr':\s*'([^']+)'/.exec(header);
  const fortran = /'fortran_order':\s*(True|False)/.exec(header);
  const shapeMatch = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shapeMatch) throw new TypeError(`unreadable .npy header ${header.trim()}`);
  const dtype = NPY_DTYPES[descr[1].replace("=", "<")];
  if (!dtype) throw new TypeError(`.npy dtype ${descr[1]} is not supported (use little-endian numbers or bool)`);
  if (fortran[1] === "True") throw new TypeError(".npy file is in Fortran order; save a C-order array");
  const shape = shapeMatch[1].split(",").map((s) => s.trim()).filter((s) => s).map(Number);
  const Cls = typedArrayClass(dtype);
  const count = product(shape);
  const data = new Cls(bytes.slice(start, start + count * ITEMSIZE[dtype]).buffer);
  return { data, shape, dtype };
}

/** The module's API as one object: `import TorchWebGPU from "./torch-webgpu.js"`. */
const TorchWebGPU = {
  load, readBundle, parseSafetensors, tensorData, canonicalManifest, formatSignature, checkRequirements, unmet,
  limitsOf, evaluate, evaluateAll, readZip, parseNpy, assignMemory, sharedSlotSizes, samplerParams, Model,
  LanguageModel, TextTokenizer, TextStream, MESSAGES, BundleError, BundleFormatError, BundleIntegrityError,
  BundleRequirementError, BundleSignatureError, BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, VERSION,
};
export default TorchWebGPU;
