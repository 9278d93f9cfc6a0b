"""What a bundle needs from a WebGPU adapter: target profiles, the limits and features a plan uses, and
the check of those requirements against a device."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from torch_webgpu.plan.format import LowIROp, Plan
from torch_webgpu.plan.grid import shader_grid

from .format import BundleRequirementError

# The WebGPU specification's default limits: every conforming adapter grants at least these, so a plan
# compiled against them runs in any browser. (No optional features, f16 included.)
WEBGPU_CORE_LIMITS: dict[str, int] = {
    "max-compute-invocations-per-workgroup": 256,
    "max-compute-workgroup-size-x": 256,
    "max-compute-workgroup-size-y": 256,
    "max-compute-workgroup-size-z": 64,
    "max-compute-workgroup-storage-size": 16384,
    "max-compute-workgroups-per-dimension": 65535,
    "max-storage-buffers-per-shader-stage": 8,
    "max-uniform-buffers-per-shader-stage": 12,
    "max-storage-buffer-binding-size": 128 << 20,
    "max-buffer-size": 256 << 20,
    "min-storage-buffer-offset-alignment": 256,
}

TARGETS = ("auto", "webgpu-core")

# WGSL `enable` directives and the adapter feature each needs.
_ENABLE_FEATURES = {"f16": "shader-f16", "subgroups": "subgroups", "subgroups_f16": "subgroups-f16",
                    "chromium_experimental_subgroup_matrix": "chromium-experimental-subgroup-matrix"}


def target_limits(name: str) -> tuple[dict[str, int], frozenset[str]]:
    """The limits and features of target profile `name` (`auto`: this machine's adapter; a path ending in
    .json: another machine's adapter, saved there with `torch-webgpu adapter --json`)."""
    if name == "webgpu-core":
        return dict(WEBGPU_CORE_LIMITS), frozenset()
    if name == "auto":
        from torch_webgpu.runtime import get_runtime

        info = get_runtime().info
        return dict(info.limits), frozenset(info.features)
    if name.endswith(".json"):
        return _limits_file(name)
    raise ValueError(f"unknown target {name!r}; choose one of {', '.join(TARGETS)} or an adapter JSON file")


def target_subgroup_matrix_configs(name: str) -> tuple[tuple[str, str, int, int, int], ...]:
    """(component, result, M, N, K) subgroup-matrix configs of target profile `name` (an adapter file's
    `subgroup_matrix_configs`, as `torch-webgpu adapter --json` prints them; () when it has none)."""
    if name == "auto":
        from torch_webgpu.runtime import get_runtime

        return tuple(getattr(get_runtime().info, "subgroup_matrix_configs", ()) or ())
    if not name.endswith(".json"):
        return ()
    import json
    from pathlib import Path

    doc = json.loads(Path(name).read_text())
    return tuple((str(c[0]), str(c[1]), int(c[2]), int(c[3]), int(c[4]))
                 for c in doc.get("subgroup_matrix_configs", ()))


def _limits_file(path: str) -> tuple[dict[str, int], frozenset[str]]:
    import json
    from pathlib import Path

    try:
        doc = json.loads(Path(path).read_text())
        limits = {str(k): int(v) for k, v in doc["limits"].items()}
        features = frozenset(str(f) for f in doc.get("features", ()))
    except FileNotFoundError:
        raise ValueError(f"no adapter file {path}; write one with `torch-webgpu adapter --json > {path}` "
                         "on the machine the bundle is for") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not an adapter file (a JSON object with 'limits' and 'features', as "
                         f"`torch-webgpu adapter --json` prints): {exc}") from None
    missing = sorted(set(WEBGPU_CORE_LIMITS) - set(limits))
    if missing:
        raise ValueError(f"{path} lacks the limits {', '.join(missing)}")
    return limits, features


def wgsl_features(sources: Iterable[str]) -> set[str]:
    """Adapter features the WGSL sources enable (`enable f16;` needs shader-f16, ...)."""
    found = set()
    for source in sources:
        for names in re.findall(r"^\s*enable\s+([\w\s,]+);", source, re.M):
            for name in names.replace(" ", "").split(","):
                found.add(_ENABLE_FEATURES.get(name, name))
    return found


def plan_requirements(plan: Plan, workgroup_storage: int, offset_alignment: int,
                      subgroup_size: int | None = None) -> dict[str, Any]:
    """The features and limits `plan` uses. Workgroup storage and offset alignment are what the code was
    compiled for (the plan cannot tell how much shared memory a shader declares)."""
    sizes = [spec.workgroup_size for spec in plan.executables.values()] or [[1, 1, 1]]
    dispatches = [n for n in (*plan.init, *plan.main) if n.op is LowIROp.DISPATCH]
    counts = [max(_grid(plan, n)) for n in dispatches] or [1]
    buffers = [*plan.buffers.values(), *(v.nbytes for v in plan.constants.values()),
               *(_spec_bytes(s) for s in (*plan.inputs, *plan.outputs))]
    largest = max([4, *buffers])
    storage = max([len(spec.binding_map) for spec in plan.executables.values()] or [0])
    uniforms = int(any(spec.push_constant_binding is not None for spec in plan.executables.values()))
    limits = {
        "max-compute-invocations-per-workgroup": max(x * y * z for x, y, z in sizes),
        "max-compute-workgroup-size-x": max(s[0] for s in sizes),
        "max-compute-workgroup-size-y": max(s[1] for s in sizes),
        "max-compute-workgroup-size-z": max(s[2] for s in sizes),
        "max-compute-workgroup-storage-size": int(workgroup_storage),
        "max-compute-workgroups-per-dimension": max(counts),
        "max-storage-buffers-per-shader-stage": storage,
        "max-uniform-buffers-per-shader-stage": uniforms,
        "max-storage-buffer-binding-size": largest,
        "max-buffer-size": largest,
        "min-storage-buffer-offset-alignment": int(offset_alignment),
    }
    features = wgsl_features(plan.wgsl.values())
    if subgroup_size and "subgroups" in features:
        # Code compiled for one subgroup size is wrong on a device that runs another: require exactly it.
        limits["subgroup-min-size"] = limits["subgroup-max-size"] = int(subgroup_size)
    return {"features": sorted(features), "limits": limits}


def _grid(plan: Plan, node: Any) -> tuple[int, ...]:
    """The grid a dispatch runs with on a device of WebGPU's default limit (folded where the shader can)."""
    spec = plan.executables[node.args["entry_point"]]
    grid = shader_grid(node.args["workgroups"], plan.wgsl[spec.wgsl_file],
                       WEBGPU_CORE_LIMITS["max-compute-workgroups-per-dimension"])
    return tuple(node.args["workgroups"]) if grid is None else grid


def _spec_bytes(spec: Any) -> int:
    n = 1
    for d in spec.shape:
        n *= int(d)
    return n * {"float16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}.get(spec.device_dtype, 4)


def unmet(requires: Mapping[str, Any], limits: Mapping[str, int], features: Iterable[str]) -> list[str]:
    """One line per requirement that `limits`/`features` do not meet (empty: all met)."""
    problems = []
    have = set(features)
    for feature in requires.get("features", []):
        if feature not in have:
            problems.append(f"feature '{feature}' (the adapter offers: {', '.join(sorted(have)) or 'none'})")
    for name, need in requires.get("limits", {}).items():
        if name not in limits:
            problems.append(f"limit '{name}' (the adapter does not report it)")
            continue
        got = int(limits[name])
        if name.startswith("subgroup-"):
            if got != need:
                problems.append(f"subgroup size {need} (the adapter's {name} is {got}; compile with "
                                "--target auto on it)")
        elif name.startswith("min-"):
            # Alignments: the device's must be at most, and divide, what the plan was laid out for.
            if got > need or need % got:
                problems.append(f"limit '{name}' = {need} (the adapter requires {got})")
        elif got < need:
            problems.append(f"limit '{name}' >= {need} (the adapter grants {got})")
    return problems


def check_requirements(requires: Mapping[str, Any], limits: Mapping[str, int], features: Iterable[str],
                       what: str = "this adapter") -> None:
    """BundleRequirementError naming every feature or limit that `limits`/`features` lack."""
    problems = unmet(requires, limits, features)
    if problems:
        raise BundleRequirementError(f"the bundle needs what {what} lacks: " + "; ".join(problems))
