"""The tuned kernel library shared by eager ops and compiled plans (issue 12).

Each family (matmul, conv, attention, reductions, rows) declares its problem once and generates its
WGSL variants from parameters; `launch.KernelLaunch` is the only thing its users see. Imports only the
runtime and numpy.
"""

from .launch import PARAMS, DeviceCaps, KernelLaunch, record

__all__ = ["PARAMS", "DeviceCaps", "KernelLaunch", "record"]
