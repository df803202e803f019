// The CUDA runtime calls that kernels/cuda and its tests make, for the SIMT emulator: one
// emulated sm_90 device whose memory is host memory and whose streams all run synchronously on
// the calling thread (so stream order, events and synchronisation hold trivially). Linked in place
// of libcudart; the declarations are the CUDA headers' own.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "tests/support/simt/grid.h"

namespace tessel::simt {
namespace {

constexpr int kMultiprocessors = 132;  // an H100 SXM / H200
constexpr size_t kAllocationAlignment = 256;

thread_local cudaError_t last_error = cudaSuccess;
thread_local std::string last_launch_message;

// Live allocations and their sizes: cudaFree of anything else is an error, as on a GPU.
std::mutex allocations_mutex;
std::map<void*, size_t> allocations;

cudaError_t fail(cudaError_t error) {
  last_error = error;
  return error;
}

struct EventState {
  bool timing;
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};

}  // namespace

void record_launch_result(LaunchResult result, const std::string& error) {
  switch (result) {
    case LaunchResult::kOk:
      return;
    case LaunchResult::kInvalidConfiguration:
      last_error = cudaErrorInvalidConfiguration;
      break;
    case LaunchResult::kInvalidValue:
      last_error = cudaErrorInvalidValue;
      break;
    case LaunchResult::kFault:
      last_error = cudaErrorLaunchFailure;
      break;
  }
  last_launch_message = error;
}

}  // namespace tessel::simt

using tessel::simt::fail;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return fail(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return fail(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr || device != 0) return fail(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "tessel SIMT emulator (CPU)", sizeof prop->name - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = tessel::simt::kMultiprocessors;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = int(tessel::simt::kMaxThreadsPerBlock);
  prop->sharedMemPerBlock = tessel::simt::kDefaultDynamicSharedBytes;
  prop->sharedMemPerBlockOptin = tessel::simt::kMaxDynamicSharedBytes;
  prop->totalGlobalMem = size_t(1) << 34;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device) {
  if (value == nullptr || device != 0) return fail(cudaErrorInvalidValue);
  switch (attribute) {
    case cudaDevAttrMultiProcessorCount:
      *value = tessel::simt::kMultiprocessors;
      return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = int(tessel::simt::kMaxDynamicSharedBytes);
      return cudaSuccess;
    default:
      return fail(cudaErrorInvalidValue);
  }
}

cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

cudaError_t cudaGetLastError() {
  const cudaError_t error = tessel::simt::last_error;
  tessel::simt::last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() { return tessel::simt::last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    default:
      return "cudaErrorUnknown";
  }
}

// For a refused or faulted launch, the emulator's account of it (which kernel, block, thread).
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchFailure:
      return tessel::simt::last_launch_message.c_str();
    case cudaErrorInvalidValue:
      return tessel::simt::last_launch_message.empty() ? "invalid argument"
                                                       : tessel::simt::last_launch_message.c_str();
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorNotReady:
      return "device not ready";
    default:
      return "unknown error";
  }
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  // Exactly `bytes`, so that AddressSanitizer (which the emulator's builds use) reports an
  // access past the end, where a GPU would read or write whatever lies there.
  void* p = nullptr;
  if (posix_memalign(&p, tessel::simt::kAllocationAlignment, bytes == 0 ? 1 : bytes) != 0) {
    return fail(cudaErrorMemoryAllocation);
  }
  // Fresh device memory holds whatever was there: 0xFF bytes make a read before a write show
  // (NaN as fp32 and bf16, -1 as an integer).
  std::memset(p, 0xFF, bytes);
  {
    const std::lock_guard lock(tessel::simt::allocations_mutex);
    tessel::simt::allocations[p] = bytes;
  }
  *pointer = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  {
    const std::lock_guard lock(tessel::simt::allocations_mutex);
    if (tessel::simt::allocations.erase(pointer) == 0) return fail(cudaErrorInvalidDevicePointer);
  }
  std::free(pointer);
  return cudaSuccess;
}

// Page-locked host memory is host memory here; it is not device memory, so cudaFree refuses it.
cudaError_t cudaMallocHost(void** pointer, size_t bytes) {
  if (pointer == nullptr) return fail(cudaErrorInvalidValue);
  void* p = nullptr;
  if (posix_memalign(&p, tessel::simt::kAllocationAlignment, bytes == 0 ? 1 : bytes) != 0) {
    return fail(cudaErrorMemoryAllocation);
  }
  std::memset(p, 0xFF, bytes);
  *pointer = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void** pointer, size_t bytes, cudaStream_t) {
  return cudaMalloc(pointer, bytes);
}

cudaError_t cudaFreeAsync(void* pointer, cudaStream_t) { return cudaFree(pointer); }

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) return fail(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  if (bytes > 0 && pointer == nullptr) return fail(cudaErrorInvalidValue);
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t) {
  return cudaMemset(pointer, value, bytes);
}

cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attribute, int value) {
  if (function == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || size_t(value) > tessel::simt::kMaxDynamicSharedBytes) {
    return fail(cudaErrorInvalidValue);
  }
  tessel::simt::set_max_dynamic_shared_bytes(function, size_t(value));
  return cudaSuccess;
}

// Streams are distinct handles that order nothing: every operation is done when it returns.
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int, int) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue);
  *stream = reinterpret_cast<cudaStream_t>(new char);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event == nullptr ? fail(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue);
  *event = reinterpret_cast<cudaEvent_t>(
      new tessel::simt::EventState{(flags & cudaEventDisableTiming) == 0, false, {}});
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<tessel::simt::EventState*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  auto* state = reinterpret_cast<tessel::simt::EventState*>(event);
  state->recorded = true;
  state->at = std::chrono::steady_clock::now();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event == nullptr ? fail(cudaErrorInvalidResourceHandle) : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) { return cudaEventQuery(event); }

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto* a = reinterpret_cast<tessel::simt::EventState*>(start);
  auto* b = reinterpret_cast<tessel::simt::EventState*>(end);
  if (ms == nullptr || a == nullptr || b == nullptr) return fail(cudaErrorInvalidValue);
  if (!a->timing || !b->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!a->recorded || !b->recorded) return fail(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cudaSuccess;
}

}  // extern "C"
