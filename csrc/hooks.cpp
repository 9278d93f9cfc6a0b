// Device guard, generator and PrivateUse1 hooks of the webgpu device (one device: webgpu:0).
#include "webgpu_device.h"

#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstring>
#include <mutex>
#include <unordered_set>

namespace torch_webgpu {

// ---- generator --------------------------------------------------------------------------------
WebGPUGenerator::WebGPUGenerator(c10::DeviceIndex index, uint64_t seed) : at::CPUGeneratorImpl(seed) {
  device_ = c10::Device(c10::DeviceType::PrivateUse1, index);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

void WebGPUGenerator::set_current_seed(uint64_t seed) {
  at::CPUGeneratorImpl::set_current_seed(seed);
  offset_ = 0;  // a fresh seed restarts the Philox counter stream
}

void WebGPUGenerator::set_offset(uint64_t offset) { offset_ = offset; }

uint64_t WebGPUGenerator::get_offset() const { return offset_; }

// State = 16 bytes: seed (u64 little-endian), then Philox offset (u64), like CUDA's generator.
c10::intrusive_ptr<c10::TensorImpl> WebGPUGenerator::get_state() const {
  at::Tensor state = at::empty({16}, at::TensorOptions().dtype(at::kByte));
  const uint64_t words[2] = {current_seed(), offset_};
  std::memcpy(state.data_ptr(), words, sizeof(words));
  return state.getIntrusivePtr();
}

void WebGPUGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK_TYPE(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == 16,
                   "webgpu RNG state must be a uint8 tensor of 16 bytes (seed, offset), got ",
                   new_state.numel(), " elements");
  uint64_t words[2];
  std::memcpy(words, new_state.data(), sizeof(words));
  set_current_seed(words[0]);
  offset_ = words[1];
}

WebGPUGenerator* WebGPUGenerator::clone_impl() const {
  auto* gen = new WebGPUGenerator(device_.index(), current_seed());
  gen->offset_ = offset_;
  return gen;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  TORCH_CHECK(index <= 0, "webgpu has one device (webgpu:0), got index ", int(index));
  static at::Generator gen = [] {
    auto g = at::make_generator<WebGPUGenerator>(0);
    g.seed();  // like CUDA: a non-deterministic seed until torch.manual_seed
    return g;
  }();
  return gen;
}

namespace {

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index <= 0, "webgpu has one device (webgpu:0), got webgpu:", int(index));
}

// ---- device guard -----------------------------------------------------------------------------
struct WebGPUGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_index(d.index());
    return webgpu_device();
  }
  c10::Device getDevice() const override { return webgpu_device(); }
  void setDevice(c10::Device d) const override { check_index(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, webgpu_device());
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, webgpu_device());
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, webgpu_device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void synchronizeDevice(const c10::DeviceIndex index) const override { runtime_synchronize(); }
  // One in-order queue: every event is complete once recorded work is; waiting = synchronising.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {}
  void block(void* event, const c10::Stream& stream) const override {}
  bool queryEvent(void* event) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {}
  bool queryStream(const c10::Stream& stream) const override { return false; }
  void synchronizeStream(const c10::Stream& stream) const override { runtime_synchronize(); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, WebGPUGuardImpl);

// ---- "pinned" host memory -----------------------------------------------------------------------
// WebGPU has no page-locked host memory (uploads are copied by the queue), so pinned memory is ordinary
// host memory that remembers it was requested as pinned: DataLoader(pin_memory=True) and
// tensor.pin_memory() / is_pinned() work, and non_blocking uploads from it are safe.
std::mutex& g_pinned_mutex = *new std::mutex();  // leaked: pinned tensors may outlive static destruction
std::unordered_set<const void*>& g_pinned = *new std::unordered_set<const void*>();

void free_pinned(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(ptr);
  }
  c10::free_cpu(ptr);
}

struct PinnedHostAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* ptr = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (ptr != nullptr) {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.insert(ptr);
    }
    return {ptr, ptr, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

PinnedHostAllocator g_pinned_allocator;

// ---- hooks ------------------------------------------------------------------------------------
struct WebGPUHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return 1; }
  void setCurrentDevice(c10::DeviceIndex device) const override { check_index(device); }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    check_index(device);
    return 0;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<WebGPUGenerator>(device_index < 0 ? 0 : device_index);
  }
  at::Device getDeviceFromPtr(void* data) const override { return webgpu_device(); }
  bool isPinnedPtr(const void* data) const override {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    return g_pinned.count(data) > 0;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new WebGPUHooks());
  return true;
}();

}  // namespace
}  // namespace torch_webgpu
