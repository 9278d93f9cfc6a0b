"""Language models in each runtime (`python -m benchmarks lm MODE`).

A decode bundle through the Python loader, torch-webgpu.js under Node + Dawn and in the page; the tiny model
beside a peer (transformers.js) in one Chromium; and the bundles they measure.
"""
