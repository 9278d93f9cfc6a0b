"""torch-webgpu benchmarks: `python -m benchmarks run --suite micro|models|all`."""
