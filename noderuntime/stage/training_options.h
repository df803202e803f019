// How a stage trains: the batch geometry, the schedule, the optimizer's hyper-parameters and the
// data-parallel mode.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cpu/adamw.h"
#include "placement/pipeline_timing.h"

namespace tessel::stage {

// The inner optimizer: AdamW (the default), or plain SGD (params -= lr (grad_scale g + wd p),
// weight decay on the tensors marked decay), which the low-communication mode's equivalence with
// synchronous data parallelism is stated for.
enum class InnerOptimizer { kAdamW, kSgd };

// "adamw" | "sgd"; else std::invalid_argument saying what is accepted (the caller names the field).
InnerOptimizer parse_inner_optimizer(const std::string& name);
const char* to_string(InnerOptimizer optimizer);

// The low-communication data-parallel mode (DiLoCo-style, outer_sync.h): each replica takes
// sync_every inner steps on its own batches with no gradient all-reduce across replicas (replicas
// of one island keep theirs, every step), then the replicas of each stage average the parameter
// delta and apply the outer optimizer. Limits: kMaxSyncEvery, delta_bits in {32, 8, 4}.
struct LowCommunication {
  bool enabled = false;  // false: synchronous data parallelism (every step's gradients summed)
  int sync_every = 50;   // H: inner steps per outer sync, >= 1
  int delta_bits = 32;   // 32 (fp32), 8 or 4 (per-block scales, error feedback: delta_codec.h)
  float outer_learning_rate = 0.7f;
  float outer_momentum = 0.9f;  // in [0, 1)
  bool nesterov = true;
  // true: the exchange of sync k runs during the next inner step and is applied after it (one
  // step late, keeping that step's local progress); false: applied at once.
  bool delayed = true;
  // true: stage s syncs at the steps t with (t + s H / P) % H == 0, so the stages' exchanges do
  // not all cross the slow links at the same step; false: every stage at t % H == 0.
  bool stagger = false;
  // The job's last step (job.json's training.steps): every stage syncs there whatever H, and the
  // replicas end bit-identical. 0: none.
  int64_t final_step = 0;

  // Throws ConfigError naming the field (data_parallel.sync_every, ...).
  void validate() const;
};

// The longest sync period: far past where DiLoCo-style training has been shown to converge.
inline constexpr int kMaxSyncEvery = 10000;

struct TrainingOptions {
  int micro_batch = 1;    // B: sequences per micro-batch
  int micro_batches = 1;  // m: micro-batches per replica and step
  placement::ScheduleKind schedule = placement::ScheduleKind::OneFOneB;
  int microbatch_group = 0;  // interleaved only: Megatron's G, 0 meaning P
  // true: receives posted ahead of the compute that needs them, sends waited only when their
  // buffer is needed again, each gradient bucket all-reduced as soon as the last micro-batch's
  // backward has finished it. false: every communication waited at once, the all-reduce after
  // the whole backward.
  bool overlap = true;
  kernels::cpu::AdamWHyperparameters adamw;
  InnerOptimizer optimizer = InnerOptimizer::kAdamW;  // SGD uses adamw.learning_rate, weight_decay
  float grad_clip = 1.0f;  // max global gradient norm; 0 turns clipping off
  uint64_t seed = 1337;    // parameter initialisation
  LowCommunication low_communication;

  // Throws ConfigError naming the field (training.micro_batch, training.grad_clip, ...).
  void validate() const;
};

}  // namespace tessel::stage
