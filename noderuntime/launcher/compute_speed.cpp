#include "noderuntime/launcher/compute_speed.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "kernels/cpu/threading.h"
#include "noderuntime/stage/gpt_chunk.h"
#include "noderuntime/stage/parameter_init.h"

namespace tessel::launcher {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

ComputeSpeed measure_compute_speed(const placement::Workload& workload, int threads, int processes,
                                   double min_seconds) {
  using Clock = std::chrono::steady_clock;
  const stage::GptConfig config = stage::gpt_config_from_workload(workload);
  // Middle blocks only: no embedding, no head (the head's FLOPs are counted at the same rate).
  stage::ChunkSpec spec;
  spec.virtual_stage = 1;
  spec.num_layers = std::min(2, config.layers);
  stage::GptChunk chunk(config, spec, workload.micro_batch);
  stage::initialize_parameters(chunk.layout(), 1, chunk.params().data());

  const int previous_threads = kernels::cpu::num_threads();
  kernels::cpu::set_num_threads(threads);
  stage::ChunkActivations act = chunk.new_activations();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : act.input) x = normal(rng);
  const auto no_callback = [](int) {};
  auto one_micro_batch = [&] {
    std::fill(act.grad.begin(), act.grad.end(), 1e-3f);
    chunk.forward(act, nullptr, nullptr, 0.0f);
    chunk.backward(act, nullptr, no_callback);
  };
  one_micro_batch();  // warm-up: page faults, pool threads
  double best_s = 1e30;
  const Clock::time_point start = Clock::now();
  for (int rep = 0; rep < 3 || Clock::now() - start < std::chrono::duration<double>(min_seconds);
       ++rep) {
    const Clock::time_point t0 = Clock::now();
    one_micro_batch();
    best_s = std::min(best_s, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  kernels::cpu::set_num_threads(previous_threads);

  placement::Workload measured = workload;
  measured.recompute_activations = false;  // the CPU runtime keeps activations
  const double flops = spec.num_layers * measured.forward_flops_per_layer() *
                       (1.0 + measured.backward_flops_factor());
  ComputeSpeed speed;
  speed.flops_per_s = flops / best_s;
  speed.cores = available_cores();
  speed.share = std::min(1.0, double(speed.cores) / (double(processes) * threads));
  return speed;
}

}  // namespace tessel::launcher
