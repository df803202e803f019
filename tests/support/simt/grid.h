// Host side of the SIMT emulator: launching a grid, and the device limits it enforces as the
// CUDA runtime does on an sm_90 GPU.
#pragma once

#include <vector_types.h>

#include <cstddef>
#include <functional>
#include <string>

namespace tessel::simt {

// Limits of an H100/H200 (compute capability 9.0).
inline constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;  // without an opt-in
inline constexpr size_t kMaxDynamicSharedBytes = 232448;         // sharedMemPerBlockOptin
inline constexpr unsigned kMaxThreadsPerBlock = 1024;

struct LaunchConfig {
  dim3 grid, block;
  size_t shared_bytes;
};

// cudaFuncAttributeMaxDynamicSharedMemorySize of a kernel (kDefaultDynamicSharedBytes until set).
void set_max_dynamic_shared_bytes(const void* kernel, size_t bytes);

// Runs `body` once per thread of the grid, one block after another, on the calling thread.
// Returns false, with the reason in `error`, when the configuration is one the CUDA runtime
// refuses (then nothing runs) or when a thread faulted (then the rest of the grid is not run).
enum class LaunchResult { kOk, kInvalidConfiguration, kInvalidValue, kFault };
LaunchResult run_grid(const char* kernel, const void* kernel_address, const LaunchConfig& config,
                      const std::function<void()>& body, std::string& error);

// Makes a refused launch or a fault the calling thread's last error (cuda_runtime.cpp), with
// `error` as its cudaGetErrorString.
void record_launch_result(LaunchResult result, const std::string& error);

}  // namespace tessel::simt
