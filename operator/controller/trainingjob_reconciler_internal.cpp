#include "operator/controller/trainingjob_reconciler_internal.h"

#include <algorithm>
#include <ctime>
#include <iomanip>
#include <sstream>
#include <stdexcept>

namespace tessel::controller::trainingjob {

using nlohmann::json;
using Clock = std::chrono::system_clock;

const kube::ResourceInfo& resource(const std::string& kind) {
  for (const kube::ResourceInfo& info : kube::builtin_resources()) {
    if (info.gvr.group.empty() && info.kind == kind) return info;
  }
  throw std::logic_error("no core resource " + kind);
}

std::optional<Clock::time_point> parse_rfc3339(const std::string& text) {
  std::tm tm{};
  std::istringstream in(text);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return std::nullopt;
  return Clock::from_time_t(timegm(&tm));
}

std::string join(const std::vector<std::string>& items, const std::string& separator,
                 size_t limit) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < limit; ++i) {
    out += (i ? separator : "") + items[i];
  }
  if (items.size() > limit)
    out += separator + "and " + std::to_string(items.size() - limit) + " more";
  return out;
}

int64_t restarts_of(const json& status) {
  return status.contains("restarts") && status["restarts"].is_number_integer()
             ? status["restarts"].get<int64_t>()
             : 0;
}

int64_t resizes_of(const json& status) {
  return status.contains("resizes") && status["resizes"].is_number_integer()
             ? status["resizes"].get<int64_t>()
             : 0;
}

int64_t attempt_of(const json& status) { return restarts_of(status) + resizes_of(status); }

int width_of(const json& status, const api::TrainingJob& job) {
  const std::vector<int> widths = job.spec.usable_widths();
  if (status.contains("replicas") && status["replicas"].is_number_integer()) {
    const int64_t width = status["replicas"].get<int64_t>();
    if (std::find(widths.begin(), widths.end(), width) != widths.end())
      return static_cast<int>(width);
  }
  return job.spec.parallelism.replicas;
}

api::TrainingJob at_width(const api::TrainingJob& job, int width) {
  api::TrainingJob narrowed = job;
  narrowed.spec.parallelism.replicas = width;
  return narrowed;
}

json live_exclusions(const json& status, Clock::time_point now) {
  json out = json::array();
  for (const json& e : status.value("excludedNodes", json::array())) {
    const auto expires = parse_rfc3339(e.value("expiresAt", ""));
    if (expires && *expires > now) out.push_back(e);
  }
  return out;
}

std::set<NodeRef> excluded_set(const json& exclusions) {
  std::set<NodeRef> out;
  for (const json& e : exclusions) out.insert({e.value("cluster", ""), e.value("node", "")});
  return out;
}

int free_gpus(const std::vector<GpuNode>& nodes) {
  int free = 0;
  for (const GpuNode& n : nodes) free += n.free_gpus;
  return free;
}

std::string phase_of(const json& status) {
  return status.contains("phase") && status["phase"].is_string()
             ? status["phase"].get<std::string>()
             : "";
}

}  // namespace tessel::controller::trainingjob
