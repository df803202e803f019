#include "cli/plan_data_parallel.h"

#include <cstdio>

namespace tessel::cli {

using namespace tessel::placement;

PlannedDataParallel planned_data_parallel(const PlanInputs& in,
                                          const std::vector<std::vector<int>>& pipelines) {
  PlannedDataParallel planned;
  planned.mode = in.workload.data_parallel;
  if (planned.mode.choose_sync_every) {
    const PipelineTiming timing = in.full->pipeline_timing(pipelines);
    planned.sync_every = choose_sync_every(in.full->schedule(), timing, planned.mode.sync_overhead);
    planned.mode.sync_every = timing.outer_sync.sync_every;  // the cost model's own choice
  }
  if (planned.mode.choose_delta_bits) planned.delta_bits = choose_delta_bits();
  return planned;
}

std::string mode_name(const DataParallelMode& m) {
  char text[96];
  std::snprintf(text, sizeof text, "low-communication H=%d %d-bit%s", m.sync_every, m.delta_bits,
                m.delayed ? "" : " blocking");
  return text;
}

std::string planned_data_parallel_text(const PlannedDataParallel& p) {
  const DataParallelMode& m = p.mode;
  std::string text =
      "\ndata parallelism: " + mode_name(m) +
      (m.delayed ? " (the exchange overlaps the next inner step)" : " (the exchange is waited)") +
      "\n  ";
  text += p.sync_every ? sync_every_reason(*p.sync_every)
                       : "H=" + std::to_string(m.sync_every) + ": given";
  text += "\n  ";
  text += p.delta_bits ? delta_bits_reason(*p.delta_bits)
                       : std::to_string(m.delta_bits) + "-bit deltas: given";
  return text + "\n";
}

nlohmann::json planned_data_parallel_json(const PlannedDataParallel& p) {
  const DataParallelMode& m = p.mode;
  nlohmann::json j = {{"mode", to_string(m.kind)},
                      {"sync_every", m.sync_every},
                      {"sync_every_chosen", p.sync_every.has_value()},
                      {"delta_bits", m.delta_bits},
                      {"delta_bits_chosen", p.delta_bits.has_value()},
                      {"delayed", m.delayed}};
  if (p.sync_every) {
    j["sync_overhead"] = p.sync_every->overhead;
    j["inner_step_s"] = p.sync_every->step_s;
    j["stall_per_sync_s"] = p.sync_every->stall_s;
    j["sync_every_reason"] = sync_every_reason(*p.sync_every);
  }
  if (p.delta_bits) j["delta_bits_reason"] = delta_bits_reason(*p.delta_bits);
  return j;
}

std::string planned_data_parallel_yaml(const PlannedDataParallel& planned) {
  std::string text = "data_parallel:\n";
  const nlohmann::json section = planned_data_parallel_json(planned);
  for (const auto& [key, value] : section.items()) text += "  " + key + ": " + value.dump() + "\n";
  return text;
}

}  // namespace tessel::cli
