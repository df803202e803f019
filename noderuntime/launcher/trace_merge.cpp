#include "noderuntime/launcher/trace_merge.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "placement/atomic_file.h"

namespace tessel::launcher {

TraceMergeResult merge_traces(const std::vector<std::string>& rank_files,
                              const std::string& output) {
  TraceMergeResult result;
  nlohmann::json events = nlohmann::json::array();
  double earliest = std::numeric_limits<double>::infinity();
  for (const std::string& path : rank_files) {
    if (!std::filesystem::exists(path)) {
      result.missing.push_back(path);
      continue;
    }
    std::ifstream in(path);
    nlohmann::json trace;
    try {
      trace = nlohmann::json::parse(in);
      for (nlohmann::json& event : trace.at("traceEvents")) {
        if (event.contains("ts")) earliest = std::min(earliest, event.at("ts").get<double>());
        events.push_back(std::move(event));
      }
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(path + ": not a Chrome trace: " + e.what());
    }
    ++result.merged;
  }
  for (nlohmann::json& event : events) {
    if (event.contains("ts")) event["ts"] = event["ts"].get<double>() - earliest;
  }
  placement::write_file_atomically(
      output,
      nlohmann::json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}}.dump() + "\n");
  return result;
}

}  // namespace tessel::launcher
