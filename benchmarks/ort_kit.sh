#!/usr/bin/env bash
# The ort-webgpu peer for a GPU machine without network: ONNX Runtime's WebGPU EP as a Python 3.12
# manylinux wheel in ./.whl-ort (git-ignored; ~25 MB of the 64 MiB that travel), downloaded the way
# ../shared/tools/gpu-machine-kit.sh downloads .whl. Run from the repository root.
#
# On the GPU machine benchmarks/run_on_gpu_machine.sh installs it into its own folder (its package is
# named `onnxruntime`, like the CPU build there) and points ORT_WEBGPU_SITE at it:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-ort .whl-ort/*.whl
#   export ORT_WEBGPU_SITE=/tmp/site-ort
set -euo pipefail
mkdir -p .whl-ort
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .whl-ort "onnxruntime-webgpu==${ORT_WEBGPU_VERSION:-1.27.0}"
du -sh .whl-ort
