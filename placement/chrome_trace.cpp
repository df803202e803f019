#include "placement/chrome_trace.h"

#include <fstream>
#include <set>
#include <stdexcept>
#include <utility>

#include "placement/atomic_file.h"

namespace tessel::placement {

namespace {

int thread_id(Stream stream) { return static_cast<int>(stream) + 1; }

nlohmann::json metadata(const char* name, int pid, int tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

nlohmann::json chrome_trace_json(const SimulationResult& result) {
  nlohmann::json events = nlohmann::json::array();
  const int ranks = static_cast<int>(result.compute_busy_s.size());
  for (int rank = 0; rank < ranks; ++rank) {
    events.push_back(
        metadata("process_name", rank, 0, {{"name", "stage " + std::to_string(rank)}}));
    events.push_back(metadata("process_sort_index", rank, 0, {{"sort_index", rank}}));
  }
  std::set<std::pair<int, Stream>> threads;
  for (const TimedEvent& event : result.events) threads.insert({event.rank, event.stream});
  for (const auto& [rank, stream] : threads) {
    events.push_back(
        metadata("thread_name", rank, thread_id(stream), {{"name", stream_name(stream)}}));
  }
  constexpr double kMicroseconds = 1e6;
  for (const TimedEvent& event : result.events) {
    events.push_back({{"name", event.name},
                      {"cat", stream_name(event.stream)},
                      {"ph", "X"},
                      {"pid", event.rank},
                      {"tid", thread_id(event.stream)},
                      {"ts", event.start_s * kMicroseconds},
                      {"dur", event.duration_s * kMicroseconds}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const SimulationResult& result, const std::string& path) {
  write_file_atomically(path, chrome_trace_json(result).dump() + "\n");
}

}  // namespace tessel::placement
