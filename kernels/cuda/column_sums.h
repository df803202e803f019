// The second pass of the deterministic column reductions (internal to kernels/cuda): a first
// kernel writes partial column sums for fixed blocks of rows, and this adds them up in block order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tessel::kernels::cuda::detail {

// out[c] += sum over p < parts of partial[p * stride + c], for c < columns, summed in the same
// fixed order on every call.
void add_column_sums(float* out, const float* partial, int parts, int64_t stride, int columns,
                     cudaStream_t stream);

}  // namespace tessel::kernels::cuda::detail
