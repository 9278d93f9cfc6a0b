"""Differential tests of the spirv-dialect → WGSL translator on real IREE executables and a real Dawn device.

Every executable IREE emits for the test models runs twice on Dawn with identical random inputs: from
IREE's SPIR-V binary (when Tint can take it: no non-finite constants, no push constants) and from our
WGSL. Whole host programs (initializers and `main$async`, evaluated by a small interpreter here)
also run on our WGSL alone and are compared with torch on CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mlir_passes.spirv_to_wgsl import UnsupportedSpirvError, WGSLExecutable, translate_spirv_module
from tests.compiler.models import MLP, CausalAttention, ConvBlock, EmbeddingArgmax, Fn, GPT2Logits, tiny_gpt2

IREE_FLAGS = [
    "--iree-input-demote-f64-to-f32", "--iree-input-demote-i64-to-i32",
    "--iree-stream-resource-alias-mutable-bindings", "--iree-stream-resource-min-offset-alignment=256",
    "--compile-to=hal", "--iree-hal-memoization=false", "--iree-hal-indirect-command-buffers=false",
]
FEATURES = "spirv:v1.3,cap:Shader"
F16_FEATURES = FEATURES + ",cap:Float16,cap:StorageBuffer16BitAccess,ext:SPV_KHR_16bit_storage"


# ---- test models (shared with tests/compiler) ----------------------------------------------------
def _gpt2_small():
    return GPT2Logits(tiny_gpt2(vocab_size=128, n_head=4))


def _shapes(x, y):
    return torch.cat([x.t(), y.flip(0)], 0)[1:5]


def _causal_softmax(x):
    mask = torch.triu(torch.ones(x.shape[-1], x.shape[-1], dtype=torch.bool), 1)
    return x.masked_fill(mask, float("-inf")).softmax(-1)


def _with_nans(*shape):
    def make():
        x = torch.randn(*shape)
        x.view(-1)[::7] = float("nan")
        x.view(-1)[3::11] = float("inf")
        return (x,)
    return make


@dataclass
class Spec:
    """A test model: factory, example inputs, and how to check it."""

    make: object
    args: object
    run_args: object = None  # inputs for the end-to-end run (default: `args`), e.g. with NaNs
    end_to_end: bool = True  # compare the whole host program, run on our WGSL, with torch CPU
    dynamic: dict | None = None  # torch.export dynamic_shapes (push constants)
    f16: bool = False
    nan_inputs: bool = False  # put NaN/inf in the random inputs of the SPIR-V comparison
    subgroups: bool = False  # target with subgroup ops at the device's probed subgroup size
    slow: bool = False


def fn(f):
    return lambda: Fn(f)


MODELS = {
    "mlp": Spec(MLP, lambda: (torch.randn(4, 16),)),
    "softmax": Spec(fn(lambda x: torch.softmax(x, -1)), lambda: (torch.randn(4, 64),)),
    "layernorm": Spec(lambda: nn.LayerNorm(32), lambda: (torch.randn(8, 32),)),
    "gelu_tanh": Spec(fn(lambda x: F.gelu(x, approximate="tanh")), lambda: (torch.randn(8, 32),)),
    "gelu_erf": Spec(fn(F.gelu), lambda: (torch.randn(8, 32),)),
    "conv_bn_relu_pool": Spec(ConvBlock, lambda: (torch.randn(2, 3, 8, 8),)),
    "causal_attention": Spec(CausalAttention, lambda: (torch.randn(2, 8, 32),)),
    "embedding_argmax": Spec(lambda: EmbeddingArgmax(classes=50), lambda: (torch.randint(0, 50, (2, 6)),)),
    "cumsum": Spec(fn(lambda x: torch.cumsum(x, 1)), lambda: (torch.randn(4, 16),)),
    "mean_var": Spec(fn(lambda x: (x.mean(1), x.var(1))), lambda: (torch.randn(4, 16),)),
    "transpose_cat_slice_flip": Spec(fn(_shapes), lambda: (torch.randn(8, 6), torch.randn(8, 8))),
    "matmul_256": Spec(fn(torch.matmul), lambda: (torch.randn(256, 256), torch.randn(256, 256))),
    "f16_mlp": Spec(lambda: MLP(torch.float16), lambda: (torch.randn(4, 16, dtype=torch.float16),), f16=True),
    "maxpool": Spec(fn(lambda x: F.max_pool2d(x, 2)), lambda: (torch.randn(2, 3, 8, 8),)),
    "argmax": Spec(fn(lambda x: torch.argmax(x, -1)), lambda: (torch.randn(4, 50),)),
    "amax_nan": Spec(fn(lambda x: torch.amax(x, -1)), lambda: (torch.randn(4, 50),), _with_nans(4, 50),
                     nan_inputs=True),
    "packed_bool": Spec(fn(lambda x: x > 0), lambda: (torch.randn(3, 7),)),
    "isnan_isinf": Spec(fn(lambda x: torch.where(torch.isnan(x) | torch.isinf(x), torch.zeros_like(x), x)),
                        lambda: (torch.randn(4, 50),), _with_nans(4, 50), nan_inputs=True),
    # IREE lowers minimum to `a < b ? a : b` (a NaN in `a` is dropped, unlike torch): compared with
    # IREE's SPIR-V on NaN inputs only.
    "minimum_nan": Spec(fn(torch.minimum), lambda: (torch.randn(4, 50), torch.randn(4, 50)),
                        end_to_end=False, nan_inputs=True),
    "int_div_mod_shift": Spec(fn(lambda i: (i // 3) % 5 + (i >> 1)),
                              lambda: (torch.randint(-100, 100, (4, 16), dtype=torch.int32),)),
    "causal_softmax": Spec(fn(_causal_softmax), lambda: (torch.randn(2, 8, 8),)),
    "softmax_subgroups": Spec(fn(lambda x: torch.softmax(x, -1)), lambda: (torch.randn(4, 64),),
                              subgroups=True),
    "layernorm_subgroups": Spec(lambda: nn.LayerNorm(32), lambda: (torch.randn(8, 32),), subgroups=True),
    "mlp_subgroups": Spec(MLP, lambda: (torch.randn(4, 16),), subgroups=True),
    "gpt2_small": Spec(_gpt2_small, lambda: (torch.randint(0, 128, (1, 16)),), slow=True),
    # Wider op coverage (slow: one IREE compile each).
    "sort_topk": Spec(fn(lambda x: (torch.sort(x, -1).values, torch.topk(x, 4, -1).values)),
                      lambda: (torch.randn(8, 64),), slow=True),
    "uint8_input": Spec(fn(lambda x: x.float() / 255),
                        lambda: (torch.randint(0, 255, (13, 17), dtype=torch.uint8),), slow=True),
    "transcendentals": Spec(fn(lambda x: torch.exp(x).log1p() ** 1.5 + torch.sin(x) * torch.atan2(x, x + 1)
                               + torch.erf(x) + torch.tanh(x) + torch.sigmoid(x) + F.silu(x)),
                            lambda: (torch.randn(64, 64),), slow=True),
    "rounding": Spec(fn(lambda x: torch.round(x * 3).clamp(-2, 2) + torch.floor(x) + torch.sign(x)
                        + torch.remainder(x, 0.7)), lambda: (torch.randn(64, 64),), slow=True),
    "int32_arith": Spec(fn(lambda a, b: (a * b + a // (b.abs() + 1) - a % 7).abs().max(dim=1).values),
                        lambda: tuple(torch.randint(-1000, 1000, (16, 16), dtype=torch.int32) for _ in "ab"),
                        slow=True),
    "argmin_argmax": Spec(fn(lambda x: torch.argmin(x, 0) + torch.argmax(x, 1)),
                          lambda: (torch.randn(37, 37),), slow=True),
    "logsumexp": Spec(fn(lambda x: torch.logsumexp(x, -1)), lambda: (torch.randn(16, 300),), slow=True),
    "gather_index_select": Spec(fn(lambda x, i, j: (torch.gather(x, 1, i), x.index_select(0, j))),
                                lambda: (torch.randn(8, 32), torch.randint(0, 32, (8, 16)),
                                         torch.randint(0, 8, (10,))), slow=True),
    "pool_interpolate": Spec(fn(lambda x: F.interpolate(F.avg_pool2d(x, 3, stride=2), scale_factor=2,
                                                        mode="bilinear")),
                             lambda: (torch.randn(1, 4, 17, 17),), slow=True),
    "dynamic_softmax": Spec(fn(lambda x: torch.softmax(x * 2.0 + 1.0, -1)), lambda: (torch.randn(4, 64),),
                            lambda: (torch.randn(5, 64),), dynamic={"b": (0, 0)}),
}


# ---- IREE compilation and the host program -------------------------------------------------------
@dataclass
class Dispatch:
    """One hal.command_buffer.dispatch of the host program, with its values evaluated."""

    entry_point: str
    workgroups: tuple[int, int, int]
    constants: list[int]
    bindings: list[tuple[str, int, int]]  # (buffer SSA name, byte offset, byte length)


@dataclass
class HostCommand:
    """A host-program step: ('dispatch', Dispatch) | ('fill', buf, off, len, pattern) | ('copy', ...)."""

    kind: str
    args: tuple


@dataclass
class HostProgram:
    """IREE's flat `main$async` evaluated for concrete input shapes (a test-only interpreter)."""

    inputs: dict[str, int]  # buffer name → argument index
    allocs: dict[str, int]  # buffer name → byte size
    commands: list[HostCommand]
    outputs: list[tuple[str, int, int]]  # (buffer, offset, length) per returned view
    constant_buffers: bool  # weights in constant globals (not runnable here)
    constants: dict[str, bytes] = field(default_factory=dict)  # buffer key → bytes imported from the program

    @property
    def dispatches(self) -> list[Dispatch]:
        return [c.args[0] for c in self.commands if c.kind == "dispatch"]


_NAME = r"%[\w$.-]+"
_ARITH = {
    "muli": lambda a, b: a * b, "addi": lambda a, b: a + b, "subi": lambda a, b: a - b,
    "divui": lambda a, b: a // b, "divsi": lambda a, b: int(a / b), "remui": lambda a, b: a % b,
    "ceildivui": lambda a, b: -(-a // b), "ceildivsi": lambda a, b: -(-a // b),
    "floordivsi": lambda a, b: a // b, "remsi": lambda a, b: int(np.fmod(a, b)),
    "minsi": min, "maxsi": max, "minui": min, "maxui": max,
    "andi": lambda a, b: a & b, "ori": lambda a, b: a | b, "xori": lambda a, b: a ^ b,
    "shli": lambda a, b: a << b, "shrui": lambda a, b: a >> b, "shrsi": lambda a, b: a >> b,
    "select": lambda c, a, b: a if c else b,
    "index_castui": lambda a: a, "index_cast": lambda a: a, "extui": lambda a: a, "extsi": lambda a: a,
    "trunci": lambda a: a & 0xFFFFFFFF,
}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
        "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
        "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
        "uge": lambda a, b: a >= b}


def _function_bodies(hal: str) -> list[str]:
    """Initializers that make buffers (imported or computed constants), then `main$async`."""
    bodies = []
    for m in re.finditer(r"^  (util\.initializer \{|util\.func public @main\$async\()", hal, re.MULTILINE):
        body = hal[m.start():]
        end = re.search(r"^  \}", body, re.MULTILINE)
        body = body[:end.start()] if end else body
        if m[1].startswith("util.func") or re.search(r"util\.global\.store .* : !hal\.buffer", body):
            bodies.append(body)
    return bodies


def evaluate_host_program(hal: str, shapes: list[tuple[int, ...]]) -> HostProgram:
    """Evaluate the dispatching initializers and `main$async` of a `--compile-to=hal` program for
    inputs of `shapes` (straight-line code: allocations, index arithmetic, dispatches, fills, copies)."""
    prog = HostProgram({}, {}, [], [], False)
    stored: dict[str, str] = {}  # util.global symbol → buffer key
    for index, body in enumerate(_function_bodies(hal)):
        _evaluate_body(body, f"f{index}:", shapes, prog, stored)
    return prog


def _evaluate_body(body: str, scope: str, shapes, prog: HostProgram, stored: dict[str, str]) -> None:
    env: dict[str, int] = {}
    buffers: dict[str, str] = {}  # SSA name → buffer key
    views: dict[str, tuple[str, int, int]] = {}
    functions: dict[str, str] = {}  # function id SSA name → entry point
    blobs: dict[str, bytes] = {}  # util.buffer.constant contents
    branch_args: dict[str, list[str]] = {}  # block → operands of the first branch to it (the import path)
    lines = body.splitlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if m := re.match(rf"({_NAME}) = util\.buffer\.constant .*#util\.composite<\d+xi8, \[$", line):
            blobs[m[1]] = _composite_bytes(lines[i + 1:])
        elif m := re.match(rf"({_NAME}), ({_NAME}) = hal\.allocator\.import<.*source\(({_NAME}) : "
                           rf"!util\.buffer\)\[({_NAME}), ({_NAME})\]", line):
            if blobs.get(m[3]) is None:
                prog.constant_buffers = True
            else:
                buffers[m[2]] = scope + m[2]
                prog.constants[scope + m[2]] = blobs[m[3]][env[m[4]]:env[m[4]] + env[m[5]]]
        elif m := re.match(r"cf\.(?:cond_)?br .*?\^(bb\d+)\(([^:]*):", line):
            branch_args.setdefault(m[1], re.findall(_NAME, m[2]))
        elif m := re.match(r"\^(bb\d+)\((.*)\)", line):
            for arg, value in zip(re.findall(rf"({_NAME}):", m[2]), branch_args.get(m[1], []), strict=False):
                if value in buffers:
                    buffers[arg] = buffers[value]
        elif m := re.match(rf"({_NAME}) = arith\.constant (-?\d+|true|false) : ", line):
            env[m[1]] = {"true": 1, "false": 0}[m[2]] if m[2] in ("true", "false") else int(m[2])
        elif m := re.match(rf"({_NAME}) = hal\.buffer_view\.dim<%arg(\d+) : [^>]*>\[(\d+)\]", line):
            env[m[1]] = shapes[int(m[2])][int(m[3])]
        elif m := re.match(rf"({_NAME}) = hal\.buffer_view\.buffer<%arg(\d+) ", line):
            buffers[m[1]] = scope + m[1]
            prog.inputs[scope + m[1]] = int(m[2])
        elif m := re.match(rf"({_NAME}) = hal\.device\.queue\.alloca<.*!hal\.buffer\{{({_NAME})\}}", line):
            buffers[m[1]] = scope + m[1]
            prog.allocs[scope + m[1]] = env[m[2]]
        elif m := re.match(rf"({_NAME}) = util\.global\.load immutable @([\w$.-]+) : !hal\.buffer", line):
            if m[2] in stored:
                buffers[m[1]] = stored[m[2]]
            else:
                prog.constant_buffers = True
        elif m := re.match(rf"util\.global\.store ({_NAME}), @([\w$.-]+) : !hal\.buffer", line):
            stored[m[2]] = buffers[m[1]]
        elif m := re.match(rf"({_NAME}) = arith\.cmpi (\w+), ({_NAME}), ({_NAME})", line):
            env[m[1]] = int(_CMP[m[2]](env[m[3]], env[m[4]]))
        elif m := re.match(rf"({_NAME}) = arith\.(\w+) ([^:]*) :", line):
            env[m[1]] = _ARITH[m[2]](*(env[x] for x in re.findall(_NAME, m[3])))
        elif m := re.match(rf"({_NAME}) = hal\.executable\.lookup\.function .*::@([^)]+)\) : i64", line):
            functions[m[1]] = m[2].strip('"')
        elif "hal.command_buffer.dispatch<" in line:
            entry = functions[re.search(rf"\)\[({_NAME})\] workgroups", line)[1]]
            groups = re.search(r"workgroups\(\[([^\]]*)\]\)", line)[1].split(",")
            consts = re.search(r"constants\(\[([^\]]*)\]\)", line)
            constants = [env[x.split(":")[0].strip()] for x in consts[1].split(",")] if consts else []
            bindings = []
            for follow in lines[i + 1:]:
                if b := re.search(rf"\(({_NAME}) : !hal\.buffer\)\[({_NAME}), ({_NAME})\]", follow):
                    bindings.append((buffers.get(b[1], b[1]), env[b[2]], env[b[3]]))
                if "])" in follow:
                    break
            prog.commands.append(HostCommand("dispatch", (Dispatch(
                entry, tuple(env[g.strip()] for g in groups), constants, bindings),)))
        elif "hal.command_buffer.fill_buffer<" in line:
            m = re.search(rf"target\(({_NAME}) : !hal\.buffer\)\[({_NAME}), ({_NAME})\] "
                          rf"pattern\(({_NAME}) : i(\d+)\)", line)
            width, pattern = int(m[5]), env[m[4]] & ((1 << int(m[5])) - 1)
            word = int.from_bytes(pattern.to_bytes(width // 8, "little") * (32 // width), "little")
            prog.commands.append(HostCommand("fill", (buffers[m[1]], env[m[2]], env[m[3]], word)))
        elif "hal.command_buffer.copy_buffer<" in line:
            m = re.search(rf"source\(({_NAME}) : !hal\.buffer\)\[({_NAME})\] target\(({_NAME}) : "
                          rf"!hal\.buffer\)\[({_NAME})\] length\(({_NAME})\)", line)
            prog.commands.append(HostCommand("copy", (buffers[m[1]], env[m[2]], buffers[m[3]], env[m[4]],
                                                      env[m[5]])))
        elif m := re.match(rf"({_NAME}) = hal\.buffer_view\.create buffer\(({_NAME}) : !hal\.buffer\)"
                           rf"\[({_NAME}), ({_NAME})\]", line):
            views[m[1]] = (buffers[m[2]], env[m[3]], env[m[4]])
        elif line.startswith("util.return") and views:
            prog.outputs = [views[v] for v in re.findall(_NAME, line.split(":")[0])]


def _composite_bytes(lines: list[str]) -> bytes | None:
    """Bytes of a `#util.composite` of dense attributes (None when it holds resources we cannot read)."""
    from iree.compiler import ir

    out = b""
    with ir.Context():
        for line in lines:
            line = line.strip().rstrip(",")
            if line.startswith("]>"):
                return out
            if not line.startswith("dense<"):
                return None
            out += np.array(ir.DenseElementsAttr(ir.Attribute.parse(line))).tobytes()
    return None


@dataclass
class Executable:
    """One IREE executable: its spirv-dialect text, SPIR-V binary, and our translation."""

    name: str
    spirv_mlir: str
    spirv_binary: bytes
    wgsl: WGSLExecutable | None = None
    error: Exception | None = None


@dataclass
class CompiledModel:
    name: str
    spec: Spec
    state: list[torch.Tensor]  # parameters and buffers, passed as leading inputs
    model: nn.Module
    hal: str
    executables: list[Executable] = field(default_factory=list)

    def inputs(self, args: tuple) -> list[torch.Tensor]:
        return [*self.state, *args]

    def program(self, args: tuple) -> HostProgram:
        return evaluate_host_program(self.hal, [tuple(t.shape) for t in self.inputs(args)])


class StateAsInputs(nn.Module):
    """Wraps a model so its parameters and buffers are graph inputs, as the compile backend keeps them."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]

    def forward(self, *args):
        state = dict(zip(self.names, args[:len(self.names)], strict=True))
        return torch.func.functional_call(self.model, state, args[len(self.names):])


SUBGROUP_FEATURES = FEATURES + ",cap:GroupNonUniform,cap:GroupNonUniformShuffle,cap:GroupNonUniformArithmetic"


def subgroup_target(size: int) -> str:
    """A `hal.device.targets` value whose SPIR-V may use subgroup ops of a fixed `size`."""
    wgp = (f"compute = fp32, storage = b32, subgroup = shuffle|arithmetic, dot = none, mma = [], "
           f"subgroup_size_choices = [{size}], max_workgroup_sizes = [128, 128, 64], "
           f"max_thread_count_per_workgroup = 128, max_workgroup_memory_bytes = 16384, "
           f"max_workgroup_counts = [65535, 65535, 65535]")
    info = f'#iree_gpu.target<arch = "webgpu", features = "{SUBGROUP_FEATURES}", wgp = <{wgp}>>'
    return (f'[#hal.device.target<"vulkan", [#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb", '
            f"{{iree_codegen.target_info = {info}}}>]>]")


def probe_subgroup_size(rt) -> int | None:
    """The subgroup size every invocation of a 64-wide workgroup reports, or None without one size."""
    if "subgroups" not in rt.info.features:
        return None
    code = """enable subgroups;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(subgroup_size) size: u32,
                                     @builtin(local_invocation_index) i: u32) { out[i] = size; }"""
    buf = rt.allocate(256)
    try:
        rt.dispatch(rt.kernel(code, "main", label="probe-subgroup-size"), [buf], (1, 1, 1))
        sizes = set(rt.download_array(buf, np.uint32, 64).tolist())
    finally:
        rt.free(buf)
    return sizes.pop() if len(sizes) == 1 else None


def _compile(name: str, directory: Path, subgroup_size: int | None = None) -> CompiledModel:
    import iree.compiler as ic
    from torch.export import Dim
    from torch_mlir import fx

    torch.manual_seed(0)
    spec = MODELS[name]
    model, args = spec.make().eval(), spec.args()
    wrapped = StateAsInputs(model)
    state = [t.detach() for t in [*model.parameters(), *model.buffers()]]
    dynamic = None
    if spec.dynamic:
        dims = {name: Dim(name, min=2, max=4096) for name in spec.dynamic}
        per_arg = ({d: dims[n] for n, (a, d) in spec.dynamic.items() if a == i} for i in range(len(args)))
        dynamic = {"args": (*[None] * len(state), *per_arg)}
    module = fx.export_and_import(wrapped, *state, *args, dynamic_shapes=dynamic, output_type="torch")
    dump = directory / name
    dump.mkdir(parents=True, exist_ok=True)
    features = F16_FEATURES if spec.f16 else FEATURES
    source, backends = str(module), ["vulkan-spirv"]
    if spec.subgroups:
        targets = f"module attributes {{hal.device.targets = {subgroup_target(subgroup_size)}}}"
        source = re.sub(r"^module", targets, source, count=1, flags=re.MULTILINE)
        backends = []
    hal = ic.compile_str(source, input_type="torch", target_backends=backends, extra_args=[
        *IREE_FLAGS, f"--iree-vulkan-target-features={features}",
        f"--iree-hal-dump-executable-intermediates-to={dump}",
        f"--iree-hal-dump-executable-binaries-to={dump}"])
    hal = hal.decode() if isinstance(hal, bytes) else hal
    compiled = CompiledModel(name, spec, state, model, hal)
    for path in sorted(dump.glob("*.spirv.mlir")):
        binary = path.with_name(path.name.replace(".spirv.mlir", ".spv")).read_bytes()
        exe = Executable(path.name, path.read_text(), binary)
        try:
            (exe.wgsl,) = translate_spirv_module(exe.spirv_mlir)
        except UnsupportedSpirvError as err:
            exe.error = err
        compiled.executables.append(exe)
    return compiled


@pytest.fixture(scope="session")
def compiled_models(tmp_path_factory, rt):
    """Compiles each test model at most once per session (lazily: only the models a test asks for)."""
    directory = tmp_path_factory.mktemp("iree")
    cache: dict[str, CompiledModel] = {}

    def get(name: str) -> CompiledModel:
        if name not in cache:
            size = None
            if MODELS[name].subgroups:
                size = probe_subgroup_size(rt)
                if size is None:
                    pytest.skip("adapter has no subgroups of one fixed size")
            cache[name] = _compile(name, directory, size)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def rt():
    """The process-wide Runtime on the real adapter."""
    from torch_webgpu.runtime import get_runtime

    return get_runtime()


# ---- running one dispatch -------------------------------------------------------------------------
_NONFINITE_HEX = re.compile(r"0x(7F8|FF8|7FC|FFC|7C0|FC0|7E0|FE0)[0-9A-F]*\b", re.IGNORECASE)


def has_nonfinite_constants(spirv_mlir: str) -> bool:
    return bool(_NONFINITE_HEX.search(spirv_mlir) or re.search(r"\b(inf|nan)\b", spirv_mlir, re.IGNORECASE))


def spirv_runs_on_dawn(spirv_mlir: str, finite_inputs: bool) -> str | None:
    """Why IREE's SPIR-V binary must not be given to Dawn, or None when it can be.

    Tint aborts the whole process on non-finite SPIR-V constants: those are replaced by ±FLT_MAX
    (`finite_spirv`), which changes no result while the inputs are finite. Dawn rejects IREE's push
    constant layout and the Aliased decoration."""
    if has_nonfinite_constants(spirv_mlir) and not finite_inputs:
        return "non-finite constants with non-finite inputs"
    if "PushConstant" in spirv_mlir:
        return "push constants"
    if "{aliased}" in spirv_mlir:
        return "aliased bindings (Tint: unhandled decoration Aliased)"
    if re.search(r"spirv\.(IsNan|IsInf)\b", spirv_mlir):
        return "IsNan/IsInf (Tint: NaNs cannot be represented in WGSL)"
    return None


_OP_TYPE_FLOAT, _OP_CONSTANT, _OP_SPEC_CONSTANT = 22, 43, 50


def finite_spirv(binary: bytes) -> bytes:
    """IREE's SPIR-V with every non-finite float constant (reduction seeds) replaced by ±max-finite."""
    words = np.frombuffer(binary, np.uint32).copy()
    floats: dict[int, int] = {}  # float type id → width
    pos = 5
    while pos < len(words):
        count, opcode = int(words[pos]) >> 16, int(words[pos]) & 0xFFFF
        if opcode == _OP_TYPE_FLOAT:
            floats[int(words[pos + 1])] = int(words[pos + 2])
        elif opcode in (_OP_CONSTANT, _OP_SPEC_CONSTANT) and int(words[pos + 1]) in floats:
            width, bits = floats[int(words[pos + 1])], int(words[pos + 3])
            exp, sign = (0x7F800000, 0x80000000) if width == 32 else (0x7C00, 0x8000)
            if width not in (16, 32):
                raise AssertionError(f"float{width} constant in SPIR-V")
            if bits & exp == exp:
                words[pos + 3] = (bits & sign) | (exp - 1 if width == 32 else 0x7BFF)
        pos += max(count, 1)
    return words.tobytes()


def _binding_kinds(spirv_mlir: str) -> dict[int, set[str]]:
    """Element kinds read through each binding; f16 data is often accessed as f32 words, so any f16
    in the shader makes its float bindings f16."""
    kinds: dict[int, set[str]] = {}
    f16 = re.search(r"\bf16\b", spirv_mlir) is not None
    for m in re.finditer(r"bind\(0, (\d+)\).*?rtarray<(?:vector<\d+x)?(\w+)", spirv_mlir):
        kinds.setdefault(int(m[1]), set()).add("f16" if f16 and m[2] == "f32" else m[2])
    return kinds


def random_inputs(spirv_mlir: str, dispatch: Dispatch, rng: np.random.Generator,
                  nans: bool = False) -> list[bytes]:
    """Random bytes per binding: floats where the shader reads floats (some NaN/inf with `nans`), small
    ints where it reads ints."""
    kinds = _binding_kinds(spirv_mlir)
    data = []
    for i, (_, _, nbytes) in enumerate(dispatch.bindings):
        kind = kinds.get(i, {"f32"})
        if kind & {"i32", "i8", "i16"}:
            data.append(rng.integers(0, 4, nbytes // 4, dtype=np.int32).tobytes())
        else:
            values = rng.standard_normal(nbytes // (2 if kind == {"f16"} else 4))
            if nans:
                values[::7], values[3::11], values[5::13] = np.nan, np.inf, -np.inf
            data.append(values.astype(np.float16 if kind == {"f16"} else np.float32).tobytes())
    return data


def spirv_kernel(rt, spirv: bytes, label: str):
    """A pipeline from IREE's SPIR-V binary.

    Tint renames IREE's entry point (its name holds a `$`), so the module's only entry point is
    selected by leaving `entry_point` out, which `rt.kernel_from_spirv` does not offer."""
    import hashlib

    from torch_webgpu.runtime.executables import Kernel

    key = "spirv-" + hashlib.sha256(spirv).hexdigest()
    if key not in _SPIRV_KERNELS:  # one pipeline per key: the runtime caches bind groups by kernel key
        module = rt.device.create_shader_module(code=spirv, label=label)
        pipeline = rt.device.create_compute_pipeline(layout="auto", compute={"module": module}, label=label)
        _SPIRV_KERNELS[key] = Kernel(key, label, pipeline, "")
    return _SPIRV_KERNELS[key]


_SPIRV_KERNELS: dict[str, object] = {}


def run_dispatch(rt, kernel, inputs: list[bytes], workgroups, extra=()) -> list[bytes]:
    """Upload `inputs` to fresh buffers, dispatch `kernel` once, and read every buffer back."""
    ids = [rt.allocate(max(len(b), 4)) for b in inputs]
    try:
        for buf, data in zip(ids, inputs, strict=True):
            rt.upload(buf, data)
        rt.dispatch(kernel, [*ids, *extra], workgroups)
        return [rt.download(buf, 0, len(data)) for buf, data in zip(ids, inputs, strict=True)]
    finally:
        for buf in ids:
            rt.free(buf)


def assert_same_outputs(kinds: set[str], expected: bytes, actual: bytes, what: str,
                        inf_is_max: bool = False) -> None:
    """Outputs of IREE's SPIR-V and of our WGSL agree; with `inf_is_max` the SPIR-V had its infinite
    constants replaced by ±max-finite, so our ±inf count as ±max-finite."""
    if kinds & {"i32", "i8", "i16"} or not kinds:
        assert expected == actual, f"{what}: integer outputs differ"
        return
    f16 = kinds == {"f16"}
    a, b = (np.frombuffer(x, np.float16 if f16 else np.float32) for x in (expected, actual))
    if inf_is_max:
        b = np.where(np.isinf(b), np.sign(b) * np.finfo(b.dtype).max, b).astype(b.dtype)
    tol = dict(rtol=1e-2, atol=1e-3) if f16 else dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, a, equal_nan=True, err_msg=what, **tol)


def _dispatch_of(program: HostProgram, exe: Executable) -> Dispatch:
    for dispatch in program.dispatches:
        if exe.wgsl is not None and dispatch.entry_point == exe.wgsl.name:
            return dispatch
    raise AssertionError(f"no dispatch of {exe.name} in the host program")


def push_constant_binding(rt, exe: WGSLExecutable, constants: list[int]) -> list:
    """The uniform holding IREE's push constants (array<vec4<u32>>), when the shader reads one."""
    if exe.push_constant_binding is None:
        return []
    words = np.zeros(-(-max(len(constants), 1) // 4) * 4, np.uint32)
    words[:len(constants)] = np.array(constants, np.int64) & 0xFFFFFFFF
    return [rt.constant(words.tobytes())]


def to_device_bytes(t: torch.Tensor) -> bytes:
    """A tensor as IREE's demoted ABI holds it: i64 → i32, f64 → f32, bool → u8."""
    if t.dtype == torch.int64:
        t = t.to(torch.int32)
    elif t.dtype == torch.float64:
        t = t.to(torch.float32)
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.contiguous().numpy().tobytes()


def run_program(rt, compiled: CompiledModel, args: tuple, specialise: bool = False) -> list[bytes]:
    """Run the whole host program on Dawn with our WGSL; returns the bytes of each output view."""
    from torch_webgpu.runtime import BufferSlice

    inputs = compiled.inputs(args)
    program = compiled.program(args)
    if program.constant_buffers:
        raise AssertionError("IREE hoisted constants into globals: not runnable by this test")
    by_name = {exe.wgsl.name: exe for exe in compiled.executables}
    buffers: dict[str, int] = {}
    try:
        for name, index in program.inputs.items():
            data = to_device_bytes(inputs[index])
            buffers[name] = rt.allocate(max(len(data), 4))
            rt.upload(buffers[name], data)
        for name, size in program.allocs.items():
            buffers[name] = rt.allocate(max(size, 4))
        for name, data in program.constants.items():
            buffers[name] = rt.allocate(max(len(data), 4))
            rt.upload(buffers[name], data)
        for command in program.commands:
            if command.kind == "fill":
                buf, off, length, word = command.args
                rt.fill(buffers[buf], word, off, length)
            elif command.kind == "copy":
                src, src_off, dst, dst_off, length = command.args
                rt.copy(buffers[src], buffers[dst], length, src_off, dst_off)
            else:
                (dispatch,) = command.args
                exe = by_name[dispatch.entry_point]
                wgsl = exe.wgsl
                if specialise and dispatch.constants:
                    (wgsl,) = translate_spirv_module(exe.spirv_mlir, dict(enumerate(dispatch.constants)))
                kernel = rt.kernel(wgsl.code, wgsl.entry_point, label=wgsl.name)
                slices = [BufferSlice(buffers[b], off, length) for b, off, length in dispatch.bindings]
                extra = push_constant_binding(rt, wgsl, dispatch.constants)
                rt.dispatch(kernel, [*slices, *extra], dispatch.workgroups)
        return [rt.download(buffers[b], off, length) for b, off, length in program.outputs]
    finally:
        for buf in buffers.values():
            rt.free(buf)


def expected_outputs(compiled: CompiledModel, args: tuple) -> list[torch.Tensor]:
    with torch.no_grad():
        out = compiled.model(*args)
    return list(out) if isinstance(out, tuple) else [out]


def assert_matches_torch(expected: torch.Tensor, actual: bytes, what: str) -> None:
    dtype = {torch.int64: torch.int32, torch.float64: torch.float32, torch.bool: torch.uint8}.get(
        expected.dtype, expected.dtype)
    got = torch.frombuffer(bytearray(actual), dtype=dtype)[:expected.numel()].reshape(expected.shape)
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.float16 else dict(rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got, expected.to(dtype), equal_nan=True, msg=lambda m: f"{what}: {m}",
                               **(tol if dtype.is_floating_point else {}))


def _skip_without_f16(compiled_or_spec, rt):
    spec = compiled_or_spec if isinstance(compiled_or_spec, Spec) else compiled_or_spec.spec
    if spec.f16 and "shader-f16" not in rt.info.features:
        pytest.skip("adapter lacks shader-f16")


# ---- tests ------------------------------------------------------------------------------------------
def _params(names):
    return [pytest.param(n, marks=pytest.mark.slow) if MODELS[n].slow else n for n in sorted(names)]


@pytest.mark.parametrize("model_name", _params(MODELS))
def test_every_executable_matches_iree_spirv_on_dawn(model_name, compiled_models, rt):
    _skip_without_f16(MODELS[model_name], rt)
    compiled = compiled_models(model_name)
    assert compiled.executables, "IREE produced no executables"
    errors = [f"{exe.name}: {exe.error}" for exe in compiled.executables if exe.error]
    assert not errors, "translation failed:\n" + "\n".join(errors)
    program = compiled.program(compiled.spec.args())
    rng = np.random.default_rng(0)
    compared = 0
    for exe in compiled.executables:
        dispatch = _dispatch_of(program, exe)
        wgsl = exe.wgsl
        assert [b.binding for b in wgsl.bindings] == list(range(len(dispatch.bindings)))
        inputs = random_inputs(exe.spirv_mlir, dispatch, rng, compiled.spec.nan_inputs)
        kernel = rt.kernel(wgsl.code, wgsl.entry_point, label=wgsl.name)
        ours = run_dispatch(rt, kernel, inputs, dispatch.workgroups,
                            push_constant_binding(rt, wgsl, dispatch.constants))
        if spirv_runs_on_dawn(exe.spirv_mlir, not compiled.spec.nan_inputs) is not None:
            continue
        kernel = spirv_kernel(rt, finite_spirv(exe.spirv_binary), wgsl.name)
        reference = run_dispatch(rt, kernel, inputs, dispatch.workgroups)
        kinds = _binding_kinds(exe.spirv_mlir)
        for b in wgsl.bindings:
            if b.access == "read_write":
                assert_same_outputs(kinds.get(b.binding, set()), reference[b.wgsl_binding],
                                    ours[b.wgsl_binding], f"{exe.name} binding {b.binding}",
                                    inf_is_max=has_nonfinite_constants(exe.spirv_mlir))
        compared += 1
    print(f"{model_name}: {len(compiled.executables)} executables, {compared} compared with SPIR-V")


@pytest.mark.parametrize("model_name", _params(n for n, s in MODELS.items() if s.end_to_end))
def test_whole_program_on_translated_wgsl_matches_torch_cpu(model_name, compiled_models, rt):
    _skip_without_f16(MODELS[model_name], rt)
    compiled = compiled_models(model_name)
    args = (compiled.spec.run_args or compiled.spec.args)()
    outputs = run_program(rt, compiled, args)
    expected = expected_outputs(compiled, args)
    assert len(outputs) == len(expected)
    for i, (e, a) in enumerate(zip(expected, outputs, strict=True)):
        assert_matches_torch(e, a, f"{model_name} output {i}")


def test_push_constants_specialised_and_uniform_agree_with_torch(compiled_models, rt):
    compiled = compiled_models("dynamic_softmax")
    assert any(exe.wgsl.push_constant_count for exe in compiled.executables)
    for rows in (3, 7):
        args = (torch.randn(rows, 64),)
        (expected,) = expected_outputs(compiled, args)
        for specialise in (False, True):
            (out,) = run_program(rt, compiled, args, specialise=specialise)
            assert_matches_torch(expected, out, f"rows={rows} specialise={specialise}")
