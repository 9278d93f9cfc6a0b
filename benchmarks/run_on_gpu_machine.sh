#!/usr/bin/env bash
# Run the benchmarks on a GPU machine without network (the H200 lent by the device tool), from the
# repository root, with .gl/ (Vulkan/GL loader .debs) and .whl/ (Python 3.12 wheels) carried along —
# both made by ../shared/tools/gpu-machine-kit.sh. Results go to ${OUT:-benchmarks/out}/gpu.
set -euo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
# The eager device needs _C built against this machine's torch (kept between calls on a warm machine).
python3 -c "import torch_webgpu._C" 2>/dev/null || bash tools/build_extension_inplace.sh
nvidia-smi -L || true
# Correctness of every bundle and .vmfb before their timings (CHECK=0 skips it on a second call).
if [ -d .bundles ] && [ "${CHECK:-1}" != 0 ]; then python3 -m benchmarks.check_bundles .bundles || echo "SOME BUNDLES FAILED THEIR CHECK (see above)"; fi
python3 -m benchmarks run --suite "${SUITE:-all}" --backends "${BACKENDS:-dawn,wgpu,webgpu-eager,webgpu-compiled,iree-vulkan,torch-cuda,inductor-cuda}" \
  --out "${OUT:-benchmarks/out}/gpu" "$@"
