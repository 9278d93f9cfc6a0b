"""Op-level tests of the spirv → WGSL translator: hand-written spirv-dialect kernels for semantics the
test models reach only partly (NaN/inf, unsigned integers, aliasing, barriers, loops with results,
push constants), run on the real Dawn device and checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from mlir_passes.spirv_to_wgsl import UnsupportedSpirvError, translate_spirv_module

F32_BUF = "!spirv.ptr<!spirv.struct<(!spirv.rtarray<f32, stride=4> [0])>, StorageBuffer>"
I32_BUF = "!spirv.ptr<!spirv.struct<(!spirv.rtarray<i32, stride=4> [0])>, StorageBuffer>"
V4_BUF = "!spirv.ptr<!spirv.struct<(!spirv.rtarray<vector<4xf32>, stride=16> [0])>, StorageBuffer>"


def module(body: str, globals_: str, local_size: int) -> str:
    """A spirv.module with one entry point `k` whose body is `body` (thread index in %t)."""
    return f"""
spirv.module Logical GLSL450 requires #spirv.vce<v1.0, [Shader], [SPV_KHR_storage_buffer_storage_class]> {{
  spirv.GlobalVariable @lid built_in("LocalInvocationId") : !spirv.ptr<vector<3xi32>, Input>
  {globals_}
  spirv.func @k() "None" {{
    %c0 = spirv.Constant 0 : i32
    %c1 = spirv.Constant 1 : i32
    %lidp = spirv.mlir.addressof @lid : !spirv.ptr<vector<3xi32>, Input>
    %lidv = spirv.Load "Input" %lidp : vector<3xi32>
    %t = spirv.CompositeExtract %lidv[0 : i32] : vector<3xi32>
    {body}
    spirv.Return
  }}
  spirv.EntryPoint "GLCompute" @k, @lid
  spirv.ExecutionMode @k "LocalSize", {local_size}, 1, 1
}}
"""


def access(ptr_name: str, buf_type: str, index: str, result: str, elem: str) -> str:
    """An AccessChain line: %{result} = &buffer[index]."""
    return (f"%{result} = spirv.AccessChain %{ptr_name}[%c0, %{index}] : {buf_type}, i32, i32 "
            f"-> !spirv.ptr<{elem}, StorageBuffer>")


def store_at(buf: str, buf_type: str, base: str, k: int, value: str, elem: str, tag: str) -> list[str]:
    """Lines storing %{value} at buffer[%{base} + k]."""
    return [f"%{tag}k{k} = spirv.Constant {k} : i32", f"%{tag}i{k} = spirv.IAdd %{base}, %{tag}k{k} : i32",
            access(buf, buf_type, f"{tag}i{k}", f"{tag}p{k}", elem),
            f'spirv.Store "StorageBuffer" %{tag}p{k}, %{value} : {elem}']


def buffers(*specs: tuple[str, int, str], aliased: bool = False) -> str:
    """GlobalVariable lines for (name, binding, type) storage buffers in set 0."""
    flag = " {aliased}" if aliased else ""
    return "\n  ".join(f"spirv.GlobalVariable @{name} bind(0, {b}){flag} : {t}" for name, b, t in specs)


@pytest.fixture(scope="module")
def rt():
    """The process-wide Runtime on the real adapter."""
    from torch_webgpu.runtime import get_runtime

    return get_runtime()


def run(rt, exe, arrays: list[np.ndarray], workgroups=(1, 1, 1), extra=()) -> list[np.ndarray]:
    """Dispatch a translated executable once over buffers holding `arrays`; returns them read back."""
    ids = [rt.allocate(a.nbytes) for a in arrays]
    try:
        for buf, a in zip(ids, arrays, strict=True):
            rt.upload(buf, a)
        rt.dispatch(rt.kernel(exe.code, exe.entry_point, label=exe.name), [*ids, *extra], workgroups)
        pairs = zip(ids, arrays, strict=True)
        return [rt.download_array(buf, a.dtype, a.size).reshape(a.shape) for buf, a in pairs]
    finally:
        for buf in ids:
            rt.free(buf)


def nmax(a, b):
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.maximum(a, b)))


def nmin(a, b):
    return np.where(np.isnan(a), b, np.where(np.isnan(b), a, np.minimum(a, b)))


def test_nan_inf_tests_compares_and_nan_aware_max_min(rt):
    flags = [
        "%f0 = spirv.IsNan %x : f32", "%f1 = spirv.IsInf %x : f32",
        "%f2 = spirv.FUnordLessThan %x, %zero : f32", "%f3 = spirv.FOrdEqual %x, %x : f32",
        "%f4 = spirv.FOrdNotEqual %x, %one : f32", "%f5 = spirv.FUnordEqual %x, %one : f32",
    ]
    lines = [
        "%zero = spirv.Constant 0.0 : f32", "%one = spirv.Constant 1.0 : f32",
        "%ninf = spirv.Constant 0xFF800000 : f32", "%qnan = spirv.Constant 0x7FC00000 : f32",
        "%five = spirv.Constant 5.0 : f32", "%c6 = spirv.Constant 6 : i32", "%c4 = spirv.Constant 4 : i32",
        "%inp = spirv.mlir.addressof @in : " + F32_BUF, "%fl = spirv.mlir.addressof @flags : " + I32_BUF,
        "%fo = spirv.mlir.addressof @floats : " + F32_BUF,
        access("inp", F32_BUF, "t", "xp", "f32"), '%x = spirv.Load "StorageBuffer" %xp : f32',
        *flags, "%fb = spirv.IMul %t, %c6 : i32", "%ob = spirv.IMul %t, %c4 : i32",
    ]
    for k in range(6):
        lines += [f"%s{k} = spirv.Select %f{k}, %c1, %c0 : i1, i32",
                  *store_at("fl", I32_BUF, "fb", k, f"s{k}", "i32", "a")]
    values = ["%n0 = spirv.GL.NMax %x, %one : f32", "%n1 = spirv.GL.NMin %x, %one : f32",
              "%n2 = spirv.GL.NMax %x, %ninf : f32", "%n3 = spirv.Select %f0, %qnan, %five : i1, f32"]
    lines += values
    for k in range(4):
        lines += store_at("fo", F32_BUF, "ob", k, f"n{k}", "f32", "b")
    globals_ = buffers(("in", 0, F32_BUF), ("flags", 1, I32_BUF), ("floats", 2, F32_BUF))
    (exe,) = translate_spirv_module(module("\n    ".join(lines), globals_, 8))
    assert "0x7fc00000" in exe.code and "0xff800000" in exe.code  # built by bitcast, never a literal
    x = np.array([1.5, -2.0, np.nan, np.inf, -np.inf, 0.0, 1.0, -np.nan], np.float32)
    _, got_flags, got_floats = run(rt, exe, [x, np.zeros(48, np.int32), np.zeros(32, np.float32)])
    nan = np.isnan(x)
    expected_flags = np.stack([nan, np.isinf(x), nan | (x < 0), ~nan & (x == x), ~nan & (x != 1),
                               nan | (x == 1)], 1).astype(np.int32).reshape(-1)
    np.testing.assert_array_equal(got_flags, expected_flags)
    expected = np.stack([nmax(x, 1), nmin(x, 1), nmax(x, np.float32(-np.inf)),
                         np.where(nan, np.nan, 5)], 1)
    np.testing.assert_array_equal(got_floats, expected.astype(np.float32).reshape(-1))


def test_unsigned_and_signed_integer_ops(rt):
    ops = ["spirv.UDiv %a, %b : i32", "spirv.UMod %a, %b : i32", "spirv.SDiv %a, %b : i32",
           "spirv.SRem %a, %b : i32", "spirv.SMod %a, %b : i32", "spirv.ShiftRightLogical %a, %c1 : i32, i32",
           "spirv.ShiftRightArithmetic %a, %c1 : i32, i32", "spirv.GL.UMin %a, %b : i32",
           "spirv.GL.SMax %a, %b : i32", "spirv.ULessThan %a, %b : i32"]
    lines = ["%b = spirv.Constant 3 : i32", "%ten = spirv.Constant 10 : i32",
             "%inp = spirv.mlir.addressof @in : " + I32_BUF, "%out = spirv.mlir.addressof @out : " + I32_BUF,
             access("inp", I32_BUF, "t", "ap", "i32"), '%a = spirv.Load "StorageBuffer" %ap : i32',
             "%base = spirv.IMul %t, %ten : i32"]
    for k, op in enumerate(ops):
        lines.append(f"%r{k} = {op}")
    lines.append("%r9s = spirv.Select %r9, %c1, %c0 : i1, i32")
    for k in range(10):
        lines += store_at("out", I32_BUF, "base", k, f"r{k}" if k < 9 else "r9s", "i32", "s")
    globals_ = buffers(("in", 0, I32_BUF), ("out", 1, I32_BUF))
    (exe,) = translate_spirv_module(module("\n    ".join(lines), globals_, 8))
    assert "bitcast<u32>" in exe.code
    a = np.array([7, -7, 2, -1, 0, 3, -2147483647, 2147483647], np.int32)
    _, out = run(rt, exe, [a, np.zeros(80, np.int32)])
    u = a.view(np.uint32)
    expected = np.stack([
        (u // 3).view(np.int32), (u % 3).view(np.int32), np.trunc(a / 3).astype(np.int32), np.fmod(a, 3),
        np.mod(a, 3), (u >> 1).view(np.int32), a >> 1, np.minimum(u, 3).view(np.int32), np.maximum(a, 3),
        (u < 3).astype(np.int32)], 1).reshape(-1)
    np.testing.assert_array_equal(out, expected)


def test_workgroup_memory_and_barrier(rt):
    wg = "!spirv.ptr<!spirv.struct<(!spirv.array<4 x f32>)>, Workgroup>"
    lines = [
        "%c4 = spirv.Constant 4 : i32", "%two = spirv.Constant 2.0 : f32",
        "%inp = spirv.mlir.addressof @in : " + F32_BUF, "%out = spirv.mlir.addressof @out : " + F32_BUF,
        f"%wg = spirv.mlir.addressof @wg : {wg}",
        access("inp", F32_BUF, "t", "xp", "f32"), '%x = spirv.Load "StorageBuffer" %xp : f32',
        "%x2 = spirv.FMul %x, %two : f32",
        f"%wp = spirv.AccessChain %wg[%c0, %t] : {wg}, i32, i32 -> !spirv.ptr<f32, Workgroup>",
        'spirv.Store "Workgroup" %wp, %x2 : f32',
        "spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>",
        "%t1 = spirv.IAdd %t, %c1 : i32", "%n = spirv.UMod %t1, %c4 : i32",
        f"%np = spirv.AccessChain %wg[%c0, %n] : {wg}, i32, i32 -> !spirv.ptr<f32, Workgroup>",
        '%y = spirv.Load "Workgroup" %np : f32',
        access("out", F32_BUF, "t", "op", "f32"), 'spirv.Store "StorageBuffer" %op, %y : f32',
    ]
    globals_ = buffers(("in", 0, F32_BUF), ("out", 1, F32_BUF)) + f"\n  spirv.GlobalVariable @wg : {wg}"
    (exe,) = translate_spirv_module(module("\n    ".join(lines), globals_, 4))
    assert "workgroupBarrier();" in exe.code and "var<workgroup>" in exe.code
    x = np.arange(4, dtype=np.float32) + 1
    _, out = run(rt, exe, [x, np.zeros(4, np.float32)])
    np.testing.assert_array_equal(out, np.roll(x * 2, -1))


def test_aliased_bindings_of_different_types_are_merged(rt):
    lines = [
        "%c4 = spirv.Constant 4 : i32", "%c2 = spirv.Constant 2 : i32",
        "%w = spirv.Constant dense<[1.0, 2.0, 3.0, 4.0]> : vector<4xf32>",
        "%vb = spirv.mlir.addressof @vec : " + V4_BUF, "%sb = spirv.mlir.addressof @scalar : " + F32_BUF,
        "%out = spirv.mlir.addressof @out : " + F32_BUF,
        access("vb", V4_BUF, "t", "vp", "vector<4xf32>"),
        '%v = spirv.Load "StorageBuffer" %vp : vector<4xf32>',
        "%d = spirv.Dot %v, %w : vector<4xf32> -> f32",
        f"%cp = spirv.AccessChain %vb[%c0, %t, %c2] : {V4_BUF}, i32, i32, i32 "
        "-> !spirv.ptr<f32, StorageBuffer>",
        '%z = spirv.Load "StorageBuffer" %cp : f32',
        access("out", F32_BUF, "t", "op", "f32"), 'spirv.Store "StorageBuffer" %op, %z : f32',
        "%wi = spirv.IMul %t, %c4 : i32", access("sb", F32_BUF, "wi", "sp", "f32"),
        'spirv.Store "StorageBuffer" %sp, %d : f32',
    ]
    globals_ = (buffers(("vec", 0, V4_BUF), ("scalar", 0, F32_BUF), aliased=True) + "\n  "
                + buffers(("out", 1, F32_BUF)))
    (exe,) = translate_spirv_module(module("\n    ".join(lines), globals_, 4))
    assert [(b.set, b.binding, b.wgsl_binding) for b in exe.bindings] == [(0, 0, 0), (0, 1, 1)]
    assert "array<u32>" in exe.code
    data = np.arange(16, dtype=np.float32)
    buf, out = run(rt, exe, [data.copy(), np.zeros(4, np.float32)])
    rows = data.reshape(4, 4)
    expected = rows.copy()
    expected[:, 0] = rows @ np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(buf.reshape(4, 4), expected)
    np.testing.assert_array_equal(out, rows[:, 2])


def test_loop_with_carried_values_and_results(rt):
    loop = f"""
    %c4 = spirv.Constant 4 : i32
    %f0 = spirv.Constant 0.0 : f32
    %inp = spirv.mlir.addressof @in : {F32_BUF}
    %outp = spirv.mlir.addressof @out : {F32_BUF}
    %r:2 = "spirv.mlir.loop"() <{{loop_control = #spirv.loop_control<None>}}> ({{
      spirv.Branch ^bb1(%c0, %f0, %c0 : i32, f32, i32)
    ^bb1(%i: i32, %acc: f32, %cnt: i32):
      %lt = spirv.SLessThan %i, %c4 : i32
      spirv.BranchConditional %lt, ^bb2, ^bb3(%acc, %cnt : f32, i32)
    ^bb2:
      %row = spirv.IMul %t, %c4 : i32
      %idx = spirv.IAdd %row, %i : i32
      {access("inp", F32_BUF, "idx", "p", "f32")}
      %x = spirv.Load "StorageBuffer" %p : f32
      %pos = spirv.FOrdGreaterThan %x, %f0 : f32
      %one = spirv.Select %pos, %c1, %c0 : i1, i32
      %cnt2 = spirv.IAdd %cnt, %one : i32
      %acc2 = spirv.FAdd %acc, %x : f32
      %i2 = spirv.IAdd %i, %c1 : i32
      spirv.Branch ^bb1(%i2, %acc2, %cnt2 : i32, f32, i32)
    ^bb3(%ra: f32, %rc: i32):
      spirv.mlir.merge %ra, %rc : f32, i32
    }}) : () -> (f32, i32)
    %cf = spirv.ConvertSToF %r#1 : i32 to f32
    %hundred = spirv.Constant 100.0 : f32
    %cs = spirv.FMul %cf, %hundred : f32
    %s = spirv.FAdd %r#0, %cs : f32
    {access("outp", F32_BUF, "t", "op", "f32")}
    spirv.Store "StorageBuffer" %op, %s : f32"""
    globals_ = buffers(("in", 0, F32_BUF), ("out", 1, F32_BUF))
    (exe,) = translate_spirv_module(module(loop, globals_, 4))
    assert "loop {" in exe.code and "break;" in exe.code
    x = np.array([1, -2, 3, 4, -1, -1, -1, -1, 0.5, 0.25, 0, 2, 9, -9, 9, -9], np.float32)
    _, out = run(rt, exe, [x, np.zeros(4, np.float32)])
    rows = x.reshape(4, 4)
    np.testing.assert_allclose(out, rows.sum(1) + 100 * (rows > 0).sum(1))


def test_vectors_composites_and_function_variables(rt):
    arr = "!spirv.array<4 x f32>"
    lines = [
        "%c3 = spirv.Constant 3 : i32", "%c4 = spirv.Constant 4 : i32", "%nine = spirv.Constant 9.0 : f32",
        "%k1 = spirv.Constant 1.0 : f32", "%k2 = spirv.Constant 2.0 : f32", "%k3 = spirv.Constant 3.0 : f32",
        f"%fv = spirv.Variable : !spirv.ptr<{arr}, Function>",
        "%inp = spirv.mlir.addressof @in : " + F32_BUF, "%out = spirv.mlir.addressof @out : " + F32_BUF,
        access("inp", F32_BUF, "t", "xp", "f32"), '%x = spirv.Load "StorageBuffer" %xp : f32',
        "%x1 = spirv.FAdd %x, %k1 : f32", "%x2 = spirv.FAdd %x, %k2 : f32", "%x3 = spirv.FAdd %x, %k3 : f32",
        "%v = spirv.CompositeConstruct %x, %x1, %x2, %x3 : (f32, f32, f32, f32) -> vector<4xf32>",
        "%v2 = spirv.CompositeInsert %nine, %v[1 : i32] : f32 into vector<4xf32>",
        "%sh = spirv.VectorShuffle [3 : i32, 0 : i32, 5 : i32] %v2, %v : vector<4xf32>, vector<4xf32> "
        "-> vector<3xf32>",
        "%m = spirv.UMod %t, %c4 : i32", "%dyn = spirv.VectorExtractDynamic %v2[%m] : vector<4xf32>, i32",
        f"%fp = spirv.AccessChain %fv[%m] : !spirv.ptr<{arr}, Function>, i32 -> !spirv.ptr<f32, Function>",
        'spirv.Store "Function" %fp, %dyn : f32', '%back = spirv.Load "Function" %fp : f32',
        "%base = spirv.IMul %t, %c4 : i32",
    ]
    results = ["%e0 = spirv.CompositeExtract %sh[0 : i32] : vector<3xf32>",
               "%e1 = spirv.CompositeExtract %sh[1 : i32] : vector<3xf32>",
               "%e2 = spirv.CompositeExtract %sh[2 : i32] : vector<3xf32>",
               "%e3 = spirv.FAdd %back, %c0f : f32"]
    lines += ["%c0f = spirv.Constant 0.0 : f32", *results]
    for k in range(4):
        lines += store_at("out", F32_BUF, "base", k, f"e{k}", "f32", "s")
    globals_ = buffers(("in", 0, F32_BUF), ("out", 1, F32_BUF))
    (exe,) = translate_spirv_module(module("\n    ".join(lines), globals_, 4))
    x = np.array([10, 20, 30, 40], np.float32)
    _, out = run(rt, exe, [x, np.zeros(16, np.float32)])
    v2 = np.stack([x, np.full(4, 9, np.float32), x + 2, x + 3], 1)
    expected = np.stack([x + 3, x, x + 1, v2[np.arange(4), np.arange(4)]], 1)
    np.testing.assert_array_equal(out.reshape(4, 4), expected)


@pytest.mark.parametrize("specialise", [False, True])
def test_push_constants_uniform_or_specialised(rt, specialise):
    pc = "!spirv.ptr<!spirv.struct<(!spirv.array<2 x i32, stride=4> [0]), Block>, PushConstant>"
    lines = [
        f"%pc = spirv.mlir.addressof @pc : {pc}",
        f"%p0 = spirv.AccessChain %pc[%c0, %c0] : {pc}, i32, i32 -> !spirv.ptr<i32, PushConstant>",
        f"%p1 = spirv.AccessChain %pc[%c0, %c1] : {pc}, i32, i32 -> !spirv.ptr<i32, PushConstant>",
        '%scale = spirv.Load "PushConstant" %p0 : i32', '%shift = spirv.Load "PushConstant" %p1 : i32',
        "%inp = spirv.mlir.addressof @in : " + I32_BUF, "%out = spirv.mlir.addressof @out : " + I32_BUF,
        access("inp", I32_BUF, "t", "xp", "i32"), '%x = spirv.Load "StorageBuffer" %xp : i32',
        "%y0 = spirv.IMul %x, %scale : i32", "%y = spirv.IAdd %y0, %shift : i32",
        access("out", I32_BUF, "t", "op", "i32"), 'spirv.Store "StorageBuffer" %op, %y : i32',
    ]
    globals_ = buffers(("in", 0, I32_BUF), ("out", 1, I32_BUF)) + f"\n  spirv.GlobalVariable @pc : {pc}"
    values = {0: 3, 1: -5}
    (exe,) = translate_spirv_module(module("\n    ".join(lines), globals_, 4), values if specialise else None)
    assert exe.push_constant_count == 2
    extra = []
    if specialise:
        assert exe.push_constant_binding is None and "var<uniform>" not in exe.code
    else:
        assert exe.push_constant_binding == 2
        extra = [rt.constant(np.array([3, -5, 0, 0], np.int32).tobytes())]
    x = np.array([1, 2, -3, 100], np.int32)
    _, out = run(rt, exe, [x, np.zeros(4, np.int32)], extra=extra)
    np.testing.assert_array_equal(out, x * 3 - 5)


def test_unsupported_op_and_64_bit_types_raise_clear_errors():
    body = "%b = spirv.IAddCarry %t, %t : !spirv.struct<(i32, i32)>"
    with pytest.raises(UnsupportedSpirvError, match="IAddCarry"):
        translate_spirv_module(module(body, "", 4))
    with pytest.raises(UnsupportedSpirvError, match="cannot parse"):
        translate_spirv_module("spirv.module Logical GLSL450 {")
    i64 = "!spirv.ptr<!spirv.struct<(!spirv.rtarray<i64, stride=8> [0])>, StorageBuffer>"
    with pytest.raises(UnsupportedSpirvError, match="demote-i64-to-i32"):
        translate_spirv_module(module("", f"spirv.GlobalVariable @in bind(0, 0) : {i64}", 4))


def test_largest_finite_float_constants_compile_and_keep_their_value(rt):
    # Their shortest round-tripping decimal (3.4028235e38) lies past FLT_MAX: WGSL refuses it.
    body = "\n    ".join(
        ["%big = spirv.Constant -3.40282347E+38 : f32", "%small = spirv.Constant 3.40282347E+38 : f32",
         "%out = spirv.mlir.addressof @out : " + F32_BUF]
        + store_at("out", F32_BUF, "c0", 0, "big", "f32", "a")
        + store_at("out", F32_BUF, "c0", 1, "small", "f32", "b"))
    (exe,) = translate_spirv_module(module(body, buffers(("out", 0, F32_BUF)), 1))
    (got,) = run(rt, exe, [np.zeros(2, np.float32)])
    top = np.finfo(np.float32).max
    np.testing.assert_array_equal(got, np.array([-top, top], np.float32))
