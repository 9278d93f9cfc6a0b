"""High IR: the torch-dialect graph as `HighIRNode`s of the ops we handle (`HighIROp`).

Built from the torch module after the high passes (backend contract, value semantics). Scalars, lists and
`none` feeding an op are folded into its operands as Python values so the printed graph reads like code.
An op outside `HighIROp` raises `UnsupportedOpError` listing every node that uses it.
"""

from __future__ import annotations

import enum
import re
import struct
from dataclasses import dataclass, field
from typing import Any


class HighIROp(enum.Enum):
    """Torch-dialect ops the WebGPU compiler handles (value: the MLIR op name)."""

    # elementwise unary
    ABS = "torch.aten.abs"
    NEG = "torch.aten.neg"
    EXP = "torch.aten.exp"
    EXP2 = "torch.aten.exp2"
    EXPM1 = "torch.aten.expm1"
    LOG = "torch.aten.log"
    LOG1P = "torch.aten.log1p"
    LOG2 = "torch.aten.log2"
    SQRT = "torch.aten.sqrt"
    RSQRT = "torch.aten.rsqrt"
    RECIPROCAL = "torch.aten.reciprocal"
    SIN = "torch.aten.sin"
    COS = "torch.aten.cos"
    TANH = "torch.aten.tanh"
    SIGMOID = "torch.aten.sigmoid"
    ERF = "torch.aten.erf"
    RELU = "torch.aten.relu"
    GELU = "torch.aten.gelu"
    GELU_BACKWARD = "torch.aten.gelu_backward"
    SILU = "torch.aten.silu"
    FLOOR = "torch.aten.floor"
    CEIL = "torch.aten.ceil"
    ROUND = "torch.aten.round"
    SIGN = "torch.aten.sign"
    LOGICAL_NOT = "torch.aten.logical_not"
    BITWISE_NOT = "torch.aten.bitwise_not"
    ISNAN = "torch.aten.isnan"
    # elementwise binary / ternary
    ADD_TENSOR = "torch.aten.add.Tensor"
    ADD_SCALAR = "torch.aten.add.Scalar"
    SUB_TENSOR = "torch.aten.sub.Tensor"
    SUB_SCALAR = "torch.aten.sub.Scalar"
    RSUB_SCALAR = "torch.aten.rsub.Scalar"
    MUL_TENSOR = "torch.aten.mul.Tensor"
    MUL_SCALAR = "torch.aten.mul.Scalar"
    DIV_TENSOR = "torch.aten.div.Tensor"
    DIV_TENSOR_MODE = "torch.aten.div.Tensor_mode"
    DIV_SCALAR = "torch.aten.div.Scalar"
    POW_TENSOR_SCALAR = "torch.aten.pow.Tensor_Scalar"
    POW_TENSOR_TENSOR = "torch.aten.pow.Tensor_Tensor"
    MAXIMUM = "torch.aten.maximum"
    MINIMUM = "torch.aten.minimum"
    REMAINDER_SCALAR = "torch.aten.remainder.Scalar"
    FMOD_SCALAR = "torch.aten.fmod.Scalar"
    CLAMP = "torch.aten.clamp"
    CLAMP_TENSOR = "torch.aten.clamp.Tensor"
    WHERE_SELF = "torch.aten.where.self"
    WHERE_SCALAR_OTHER = "torch.aten.where.ScalarOther"
    WHERE_SCALAR_SELF = "torch.aten.where.ScalarSelf"
    MASKED_FILL_SCALAR = "torch.aten.masked_fill.Scalar"
    LOGICAL_AND = "torch.aten.logical_and"
    LOGICAL_OR = "torch.aten.logical_or"
    BITWISE_AND = "torch.aten.bitwise_and.Tensor"
    EQ_TENSOR = "torch.aten.eq.Tensor"
    EQ_SCALAR = "torch.aten.eq.Scalar"
    NE_TENSOR = "torch.aten.ne.Tensor"
    NE_SCALAR = "torch.aten.ne.Scalar"
    LT_TENSOR = "torch.aten.lt.Tensor"
    LT_SCALAR = "torch.aten.lt.Scalar"
    LE_TENSOR = "torch.aten.le.Tensor"
    LE_SCALAR = "torch.aten.le.Scalar"
    GT_TENSOR = "torch.aten.gt.Tensor"
    GT_SCALAR = "torch.aten.gt.Scalar"
    GE_TENSOR = "torch.aten.ge.Tensor"
    GE_SCALAR = "torch.aten.ge.Scalar"
    # linear algebra, convolution, pooling, normalisation
    MM = "torch.aten.mm"
    BMM = "torch.aten.bmm"
    MATMUL = "torch.aten.matmul"
    ADDMM = "torch.aten.addmm"
    LINEAR = "torch.aten.linear"
    CONVOLUTION = "torch.aten.convolution"
    MAX_POOL2D = "torch.aten.max_pool2d"
    MAX_POOL2D_WITH_INDICES = "torch.aten.max_pool2d_with_indices"
    MAX_POOL2D_WITH_INDICES_BACKWARD = "torch.aten.max_pool2d_with_indices_backward"
    AVG_POOL2D = "torch.aten.avg_pool2d"
    ADAPTIVE_AVG_POOL2D = "torch.aten.adaptive_avg_pool2d"
    NATIVE_LAYER_NORM = "torch.aten.native_layer_norm"
    NATIVE_BATCH_NORM = "torch.aten.native_batch_norm"
    SOFTMAX = "torch.aten._softmax"
    LOG_SOFTMAX = "torch.aten._log_softmax"
    # reductions
    SUM = "torch.aten.sum"
    SUM_DIM = "torch.aten.sum.dim_IntList"
    MEAN_DIM = "torch.aten.mean.dim"
    PROD_DIM = "torch.aten.prod.dim_int"
    AMAX = "torch.aten.amax"
    AMIN = "torch.aten.amin"
    MAX = "torch.aten.max"
    MAX_DIM = "torch.aten.max.dim"
    MIN_DIM = "torch.aten.min.dim"
    ARGMAX = "torch.aten.argmax"
    ARGMIN = "torch.aten.argmin"
    ALL_DIM = "torch.aten.all.dim"
    ANY_DIM = "torch.aten.any.dim"
    VAR_CORRECTION = "torch.aten.var.correction"
    CUMSUM = "torch.aten.cumsum"
    # shapes, indexing, creation, casts
    VIEW = "torch.aten.view"
    RESHAPE = "torch.aten.reshape"
    PERMUTE = "torch.aten.permute"
    TRANSPOSE_INT = "torch.aten.transpose.int"
    UNSQUEEZE = "torch.aten.unsqueeze"
    SQUEEZE_DIM = "torch.aten.squeeze.dim"
    EXPAND = "torch.aten.expand"
    BROADCAST_TO = "torch.aten.broadcast_to"
    SLICE_TENSOR = "torch.aten.slice.Tensor"
    SELECT_INT = "torch.aten.select.int"
    CAT = "torch.aten.cat"
    FLIP = "torch.aten.flip"
    INDEX_SELECT = "torch.aten.index_select"
    INDEX_TENSOR_HACKED_TWIN = "torch.aten.index.Tensor_hacked_twin"
    INDEX_PUT_HACKED_TWIN = "torch.aten.index_put.hacked_twin"
    GATHER = "torch.aten.gather"
    SCATTER_ADD = "torch.aten.scatter_add"
    EMBEDDING = "torch.aten.embedding"
    EMBEDDING_DENSE_BACKWARD = "torch.aten.embedding_dense_backward"
    CONSTANT_PAD_ND = "torch.aten.constant_pad_nd"
    ARANGE_START_STEP = "torch.aten.arange.start_step"
    EMPTY_MEMORY_FORMAT = "torch.aten.empty.memory_format"
    FULL = "torch.aten.full"
    ZEROS = "torch.aten.zeros"
    ONES = "torch.aten.ones"
    SCALAR_TENSOR = "torch.aten.scalar_tensor"
    FILL_SCALAR = "torch.aten.fill.Scalar"
    TO_DTYPE = "torch.aten.to.dtype"
    CLONE = "torch.aten.clone"
    COPY = "torch.aten.copy"
    TRIU = "torch.aten.triu"
    TRIL = "torch.aten.tril"
    LITERAL = "torch.vtensor.literal"
    # symbolic sizes (dynamic=True): IREE reads them from buffer views and passes them as push constants
    SIZE_INT = "torch.aten.size.int"
    MUL_INT = "torch.aten.mul.int"
    ADD_INT = "torch.aten.add.int"
    SUB_INT = "torch.aten.sub.int"
    FLOORDIV_INT = "torch.aten.floordiv.int"
    NUM_TO_TENSOR = "torch.prim.NumToTensor.Scalar"


# Ops that carry Python values (folded into the operands of the ops using them) or end the function.
_VALUE_OPS = {"torch.constant.int", "torch.constant.float", "torch.constant.bool", "torch.constant.none",
              "torch.constant.str", "torch.constant.device", "torch.prim.ListConstruct", "func.return"}
_BY_NAME = {op.value: op for op in HighIROp}
_TENSOR_TYPE = re.compile(r"!torch\.vtensor<\[([^\]]*)\],(\w+)>")


class UnsupportedOpError(NotImplementedError):
    """The graph uses torch ops the WebGPU compiler does not handle; the message names ops and nodes."""


@dataclass(frozen=True)
class TensorType:
    """Static shape (-1 for dynamic) and element type of a value."""

    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join('?' if d < 0 else str(d) for d in self.shape)}]"


@dataclass
class HighIRNode:
    """One torch op: operands are value names (`%3`, `%arg0`) or folded Python values."""

    op: HighIROp | str
    name: str
    operands: list[Any] = field(default_factory=list)
    results: list[TensorType | str] = field(default_factory=list)
    attributes: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        op = self.op.value if isinstance(self.op, HighIROp) else self.op
        args = ", ".join(_fmt(o) for o in self.operands)
        res = ", ".join(str(r) for r in self.results)
        attrs = "".join(f" {k}={v}" for k, v in self.attributes.items())
        return f"{self.name} = {op.removeprefix('torch.')}({args}){attrs} : {res}"


@dataclass
class HighIRGraph:
    """Inputs, nodes in program order and the returned value names."""

    inputs: list[tuple[str, TensorType | str]]
    nodes: list[HighIRNode]
    outputs: list[Any]

    def __str__(self) -> str:
        lines = ["graph(" + ", ".join(f"{n}: {t}" for n, t in self.inputs) + "):"]
        lines += [f"  {node}" for node in self.nodes]
        lines.append("  return " + ", ".join(_fmt(o) for o in self.outputs))
        return "\n".join(lines)

    def unsupported(self) -> dict[str, list[HighIRNode]]:
        """Op name -> the nodes using it, for ops outside HighIROp."""
        found: dict[str, list[HighIRNode]] = {}
        for node in self.nodes:
            if not isinstance(node.op, HighIROp):
                found.setdefault(node.op, []).append(node)
        return found

    def check_supported(self, only_unregistered: bool = False) -> None:
        """Raise UnsupportedOpError naming every unsupported op and the nodes that use it
        (`only_unregistered`: only ops torch-mlir itself does not know, checked before its passes)."""
        bad = self.unsupported()
        if only_unregistered:
            bad = {op: ns for op, ns in bad.items() if ns[0].attributes.get("unregistered")}
        if bad:
            parts = []
            for op, nodes in bad.items():
                shown = "\n      ".join(str(n) for n in nodes[:5])
                more = f"\n      ... and {len(nodes) - 5} more" if len(nodes) > 5 else ""
                parts.append(f"  {op.removeprefix('torch.')} used by:\n      {shown}{more}")
            raise UnsupportedOpError(
                "torch.compile(backend='webgpu') cannot compile these ops yet:\n" + "\n".join(parts)
                + "\nRun them eagerly (torch._dynamo.disable around the code), or open an issue.")


def _fmt(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def _value_type(type_text: str) -> TensorType | str:
    m = _TENSOR_TYPE.fullmatch(type_text)
    if m is None:
        return type_text.removeprefix("!torch.")
    shape = tuple(int(d) if d.lstrip("-").isdigit() else -1 for d in m.group(1).split(",") if d.strip())
    return TensorType(shape, m.group(2))


def _literal(op: Any) -> Any:
    name = op.operation.name
    if name == "torch.constant.none":
        return None
    if name == "torch.prim.ListConstruct":
        return "list"
    text = str(op.operation.attributes["value"])
    if name == "torch.constant.bool":
        return text == "true"
    if name in ("torch.constant.str", "torch.constant.device"):
        return text.strip('"')
    number = text.split(":")[0].strip()
    if name == "torch.constant.int":
        return int(number)
    if number.startswith("0x"):  # non-finite floats print as their f64 bit pattern
        return struct.unpack("<d", int(number, 16).to_bytes(8, "little"))[0]
    return float(number)


def build_high_ir(module: Any, func_name: str = "main") -> HighIRGraph:
    """The HighIRGraph of function `func_name` of a torch_mlir module (after the high passes)."""
    func = None
    for op in module.body.operations:
        if op.operation.name == "func.func" and str(op.attributes["sym_name"]).strip('"') == func_name:
            func = op
    if func is None:
        raise ValueError(f"no func.func @{func_name} in the torch module")
    block = func.regions[0].blocks[0]
    names: dict[Any, Any] = {}
    inputs = []
    for i, arg in enumerate(block.arguments):
        names[arg] = f"%arg{i}"
        inputs.append((f"%arg{i}", _value_type(str(arg.type))))
    nodes: list[HighIRNode] = []
    outputs: list[Any] = []
    counter = 0
    for op in block.operations:
        op_name = op.operation.name
        if op_name == "func.return":
            outputs = [names.get(v, "?") for v in op.operands]
            continue
        if op_name in _VALUE_OPS:
            value = _literal(op)
            if value == "list":
                value = [names.get(v, "?") for v in op.operands]
            names[op.result] = value
            continue
        attrs = {}
        if op_name == "torch.operator":
            # An op torch-mlir has no definition for: nothing downstream can lower it.
            op_name = str(op.operation.attributes["name"]).strip('"')
            op_name = op_name if op_name.startswith("torch.") else "torch." + op_name
            attrs["unregistered"] = "true"
        result_names = []
        for r in op.results:
            names[r] = f"%{counter}"
            result_names.append(f"%{counter}")
            counter += 1
        if op_name == "torch.vtensor.literal":
            text = str(op.operation.attributes["value"])
            attrs["value"] = text if len(text) < 60 else text[:57] + "..."
        nodes.append(HighIRNode(_BY_NAME.get(op_name, op_name), ", ".join(result_names) or "_",
                                [names.get(v, "?") for v in op.operands],
                                [_value_type(str(r.type)) for r in op.results], attrs))
    return HighIRGraph(inputs, nodes, outputs)
