// bench/kernels: the CPU kernels on GPT-2 124M shapes (C=768, 12 heads, B=4 x T=64 tokens,
// vocab 50257) at each thread count asked for. Prints a markdown table: op, shape, threads,
// median wall ms, median process CPU ms (on a shared machine, wall ms well above cpu ms / threads
// means the threads waited for a core), GFLOP/s from wall time, and whether the outputs are
// bit-identical to those at the first thread count. Then the time of one whole training step
// summed from the rows: 12 layers forward and backward, embedding, final layernorm, LM head,
// loss, gradient norm and AdamW over the 124M parameters.
//
// FLOP counts: a matmul is 2 BT C OC forward and 4 BT C OC backward; attention counts its two
// causal products (T(T+1)/2 pairs of HS-long dots or axpys per head) as 4 B NH T(T+1)/2 HS
// forward and twice that backward; elementwise ops count their arithmetic per element
// (layernorm 8 forward, 14 backward; gelu 12 / 20 counting exp as one; cross-entropy 5 per logit;
// AdamW 14 per parameter), so for them GFLOP/s mostly shows memory bandwidth.
//
//   cpu_kernels_bench [--threads 1,2] [--min-time 0.3]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/residual.h"
#include "kernels/cpu/softmax_cross_entropy.h"
#include "kernels/cpu/threading.h"
#include "kernels/cpu/vector_ops.h"

using namespace tessel::kernels::cpu;

namespace {

constexpr int B = 4, T = 64, C = 768, NH = 12, V = 50257, L = 12, kMaxT = 1024;
constexpr int64_t BT = int64_t(B) * T;
// wte (tied with the LM head) + wpe + 12 layers (2 layernorms, qkv, proj, fc, fc proj) + final
// layernorm: 124,439,808.
constexpr int64_t kParameters =
    int64_t(V) * C + int64_t(kMaxT) * C +
    L * (2 * 2 * C + (3 * C * C + 3 * C) + (C * C + C) + (4 * C * C + 4 * C) + (4 * C * C + C)) +
    2 * C;

std::vector<float> random_buffer(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = scale * (float(s >> 40) * 0x1.0p-24f * 2.0f - 1.0f);
  }
  return v;
}

uint64_t fnv1a(const std::vector<std::vector<float>*>& outputs) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto* v : outputs) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(v->data());
    for (size_t i = 0; i < v->size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

// One row of the table. Before its checked run every output is zeroed (backward kernels
// accumulate, and some outputs are shared buffers a case fills only in part).
struct Case {
  std::string op;
  std::string shape;
  double flops;
  int per_step;  // how many times one training step runs it
  std::function<void()> run;
  std::vector<std::vector<float>*> outputs;  // hashed to compare thread counts; empty: not checked
};

// Activations, weights and gradients: one layer's worth (the layers have the same shapes), the
// embedding and LM head, and the whole model's parameters for the optimizer rows.
struct Buffers {
  std::vector<float> x = random_buffer(BT * C, 1);
  std::vector<float> ln_w = random_buffer(C, 2), ln_b = random_buffer(C, 3);
  std::vector<float> mean = std::vector<float>(BT), rstd = std::vector<float>(BT);
  std::vector<float> qkv = random_buffer(BT * 3 * C, 4);
  std::vector<float> att = std::vector<float>(B * NH * T * T);
  std::vector<float> fc_in = random_buffer(BT * 4 * C, 5);
  std::vector<float> w_qkv = random_buffer(3 * C * C, 6, 0.03f), b_qkv = random_buffer(3 * C, 7);
  std::vector<float> w_proj = random_buffer(C * C, 8, 0.03f), b_proj = random_buffer(C, 9);
  std::vector<float> w_fc = random_buffer(4 * C * C, 10, 0.03f), b_fc = random_buffer(4 * C, 11);
  std::vector<float> w_fcproj = random_buffer(C * 4 * C, 12, 0.02f);
  std::vector<float> b_fcproj = random_buffer(C, 13);
  std::vector<float> dout_c = random_buffer(BT * C, 14), dout_3c = random_buffer(BT * 3 * C, 15);
  std::vector<float> dout_4c = random_buffer(BT * 4 * C, 16);
  // outputs, sized for the widest op that writes them
  std::vector<float> out = std::vector<float>(BT * 4 * C), out2 = std::vector<float>(BT * C);
  std::vector<float> dinp = std::vector<float>(BT * 4 * C), dinp2 = std::vector<float>(BT * C);
  std::vector<float> dw = std::vector<float>(4 * C * C), db = std::vector<float>(4 * C);
  std::vector<float> dln_w = std::vector<float>(C), dln_b = std::vector<float>(C);

  std::vector<int> tokens, targets;
  std::vector<float> wte = random_buffer(int64_t(V) * C, 20, 0.02f);
  std::vector<float> wpe = random_buffer(int64_t(kMaxT) * C, 21, 0.01f);
  std::vector<float> dwte = std::vector<float>(int64_t(V) * C);
  std::vector<float> dwpe = std::vector<float>(int64_t(kMaxT) * C);
  std::vector<float> logits = std::vector<float>(BT * V), dlogits = std::vector<float>(BT * V);
  std::vector<float> losses = std::vector<float>(BT);

  std::vector<float> params = random_buffer(kParameters, 30, 0.02f);
  std::vector<float> grads = random_buffer(kParameters, 31, 0.001f);
  std::vector<float> m = std::vector<float>(kParameters), v = std::vector<float>(kParameters);

  Buffers() {
    for (int64_t i = 0; i < BT; ++i) {
      tokens.push_back(int((i * 7919) % V));
      targets.push_back(int((i * 104729 + 17) % V));
    }
  }
};

std::string shape_of(int64_t bt, int64_t c, int64_t oc) {
  return "BT=" + std::to_string(bt) + " C=" + std::to_string(c) + " OC=" + std::to_string(oc);
}

void add(std::vector<Case>& cases, const std::string& op, const std::string& shape, double flops,
         int per_step, std::vector<std::vector<float>*> outputs, std::function<void()> run) {
  cases.push_back({op, shape, flops, per_step, std::move(run), std::move(outputs)});
}

// Forward and backward of one linear layer: out (BT, OC) = inp (BT, Cin) w^T + bias.
void add_linear(std::vector<Case>& cases, Buffers& b, const std::string& name, const float* w,
                const float* bias, const std::vector<float>& inp, int Cin, int OC, int per_step,
                std::vector<float>& out, std::vector<float>& dout, std::vector<float>& dweight) {
  const double f = double(BT) * Cin * OC;
  float* dbias = bias ? b.db.data() : nullptr;
  add(cases, "matmul fwd " + name, shape_of(BT, Cin, OC), 2 * f, per_step, {&out},
      [&, w, bias, Cin, OC] { matmul_forward(out.data(), inp.data(), w, bias, B, T, Cin, OC); });
  add(cases, "matmul bwd " + name, shape_of(BT, Cin, OC), 4 * f, per_step,
      {&b.dinp, &dweight, &b.db}, [&, w, dbias, Cin, OC] {
        matmul_backward(b.dinp.data(), dweight.data(), dbias, dout.data(), inp.data(), w, B, T, Cin,
                        OC);
      });
}

// In the order of a training step, so that each case reads what the cases before it wrote in
// the same way at every thread count (the LM head's backward reads the loss's dlogits).
std::vector<Case> all_cases(Buffers& b) {
  std::vector<Case> cases;
  const std::string bt_c = "BT=" + std::to_string(BT) + " C=" + std::to_string(C);
  const std::string heads = "B=4 T=64 C=768 NH=12";
  const double pairs = double(B) * NH * T * (T + 1) / 2 * (C / NH);
  const int64_t nc = BT * C, n4 = BT * 4 * C;
  add(cases, "encoder fwd", bt_c, double(nc), 1, {&b.out2}, [&] {
    encoder_forward(b.out2.data(), b.tokens.data(), b.wte.data(), b.wpe.data(), B, T, C, V);
  });
  add(cases, "layernorm fwd", bt_c, 8.0 * nc, 2 * L + 1, {&b.out2, &b.mean, &b.rstd}, [&] {
    layernorm_forward(b.out2.data(), b.mean.data(), b.rstd.data(), b.x.data(), b.ln_w.data(),
                      b.ln_b.data(), B, T, C);
  });
  add_linear(cases, b, "qkv", b.w_qkv.data(), b.b_qkv.data(), b.x, C, 3 * C, L, b.out, b.dout_3c,
             b.dw);
  add(cases, "attention fwd", heads, 4 * pairs, L, {&b.out2, &b.att},
      [&] { attention_forward(b.out2.data(), b.att.data(), b.qkv.data(), B, T, C, NH); });
  add(cases, "attention bwd", heads, 8 * pairs, L, {&b.dinp}, [&] {
    attention_backward(b.dinp.data(), b.dout_c.data(), b.qkv.data(), b.att.data(), B, T, C, NH);
  });
  add_linear(cases, b, "attn proj", b.w_proj.data(), b.b_proj.data(), b.x, C, C, L, b.out, b.dout_c,
             b.dw);
  add(cases, "residual fwd", "N=" + std::to_string(nc), double(nc), 2 * L, {&b.out2},
      [&] { residual_forward(b.out2.data(), b.x.data(), b.dout_c.data(), nc); });
  add(cases, "residual bwd", "N=" + std::to_string(nc), 2.0 * nc, 2 * L, {&b.dinp2, &b.out2},
      [&] { residual_backward(b.dinp2.data(), b.out2.data(), b.dout_c.data(), nc); });
  add_linear(cases, b, "fc", b.w_fc.data(), b.b_fc.data(), b.x, C, 4 * C, L, b.out, b.dout_4c,
             b.dw);
  add(cases, "gelu fwd", "N=" + std::to_string(n4), 12.0 * n4, L, {&b.out},
      [&] { gelu_forward(b.out.data(), b.fc_in.data(), n4); });
  add(cases, "gelu bwd", "N=" + std::to_string(n4), 20.0 * n4, L, {&b.dinp},
      [&] { gelu_backward(b.dinp.data(), b.fc_in.data(), b.dout_4c.data(), n4); });
  add_linear(cases, b, "fc proj", b.w_fcproj.data(), b.b_fcproj.data(), b.fc_in, 4 * C, C, L, b.out,
             b.dout_c, b.dw);
  add(cases, "layernorm bwd", bt_c, 14.0 * nc, 2 * L + 1, {&b.dinp2, &b.dln_w, &b.dln_b}, [&] {
    layernorm_backward(b.dinp2.data(), b.dln_w.data(), b.dln_b.data(), b.dout_c.data(), b.x.data(),
                       b.ln_w.data(), b.mean.data(), b.rstd.data(), B, T, C);
  });
  // LM head: logits = x wte^T, no bias; its weight gradient lands in dwte (tied).
  std::vector<Case> lm_head;
  add_linear(lm_head, b, "lm head", b.wte.data(), nullptr, b.x, C, V, 1, b.logits, b.dlogits,
             b.dwte);
  cases.push_back(lm_head[0]);
  add(cases, "cross-entropy", "BT=256 V=50257", 5.0 * BT * V, 1, {&b.losses, &b.dlogits}, [&] {
    softmax_cross_entropy(b.losses.data(), b.dlogits.data(), b.logits.data(), b.targets.data(),
                          1.0f / BT, B, T, V, IgnoreTarget::kMinusOne);
  });
  cases.push_back(lm_head[1]);
  add(cases, "encoder bwd", bt_c, 2.0 * nc, 1, {&b.dwte, &b.dwpe}, [&] {
    encoder_backward(b.dwte.data(), b.dwpe.data(), b.dout_c.data(), b.tokens.data(), B, T, C, V);
  });
  const std::string all = "N=" + std::to_string(kParameters);
  add(cases, "zero grads", all, 0.0, 1, {}, [&] { zero(b.grads.data(), kParameters); });
  add(cases, "global norm", all, 2.0 * kParameters, 1, {},
      [&] { global_norm(b.grads.data(), kParameters); });
  add(cases, "adamw", all, 14.0 * kParameters, 1, {}, [&] {
    adamw_update(b.params.data(), b.m.data(), b.v.data(), b.grads.data(), kParameters,
                 AdamWHyperparameters{}, 1, 1.0f);
  });
  return cases;
}

double process_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Timing {
  double wall_ms;
  double cpu_ms;  // CPU time of the whole process: wall_ms x threads when they all work
};

// Medians over timed runs after one warm-up run: at least 3 runs and min_time seconds.
Timing time_runs(const std::function<void()>& run, double min_time) {
  using clock = std::chrono::steady_clock;
  run();
  std::vector<double> wall, cpu;
  const auto start = clock::now();
  while (wall.size() < 3 ||
         std::chrono::duration<double>(clock::now() - start).count() < min_time) {
    const auto t0 = clock::now();
    const double c0 = process_cpu_ms();
    run();
    cpu.push_back(process_cpu_ms() - c0);
    wall.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU kernels on GPT-2 124M shapes"};
  std::vector<int> thread_counts = {1, 2};
  double min_time = 0.3;
  app.add_option("--threads", thread_counts, "thread counts to run, e.g. 1,2")
      ->delimiter(',')
      ->check(CLI::Range(1, kMaxThreads));
  app.add_option("--min-time", min_time, "seconds of timed runs per case (at least 3 runs)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  Buffers buffers;
  std::vector<Case> cases = all_cases(buffers);

  std::printf("| op | shape | threads | ms | cpu ms | GFLOP/s | same bits as %d thread(s) |\n",
              thread_counts.front());
  std::printf("|---|---|---|---|---|---|---|\n");
  std::vector<uint64_t> first_hash(cases.size());
  std::vector<double> step_ms(thread_counts.size(), 0.0), step_cpu_ms(thread_counts.size(), 0.0);
  for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
    set_num_threads(thread_counts[ti]);
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      Case& c = cases[ci];
      for (auto* output : c.outputs) std::fill(output->begin(), output->end(), 0.0f);
      c.run();
      const uint64_t hash = fnv1a(c.outputs);
      if (ti == 0) first_hash[ci] = hash;
      const Timing t = time_runs(c.run, min_time);
      step_ms[ti] += t.wall_ms * c.per_step;
      step_cpu_ms[ti] += t.cpu_ms * c.per_step;
      const char* same = c.outputs.empty() ? "-" : (hash == first_hash[ci] ? "yes" : "NO");
      std::printf("| %s | %s | %d | %.3f | %.3f | %.1f | %s |\n", c.op.c_str(), c.shape.c_str(),
                  thread_counts[ti], t.wall_ms, t.cpu_ms, c.flops / (t.wall_ms * 1e6), same);
      std::fflush(stdout);
    }
  }
  std::printf("\nOne GPT-2 124M training step (B=%d, T=%d: %lld tokens), summed from the rows:\n",
              B, T, static_cast<long long>(BT));
  const double step_flops = 6.0 * double(kParameters) * BT;
  for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
    std::printf(
        "  %d thread(s): %.0f ms (%.0f ms CPU), %.0f tokens/s, %.1f GFLOP/s (6 N per token)\n",
        thread_counts[ti], step_ms[ti], step_cpu_ms[ti], BT / (step_ms[ti] / 1e3),
        step_flops / (step_ms[ti] * 1e6));
  }
  return 0;
}
