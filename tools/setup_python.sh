#!/usr/bin/env bash
# The project's Python environment: .venv at the repo root with torch, the compiler stack, the WebGPU
# bindings and torch-webgpu itself in editable mode (its C++ extension built by scikit-build-core).
# Idempotent: a stamp of everything that affects the install makes a second run a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.13.0
WGPUDAWN_VERSION=0.32.0.4
VENV=.venv
PY=$VENV/bin/python
STAMP=$VENV/.torch-webgpu-installed

check_dawn_prefix() {
  local p=$1 missing=()
  [ -d "$p" ] || { echo "DAWN_PREFIX=$p: no such directory" >&2; exit 1; }
  [ -f "$p/include/webgpu/webgpu.h" ] || missing+=("include/webgpu/webgpu.h")
  compgen -G "$p/lib*/libwebgpu_dawn.*" >/dev/null || missing+=("lib/libwebgpu_dawn.so (or .a)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "DAWN_PREFIX=$p is not a Dawn installation: missing ${missing[*]}" >&2
    echo "Build Dawn with wgpudawn's tools/build_dawn.py --prefix <dir>, or unset DAWN_PREFIX" >&2
    exit 1
  fi
}

[ -n "${DAWN_PREFIX:-}" ] && check_dawn_prefix "$DAWN_PREFIX"

inputs_hash() {
  # Python packages are listed too: the editable install's import redirects only know packages that
  # existed when it ran, so a new subpackage needs a reinstall.
  { cat pyproject.toml CMakeLists.txt cmake/*.cmake tools/setup_python.sh $(find csrc -type f | sort);
    find torch_webgpu mlir_passes -name __init__.py | sort;
    echo "DAWN_PREFIX=${DAWN_PREFIX:-}"; } | sha256sum | cut -d' ' -f1
}

[ -x "$PY" ] || python3 -m venv "$VENV"
want=$(inputs_hash)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && "$PY" -c "import torch_webgpu._C, torch_webgpu._native_plan" 2>/dev/null; then
  exit 0
fi

# This machine's pip config names local indexes that may be absent; their warnings are noise.
pip() { "$PY" -m pip --disable-pip-version-check -q "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }
echo "setup: installing Python packages into $VENV (first run takes a few minutes)"
pip install --upgrade "pip>=24"
# torch first and pinned: the package's range would otherwise let pip choose a different (CUDA) build.
pip install "torch==$TORCH_VERSION" "scikit-build-core>=0.10" "numpy>=1.26"
if [ -n "${DAWN_PREFIX:-}" ]; then
  echo "setup: building wgpudawn from source against DAWN_PREFIX=$DAWN_PREFIX"
  DAWN_PREFIX=$DAWN_PREFIX pip install --force-reinstall --no-deps --no-binary wgpudawn "wgpudawn==$WGPUDAWN_VERSION"
fi
pip install --no-build-isolation -e ".[test,bench]"
"$PY" -c "import torch_webgpu._C, torch_webgpu._native_plan" || {
  echo "setup: torch_webgpu._C or torch_webgpu._native_plan does not import" >&2; exit 1; }
echo "$want" > "$STAMP"
