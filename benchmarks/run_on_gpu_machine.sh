#!/usr/bin/env bash
# Run the benchmarks on a GPU machine without network (the H200 lent by the device tool), from the
# repository root, with .gl/ (Vulkan/GL loader .debs) and .whl/ (Python 3.12 wheels) carried along —
# both made by ../shared/tools/gpu-machine-kit.sh — and optionally .whl-ort/ (benchmarks/ort_kit.sh: the
# ort-webgpu peer) and .bundles/ (`python -m benchmarks prepare`). Results go to ${OUT:-benchmarks/out}/gpu.
#
# SUITE=issue12 is the issue-12 run in ONE device call of at most ~8 minutes (BUDGET_S=470 from the
# script's start): a capped bundle check, then models, matmul, nn_ops, bandwidth and graphs for
# webgpu-eager, webgpu-compiled (bundles), ort-webgpu and the library's variants (dawn) in a process that
# never touches CUDA, then torch-cuda and, with whatever time is left, inductor-cuda (its compiles cost
# minutes) in a process of their own (benchmarks/processes.py; the WebGPU process leaves them
# --cuda-reserve seconds, default 90), nvidia-smi sampling the GPU's clock beside each; then (EXTRAS=1, up
# to 2 x EXTRAS_S more) the bandwidth kernels by GPU time and the eager per-op split. Every GPU figure is
# compared with torch CPU before it is timed; figures past the budget are listed as skipped; results.json
# is written after every suite, and the report (results.md with the issue-12 targets, each process's GPU
# clock, library vs IREE time, the autotuner's choices) is rebuilt from it even if the harness had to be
# stopped. Arguments go to the harness: `--cuda-context` opens a CUDA context in the WebGPU process first,
# as every figure before issue 42 was taken. PROBE="latency clock --bundles .bundles" (any probe mode's
# command line) runs that probe after the setup instead, its rows into $RES/probe.json. Any other SUITE
# runs `python -m benchmarks run` on BACKENDS.
set -euo pipefail
T0=$SECONDS
RES="${OUT:-benchmarks/out}/gpu"
mkdir -p "$RES"
log() { echo "[run_on_gpu_machine $((SECONDS - T0)) s] $*"; }

PY=${PY:-python3}
if [ "${SETUP:-1}" != 0 ]; then   # SETUP=0 PY=<python>: a dry run on a machine that has the stack (lavapipe)
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
  if compgen -G ".whl-ort/*.whl" > /dev/null; then
    # onnxruntime-webgpu's package is named onnxruntime, like the image's CPU build: its own folder, put
    # first on sys.path by benchmarks/ort_webgpu.py.
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-ort \
      .whl-ort/*.whl
    export ORT_WEBGPU_SITE=/tmp/site-ort
  fi
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  fi
  # The eager device needs _C built against this machine's torch, compiled plans _native_plan against its
  # Python (both kept between calls on a warm machine; one from before the C++ queue submit/readback is
  # rebuilt too: it would turn the native paths off).
  "$PY" -c "import torch_webgpu._C, torch_webgpu._native_plan as m; m.set_plan_split" 2>/dev/null ||
    PYTHON="$PY" bash tools/build_extension_inplace.sh
  nvidia-smi -L || true
fi
export PYTHONUNBUFFERED=1
# every suite: bundles for the H200 target are compiled for subgroup size 32
export TORCH_WEBGPU_SUBGROUP_SIZE=${TORCH_WEBGPU_SUBGROUP_SIZE:-32}   # Dawn reports NVIDIA's as 4…128
export TORCH_WEBGPU_CACHE_DIR=${TORCH_WEBGPU_CACHE_DIR:-/tmp/torch-webgpu-cache}
log "set up"

if [ -n "${PROBE:-}" ]; then
  # shellcheck disable=SC2086  # PROBE is a command line: word splitting wanted
  "$PY" -m benchmarks $PROBE --json "$RES/probe.json" 2>&1 | tee "$RES/probe.log"
  log "done"
  exit
fi

if [ "${SUITE:-all}" != issue12 ]; then
  # Correctness of every bundle and .vmfb before their timings (CHECK=0 skips it on a second call).
  if [ -d .bundles ] && [ "${CHECK:-1}" != 0 ]; then "$PY" -m benchmarks check .bundles || echo "SOME BUNDLES FAILED THEIR CHECK (see above)"; fi
  "$PY" -m benchmarks run --suite "${SUITE:-all}" --backends "${BACKENDS:-dawn,wgpu,webgpu-eager,webgpu-compiled,iree-vulkan,torch-cuda,inductor-cuda}" \
    --out "$RES" "$@"
  exit
fi

# ---- SUITE=issue12 ----
BUDGET_S=${BUDGET_S:-470}       # from this script's start to the report written
CHECK_S=${CHECK_S:-60}          # cap on the separate bundle check (the harness checks every figure again)
REPORT_S=25                     # kept back for the report and plot
# dawn: the matmul suite's kernel-library variants on the raw runtime ("webgpu-library" rows)
BACKENDS=${BACKENDS:-dawn,webgpu-eager,webgpu-compiled,ort-webgpu,torch-cuda,inductor-cuda}
LATE=${LATE:-inductor-cuda}
SUITES=${SUITES:-models,matmul,nn_ops,bandwidth,graphs}   # the costliest and most looked-at first

# No torch.cuda call here: a CUDA context raises the GPU's clock for a while after its process ends, and
# the harness's WebGPU process must start without one (nvidia-smi -L above names the GPU).
"$PY" - <<'PY' 2>&1 | tee "$RES/preflight.txt" || true
import torch
print("torch", torch.__version__, "built with CUDA", torch.backends.cuda.is_built())
try:
    from benchmarks.ort_webgpu import available, import_onnxruntime
    ort = import_onnxruntime()
    print("ort-webgpu", ort.__version__, ort.__file__, "onnx+onnxscript:", available())
except Exception as exc:
    print("ort-webgpu UNAVAILABLE:", type(exc).__name__, exc)
from torch_webgpu.runtime import get_runtime
print(get_runtime().info.describe())
PY
BUNDLES=()
if [ -d .bundles ]; then
  BUNDLES=(--bundles .bundles)
  log "$(find .bundles -mindepth 1 -maxdepth 1 -type d ! -name iree | wc -l) bundles"
  if [ "${CHECK:-1}" != 0 ]; then
    smoke=(); [[ " $* " == *" --smoke "* ]] && smoke=(--smoke)   # bundles prepared with --smoke
    timeout "$CHECK_S" "$PY" -m benchmarks check .bundles "${smoke[@]}" > "$RES/bundle-check.txt" 2>&1 \
      || echo "bundle check: some failed or it ran past ${CHECK_S} s (see bundle-check.txt)" >> "$RES/bundle-check.txt"
    grep -c "matches torch CPU" "$RES/bundle-check.txt" | sed 's/^/bundle checks passed: /' || true
    grep -v "matches torch CPU" "$RES/bundle-check.txt" | tail -20 || true
  fi
else
  log "no .bundles: webgpu-compiled runs only where the compiler is installed"
fi
LEFT=$((BUDGET_S - (SECONDS - T0) - REPORT_S))
[ "$LEFT" -ge 30 ] || LEFT=30   # setup overran: still measure what 30 s allow
log "harness: ${LEFT} s for ${SUITES} on ${BACKENDS} (late: ${LATE})"
rc=0
timeout -k 5 $((LEFT + 15)) "$PY" -m benchmarks run --suite "$SUITES" --backends "$BACKENDS" \
  --late-backends "$LATE" --budget "$LEFT" "${BUNDLES[@]}" --out "$RES" "$@" > "$RES/harness.log" 2>&1 || rc=$?
grep -E "^suite |failed|Error" "$RES/harness.log" | tail -40 || true
log "harness exited with $rc"
if [ "${EXTRAS:-1}" != 0 ]; then
  # The library's bandwidth kernels by GPU time, and where a synchronised eager op's time goes
  # (benchmarks/library/bandwidth.py, latency/eager_overhead.py; torch CUDA's rows after the WebGPU ones):
  # up to EXTRAS_S more seconds after the budget. They follow the harness's CUDA process, so the GPU may
  # still be at the clock a CUDA context raised.
  timeout "${EXTRAS_S:-45}" "$PY" -m benchmarks library bandwidth --json "$RES/bandwidth-library.json" \
    > "$RES/bandwidth-library.log" 2>&1 || log "library bandwidth stopped"
  timeout "${EXTRAS_S:-45}" "$PY" -m benchmarks latency eager-overhead --reps 100 --json "$RES/eager-overhead.json" \
    > "$RES/eager-overhead.log" 2>&1 || log "latency eager-overhead stopped"
fi
if [ "$rc" != 0 ] && [ -f "$RES/results.json" ]; then
  # Stopped from outside (or a suite failed): rebuild the report from the figures written so far.
  timeout "$REPORT_S" "$PY" -m benchmarks report "$RES/results.json" --autotune-here --out "$RES/results" \
    > /dev/null 2>&1 || log "report failed"
fi
[ -d "$TORCH_WEBGPU_CACHE_DIR" ] && find "$TORCH_WEBGPU_CACHE_DIR" -iname "*autotune*" -exec cp -r {} "$RES/" \; 2>/dev/null || true
sed -n '1,/^| suite |/p' "$RES/results.md" 2>/dev/null | head -45 || true
if [ -n "${OUT:-}" ] && [ "${PACK:-1}" = 1 ]; then
  # A device call returns only a few files of $OUT (a run writes a dozen): one archive instead (PACK=0 keeps
  # the folder as it is).
  tar czf "$RES.tgz" -C "$(dirname "$RES")" "$(basename "$RES")" && rm -rf "$RES" && log "packed into $RES.tgz"
fi
log "done"
