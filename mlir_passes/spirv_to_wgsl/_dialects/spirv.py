"""Empty `spirv` dialect module: the ops stay generic OpViews.

IREE's Python package has no `spirv` dialect module, and the MLIR bindings retry that import for every
op they wrap unless some search prefix provides one; without this module translation is ~10x slower."""
