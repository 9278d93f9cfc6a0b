// Hot path of eager launch plans (torch_webgpu/ops/launch_cache.py): the call signature and the new
// outputs of a replay, computed in C++ so that a replayed op spends little time in Python.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_webgpu {

// Adds _plan_key and _new_outputs to the _C module.
void register_launch_plans(pybind11::module_& m);

}  // namespace torch_webgpu
