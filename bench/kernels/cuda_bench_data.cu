#include "bench/kernels/cuda_bench_data.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/launch.cuh"

namespace tessel::bench {
namespace {

__device__ __forceinline__ uint64_t mix(uint64_t z) {  // SplitMix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float uniform(uint64_t seed, int64_t i, float lo, float hi) {
  const uint64_t bits = mix(seed * 0x9E3779B97F4A7C15ULL + uint64_t(i));
  return lo + (hi - lo) * float(bits >> 40) * 0x1.0p-24f;
}

template <class T>
__global__ void fill_kernel(T* x, int64_t n, float lo, float hi, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = T(uniform(seed, i, lo, hi));
  }
}

__global__ void fill_ints_kernel(int* x, int64_t n, int below, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    x[i] = int(mix(seed * 0x9E3779B97F4A7C15ULL + uint64_t(i)) % uint64_t(below));
  }
}

constexpr unsigned kBlocks = 4096;
constexpr unsigned kThreads = 256;

}  // namespace

void fill_uniform(float* x, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream) {
  TESSEL_LAUNCH(fill_kernel<float>, kBlocks, kThreads, 0, stream)(x, n, lo, hi, seed);
  TESSEL_CUDA_CHECK_LAUNCH("fill_kernel");
}

void fill_uniform(kernels::cuda::bf16* x, int64_t n, float lo, float hi, uint64_t seed,
                  cudaStream_t stream) {
  TESSEL_LAUNCH(fill_kernel<kernels::cuda::bf16>, kBlocks, kThreads, 0, stream)(x, n, lo, hi, seed);
  TESSEL_CUDA_CHECK_LAUNCH("fill_kernel");
}

void fill_ints(int* x, int64_t n, int below, uint64_t seed, cudaStream_t stream) {
  TESSEL_LAUNCH(fill_ints_kernel, kBlocks, kThreads, 0, stream)(x, n, below, seed);
  TESSEL_CUDA_CHECK_LAUNCH("fill_ints_kernel");
}

}  // namespace tessel::bench
