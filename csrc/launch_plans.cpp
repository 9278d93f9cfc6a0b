// Launch plan signatures and replay outputs in C++ (see launch_plans.h and ops/launch_cache.py).
//
// _plan_key(args, kwargs, tensors, ids) packs what launch_cache._signature keys on into one bytes object
// (default dtype, keyword names, and per argument its value or, for a webgpu tensor, dtype, sizes,
// strides, storage offset, storage bytes and the first earlier argument sharing its buffer), appending
// the webgpu tensors and their buffer ids to `tensors` and `ids`. Anything it does not know (other
// argument types, CPU tensors that are not 0-dim, meta tensors, big ints) returns None and touches
// nothing, and Python's _signature decides: a call's arguments always take the same one of the two.
#include "launch_plans.h"

#include "webgpu_device.h"

#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/as_strided_native.h>

#include <cstring>
#include <string>
#include <vector>

namespace py = pybind11;

namespace torch_webgpu {
namespace {

enum Tag : char {
  kTensor = 1, kHostScalar, kFloat, kInt, kBool, kNone, kDtype, kStr, kIntList, kTensorList, kKwargs
};

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Packs a webgpu tensor; false for a tensor Python keys differently (CPU, meta, other devices).
bool put_tensor(std::string& key, PyObject* obj, std::vector<PyObject*>& tensors, std::vector<int64_t>& ids) {
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (t.device().type() != c10::DeviceType::PrivateUse1) return false;
  const c10::Storage& storage = t.storage();
  const int64_t bid = buffer_id_of(storage.data());
  int32_t alias = -1;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == bid) {
      alias = static_cast<int32_t>(i);
      break;
    }
  }
  put<char>(key, kTensor);
  put<int8_t>(key, static_cast<int8_t>(t.scalar_type()));
  const int64_t dim = t.dim();
  put<int32_t>(key, static_cast<int32_t>(dim));
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  key.append(reinterpret_cast<const char*>(sizes.data()), dim * sizeof(int64_t));
  key.append(reinterpret_cast<const char*>(strides.data()), dim * sizeof(int64_t));
  put<int64_t>(key, t.storage_offset());
  put<int64_t>(key, static_cast<int64_t>(storage.nbytes()));
  put<int32_t>(key, alias);
  ids.push_back(bid);
  tensors.push_back(obj);
  return true;
}

// A 0-dim CPU tensor keys on its dtype and value (they may steer the kernel).
bool put_host_scalar(std::string& key, const at::Tensor& t) {
  const c10::ScalarType st = t.scalar_type();
  if (c10::isComplexType(st)) return false;
  put<char>(key, kHostScalar);
  put<int8_t>(key, static_cast<int8_t>(st));
  // Read the element directly (Tensor::item goes through the dispatcher) for the common dtypes.
  const void* p = t.const_data_ptr();
  switch (st) {
    case c10::ScalarType::Float:
      put<double>(key, *static_cast<const float*>(p));   // the bit pattern: -0.0 and 0.0 differ
      return true;
    case c10::ScalarType::Double:
      put<double>(key, *static_cast<const double*>(p));
      return true;
    case c10::ScalarType::Long:
      put<int64_t>(key, *static_cast<const int64_t*>(p));
      return true;
    case c10::ScalarType::Int:
      put<int64_t>(key, *static_cast<const int32_t*>(p));
      return true;
    case c10::ScalarType::Bool:
      put<char>(key, *static_cast<const bool*>(p) ? 1 : 0);
      return true;
    default:
      break;
  }
  const c10::Scalar s = t.item();
  if (c10::isFloatingType(st)) {
    put<double>(key, s.toDouble());
  } else if (st == c10::ScalarType::Bool) {
    put<char>(key, s.toBool() ? 1 : 0);
  } else {
    put<int64_t>(key, s.toLong());
  }
  return true;
}

bool put_int(std::string& key, PyObject* v) {
  if (PyBool_Check(v)) {
    put<char>(key, kBool);
    put<char>(key, v == Py_True ? 1 : 0);
    return true;
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  put<char>(key, kInt);
  put<int64_t>(key, x);
  return true;
}

bool put_value(std::string& key, PyObject* v, std::vector<PyObject*>& tensors, std::vector<int64_t>& ids) {
  if (THPVariable_Check(v)) {
    const at::Tensor& t = THPVariable_Unpack(v);
    if (t.is_cpu()) return t.dim() == 0 && put_host_scalar(key, t);
    return put_tensor(key, v, tensors, ids);
  }
  if (PyFloat_CheckExact(v)) {
    put<char>(key, kFloat);
    put<double>(key, PyFloat_AS_DOUBLE(v));
    return true;
  }
  if (PyLong_CheckExact(v) || PyBool_Check(v)) return put_int(key, v);
  if (v == Py_None) {
    put<char>(key, kNone);
    return true;
  }
  if (THPDtype_Check(v)) {
    put<char>(key, kDtype);
    put<int8_t>(key, static_cast<int8_t>(reinterpret_cast<THPDtype*>(v)->scalar_type));
    return true;
  }
  if (PyUnicode_CheckExact(v)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == nullptr) {
      PyErr_Clear();
      return false;
    }
    put<char>(key, kStr);
    put<int64_t>(key, n);
    key.append(s, n);
    return true;
  }
  if (PyList_CheckExact(v) || PyTuple_CheckExact(v)) {
    const bool is_list = PyList_CheckExact(v);
    const Py_ssize_t n = is_list ? PyList_GET_SIZE(v) : PyTuple_GET_SIZE(v);
    PyObject** items = is_list ? &PyList_GET_ITEM(v, 0) : &PyTuple_GET_ITEM(v, 0);
    bool ints = true;
    for (Py_ssize_t i = 0; i < n && ints; ++i) ints = PyLong_CheckExact(items[i]) || PyBool_Check(items[i]);
    if (ints) {
      put<char>(key, kIntList);
      put<char>(key, is_list ? 1 : 0);
      put<int64_t>(key, n);
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (!put_int(key, items[i])) return false;
      }
      return true;
    }
    put<char>(key, kTensorList);
    put<int64_t>(key, n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      if (!THPVariable_Check(items[i]) || !put_tensor(key, items[i], tensors, ids)) return false;
    }
    return true;
  }
  return false;
}

py::object plan_key(py::handle args, py::handle kwargs, py::list tensors_out, py::list ids_out) {
  if (!PyTuple_Check(args.ptr()) || !PyDict_Check(kwargs.ptr())) return py::none();
  std::string key;
  key.reserve(256);
  put<int8_t>(key, static_cast<int8_t>(c10::typeMetaToScalarType(c10::get_default_dtype())));
  std::vector<PyObject*> tensors;
  std::vector<int64_t> ids;
  PyObject* kw = kwargs.ptr();
  const Py_ssize_t nargs = PyTuple_GET_SIZE(args.ptr());
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (!put_value(key, PyTuple_GET_ITEM(args.ptr(), i), tensors, ids)) return py::none();
  }
  if (PyDict_GET_SIZE(kw) > 0) {
    put<char>(key, kKwargs);
    PyObject *name, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &name, &value)) {
      if (!put_value(key, name, tensors, ids) || !put_value(key, value, tensors, ids)) return py::none();
    }
  }
  for (PyObject* t : tensors) tensors_out.append(py::handle(t));
  for (int64_t id : ids) ids_out.append(py::int_(id));
  return py::bytes(key);
}

// _new_outputs(specs, results, ids): for each (sizes, strides, dtype) of `specs` a new webgpu tensor,
// appended to `results`, and its buffer id to `ids` (the replay's output slots). A spec (sizes, strides,
// dtype, storage_offset, nbytes, base) is a view of the replay's `base`-th new view buffer (nbytes of
// dtype), allocated at its first view, its id appended then (layer_norm's mean and rstd share one).
// `recycle`: buffers may be ids of freed storages of the same size (allocator.cpp's recycling_allocator).
const c10::DispatchKeySet kWebGPUKeys(c10::DispatchKey::PrivateUse1);

void new_outputs(py::tuple specs, py::list results, py::list ids, bool recycle) {
  c10::Allocator* allocator = recycle ? recycling_allocator() : webgpu_allocator();
  std::vector<at::Tensor> bases;
  for (py::handle spec : specs) {
    PyObject* s = spec.ptr();
    PyObject* sizes = PyTuple_GET_ITEM(s, 0);
    PyObject* strides = PyTuple_GET_ITEM(s, 1);
    const c10::ScalarType dtype = reinterpret_cast<THPDtype*>(PyTuple_GET_ITEM(s, 2))->scalar_type;
    const Py_ssize_t dim = PyTuple_GET_SIZE(sizes);
    int64_t size_v[16], stride_v[16];
    std::vector<int64_t> size_big, stride_big;
    int64_t* sz = size_v;
    int64_t* st = stride_v;
    if (dim > 16) {
      size_big.resize(dim);
      stride_big.resize(dim);
      sz = size_big.data();
      st = stride_big.data();
    }
    for (Py_ssize_t d = 0; d < dim; ++d) {
      sz[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(sizes, d));
      st[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, d));
    }
    if (PyTuple_GET_SIZE(s) == 6) {
      const int64_t offset = PyLong_AsLongLong(PyTuple_GET_ITEM(s, 3));
      const int64_t nbytes = PyLong_AsLongLong(PyTuple_GET_ITEM(s, 4));
      const size_t base = static_cast<size_t>(PyLong_AsLongLong(PyTuple_GET_ITEM(s, 5)));
      if (base == bases.size()) {
        const int64_t count = nbytes / static_cast<int64_t>(c10::elementSize(dtype));
        const int64_t one = 1;
        bases.push_back(at::detail::empty_strided_generic(c10::IntArrayRef(&count, 1), c10::IntArrayRef(&one, 1),
                                                          allocator, kWebGPUKeys, dtype));
        ids.append(py::int_(buffer_id_of(bases.back().storage().data())));
      }
      at::Tensor view = at::native::as_strided_tensorimpl(bases.at(base), c10::IntArrayRef(sz, dim),
                                                          c10::IntArrayRef(st, dim), offset);
      results.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(view))));
      continue;
    }
    // As aten.cpp's empty_strided kernel, without the dispatcher round trip (the plan was built from a
    // call that returned such a tensor, so its dtype is one webgpu holds).
    at::Tensor t = at::detail::empty_strided_generic(c10::IntArrayRef(sz, dim), c10::IntArrayRef(st, dim),
                                                     allocator, kWebGPUKeys, dtype);
    ids.append(py::int_(buffer_id_of(t.storage().data())));
    results.append(py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t))));
  }
}

}  // namespace

void register_launch_plans(py::module_& m) {
  m.def("_plan_key", &plan_key, py::arg("args"), py::arg("kwargs"), py::arg("tensors"), py::arg("ids"),
        "The launch-plan key of an eager call as bytes (appending its webgpu tensors and buffer ids), or "
        "None where Python's launch_cache._signature must decide.");
  m.def("_new_outputs", &new_outputs, py::arg("specs"), py::arg("results"), py::arg("ids"),
        py::arg("recycle") = false,
        "New webgpu tensors of (sizes, strides, dtype) specs, appended to results; their buffer ids to ids "
        "(recycle: ids of freed storages of the same size may come back without the runtime).");
}

}  // namespace torch_webgpu
