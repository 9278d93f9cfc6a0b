"""What a synchronised call costs, and why (`python -m benchmarks latency MODE`).

Waits for the queue, eager and compiled calls split into recording, submitting and waiting, the eager launch
paths, what ran before a dispatch in its submit, Dawn's toggles, the browser beside Python, and what moves
the GPU's clock without a CUDA context.
"""
