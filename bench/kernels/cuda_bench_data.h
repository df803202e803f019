// Device-side random inputs for the CUDA kernel benchmark: never zeros (which can run faster than
// real data), generated on the GPU so that filling gigabytes takes milliseconds.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/bf16.h"

namespace tessel::bench {

// Uniform values in [lo, hi) from a hash of (seed, index).
void fill_uniform(float* x, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream);
void fill_uniform(kernels::cuda::bf16* x, int64_t n, float lo, float hi, uint64_t seed,
                  cudaStream_t stream);
// Integers in [0, below).
void fill_ints(int* x, int64_t n, int below, uint64_t seed, cudaStream_t stream);

}  // namespace tessel::bench
