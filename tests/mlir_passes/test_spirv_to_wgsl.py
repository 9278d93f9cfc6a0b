"""Differential tests of the spirv-dialect → WGSL translator on real IREE executables and a real Dawn device.

Every executable IREE emits for the test models runs twice on Dawn with identical random inputs: from
IREE's SPIR-V binary (when Tint can take it: no non-finite constants, no push constants) and from our
WGSL. Single-dispatch models are also checked end to end against torch on CPU.
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

IREE_FLAGS = [
    "--iree-input-demote-f64-to-f32", "--iree-input-demote-i64-to-i32",
    "--iree-stream-resource-alias-mutable-bindings", "--iree-stream-resource-min-offset-alignment=256",
    "--compile-to=hal", "--iree-hal-memoization=false", "--iree-hal-indirect-command-buffers=false",
]
FEATURES = "spirv:v1.3,cap:Shader"
F16_FEATURES = FEATURES + ",cap:Float16,cap:StorageBuffer16BitAccess,ext:SPV_KHR_16bit_storage"


# ---- test models ---------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.a, self.b = nn.Linear(16, 32, dtype=dtype), nn.Linear(32, 8, dtype=dtype)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class ConvBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)

    def forward(self, x):
        return F.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)


class CausalAttention(nn.Module):
    def __init__(self, d=32, heads=2):
        super().__init__()
        self.ln, self.qkv, self.out, self.heads = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, -1)

        def split(z):
            return z.view(b, t, self.heads, d // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        return x + self.out(F.gelu(y.transpose(1, 2).reshape(b, t, d)))


class EmbeddingArgmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(50, 16), nn.Linear(16, 50)

    def forward(self, idx):
        return torch.argmax(self.head(self.emb(idx)), -1)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _shapes(x, y):
    return torch.cat([x.t(), y.flip(0)], 0)[1:5]


MODELS = {
    "mlp": (MLP, lambda: (torch.randn(4, 16),)),
    "softmax": (lambda: Fn(lambda x: torch.softmax(x, -1)), lambda: (torch.randn(4, 64),)),
    "layernorm": (lambda: nn.LayerNorm(32), lambda: (torch.randn(8, 32),)),
    "gelu_tanh": (lambda: Fn(lambda x: F.gelu(x, approximate="tanh")), lambda: (torch.randn(8, 32),)),
    "gelu_erf": (lambda: Fn(F.gelu), lambda: (torch.randn(8, 32),)),
    "conv_bn_relu_pool": (ConvBlock, lambda: (torch.randn(2, 3, 8, 8),)),
    "causal_attention": (CausalAttention, lambda: (torch.randn(2, 8, 32),)),
    "embedding_argmax": (EmbeddingArgmax, lambda: (torch.randint(0, 50, (2, 6)),)),
    "cumsum": (lambda: Fn(lambda x: torch.cumsum(x, 1)), lambda: (torch.randn(4, 16),)),
    "mean_var": (lambda: Fn(lambda x: (x.mean(1), x.var(1))), lambda: (torch.randn(4, 16),)),
    "transpose_cat_slice_flip": (lambda: Fn(_shapes), lambda: (torch.randn(8, 6), torch.randn(8, 8))),
    "matmul_256": (lambda: Fn(torch.matmul), lambda: (torch.randn(256, 256), torch.randn(256, 256))),
    "f16_mlp": (lambda: MLP(torch.float16), lambda: (torch.randn(4, 16, dtype=torch.float16),)),
}


# ---- IREE compilation and the host program's dispatches ------------------------------------------
@dataclass
class Dispatch:
    """One hal.command_buffer.dispatch of the host program."""

    entry_point: str
    workgroups: tuple[int, int, int]
    constants: list[int]
    bindings: list[tuple[str, int]]  # (buffer SSA name, byte length)


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
    model: nn.Module
    args: tuple
    hal: str
    executables: list[Executable] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)


def _index_constants(hal: str) -> dict[str, int]:
    pattern = r"(%[\w$.-]+) = arith\.constant (-?\d+) : (?:index|i32|i64)"
    return {m[1]: int(m[2]) for m in re.finditer(pattern, hal)}


def parse_dispatches(hal: str) -> list[Dispatch]:
    """The dispatches of IREE's flat HAL host program (static shapes: constant counts and lengths)."""
    consts = _index_constants(hal)
    value = consts.__getitem__
    dispatches, entry = [], None
    lines = hal.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"hal\.executable\.lookup\.function .*::@([^)]+)\) : i64", line)
        if m:
            entry = m[1].strip('"')
        if "hal.command_buffer.dispatch<" not in line:
            continue
        groups = tuple(value(x.strip()) for x in re.search(r"workgroups\(\[([^\]]*)\]\)", line)[1].split(","))
        constants = []
        m = re.search(r"constants\(\[([^\]]*)\]\)", line)
        if m and m[1].strip():
            constants = [value(x.split(":")[0].strip()) for x in m[1].split(",")]
        bindings = []
        for follow in lines[i + 1:]:
            b = re.search(r"\((%[\w$.-]+) : !hal\.buffer\)\[(%[\w$.-]+), (%[\w$.-]+)\]", follow)
            if b:
                bindings.append((b[1], value(b[3])))
            if "])" in follow:
                break
        dispatches.append(Dispatch(entry, groups, constants, bindings))
    return dispatches


def _compile(name: str, directory: Path) -> CompiledModel:
    import iree.compiler as ic
    from torch_mlir import fx

    torch.manual_seed(0)
    make_model, make_args = MODELS[name]
    model, args = make_model().eval(), make_args()
    module = fx.export_and_import(model, *args, output_type="torch")
    dump = directory / name
    dump.mkdir(parents=True, exist_ok=True)
    features = F16_FEATURES if name.startswith("f16") else FEATURES
    hal = ic.compile_str(str(module), input_type="torch", target_backends=["vulkan-spirv"], extra_args=[
        *IREE_FLAGS, f"--iree-vulkan-target-features={features}",
        f"--iree-hal-dump-executable-intermediates-to={dump}",
        f"--iree-hal-dump-executable-binaries-to={dump}"])
    hal = hal.decode() if isinstance(hal, bytes) else hal
    compiled = CompiledModel(name, model, args, hal, dispatches=parse_dispatches(hal))
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
def compiled_models(tmp_path_factory):
    """Compiles each test model at most once per session (lazily: only the models a test asks for)."""
    directory = tmp_path_factory.mktemp("iree")
    cache: dict[str, CompiledModel] = {}

    def get(name: str) -> CompiledModel:
        if name not in cache:
            cache[name] = _compile(name, directory)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def rt():
    """The process-wide Runtime on the real adapter."""
    from torch_webgpu.runtime import get_runtime

    return get_runtime()


# ---- running one dispatch -------------------------------------------------------------------------
_NONFINITE_HEX = re.compile(r"0x(7F8|FF8|7FC|FFC|7C0|FC0|7E0|FE0)[0-9A-F]*\b", re.IGNORECASE)


def spirv_runs_on_dawn(spirv_mlir: str) -> str | None:
    """Why IREE's SPIR-V binary must not be given to Dawn, or None when it can be.

    Tint aborts the whole process on non-finite SPIR-V constants, and Dawn rejects IREE's push
    constant layout."""
    if _NONFINITE_HEX.search(spirv_mlir) or re.search(r"\b(inf|nan)\b", spirv_mlir, re.IGNORECASE):
        return "non-finite constants"
    if "PushConstant" in spirv_mlir:
        return "push constants"
    if "{aliased}" in spirv_mlir:
        return "aliased bindings (Tint: unhandled decoration Aliased)"
    return None


def _binding_kinds(spirv_mlir: str) -> dict[int, set[str]]:
    """Element kinds read through each binding; f16 data is often accessed as f32 words, so any f16
    in the shader makes its float bindings f16."""
    kinds: dict[int, set[str]] = {}
    f16 = re.search(r"\bf16\b", spirv_mlir) is not None
    for m in re.finditer(r"bind\(0, (\d+)\).*?rtarray<(?:vector<\d+x)?(\w+)", spirv_mlir):
        kinds.setdefault(int(m[1]), set()).add("f16" if f16 and m[2] == "f32" else m[2])
    return kinds


def random_inputs(spirv_mlir: str, dispatch: Dispatch, rng: np.random.Generator) -> list[bytes]:
    """Random bytes per binding: floats where the shader reads floats, small ints where it reads ints."""
    kinds = _binding_kinds(spirv_mlir)
    data = []
    for i, (_, nbytes) in enumerate(dispatch.bindings):
        kind = kinds.get(i, {"f32"})
        if kind & {"i32", "i8", "i16"}:
            data.append(rng.integers(0, 4, nbytes // 4, dtype=np.int32).tobytes())
        elif kind == {"f16"}:
            data.append(rng.standard_normal(nbytes // 2).astype(np.float16).tobytes())
        else:
            data.append(rng.standard_normal(nbytes // 4).astype(np.float32).tobytes())
    return data


def spirv_kernel(rt, spirv: bytes, label: str):
    """A pipeline from IREE's SPIR-V binary.

    Tint renames IREE's entry point (its name holds a `$`), so the module's only entry point is
    selected by leaving `entry_point` out, which `rt.kernel_from_spirv` does not offer."""
    import hashlib

    from torch_webgpu.runtime.executables import Kernel

    module = rt.device.create_shader_module(code=spirv, label=label)
    pipeline = rt.device.create_compute_pipeline(layout="auto", compute={"module": module}, label=label)
    return Kernel(hashlib.sha256(spirv).hexdigest(), label, pipeline, "")


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


def assert_same_outputs(kinds: set[str], expected: bytes, actual: bytes, what: str) -> None:
    if kinds & {"i32", "i8", "i16"} or not kinds:
        assert expected == actual, f"{what}: integer outputs differ"
        return
    f16 = kinds == {"f16"}
    a, b = (np.frombuffer(x, np.float16 if f16 else np.float32) for x in (expected, actual))
    tol = dict(rtol=1e-2, atol=1e-3) if f16 else dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, a, equal_nan=True, err_msg=what, **tol)


def _dispatch_of(compiled: CompiledModel, exe: Executable) -> Dispatch:
    for dispatch in compiled.dispatches:
        if exe.wgsl is not None and dispatch.entry_point == exe.wgsl.name:
            return dispatch
    raise AssertionError(f"no dispatch of {exe.name} in the host program")


# ---- tests ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model_name", sorted(MODELS))
def test_every_executable_matches_iree_spirv_on_dawn(model_name, compiled_models, rt):
    if model_name.startswith("f16") and "shader-f16" not in rt.info.features:
        pytest.skip("adapter lacks shader-f16")
    compiled = compiled_models(model_name)
    assert compiled.executables, "IREE produced no executables"
    errors = [f"{exe.name}: {exe.error}" for exe in compiled.executables if exe.error]
    assert not errors, "translation failed:\n" + "\n".join(errors)
    rng = np.random.default_rng(0)
    compared = 0
    for exe in compiled.executables:
        dispatch = _dispatch_of(compiled, exe)
        wgsl = exe.wgsl
        assert [b.binding for b in wgsl.bindings] == list(range(len(dispatch.bindings)))
        inputs = random_inputs(exe.spirv_mlir, dispatch, rng)
        ours = run_dispatch(rt, rt.kernel(wgsl.code, wgsl.entry_point, label=wgsl.name), inputs,
                            dispatch.workgroups)
        if spirv_runs_on_dawn(exe.spirv_mlir) is not None:
            continue
        kernel = spirv_kernel(rt, exe.spirv_binary, wgsl.name)
        reference = run_dispatch(rt, kernel, inputs, dispatch.workgroups)
        kinds = _binding_kinds(exe.spirv_mlir)
        for b in wgsl.bindings:
            if b.access == "read_write":
                assert_same_outputs(kinds.get(b.binding, set()), reference[b.wgsl_binding],
                                    ours[b.wgsl_binding], f"{exe.name} binding {b.binding}")
        compared += 1
    print(f"{model_name}: {len(compiled.executables)} executables, {compared} compared with SPIR-V")
