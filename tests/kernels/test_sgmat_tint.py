"""Every tensor-core variant's WGSL through Dawn's WGSL front end (Tint) on Dawn's Null backend, which offers
subgroup matrices where lavapipe does not: the kernels a GPU with tensor cores compiles parse and resolve
(the emulated runs in test_sgmat_wgsl replace the subgroup-matrix builtins before lavapipe sees them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Run in a child: the Null adapter needs an instance of its own, with the unsafe APIs the experimental
# subgroup-matrix feature requires.
_SCRIPT = r"""
import json
from wgpudawn.backends.dawn import extras
extras.set_instance_extras(enable_toggles=["allow_unsafe_apis"])
from wgpudawn.backends.auto import gpu
from torch_webgpu.kernels.launch import DeviceCaps
from torch_webgpu.kernels.matmul import (VARIANTS, Layout, MatmulProblem, SgmatSpec, plan_matmul,
                                         register_experimental, variants)
register_experimental()   # every tensor-core variant, the experimental ones too

features = ["shader-f16", "subgroups", "chromium-experimental-subgroup-matrix"]
adapter = gpu.request_adapter_sync()
device = adapter.request_device_sync(required_features=features)
caps = DeviceCaps(features=frozenset(features), subgroup_size=32,
                  subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),),
                  limits={"max-compute-workgroup-storage-size": 49152,
                          "max-compute-invocations-per-workgroup": 1024})
n = 1024
layouts = {"b_kn": Layout(0, n * n, n, 1), "b_nk": Layout(0, n * n, 1, n)}
results = {}
for name, spec in VARIANTS.items():
    if not isinstance(spec, SgmatSpec):
        continue
    for tag, b in layouts.items():
        p = MatmulProblem(1, n, n, n, Layout(0, n * n, n, 1), b, Layout(0, n * n, n, 1), dtype="f16")
        if name not in variants(p, caps):   # e.g. a tile whose B stored by columns exceeds 48 KiB
            continue
        device.push_error_scope("validation")
        device.create_shader_module(code=plan_matmul(p, caps, name).wgsl)
        error = device.pop_error_scope_async().sync_wait()
        results[f"{name} {tag}"] = None if error is None else str(error)
print(json.dumps({"backend": adapter.info["backend_type"], "results": results}))
"""


def test_every_tensor_core_variant_passes_tint():
    """Each sgmat variant, with B stored [K, N] and [N, K], makes a shader module without errors."""
    env = dict(os.environ, WGPU_BACKEND_TYPE="Null")
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["backend"] == "Null"
    assert len(report["results"]) > 40
    failed = {k: v for k, v in report["results"].items() if v is not None}
    assert not failed, "\n".join(f"{k}: {v[:1500]}" for k, v in failed.items())
