#!/usr/bin/env bash
# Build torch_webgpu/_C in place against whatever torch `python3` imports, with plain g++ (no pip, no
# CMake). For machines whose torch differs from the venv's (the H200 image has torch 2.11 + CUDA): the
# extension binary matches exactly one torch version.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
read -r CFLAGS LDFLAGS SUFFIX < <("$PY" - <<'PY'
import sysconfig, torch
from torch.utils import cpp_extension as ce
inc = " ".join("-I" + p for p in ce.include_paths() + [sysconfig.get_paths()["include"]])
abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
lib = ce.library_paths()[0]
c = f"{inc} -D_GLIBCXX_USE_CXX11_ABI={abi} -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H"
print(c.replace(" ", "@"), f"-L{lib}@-Wl,-rpath,{lib}@-ltorch@-ltorch_cpu@-lc10@-ltorch_python",
      sysconfig.get_config_var("EXT_SUFFIX"))
PY
)
objs=$(mktemp -d)
for f in csrc/*.cpp; do
  g++ -O2 -fPIC -std=c++17 -fvisibility=hidden ${CFLAGS//@/ } -Icsrc -c "$f" -o "$objs/$(basename "$f" .cpp).o" &
done
# The native plan recorder needs only Python's headers (no torch): its own module.
PYINC=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
g++ -O2 -fPIC -std=c++17 -fvisibility=hidden -I"$PYINC" -shared csrc/native_plan/native_plan.cpp \
  -o "torch_webgpu/_native_plan$SUFFIX" &
wait
g++ -shared "$objs"/*.o ${LDFLAGS//@/ } -o "torch_webgpu/_C$SUFFIX"
echo "built torch_webgpu/_C$SUFFIX and torch_webgpu/_native_plan$SUFFIX"
