"""Declarative op tables: SPIR-V op name → WGSL operator or builtin (one line per op)."""

# Binary operators whose WGSL spelling is an infix operator on the SPIR-V (signed) types as they are.
INFIX = {
    "spirv.IAdd": "+", "spirv.ISub": "-", "spirv.IMul": "*",
    "spirv.SDiv": "/", "spirv.SRem": "%",  # WGSL i32 `/` and `%` truncate, like SDiv/SRem
    "spirv.FAdd": "+", "spirv.FSub": "-", "spirv.FMul": "*", "spirv.FDiv": "/",
    "spirv.FRem": "%",  # WGSL float `%` is x - y * trunc(x / y): the sign of x, like FRem
    "spirv.BitwiseAnd": "&", "spirv.BitwiseOr": "|", "spirv.BitwiseXor": "^",
    "spirv.IEqual": "==", "spirv.INotEqual": "!=",
    "spirv.SLessThan": "<", "spirv.SLessThanEqual": "<=",
    "spirv.SGreaterThan": ">", "spirv.SGreaterThanEqual": ">=",
    "spirv.LogicalEqual": "==", "spirv.LogicalNotEqual": "!=",
    # `&`/`|` rather than `&&`/`||`: they also apply component-wise to vectors of bool.
    "spirv.LogicalAnd": "&", "spirv.LogicalOr": "|",
    "spirv.ShiftRightArithmetic": ">>",  # on i32, WGSL `>>` is arithmetic
}

SHIFTS = {"spirv.ShiftLeftLogical", "spirv.ShiftRightArithmetic", "spirv.ShiftRightLogical"}

# Integer ops that are only right on unsigned values: computed on bitcast<u32> operands.
UNSIGNED_INFIX = {
    "spirv.UDiv": "/", "spirv.UMod": "%", "spirv.ShiftRightLogical": ">>",
    "spirv.ULessThan": "<", "spirv.ULessThanEqual": "<=",
    "spirv.UGreaterThan": ">", "spirv.UGreaterThanEqual": ">=",
}

# Float compares: WGSL may assume no NaNs, so the ordered/unordered part is tested by bit pattern.
FLOAT_COMPARE = {
    "spirv.FOrdEqual": ("==", "ord"), "spirv.FOrdNotEqual": ("!=", "ord"),
    "spirv.FOrdLessThan": ("<", "ord"), "spirv.FOrdLessThanEqual": ("<=", "ord"),
    "spirv.FOrdGreaterThan": (">", "ord"), "spirv.FOrdGreaterThanEqual": (">=", "ord"),
    "spirv.FUnordEqual": ("==", "unord"), "spirv.FUnordNotEqual": ("!=", "unord"),
    "spirv.FUnordLessThan": ("<", "unord"), "spirv.FUnordLessThanEqual": ("<=", "unord"),
    "spirv.FUnordGreaterThan": (">", "unord"), "spirv.FUnordGreaterThanEqual": (">=", "unord"),
}

UNARY_PREFIX = {"spirv.FNegate": "-", "spirv.SNegate": "-", "spirv.Not": "~", "spirv.LogicalNot": "!"}

# GLSL.std.450 instructions that are a WGSL builtin of the same arity on the same types.
GL_BUILTIN = {
    "spirv.GL.Fma": "fma", "spirv.GL.Floor": "floor", "spirv.GL.Ceil": "ceil", "spirv.GL.Trunc": "trunc",
    "spirv.GL.Round": "round", "spirv.GL.RoundEven": "round", "spirv.GL.Fract": "fract",
    "spirv.GL.FAbs": "abs", "spirv.GL.SAbs": "abs", "spirv.GL.FSign": "sign", "spirv.GL.SSign": "sign",
    "spirv.GL.Sqrt": "sqrt", "spirv.GL.InverseSqrt": "inverseSqrt",
    "spirv.GL.Exp": "exp", "spirv.GL.Log": "log", "spirv.GL.Exp2": "exp2", "spirv.GL.Log2": "log2",
    "spirv.GL.Pow": "pow", "spirv.GL.Sin": "sin", "spirv.GL.Cos": "cos", "spirv.GL.Tan": "tan",
    "spirv.GL.Asin": "asin", "spirv.GL.Acos": "acos", "spirv.GL.Atan": "atan", "spirv.GL.Atan2": "atan2",
    "spirv.GL.Sinh": "sinh", "spirv.GL.Cosh": "cosh", "spirv.GL.Tanh": "tanh",
    "spirv.GL.Asinh": "asinh", "spirv.GL.Acosh": "acosh", "spirv.GL.Atanh": "atanh",
    "spirv.GL.FMax": "max", "spirv.GL.FMin": "min", "spirv.GL.SMax": "max", "spirv.GL.SMin": "min",
    "spirv.GL.FClamp": "clamp", "spirv.GL.SClamp": "clamp", "spirv.GL.FMix": "mix",
    "spirv.GL.Step": "step", "spirv.GL.SmoothStep": "smoothstep", "spirv.GL.Ldexp": "ldexp",
    "spirv.GL.Length": "length", "spirv.GL.Distance": "distance", "spirv.GL.Cross": "cross",
    "spirv.GL.Normalize": "normalize", "spirv.Dot": "dot",
    "spirv.GL.FindILsb": "firstTrailingBit", "spirv.GL.FindSMsb": "firstLeadingBit",
    "spirv.BitCount": "countOneBits", "spirv.BitReverse": "reverseBits",
    "spirv.GL.PackHalf2x16": "pack2x16float", "spirv.GL.UnpackHalf2x16": "unpack2x16float",
}

# GLSL.std.450 unsigned instructions: WGSL builtin applied to bitcast<u32> operands.
GL_UNSIGNED = {"spirv.GL.UMax": "max", "spirv.GL.UMin": "min", "spirv.GL.UClamp": "clamp",
               "spirv.GL.FindUMsb": "firstLeadingBit"}

# NaN-aware min/max/clamp (NMax: the non-NaN operand wins) → helper functions.
GL_NAN_AWARE = {"spirv.GL.NMax": "nmax", "spirv.GL.NMin": "nmin", "spirv.GL.NClamp": "nclamp"}

CONVERSIONS = {"spirv.ConvertFToS", "spirv.ConvertSToF", "spirv.FConvert", "spirv.SConvert",
               "spirv.ConvertUToF", "spirv.ConvertFToU", "spirv.UConvert"}

# Subgroup operations (WGSL `enable subgroups;`): (reduce, inclusive scan, exclusive scan) builtins.
GROUP_ARITHMETIC = {
    "spirv.GroupNonUniformFAdd": ("subgroupAdd", "subgroupInclusiveAdd", "subgroupExclusiveAdd"),
    "spirv.GroupNonUniformIAdd": ("subgroupAdd", "subgroupInclusiveAdd", "subgroupExclusiveAdd"),
    "spirv.GroupNonUniformFMul": ("subgroupMul", "subgroupInclusiveMul", "subgroupExclusiveMul"),
    "spirv.GroupNonUniformIMul": ("subgroupMul", "subgroupInclusiveMul", "subgroupExclusiveMul"),
    "spirv.GroupNonUniformFMax": ("subgroupMax", None, None),
    "spirv.GroupNonUniformFMin": ("subgroupMin", None, None),
    "spirv.GroupNonUniformSMax": ("subgroupMax", None, None),
    "spirv.GroupNonUniformSMin": ("subgroupMin", None, None),
    "spirv.GroupNonUniformBitwiseAnd": ("subgroupAnd", None, None),
    "spirv.GroupNonUniformBitwiseOr": ("subgroupOr", None, None),
    "spirv.GroupNonUniformBitwiseXor": ("subgroupXor", None, None),
}
GROUP_UNSIGNED = {"spirv.GroupNonUniformUMax": "subgroupMax", "spirv.GroupNonUniformUMin": "subgroupMin"}
GROUP_SHUFFLE = {"spirv.GroupNonUniformShuffle": "subgroupShuffle",
                 "spirv.GroupNonUniformShuffleXor": "subgroupShuffleXor",
                 "spirv.GroupNonUniformShuffleUp": "subgroupShuffleUp",
                 "spirv.GroupNonUniformShuffleDown": "subgroupShuffleDown",
                 "spirv.GroupNonUniformBroadcast": "subgroupBroadcast"}
GROUP_OTHER = {"spirv.GroupNonUniformBroadcastFirst": "subgroupBroadcastFirst",
               "spirv.GroupNonUniformElect": "subgroupElect", "spirv.GroupNonUniformAll": "subgroupAll",
               "spirv.GroupNonUniformAny": "subgroupAny", "spirv.GroupNonUniformBallot": "subgroupBallot"}

BUILTINS = {
    "LocalInvocationId": ("local_invocation_id", "vec3<u32>"),
    "WorkgroupId": ("workgroup_id", "vec3<u32>"),
    "NumWorkgroups": ("num_workgroups", "vec3<u32>"),
    "GlobalInvocationId": ("global_invocation_id", "vec3<u32>"),
    "LocalInvocationIndex": ("local_invocation_index", "u32"),
    "SubgroupLocalInvocationId": ("subgroup_invocation_id", "u32"),
    "SubgroupSize": ("subgroup_size", "u32"),
}

ATOMIC_RMW = {"spirv.AtomicAnd": "atomicAnd", "spirv.AtomicOr": "atomicOr", "spirv.AtomicXor": "atomicXor",
              "spirv.AtomicIAdd": "atomicAdd", "spirv.AtomicISub": "atomicSub",
              "spirv.AtomicUMax": "atomicMax", "spirv.AtomicUMin": "atomicMin",
              "spirv.AtomicExchange": "atomicExchange"}
