#!/usr/bin/env bash
# Issue 41's GPU figure, for a machine without network (the device tool's H100/H200), from the repository
# root: the Llama-3.2-1B-shaped int4 decode bundle through the Python loader and through torch-webgpu.js
# under Node + Dawn for Node, same bundle, same call (goal: Node's decode tokens/s >= 0.8x the loader's).
#
# Carried (git-ignored, made on this side; benchmarks/carry_size.sh .gl .whl .node .bundles-lm checks the
# 64 MiB): .gl/ and .whl/ (../shared/tools/gpu-machine-kit.sh: the Vulkan loader, wgpudawn & co for Python
# 3.12), .node/ (benchmarks/node_kit.sh: Debian's nodejs and dawn.node, ~26 MB) and .bundles-lm/llama-1b-int4
# (`python -m benchmarks lm bundles synthetic-1b .bundles-lm/full/llama-1b-int4` then
# `python -m benchmarks lm bundles strip .bundles-lm/full/llama-1b-int4 .bundles-lm/llama-1b-int4`: its
# plans and WGSL without the weights, which `fill` writes again there, byte for byte).
#
#   run(command="bash benchmarks/lm_on_gpu_machine.sh", carry=[".gl", ".whl", ".node", ".bundles-lm"])
#
# Results: ${OUT:-benchmarks/out}/gpu-lm/lm-runtimes-pin-{auto,0}.json (+ .txt). SETUP=0 PY=... NODE=... skips the set-up
# (a dry run where the stack is installed, e.g. lavapipe here).
set -euo pipefail
T0=$SECONDS
RES="${OUT:-benchmarks/out}/gpu-lm"
BUNDLE=${BUNDLE:-.bundles-lm/llama-1b-int4}
mkdir -p "$RES"
log() { echo "[lm_on_gpu_machine $((SECONDS - T0)) s] $*"; }

PY=${PY:-python3}
NODE=${NODE:-node}
if [ "${SETUP:-1}" != 0 ]; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  # Debian's nodejs: libnode loads its bundled JavaScript from /usr/share/nodejs, so the .debs go into /.
  for f in .node/debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
  NODE=/usr/bin/node
  if [ ! -f torch_webgpu/web/node_modules/webgpu/dist/linux-x64/dawn.node ]; then
    mkdir -p torch_webgpu/web/node_modules
    cp -r .node/node_modules/. torch_webgpu/web/node_modules/
    xz -d torch_webgpu/web/node_modules/webgpu/dist/linux-x64/dawn.node.xz
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  # The loader's native plan executor (the Python figure's fast path), built against this machine's Python.
  "$PY" -c "import torch_webgpu._native_plan as m; m.set_plan_split" 2>/dev/null ||
    PYTHON="$PY" bash tools/build_extension_inplace.sh
  nvidia-smi -L || true
fi
export PYTHONUNBUFFERED=1 TORCH_WEBGPU_CACHE_DIR=${TORCH_WEBGPU_CACHE_DIR:-/tmp/torch-webgpu-cache}
# the bundle is compiled for subgroup size 32 (benchmarks/targets/h200-dawn.json); Dawn reports NVIDIA's as
# 4…128: both runtimes take the one size (generate.mjs reads the same variable)
export TORCH_WEBGPU_SUBGROUP_SIZE=${TORCH_WEBGPU_SUBGROUP_SIZE:-32}
"$NODE" --version
log "set up"
[ -f "$BUNDLE/weights.safetensors" ] || { "$PY" -m benchmarks lm bundles fill "$BUNDLE"; log "weights written"; }
# Node and the loader alternate ROUNDS times (one load, a warm-up, REPS timed generations each), once with
# the Python runtime's clock pin (it holds for Node's rounds too: one clock for both) and once with no pin
# anywhere (as a browser or Node alone runs: NVIDIA's idle clock for bursty work); no CUDA context else.
for pin in ${PINS:-auto 0}; do
  "$PY" -m benchmarks lm runtimes "$BUNDLE" --node "$NODE" --prompt-tokens "${PROMPT_TOKENS:-16}" \
    --new-tokens "${NEW_TOKENS:-128}" --reps "${REPS:-3}" --rounds "${ROUNDS:-2}" --pin-clock "$pin" \
    --json "$RES/lm-runtimes-pin-$pin.json" 2>&1 | grep -v "^Warning: max" | tee "$RES/lm-runtimes-pin-$pin.txt"
  log "pin $pin measured"
done
log "done"
