// torch_webgpu._native_plan: records a prepared command program (dispatches, copies, clears) into a Dawn
// command encoder with no Python per command. Built against CPython only (no torch), so the torch-free
// bundle loader uses it too. Python prepares everything once (torch_webgpu/runtime/native.py); a call
// passes the encoder and the per-call buffers ("slots": graph inputs bound zero-copy, output tensors).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "dawn_procs.h"

namespace torch_webgpu_native {
namespace {

DawnProcs g_procs;
bool g_procs_set = false;

enum Kind { kDispatch = 0, kCopy = 1, kClear = 2 };

// A buffer operand: a fixed buffer (slot < 0) or per-call slot `slot`, whose base offset is added.
struct Operand {
  WGPUBuffer buffer = nullptr;
  int slot = -1;
  uint64_t offset = 0;
};

// A per-call bind group and the (buffer, base) of each of its slot entries.
struct CachedBindGroup {
  WGPUBindGroup group = nullptr;
  std::vector<uintptr_t> key;
  uint64_t last_call = 0;
};

// Per-call bind groups kept per dispatch. One is not enough: `y = f(x)` in a loop allocates the new y
// before the old one is freed, so its output alternates between two buffers, and a sequence of ops whose
// small outputs share one size class takes them back from the allocator in a rotating order (a dispatch
// reading one and writing the other sees the product of both periods); remaking a bind group costs Dawn
// more than the rest of a replayed op (~12 us on lavapipe). Ways past the first are bounded over all
// programs: lavapipe maps a page per bind group, and a process may hold only vm.max_map_count maps.
constexpr size_t kBindGroupWays = 8;
constexpr int64_t kMaxExtraBindGroups = 16384;
int64_t g_extra_bind_groups = 0;   // per-call bind groups held beyond each dispatch's first

struct Command {
  int kind = kDispatch;
  // dispatch
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroupLayout layout = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  std::vector<WGPUBindGroupEntry> entries;   // fixed entries filled; slot entries patched per call
  std::vector<int> entry_slots;              // per entry: its slot or -1
  std::vector<uint64_t> entry_offsets;       // per entry: offset relative to the slot's base
  bool per_call = false;                     // some entry comes from a slot
  WGPUBindGroup bind_group = nullptr;        // fixed, or this call's per-call one (one of `cached`)
  std::vector<CachedBindGroup> cached;       // per-call bind groups of recent slot buffers
  std::vector<uintptr_t> call_key;           // scratch: (buffer, base) of each slot entry this call
  uint64_t calls = 0;
  size_t last = 0;                           // index in `cached` of the last call's bind group
  // copy / clear
  Operand src, dst;
  uint64_t size = 0;
};

struct Program {
  WGPUDevice device = nullptr;
  std::vector<Command> commands;
  std::vector<WGPUBuffer> held_buffers;      // fixed buffers referenced by commands (AddRef'd)
  int slot_count = 0;
  int dispatches = 0;
  int64_t runs = 0;
  int64_t bind_groups_created = 0;
};

const char* kCapsule = "torch_webgpu._native_plan.Program";

void release_program(Program* p) {
  for (Command& c : p->commands) {
    if (c.per_call) {
      for (CachedBindGroup& g : c.cached) g_procs.bindGroupRelease(g.group);
      if (!c.cached.empty()) g_extra_bind_groups -= static_cast<int64_t>(c.cached.size()) - 1;
    } else if (c.bind_group) {
      g_procs.bindGroupRelease(c.bind_group);
    }
    if (c.pipeline) g_procs.computePipelineRelease(c.pipeline);
    if (c.layout) g_procs.bindGroupLayoutRelease(c.layout);
  }
  for (WGPUBuffer b : p->held_buffers) g_procs.bufferRelease(b);
  if (p->device) g_procs.deviceRelease(p->device);
  delete p;
}

void capsule_destructor(PyObject* capsule) {
  auto* p = static_cast<Program*>(PyCapsule_GetPointer(capsule, kCapsule));
  if (p != nullptr) release_program(p);
}

bool as_u64(PyObject* o, uint64_t* out) {
  *out = PyLong_AsUnsignedLongLong(o);
  return !(*out == static_cast<uint64_t>(-1) && PyErr_Occurred());
}

// Stores the Python int `arg` in a module setting (set_spin, set_plan_split).
PyObject* set_setting(PyObject* arg, uint64_t* setting) {
  uint64_t v;
  if (!as_u64(arg, &v)) return nullptr;
  *setting = v;
  Py_RETURN_NONE;
}

bool as_int(PyObject* o, int* out) {
  long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred()) return false;
  *out = static_cast<int>(v);
  return true;
}

// Reads a tuple of exactly n items into `items`, with a clear error naming the command.
bool unpack(PyObject* t, Py_ssize_t n, PyObject** items, Py_ssize_t index) {
  if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
    PyErr_Format(PyExc_ValueError, "native plan command %zd: expected a tuple of %zd items", index, n);
    return false;
  }
  for (Py_ssize_t i = 0; i < n; ++i) items[i] = PyTuple_GET_ITEM(t, i);
  return true;
}

bool read_operand(PyObject* buffer, PyObject* slot, PyObject* offset, Program* p, Operand* out) {
  uint64_t handle;
  if (!as_u64(buffer, &handle) || !as_int(slot, &out->slot) || !as_u64(offset, &out->offset)) return false;
  out->buffer = reinterpret_cast<WGPUBuffer>(static_cast<uintptr_t>(handle));
  if (out->slot < 0) {
    if (out->buffer == nullptr) {
      PyErr_SetString(PyExc_ValueError, "native plan: a fixed buffer operand has a null handle");
      return false;
    }
    g_procs.bufferAddRef(out->buffer);
    p->held_buffers.push_back(out->buffer);
  } else if (out->slot + 1 > p->slot_count) {
    p->slot_count = out->slot + 1;
  }
  return true;
}

bool read_dispatch(PyObject* t, Py_ssize_t index, Program* p, Command* c) {
  PyObject* it[7];
  if (!unpack(t, 7, it, index)) return false;
  uint64_t pipeline, layout, gx, gy, gz;
  if (!as_u64(it[1], &pipeline) || !as_u64(it[2], &layout) || !as_u64(it[3], &gx) || !as_u64(it[4], &gy) ||
      !as_u64(it[5], &gz))
    return false;
  if (pipeline == 0 || layout == 0) {
    PyErr_Format(PyExc_ValueError, "native plan command %zd: null pipeline or bind group layout", index);
    return false;
  }
  c->pipeline = reinterpret_cast<WGPUComputePipeline>(static_cast<uintptr_t>(pipeline));
  c->layout = reinterpret_cast<WGPUBindGroupLayout>(static_cast<uintptr_t>(layout));
  g_procs.computePipelineAddRef(c->pipeline);
  g_procs.bindGroupLayoutAddRef(c->layout);
  c->grid[0] = static_cast<uint32_t>(gx);
  c->grid[1] = static_cast<uint32_t>(gy);
  c->grid[2] = static_cast<uint32_t>(gz);
  PyObject* entries = it[6];
  if (!PyTuple_Check(entries)) {
    PyErr_Format(PyExc_ValueError, "native plan command %zd: entries must be a tuple", index);
    return false;
  }
  for (Py_ssize_t e = 0; e < PyTuple_GET_SIZE(entries); ++e) {
    PyObject* f[5];
    if (!unpack(PyTuple_GET_ITEM(entries, e), 5, f, index)) return false;
    int binding;
    uint64_t size;
    Operand op;
    if (!as_int(f[0], &binding) || !read_operand(f[1], f[2], f[3], p, &op) || !as_u64(f[4], &size)) return false;
    WGPUBindGroupEntry entry;
    std::memset(&entry, 0, sizeof(entry));
    entry.binding = static_cast<uint32_t>(binding);
    entry.buffer = op.buffer;
    entry.offset = op.offset;
    entry.size = size;
    c->entries.push_back(entry);
    c->entry_slots.push_back(op.slot);
    c->entry_offsets.push_back(op.offset);
    if (op.slot >= 0) c->per_call = true;
  }
  if (!c->per_call) {
    WGPUBindGroupDescriptor desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.layout = c->layout;
    desc.entryCount = c->entries.size();
    desc.entries = c->entries.data();
    c->bind_group = g_procs.deviceCreateBindGroup(p->device, &desc);
    p->bind_groups_created++;
  }
  p->dispatches++;
  return true;
}

PyObject* set_procs(PyObject*, PyObject* args) {
  PyObject* addresses;
  PyObject* sizes;
  PyObject* constants;
  if (!PyArg_ParseTuple(args, "O!O!O!", &PyTuple_Type, &addresses, &PyTuple_Type, &sizes, &PyTuple_Type,
                        &constants))
    return nullptr;
  if (PyTuple_GET_SIZE(addresses) != kProcCount) {
    return PyErr_Format(PyExc_ValueError, "native plan: %d Dawn procs expected, got %zd", kProcCount,
                        PyTuple_GET_SIZE(addresses));
  }
  // Struct layouts as cffi sees them in wgpudawn's cdef: a different Dawn would not match.
  const size_t expected[] = {sizeof(WGPUBindGroupEntry), sizeof(WGPUBindGroupDescriptor),
                             sizeof(WGPUComputePassDescriptor), sizeof(WGPUQueueWorkDoneCallbackInfo),
                             sizeof(WGPUFutureWaitInfo), sizeof(WGPUFuture), sizeof(WGPUCommandEncoderDescriptor),
                             sizeof(WGPUBufferMapCallbackInfo)};
  constexpr int kSizes = sizeof(expected) / sizeof(expected[0]);
  if (PyTuple_GET_SIZE(sizes) != kSizes) {
    return PyErr_Format(PyExc_ValueError, "native plan: %d struct sizes expected", kSizes);
  }
  // Enum values as in wgpudawn's lib (WGPUCallbackMode_WaitAnyOnly, WGPUQueueWorkDoneStatus_Success,
  // WGPUWaitStatus_Success, WGPUWaitStatus_TimedOut).
  const uint64_t enums[] = {WGPUCallbackMode_WaitAnyOnly, WGPUQueueWorkDoneStatus_Success, WGPUWaitStatus_Success,
                            WGPUWaitStatus_TimedOut, WGPUMapAsyncStatus_Success, WGPUMapMode_Read};
  constexpr int kEnums = sizeof(enums) / sizeof(enums[0]);
  if (PyTuple_GET_SIZE(constants) != kEnums) {
    return PyErr_Format(PyExc_ValueError, "native plan: %d enum values expected", kEnums);
  }
  for (int i = 0; i < kEnums; ++i) {
    uint64_t v;
    if (!as_u64(PyTuple_GET_ITEM(constants, i), &v)) return nullptr;
    if (v != enums[i]) {
      return PyErr_Format(PyExc_RuntimeError,
                          "native plan: webgpu.h enum value %d is %llu in wgpudawn but %llu in this build; "
                          "rebuild the extension against this wgpudawn (or set TORCH_WEBGPU_EXECUTOR=python)",
                          i, static_cast<unsigned long long>(v), static_cast<unsigned long long>(enums[i]));
    }
  }
  for (int i = 0; i < kSizes; ++i) {
    uint64_t s;
    if (!as_u64(PyTuple_GET_ITEM(sizes, i), &s)) return nullptr;
    if (s != expected[i]) {
      return PyErr_Format(PyExc_RuntimeError,
                          "native plan: webgpu.h struct %d is %llu bytes in wgpudawn but %zu in this build; "
                          "rebuild the extension against this wgpudawn (or set TORCH_WEBGPU_EXECUTOR=python)",
                          i, static_cast<unsigned long long>(s), expected[i]);
    }
  }
  void* table[kProcCount];
  for (int i = 0; i < kProcCount; ++i) {
    uint64_t a;
    if (!as_u64(PyTuple_GET_ITEM(addresses, i), &a)) return nullptr;
    if (a == 0) return PyErr_Format(PyExc_ValueError, "native plan: Dawn proc %d has a null address", i);
    table[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(a));
  }
  std::memcpy(&g_procs, table, sizeof(g_procs));
  g_procs_set = true;
  Py_RETURN_NONE;
}

PyObject* program_new(PyObject*, PyObject* args) {
  unsigned long long device;
  PyObject* commands;
  if (!PyArg_ParseTuple(args, "KO!", &device, &PyTuple_Type, &commands)) return nullptr;
  if (!g_procs_set) return PyErr_Format(PyExc_RuntimeError, "native plan: set_procs was not called");
  auto* p = new Program();
  p->device = reinterpret_cast<WGPUDevice>(static_cast<uintptr_t>(device));
  g_procs.deviceAddRef(p->device);
  const Py_ssize_t n = PyTuple_GET_SIZE(commands);
  p->commands.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* t = PyTuple_GET_ITEM(commands, i);
    Command& c = p->commands[i];
    int kind = -1;
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) == 0 || !as_int(PyTuple_GET_ITEM(t, 0), &kind)) {
      if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "native plan command %zd: not a tuple", i);
      release_program(p);
      return nullptr;
    }
    c.kind = kind;
    bool ok = false;
    PyObject* it[8];
    if (kind == kDispatch) {
      ok = read_dispatch(t, i, p, &c);
    } else if (kind == kCopy) {
      ok = unpack(t, 8, it, i) && read_operand(it[1], it[2], it[3], p, &c.src) &&
           read_operand(it[4], it[5], it[6], p, &c.dst) && as_u64(it[7], &c.size);
    } else if (kind == kClear) {
      ok = unpack(t, 5, it, i) && read_operand(it[1], it[2], it[3], p, &c.dst) && as_u64(it[4], &c.size);
    } else {
      PyErr_Format(PyExc_ValueError, "native plan command %zd: unknown kind %d", i, kind);
    }
    if (!ok) {
      release_program(p);
      return nullptr;
    }
  }
  PyObject* capsule = PyCapsule_New(p, kCapsule, capsule_destructor);
  if (capsule == nullptr) release_program(p);
  return capsule;
}

// Resolves a slot operand against this call's (buffer, base) pairs.
inline void resolve(const Operand& op, const uintptr_t* slots, WGPUBuffer* buffer, uint64_t* offset) {
  if (op.slot < 0) {
    *buffer = op.buffer;
    *offset = op.offset;
  } else {
    *buffer = reinterpret_cast<WGPUBuffer>(slots[2 * op.slot]);
    *offset = slots[2 * op.slot + 1] + op.offset;
  }
}

// The compute pass a recording writes into, with the state set on it (to skip repeated set_* calls).
struct PassState {
  WGPUComputePassEncoder pass = nullptr;
  WGPUCommandEncoder encoder = nullptr;   // the encoder `pass` belongs to
  WGPUComputePipeline pipeline = nullptr;
  WGPUBindGroup bound = nullptr;
};

void end_pass(PassState* s) {
  if (s->pass != nullptr) {
    g_procs.computePassEncoderEnd(s->pass);
    g_procs.computePassEncoderRelease(s->pass);
  }
  *s = PassState();
}

// Eager replays (runtime/native_eager.py) leave their pass open across calls, so consecutive eager ops
// share one compute pass like the Python recorder's; the runtime's recorder ends it (eager_end_pass)
// before it records anything else into the encoder or finishes it. One device runtime per process.
PassState g_eager;

// True when `key` holds exactly this call's (buffer, base) of each slot entry of `c`.
bool same_slots(const Command& c, const std::vector<uintptr_t>& key, const uintptr_t* slots) {
  size_t k = 0;
  for (size_t e = 0; e < c.entries.size(); ++e) {
    const int s = c.entry_slots[e];
    if (s < 0) continue;
    if (k + 2 > key.size() || key[k] != slots[2 * s] || key[k + 1] != slots[2 * s + 1]) return false;
    k += 2;
  }
  return k == key.size();
}

// Makes the slot bind group of a dispatch current for this call's slots: a cached one made for the same
// slot buffers, else a new one, which replaces the least recently used when kBindGroupWays are held.
void bind_slots(Program* p, Command& c, const uintptr_t* slots) {
  const uint64_t call = ++c.calls;
  if (c.last < c.cached.size() && same_slots(c, c.cached[c.last].key, slots)) {   // a steady loop
    c.cached[c.last].last_call = call;
    c.bind_group = c.cached[c.last].group;
    return;
  }
  std::vector<uintptr_t>& key = c.call_key;
  key.clear();
  for (size_t e = 0; e < c.entries.size(); ++e) {
    const int s = c.entry_slots[e];
    if (s < 0) continue;
    key.push_back(slots[2 * s]);
    key.push_back(slots[2 * s + 1]);
  }
  for (size_t i = 0; i < c.cached.size(); ++i) {
    if (c.cached[i].key == key) {
      c.cached[i].last_call = call;
      c.bind_group = c.cached[i].group;
      c.last = i;
      return;
    }
  }
  for (size_t e = 0; e < c.entries.size(); ++e) {
    const int s = c.entry_slots[e];
    if (s < 0) continue;
    c.entries[e].buffer = reinterpret_cast<WGPUBuffer>(slots[2 * s]);
    c.entries[e].offset = slots[2 * s + 1] + c.entry_offsets[e];
  }
  WGPUBindGroupDescriptor desc;
  std::memset(&desc, 0, sizeof(desc));
  desc.layout = c.layout;
  desc.entryCount = c.entries.size();
  desc.entries = c.entries.data();
  WGPUBindGroup group = g_procs.deviceCreateBindGroup(p->device, &desc);
  p->bind_groups_created++;
  CachedBindGroup* slot = nullptr;
  if (c.cached.empty() || (c.cached.size() < kBindGroupWays && g_extra_bind_groups < kMaxExtraBindGroups)) {
    if (!c.cached.empty()) ++g_extra_bind_groups;
    slot = &c.cached.emplace_back();
  } else {
    slot = &c.cached[0];
    for (CachedBindGroup& g : c.cached) {
      if (g.last_call < slot->last_call) slot = &g;
    }
    g_procs.bindGroupRelease(slot->group);
  }
  slot->group = group;
  slot->key = key;
  slot->last_call = call;
  c.bind_group = group;
  c.last = static_cast<size_t>(slot - c.cached.data());
}

// Records commands [begin, end) of the program into `encoder` (the runtime's open encoder, outside any
// pass of the Python recorder) through `state`; the pass stays open afterwards when `keep_open`.
void record_range(Program* p, WGPUCommandEncoder encoder, const uintptr_t* slots, PassState* state,
                  bool keep_open, size_t begin, size_t end) {
  WGPUComputePassDescriptor pass_desc;
  std::memset(&pass_desc, 0, sizeof(pass_desc));
  if (state->pass != nullptr && state->encoder != encoder) end_pass(state);
  for (size_t i = begin; i < end; ++i) {
    Command& c = p->commands[i];
    if (c.kind == kDispatch) {
      if (c.per_call) bind_slots(p, c, slots);
      if (state->pass == nullptr) {
        state->pass = g_procs.commandEncoderBeginComputePass(encoder, &pass_desc);
        state->encoder = encoder;
      }
      if (c.pipeline != state->pipeline) {
        g_procs.computePassEncoderSetPipeline(state->pass, c.pipeline);
        state->pipeline = c.pipeline;
        state->bound = nullptr;
      }
      if (c.bind_group != state->bound) {
        g_procs.computePassEncoderSetBindGroup(state->pass, 0, c.bind_group, 0, nullptr);
        state->bound = c.bind_group;
      }
      g_procs.computePassEncoderDispatchWorkgroups(state->pass, c.grid[0], c.grid[1], c.grid[2]);
    } else {
      end_pass(state);
      WGPUBuffer dst;
      uint64_t dst_offset;
      resolve(c.dst, slots, &dst, &dst_offset);
      if (c.kind == kCopy) {
        WGPUBuffer src;
        uint64_t src_offset;
        resolve(c.src, slots, &src, &src_offset);
        g_procs.commandEncoderCopyBufferToBuffer(encoder, src, src_offset, dst, dst_offset, c.size);
      } else {
        g_procs.commandEncoderClearBuffer(encoder, dst, dst_offset, c.size);
      }
    }
  }
  if (!keep_open) end_pass(state);
}

// Records every command of the program (one run of it).
void record(Program* p, WGPUCommandEncoder encoder, const uintptr_t* slots, PassState* state, bool keep_open) {
  record_range(p, encoder, slots, state, keep_open, 0, p->commands.size());
  p->runs++;
}

// A program run that submits itself is submitted in pieces of this many dispatches (0: in one piece), so
// the GPU starts on the first piece while the host records the rest: Dawn turns a command buffer into
// Vulkan commands inside wgpuQueueSubmit, which on NVIDIA costs ~5 us per dispatch, all of it before the
// GPU starts when the whole plan is one submit. set_plan_split.
uint64_t g_split_dispatches = 0;

// set_plan_split(n): submit self-submitting program runs every n dispatches (0: once, at the end).
PyObject* set_plan_split(PyObject*, PyObject* arg) { return set_setting(arg, &g_split_dispatches); }

void submit_encoder(WGPUCommandEncoder enc, uint64_t queue) {
  WGPUCommandBuffer commands = g_procs.commandEncoderFinish(enc, nullptr);
  g_procs.queueSubmit(reinterpret_cast<WGPUQueue>(static_cast<uintptr_t>(queue)), 1, &commands);
  g_procs.commandBufferRelease(commands);
}

// Reads `count` (buffer, offset) slot pairs from a tuple; buffers must be non-null.
bool read_slots(PyObject* slots, int count, std::vector<uintptr_t>* values) {
  if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) < 2 * count) {
    PyErr_Format(PyExc_ValueError, "native plan: %d slots ((buffer, offset) pairs) expected", count);
    return false;
  }
  values->resize(2 * static_cast<size_t>(count));
  for (int i = 0; i < 2 * count; ++i) {
    uint64_t v;
    if (!as_u64(PyTuple_GET_ITEM(slots, i), &v)) return false;
    if (i % 2 == 0 && v == 0) {
      PyErr_Format(PyExc_ValueError, "native plan: slot %d has no buffer", i / 2);
      return false;
    }
    (*values)[i] = static_cast<uintptr_t>(v);
  }
  return true;
}

// eager_record(program, encoder, slots): record into the eager pass (left open) on `encoder`.
PyObject* eager_record(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) return PyErr_Format(PyExc_TypeError, "eager_record(program, encoder, slots) takes 3 arguments");
  auto* p = static_cast<Program*>(PyCapsule_GetPointer(args[0], kCapsule));
  if (p == nullptr) return nullptr;
  uint64_t encoder;
  if (!as_u64(args[1], &encoder)) return nullptr;
  if (encoder == 0) return PyErr_Format(PyExc_ValueError, "native eager record: no command encoder");
  uintptr_t small[16];
  std::vector<uintptr_t> values;
  const uintptr_t* slot_values = small;
  PyObject* slots = args[2];
  if (p->slot_count <= 8 && PyTuple_Check(slots) && PyTuple_GET_SIZE(slots) >= 2 * p->slot_count) {
    for (int i = 0; i < 2 * p->slot_count; ++i) {
      uint64_t v;
      if (!as_u64(PyTuple_GET_ITEM(slots, i), &v)) return nullptr;
      if (i % 2 == 0 && v == 0) return PyErr_Format(PyExc_ValueError, "native plan: slot %d has no buffer", i / 2);
      small[i] = static_cast<uintptr_t>(v);
    }
  } else {
    if (!read_slots(slots, p->slot_count, &values)) return nullptr;
    slot_values = values.data();
  }
  record(p, reinterpret_cast<WGPUCommandEncoder>(static_cast<uintptr_t>(encoder)), slot_values, &g_eager, true);
  Py_RETURN_NONE;
}

// eager_end_pass(): end the open eager pass, if any (before the encoder records anything else).
PyObject* eager_end_pass(PyObject*, PyObject*) {
  end_pass(&g_eager);
  Py_RETURN_NONE;
}

PyObject* program_run(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4) return PyErr_Format(PyExc_TypeError, "run(program, encoder, slots, queue) takes 4 arguments");
  auto* p = static_cast<Program*>(PyCapsule_GetPointer(args[0], kCapsule));
  if (p == nullptr) return nullptr;
  uint64_t encoder, queue;
  if (!as_u64(args[1], &encoder) || !as_u64(args[3], &queue)) return nullptr;
  if (encoder == 0 && queue == 0) {
    return PyErr_Format(PyExc_ValueError, "native plan: no command encoder and no queue to submit to");
  }
  std::vector<uintptr_t> values;
  if (!read_slots(args[2], p->slot_count, &values)) return nullptr;
  auto* enc = reinterpret_cast<WGPUCommandEncoder>(static_cast<uintptr_t>(encoder));
  bool own = enc == nullptr;   // nothing was pending: a fresh encoder, finished and released here
  if (own) enc = g_procs.deviceCreateCommandEncoder(p->device, nullptr);
  end_pass(&g_eager);   // program order: an open eager pass ends before this program's commands
  PassState state;
  long submits = 0;
  if (queue == 0) {
    record(p, enc, values.data(), &state, false);
  } else {
    // Finish and submit the encoder here too (it holds everything recorded before, in order), in pieces
    // of g_split_dispatches dispatches; each piece after the first gets an encoder of its own.
    const size_t n = p->commands.size();
    size_t begin = 0;
    do {   // at least one submit: an empty program still submits what was recorded before it
      size_t end = n;
      if (g_split_dispatches > 0) {
        uint64_t dispatches = 0;
        for (end = begin; end < n && dispatches < g_split_dispatches; ++end) {
          if (p->commands[end].kind == kDispatch) ++dispatches;
        }
        if (n - end < g_split_dispatches / 2) end = n;   // no small last piece
      }
      record_range(p, enc, values.data(), &state, false, begin, end);
      submit_encoder(enc, queue);
      ++submits;
      begin = end;
      if (begin < n) {
        if (own) g_procs.commandEncoderRelease(enc);
        enc = g_procs.deviceCreateCommandEncoder(p->device, nullptr);
        own = true;
      }
    } while (begin < n);
    p->runs++;
  }
  if (own) g_procs.commandEncoderRelease(enc);
  return PyLong_FromLong(submits);
}

// The status a queue work-done callback reports. Heap-held: with WGPUCallbackMode_WaitAnyOnly the callback
// runs inside wgpuInstanceWaitAny (or, cancelled, when the instance goes away), so a wait given up (an
// interrupt, a failed WaitAny) leaves the callback to free it.
struct WorkDone {
  uint32_t status = 0;
  bool abandoned = false;
};

void on_work_done(WGPUQueueWorkDoneStatus status, WGPUStringView, void* userdata1, void*) {
  auto* w = static_cast<WorkDone*>(userdata1);
  if (w->abandoned) {
    delete w;
    return;
  }
  w->status = status;
}

// How long a wait polls its future (wgpuInstanceWaitAny with timeout 0) before blocking; set_spin.
uint64_t g_spin_ns = 0;

// set_spin(ns): the polling time of later waits (0: block at once).
PyObject* set_spin(PyObject*, PyObject* arg) { return set_setting(arg, &g_spin_ns); }

// How long one wgpuInstanceWaitAny blocks before Python's signal handlers get a look (as wgpudawn's
// GPUPromise: 0.1 s), so a KeyboardInterrupt still stops a wait for a long-running queue.
constexpr uint64_t kWaitSliceNs = 100000000;

// The label of the encoders made here, as Python's recorder names its own (Dawn's messages quote it).
const char kEncoderLabel[] = "torch-webgpu";

// encoder_new(device) -> handle: a command encoder the caller owns (encoder_release, or queue_submit with
// release), made without wgpudawn's Python wrapper.
PyObject* encoder_new(PyObject*, PyObject* arg) {
  if (!g_procs_set) return PyErr_Format(PyExc_RuntimeError, "native plan: set_procs was not called");
  uint64_t device;
  if (!as_u64(arg, &device)) return nullptr;
  if (device == 0) return PyErr_Format(PyExc_ValueError, "encoder_new: no device");
  WGPUCommandEncoderDescriptor desc;
  std::memset(&desc, 0, sizeof(desc));
  desc.label = {kEncoderLabel, sizeof(kEncoderLabel) - 1};
  WGPUCommandEncoder enc =
      g_procs.deviceCreateCommandEncoder(reinterpret_cast<WGPUDevice>(static_cast<uintptr_t>(device)), &desc);
  return PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(enc)));
}

// encoder_release(handle): drop the reference encoder_new gave (an encoder given up unsubmitted).
PyObject* encoder_release(PyObject*, PyObject* arg) {
  uint64_t encoder;
  if (!as_u64(arg, &encoder)) return nullptr;
  if (encoder != 0) {
    auto* enc = reinterpret_cast<WGPUCommandEncoder>(static_cast<uintptr_t>(encoder));
    if (g_eager.pass != nullptr && g_eager.encoder == enc) end_pass(&g_eager);
    g_procs.commandEncoderRelease(enc);
  }
  Py_RETURN_NONE;
}

// Finishes `encoder` (ending the eager pass if it is open on it), releases it with `release`, and submits
// it to `queue`; false (nothing submitted) when finishing added errors to wgpudawn's `pending` list, which
// Dawn's uncaptured-error callback fills while finish runs.
bool finish_and_submit(uint64_t queue, uint64_t encoder, bool release, PyObject* pending) {
  auto* enc = reinterpret_cast<WGPUCommandEncoder>(static_cast<uintptr_t>(encoder));
  if (g_eager.pass != nullptr && g_eager.encoder == enc) end_pass(&g_eager);
  WGPUCommandBuffer commands = g_procs.commandEncoderFinish(enc, nullptr);
  if (release) g_procs.commandEncoderRelease(enc);
  if (PyList_GET_SIZE(pending) > 0) {
    if (commands != nullptr) g_procs.commandBufferRelease(commands);
    return false;
  }
  g_procs.queueSubmit(reinterpret_cast<WGPUQueue>(static_cast<uintptr_t>(queue)), 1, &commands);
  g_procs.commandBufferRelease(commands);
  return true;
}

// Blocks until `future` completes (GIL released, in slices that let signal handlers run); false with a
// Python error set when waiting fails or is interrupted (then `done` is left for its callback to free).
bool wait_future(uint64_t instance, WGPUFuture future, WorkDone* done) {
  WGPUFutureWaitInfo wait;
  std::memset(&wait, 0, sizeof(wait));
  wait.future = future;
  auto* inst = reinterpret_cast<WGPUInstance>(static_cast<uintptr_t>(instance));
  if (g_spin_ns > 0) {
    // Poll first, as CUDA's default synchronize spins: a blocking wait lets the core sleep, and waking it
    // (and the thread that records next) costs more than short GPU work takes.
    Py_BEGIN_ALLOW_THREADS
    const auto start = std::chrono::steady_clock::now();
    const auto limit = std::chrono::nanoseconds(g_spin_ns);
    do {
      g_procs.instanceWaitAny(inst, 1, &wait, 0);
    } while (!wait.completed && std::chrono::steady_clock::now() - start < limit);
    Py_END_ALLOW_THREADS
    if (wait.completed) return true;
  }
  for (;;) {
    WGPUWaitStatus status;
    Py_BEGIN_ALLOW_THREADS
    status = g_procs.instanceWaitAny(inst, 1, &wait, kWaitSliceNs);
    Py_END_ALLOW_THREADS
    if (wait.completed) return true;
    if (status != WGPUWaitStatus_Success && status != WGPUWaitStatus_TimedOut) {
      done->abandoned = true;
      PyErr_Format(PyExc_RuntimeError,
                   "waiting for the WebGPU queue failed: wgpuInstanceWaitAny returned status %u (an instance "
                   "without the TimedWaitAny feature?)",
                   static_cast<unsigned>(status));
      return false;
    }
    if (PyErr_CheckSignals() != 0) {
      done->abandoned = true;
      return false;
    }
  }
}

void on_mapped(WGPUMapAsyncStatus status, WGPUStringView message, void* userdata1, void* userdata2) {
  on_work_done(static_cast<WGPUQueueWorkDoneStatus>(status), message, userdata1, userdata2);
}

// queue_submit(queue, encoder, instance, pending, release) -> int: finish `encoder` (0: none) and submit it
// to `queue` (then release it, with `release`: one encoder_new made); then, with a non-zero `instance`,
// wait until the queue has finished everything submitted so far (GIL released). An encoder that fails
// validation (errors in wgpudawn's `pending` list) is not submitted and nothing is waited for (-1).
// Returns the work-done status (WGPUQueueWorkDoneStatus; 0: not waited).
PyObject* queue_submit(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyList_Check(args[3])) {
    return PyErr_Format(PyExc_TypeError,
                        "queue_submit(queue, encoder, instance, pending: list, release) takes 5 arguments");
  }
  if (!g_procs_set) return PyErr_Format(PyExc_RuntimeError, "native plan: set_procs was not called");
  uint64_t queue, encoder, instance;
  if (!as_u64(args[0], &queue) || !as_u64(args[1], &encoder) || !as_u64(args[2], &instance)) return nullptr;
  const int release = PyObject_IsTrue(args[4]);
  if (release < 0) return nullptr;
  if (queue == 0) return PyErr_Format(PyExc_ValueError, "queue_submit: no queue");
  if (encoder != 0 && !finish_and_submit(queue, encoder, release, args[3])) return PyLong_FromLong(-1);
  if (instance == 0) return PyLong_FromLong(0);
  auto* done = new WorkDone();
  WGPUQueueWorkDoneCallbackInfo info;
  std::memset(&info, 0, sizeof(info));
  info.mode = WGPUCallbackMode_WaitAnyOnly;
  info.callback = on_work_done;
  info.userdata1 = done;
  WGPUFuture future =
      g_procs.queueOnSubmittedWorkDone(reinterpret_cast<WGPUQueue>(static_cast<uintptr_t>(queue)), info);
  if (!wait_future(instance, future, done)) return nullptr;
  const uint32_t status = done->status;
  delete done;
  return PyLong_FromUnsignedLong(status);
}

// buffer_read(queue, encoder, release, src, src_offset, staging, size, instance, pending) -> bytes | int:
// record a copy of `size` bytes of `src` at `src_offset` into the MAP_READ buffer `staging` at the end of
// `encoder` (the recorder's open one; `release`: drop the reference encoder_new gave), finish and
// submit it, map `staging` and wait for the map (GIL released), and return the bytes (staging unmapped
// again). -1: finish failed validation (errors in `pending`), nothing submitted; a positive int: the map's
// WGPUMapAsyncStatus when it failed.
PyObject* buffer_read(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 9 || !PyList_Check(args[8])) {
    return PyErr_Format(PyExc_TypeError,
                        "buffer_read(queue, encoder, release, src, src_offset, staging, size, instance, "
                        "pending: list) takes 9 arguments");
  }
  if (!g_procs_set) return PyErr_Format(PyExc_RuntimeError, "native plan: set_procs was not called");
  uint64_t queue, encoder, src, src_offset, staging, size, instance;
  if (!as_u64(args[0], &queue) || !as_u64(args[1], &encoder) || !as_u64(args[3], &src) ||
      !as_u64(args[4], &src_offset) || !as_u64(args[5], &staging) || !as_u64(args[6], &size) ||
      !as_u64(args[7], &instance))
    return nullptr;
  int release = PyObject_IsTrue(args[2]);
  if (release < 0) return nullptr;
  if (queue == 0 || src == 0 || staging == 0 || instance == 0 || encoder == 0) {
    return PyErr_Format(PyExc_ValueError, "buffer_read: null queue, encoder, buffer or instance");
  }
  auto* enc = reinterpret_cast<WGPUCommandEncoder>(static_cast<uintptr_t>(encoder));
  auto* stage = reinterpret_cast<WGPUBuffer>(static_cast<uintptr_t>(staging));
  if (g_eager.pass != nullptr && g_eager.encoder == enc) end_pass(&g_eager);
  g_procs.commandEncoderCopyBufferToBuffer(enc, reinterpret_cast<WGPUBuffer>(static_cast<uintptr_t>(src)), src_offset,
                                           stage, 0, size);
  if (!finish_and_submit(queue, encoder, release, args[8])) return PyLong_FromLong(-1);
  auto* done = new WorkDone();
  WGPUBufferMapCallbackInfo info;
  std::memset(&info, 0, sizeof(info));
  info.mode = WGPUCallbackMode_WaitAnyOnly;
  info.callback = on_mapped;
  info.userdata1 = done;
  WGPUFuture future = g_procs.bufferMapAsync(stage, WGPUMapMode_Read, 0, static_cast<size_t>(size), info);
  if (!wait_future(instance, future, done)) return nullptr;
  const uint32_t status = done->status;
  delete done;
  if (status != WGPUMapAsyncStatus_Success) return PyLong_FromUnsignedLong(status == 0 ? 3 : status);
  const void* data = g_procs.bufferGetConstMappedRange(stage, 0, static_cast<size_t>(size));
  PyObject* out = data == nullptr ? PyLong_FromLong(3)
                                  : PyBytes_FromStringAndSize(static_cast<const char*>(data),
                                                              static_cast<Py_ssize_t>(size));
  g_procs.bufferUnmap(stage);
  return out;
}

PyObject* program_info(PyObject*, PyObject* capsule) {
  auto* p = static_cast<Program*>(PyCapsule_GetPointer(capsule, kCapsule));
  if (p == nullptr) return nullptr;
  return Py_BuildValue("{s:n,s:i,s:i,s:L,s:L}", "commands", static_cast<Py_ssize_t>(p->commands.size()),
                       "dispatches", p->dispatches, "slots", p->slot_count, "runs",
                       static_cast<long long>(p->runs), "bind_groups_created",
                       static_cast<long long>(p->bind_groups_created));
}

PyMethodDef kMethods[] = {
    {"set_procs", set_procs, METH_VARARGS,
     "set_procs(addresses, struct_sizes, enum_values): the Dawn entry points (wgpudawn lib addresses), the "
     "cffi sizes of the webgpu.h structs and the enum values this build uses (checked)."},
    {"program_new", program_new, METH_VARARGS,
     "program_new(device, commands) -> Program: fixed bind groups are created here, once."},
    {"program_run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(program_run)), METH_FASTCALL,
     "program_run(program, encoder, slots, queue): record the program into the encoder (slots = (buffer, "
     "offset)*); a non-zero queue then finishes the encoder and submits it there; encoder 0 (with a "
     "queue): a new encoder made, submitted and released here."},
    {"eager_record", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(eager_record)), METH_FASTCALL,
     "eager_record(program, encoder, slots): record the program into the eager compute pass of `encoder`, "
     "which stays open for the next eager replay until eager_end_pass()."},
    {"eager_end_pass", eager_end_pass, METH_NOARGS, "eager_end_pass(): end the open eager compute pass, if any."},
    {"queue_submit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(queue_submit)), METH_FASTCALL,
     "queue_submit(queue, encoder, instance, pending, release) -> status: finish the encoder (0: none), "
     "release it (with `release`) and submit it; with an instance, also wait (GIL released) until the queue "
     "has done all submitted work. -1: finish failed validation (errors in `pending`), nothing submitted; "
     "else the work-done status, 0 if not waited."},
    {"buffer_read", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(buffer_read)), METH_FASTCALL,
     "buffer_read(queue, encoder, release, src, src_offset, staging, size, instance, pending) -> bytes | int: "
     "copy src's range into the MAP_READ staging buffer at the end of the encoder, finish, submit, map and "
     "wait (GIL released); the bytes, or -1 (finish failed validation) or the failed map's status."},
    {"set_plan_split", set_plan_split, METH_O,
     "set_plan_split(n): submit self-submitting program runs every n dispatches (0: in one submit)."},
    {"set_spin", set_spin, METH_O, "set_spin(ns): how long later waits poll before they block (0: not at all)."},
    {"encoder_new", encoder_new, METH_O, "encoder_new(device) -> handle: a new command encoder, owned by the caller."},
    {"encoder_release", encoder_release, METH_O, "encoder_release(handle): release an encoder_new encoder."},
    {"program_info", program_info, METH_O, "Counts of a program: commands, dispatches, slots, runs, bind groups."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_native_plan",
                       "Native recorder of prepared plan programs into Dawn command encoders (no torch).", -1,
                       kMethods};

}  // namespace
}  // namespace torch_webgpu_native

PyMODINIT_FUNC PyInit__native_plan() { return PyModule_Create(&torch_webgpu_native::kModule); }
