// One model chunk (a run of GPT-2 blocks, with the embeddings on virtual stage 0 and the head on
// the last) on one compute device: what the stage runtime asks of a chunk, whichever backend
// computes it. The CPU backend (gpt_chunk.h) keeps everything in host memory in fp32; the CUDA
// backend (cuda/gpt_chunk_cuda.h) keeps parameters, gradients, optimizer state and the
// activation stash on the GPU (bf16 activations and matmul weights, fp32 master weights,
// gradients and moments).
//
// The exchange with the rest of the runtime is in host memory and fp32 whatever the backend: the
// activations and gradients a chunk sends and receives (ChunkActivations::input and ::grad, and
// output()), the gradient buckets the data-parallel all-reduce sums, and the state a checkpoint
// saves. So ranks of either backend can be mixed in one job and checkpoints are interchangeable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "noderuntime/stage/gpt_config.h"
#include "noderuntime/stage/parameter_layout.h"
#include "noderuntime/transport/message_header.h"

struct CUstream_st;  // what a cudaStream_t points to (no CUDA header here)

namespace tessel::stage {

enum class Device { kCpu, kCuda };

std::string to_string(Device device);

// What a backend keeps of one micro-batch beyond the host buffers (the CUDA stash).
struct DeviceActivations {
  virtual ~DeviceActivations() = default;
};

// What one micro-batch leaves in a chunk between its Forward and its Backward.
struct ChunkActivations {
  std::vector<float> input;   // (B, T, C) the received activation (the CPU backend's embedding
                              // output too)
  std::vector<float> grad;    // (B, T, C) gradient of the chunk's output; the backward turns it,
                              // in place, into the gradient of `input` (sent upstream)
  std::vector<float> blocks;  // the CPU backend's saved activations
  std::unique_ptr<DeviceActivations> device;  // another backend's
  // The CPU backend's bf16 exchange (wire_dtype() bf16): what arrives (the activation, the output
  // gradient) and what leaves (the output, the input gradient), each (B, T, C).
  std::vector<uint16_t> wire_input, wire_grad, wire_output, wire_input_grad;
};

// A chunk's parameters and AdamW moments in host memory, each in the chunk's ParameterLayout.
struct HostState {
  float* params = nullptr;
  float* m = nullptr;
  float* v = nullptr;
};
struct ConstHostState {
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
};

class ChunkModel {
 public:
  // Throws ConfigError for a batch below 1 or a chunk without layers.
  ChunkModel(const GptConfig& config, const ChunkSpec& spec, int batch);
  virtual ~ChunkModel() = default;
  ChunkModel(const ChunkModel&) = delete;
  ChunkModel& operator=(const ChunkModel&) = delete;

  virtual Device device() const = 0;
  const GptConfig& config() const { return config_; }
  const ChunkSpec& spec() const { return layout_.spec(); }
  const ParameterLayout& layout() const { return layout_; }
  int batch() const { return B_; }
  int64_t activation_floats() const { return int64_t{B_} * T_ * C_; }  // (B, T, C)
  // The type of what crosses between stages: bf16 for a bf16 job, fp32 otherwise.
  transport::DType wire_dtype() const;

  // Parameters from the seed (parameter_init.h), moments zero.
  virtual void initialize(uint64_t seed) = 0;

  virtual ChunkActivations new_activations() const = 0;

  // Forward of one micro-batch. tokens (B, T) feed the embedding chunk (ignored otherwise, where
  // act.input holds the received activation); targets (B, T) and dloss (the weight of one
  // position in the mean loss) are used by the head chunk, which also back-propagates the head
  // into its output gradient (see gpt_chunk.h) and returns the sum of the B*T losses (0
  // elsewhere).
  virtual double forward(ChunkActivations& act, const int* tokens, const int* targets,
                         float dloss) = 0;
  // The chunk's output for that micro-batch, (B, T, C) in host memory: what goes to the next
  // stage. Valid once host_ready(act) (below), until the slot is reused.
  virtual const float* output(const ChunkActivations& act) const = 0;
  // What a compute leaves in host memory for the send that follows it (output() after a
  // forward, act.grad after a backward) may still be on its way from the device: host_ready()
  // says whether it has arrived (never blocks), wait_host() waits for it. The copy needs nothing
  // but work already queued, so waiting for it cannot deadlock. The CPU's is there at once.
  virtual bool host_ready(ChunkActivations&) { return true; }
  virtual void wait_host(ChunkActivations&) {}
  // The buffer a micro-batch's activation (gradient false) or output gradient (true) is received
  // into, and what is sent after its forward (the output) or its backward (the input gradient,
  // once host_ready): (B, T, C) in wire_dtype().
  virtual std::span<std::byte> receive_buffer(ChunkActivations& act, bool gradient) = 0;
  virtual std::span<const std::byte> send_payload(ChunkActivations& act, bool gradient) = 0;
  // Backward of one micro-batch from its output gradient (act.grad, or the head's own), blocks
  // in reverse; on_block_done(i) runs as soon as local block i's parameter gradients are final
  // for this micro-batch (gradients_for_reduce may then be called for its bucket). The
  // embedding chunk ends with the embedding backward (tokens needed); elsewhere act.grad ends as
  // the gradient of act.input.
  virtual void backward(ChunkActivations& act, const int* tokens,
                        const std::function<void(int)>& on_block_done) = 0;

  // Gradients accumulate (+=) over a step's micro-batches; the runtime zeroes them per step.
  virtual void zero_gradients() = 0;
  // Bucket `bucket` (layout().buckets()) of the gradients on its way to the all-reduce in host
  // memory, once they are final for the step: start_gradients_to_host() starts the copy (it may
  // still run when it returns), gradients_on_host() says whether it is done (never blocks),
  // wait_gradients_on_host() waits; host_gradients() is the host buffer the all-reduce sums
  // into, and gradients_reduced() says the sums are there (a backend that computes elsewhere
  // takes them back). The CPU's gradients are in host memory already.
  virtual void start_gradients_to_host(int) {}
  virtual bool gradients_on_host(int) { return true; }
  virtual void wait_gradients_on_host(int) {}
  virtual std::span<float> host_gradients(int bucket) = 0;
  virtual void gradients_reduced(int bucket) = 0;
  // Bucket `bucket` of the gradients where a backend on a device keeps them, for a collective
  // that sums them in place there (NCCL, gradient_sync.h): `size` fp32 elements at `data` in
  // device memory, final once the work queued on `stream` so far has run (the collective is
  // ordered after it); the caller waits for the collective on the host before it queues
  // anything that reads the gradients (the optimizer step). data is null on a backend without
  // a device (the CPU's).
  struct DeviceGradients {
    float* data = nullptr;
    size_t size = 0;
    CUstream_st* stream = nullptr;
  };
  virtual DeviceGradients device_gradients(int) { return {}; }
  // The three above at once: the bucket's final gradients in host memory.
  std::span<float> gradients_for_reduce(int bucket) {
    start_gradients_to_host(bucket);
    wait_gradients_on_host(bucket);
    return host_gradients(bucket);
  }
  // Sum of squared gradients over the tensors counted in the global norm
  // (ParameterTensor::in_norm).
  virtual double gradient_sum_of_squares() = 0;
  // One AdamW update of every parameter (weight decay on the tensors marked decay); step counts
  // from 1, grad_scale is the clipping factor.
  virtual void adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                          float grad_scale) = 0;

  // The parameters and moments in host memory, current (for a checkpoint).
  virtual ConstHostState state_for_reading() const = 0;
  // Host buffers to write a state into (a checkpoint being loaded); state_written() then makes
  // it the chunk's state.
  virtual HostState state_for_writing() = 0;
  virtual void state_written() = 0;

 protected:
  const GptConfig config_;
  const ParameterLayout layout_;
  const int B_, T_, C_, NH_, F_, V_;
};

// Makes the chunk of one virtual stage: the CPU backend, or another one a process links.
using ChunkFactory =
    std::function<std::unique_ptr<ChunkModel>(const GptConfig&, const ChunkSpec&, int batch)>;

ChunkFactory cpu_chunk_factory();

}  // namespace tessel::stage
