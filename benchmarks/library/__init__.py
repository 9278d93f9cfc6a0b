"""The kernel library's variants, one family per mode (`python -m benchmarks library FAMILY`).

Every variant of a family of torch_webgpu/kernels on the raw runtime, checked against a reference before it
is timed from GPU timestamps, with torch CUDA's figure of the same problem after all of them.
"""
