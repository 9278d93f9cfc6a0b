"""torch-webgpu benchmarks: `python -m benchmarks run|latency|library|anatomy|prepare|check|report`."""
