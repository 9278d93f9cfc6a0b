"""Errors raised by the SPIR-V → WGSL translator."""


class UnsupportedSpirvError(NotImplementedError):
    """The SPIR-V module uses an op, type or shape the WGSL translator does not handle (yet)."""
