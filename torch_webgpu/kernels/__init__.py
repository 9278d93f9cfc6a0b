"""The kernel library shared by eager ops and compiled plans (issue 12), their only kernel layer (issue 40).

Each family (matmul, quantized matmul, conv, attention, reductions, rows, sampling) declares its problem
once and generates its WGSL variants from parameters (the eager device's strided kernels too: the general
matmul, direct convolutions, strided row ops); `family.KernelFamily` (variants, steps, problem key) is what
its users call and `launch.KernelLaunch` what they record. `wgsl/` is the one prelude of helper functions
that eager ops and library kernels share. Imports only the runtime and numpy.
"""

from .launch import PARAMS, DeviceCaps, KernelLaunch, record

__all__ = ["PARAMS", "DeviceCaps", "KernelLaunch", "record"]
