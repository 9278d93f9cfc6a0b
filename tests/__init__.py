"""The test suite; a package so that its sub-packages (tests.kernels, tests.ops, ...) do not shadow
installed top-level packages of the same names (transformers imports the `kernels` distribution)."""
