#include "noderuntime/stage/step_trace.h"

#include <chrono>
#include <fstream>
#include <set>
#include <stdexcept>

#include "placement/atomic_file.h"

namespace tessel::stage {

double StepTrace::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

size_t StepTrace::open(placement::Stream stream, std::string name) {
  events_.push_back({stream, std::move(name), now_s(), -1});
  return events_.size() - 1;
}

void StepTrace::close(size_t id) { events_.at(id).end_s = now_s(); }

void StepTrace::add(placement::Stream stream, std::string name, double start_s, double end_s) {
  events_.push_back({stream, std::move(name), start_s, end_s});
}

nlohmann::json StepTrace::chrome_json(const std::vector<const StepTrace*>& ranks) {
  constexpr double kMicroseconds = 1e6;
  auto metadata = [](const char* name, int pid, int tid, nlohmann::json args) {
    return nlohmann::json{
        {"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
  };
  nlohmann::json events = nlohmann::json::array();
  for (const StepTrace* trace : ranks) {
    const int pid = trace->rank_;
    events.push_back(metadata("process_name", pid, 0,
                              {{"name", trace->label_ + " (rank " + std::to_string(pid) + ")"}}));
    events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
    std::set<placement::Stream> streams;
    for (const TraceEvent& e : trace->events_) streams.insert(e.stream);
    for (placement::Stream s : streams) {
      events.push_back(metadata("thread_name", pid, static_cast<int>(s) + 1,
                                {{"name", placement::stream_name(s)}}));
    }
    for (const TraceEvent& e : trace->events_) {
      if (e.end_s < 0) continue;  // never seen to complete (the run failed)
      events.push_back({{"name", e.name},
                        {"cat", placement::stream_name(e.stream)},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", static_cast<int>(e.stream) + 1},
                        {"ts", e.start_s * kMicroseconds},
                        {"dur", (e.end_s - e.start_s) * kMicroseconds}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

void StepTrace::write(const std::vector<const StepTrace*>& ranks, const std::string& path) {
  placement::write_file_atomically(path, chrome_json(ranks).dump() + "\n");
}

}  // namespace tessel::stage
