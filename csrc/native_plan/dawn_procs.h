// The slice of webgpu.h the native plan executor calls, matching the Dawn inside the wgpudawn wheel
// (wgpudawn/_lib/webgpu_cdef.h). Dawn is linked statically into wgpudawn's cffi module and exports no
// symbols, so the functions are reached through addresses that Python reads from wgpudawn's `lib`
// (`ffi.addressof`), and the struct layouts are checked against cffi's `ffi.sizeof` at start-up.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct WGPUBindGroupImpl;
struct WGPUBindGroupLayoutImpl;
struct WGPUBufferImpl;
struct WGPUCommandEncoderImpl;
struct WGPUComputePassEncoderImpl;
struct WGPUComputePipelineImpl;
struct WGPUDeviceImpl;
struct WGPUCommandBufferImpl;
struct WGPUInstanceImpl;
struct WGPUQueueImpl;
typedef WGPUBindGroupImpl* WGPUBindGroup;
typedef WGPUBindGroupLayoutImpl* WGPUBindGroupLayout;
typedef WGPUBufferImpl* WGPUBuffer;
typedef WGPUCommandEncoderImpl* WGPUCommandEncoder;
typedef WGPUComputePassEncoderImpl* WGPUComputePassEncoder;
typedef WGPUComputePipelineImpl* WGPUComputePipeline;
typedef WGPUDeviceImpl* WGPUDevice;
typedef WGPUCommandBufferImpl* WGPUCommandBuffer;
typedef WGPUInstanceImpl* WGPUInstance;
typedef WGPUQueueImpl* WGPUQueue;
typedef uint32_t WGPUBool;

struct WGPUStringView {
  const char* data;
  size_t length;
};

struct WGPUChainedStruct;

struct WGPUBindGroupEntry {
  WGPUChainedStruct* nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset;
  uint64_t size;
  void* sampler;
  void* textureView;
};

struct WGPUBindGroupDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  const WGPUBindGroupEntry* entries;
};

struct WGPUComputePassDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  const void* timestampWrites;
};

struct WGPUCommandEncoderDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};

// Waiting for the queue (csrc/native_plan/native_plan.cpp queue_submit): the enum values are checked
// against wgpudawn's `lib` at start-up, as the struct sizes are.
enum WGPUCallbackMode : uint32_t { WGPUCallbackMode_WaitAnyOnly = 1 };
enum WGPUQueueWorkDoneStatus : uint32_t { WGPUQueueWorkDoneStatus_Success = 1 };
enum WGPUWaitStatus : uint32_t { WGPUWaitStatus_Success = 1, WGPUWaitStatus_TimedOut = 2 };
enum WGPUMapAsyncStatus : uint32_t { WGPUMapAsyncStatus_Success = 1 };
typedef uint64_t WGPUMapMode;
constexpr WGPUMapMode WGPUMapMode_Read = 1;

typedef void (*WGPUBufferMapCallback)(WGPUMapAsyncStatus status, WGPUStringView message, void* userdata1,
                                      void* userdata2);

struct WGPUBufferMapCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUBufferMapCallback callback;
  void* userdata1;
  void* userdata2;
};

typedef void (*WGPUQueueWorkDoneCallback)(WGPUQueueWorkDoneStatus status, WGPUStringView message, void* userdata1,
                                          void* userdata2);

struct WGPUQueueWorkDoneCallbackInfo {
  WGPUChainedStruct* nextInChain;
  WGPUCallbackMode mode;
  WGPUQueueWorkDoneCallback callback;
  void* userdata1;
  void* userdata2;
};

struct WGPUFuture {
  uint64_t id;
};

struct WGPUFutureWaitInfo {
  WGPUFuture future;
  WGPUBool completed;
};

}  // extern "C"

namespace torch_webgpu_native {

// Dawn entry points in the order Python passes their addresses (torch_webgpu/runtime/native.py PROCS).
struct DawnProcs {
  WGPUBindGroup (*deviceCreateBindGroup)(WGPUDevice, const WGPUBindGroupDescriptor*);
  void (*bindGroupRelease)(WGPUBindGroup);
  WGPUComputePassEncoder (*commandEncoderBeginComputePass)(WGPUCommandEncoder, const WGPUComputePassDescriptor*);
  void (*commandEncoderCopyBufferToBuffer)(WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t,
                                           uint64_t);
  void (*commandEncoderClearBuffer)(WGPUCommandEncoder, WGPUBuffer, uint64_t, uint64_t);
  void (*computePassEncoderSetPipeline)(WGPUComputePassEncoder, WGPUComputePipeline);
  void (*computePassEncoderSetBindGroup)(WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t,
                                         const uint32_t*);
  void (*computePassEncoderDispatchWorkgroups)(WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t);
  void (*computePassEncoderEnd)(WGPUComputePassEncoder);
  void (*computePassEncoderRelease)(WGPUComputePassEncoder);
  void (*bufferAddRef)(WGPUBuffer);
  void (*bufferRelease)(WGPUBuffer);
  void (*computePipelineAddRef)(WGPUComputePipeline);
  void (*computePipelineRelease)(WGPUComputePipeline);
  void (*bindGroupLayoutAddRef)(WGPUBindGroupLayout);
  void (*bindGroupLayoutRelease)(WGPUBindGroupLayout);
  void (*deviceAddRef)(WGPUDevice);
  void (*deviceRelease)(WGPUDevice);
  WGPUCommandBuffer (*commandEncoderFinish)(WGPUCommandEncoder, const void*);
  void (*queueSubmit)(WGPUQueue, size_t, const WGPUCommandBuffer*);
  void (*commandBufferRelease)(WGPUCommandBuffer);
  WGPUCommandEncoder (*deviceCreateCommandEncoder)(WGPUDevice, const void*);
  void (*commandEncoderRelease)(WGPUCommandEncoder);
  WGPUFuture (*queueOnSubmittedWorkDone)(WGPUQueue, WGPUQueueWorkDoneCallbackInfo);
  WGPUWaitStatus (*instanceWaitAny)(WGPUInstance, size_t, WGPUFutureWaitInfo*, uint64_t);
  WGPUFuture (*bufferMapAsync)(WGPUBuffer, WGPUMapMode, size_t, size_t, WGPUBufferMapCallbackInfo);
  const void* (*bufferGetConstMappedRange)(WGPUBuffer, size_t, size_t);
  void (*bufferUnmap)(WGPUBuffer);
};

constexpr int kProcCount = sizeof(DawnProcs) / sizeof(void*);

}  // namespace torch_webgpu_native
