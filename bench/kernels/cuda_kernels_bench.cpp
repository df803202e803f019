// cuda_kernels_bench: times every CUDA op of kernels/cuda on GPT-2 124M and GPT-3 1.3B layer
// shapes (8192 tokens a step) and prints a markdown table (like llm.c's and nccl-tests' drivers):
// median time, achieved TFLOP/s or GB/s, and the fraction of this GPU's ceilings, which the same
// run measures first (a large bf16 GEMM through cuBLASLt, a large device-to-device copy).
//
// Timing: CUDA events around each run on the op's stream, after warm-up runs, median of --iters
// runs; the L2 cache is flushed (256 MiB written) before every run, so inputs come from memory.
// Inputs are random, never zeros. FLOPs of attention are counted as FlashAttention counts them:
// 4 B NH T^2 HS for the forward, halved for the causal mask, and 2.5 times that for the backward.
// Bytes are the fewest a kernel must move: each input read once, each output written once.
//
// Usage: cuda_kernels_bench [--warmup N] [--iters N] [--models gpt2-124m,gpt3-1.3b]
//                           [--ops encoder,layernorm,matmul,attention,gelu,residual,
//                                  cross_entropy,optimizer]   (default: all)
//                           [--json FILE]   (one JSON object per row, for bench/gpu/)
//        cuda_kernels_bench --smoke [--json FILE]   (a tiny model and small ceilings, one run
//                           each: checks the driver itself, e.g. on the SIMT emulator)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/kernels/cuda_bench_data.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/encoder.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/residual.h"
#include "kernels/cuda/softmax_cross_entropy.h"
#include "kernels/cuda/stream.h"

namespace {

using namespace tessel::kernels::cuda;
using tessel::bench::fill_ints;
using tessel::bench::fill_uniform;

struct Options {
  int warmup = 5;
  int iters = 30;
  std::vector<std::string> models = {"gpt2-124m", "gpt3-1.3b"};
  std::vector<std::string> ops;  // groups of ops to time; empty: all
  std::string json_path;
  bool smoke = false;
};

struct Model {
  std::string name;
  int B, T, C, NH, V, L;
  int64_t parameters() const {  // 12 L C^2 (blocks, biases aside) + V C + T C
    return 12 * int64_t(L) * C * C + int64_t(V) * C + int64_t(T) * C;
  }
};

const Model kModels[] = {{"gpt2-124m", 8, 1024, 768, 12, 50257, 12},
                         {"gpt3-1.3b", 4, 2048, 2048, 16, 50257, 24},
                         {"smoke", 2, 70, 128, 2, 1000, 2}};  // --smoke only

enum class Bound { kCompute, kMemory };

struct Row {
  std::string model, op;
  std::map<std::string, int64_t> shape;
  double ms = 0;
  double flops = 0;  // for compute-bound rows
  double bytes = 0;  // for memory-bound rows
  Bound bound = Bound::kMemory;
  std::string target;  // e.g. ">= 75% of peak", or empty
};

// A device allocation for one benchmark.
template <class T>
class Buffer {
 public:
  explicit Buffer(int64_t n) {
    TESSEL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), size_t(n) * sizeof(T)));
  }
  ~Buffer() { cudaFree(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

class Timer {
 public:
  Timer(Context& ctx, const Options& options) : ctx_(ctx), options_(options), flush_(kFlushBytes) {}

  // Median milliseconds of run() over the timed runs.
  double median_ms(const std::function<void()>& run) {
    for (int i = 0; i < options_.warmup; ++i) run();
    std::vector<double> times;
    Event start(Event::Timing::kOn), stop(Event::Timing::kOn);
    for (int i = 0; i < options_.iters; ++i) {
      TESSEL_CUDA_CHECK(cudaMemsetAsync(flush_.get(), i & 0xff, kFlushBytes, ctx_.stream()));
      start.record(ctx_.stream());
      run();
      stop.record(ctx_.stream());
      stop.synchronize();
      times.push_back(stop.elapsed_ms_since(start));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

 private:
  static constexpr size_t kFlushBytes = size_t(256) << 20;  // over 4x the H100/H200's L2
  Context& ctx_;
  const Options& options_;
  Buffer<char> flush_;
};

struct Ceilings {
  double copy_gbps = 0;    // device-to-device copy, bytes read + written
  double gemm_tflops = 0;  // a square bf16 GEMM through cuBLASLt
  int gemm_n = 0;          // its size
};

// The copy moves copy_bytes, the GEMM is gemm_n^3 (2 GiB and 8192 for a real run).
Ceilings measure_ceilings(Context& ctx, Timer& timer, int64_t copy_bytes, int gemm_n) {
  Ceilings c;
  {
    Buffer<char> a(copy_bytes), b(copy_bytes);
    fill_uniform(reinterpret_cast<float*>(a.get()), copy_bytes / 4, -1, 1, 1, ctx.stream());
    const double ms = timer.median_ms([&] {
      TESSEL_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), size_t(copy_bytes),
                                        cudaMemcpyDeviceToDevice, ctx.stream()));
    });
    c.copy_gbps = 2.0 * double(copy_bytes) / (ms * 1e-3) / 1e9;
  }
  {
    const int n = gemm_n;
    Buffer<bf16> a(int64_t(n) * n), b(int64_t(n) * n), out(int64_t(n) * n);
    fill_uniform(a.get(), int64_t(n) * n, -1, 1, 2, ctx.stream());
    fill_uniform(b.get(), int64_t(n) * n, -1, 1, 3, ctx.stream());
    const double ms = timer.median_ms(
        [&] { matmul_forward(out.get(), a.get(), b.get(), nullptr, 1, n, n, n, ctx); });
    c.gemm_tflops = 2.0 * n * double(n) * n / (ms * 1e-3) / 1e12;
    c.gemm_n = n;
  }
  return c;
}

// The ops of one transformer block, the embedding and the LM head at a model's shapes.
class ModelBench {
 public:
  ModelBench(const Model& m, Context& ctx, Timer& timer, std::vector<Row>& rows)
      : m_(m), ctx_(ctx), timer_(timer), rows_(rows), BT_(int64_t(m.B) * m.T) {}

  static constexpr const char* kGroups[] = {"encoder", "layernorm", "matmul",        "attention",
                                            "gelu",    "residual",  "cross_entropy", "optimizer"};

  // The groups of ops named in `ops` (all when it is empty), in the order of kGroups.
  void run(const std::vector<std::string>& ops) {
    const auto wanted = [&](const char* group) {
      return ops.empty() || std::find(ops.begin(), ops.end(), group) != ops.end();
    };
    if (wanted("encoder")) encoder();
    if (wanted("layernorm")) layernorm();
    if (wanted("matmul")) {
      for (const auto& [name, C, OC, gelu] :
           {std::tuple{"qkv", m_.C, 3 * m_.C, false}, std::tuple{"attn proj", m_.C, m_.C, false},
            std::tuple{"fc", m_.C, 4 * m_.C, true}, std::tuple{"fc proj", 4 * m_.C, m_.C, false}}) {
        matmul(name, C, OC, true, gelu);
      }
      matmul("lm head", m_.C, m_.V, false, false);
    }
    if (wanted("attention")) attention();
    if (wanted("gelu")) gelu();
    if (wanted("residual")) residual();
    if (wanted("cross_entropy")) cross_entropy();
    if (wanted("optimizer")) optimizer();
  }

 private:
  void add(const std::string& op, std::map<std::string, int64_t> shape, double ms, double flops,
           double bytes, Bound bound, const std::string& target = "") {
    rows_.push_back({m_.name, op, std::move(shape), ms, flops, bytes, bound, target});
  }

  void encoder() {
    const int64_t n = BT_ * m_.C;
    Buffer<bf16> out(n), wte(int64_t(m_.V) * m_.C), wpe(int64_t(m_.T) * m_.C), dout(n);
    Buffer<float> dwte(int64_t(m_.V) * m_.C), dwpe(int64_t(m_.T) * m_.C);
    Buffer<int> tokens(BT_);
    fill_ints(tokens.get(), BT_, m_.V, 4, ctx_.stream());
    fill_uniform(wte.get(), int64_t(m_.V) * m_.C, -1, 1, 5, ctx_.stream());
    fill_uniform(wpe.get(), int64_t(m_.T) * m_.C, -1, 1, 6, ctx_.stream());
    fill_uniform(dout.get(), n, -1, 1, 7, ctx_.stream());
    fill_uniform(dwte.get(), int64_t(m_.V) * m_.C, -1, 1, 8, ctx_.stream());
    fill_uniform(dwpe.get(), int64_t(m_.T) * m_.C, -1, 1, 9, ctx_.stream());
    const std::map<std::string, int64_t> shape = {
        {"B", m_.B}, {"T", m_.T}, {"C", m_.C}, {"V", m_.V}};
    double ms = timer_.median_ms([&] {
      encoder_forward(out.get(), tokens.get(), wte.get(), wpe.get(), m_.B, m_.T, m_.C, m_.V, ctx_);
    });
    add("encoder fwd", shape, ms, 0, double(n) * 2 * 2 + double(m_.T) * m_.C * 2 + BT_ * 4.0,
        Bound::kMemory);
    ms = timer_.median_ms([&] {
      encoder_backward(dwte.get(), dwpe.get(), dout.get(), tokens.get(), m_.B, m_.T, m_.C, m_.V,
                       ctx_);
    });
    const double rows_touched = double(std::min<int64_t>(BT_, m_.V));
    add("encoder bwd", shape, ms, 0,
        double(n) * 2 + rows_touched * m_.C * 8 + double(m_.T) * m_.C * 8 + BT_ * 4.0,
        Bound::kMemory);
  }

  void layernorm() {
    const int64_t n = BT_ * m_.C;
    Buffer<bf16> inp(n), inp2(n), residual(n), out(n), weight(m_.C), bias(m_.C), dout(n), dinp(n);
    Buffer<float> mean(BT_), rstd(BT_), dweight(m_.C), dbias(m_.C);
    fill_uniform(inp.get(), n, -2, 2, 10, ctx_.stream());
    fill_uniform(inp2.get(), n, -1, 1, 11, ctx_.stream());
    fill_uniform(weight.get(), m_.C, 0.5f, 1.5f, 12, ctx_.stream());
    fill_uniform(bias.get(), m_.C, -0.5f, 0.5f, 13, ctx_.stream());
    fill_uniform(dout.get(), n, -1, 1, 14, ctx_.stream());
    fill_uniform(dinp.get(), n, -1, 1, 15, ctx_.stream());
    fill_uniform(dweight.get(), m_.C, -1, 1, 16, ctx_.stream());
    fill_uniform(dbias.get(), m_.C, -1, 1, 17, ctx_.stream());
    const std::map<std::string, int64_t> shape = {{"BT", BT_}, {"C", m_.C}};
    const std::string target = ">= 70% of copy";
    double ms = timer_.median_ms([&] {
      layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), weight.get(), bias.get(),
                        m_.B, m_.T, m_.C, ctx_);
    });
    add("layernorm fwd", shape, ms, 0, double(n) * 4 + BT_ * 8.0, Bound::kMemory, target);
    ms = timer_.median_ms([&] {
      residual_layernorm_forward(residual.get(), out.get(), mean.get(), rstd.get(), inp.get(),
                                 inp2.get(), weight.get(), bias.get(), m_.B, m_.T, m_.C, ctx_);
    });
    add("residual+layernorm fwd", shape, ms, 0, double(n) * 8 + BT_ * 8.0, Bound::kMemory, target);
    ms = timer_.median_ms([&] {
      layernorm_backward(dinp.get(), dweight.get(), dbias.get(), dout.get(), inp.get(),
                         weight.get(), mean.get(), rstd.get(), m_.B, m_.T, m_.C, ctx_);
    });
    add("layernorm bwd", shape, ms, 0, double(n) * 8 + BT_ * 8.0, Bound::kMemory, target);
  }

  void matmul(const std::string& name, int C, int OC, bool with_bias, bool gelu) {
    const int64_t n_inp = BT_ * C, n_out = BT_ * OC, n_weight = int64_t(OC) * C;
    Buffer<bf16> inp(n_inp), weight(n_weight), bias(OC), out(n_out), pre(n_out), dout(n_out),
        dinp(n_inp);
    Buffer<float> dweight(n_weight), dbias(OC);
    fill_uniform(inp.get(), n_inp, -1, 1, 20, ctx_.stream());
    fill_uniform(weight.get(), n_weight, -0.05f, 0.05f, 21, ctx_.stream());
    fill_uniform(bias.get(), OC, -0.1f, 0.1f, 22, ctx_.stream());
    fill_uniform(dout.get(), n_out, -1, 1, 23, ctx_.stream());
    fill_uniform(dinp.get(), n_inp, -1, 1, 24, ctx_.stream());
    fill_uniform(dweight.get(), n_weight, -1, 1, 25, ctx_.stream());
    fill_uniform(dbias.get(), OC, -1, 1, 26, ctx_.stream());
    const std::map<std::string, int64_t> shape = {{"BT", BT_}, {"C", C}, {"OC", OC}};
    const std::string target = ">= 75% of peak";
    const bf16* b = with_bias ? bias.get() : nullptr;
    const double flops = 2.0 * double(BT_) * C * OC;
    double ms = timer_.median_ms([&] {
      if (gelu) {
        matmul_gelu_forward(out.get(), pre.get(), inp.get(), weight.get(), b, m_.B, m_.T, C, OC,
                            ctx_);
      } else {
        matmul_forward(out.get(), inp.get(), weight.get(), b, m_.B, m_.T, C, OC, ctx_);
      }
    });
    add("matmul fwd " + name + (gelu ? " +gelu" : ""), shape, ms, flops, 0, Bound::kCompute,
        target);
    ms = timer_.median_ms([&] {
      matmul_backward(dinp.get(), dweight.get(), with_bias ? dbias.get() : nullptr, dout.get(),
                      inp.get(), weight.get(), m_.B, m_.T, C, OC, ctx_);
    });
    add("matmul bwd " + name, shape, ms, 2 * flops, 0, Bound::kCompute, target);
  }

  void attention() {
    const int64_t n_inp = BT_ * 3 * m_.C, n_out = BT_ * m_.C, n_lse = int64_t(m_.B) * m_.NH * m_.T;
    Buffer<bf16> inp(n_inp), out(n_out), dout(n_out), dinp(n_inp);
    Buffer<float> lse(n_lse);
    fill_uniform(inp.get(), n_inp, -1, 1, 30, ctx_.stream());
    fill_uniform(dout.get(), n_out, -1, 1, 31, ctx_.stream());
    fill_uniform(dinp.get(), n_inp, -1, 1, 32, ctx_.stream());
    const std::map<std::string, int64_t> shape = {
        {"B", m_.B}, {"T", m_.T}, {"NH", m_.NH}, {"HS", m_.C / m_.NH}};
    const double forward_flops = 4.0 * m_.B * m_.NH * double(m_.T) * m_.T * (m_.C / m_.NH) / 2;
    const double fwd = timer_.median_ms(
        [&] { attention_forward(out.get(), lse.get(), inp.get(), m_.B, m_.T, m_.C, m_.NH, ctx_); });
    add("attention fwd", shape, fwd, forward_flops, 0, Bound::kCompute);
    const double bwd = timer_.median_ms([&] {
      attention_backward(dinp.get(), dout.get(), inp.get(), out.get(), lse.get(), m_.B, m_.T, m_.C,
                         m_.NH, ctx_);
    });
    add("attention bwd", shape, bwd, 2.5 * forward_flops, 0, Bound::kCompute);
    add("attention fwd+bwd", shape, fwd + bwd, 3.5 * forward_flops, 0, Bound::kCompute,
        ">= 40% of peak");
  }

  void gelu() {
    const int64_t n = BT_ * 4 * m_.C;
    Buffer<bf16> inp(n), out(n), dout(n), dinp(n);
    fill_uniform(inp.get(), n, -3, 3, 40, ctx_.stream());
    fill_uniform(dout.get(), n, -1, 1, 41, ctx_.stream());
    fill_uniform(dinp.get(), n, -1, 1, 42, ctx_.stream());
    const std::string target = ">= 70% of copy";
    double ms = timer_.median_ms([&] { gelu_forward(out.get(), inp.get(), n, ctx_); });
    add("gelu fwd", {{"N", n}}, ms, 0, double(n) * 4, Bound::kMemory, target);
    ms = timer_.median_ms([&] { gelu_backward(dinp.get(), inp.get(), dout.get(), n, ctx_); });
    add("gelu bwd", {{"N", n}}, ms, 0, double(n) * 8, Bound::kMemory, target);
  }

  void residual() {
    const int64_t n = BT_ * m_.C;
    Buffer<bf16> a(n), b(n), out(n);
    fill_uniform(a.get(), n, -1, 1, 50, ctx_.stream());
    fill_uniform(b.get(), n, -1, 1, 51, ctx_.stream());
    const double ms =
        timer_.median_ms([&] { residual_forward(out.get(), a.get(), b.get(), n, ctx_); });
    add("residual fwd", {{"N", n}}, ms, 0, double(n) * 6, Bound::kMemory);
  }

  void cross_entropy() {
    const int64_t n = BT_ * m_.V;
    Buffer<bf16> logits(n), dlogits(n);
    Buffer<int> targets(BT_);
    Buffer<float> losses(BT_);
    fill_uniform(logits.get(), n, -4, 4, 60, ctx_.stream());
    fill_ints(targets.get(), BT_, m_.V, 61, ctx_.stream());
    const double ms = timer_.median_ms([&] {
      softmax_cross_entropy(losses.get(), dlogits.get(), logits.get(), targets.get(),
                            1.0f / float(BT_), m_.B, m_.T, m_.V, IgnoreTarget::kNone, ctx_);
    });
    add("softmax cross-entropy fwd+bwd", {{"BT", BT_}, {"V", m_.V}}, ms, 0,
        double(n) * 4 + BT_ * 8.0, Bound::kMemory, ">= 70% of copy");
  }

  void optimizer() {
    const int64_t n = m_.parameters();
    Buffer<float> params(n), m(n), v(n), grads(n);
    Buffer<bf16> params_bf16(n);
    fill_uniform(params.get(), n, -1, 1, 70, ctx_.stream());
    fill_uniform(m.get(), n, -0.01f, 0.01f, 71, ctx_.stream());
    fill_uniform(v.get(), n, 0.0f, 1e-4f, 72, ctx_.stream());
    fill_uniform(grads.get(), n, -0.1f, 0.1f, 73, ctx_.stream());
    AdamWHyperparameters hp;
    double ms = timer_.median_ms([&] {
      adamw_update(params.get(), m.get(), v.get(), grads.get(), n, hp, 10, 0.7f, params_bf16.get(),
                   ctx_);
    });
    add("adamw", {{"N", n}}, ms, 0, double(n) * 30, Bound::kMemory, ">= 70% of copy");
    ms = timer_.median_ms([&] { global_norm(grads.get(), n, ctx_); });
    add("global norm", {{"N", n}}, ms, 0, double(n) * 4, Bound::kMemory);
  }

  const Model& m_;
  Context& ctx_;
  Timer& timer_;
  std::vector<Row>& rows_;
  int64_t BT_;
};

std::string shape_text(const std::map<std::string, int64_t>& shape) {
  std::string text;
  for (const auto& [k, v] : shape) text += (text.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return text;
}

std::string fixed(double x, int digits) {
  std::ostringstream s;
  s.precision(digits);
  s << std::fixed << x;
  return s.str();
}

void print_table(const std::vector<Row>& rows, const Ceilings& c, std::ostream& out) {
  out << "| model | op | shape | ms | TFLOP/s | GB/s | of ceiling | target |\n"
      << "|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const double tflops = r.flops / (r.ms * 1e-3) / 1e12;
    const double gbps = r.bytes / (r.ms * 1e-3) / 1e9;
    const double fraction =
        r.bound == Bound::kCompute ? tflops / c.gemm_tflops : gbps / c.copy_gbps;
    out << "| " << r.model << " | " << r.op << " | " << shape_text(r.shape) << " | "
        << fixed(r.ms, 4) << " | " << (r.flops > 0 ? fixed(tflops, 1) : "-") << " | "
        << (r.bytes > 0 ? fixed(gbps, 0) : "-") << " | " << fixed(100 * fraction, 1) << "% | "
        << (r.target.empty() ? "-" : r.target) << " |\n";
  }
}

void write_json(const std::vector<Row>& rows, const Ceilings& c, const std::string& path) {
  std::ofstream out(path);
  out << "{\"op\": \"ceiling\", \"copy_gbps\": " << c.copy_gbps
      << ", \"gemm_tflops\": " << c.gemm_tflops << ", \"gemm_n\": " << c.gemm_n << "}\n";
  for (const Row& r : rows) {
    out << "{\"model\": \"" << r.model << "\", \"op\": \"" << r.op << "\", \"shape\": {";
    bool first = true;
    for (const auto& [k, v] : r.shape) {
      out << (first ? "" : ", ") << "\"" << k << "\": " << v;
      first = false;
    }
    out << "}, \"ms\": " << r.ms << ", \"flops\": " << r.flops << ", \"bytes\": " << r.bytes
        << ", \"bound\": \"" << (r.bound == Bound::kCompute ? "compute" : "memory")
        << "\", \"target\": \"" << r.target << "\"}\n";
  }
}

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--warmup" && has_value) {
      o.warmup = std::atoi(argv[++i]);
    } else if (arg == "--iters" && has_value) {
      o.iters = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && has_value) {
      o.json_path = argv[++i];
    } else if (arg == "--smoke") {
      o.smoke = true;
      o.warmup = 0;
      o.iters = 1;
      o.models = {"smoke"};
    } else if (arg == "--ops" && has_value) {
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) {
        if (std::find(std::begin(ModelBench::kGroups), std::end(ModelBench::kGroups), name) ==
            std::end(ModelBench::kGroups)) {
          std::cerr << "cuda_kernels_bench: --ops: no group of ops named '" << name << "'\n";
          return std::nullopt;
        }
        o.ops.push_back(name);
      }
    } else if (arg == "--models" && has_value) {
      o.models.clear();
      std::stringstream list(argv[++i]);
      for (std::string name; std::getline(list, name, ',');) o.models.push_back(name);
    } else {
      return std::nullopt;
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse(argc, argv);
  if (!options) {
    std::cerr << "usage: cuda_kernels_bench [--warmup N] [--iters N] "
                 "[--models gpt2-124m,gpt3-1.3b] [--ops GROUP,...] [--json FILE]\n"
                 "       cuda_kernels_bench --smoke [--json FILE]\n";
    return 2;
  }
  if (const auto reason = gpu_unavailable_reason()) {
    std::cerr << "cuda_kernels_bench: no GPU: " << *reason << "\n";
    return 1;
  }
  try {
    cudaDeviceProp prop{};
    TESSEL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    Stream stream;
    Context ctx(stream.get());
    Timer timer(ctx, *options);
    std::cerr << "cuda_kernels_bench on " << prop.name << ": measuring the ceilings\n";
    const Ceilings ceilings =
        measure_ceilings(ctx, timer, options->smoke ? int64_t(16) << 20 : int64_t(2) << 30,
                         options->smoke ? 256 : 8192);
    std::vector<Row> rows;
    for (const Model& model : kModels) {
      if (std::find(options->models.begin(), options->models.end(), model.name) ==
          options->models.end()) {
        continue;
      }
      std::cerr << "cuda_kernels_bench: " << model.name << "\n";
      ModelBench(model, ctx, timer, rows).run(options->ops);
    }
    std::cout << "GPU: " << prop.name << ". Measured ceilings: device-to-device copy "
              << fixed(ceilings.copy_gbps, 0) << " GB/s (read + write), bf16 GEMM "
              << ceilings.gemm_n << "^3 " << fixed(ceilings.gemm_tflops, 1)
              << " TFLOP/s. Median of " << options->iters << " runs after " << options->warmup
              << " warm-up runs, L2 flushed before each.\n\n";
    print_table(rows, ceilings, std::cout);
    if (!options->json_path.empty()) write_json(rows, ceilings, options->json_path);
  } catch (const std::exception& e) {
    std::cerr << "cuda_kernels_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
