#include "noderuntime/stage/training_options.h"

#include <cmath>
#include <string>

#include "noderuntime/stage/gpt_config.h"

namespace tessel::stage {

void TrainingOptions::validate() const {
  auto need = [](bool ok, const char* field, double value, const char* rule) {
    if (!ok) {
      throw ConfigError(std::string(field) + ": " + rule + ", got " + std::to_string(value));
    }
  };
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
}

}  // namespace tessel::stage
