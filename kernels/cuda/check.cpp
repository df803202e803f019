#include "kernels/cuda/check.h"

#include <string>

namespace tessel::kernels::cuda::detail {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + call +
                  " failed: " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CudaError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                  cublasLtGetStatusName(status) + " (" + cublasLtGetStatusString(status) + ")");
}

}  // namespace tessel::kernels::cuda::detail
