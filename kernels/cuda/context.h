// What every CUDA op needs besides its arguments: the stream it runs on, a cuBLASLt handle with
// its workspace and the algorithms chosen per GEMM shape, and scratch memory for temporaries
// (partial sums, sort buffers, attention's fp32 dq). Every op in kernels/cuda takes the CPU
// twin's arguments followed by a Context&.
//
// Ops on one Context run in order on its stream and share its workspace and scratch, so a
// Context serves one stream at a time: give each concurrently used compute stream its own.
// Destroy a Context before the stream it runs on.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

namespace tessel::kernels::cuda {

class Context {
 public:
  // 32 MiB: what cuBLASLt's Hopper kernels ask for at most.
  static constexpr size_t kDefaultBlasWorkspaceBytes = size_t(32) << 20;

  // Uses the current device. `stream` is not owned; nullptr is the legacy default stream.
  explicit Context(cudaStream_t stream, size_t blas_workspace_bytes = kDefaultBlasWorkspaceBytes);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return stream_; }
  int multiprocessors() const { return multiprocessors_; }
  size_t max_shared_memory_per_block() const { return max_shared_memory_per_block_; }

  cublasLtHandle_t blas() const { return blas_; }
  void* blas_workspace() const { return blas_workspace_; }
  size_t blas_workspace_bytes() const { return blas_workspace_bytes_; }

  // At least `bytes` of device memory (256-byte aligned), valid for the work an op queues on
  // stream() until the next scratch() call. Grows, stream-ordered, and never shrinks.
  void* scratch(size_t bytes);

  // cuBLASLt's heuristic choice per GEMM problem (shapes, types, epilogue, alignments), so the
  // heuristic runs once per shape rather than once per call.
  using GemmKey = std::array<int64_t, 16>;
  std::map<GemmKey, cublasLtMatmulAlgo_t>& gemm_algorithms() { return gemm_algorithms_; }

 private:
  cudaStream_t stream_;
  int multiprocessors_ = 0;
  size_t max_shared_memory_per_block_ = 0;
  cublasLtHandle_t blas_ = nullptr;
  void* blas_workspace_ = nullptr;
  size_t blas_workspace_bytes_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::map<GemmKey, cublasLtMatmulAlgo_t> gemm_algorithms_;
};

}  // namespace tessel::kernels::cuda
