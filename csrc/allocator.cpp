// The PrivateUse1 allocator: storages hold runtime buffer ids, never host memory.
#include "webgpu_device.h"

#include <torch/extension.h>

#include <algorithm>
#include <mutex>

namespace py = pybind11;

namespace torch_webgpu {
namespace {

// Python callables are leaked on purpose: their destructors would run after interpreter shutdown.
PyObject* g_allocate = nullptr;
PyObject* g_copy = nullptr;
PyObject* g_synchronize = nullptr;

// Leaked on purpose: storages may die during static destruction at exit, after these would be gone.
std::mutex& g_mutex = *new std::mutex();  // guards the tables below; never held while calling Python
std::vector<int64_t>& g_freed = *new std::vector<int64_t>();
std::unordered_map<int64_t, int64_t>& g_nbytes = *new std::unordered_map<int64_t, int64_t>();
// Freed ids by the bytes their storage requested, for replays' outputs of the same size (see
// RecyclingAllocator): the runtime still counts them live, so handing one out again needs no Python.
// Any drain (every Python allocation, memory statistics) gives them all back to the runtime's pool.
std::unordered_map<int64_t, std::vector<int64_t>>& g_recycle =
    *new std::unordered_map<int64_t, std::vector<int64_t>>();
size_t g_recycled = 0;
constexpr size_t kRecyclePerSize = 8;   // a replay loop needs one or two per size
constexpr size_t kRecycleMax = 256;
// Recycled ids of storages up to this size survive a drain made for a Python allocation (one of another
// size, or one a replay could not take back): otherwise one such allocation per loop iteration hands every
// recycled id to the pool, the next replays allocate through Python too, and the loop never takes one back
// (nor keeps its bind groups). At most kRecycleMax of them: a few MiB held out of the pool's reach.
constexpr int64_t kKeepRecycledBytes = 64 << 10;

void delete_buffer(void* ctx) {
  const int64_t id = buffer_id_of(ctx);
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto it = g_nbytes.find(id);
  if (it != g_nbytes.end()) {
    const int64_t nbytes = it->second;
    g_nbytes.erase(it);
    if (g_recycled < kRecycleMax) {
      std::vector<int64_t>& same = g_recycle[nbytes];
      if (same.size() < kRecyclePerSize) {
        same.push_back(id);
        ++g_recycled;
        return;
      }
    }
  }
  g_freed.push_back(id);
}

void delete_nothing(void*) {}

[[noreturn]] void rethrow_python_error(py::error_already_set& e, const std::string& what) {
  // "ExcType: message" without the Python traceback that e.what() appends.
  const std::string message = py::str(e.type().attr("__name__")).cast<std::string>() + ": " +
                              py::str(e.value()).cast<std::string>();
  // MemoryError covers the runtime's OutOfMemoryError; LimitExceededError (a single buffer larger than
  // max-buffer-size) is an allocation failure too, so both surface as torch.OutOfMemoryError.
  const bool oom = e.matches(PyExc_MemoryError) || message.find("LimitExceededError") != std::string::npos;
  if (oom) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "webgpu: ", what, " failed: ", message);
  }
  TORCH_CHECK(false, "webgpu: ", what, " failed: ", message);
}

int64_t call_allocate(size_t nbytes) {
  py::gil_scoped_acquire gil;
  TORCH_CHECK(g_allocate != nullptr, "webgpu device used before `import torch_webgpu` finished");
  try {
    py::object id = py::reinterpret_borrow<py::object>(g_allocate)(nbytes);
    return id.cast<int64_t>();
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "allocating " + std::to_string(nbytes) + " bytes");
  }
}

struct WebGPUAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) {
      return {nullptr, nullptr, &delete_nothing, webgpu_device()};
    }
    const int64_t id = call_allocate(nbytes);
    TORCH_CHECK(id > 0 && id < (int64_t(1) << 31), "webgpu: runtime returned invalid buffer id ", id);
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_nbytes[id] = static_cast<int64_t>(nbytes);
    }
    void* ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(id) << kIdShift);
    return {ptr, ptr, &delete_buffer, webgpu_device()};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_buffer; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "webgpu storages hold device buffer ids, not host memory; copy tensors instead");
  }
};

WebGPUAllocator g_allocator;

// The allocator of replays' outputs (launch_plans.cpp, only while nothing records, captures or pins
// buffers): a freed id of the same requested size comes back as it is (same GPU buffer, same bytes, so the
// runtime's view of it stays exact); otherwise the runtime allocates.
struct RecyclingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes > 0) {
      std::lock_guard<std::mutex> lock(g_mutex);
      const auto it = g_recycle.find(static_cast<int64_t>(nbytes));
      if (it != g_recycle.end() && !it->second.empty()) {
        const int64_t id = it->second.back();
        it->second.pop_back();
        --g_recycled;
        g_nbytes[id] = static_cast<int64_t>(nbytes);
        void* ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(id) << kIdShift);
        return {ptr, ptr, &delete_buffer, webgpu_device()};
      }
    }
    return g_allocator.allocate(nbytes);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &delete_buffer; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    g_allocator.copy_data(dest, src, count);
  }
};

RecyclingAllocator g_recycling_allocator;

}  // namespace

c10::Allocator* webgpu_allocator() { return &g_allocator; }

c10::Allocator* recycling_allocator() { return &g_recycling_allocator; }

std::vector<int64_t> drain_freed_ids(bool all) {
  std::vector<int64_t> out;
  std::lock_guard<std::mutex> lock(g_mutex);
  out.swap(g_freed);
  if (g_recycled == 0) return out;
  for (auto it = g_recycle.begin(); it != g_recycle.end();) {
    if (!all && it->first <= kKeepRecycledBytes) {
      ++it;
      continue;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
    g_recycled -= it->second.size();
    it = g_recycle.erase(it);
  }
  return out;
}

int64_t live_buffer_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return static_cast<int64_t>(g_nbytes.size());
}

int64_t live_buffer_bytes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  int64_t total = 0;
  for (const auto& kv : g_nbytes) total += kv.second;
  return total;
}

void set_runtime_callbacks(void* allocate, void* copy, void* synchronize) {
  auto keep = [](void* obj) {
    Py_XINCREF(static_cast<PyObject*>(obj));
    return static_cast<PyObject*>(obj);
  };
  g_allocate = keep(allocate);
  g_copy = keep(copy);
  g_synchronize = keep(synchronize);
}

void runtime_copy(int64_t src_id, int64_t dst_id, size_t nbytes) {
  py::gil_scoped_acquire gil;
  TORCH_CHECK(g_copy != nullptr, "webgpu runtime callbacks are not installed");
  try {
    py::reinterpret_borrow<py::object>(g_copy)(src_id, dst_id, nbytes);
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "device copy");
  }
}

void runtime_synchronize() {
  py::gil_scoped_acquire gil;
  if (g_synchronize == nullptr) return;  // nothing can be pending before the runtime exists
  try {
    py::reinterpret_borrow<py::object>(g_synchronize)();
  } catch (py::error_already_set& e) {
    rethrow_python_error(e, "synchronize");
  }
}

void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes) {
  TORCH_CHECK(storage.resizable(), "webgpu: trying to resize a storage that is not resizable");
  const size_t old_nbytes = storage.nbytes();
  c10::DataPtr fresh = g_allocator.allocate(new_nbytes);
  const size_t keep = std::min(old_nbytes, new_nbytes);
  if (keep > 0 && storage.data() != nullptr) {
    // Buffers are allocated in whole 32-bit words, so copying the rounded-up range stays in bounds.
    runtime_copy(buffer_id_of(storage.data()), buffer_id_of(fresh.get()), (keep + 3) / 4 * 4);
  }
  c10::Storage(storage).set_data_ptr_noswap(std::move(fresh));
  c10::Storage(storage).set_nbytes(new_nbytes);
}

void check_dtype(c10::ScalarType dtype, const char* what) {
  using c10::ScalarType;
  switch (dtype) {
    case ScalarType::Float: case ScalarType::Half: case ScalarType::BFloat16: case ScalarType::Long:
    case ScalarType::Int: case ScalarType::Short: case ScalarType::Char: case ScalarType::Byte:
    case ScalarType::Bool:
    case ScalarType::ComplexFloat:  // stored as (real, imag) float32 pairs; see torch_webgpu/ops/complex.py
      return;
    case ScalarType::Double:
      TORCH_CHECK_TYPE(false, what, ": WebGPU has no float64 — use float32");
    default:
      if (c10::isComplexType(dtype)) {
        TORCH_CHECK_TYPE(false, what, ": WebGPU has no complex dtypes (", dtype,
                         ") — use float32 real/imag pairs");
      }
      TORCH_CHECK_TYPE(false, what, ": dtype ", dtype, " is not supported on webgpu (supported: float32, "
                       "float16, bfloat16, int64, int32, int16, int8, uint8, bool, complex64)");
  }
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_webgpu
