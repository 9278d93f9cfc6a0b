"""MLIR-level work for torch-webgpu: torch-dialect passes, the WebGPU target for IREE, the IREE driver and
the extraction of IREE's HAL host program. Knows nothing of torch tensors."""
