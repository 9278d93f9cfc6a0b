"""The one WGSL prelude (issue 40): each helper function has one source, kernels/wgsl/, which eager ops and
library kernels share."""

from __future__ import annotations

import re
from pathlib import Path

import torch_webgpu
from torch_webgpu.kernels.matmul_wgsl import ACTIVATIONS, activation_functions
from torch_webgpu.kernels.wgsl import PRELUDE, functions_for, math, special

PACKAGE = Path(torch_webgpu.__file__).parent
# Copies of prelude functions that the change which made the prelude one kept byte-identical (their
# kernels' WGSL would change otherwise): reduce.py's int64 pair helpers (its own forms of add64, lt64,
# ...) and strided.py's conversion helpers. The list may only shrink: a rewritten kernel takes the prelude's.
KNOWN_COPIES = {"kernels/reduce.py": {"add64", "lt64", "max64", "min64", "mul64"},
                "ops/strided.py": {"bf16_bits"}}


def test_the_prelude_splits_into_its_functions():
    """math.FUNCTIONS is the prelude cut at its functions and structs, nothing lost or reordered."""
    assert "".join(math.FUNCTIONS.values()) == PRELUDE
    assert {"erf_", "erfc_pos", "isnan_", "DivMod64", "sin_"} <= set(math.FUNCTIONS)
    assert not set(math.FUNCTIONS) & set(special.FUNCTIONS)


def test_each_prelude_function_has_one_source():
    """No module outside kernels/wgsl/ defines a WGSL function the prelude defines (but the known copies)."""
    names = set(math.FUNCTIONS) | set(special.FUNCTIONS)
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("kernels/wgsl/"):
            continue
        defined = set(re.findall(r"\bfn (\w+)\s*\(", path.read_text())) & names
        if defined:
            found[rel] = defined
    assert found == KNOWN_COPIES


def test_one_erf():
    """The GELU epilogue of library kernels calls the prelude's erf_, and takes it (with what it calls) from
    the prelude verbatim."""
    assert "erf_(" in ACTIVATIONS["gelu"]
    source = activation_functions("gelu")
    assert math.FUNCTIONS["erf_"] in source and math.FUNCTIONS["erfc_pos"] in source
    assert re.findall(r"\bfn (\w+)", source) == ["isnan_", "copysign_", "erfc_pos", "erf_"]
    assert activation_functions(None, "relu", "silu", "tanh") == ""


def test_functions_for_reaches_special_functions_and_their_prelude_helpers():
    """A formula calling a special function gets it, the special functions it calls and the prelude helpers
    they use."""
    source = functions_for("modified_bessel_k0_(x)")
    defined = re.findall(r"\bfn (\w+)", source)
    assert "modified_bessel_k0_" in defined and len(defined) == len(set(defined))
    called = set(re.findall(r"\b(\w+)\s*\(", source))
    assert called & set(math.FUNCTIONS) <= set(defined)
