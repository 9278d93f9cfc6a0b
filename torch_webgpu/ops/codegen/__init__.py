"""WGSL kernel families generated from declarative op specs (elementwise, reductions, ...)."""
