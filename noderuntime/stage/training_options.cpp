#include "noderuntime/stage/training_options.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "noderuntime/stage/gpt_config.h"

namespace tessel::stage {
namespace {

void need(bool ok, const char* field, double value, const char* rule) {
  if (!ok) throw ConfigError(std::string(field) + ": " + rule + ", got " + std::to_string(value));
}

}  // namespace

InnerOptimizer parse_inner_optimizer(const std::string& name) {
  if (name == "adamw") return InnerOptimizer::kAdamW;
  if (name == "sgd") return InnerOptimizer::kSgd;
  throw std::invalid_argument("must be \"adamw\" or \"sgd\", got \"" + name + "\"");
}

const char* to_string(InnerOptimizer optimizer) {
  return optimizer == InnerOptimizer::kSgd ? "sgd" : "adamw";
}

void LowCommunication::validate() const {
  if (!enabled) return;
  if (sync_every < 1 || sync_every > kMaxSyncEvery) {
    throw ConfigError("data_parallel.sync_every: must be in [1, " + std::to_string(kMaxSyncEvery) +
                      "], got " + std::to_string(sync_every));
  }
  need(delta_bits == 32 || delta_bits == 8 || delta_bits == 4, "data_parallel.delta_bits",
       delta_bits, "must be 32, 8 or 4");
  need(std::isfinite(outer_learning_rate) && outer_learning_rate > 0,
       "data_parallel.outer_learning_rate", outer_learning_rate, "must be finite and > 0");
  need(outer_momentum >= 0 && outer_momentum < 1, "data_parallel.outer_momentum", outer_momentum,
       "must be in [0, 1)");
  need(final_step >= 0, "training.steps", static_cast<double>(final_step), "must be >= 0");
}

void TrainingOptions::validate() const {
  need(micro_batch >= 1, "training.micro_batch", micro_batch, "must be >= 1");
  need(micro_batches >= 1, "training.micro_batches", micro_batches, "must be >= 1");
  need(microbatch_group >= 0, "schedule.microbatch_group", microbatch_group, "must be >= 0");
  need(std::isfinite(adamw.learning_rate) && adamw.learning_rate >= 0, "training.learning_rate",
       adamw.learning_rate, "must be finite and >= 0");
  need(adamw.beta1 >= 0 && adamw.beta1 < 1, "training.beta1", adamw.beta1, "must be in [0, 1)");
  need(adamw.beta2 >= 0 && adamw.beta2 < 1, "training.beta2", adamw.beta2, "must be in [0, 1)");
  need(std::isfinite(adamw.eps) && adamw.eps > 0, "training.eps", adamw.eps,
       "must be finite and > 0");
  need(std::isfinite(adamw.weight_decay) && adamw.weight_decay >= 0, "training.weight_decay",
       adamw.weight_decay, "must be finite and >= 0");
  need(std::isfinite(grad_clip) && grad_clip >= 0, "training.grad_clip", grad_clip,
       "must be finite and >= 0 (0: no clipping)");
  low_communication.validate();
}

}  // namespace tessel::stage
