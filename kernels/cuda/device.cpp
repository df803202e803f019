#include "kernels/cuda/device.h"

#include <cuda_runtime_api.h>

namespace tessel::kernels::cuda {

std::optional<std::string> gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();  // clear it, so the next checked call does not report it again
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(error) + " (" +
           cudaGetErrorString(error) + ")";
  }
  if (count == 0) return std::string("no CUDA device (cudaGetDeviceCount returned 0)");
  return std::nullopt;
}

}  // namespace tessel::kernels::cuda
