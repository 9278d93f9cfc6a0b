"""Figures that GPU machines run from prepared bundles (they carry no compiler): preparing them here,
finding them there, and the weights a bundle with external weights is given."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .harness import Settings

BUNDLED_SUITES = ["matmul", "bandwidth", "nn_ops", "models"]
# <bundles>/iree/<key>.vmfb (+ .json: the dtypes of its trailing constants): the same IREE output, for
# IREE's own Vulkan runtime.
IREE_DIR = "iree"


def bundle_key(name: str) -> str:
    """A figure's key as a file name (letters, digits, '.', '_', '-')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def bundle_cases(settings: Settings, max_binding_bytes: int,
                 suites: list[str] | None = None) -> list[tuple[str, Any, tuple]]:
    """(key, module, example inputs) of every bundled figure (of `suites`, default BUNDLED_SUITES), at
    the sizes a GPU run measures."""
    cases = []
    for name in suites or BUNDLED_SUITES:
        module = importlib.import_module(f"benchmarks.suites.{name}")
        cases += module.bundle_cases(settings, max_binding_bytes)
    return cases


def model_weights(module: Any) -> dict[str, Any]:
    """Every parameter and buffer of `module` by its state-dict name (tied weights under each name;
    torchao's quantized weights as their parts, see torch_webgpu.compiler.export.graph.model_weights)."""
    from torch_webgpu.compiler.export.graph import model_weights as weights

    return weights(module)


def _is_float16(module: Any, inputs: tuple = ()) -> bool:
    """Whether a module's weights (a `.half()` model) or its example inputs are float16."""
    import torch

    tensors = [*module.parameters(), *module.buffers(), *(i for i in inputs if isinstance(i, torch.Tensor))]
    return any(t.dtype == torch.float16 for t in tensors)


def prepare(out: Path, settings: Settings, target_name: str, iree: bool = True,
            suites: list[str] | None = None) -> list[str]:
    """Export every bundled figure into `out/<key>` (weights left out: the GPU machine builds the same
    model and passes them) and, with `iree`, its Vulkan .vmfb into `out/iree/<key>.vmfb`.

    Returns the failures (key: error); the run reports those figures as not measured."""
    import torch

    from torch_webgpu.compiler.export import graph as ex

    target = ex.make_target(target_name)
    cases = bundle_cases(settings, target.iree.max_binding_bytes, suites)
    (out / IREE_DIR).mkdir(parents=True, exist_ok=True)
    failed = []
    for key, module, inputs in tqdm(cases, desc="bundles", unit="bundle"):
        try:
            # A float16 figure is compiled with the target's shader-f16 (float32 ones stay without it).
            case_target = ex.make_target(target_name, f16=True) if _is_float16(module, inputs) else target
            traced = ex.trace(module.eval(), list(inputs))
            plan = ex.compile_traced(traced, case_target)
            ex.write_plan_bundle(plan, traced, case_target, out / key, source=f"benchmarks:{key}",
                                 external_weights=True)
            if iree:
                from .iree_vulkan import compile_vmfb

                vmfb = compile_vmfb(ex.iree_input_text(traced, case_target), case_target.iree)
                (out / IREE_DIR / f"{key}.vmfb").write_bytes(vmfb)
                # The plan keeps 64-bit constants as int32; IREE's `main` takes them in their own dtype.
                dtypes = [str(c.dtype) for c in ex.prepared_constants(traced)]
                (out / IREE_DIR / f"{key}.json").write_text(json.dumps({"constant_dtypes": dtypes}))
        except Exception as exc:  # the run reports the missing bundle as a failed figure
            failed.append(f"{key}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            tqdm.write(f"bundle {key} not prepared: {failed[-1]}")
        finally:
            torch.compiler.reset()
    print(f"prepared {len(cases) - len(failed)} of {len(cases)} bundles in {out} for target {target.name}")
    return failed


def prepared_iree_function(bundle_dir: Path, key: str, plan: Any) -> Any:
    """The prepared .vmfb of `key` on IREE's Vulkan runtime, given the bundle's plan (weights bound): its
    constants in the dtypes `main` takes (the graph's own constants come first; constants IREE inlined
    into the plan's host program are not inputs of `main`)."""
    from .iree_vulkan import IREEVulkanFunction

    dtypes = json.loads((bundle_dir / IREE_DIR / f"{key}.json").read_text())["constant_dtypes"]
    plan_constants = list(plan.constants.values())[:len(dtypes)]
    constants = [c.astype(d) for c, d in zip(plan_constants, dtypes, strict=True)]
    return IREEVulkanFunction(bundle_dir / IREE_DIR / f"{key}.vmfb", constants)
