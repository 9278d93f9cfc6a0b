// Shared declarations of the webgpu PrivateUse1 shim: buffer-id allocator, runtime callbacks, generator.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace torch_webgpu {

// Storage pointers are `buffer_id << 32`; a view adds its byte offset in the low 32 bits.
constexpr int kIdShift = 32;

inline int64_t buffer_id_of(const void* ptr) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(ptr) >> kIdShift);
}

inline c10::Device webgpu_device() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }

// The allocator registered for PrivateUse1. Allocation calls the Python runtime (GIL taken) for a real
// device buffer; the deleter only queues the id (never takes the GIL: it runs on any thread, also at exit).
c10::Allocator* webgpu_allocator();
// For replays' outputs only: reuses the id of a freed storage of the same byte size without Python (the
// runtime never saw it freed). Not for calls being recorded, captured or beside pinned buffers.
c10::Allocator* recycling_allocator();

// Ids whose storages died since the last call, recycled ones included (with `all` false, recycled ones of
// small storages stay for replays); the runtime pool releases them (rt.pool.freed_source).
std::vector<int64_t> drain_freed_ids(bool all);
// Number of live storages holding a device buffer, and their requested bytes.
int64_t live_buffer_count();
int64_t live_buffer_bytes();

// Python callbacks, installed once by torch_webgpu.device:
//   allocate(nbytes) -> buffer id; copy(src_id, dst_id, nbytes) -> None; synchronize() -> None
void set_runtime_callbacks(void* allocate, void* copy, void* synchronize);
void runtime_copy(int64_t src_id, int64_t dst_id, size_t nbytes);
void runtime_synchronize();

// Grow/shrink a webgpu storage: a new buffer, then a device-to-device copy of the kept bytes.
void resize_storage_bytes(const c10::Storage& storage, size_t new_nbytes);

// Raise the documented TypeError for dtypes WebGPU cannot hold (float64, complex, ...).
void check_dtype(c10::ScalarType dtype, const char* what);

// Philox seed/offset holder; CPUGeneratorImpl supplies seeding, Python kernels read seed and offset.
class WebGPUGenerator : public at::CPUGeneratorImpl {
 public:
  explicit WebGPUGenerator(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

 private:
  WebGPUGenerator* clone_impl() const override;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index);

// Fallback bookkeeping (ops that ran on the CPU through the boxed fallback).
std::unordered_map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace torch_webgpu
