// Type declarations of torch-webgpu.js: run torch-webgpu bundles in the browser (or Node with the `webgpu`
// package) with WebGPU; decode bundles generate text.

/** Element types of bundle inputs and outputs (torch's names). */
export type DType = "float32" | "float16" | "int64" | "int32" | "int16" | "int8" | "uint8" | "bool";

export type TypedArray = Float32Array | Int32Array | BigInt64Array | Uint8Array | Int8Array | Int16Array |
  Uint16Array | Uint32Array | Float64Array;

/** One tensor of the signature: `shape` entries are null for a dynamic dimension. */
export interface TensorSpec { name: string; shape: (number | null)[]; dtype: DType }

/** A host tensor: `data` in row-major order (int64 as BigInt64Array, bool as Uint8Array, float16 as
 *  Float16Array where the host has it, else its raw bits as Uint16Array). */
export interface HostTensor { data: TypedArray; shape: number[]; dtype: DType }

/** A tensor on the model's device; its words are the device dtype (int64 and bool travel as int32). */
export interface DeviceTensor { buffer: GPUBuffer; shape: number[]; dtype: DType; deviceDtype: string; offset?: number }

/** What `run` takes for one input: a typed array (the signature's shape), a tensor, a GPUBuffer
 *  (zero-copy; STORAGE usage) or, for a host scalar input, a number. */
export type Input = TypedArray | { data: TypedArray; shape?: number[]; dtype?: DType } | GPUBuffer |
  { buffer: GPUBuffer; shape?: number[]; dtype?: DType; offset?: number } | number | bigint;

/** One output of `run`: a tensor, or for graphs that return sizes or None, a number or null. */
export type Output = HostTensor | DeviceTensor | number | null;

export interface RunOptions {
  /** "gpu": outputs stay on the device in new GPUBuffers the caller owns (destroy them). */
  output?: "host" | "gpu";
}

export interface LoadOptions {
  /** The device to run on (checked against the bundle's requirements); default: a new device from
   *  navigator.gpu's adapter with the features and limits the bundle needs. */
  device?: GPUDevice;
  /** The `GPU` object to take the adapter from (default navigator.gpu). */
  gpu?: GPU;
  adapterOptions?: GPURequestAdapterOptions;
  /** Library dispatches that carry variants: true times them once on this device and runs the fastest
   *  (winners kept in localStorage); false runs the defaults; "auto" (default) times on hardware adapters
   *  only (software ones such as SwiftShader keep the defaults). */
  autotune?: boolean | "auto";
  /** Problems under this many FLOPs keep the default variant (default 2^20). */
  autotuneMinFlops?: number;
  /** At most this many variants are timed (default 6). */
  autotuneCandidates?: number;
  /** Where winners are kept (default: localStorage); null keeps none. */
  autotuneCache?: { get(key: string): string | null; set(key: string, value: string): void } | null;
  /** The weights of a bundle exported with external weights: a safetensors file or name -> tensor. */
  weights?: ArrayBuffer | Uint8Array | Map<string, HostTensor | TypedArray> | Record<string, HostTensor | TypedArray>;
  /** The adapter's subgroup size as the bundle's requirements see it (the Python runtime's
   *  TORCH_WEBGPU_SUBGROUP_SIZE): 0 hides it, N declares the one size N (Dawn reports NVIDIA's as 4…128). */
  subgroupSize?: number;
  /** The bundle's name in error messages (default: the last part of its URL or path), e.g. when a page
   *  serves it under another name. */
  name?: string;
  /** A decode bundle's tokenizer libraries, when not `import`able by name (default: import
   *  "@huggingface/tokenizers" and "@huggingface/jinja", through the page's import map or node_modules). */
  tokenizers?: unknown;
  jinja?: unknown;
}

/** The bundle's needs: adapter features and limits (kebab-case names, as in the manifest). */
export interface Requirements { features: string[]; limits: Record<string, number> }

export interface Manifest {
  format: "torch-webgpu-bundle";
  format_version: number;
  producer: Record<string, string>;
  source: string;
  target: { name: string; key: string; f16: boolean };
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  output_structure: "single" | "sequence";
  requires: Requirements;
  dispatches: number;
  /** The low-IR plan: buffers, init and main nodes, executables (the runtime's only contract). */
  plan: Record<string, unknown>;
  files: Record<string, string>;
  manifest_sha256: string;
  external_weights?: { order: string[]; weights: Record<string, { name: string; shape: number[]; dtype: string }> };
}

/** A loaded bundle. */
export class Model {
  readonly manifest: Manifest;
  readonly device: GPUDevice;
  /** Entry point -> the variant each tunable library dispatch runs, and how it was chosen. */
  readonly variants: Record<string, { variant: string; how: "default" | "cached" | "timed"; timings?: Record<string, number> }>;
  /** Completed calls. */
  readonly calls: number;
  readonly inputs: TensorSpec[];
  readonly outputs: TensorSpec[];
  /** `(x: float32[4, 16]) -> (float32[4, 8])` */
  readonly signature: string;
  /** Run the model on `inputs` (in the signature's order, or by input name). Calls run one at a time. */
  run(inputs: Input[] | Record<string, Input> | Input, options?: RunOptions): Promise<Output[]>;
  /** Destroy the model's buffers, and its device if `load` created it (a device passed in stays). */
  release(): void;
}

/** How `generateIds`, `generate` and `chat` generate. */
export interface GenerateOptions {
  /** Default: until the KV cache (max_len) is full. */
  maxNewTokens?: number | null;
  /** Sample (temperature, then top-k, then top-p, as transformers applies them) instead of greedy. */
  doSample?: boolean;
  temperature?: number;
  /** 0: no top-k filter. */
  topK?: number;
  /** 1: no top-p filter. */
  topP?: number;
  /** The device sampler's Philox seed: the same seed draws the same tokens as the Python loader. */
  seed?: number | bigint;
  /** Stop at the model's end-of-sequence ids (default true). */
  stopAtEos?: boolean;
  /** Stops the generation between tokens; the stream then throws the signal's reason (an AbortError). */
  signal?: AbortSignal | null;
  /** Text streams: leave special tokens (e.g. the end-of-sequence token) out of the text (default true). */
  skipSpecialTokens?: boolean;
}

/** One message of a chat. */
export interface ChatMessage { role: "system" | "user" | "assistant" | string; content: string; [key: string]: unknown }

/** The last generation of a language model. */
export interface GenerationStats {
  promptTokens: number;
  /** The prefill bucket the prompt ran in (right-padded to it). */
  bucket: number;
  newTokens: number;
  /** From the call to the first new token read back (prefill, sampler, readback). */
  prefillMs: number;
  /** From the first new token to the last. */
  decodeMs: number;
  /** Host time recording and submitting the commands of the prefill (with the first decode step) and of
   *  the later steps: the rest is waiting for the device. */
  prefillHostMs: number;
  decodeHostMs: number;
  /** The new token ids. */
  ids: number[];
}

/** A decode bundle's tokenizer (tokenizer.json + tokenizer_config.json) and chat template, read as the Python
 *  loader's BundleTokenizer reads them. */
export class TextTokenizer {
  /** tokenizer_config.json */
  readonly config: Record<string, unknown>;
  /** The special tokens the tokenizer has, by name (bos_token, eos_token, ...). */
  readonly specialTokensMap: Record<string, string>;
  readonly chatTemplates: Record<string, string>;
  readonly chatTemplate: string | null;
  readonly vocabSize: number;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  /** The `@huggingface/tokenizers` Tokenizer underneath. */
  readonly raw: unknown;
  tokenToId(token: string): number | null;
  /** Token ids of `text` (with the post-processor's special tokens, e.g. a bos token, unless false). */
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  /** The text of `ids` (special tokens kept unless skipSpecialTokens). */
  decode(ids: Iterable<number>, options?: { skipSpecialTokens?: boolean }): string;
  /** The chat rendered as transformers' apply_chat_template(..., tokenize=False) renders it. */
  applyChatTemplate(messages: ChatMessage[], options?: { addGenerationPrompt?: boolean; tools?: unknown[] | null;
    documents?: unknown[] | null; chatTemplate?: string | null; [variable: string]: unknown }): string;
}

/** Text pieces of a growing token sequence that never split a character; they add up to the decoded text. */
export class TextStream {
  constructor(tokenizer: TextTokenizer, skipSpecialTokens?: boolean);
  readonly ids: number[];
  readonly text: string;
  /** The new text after `token` ("" while a character is incomplete). */
  push(token: number): string;
  /** What is left when the sequence is complete. */
  finish(): string;
}

/** A loaded decode bundle (a causal LM): prefill plans per prompt bucket and a decode plan sharing the weights,
 *  the KV cache on the device, the device sampler, one token id read back per step. */
export class LanguageModel {
  readonly manifest: Manifest & { kind: "decoder"; decoder: Record<string, any> };
  readonly device: GPUDevice;
  /** The bundle's tokenizer, or null for a bundle exported without one (token ids only). */
  readonly tokenizer: TextTokenizer | null;
  /** Prompt plus new tokens, at most (the KV cache's length). */
  readonly maxLen: number;
  /** Prompt lengths with a prefill plan; a prompt runs in the smallest that holds it. */
  readonly buckets: number[];
  readonly vocabSize: number;
  readonly eosTokenIds: number[];
  /** Bytes of the device buffers the model holds. */
  readonly deviceBytes: number;
  /** The last generation's figures. */
  readonly stats: GenerationStats | null;
  /** The new token ids of `prompt` (text or ids), as each is read back. One generation at a time. */
  generateIds(prompt: string | number[] | ArrayLike<number>, options?: GenerateOptions): AsyncGenerator<number>;
  /** The text the model writes after `prompt` (text or ids), streamed in pieces. */
  generate(prompt: string | number[] | ArrayLike<number>, options?: GenerateOptions): AsyncGenerator<string>;
  /** The assistant's reply to `messages` through the bundle's chat template, streamed in pieces;
   *  `templateVariables`: more variables for the template (e.g. tools). */
  chat(messages: ChatMessage[], options?: GenerateOptions & { templateVariables?: Record<string, unknown> }):
    AsyncGenerator<string>;
  /** Destroy the model's buffers, and its device if `load` created it. */
  release(): void;
}

/** Fetch and verify a bundle (directory URL, .zip URL, .zip Blob/ArrayBuffer or a Map of file -> bytes; under
 *  Node also a local directory or .zip path), check the adapter, upload the weights and build the pipelines.
 *  A decode bundle gives a LanguageModel. */
export function load(source: string | URL | Blob | ArrayBuffer | ArrayBufferView | Map<string, Uint8Array>,
                     options?: LoadOptions): Promise<Model | LanguageModel>;

/** The decode bundles' error texts, as torch_webgpu/bundle/messages.py has them ({placeholders}). */
export const MESSAGES: Record<string, string>;
/** The device sampler's 16 parameter words (kernels/sampling.py's layout). */
export function samplerParams(n: number,
                              options?: { doSample?: boolean; temperature?: number; topK?: number; topP?: number },
                              rng?: [number, number, number, number]): Uint32Array;
/** A plan's per-call buffers of disjoint live ranges renamed into shared slots (compiler/plan_memory.py). */
export function assignMemory<P>(plan: P): { plan: P; slots: Map<string, string[]> };
/** Slot name -> bytes serving that slot in each of `plans`. */
export function sharedSlotSizes(plans: unknown[]): Map<string, number>;

/** Throws BundleFormatError unless `manifest` is a bundle manifest of a format version this module reads. */
export function checkFormat(manifest: { format?: unknown; format_version?: unknown }, where?: string): void;

/** The verified manifest and files of a bundle (format version and every sha256 checked). */
export function readBundle(source: string | URL | Blob | ArrayBuffer | ArrayBufferView | Map<string, Uint8Array>):
  Promise<{ manifest: Manifest; files: Map<string, Uint8Array>; where: string; name: string }>;

export interface SafetensorsTensor { dtype: DType | "float64" | "uint32" | "uint16"; shape: number[]; bytes: Uint8Array }
/** The tensors of a safetensors file (views into its bytes). */
export function parseSafetensors(buffer: ArrayBuffer | Uint8Array, where?: string): Map<string, SafetensorsTensor>;
/** A typed array of a safetensors tensor's values. */
export function tensorData(tensor: SafetensorsTensor): TypedArray;
/** A numpy.save (.npy) file as a tensor. */
export function parseNpy(buffer: ArrayBuffer | Uint8Array): HostTensor;
/** The members of a .zip file (stored or deflated). */
export function readZip(buffer: ArrayBuffer | Uint8Array, where?: string): Promise<Map<string, Uint8Array>>;
/** The bytes a manifest's sha256 covers (Python's canonical JSON, without the self-hash key). */
export function canonicalManifest(text: string): string;
export function formatSignature(inputs: TensorSpec[], outputs: TensorSpec[]): string;
/** An adapter's or device's limits under the manifest's kebab-case names. */
export function limitsOf(gpu: GPUAdapter | GPUDevice, info?: GPUAdapterInfo): Record<string, number>;
/** One line per requirement not met (empty: all met). */
export function unmet(requires: Requirements, limits: Record<string, number>, features: Iterable<string>): string[];
export function checkRequirements(requires: Requirements, limits: Record<string, number>, features: Iterable<string>,
                                  what?: string): void;
/** A host index expression of the plan (`["dim", input, axis]`, `["muli", a, b]`, ...) for input shapes. */
export function evaluate(expr: number | unknown[], shapes: number[][]): number;
export function evaluateAll<T>(obj: T, shapes: number[][]): T;

export class BundleError extends Error {}
export class BundleFormatError extends BundleError {}
export class BundleIntegrityError extends BundleError {}
export class BundleRequirementError extends BundleError {}
export class BundleSignatureError extends BundleError {}

export const BUNDLE_FORMAT: "torch-webgpu-bundle";
export const BUNDLE_FORMAT_VERSION: number;
export const PLAN_FORMAT_VERSION: number;
export const VERSION: string;

declare const TorchWebGPU: {
  load: typeof load; readBundle: typeof readBundle; parseSafetensors: typeof parseSafetensors;
  tensorData: typeof tensorData; canonicalManifest: typeof canonicalManifest; formatSignature: typeof formatSignature;
  checkRequirements: typeof checkRequirements; unmet: typeof unmet; limitsOf: typeof limitsOf;
  evaluate: typeof evaluate; evaluateAll: typeof evaluateAll; readZip: typeof readZip; parseNpy: typeof parseNpy;
  Model: typeof Model; LanguageModel: typeof LanguageModel; TextTokenizer: typeof TextTokenizer;
  TextStream: typeof TextStream; MESSAGES: typeof MESSAGES; samplerParams: typeof samplerParams;
  assignMemory: typeof assignMemory; sharedSlotSizes: typeof sharedSlotSizes; BundleError: typeof BundleError;
  BundleFormatError: typeof BundleFormatError;
  BundleIntegrityError: typeof BundleIntegrityError; BundleRequirementError: typeof BundleRequirementError;
  BundleSignatureError: typeof BundleSignatureError; BUNDLE_FORMAT: typeof BUNDLE_FORMAT;
  BUNDLE_FORMAT_VERSION: typeof BUNDLE_FORMAT_VERSION; VERSION: typeof VERSION;
};
export default TorchWebGPU;
