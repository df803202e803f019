// A rank's metrics of one training step: the one definition the stage runtime fills, the
// StageProgress Step message carries (proto/tessel/v1alpha1/progress.proto), a JSON progress line
// prints, and the launcher's and the operator's folds read (the launcher's summary of a step over
// all ranks is one too: noderuntime/launcher/progress_tracker.h). Each form is mapped here once:
// the message field by field (the compiler checks it), the JSON line through for_each_field,
// whose keys are the message's field names in its order (tests/stage/step_metrics_test.cpp checks
// both against the message's descriptor and against a line tessel-stage printed).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "tessel/v1alpha1/progress.pb.h"

namespace tessel::progress {

struct StepMetrics {
  int64_t step = 0;            // steps done after this one (1 for the first)
  double loss = 0;             // mean cross-entropy over the global batch, the same on every rank
  double grad_norm = 0;        // global gradient norm before clipping
  int64_t tokens = 0;          // tokens in the global batch
  double tokens_per_s = 0;     // tokens / step_s
  double step_s = 0;           // wall time of the step on this rank
  double compute_s = 0;        // forward, backward and optimizer arithmetic
  double bubble_fraction = 0;  // 1 - compute_s / step_s: idle in the schedule
  double network_wait_s = 0;   // blocked waiting for receives, sends and all-reduces

  bool operator==(const StepMetrics&) const = default;

  // Calls visit(key, member) for every field, in the order of the proto and of the JSON line.
  template <class Metrics, class Visit>
  static void for_each_field(Metrics& m, Visit&& visit) {
    visit("step", m.step);
    visit("loss", m.loss);
    visit("grad_norm", m.grad_norm);
    visit("tokens", m.tokens);
    visit("tokens_per_s", m.tokens_per_s);
    visit("step_s", m.step_s);
    visit("compute_s", m.compute_s);
    visit("bubble_fraction", m.bubble_fraction);
    visit("network_wait_s", m.network_wait_s);
  }
};

tessel::v1alpha1::Step step_message(const StepMetrics& metrics);
StepMetrics step_metrics(const tessel::v1alpha1::Step& message);

// Adds the metrics' keys to a JSON progress line, after what it holds. A non-finite number is
// written as null (JSON has no NaN).
void add_step_fields(const StepMetrics& metrics, nlohmann::ordered_json& line);
// The metrics of a JSON step line (other keys are ignored). A null number reads as NaN. Throws
// std::invalid_argument naming the key when one is missing, is not a number, or is not an integer
// where the field counts (step, tokens).
StepMetrics step_metrics_from_json(const nlohmann::json& line);

}  // namespace tessel::progress
