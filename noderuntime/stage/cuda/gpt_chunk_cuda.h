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
// One CudaDevice serves all chunks of a process: a compute stream with its op Context, where
// every op runs in order, and a copy stream for what goes to the host (an activation or input
// gradient to send, a gradient bucket to all-reduce), ordered after its compute by an event, so
// the compute stream goes on while it copies and the host waits for nothing until it needs the
// data (ChunkModel::host_ready, gradients_on_host). Data from the host (a received activation or
// gradient, the reduced buckets) is copied on the compute stream, in order before its use.
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
  const kernels::cuda::Stream& copy_stream() const { return copy_stream_; }
  void synchronize() const { stream_.synchronize(); }

 private:
  kernels::cuda::Stream stream_;
  kernels::cuda::Stream copy_stream_;
  kernels::cuda::Context context_;
};

// Chunks on `device`. Throws ConfigError for a model the CUDA kernels do not support (a head
// size other than 64 or 128).
ChunkFactory cuda_chunk_factory(std::shared_ptr<CudaDevice> device);

}  // namespace tessel::stage
