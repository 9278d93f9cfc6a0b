"""Python dialect modules searched by the MLIR bindings for dialects IREE ships no Python module for."""
