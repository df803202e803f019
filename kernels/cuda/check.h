// Checks for every CUDA runtime and cuBLASLt call and every kernel launch: a failure throws
// CudaError whose message names the file, the line, the call and the error, e.g.
//   "kernels/cuda/arena.cpp:41: cudaMalloc(&base_, capacity) failed: cudaErrorMemoryAllocation
//    (out of memory)"
// A kernel launch is checked with TESSEL_CUDA_CHECK_LAUNCH right after it: that catches bad
// launch configurations at once; faults inside the kernel surface at the next synchronising call,
// which is itself checked.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <stdexcept>

namespace tessel::kernels::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

inline void check_cuda(cudaError_t error, const char* call, const char* file, int line) {
  if (error != cudaSuccess) [[unlikely]]
    throw_cuda_error(error, call, file, line);
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) [[unlikely]]
    throw_cublas_error(status, call, file, line);
}

}  // namespace detail
}  // namespace tessel::kernels::cuda

#define TESSEL_CUDA_CHECK(call) \
  ::tessel::kernels::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define TESSEL_CUBLAS_CHECK(call) \
  ::tessel::kernels::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
// cudaGetLastError clears the error it returns, so a failed launch is reported once, here.
#define TESSEL_CUDA_CHECK_LAUNCH(kernel)                                                         \
  ::tessel::kernels::cuda::detail::check_cuda(cudaGetLastError(), "launch of " kernel, __FILE__, \
                                              __LINE__)
