// Training throughput of the CPU stage runtime on GPT-2 124M shapes (12 layers, hidden 768, 12
// heads, vocab 50257), one process (P = D = 1) over the same executor the pipeline uses:
// forward, backward, global-norm clipping and AdamW on micro-batches of 4 x 64 tokens. Prints
// the configuration and a table of steps with tokens/s and achieved GFLOP/s, counting the
// model FLOPs of placement's workload (3 x forward: 2 per multiply-add in every GEMM and in the
// attention scores and weighted sums).
//   cpu_throughput_bench [--threads N] [--steps N] [--micro-batches M]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/threading.h"
#include "noderuntime/stage/stage_runtime.h"
#include "noderuntime/transport/tcp_communicator.h"
#include "placement/workload.h"

namespace {

struct Options {
  int threads = 2;
  int steps = 5;
  int micro_batches = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int* target = arg == "--threads"         ? &o.threads
                  : arg == "--steps"         ? &o.steps
                  : arg == "--micro-batches" ? &o.micro_batches
                                             : nullptr;
    if (target == nullptr || i + 1 >= argc || (*target = std::atoi(argv[++i])) < 1) {
      std::fprintf(stderr, "usage: %s [--threads N] [--steps N] [--micro-batches M]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  const Options o = parse(argc, argv);
  placement::Workload workload = placement::workload_preset("gpt2-124m");
  workload.seq_len = 64;  // the position table has 64 rows instead of 1024: 0.7M fewer params
  workload.micro_batch = 4;
  workload.precision = placement::Precision::FP32;
  workload.recompute_activations = false;
  const stage::GptConfig config = stage::gpt_config_from_workload(workload);
  stage::TrainingOptions training;
  training.micro_batch = workload.micro_batch;
  training.micro_batches = o.micro_batches;
  training.adamw.learning_rate = 3e-4f;

  kernels::cpu::set_num_threads(o.threads);
  const stage::TokenCorpus corpus = stage::TokenCorpus::synthetic(1, 1 << 20, config.vocab);
  const transport::TcpListener listener = transport::TcpListener::bind("127.0.0.1", 0);
  transport::TcpOptions options;
  options.peers = {{"127.0.0.1", listener.port(), "bench"}};
  transport::TcpCommunicator comm(options, listener);
  stage::StageRuntime runtime(config, stage::PipelineLayout::standard(1, 1, 1, config.layers),
                              training, corpus, comm);

  int64_t parameters = 0;
  for (const auto& chunk : runtime.chunks()) parameters += chunk->model.layout().total();
  // Forward plus backward (2 x forward: the runtime keeps activations, no recomputation).
  const double flops_per_step =
      o.micro_batches * (1.0 + workload.backward_flops_factor()) *
      (config.layers * workload.forward_flops_per_layer() + workload.forward_flops_head());
  std::printf("cpu_throughput_bench: GPT-2 124M shapes (L=%d C=%d NH=%d V=%d), %.1fM parameters\n",
              config.layers, config.channels, config.heads, config.vocab, parameters / 1e6);
  std::printf("  batch %d x %d tokens x %d micro-batches, 1 process, %d threads, fp32, AdamW\n",
              training.micro_batch, config.seq_len, o.micro_batches, o.threads);
  std::printf("  model FLOPs per step: %.1f GFLOP (3 x forward)\n\n", flops_per_step / 1e9);
  std::printf("%6s %10s %12s %10s %10s\n", "step", "time_s", "tokens/s", "GFLOP/s", "loss");

  runtime.train_step();  // warm-up: first touch of every buffer
  std::vector<double> times;
  for (int s = 1; s <= o.steps; ++s) {
    const stage::StepReport r = runtime.train_step();
    times.push_back(r.step_s);
    std::printf("%6d %10.3f %12.1f %10.2f %10.4f\n", s, r.step_s, r.tokens_per_s,
                flops_per_step / r.step_s / 1e9, r.loss);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  const double tokens = double(training.micro_batch) * config.seq_len * o.micro_batches;
  std::printf("%6s %10.3f %12.1f %10.2f\n", "median", median, tokens / median,
              flops_per_step / median / 1e9);
  return 0;
}
