// How a stage trains: the batch geometry, the schedule and the optimizer's hyper-parameters.
#pragma once

#include <cstdint>

#include "kernels/cpu/adamw.h"
#include "placement/pipeline_timing.h"

namespace tessel::stage {

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
  float grad_clip = 1.0f;  // max global gradient norm; 0 turns clipping off
  uint64_t seed = 1337;    // parameter initialisation

  // Throws ConfigError naming the field (training.micro_batch, training.grad_clip, ...).
  void validate() const;
};

}  // namespace tessel::stage
