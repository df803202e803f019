#include "noderuntime/stage/progress.h"

namespace tessel::stage {

nlohmann::ordered_json progress_event(const char* event, int rank, int stage, int replica) {
  return {{"event", event}, {"rank", rank}, {"stage", stage}, {"replica", replica}};
}

nlohmann::ordered_json step_event(const StepReport& report, int rank, int stage, int replica) {
  nlohmann::ordered_json line = progress_event("step", rank, stage, replica);
  line["step"] = report.step;
  line["loss"] = report.loss;
  line["grad_norm"] = report.grad_norm;
  line["tokens"] = report.tokens;
  line["tokens_per_s"] = report.tokens_per_s;
  line["step_s"] = report.step_s;
  line["compute_s"] = report.compute_s;
  line["bubble_fraction"] = report.bubble_fraction;
  line["network_wait_s"] = report.network_wait_s;
  return line;
}

void print_progress(std::ostream& out, const nlohmann::ordered_json& event) {
  out << event.dump() << '\n';
  out.flush();
}

}  // namespace tessel::stage
