"""Runs IREE in process on a torch-dialect module and returns the HAL host program and each executable's
`spirv` dialect module (plus IREE's own SPIR-V binaries, used only to cross-check our WGSL)."""

from __future__ import annotations

import ctypes
import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .webgpu_target import WebGPUTarget

# Flags measured in ../shared/iree-webgpu-notes.md: WebGPU shaders have no 64-bit types, may not bind
# one buffer twice writable, and the host program must be a flat list of commands we can extract.
SESSION_FLAGS = (
    "--iree-input-type=torch",
    "--iree-hal-target-backends=vulkan-spirv",
    "--iree-input-demote-f64-to-f32",
    "--iree-input-demote-i64-to-i32",
)
# These are process-global LLVM options in libIREECompiler (a Session refuses them): they are set once per
# process; a compile that needs other values runs iree-compile out of process instead.
GLOBAL_FLAGS = (
    "--iree-stream-resource-alias-mutable-bindings",
    "--iree-hal-memoization=false",
    "--iree-hal-indirect-command-buffers=false",
)
_global_flags: tuple[str, ...] | None = None


class IREECompileError(RuntimeError):
    """IREE rejected the module; the message carries IREE's diagnostics."""


@dataclass
class IREEArtifacts:
    """What one IREE run produced: the host program and per-entry-point shader sources."""

    hal_text: str
    spirv_mlir: dict[str, str] = field(default_factory=dict)    # entry point -> spirv.module text
    spirv_binaries: dict[str, bytes] = field(default_factory=dict)  # entry point -> SPIR-V words


def with_target(torch_text: str, target: WebGPUTarget) -> str:
    """`torch_text` with the module attribute `hal.device.targets` set to the WebGPU target."""
    attr = f"hal.device.targets = {target.device_targets_attribute()}"
    match = re.search(r"^module( attributes \{)?", torch_text, re.M)
    if match is None:
        raise ValueError("not an MLIR module: no top-level `module`")
    if match.group(1):
        return torch_text[:match.end()] + attr + ", " + torch_text[match.end():]
    return torch_text[:match.end()] + f" attributes {{{attr}}}" + torch_text[match.end():]


def compile_flags(target: WebGPUTarget) -> list[str]:
    """All IREE flags for compiling to the WebGPU-restricted SPIR-V target (as for iree-compile)."""
    return [*SESSION_FLAGS, *GLOBAL_FLAGS, *target.iree_flags()]


def compile_to_hal(torch_text: str, target: WebGPUTarget) -> IREEArtifacts:
    """Compile a torch-dialect module to IREE's HAL phase, in process; IREECompileError on failure."""
    try:
        return _compile_to_hal(torch_text, target)
    except IREECompileError:
        if target.subgroup_size is None:
            raise
    # IREE 3.13's warp reduction fails on some graphs (float16 sums: a 16-to-32-bit spirv.Bitcast); they
    # compile without subgroup ops (one thread per reduced row).
    return _compile_to_hal(torch_text, dataclasses.replace(target, subgroup_size=None))


def _compile_to_hal(torch_text: str, target: WebGPUTarget) -> IREEArtifacts:
    source = with_target(torch_text, target)
    with tempfile.TemporaryDirectory(prefix="torch-webgpu-iree-") as tmp:
        inter, binaries = Path(tmp, "intermediates"), Path(tmp, "binaries")
        dumps = [f"--iree-hal-dump-executable-intermediates-to={inter}",
                 f"--iree-hal-dump-executable-binaries-to={binaries}"]
        global_flags = (*GLOBAL_FLAGS, *target.iree_flags())
        if _claim_global_flags(global_flags):
            hal_text = _run_in_process(source, [*SESSION_FLAGS, *dumps], "hal")
        else:
            hal_text = _run_out_of_process(source, [*compile_flags(target), *dumps])
        if hal_text is None:
            _raise_with_diagnostics(source, compile_flags(target))
        artifacts = IREEArtifacts(hal_text)
        for path in sorted(inter.glob("*.spirv.mlir")):
            text = path.read_text()
            for entry in re.findall(r'spirv\.EntryPoint "GLCompute" @([\w$.-]+)', text):
                artifacts.spirv_mlir[entry] = text
        for path in sorted(binaries.glob("*.spv")):
            for entry in artifacts.spirv_mlir:
                if path.stem.endswith("_" + entry):
                    artifacts.spirv_binaries[entry] = path.read_bytes()
    return artifacts


def _claim_global_flags(flags: tuple[str, ...]) -> bool:
    """Set IREE's process-global options once; True when they now equal `flags`."""
    global _global_flags
    if _global_flags is None:
        from iree.compiler.api import ctypes_dl

        ctypes_dl._initializeGlobalCL("torch-webgpu", *flags)
        _global_flags = flags
    return _global_flags == flags


def _run_out_of_process(source: str, flags: list[str]) -> str | None:
    from iree.compiler.tools import CompilerToolError, compile_str

    try:
        return compile_str(source, extra_args=[*flags, "--compile-to=hal"]).decode()
    except CompilerToolError:
        return None


def _run_in_process(source: str, flags: list[str], phase: str) -> str | None:
    from iree.compiler.api import Output, Session, Source, ctypes_dl

    dylib = ctypes_dl._dylib
    set_phase = dylib.ireeCompilerInvocationSetCompileToPhase
    set_phase.restype, set_phase.argtypes = None, [ctypes.c_void_p, ctypes.c_char_p]
    session = Session()
    try:
        session.set_flags(*flags)
        inv = session.invocation()
        src = Source.wrap_buffer(session, source.encode() + b"\0")
        if not inv.parse_source(src):
            return None
        set_phase(inv._inv_p, phase.encode())
        if not inv.execute():
            return None
        out = Output.open_membuffer()
        inv.output_ir(out)
        text = bytes(out.map_memory()).decode()
        out.close()
        inv.close()
        return text
    finally:
        session.close()


def _raise_with_diagnostics(source: str, flags: list[str]) -> None:
    """Re-run IREE out of process only to capture its diagnostics text for the error message."""
    from iree.compiler.tools import CompilerToolError, compile_str

    try:
        kept = [f for f in flags if "dump-executable" not in f]
        compile_str(source, extra_args=[*kept, "--compile-to=hal"])
    except CompilerToolError as exc:
        lines = [ln for ln in str(exc).splitlines() if "error" in ln.lower()] or str(exc).splitlines()
        message = "IREE could not compile the graph for WebGPU:\n" + "\n".join(lines[:20])
        raise IREECompileError(message) from exc
    raise IREECompileError("IREE failed in process but not out of process; see stderr")
