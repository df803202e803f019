#include "kernels/cuda/context.h"

#include "kernels/cuda/check.h"

namespace tessel::kernels::cuda {

Context::Context(cudaStream_t stream, size_t blas_workspace_bytes)
    : stream_(stream), blas_workspace_bytes_(blas_workspace_bytes) {
  int device = 0;
  TESSEL_CUDA_CHECK(cudaGetDevice(&device));
  TESSEL_CUDA_CHECK(
      cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device));
  int shared = 0;
  TESSEL_CUDA_CHECK(
      cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  max_shared_memory_per_block_ = size_t(shared);
  TESSEL_CUBLAS_CHECK(cublasLtCreate(&blas_));
  if (blas_workspace_bytes_ > 0) {
    TESSEL_CUDA_CHECK(cudaMalloc(&blas_workspace_, blas_workspace_bytes_));
  }
}

Context::~Context() {
  // cudaFree waits for the device, so no queued op still reads the workspace or scratch.
  cudaFree(scratch_);
  cudaFree(blas_workspace_);
  cublasLtDestroy(blas_);
}

void* Context::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  constexpr size_t kGranule = size_t(1) << 20;
  const size_t grown = (bytes + kGranule - 1) / kGranule * kGranule;
  // Stream-ordered: work already queued keeps the old block until it is done with it.
  if (scratch_ != nullptr) TESSEL_CUDA_CHECK(cudaFreeAsync(scratch_, stream_));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  TESSEL_CUDA_CHECK(cudaMallocAsync(&scratch_, grown, stream_));
  scratch_bytes_ = grown;
  return scratch_;
}

}  // namespace tessel::kernels::cuda
