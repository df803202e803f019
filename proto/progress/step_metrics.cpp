#include "proto/progress/step_metrics.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace tessel::progress {

namespace pb = tessel::v1alpha1;

pb::Step step_message(const StepMetrics& m) {
  pb::Step step;
  step.set_step(m.step);
  step.set_loss(m.loss);
  step.set_grad_norm(m.grad_norm);
  step.set_tokens(m.tokens);
  step.set_tokens_per_s(m.tokens_per_s);
  step.set_step_s(m.step_s);
  step.set_compute_s(m.compute_s);
  step.set_bubble_fraction(m.bubble_fraction);
  step.set_network_wait_s(m.network_wait_s);
  return step;
}

StepMetrics step_metrics(const pb::Step& step) {
  StepMetrics m;
  m.step = step.step();
  m.loss = step.loss();
  m.grad_norm = step.grad_norm();
  m.tokens = step.tokens();
  m.tokens_per_s = step.tokens_per_s();
  m.step_s = step.step_s();
  m.compute_s = step.compute_s();
  m.bubble_fraction = step.bubble_fraction();
  m.network_wait_s = step.network_wait_s();
  return m;
}

void add_step_fields(const StepMetrics& metrics, nlohmann::ordered_json& line) {
  StepMetrics::for_each_field(metrics, [&line](const char* key, const auto& value) {
    line[key] = value;  // nlohmann writes NaN and infinities as null
  });
}

StepMetrics step_metrics_from_json(const nlohmann::json& line) {
  if (!line.is_object()) {
    throw std::invalid_argument("step line: expected a JSON object, got " + line.dump());
  }
  StepMetrics metrics;
  StepMetrics::for_each_field(metrics, [&line](const char* key, auto& value) {
    const auto found = line.find(key);
    if (found == line.end()) {
      throw std::invalid_argument(std::string("step line: \"") + key + "\" is missing");
    }
    const nlohmann::json& v = *found;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double>) {
      if (v.is_null()) {
        value = std::numeric_limits<double>::quiet_NaN();
      } else if (v.is_number()) {
        value = v.get<double>();
      } else {
        throw std::invalid_argument(std::string("step line: \"") + key +
                                    "\" must be a number, got " + v.dump());
      }
    } else {
      const bool fits = v.is_number_integer() &&
                        (!v.is_number_unsigned() ||
                         v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()));
      if (!fits) {
        throw std::invalid_argument(std::string("step line: \"") + key +
                                    "\" must be an integer in [-2^63, 2^63), got " + v.dump());
      }
      value = v.get<int64_t>();
    }
  });
  return metrics;
}

}  // namespace tessel::progress
