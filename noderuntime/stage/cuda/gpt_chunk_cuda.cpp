#include "noderuntime/stage/cuda/gpt_chunk_cuda.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/adamw.h"
#include "kernels/cuda/arena.h"
#include "kernels/cuda/arena_layout.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/softmax_cross_entropy.h"
#include "kernels/cuda/vector_ops.h"
#include "noderuntime/stage/parameter_init.h"

namespace tessel::stage {

namespace k = kernels::cuda;
using k::bf16;

CudaDevice::CudaDevice() : stream_(), copy_stream_(), context_(stream_.get()) {}

namespace {

// Page-locked host memory: copies from and to it are true asynchronous DMA.
template <class T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(int64_t count) : count_(count) {
    TESSEL_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), sizeof(T) * size_t(count)));
  }
  ~PinnedBuffer() {
    if (data_) cudaFreeHost(data_);
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept : data_(other.data_), count_(other.count_) {
    other.data_ = nullptr;
  }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  T* get() const { return data_; }
  int64_t size() const { return count_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  T* data_ = nullptr;
  int64_t count_ = 0;
};

// Sizes a set of buffers before the one cudaMalloc that holds them: the same carve function
// runs over a Measure, then over the DeviceArena, and gets the same offsets.
class Measure {
 public:
  template <class T>
  T* allocate(int64_t count, const char* what) {
    layout_.reserve(size_t(count) * sizeof(T), what);
    return nullptr;
  }
  size_t bytes() const { return layout_.used(); }

 private:
  k::ArenaLayout layout_{SIZE_MAX};
};

template <class Carve>
std::unique_ptr<k::DeviceArena> carved_arena(Carve&& carve) {
  Measure measure;
  carve(measure);
  auto arena = std::make_unique<k::DeviceArena>(measure.bytes());
  carve(*arena);
  return arena;
}

// bf16 to fp32 on the host: the bf16 bits are the top half of the float's.
void widen_bf16(float* out, const bf16* in, int64_t n) {
  const auto* bits = reinterpret_cast<const uint16_t*>(in);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t word = uint32_t{bits[i]} << 16;
    std::memcpy(out + i, &word, sizeof word);
  }
}

// The saved activations of one block for one micro-batch.
struct BlockStash {
  bf16 *ln1, *qkv, *atty, *residual2, *ln2, *fch, *fch_gelu, *residual3;
  float *ln1_mean, *ln1_rstd, *lse, *ln2_mean, *ln2_rstd;
};

// One micro-batch on the GPU: its input (the embedding output or the received activation), its
// output gradient (dres, flowing down the residual stream in place), its tokens and targets,
// every block's stash, and the host copy of its output for the send.
struct CudaActivations final : DeviceActivations {
  std::unique_ptr<k::DeviceArena> arena;
  bf16* input = nullptr;
  bf16* grad = nullptr;
  int* tokens = nullptr;
  int* targets = nullptr;
  std::vector<BlockStash> blocks;
  std::vector<float> host_output;  // (B, T, C), filled by a non-head chunk's forward
  // What leaves after a forward (the output) and a backward (the input gradient): bf16 copied
  // into pinned memory on the copy stream; sent as it is when the wire is bf16, else widened into
  // host_output / the ChunkActivations' grad once the copy is done.
  PinnedBuffer<bf16> send_output, send_grad;
  k::Event computed, copied;
  bool copy_pending = false;
  const PinnedBuffer<bf16>* widen_from = nullptr;
  std::vector<float>* widen_into = nullptr;
  // What arrives when the wire is bf16 (the activation, the output gradient), copied to the
  // device as it is; each is received into again only once its last upload is done.
  PinnedBuffer<bf16> receive_input, receive_grad;
  k::Event input_uploaded, grad_uploaded;
};

class GptChunkCuda final : public ChunkModel {
 public:
  GptChunkCuda(const GptConfig& config, const ChunkSpec& spec, int batch,
               std::shared_ptr<CudaDevice> device);

  Device device() const override { return Device::kCuda; }
  void initialize(uint64_t seed) override;
  ChunkActivations new_activations() const override;
  double forward(ChunkActivations& act, const int* tokens, const int* targets,
                 float dloss) override;
  const float* output(const ChunkActivations& act) const override;
  void backward(ChunkActivations& act, const int* tokens,
                const std::function<void(int)>& on_block_done) override;
  bool host_ready(ChunkActivations& act) override;
  void wait_host(ChunkActivations& act) override;
  std::span<std::byte> receive_buffer(ChunkActivations& act, bool gradient) override;
  std::span<const std::byte> send_payload(ChunkActivations& act, bool gradient) override;
  void zero_gradients() override;
  void start_gradients_to_host(int bucket) override;
  bool gradients_on_host(int bucket) override { return bucket_copied_.at(bucket).done(); }
  void wait_gradients_on_host(int bucket) override { bucket_copied_.at(bucket).synchronize(); }
  std::span<float> host_gradients(int bucket) override;
  void gradients_reduced(int bucket) override;
  DeviceGradients device_gradients(int bucket) override {
    const GradientBucket& b = layout_.buckets().at(bucket);
    return {grads_ + b.offset, static_cast<size_t>(b.size), stream()};
  }
  double gradient_sum_of_squares() override;
  void adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                  float grad_scale) override;
  ConstHostState state_for_reading() const override;
  HostState state_for_writing() override;
  void state_written() override;

 private:
  // A run of adjacent tensors that share a property (decay, or counted in the norm).
  struct Span {
    int64_t offset, size;
    bool flag;
  };

  k::Context& ctx() const { return device_->context(); }
  cudaStream_t stream() const { return device_->stream(); }
  void zero_bf16(bf16* x, int64_t n) const {
    TESSEL_CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(bf16) * size_t(n), stream()));
  }
  // What arrived for a micro-batch (the activation, or the output gradient) into its bf16
  // device buffer: as it is from the wire's bf16, or through the fp32 staging buffer.
  void upload_received(CudaActivations& dev, ChunkActivations& act, bool gradient);
  // Starts the copy of a bf16 device buffer (B, T, C) to `to` on the host, after the work queued
  // so far; with an fp32 wire, host_ready()/wait_host() widen it into `widen_into` then.
  void start_download(CudaActivations& dev, const bf16* in, PinnedBuffer<bf16>& to,
                      std::vector<float>& widen_into);
  bool bf16_wire() const { return wire_dtype() == transport::DType::kBF16; }
  double forward_head(CudaActivations& act, const bf16* x, float dloss);
  // The state's three fp32 device buffers into the host mirrors (allocated on first use).
  void ensure_state_mirrors() const;

  std::shared_ptr<CudaDevice> device_;
  std::vector<BlockOffsets> blocks_;
  std::vector<Span> decay_spans_, norm_spans_;
  int64_t head_weight_ = 0, lnfw_ = 0, lnfb_ = 0, wte_ = 0, wpe_ = 0;

  // Parameters, their bf16 copy, gradients, moments: one allocation.
  std::unique_ptr<k::DeviceArena> state_;
  float *params_ = nullptr, *grads_ = nullptr, *m_ = nullptr, *v_ = nullptr;
  bf16* params_bf16_ = nullptr;
  // Scratch shared by the micro-batches (one runs at a time on the stream).
  std::unique_ptr<k::DeviceArena> scratch_;
  bf16 *proj_ = nullptr, *dfch_gelu_ = nullptr, *dfch_ = nullptr, *dln_ = nullptr,
       *datty_ = nullptr, *dqkv_ = nullptr;
  float* staging_ = nullptr;  // (B, T, C) fp32 on its way in
  bf16 *lnf_ = nullptr, *logits_ = nullptr, *dlnf_ = nullptr;
  float *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *losses_ = nullptr;
  // Host side.
  PinnedBuffer<float> host_losses_;  // (B, T)
  k::Event losses_copied_;
  PinnedBuffer<float> host_grads_;       // the gradient buckets, on demand
  std::vector<k::Event> bucket_copied_;  // per bucket: its copy into host_grads_
  k::Event grads_final_;                 // recorded on the compute stream for such a copy
  mutable PinnedBuffer<float> host_params_, host_m_, host_v_;  // checkpoints, on demand
};

GptChunkCuda::GptChunkCuda(const GptConfig& config, const ChunkSpec& spec, int batch,
                           std::shared_ptr<CudaDevice> device)
    : ChunkModel(config, spec, batch), device_(std::move(device)) {
  const int head_size = C_ / NH_;
  if (head_size != 64 && head_size != 128) {
    throw ConfigError("the CUDA backend's attention supports heads of 64 or 128 channels; hidden " +
                      std::to_string(C_) + " over " + std::to_string(NH_) + " heads is " +
                      std::to_string(head_size) + " (use --device cpu, or another head count)");
  }
  for (int i = 0; i < spec.num_layers; ++i) blocks_.push_back(layout_.block_offsets(i));
  if (spec.embedding) {
    wte_ = layout_.offset("wte.weight");
    wpe_ = layout_.offset("wpe.weight");
  }
  if (spec.head) {
    head_weight_ = layout_.offset(spec.head_copy() ? "lm_head.weight" : "wte.weight");
    lnfw_ = layout_.offset("ln_f.weight");
    lnfb_ = layout_.offset("ln_f.bias");
  }
  for (const ParameterTensor& t : layout_.tensors()) {
    for (auto [spans, flag] : {std::pair{&decay_spans_, t.decay}, {&norm_spans_, t.in_norm}}) {
      if (!spans->empty() && spans->back().flag == flag &&
          spans->back().offset + spans->back().size == t.offset) {
        spans->back().size += t.size;
      } else {
        spans->push_back({t.offset, t.size, flag});
      }
    }
  }

  const int64_t N = layout_.total(), BT = int64_t{B_} * T_, BTC = BT * C_, BTF = BT * F_;
  state_ = carved_arena([&](auto& a) {
    params_ = a.template allocate<float>(N, "parameters");
    params_bf16_ = a.template allocate<bf16>(N, "bf16 parameters");
    grads_ = a.template allocate<float>(N, "gradients");
    m_ = a.template allocate<float>(N, "first moments");
    v_ = a.template allocate<float>(N, "second moments");
  });
  scratch_ = carved_arena([&](auto& a) {
    proj_ = a.template allocate<bf16>(BTC, "projection");
    dfch_gelu_ = a.template allocate<bf16>(BTF, "dfch_gelu");
    dfch_ = a.template allocate<bf16>(BTF, "dfch");
    dln_ = a.template allocate<bf16>(BTC, "dln");
    datty_ = a.template allocate<bf16>(BTC, "datty");
    dqkv_ = a.template allocate<bf16>(3 * BTC, "dqkv");
    staging_ = a.template allocate<float>(BTC, "staging");
    if (spec.head) {
      lnf_ = a.template allocate<bf16>(BTC, "ln_f output");
      lnf_mean_ = a.template allocate<float>(BT, "ln_f mean");
      lnf_rstd_ = a.template allocate<float>(BT, "ln_f rstd");
      logits_ = a.template allocate<bf16>(BT * V_, "logits");
      dlnf_ = a.template allocate<bf16>(BTC, "dlnf");
      losses_ = a.template allocate<float>(BT, "losses");
    }
  });
  if (spec.head) host_losses_ = PinnedBuffer<float>(BT);
  bucket_copied_.resize(layout_.buckets().size());
}

void GptChunkCuda::initialize(uint64_t seed) {
  const int64_t N = layout_.total();
  std::vector<float> host(static_cast<size_t>(N));
  initialize_parameters(layout_, seed, host.data());
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(params_, host.data(), sizeof(float) * host.size(),
                                    cudaMemcpyHostToDevice, stream()));
  k::copy_to_bf16(params_bf16_, params_, N, ctx());
  k::zero(m_, N, ctx());
  k::zero(v_, N, ctx());
  k::zero(grads_, N, ctx());
  device_->synchronize();  // `host` goes out of scope
}

ChunkActivations GptChunkCuda::new_activations() const {
  ChunkActivations act;
  act.input.resize(activation_floats());
  act.grad.resize(activation_floats());
  auto dev = std::make_unique<CudaActivations>();
  const int64_t BT = int64_t{B_} * T_, BTC = BT * C_, BTF = BT * F_;
  const int layers = spec().num_layers;
  dev->blocks.resize(layers);
  dev->arena = carved_arena([&](auto& a) {
    dev->input = a.template allocate<bf16>(BTC, "input");
    dev->grad = a.template allocate<bf16>(BTC, "output gradient");
    dev->tokens = a.template allocate<int>(BT, "tokens");
    dev->targets = a.template allocate<int>(BT, "targets");
    for (BlockStash& s : dev->blocks) {
      s.ln1 = a.template allocate<bf16>(BTC, "ln_1");
      s.qkv = a.template allocate<bf16>(3 * BTC, "qkv");
      s.atty = a.template allocate<bf16>(BTC, "attention output");
      s.residual2 = a.template allocate<bf16>(BTC, "residual 2");
      s.ln2 = a.template allocate<bf16>(BTC, "ln_2");
      s.fch = a.template allocate<bf16>(BTF, "fc");
      s.fch_gelu = a.template allocate<bf16>(BTF, "fc gelu");
      s.residual3 = a.template allocate<bf16>(BTC, "residual 3");
      s.ln1_mean = a.template allocate<float>(BT, "ln_1 mean");
      s.ln1_rstd = a.template allocate<float>(BT, "ln_1 rstd");
      s.lse = a.template allocate<float>(BT * NH_, "attention lse");
      s.ln2_mean = a.template allocate<float>(BT, "ln_2 mean");
      s.ln2_rstd = a.template allocate<float>(BT, "ln_2 rstd");
    }
  });
  if (!spec().head && !bf16_wire()) dev->host_output.resize(activation_floats());
  if (!spec().head) dev->send_output = PinnedBuffer<bf16>(BTC);
  if (!spec().embedding) dev->send_grad = PinnedBuffer<bf16>(BTC);
  if (bf16_wire() && !spec().embedding) dev->receive_input = PinnedBuffer<bf16>(BTC);
  if (bf16_wire() && !spec().head) dev->receive_grad = PinnedBuffer<bf16>(BTC);
  act.device = std::move(dev);
  return act;
}

void GptChunkCuda::upload_received(CudaActivations& dev, ChunkActivations& act, bool gradient) {
  bf16* out = gradient ? dev.grad : dev.input;
  if (bf16_wire()) {
    const PinnedBuffer<bf16>& from = gradient ? dev.receive_grad : dev.receive_input;
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(out, from.get(), sizeof(bf16) * size_t(activation_floats()),
                                      cudaMemcpyHostToDevice, stream()));
    (gradient ? dev.grad_uploaded : dev.input_uploaded).record(stream());
    return;
  }
  const std::vector<float>& host = gradient ? act.grad : act.input;
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(staging_, host.data(), sizeof(float) * host.size(),
                                    cudaMemcpyHostToDevice, stream()));
  k::copy_to_bf16(out, staging_, activation_floats(), ctx());
}

std::span<std::byte> GptChunkCuda::receive_buffer(ChunkActivations& act, bool gradient) {
  auto& dev = static_cast<CudaActivations&>(*act.device);
  if (!bf16_wire()) {
    return std::as_writable_bytes(std::span(gradient ? act.grad : act.input));
  }
  (gradient ? dev.grad_uploaded : dev.input_uploaded).synchronize();
  const PinnedBuffer<bf16>& into = gradient ? dev.receive_grad : dev.receive_input;
  return {reinterpret_cast<std::byte*>(into.get()), sizeof(bf16) * size_t(activation_floats())};
}

std::span<const std::byte> GptChunkCuda::send_payload(ChunkActivations& act, bool gradient) {
  auto& dev = static_cast<CudaActivations&>(*act.device);
  if (dev.copy_pending) throw std::logic_error("send_payload() before host_ready()");
  if (!bf16_wire()) {
    return std::as_bytes(std::span(gradient ? act.grad : dev.host_output));
  }
  const PinnedBuffer<bf16>& from = gradient ? dev.send_grad : dev.send_output;
  return {reinterpret_cast<const std::byte*>(from.get()),
          sizeof(bf16) * size_t(activation_floats())};
}

void GptChunkCuda::start_download(CudaActivations& dev, const bf16* in, PinnedBuffer<bf16>& to,
                                  std::vector<float>& widen_into) {
  const k::Stream& copies = device_->copy_stream();
  dev.computed.record(stream());
  copies.wait(dev.computed);
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(to.get(), in, sizeof(bf16) * size_t(activation_floats()),
                                    cudaMemcpyDeviceToHost, copies.get()));
  dev.copied.record(copies.get());
  dev.copy_pending = true;
  dev.widen_from = bf16_wire() ? nullptr : &to;
  dev.widen_into = bf16_wire() ? nullptr : &widen_into;
}

bool GptChunkCuda::host_ready(ChunkActivations& act) {
  auto& dev = static_cast<CudaActivations&>(*act.device);
  if (!dev.copy_pending) return true;
  if (!dev.copied.done()) return false;
  if (dev.widen_into != nullptr) {
    widen_bf16(dev.widen_into->data(), dev.widen_from->get(), activation_floats());
  }
  dev.copy_pending = false;
  return true;
}

void GptChunkCuda::wait_host(ChunkActivations& act) {
  auto& dev = static_cast<CudaActivations&>(*act.device);
  if (!dev.copy_pending) return;
  dev.copied.synchronize();
  host_ready(act);
}

double GptChunkCuda::forward(ChunkActivations& act, const int* tokens, const int* targets,
                             float dloss) {
  auto& dev = static_cast<CudaActivations&>(*act.device);
  const int64_t BT = int64_t{B_} * T_;
  const bf16* w = params_bf16_;
  if (spec().embedding) {
    if (tokens == nullptr) throw std::invalid_argument("GptChunkCuda::forward: tokens is null");
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(dev.tokens, tokens, sizeof(int) * size_t(BT),
                                      cudaMemcpyHostToDevice, stream()));
    k::encoder_forward(dev.input, dev.tokens, w + wte_, w + wpe_, B_, T_, C_, V_, ctx());
  } else {
    upload_received(dev, act, false);
  }
  if (spec().head) {
    if (targets == nullptr) throw std::invalid_argument("GptChunkCuda::forward: targets is null");
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(dev.targets, targets, sizeof(int) * size_t(BT),
                                      cudaMemcpyHostToDevice, stream()));
  }
  const int layers = spec().num_layers;
  const bf16* residual = dev.input;
  for (int i = 0; i < layers; ++i) {
    const BlockOffsets& b = blocks_[i];
    BlockStash& s = dev.blocks[i];
    // Block i > 0 got its ln_1 from the previous block's fused residual + layernorm.
    if (i == 0) {
      k::layernorm_forward(s.ln1, s.ln1_mean, s.ln1_rstd, residual, w + b.ln1w, w + b.ln1b, B_, T_,
                           C_, ctx());
    }
    k::matmul_forward(s.qkv, s.ln1, w + b.qkvw, w + b.qkvb, B_, T_, C_, 3 * C_, ctx());
    k::attention_forward(s.atty, s.lse, s.qkv, B_, T_, C_, NH_, ctx());
    k::matmul_forward(proj_, s.atty, w + b.attprojw, w + b.attprojb, B_, T_, C_, C_, ctx());
    k::residual_layernorm_forward(s.residual2, s.ln2, s.ln2_mean, s.ln2_rstd, residual, proj_,
                                  w + b.ln2w, w + b.ln2b, B_, T_, C_, ctx());
    k::matmul_gelu_forward(s.fch_gelu, s.fch, s.ln2, w + b.fcw, w + b.fcb, B_, T_, C_, F_, ctx());
    k::matmul_forward(proj_, s.fch_gelu, w + b.fcprojw, w + b.fcprojb, B_, T_, F_, C_, ctx());
    if (i + 1 < layers) {
      const BlockOffsets& next = blocks_[i + 1];
      BlockStash& n = dev.blocks[i + 1];
      k::residual_layernorm_forward(s.residual3, n.ln1, n.ln1_mean, n.ln1_rstd, s.residual2, proj_,
                                    w + next.ln1w, w + next.ln1b, B_, T_, C_, ctx());
    } else if (spec().head) {
      k::residual_layernorm_forward(s.residual3, lnf_, lnf_mean_, lnf_rstd_, s.residual2, proj_,
                                    w + lnfw_, w + lnfb_, B_, T_, C_, ctx());
    } else {
      k::residual_forward(s.residual3, s.residual2, proj_, int64_t{B_} * T_ * C_, ctx());
    }
    residual = s.residual3;
  }
  if (spec().head) return forward_head(dev, residual, dloss);
  start_download(dev, residual, dev.send_output, dev.host_output);
  return 0.0;
}

// The logits become their gradient in place, and the head is back-propagated into dev.grad.
double GptChunkCuda::forward_head(CudaActivations& dev, const bf16* x, float dloss) {
  const int64_t BT = int64_t{B_} * T_;
  const bf16* w = params_bf16_;
  k::matmul_forward(logits_, lnf_, w + head_weight_, nullptr, B_, T_, C_, V_, ctx());
  k::softmax_cross_entropy(losses_, logits_, logits_, dev.targets, dloss, B_, T_, V_,
                           k::IgnoreTarget::kNone, ctx());
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(host_losses_.get(), losses_, sizeof(float) * size_t(BT),
                                    cudaMemcpyDeviceToHost, stream()));
  losses_copied_.record(stream());
  zero_bf16(dlnf_, activation_floats());
  k::matmul_backward(dlnf_, grads_ + head_weight_, nullptr, logits_, lnf_, w + head_weight_, B_, T_,
                     C_, V_, ctx());
  zero_bf16(dev.grad, activation_floats());
  k::layernorm_backward(dev.grad, grads_ + lnfw_, grads_ + lnfb_, dlnf_, x, w + lnfw_, lnf_mean_,
                        lnf_rstd_, B_, T_, C_, ctx());
  // The losses were copied before the head's backward was queued: wait for them only, so the
  // GPU goes on with the backward while the host adds them up.
  losses_copied_.synchronize();
  double sum = 0;
  for (int64_t i = 0; i < BT; ++i) sum += host_losses_.get()[i];
  return sum;
}

const float* GptChunkCuda::output(const ChunkActivations& act) const {
  const auto& dev = static_cast<const CudaActivations&>(*act.device);
  if (spec().head) throw std::logic_error("the head chunk sends no activation");
  if (dev.copy_pending) throw std::logic_error("output() before host_ready()");
  if (bf16_wire()) throw std::logic_error("the output leaves in bf16: see send_payload()");
  return dev.host_output.data();
}

void GptChunkCuda::backward(ChunkActivations& act, const int*,
                            const std::function<void(int)>& on_block_done) {
  auto& dev = static_cast<CudaActivations&>(*act.device);
  const bf16* w = params_bf16_;
  float* g = grads_;
  const int64_t BTC = activation_floats(), BTF = int64_t{B_} * T_ * F_;
  if (!spec().head) upload_received(dev, act, true);
  bf16* dres = dev.grad;
  for (int i = spec().num_layers - 1; i >= 0; --i) {
    const BlockOffsets& b = blocks_[i];
    const BlockStash& s = dev.blocks[i];
    const bf16* residual = i == 0 ? dev.input : dev.blocks[i - 1].residual3;
    // MLP branch: residual3 = residual2 + proj(gelu(fc(ln2(residual2)))).
    zero_bf16(dfch_gelu_, BTF);
    k::matmul_backward(dfch_gelu_, g + b.fcprojw, g + b.fcprojb, dres, s.fch_gelu, w + b.fcprojw,
                       B_, T_, F_, C_, ctx());
    zero_bf16(dfch_, BTF);
    k::gelu_backward(dfch_, s.fch, dfch_gelu_, BTF, ctx());
    zero_bf16(dln_, BTC);
    k::matmul_backward(dln_, g + b.fcw, g + b.fcb, dfch_, s.ln2, w + b.fcw, B_, T_, C_, F_, ctx());
    k::layernorm_backward(dres, g + b.ln2w, g + b.ln2b, dln_, s.residual2, w + b.ln2w, s.ln2_mean,
                          s.ln2_rstd, B_, T_, C_, ctx());
    // Attention branch: residual2 = residual + proj(attention(qkv(ln1(residual)))).
    zero_bf16(datty_, BTC);
    k::matmul_backward(datty_, g + b.attprojw, g + b.attprojb, dres, s.atty, w + b.attprojw, B_, T_,
                       C_, C_, ctx());
    zero_bf16(dqkv_, 3 * BTC);
    k::attention_backward(dqkv_, datty_, s.qkv, s.atty, s.lse, B_, T_, C_, NH_, ctx());
    zero_bf16(dln_, BTC);
    k::matmul_backward(dln_, g + b.qkvw, g + b.qkvb, dqkv_, s.ln1, w + b.qkvw, B_, T_, C_, 3 * C_,
                       ctx());
    k::layernorm_backward(dres, g + b.ln1w, g + b.ln1b, dln_, residual, w + b.ln1w, s.ln1_mean,
                          s.ln1_rstd, B_, T_, C_, ctx());
    if (on_block_done) on_block_done(i);
  }
  if (spec().embedding) {
    k::encoder_backward(g + wte_, g + wpe_, dres, dev.tokens, B_, T_, C_, V_, ctx());
  } else {
    start_download(dev, dres, dev.send_grad, act.grad);
  }
}

void GptChunkCuda::zero_gradients() { k::zero(grads_, layout_.total(), ctx()); }

void GptChunkCuda::start_gradients_to_host(int bucket) {
  const GradientBucket& b = layout_.buckets().at(bucket);
  if (!host_grads_) host_grads_ = PinnedBuffer<float>(layout_.total());
  const k::Stream& copies = device_->copy_stream();
  grads_final_.record(stream());
  copies.wait(grads_final_);
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(host_grads_.get() + b.offset, grads_ + b.offset,
                                    sizeof(float) * size_t(b.size), cudaMemcpyDeviceToHost,
                                    copies.get()));
  bucket_copied_.at(bucket).record(copies.get());
}

std::span<float> GptChunkCuda::host_gradients(int bucket) {
  const GradientBucket& b = layout_.buckets().at(bucket);
  if (!host_grads_) throw std::logic_error("host_gradients before start_gradients_to_host");
  return {host_grads_.get() + b.offset, static_cast<size_t>(b.size)};
}

void GptChunkCuda::gradients_reduced(int bucket) {
  const GradientBucket& b = layout_.buckets().at(bucket);
  // From pinned memory, ordered before the optimizer step on the same stream; the host buffer
  // is not written again before the next step's gradients_for_reduce, which waits for the stream.
  TESSEL_CUDA_CHECK(cudaMemcpyAsync(grads_ + b.offset, host_grads_.get() + b.offset,
                                    sizeof(float) * size_t(b.size), cudaMemcpyHostToDevice,
                                    stream()));
}

double GptChunkCuda::gradient_sum_of_squares() {
  double sum = 0;
  for (const Span& s : norm_spans_) {
    if (s.flag) sum += k::sum_of_squares(grads_ + s.offset, s.size, ctx());
  }
  return sum;
}

void GptChunkCuda::adamw_step(const kernels::cpu::AdamWHyperparameters& hp, int step,
                              float grad_scale) {
  kernels::cpu::AdamWHyperparameters no_decay = hp;
  no_decay.weight_decay = 0;
  for (const Span& s : decay_spans_) {
    k::adamw_update(params_ + s.offset, m_ + s.offset, v_ + s.offset, grads_ + s.offset, s.size,
                    s.flag ? hp : no_decay, step, grad_scale, params_bf16_ + s.offset, ctx());
  }
}

void GptChunkCuda::ensure_state_mirrors() const {
  if (host_params_) return;
  const int64_t N = layout_.total();
  host_params_ = PinnedBuffer<float>(N);
  host_m_ = PinnedBuffer<float>(N);
  host_v_ = PinnedBuffer<float>(N);
}

ConstHostState GptChunkCuda::state_for_reading() const {
  ensure_state_mirrors();
  const size_t bytes = sizeof(float) * size_t(layout_.total());
  for (auto [to, from] :
       {std::pair{host_params_.get(), params_}, {host_m_.get(), m_}, {host_v_.get(), v_}}) {
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream()));
  }
  device_->synchronize();
  return {host_params_.get(), host_m_.get(), host_v_.get()};
}

HostState GptChunkCuda::state_for_writing() {
  ensure_state_mirrors();
  return {host_params_.get(), host_m_.get(), host_v_.get()};
}

void GptChunkCuda::state_written() {
  const int64_t N = layout_.total();
  const size_t bytes = sizeof(float) * size_t(N);
  for (auto [to, from] :
       {std::pair{params_, host_params_.get()}, {m_, host_m_.get()}, {v_, host_v_.get()}}) {
    TESSEL_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream()));
  }
  k::copy_to_bf16(params_bf16_, params_, N, ctx());
  device_->synchronize();
}

}  // namespace

ChunkFactory cuda_chunk_factory(std::shared_ptr<CudaDevice> device) {
  return [device](const GptConfig& config, const ChunkSpec& spec, int batch) {
    return std::make_unique<GptChunkCuda>(config, spec, batch, device);
  };
}

}  // namespace tessel::stage
