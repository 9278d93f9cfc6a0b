// Type declarations of torch-webgpu.js: run torch-webgpu bundles in the browser with WebGPU.

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

/** Fetch and verify a bundle (directory URL, .zip URL, .zip Blob/ArrayBuffer or a Map of file -> bytes),
 *  check the adapter, upload the weights and build the pipelines. */
export function load(source: string | URL | Blob | ArrayBuffer | ArrayBufferView | Map<string, Uint8Array>,
                     options?: LoadOptions): Promise<Model>;

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
  Model: typeof Model; BundleError: typeof BundleError; BundleFormatError: typeof BundleFormatError;
  BundleIntegrityError: typeof BundleIntegrityError; BundleRequirementError: typeof BundleRequirementError;
  BundleSignatureError: typeof BundleSignatureError; BUNDLE_FORMAT: typeof BUNDLE_FORMAT;
  BUNDLE_FORMAT_VERSION: typeof BUNDLE_FORMAT_VERSION; VERSION: typeof VERSION;
};
export default TorchWebGPU;
