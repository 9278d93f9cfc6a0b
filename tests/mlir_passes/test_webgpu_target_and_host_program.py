"""The WebGPU target built from limits, and the extraction of IREE's HAL host program."""

import pytest

from mlir_passes.webgpu_target import WebGPUTarget

LIMITS = {"max-compute-invocations-per-workgroup": 512, "max-compute-workgroup-size-x": 512,
          "max-compute-workgroup-size-y": 256, "max-compute-workgroup-size-z": 64,
          "max-compute-workgroup-storage-size": 32768, "max-compute-workgroups-per-dimension": 65535,
          "max-storage-buffer-binding-size": 1 << 27, "min-storage-buffer-offset-alignment": 16}

MATMUL = """
module {
  func.func @main(%arg0: !torch.vtensor<[4,8],f32>, %arg1: !torch.vtensor<[8,3],f32>)
      -> !torch.vtensor<[4,3],f32> {
    %0 = torch.aten.mm %arg0, %arg1 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,3],f32>
      -> !torch.vtensor<[4,3],f32>
    return %0 : !torch.vtensor<[4,3],f32>
  }
}
"""


def test_target_attribute_comes_from_limits_and_features():
    target = WebGPUTarget.from_limits(LIMITS, {"shader-f16"})
    attr = target.device_targets_attribute()
    assert 'arch = "webgpu"' in attr and "subgroup = none" in attr
    assert "max_thread_count_per_workgroup = 512" in attr and "max_workgroup_sizes = [512, 256, 64]" in attr
    assert "max_workgroup_memory_bytes = 32768" in attr and "cap:Float16" in attr
    assert "--iree-stream-resource-min-offset-alignment=256" in target.iree_flags()
    assert WebGPUTarget.from_limits(LIMITS).key() != target.key()
    assert "cap:Float16" not in WebGPUTarget.from_limits(LIMITS).device_targets_attribute()


def test_matmul_host_program_is_extracted():
    from mlir_passes.host_program import extract_host_program
    from mlir_passes.iree_driver import compile_to_hal

    artifacts = compile_to_hal(MATMUL, WebGPUTarget())
    assert len(artifacts.spirv_mlir) == 1 and "spirv.module" in next(iter(artifacts.spirv_mlir.values()))
    program = extract_host_program(artifacts.hal_text)
    assert program.num_inputs == 2
    dispatches = [c for c in program.main if c.kind == "dispatch"]
    assert len(dispatches) == 1 and dispatches[0].entry_point in artifacts.spirv_mlir
    kinds = {b.buffer.kind for b in dispatches[0].bindings}
    assert "input" in kinds
    (out,) = program.outputs
    assert out.shape == (4, 3) and out.element_type == "f32" and out.length == 48


def test_iree_error_is_reported():
    from mlir_passes.iree_driver import IREECompileError, compile_to_hal

    with pytest.raises((IREECompileError, ValueError)):
        compile_to_hal("module { func.func @main( }", WebGPUTarget())


def test_inlined_composite_constant_bytes():
    import numpy as np

    from mlir_passes.host_program import UnsupportedHostOp, constant_bytes

    data = constant_bytes('#util.composite<32xi8, [\n dense<[0, 1, 2]> : tensor<3xi32>,\n'
                          ' dense<"0x0000803F"> : tensor<1xf32>,\n dense<7> : vector<16xi8>,\n]>')
    assert np.frombuffer(data[:12], np.int32).tolist() == [0, 1, 2]
    assert np.frombuffer(data[12:16], np.float32).tolist() == [1.0] and data[16:] == bytes([7] * 16)
    with pytest.raises(UnsupportedHostOp, match="declares 64"):
        constant_bytes("#util.composite<64xi8, [dense<1> : tensor<2xi32>]>")


def test_dynamic_matmul_host_program_has_dimension_expressions():
    from mlir_passes.host_program import extract_host_program
    from mlir_passes.iree_driver import compile_to_hal
    from torch_webgpu.plan import host_expr

    text = MATMUL.replace("[4,8]", "[?,8]").replace("[4,3]", "[?,3]")
    program = extract_host_program(compile_to_hal(text, WebGPUTarget()).hal_text)
    (out,) = program.outputs
    assert out.shape[1] == 3 and host_expr.evaluate(out.shape[0], [(6, 8), (8, 3)]) == 6
    assert host_expr.evaluate(out.length, [(6, 8), (8, 3)]) == 6 * 3 * 4
    (dispatch,) = [c for c in program.main if c.kind == "dispatch"]
    assert any(not host_expr.is_static(c) for c in dispatch.constants)   # the dim as a push constant
