#include "kernels/cuda/arena.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda/check.h"

namespace tessel::kernels::cuda {

DeviceArena::DeviceArena(size_t capacity) : layout_(capacity) {
  TESSEL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), capacity));
}

DeviceArena::~DeviceArena() { cudaFree(base_); }

}  // namespace tessel::kernels::cuda
