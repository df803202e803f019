#include "cli/plan_data_parallel.h"

namespace tessel::cli {

using namespace tessel::placement;

std::string planned_data_parallel_text(const DataParallelChoice& p) {
  const DataParallelMode& m = p.mode;
  return "\ndata parallelism: " + data_parallel_name(m) +
         (m.delayed ? " (the exchange overlaps the next inner step)"
                    : " (the exchange is waited)") +
         "\n  " + p.sync_every_reason + "\n  " + p.delta_bits_reason + "\n";
}

nlohmann::json planned_data_parallel_json(const DataParallelChoice& p) {
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
    j["sync_every_reason"] = p.sync_every_reason;
  }
  if (p.delta_bits) j["delta_bits_reason"] = p.delta_bits_reason;
  return j;
}

std::string planned_data_parallel_yaml(const DataParallelChoice& planned) {
  std::string text = "data_parallel:\n";
  const nlohmann::json section = planned_data_parallel_json(planned);
  for (const auto& [key, value] : section.items()) text += "  " + key + ": " + value.dump() + "\n";
  return text;
}

}  // namespace tessel::cli
