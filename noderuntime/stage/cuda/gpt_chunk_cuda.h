// The CUDA backend of a model chunk (chunk_model.h): the CPU backend's maths (gpt_chunk.h) over
// the CUDA twins of its kernels (kernels/cuda), in the mixed precision of the GPU:
// - weights: fp32 master copies, updated by the fused AdamW, which also writes the bf16 copy
//   the forward and backward read;
// - gradients and AdamW moments: fp32;
// - activations, the stash of a micro-batch kept for its backward: bf16 (layernorm statistics
//   and attention's log-sum-exp in fp32); the fused forms residual + layernorm and matmul + GELU
//   that tests/cuda/gpt_step_test.cpp checks against the CPU ops.
// Everything stays on the GPU during a step. What leaves it: the activation sent to the next
// stage and the input gradient sent to the previous one (bf16 copied down and widened to the
// fp32 of the wire), the loss sum of each micro-batch on the head chunk, the gradient buckets
// the data-parallel all-reduce sums over the TCP transport, the squared-gradient sum, and the
// state a checkpoint saves. Host buffers on that path are pinned.
//
// One CudaDevice (one compute stream and its op Context) serves all chunks of a process; every
// op runs in order on that stream, and the host waits for it only where a result must be on the
// host (the copies above).
#pragma once

#include <memory>

#include "kernels/cuda/context.h"
#include "kernels/cuda/stream.h"
#include "noderuntime/stage/chunk_model.h"

namespace tessel::stage {

class CudaDevice {
 public:
  // On the current device (device 0 unless the process chose another). Throws
  // kernels::cuda::CudaError when no GPU is usable.
  CudaDevice();
  kernels::cuda::Context& context() { return context_; }
  cudaStream_t stream() const { return stream_.get(); }
  void synchronize() const { stream_.synchronize(); }

 private:
  kernels::cuda::Stream stream_;
  kernels::cuda::Context context_;
};

// Chunks on `device`. Throws ConfigError for a model the CUDA kernels do not support (a head
// size other than 64 or 128).
ChunkFactory cuda_chunk_factory(std::shared_ptr<CudaDevice> device);

}  // namespace tessel::stage
