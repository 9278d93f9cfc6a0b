"""The plan format (the low IR): what runs a compiled graph on the runtime (`LowIROp`, `LowIRNode`, `Plan`).

A plan is self-contained: buffers with sizes, one-time init nodes (constant uploads and IREE's hoisted
constant computations), per-call nodes (dispatches, fills, copies, barriers), the WGSL of every entry point
and the constant tensors. It serialises to a directory (plan.json, one .wgsl per entry point,
constants.safetensors) and loads back without torch-mlir or IREE (issue 6 builds bundles on it).

Dynamic plans (torch.compile(dynamic=True)): input dims unknown at compile time are None in the input
TensorSpecs, and every number a call needs (buffer sizes, binding offsets and lengths, workgroup counts,
push constants, output shapes) may be an index expression of the inputs' dims instead of an int: the
small JSON expression IR of `plan.host_expr` (`["dim", input, axis]`, `["muli", a, b]`, ...). The
executor evaluates them once per input-shape signature (`plan.layout`).
"""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

PLAN_FORMAT_VERSION = 1


class LowIROp(enum.Enum):
    """What a plan node does on the device."""

    ALLOCATE = "allocate"            # args: buffer
    FREE = "free"                    # args: buffer (transient lifetime ends; buffers stay pooled per plan)
    UPLOAD_CONSTANT = "upload"       # args: buffer, constant (name in Plan.constants)
    DISPATCH = "dispatch"            # args: entry_point, workgroups, constants, bindings
    COPY = "copy"                    # args: source, source_offset, buffer, offset, size
    FILL = "fill"                    # args: buffer, offset, size, pattern (u32)
    BARRIER = "barrier"              # implicit between WebGPU dispatches; kept for other runtimes
    OUTPUT = "output"                # args: index, buffer, offset, size  (or input: index)


@dataclass
class LowIRNode:
    """One plan step; `args` is JSON-serialisable. Buffers are named `in<k>`, `g<k>` or `t<k>`."""

    op: LowIROp
    args: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.args.items())
        return f"{self.op.value}({inner})"

    def to_json(self) -> dict:
        """A dict for plan.json."""
        return {"op": self.op.value, **self.args}

    @staticmethod
    def from_json(d: dict) -> LowIRNode:
        """The node of a plan.json entry."""
        d = dict(d)
        return LowIRNode(LowIROp(d.pop("op")), d)


@dataclass
class TensorSpec:
    """Shape and dtypes of a graph input/output: `dtype` as torch names it, `device_dtype` as stored.
    Dynamic plans: None for an input's symbolic dim, a host_expr expression for an output's."""

    shape: list
    dtype: str
    device_dtype: str


@dataclass
class ExecutableSpec:
    """One WGSL entry point and how host bindings map onto its @binding slots."""

    entry_point: str
    wgsl_file: str
    workgroup_size: list[int]
    # wgsl @binding index -> index into the dispatch's host bindings (IREE's binding ordinal)
    binding_map: dict[int, int]
    push_constant_binding: int | None = None
    push_constant_count: int = 0
    read_only: list[int] = field(default_factory=list)   # wgsl bindings the shader only reads


@dataclass
class Plan:
    """A compiled graph ready to run on the runtime."""

    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    output_map: list                      # original outputs -> index in `outputs`, None (a None output)
                                          # or a host-computed size: ["const", v], ["dim", input, axis]
    buffers: dict[str, Any]               # buffer name -> size in bytes (int or expression; "g*" global,
                                          # "t*" transient)
    init: list[LowIRNode]
    main: list[LowIRNode]
    executables: dict[str, ExecutableSpec]
    wgsl: dict[str, str] = field(default_factory=dict)           # wgsl_file -> source
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # lifted tensor constants
    num_constant_inputs: int = 0          # trailing IREE inputs fed from `constants` (in order)
    spirv: dict[str, bytes] = field(default_factory=dict)        # entry point -> IREE SPIR-V (debug only)
    meta: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"plan: {len(self.inputs)} inputs, {len(self.outputs)} outputs, "
                 f"{len(self.executables)} entry points, buffers {self.buffers}"]
        lines += ["init:"] + [f"  {n}" for n in self.init]
        lines += ["main:"] + [f"  {n}" for n in self.main]
        return "\n".join(lines)

    @property
    def dispatch_count(self) -> int:
        """Dispatches per call."""
        return sum(1 for n in self.main if n.op is LowIROp.DISPATCH)

    def save(self, directory: str | Path) -> Path:
        """Write plan.json, the .wgsl files and constants.safetensors into `directory`."""
        from safetensors.numpy import save_file

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        for name, source in self.wgsl.items():
            (d / name).write_text(source)
        if self.constants:
            save_file({k: np.ascontiguousarray(v) for k, v in self.constants.items()},
                      str(d / "constants.safetensors"))
        (d / "plan.json").write_text(json.dumps(self.to_doc(), indent=1))
        return d

    def to_doc(self) -> dict:
        """The plan.json document (the WGSL and constants live in files next to it)."""
        return {
            "format": PLAN_FORMAT_VERSION,
            "inputs": [asdict(t) for t in self.inputs],
            "outputs": [asdict(t) for t in self.outputs],
            "output_map": self.output_map,
            "buffers": self.buffers,
            "init": [n.to_json() for n in self.init],
            "main": [n.to_json() for n in self.main],
            "executables": {k: asdict(v) for k, v in self.executables.items()},
            "constant_names": list(self.constants),
            "num_constant_inputs": self.num_constant_inputs,
            "meta": self.meta,
        }

    @staticmethod
    def load(directory: str | Path) -> Plan:
        """Read a plan written by `save`."""
        d = Path(directory)
        return Plan.from_doc(json.loads((d / "plan.json").read_text()), d)

    @staticmethod
    def from_doc(doc: dict, directory: str | Path) -> Plan:
        """The plan of a plan.json document whose .wgsl and constants files are in `directory`."""
        d = Path(directory)
        if doc.get("format") != PLAN_FORMAT_VERSION:
            raise ValueError(f"{d}: plan format {doc.get('format')} is not {PLAN_FORMAT_VERSION}; recompile")
        constants: dict[str, np.ndarray] = {}
        if doc["constant_names"]:
            from safetensors.numpy import load_file

            loaded = load_file(str(d / "constants.safetensors"))
            constants = {k: loaded[k] for k in doc["constant_names"]}
        executables = {}
        for k, v in doc["executables"].items():
            v["binding_map"] = {int(b): h for b, h in v["binding_map"].items()}
            executables[k] = ExecutableSpec(**v)
        return Plan(
            inputs=[TensorSpec(**t) for t in doc["inputs"]],
            outputs=[TensorSpec(**t) for t in doc["outputs"]],
            output_map=doc["output_map"],
            buffers=doc["buffers"],
            init=[LowIRNode.from_json(n) for n in doc["init"]],
            main=[LowIRNode.from_json(n) for n in doc["main"]],
            executables=executables,
            wgsl={e.wgsl_file: (d / e.wgsl_file).read_text() for e in executables.values()},
            constants=constants,
            num_constant_inputs=doc["num_constant_inputs"],
            meta=doc["meta"],
        )
